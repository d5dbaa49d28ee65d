"""A deterministic simulator of a Horologe cluster (docs/simulator.md): the real Raft shell,
state machine and store of 3 or 5 nodes in one process, on virtual time, under seeded faults.

Not part of the installed package (pyproject's package list), like testkit/ and chaos_tests/.
"""
