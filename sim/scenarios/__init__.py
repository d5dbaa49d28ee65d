"""The scripted scenarios (sim/scripted.py), by name: ``python -m sim replay SEED --scenario NAME``."""

from __future__ import annotations

from ..scripted import Scenario
from . import (
    ack_before_noop,
    answer_after_handover,
    crash_before_fsync,
    cut_from_the_leader,
    fsync_fails,
    grow_and_replace,
    late_answer,
    noop_dump_restart,
    power_after_ack,
    power_in_install,
    rejoin_after_compaction,
    restore_a_spare,
    rot_in_journal,
    slow_start_alone,
    stalled_machine,
    step_back,
    two_changes,
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        late_answer.SCENARIO,
        noop_dump_restart.SCENARIO,
        rejoin_after_compaction.SCENARIO,
        grow_and_replace.SCENARIO,
        two_changes.SCENARIO,
        power_after_ack.SCENARIO,
        power_in_install.SCENARIO,
        fsync_fails.SCENARIO,
        crash_before_fsync.SCENARIO,
        ack_before_noop.SCENARIO,
        answer_after_handover.SCENARIO,
        answer_after_handover.LONG_SILENCE,
        step_back.SCENARIO,
        rot_in_journal.SCENARIO,
        cut_from_the_leader.SCENARIO,
        stalled_machine.SCENARIO,
        restore_a_spare.SCENARIO,
        slow_start_alone.SCENARIO,
    )
}
