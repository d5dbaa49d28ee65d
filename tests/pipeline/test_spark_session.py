"""The JVM that ``spark schedule`` starts gets the light JIT; the audit's does not.

Each session runs in a process of its own: one process holds one JVM, whose options are
fixed when it starts (the suite's shared session has none)."""

from __future__ import annotations

import subprocess
import sys

import pytest

ASK_THE_JVM = """
import sys
from horologe.pipeline.schedule import schedule_session
from horologe.pipeline.spark_session import spark_session
spark = schedule_session("local[1]") if sys.argv[1] == "schedule" else spark_session("local[1]", "audit")
print("\\n".join(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()))
spark.stop()
"""


@pytest.mark.parametrize("job, light", [("schedule", True), ("audit", False)])
def test_the_jvm_runs_with_the_options_its_job_needs(job, light):
    out = subprocess.run(
        [sys.executable, "-c", ASK_THE_JVM, job], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split("\n")
    assert "-Dlog4j2.level=ERROR" in out
    assert ("-XX:TieredStopAtLevel=1" in out) is light
    assert ("-XX:+UseSerialGC" in out) is light


FAIL_ONCE = """
import os, sys
from horologe.pipeline.schedule import schedule_session
spark = schedule_session()
def once(x, marker=sys.argv[1]):
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("a task's first try fails")
    return x
print(spark.sparkContext.parallelize([7], 1).map(once).collect())
spark.stop()
"""


def test_a_schedule_task_that_fails_once_is_run_again(tmp_path):
    """``spark schedule`` runs local[*] by default, where a task's first failure (a node's
    500, the posting's retries run out) failed the whole job; its posting is idempotent."""
    out = subprocess.run(
        [sys.executable, "-c", FAIL_ONCE, str(tmp_path / "tried")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[7]"
