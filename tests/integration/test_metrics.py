"""/metrics on a live cluster: promtool accepts it, lint included, and the series say what happened."""

from __future__ import annotations

import shutil
import subprocess
import time

from prometheus_client.parser import text_string_to_metric_families

from horologe.client import Client
from testkit.process_cluster import CLIENT

NO_RETRIES = "retry_levels_ms = []\n"  # a nack goes straight to the DLQ


def scrape(cluster, i: int) -> tuple[str, dict[tuple[str, tuple], float]]:
    """Node i's /metrics text, and each sample by (name, sorted labels)."""
    text = cluster.http.get(f"{cluster.url(i)}/metrics").text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    return text, samples


def promtool_check(text: str) -> subprocess.CompletedProcess:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: make deb-tools installs Debian's prometheus"
    return subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)


def test_metrics_pass_promtool_and_count_what_happened(make_cluster):
    cluster = make_cluster(extra_toml=NO_RETRIES)
    master = cluster.wait_leader()
    follower = next(i for i in cluster.indexes if i != master)
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    for k in range(5):
        c.produce("now", f"n{k}", deliver_after="300ms")  # the wheel delivers them (ready lateness)
    later = c.produce_batch([{"topic": "later", "body": f"l{k}", "deliver_after": "1h"} for k in range(3)])
    c.cancel(later[0].id)
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        got += c.pull("now", "g", max=10, wait_ms=500)
    assert len(got) == 5
    c.ack("now", "g", [m.receipt for m in got[:3]])
    assert c.nack("now", "g", [got[3].receipt]) == {"retried": 0, "dead_lettered": 1}
    # got[4] stays leased and unacked
    cluster.catch_up(follower, behind=0)

    for i in (master, follower):
        text, s = scrape(cluster, i)
        check = promtool_check(text)
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), check
        assert s[("horologe_term", ())] >= 1
        assert s[("horologe_applied_index", ())] > 0
        assert s[("horologe_commit_index", ())] >= s[("horologe_applied_index", ())] - 2
        assert s[("horologe_is_master", ())] == (1 if i == master else 0)
        assert s[("horologe_halted", ())] == 0
        assert s[("horologe_leader_changes_total", ())] >= 1
        assert ("horologe_raft_stale_answers_total", ()) in s  # counted in test_follower_answers
        for outcome in ("served", "redirected", "refused"):  # counted in test_master_hold
            assert ("horologe_requests_held_total", (("outcome", outcome),)) in s
        assert s[("horologe_apply_seconds_count", ())] > 0
        assert s[("horologe_pending", ())] == 2
        assert s[("horologe_pending_by_topic", (("topic", "later"),))] == 2
        assert s[("horologe_pending_by_topic", (("topic", "now"),))] == 0
        assert s[("horologe_dlq_messages", (("group", "g"),))] == 1
        assert s[("horologe_ready_unacked", (("group", "g"),))] == 1
        assert s[("process_resident_memory_bytes", ())] > 0
        assert s[("horologe_ready_lateness_seconds_count", ())] >= 5  # every node applies the deliveries
        assert s[("horologe_journal_fsync_seconds_count", ())] > 0
        due = {w: s[("horologe_pending_due", (("within", w),))] for w in ("1m", "1h", "1d")}
        assert due == {"1m": 0, "1h": 2, "1d": 2}  # the "later" ones, due 1 h after they were produced
        assert ("horologe_loop_lag_p99_seconds", ()) in s and ("horologe_clock_offset_seconds", ()) in s

    _, s = scrape(cluster, master)
    assert s[("horologe_produce_seconds_count", ())] >= 6  # five single produces and one batch
    assert s[("horologe_handout_lateness_seconds_count", ())] >= 5
    assert s[("horologe_handout_lateness_seconds_bucket", (("le", "+Inf"),))] >= 5


def _young_collections(cluster, i: int) -> float:
    return scrape(cluster, i)[1][("horologe_gc_pause_seconds_count", (("generation", "0"),))]


def test_a_load_of_20k_messages_sets_off_few_collections(make_cluster):
    """Each node collects its young generation after 10,000 new container objects, not
    Python's 700 (node/main.py): a batch's messages are mostly freed before a collection
    comes. At 700 the master ran about 8 young collections per batch of 1,000."""
    cluster = make_cluster()
    master = cluster.wait_leader()
    c = Client([cluster.url(i) for i in cluster.indexes], CLIENT, retry_s=20)
    before = {i: _young_collections(cluster, i) for i in cluster.indexes}
    for b in range(20):
        c.produce_batch([{"topic": "t", "body": f"{b}-{k}", "deliver_after": "1h"} for k in range(1000)])
    ran = {i: _young_collections(cluster, i) - before[i] for i in cluster.indexes}
    print("young collections while loading 20,000:", ran)
    assert ran[master] <= 40, ran
    _, s = scrape(cluster, master)
    # the full collection at startup, before the freeze
    assert s[("horologe_gc_pause_seconds_count", (("generation", "2"),))] >= 1
