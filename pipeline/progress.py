"""Progress of a running Spark job group, polled from its status tracker on a thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager


@contextmanager
def job_progress(sc, group: str, on_progress: Callable[[int, int], None] | None, every_s: float = 0.5):
    """Run the body as job group ``group``; call ``on_progress(done_tasks, total_tasks)`` meanwhile:
    the tasks of every stage of the group's jobs so far (a job planned later adds its own)."""
    sc.setJobGroup(group, group)
    stop = threading.Event()

    def poll() -> None:
        tracker = sc.statusTracker()
        while not stop.wait(every_s):
            done = total = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            if total:
                on_progress(done, total)

    thread = threading.Thread(target=poll, daemon=True) if on_progress else None
    if thread:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if thread:
            thread.join()
        sc.setJobGroup(None, None)
