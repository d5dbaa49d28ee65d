"""Hypothesis model test: the store against a plain dict of lists."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from horologe.storage import SKIPPED, Storage, StorageConfig, check_store

from .helpers import H0, msg

# deliver times spread over 6 hours and a few seconds, with hot seconds likely
deliver_at = st.builds(
    lambda h, s, ms: H0 + h * 3_600_000 + s * 1000 + ms,
    st.integers(0, 5),
    st.sampled_from([0, 1, 2, 59, 3599]),
    st.integers(0, 999),
)


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="hz-model-")
        # few open hours, so eviction and reloading of heads is exercised too; few key
        # buckets, so keys share chains (and check_store reads 16 KiB of heads, not 32 MiB)
        self.cfg = StorageConfig(fsync=False, max_open_hours=1, max_cached_hours=2, key_buckets=1 << 10)
        self.store = Storage(self.dir, self.cfg)
        self.ri = 0
        self.seconds: dict[tuple[int, int], list] = {}  # (hour, sec) -> ids, arrival order
        self.bodies: dict = {}
        self.cancelled: set = set()
        self.by_key: dict = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(times=st.lists(deliver_at, min_size=1, max_size=30), keyed=st.booleans(), data=st.data())
    def append(self, times, keyed, data) -> None:
        keys = [data.draw(st.sampled_from(["k1", "k2", "k3", None])) if keyed else None for _ in times]
        batch = [
            msg(t, body=f"{self.ri}-{i}".encode(), key=k)
            for i, (t, k) in enumerate(zip(times, keys, strict=True))
        ]
        self.ri += 1
        ids = self.store.apply(self.ri, lambda tx: tx.append(batch))
        for m, mid in zip(batch, ids, strict=True):
            if m.key is not None and m.key in self.by_key:
                assert mid == self.by_key[m.key]
                continue
            if m.key is not None:
                self.by_key[m.key] = mid
            sec = (m.deliver_at_ms - mid.hour * 3_600_000) // 1000
            self.seconds.setdefault((mid.hour, sec), []).append(mid)
            self.bodies[mid] = m.body

    @precondition(lambda self: self.bodies)
    @rule(data=st.data())
    def cancel(self, data) -> None:
        mid = data.draw(st.sampled_from(sorted(self.bodies)))
        self.ri += 1
        fresh = self.store.apply(self.ri, lambda tx: tx.cancel(mid))
        assert fresh == (mid not in self.cancelled)
        self.cancelled.add(mid)

    @rule()
    def replay_is_noop(self) -> None:
        if self.ri:
            assert self.store.apply(self.ri, lambda tx: tx.append([msg(H0)])) is SKIPPED

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = Storage(self.dir, self.cfg)
        assert self.store.recovered == []

    @invariant()
    def chains_match_model(self) -> None:
        for (hour, sec), ids in self.seconds.items():
            assert [int(g) for g in self.store.bucket(hour).chain(sec)] == [m.global_index for m in ids]

    @invariant()
    def contents_match_model(self) -> None:
        for mid, body in self.bodies.items():
            assert self.store.read_message(mid).message.body == body
            assert self.store.is_cancelled(mid) == (mid in self.cancelled)
        for key, mid in self.by_key.items():
            assert self.store.lookup_key("orders", key) == mid
        assert self.store.hours() == sorted({h for h, _ in self.seconds})

    @invariant()
    def checks(self) -> None:
        report = check_store(self.store)
        assert report.messages == len(self.bodies)
        assert report.cancelled == len(self.cancelled)


TestStoreModel = StoreModel.TestCase
TestStoreModel.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
