"""Edge benchmarks: what a user feels, measured through public interfaces only.

Every figure comes from a process started as a user starts it (``horologe node
--config``; Debian's ``redis-server``), through the HTTP API/SDK or the Redis
protocol, timed where the user feels it: when a consumer *receives* a message, a
process's RSS. Each workload runs on both systems in the same run, and the report
gives Horologe ÷ peer.
"""
