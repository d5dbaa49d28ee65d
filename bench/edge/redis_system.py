"""The peer: a Redis sorted-set delay queue, as most users would build one themselves.

Debian's ``redis-server``: a primary and one replica on 127.0.0.1, ``appendonly yes``,
``appendfsync everysec`` (the peer most users run: an acked write may be lost with a
power cut), or ``appendfsync always`` for the durable peer (``fsync="always"``: every
write is fsynced on each server before it answers, as Horologe fsyncs on a majority before
it acks). Producers pipeline ``HSET`` + ``ZADD`` (score: deliver time
in ms) and ``WAIT 1 100`` per batch, so a batch counts as acked once the replica has
it; a rescheduler pipelines ``ZADD XX`` (a new score for a member that exists) and
``WAIT 1 100`` the same way. Consumers pop due messages with one Lua script (``ZRANGEBYSCORE … LIMIT``,
``ZREM``, ``HMGET``, ``HDEL``) and, when nothing is due, either sleep until the next
score (``mode="sleep"``, at most 100 ms so new arrivals are seen) or poll every 10 ms
(``mode="poll"``).
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import subprocess
import time

import redis

from testkit.process_cluster import free_ports

from .procs import memory_kb

ZSET, BODIES = "dq", "dq:body"
POP_LIMIT = 1000
POP_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, ARGV[2])
if #due == 0 then
  local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #nxt == 0 then return {0, -1} end
  return {0, nxt[2]}
end
local ids, scores = {}, {}
for i = 1, #due, 2 do ids[#ids + 1] = due[i]; scores[#scores + 1] = due[i + 1] end
redis.call('ZREM', KEYS[1], unpack(ids))
local bodies = redis.call('HMGET', KEYS[2], unpack(ids))
redis.call('HDEL', KEYS[2], unpack(ids))
return {1, scores, bodies}
"""
# The same, also handing over the members popped: for workloads that check which arrived.
POP_DUE_IDS = POP_DUE.replace("return {1, scores, bodies}", "return {1, scores, bodies, ids}")


class RedisSystem:
    name = "redis"

    def __init__(self, root: str, mode: str = "sleep", fsync: str = "everysec") -> None:
        self.root = root
        self.mode = mode
        self.fsync = fsync
        if fsync != "everysec":
            self.name = f"redis (appendfsync {fsync})"
        self.procs: list[subprocess.Popen] = []
        self._ids = itertools.count()

    def start(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.ports = free_ports(2)
        self.port = self.ports[0]
        self._launch()

    def _launch(self, from_rdb: bool = False) -> None:
        """Start the primary and the replica on the data they have, until they are linked.
        ``from_rdb``: the primary loads its ``dump.rdb`` (with ``appendonly yes`` and no
        AOF, Redis would start empty), then turns the AOF on, which rewrites it from the
        data loaded, as Redis's documentation has an operator restore an RDB."""
        primary, replica = self.ports
        for role, port in (("primary", primary), ("replica", replica)):
            d = os.path.join(self.root, role)
            os.makedirs(d, exist_ok=True)
            args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d]
            args += [
                "--appendonly",
                "no" if from_rdb and role == "primary" else "yes",
                "--appendfsync",
                self.fsync,
                "--save",
                "",
                "--protected-mode",
                "no",
                "--repl-diskless-sync-delay",  # Redis waits 5 s for more replicas by default
                "0",
            ]
            if role == "replica":
                args += ["--replicaof", "127.0.0.1", str(primary)]
            log = open(os.path.join(self.root, f"{role}.log"), "ab")  # noqa: SIM115 - lives with the process
            self.procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
        link = redis.Redis(port=replica)
        deadline = time.monotonic() + 600  # a restarted replica resyncs the whole set
        while time.monotonic() < deadline:
            try:
                if link.info("replication").get("master_link_status") == "up":
                    break
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            time.sleep(0.05)
        else:
            raise RuntimeError("the Redis replica did not link to its primary")
        if from_rdb:
            primary_link = redis.Redis(port=primary)
            primary_link.config_set("appendonly", "yes")
            while True:
                info = primary_link.info("persistence")
                if (
                    info["aof_enabled"]
                    and not info["aof_rewrite_in_progress"]
                    and not info["aof_rewrite_scheduled"]
                ):
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("the Redis primary did not finish writing its AOF")
                time.sleep(0.05)

    def restart(self) -> None:
        """Stop both servers (SIGTERM) and start them again on their data."""
        self._terminate()
        self._launch()

    def _terminate(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:  # seen with an AOF rewrite under way on the replica
                p.kill()
                p.wait()
        self.procs = []

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.root, ignore_errors=True)

    def backup(self, dest: str) -> int:
        """``redis-cli --rdb`` from the replica (a snapshot through the replication
        protocol: the server forks and writes an RDB) into the new folder ``dest``; its bytes."""
        os.makedirs(dest)
        rdb = os.path.join(dest, "dump.rdb")
        args = ["redis-cli", "-p", str(self.ports[1]), "--rdb", rdb]
        subprocess.run(args, check=True, capture_output=True, timeout=1800)
        return os.path.getsize(rdb)

    def restore(self, src: str) -> None:
        """Stop both servers, replace their data with the RDB in ``src`` (the primary loads
        it and writes a new AOF from it; the replica resyncs from the primary), start them."""
        self._terminate()
        for role in ("primary", "replica"):
            shutil.rmtree(os.path.join(self.root, role))
        os.makedirs(os.path.join(self.root, "primary"))
        shutil.copyfile(os.path.join(src, "dump.rdb"), os.path.join(self.root, "primary", "dump.rdb"))
        self._launch(from_rdb=True)

    def server_pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in zip(("primary", "replica"), self.procs, strict=True)}

    def memory(self) -> dict[str, tuple[int, int]]:
        return {name: memory_kb(pid) for name, pid in self.server_pids().items()}

    def forecast(self, start_ms: int, bucket_ms: int, buckets: int) -> list[int]:
        """Pending per bucket: one ZCOUNT per bucket, in one pipeline."""
        pipe = self._forecaster.pipeline(transaction=False)
        for k in range(buckets):
            lo = start_ms + k * bucket_ms
            pipe.zcount(ZSET, lo, f"({lo + bucket_ms}")
        return pipe.execute()

    @functools.cached_property
    def _forecaster(self) -> redis.Redis:
        return redis.Redis(port=self.port)

    def producer(self) -> RedisProducer:
        return RedisProducer(redis.Redis(port=self.port), f"p{next(self._ids)}")

    def consumer(self) -> RedisConsumer:
        return RedisConsumer(redis.Redis(port=self.port), self.mode)

    def rescheduler(self) -> RedisRescheduler:
        return RedisRescheduler(redis.Redis(port=self.port))


def _replicated(conn: redis.Redis, replicas: int) -> bool:
    """Whether the replica has the writes so far: ``replicas`` is what a pipelined
    ``WAIT 1 100`` answered; a busy replica may take longer than 100 ms, and a client that
    needs the copy waits again (up to 50 times), as ours would."""
    for _ in range(50):
        if replicas >= 1:
            return True
        replicas = conn.execute_command("WAIT", 1, 100)
    return False


class RedisProducer:
    def __init__(self, conn: redis.Redis, prefix: str) -> None:
        self.conn = conn
        self.prefix = prefix
        self.seq = itertools.count()

    def batch(self, items: list[tuple[int, bytes]]) -> int:
        """Store ``(deliver_at_ms, body)`` items; the count acked by the replica (0 or all),
        ``WAIT 1 100`` after the batch."""
        return len(items) if self._store(items) else 0

    def batch_ids(self, items: list[tuple[int, bytes]]) -> list[str]:
        """Store ``items``, all of them or raise; their ids (members), in order."""
        mids = self._store(items)
        if not mids:
            raise RuntimeError("the replica did not acknowledge a batch")
        return mids

    def _store(self, items: list[tuple[int, bytes]]) -> list[str]:
        """The members stored, or [] when the replica did not acknowledge them."""
        pipe = self.conn.pipeline(transaction=False)
        mids = [f"{self.prefix}:{next(self.seq)}" for _ in items]
        for mid, (deliver_at, body) in zip(mids, items, strict=True):
            pipe.hset(BODIES, mid, body)
            pipe.zadd(ZSET, {mid: deliver_at})
        pipe.execute_command("WAIT", 1, 100)
        return mids if _replicated(self.conn, pipe.execute()[-1]) else []

    def one(self, item: tuple[int, bytes]) -> None:
        if not self.batch([item]):
            raise RuntimeError("the replica did not acknowledge within 100 ms")


class RedisRescheduler:
    def __init__(self, conn: redis.Redis) -> None:
        self.conn = conn

    def batch(self, moves: list[tuple[str, int]]) -> int:
        """Move each ``(member, deliver_at_ms)`` with ``ZADD XX`` (a member already popped is
        not added again), pipelined, ``WAIT 1 100`` after; the count acked (0 or all)."""
        pipe = self.conn.pipeline(transaction=False)
        for mid, at in moves:
            pipe.zadd(ZSET, {mid: at}, xx=True)
        pipe.execute_command("WAIT", 1, 100)
        return len(moves) if _replicated(self.conn, pipe.execute()[-1]) else 0

    def deliver_at(self, mid: str) -> int | None:
        """The member's score (None once popped)."""
        score = self.conn.zscore(ZSET, mid)
        return None if score is None else int(score)


class RedisConsumer:
    def __init__(self, conn: redis.Redis, mode: str) -> None:
        self.pop = conn.register_script(POP_DUE)
        self.pop_ids = conn.register_script(POP_DUE_IDS)
        self.mode = mode

    def close(self) -> None:
        pass  # a pop takes the message for good: nothing is held

    def receive(self, wait_s: float) -> tuple[float, list[int]]:
        """(when they were popped, in ms; deliver times of the messages popped); waits up to
        ``wait_s`` for some to fall due."""
        at, got = self._pop(self.pop, wait_s)
        return at, [int(float(s)) for s in got[1]] if got else []

    def receive_ids(self, wait_s: float) -> tuple[float, list[tuple[str, int]]]:
        """As :meth:`receive`, with each message's member: (id, deliver_at) pairs."""
        at, got = self._pop(self.pop_ids, wait_s)
        return at, [(m.decode(), int(float(s))) for m, s in zip(got[3], got[1], strict=True)] if got else []

    def _pop(self, script, wait_s: float) -> tuple[float, list | None]:
        """(when popped, in ms; the script's answer, or None when nothing fell due in time)."""
        deadline = time.monotonic() + wait_s
        while True:
            got = script(keys=[ZSET, BODIES], args=[int(time.time() * 1000), POP_LIMIT])
            if got[0] == 1:
                return time.time() * 1000, got
            left = deadline - time.monotonic()
            if left <= 0:
                return time.time() * 1000, None
            pause = 0.01
            if self.mode == "sleep":
                nxt = float(got[1])
                pause = 0.1 if nxt < 0 else min(0.1, max(0.0, nxt / 1000 - time.time()))
            time.sleep(min(pause, left))
