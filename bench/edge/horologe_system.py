"""Horologe as a user runs it: three (or five) ``horologe node --config`` processes, the SDK.

Nodes start with default settings (fsync on), through testkit's process cluster, which
writes the same config files ``horologe local-cluster`` does. Producers use
``Client.produce_batch``/``produce``; a rescheduler ``Client.reschedule_batch`` and
``status``; a consumer is ``Client.consume`` (long polls run ahead, acks in the
background), and a message counts as received when ``poll`` hands it over.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from horologe.client import Client
from testkit.old_release import UpgradeCluster, install_commit
from testkit.process_cluster import ADMIN, CLIENT, Cluster

from .procs import memory_kb

TOPIC, GROUP = "bench", "g"
PULL_MAX = 1000  # as many as the Redis peer pops at once (POP_LIMIT)


class HorologeSystem:
    name = "horologe"

    def __init__(self, root: str, node_toml: str = "", nodes: int = 3, commit: str = "") -> None:
        """``node_toml``: extra settings for every node's config (a comparison run);
        ``nodes``: how many (3 or 5); ``commit``: run the nodes of that commit of this
        repository (a baseline), laid out apart as an install would, now (a commit the
        clone lacks raises MissingHistoryError); the SDK stays this tree's, since one
        process holds one ``horologe.client``."""
        self.root = root
        self.node_toml = node_toml
        self.nodes = nodes
        # The baseline's packages, laid out once for every workload it runs.
        self.site = install_commit(commit, Path(root + "-site")) if commit else None
        if node_toml:
            self.name = f"horologe [{'; '.join(node_toml.splitlines())}]"
        if nodes != 3:
            self.name = f"horologe [{nodes} nodes]"
        if commit:
            self.name = f"horologe [{commit}]"
        self.cluster: Cluster | None = None

    def start(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.root)
        if self.site is not None:
            self.cluster = UpgradeCluster(self.root, self.site, nodes=self.nodes, extra_toml=self.node_toml)
        else:
            self.cluster = Cluster(self.root, self.nodes, extra_toml=self.node_toml)
        self.cluster.start_all()
        self.cluster.wait_leader()
        self.urls = [self.cluster.url(i) for i in self.cluster.indexes]

    def restart(self) -> None:
        """Stop every node (SIGTERM) and start them again on their data, until linked."""
        self.cluster.stop_all()
        self.cluster.start_all()

    def stop(self) -> None:
        self.cluster.stop_all()
        shutil.rmtree(self.root, ignore_errors=True)

    def backup(self, dest: str) -> int:
        """``horologe backup`` from a follower into the new folder ``dest``; its bytes."""
        master = self.cluster.wait_connected()
        follower = next(i for i in self.cluster.indexes if i != master)
        _horologe("backup", "--url", self.cluster.url(follower), "--admin-token", ADMIN, "--to", dest)
        return _folder_bytes(dest)

    def restore(self, src: str) -> None:
        """Stop every node, then ``horologe restore`` the backup in ``src`` into each node's
        emptied data folder and start the nodes."""
        self.cluster.stop_all()
        for i in self.cluster.indexes:
            data = os.path.join(self.cluster.data_root, f"n{i + 1}")
            shutil.rmtree(data)
            _horologe("restore", src, data)
        self.cluster.start_all()

    def terms(self) -> list[int]:
        """Each node's Raft term (one more per election)."""
        return [self.cluster.status(i)["term"] for i in self.cluster.indexes]

    def server_pids(self) -> dict[str, int]:
        return {f"n{i + 1}": p.pid for i, p in sorted(self.cluster.procs.items())}

    def memory(self) -> dict[str, tuple[int, int]]:
        return {name: memory_kb(pid) for name, pid in self.server_pids().items()}

    def gc_pauses(self) -> tuple[int, float]:
        """(collections longer than 10 ms, seconds paused) summed over the nodes since each
        started, from ``horologe_gc_pause_seconds`` on their ``/metrics``."""
        long_pauses, paused = 0, 0.0
        for url in self.urls:
            with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
                text = r.read().decode()
            for family in text_string_to_metric_families(text):
                if family.name != "horologe_gc_pause_seconds":
                    continue
                for s in family.samples:
                    if s.name.endswith("_count"):
                        long_pauses += int(s.value)
                    elif s.name.endswith("_bucket") and s.labels["le"] == "0.01":
                        long_pauses -= int(s.value)
                    elif s.name.endswith("_sum"):
                        paused += s.value
        return long_pauses, paused

    def forecast(self, start_ms: int, bucket_ms: int, buckets: int) -> list[int]:
        """Pending per bucket through ``GET /v1/forecast`` (bucket_ms: a minute, hour or day)."""
        size = {60_000: "1m", 3_600_000: "1h", 86_400_000: "1d"}[bucket_ms]
        f = self._forecaster.forecast(None, size, start_ms, start_ms + buckets * bucket_ms)
        return [n for _, n in f.buckets]

    @functools.cached_property
    def _forecaster(self) -> Client:
        return self._client()

    def _client(self) -> Client:
        return Client(self.urls, CLIENT, timeout=60, retry_s=30)

    def producer(self) -> HorologeProducer:
        return HorologeProducer(self._client())

    def consumer(self) -> HorologeConsumer:
        return HorologeConsumer(self._client())

    def rescheduler(self) -> HorologeRescheduler:
        return HorologeRescheduler(self._client())


def _horologe(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "horologe", *args], check=True, capture_output=True, timeout=1800)


def _folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _d, files in os.walk(folder) for f in files)


class HorologeProducer:
    def __init__(self, client: Client) -> None:
        self.client = client

    def batch(self, items: list[tuple[int, bytes]]) -> int:
        return sum(1 for r in self._produce(items) if not isinstance(r, Exception))

    def batch_ids(self, items: list[tuple[int, bytes]]) -> list[str]:
        """Store ``items``, all of them or raise; their ids, in order."""
        res = self._produce(items)
        failed = [r for r in res if isinstance(r, Exception)]
        if failed:
            raise RuntimeError(f"{len(failed)} of a batch of {len(items)} not stored: {failed[0]!r}")
        return [r.id for r in res]

    def _produce(self, items: list[tuple[int, bytes]]) -> list:
        return self.client.produce_batch([{"topic": TOPIC, "body": b, "deliver_at": at} for at, b in items])

    def one(self, item: tuple[int, bytes]) -> None:
        self.client.produce(TOPIC, item[1], deliver_at=item[0])


class HorologeConsumer:
    """``Client.consume`` as the SDK offers it: pulls run ahead (long polls, ``prefetch``
    batches) and acks go in the background; a message counts as received when ``poll``
    hands it to the caller."""

    def __init__(self, client: Client) -> None:
        self.subscription = client.consume(TOPIC, GROUP, batch=PULL_MAX, wait_ms=1_000, prefetch=2)

    def receive(self, wait_s: float) -> tuple[float, list[int]]:
        """(when the batch was handed over, in ms; the deliver times it brought)."""
        got = self.subscription.poll(wait_s)
        return time.time() * 1000, [m.deliver_at for m in got]

    def receive_ids(self, wait_s: float) -> tuple[float, list[tuple[str, int]]]:
        """As :meth:`receive`, with each message's id: (id, deliver_at) pairs."""
        got = self.subscription.poll(wait_s)
        return time.time() * 1000, [(m.id, m.deliver_at) for m in got]

    def close(self) -> None:
        self.subscription.close()


class HorologeRescheduler:
    """``Client.reschedule_batch``: one request, one Raft entry, per batch; the ids stay."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def batch(self, moves: list[tuple[str, int]]) -> int:
        """Move each ``(id, deliver_at_ms)``; how many moved (the others were refused)."""
        res = self.client.reschedule_batch([{"id": mid, "deliver_at": at} for mid, at in moves])
        return sum(1 for r in res if not isinstance(r, Exception))

    def deliver_at(self, mid: str) -> int | None:
        """The time ``GET /v1/messages/{id}`` says the message is (or was) due."""
        return self.client.status(mid).deliver_at
