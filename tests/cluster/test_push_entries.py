"""The push subscription entry ``U`` applied by the state machine without Raft: put and
delete answered from what the log holds, the same bytes on every replica, a bad entry
skipped alike everywhere."""

from __future__ import annotations

from dataclasses import replace

from horologe.cluster import Entry, StateMachine, decode
from horologe.cluster.entries import SUBSCRIBE
from horologe.cluster.push_apply import PushOutcome
from horologe.cluster.push_state import MAX_SUBSCRIPTIONS, NAMES_KEY, PushDef, definition, every, names
from horologe.wheel import Watermark

from .entry_log import EntryLog, T, machine
from .same_files import assert_same_files


def hook(group: str = "hooks", topic: str = "orders", **kw) -> PushDef:
    fields = {
        "url": "http://127.0.0.1:9/hook",
        "secret": "s3cret-s3cret-s3cret",
        "timeout_ms": 5000,
        "max_in_flight": 8,
        "rate_per_s": 0,
        "tags": "*",
    }
    return PushDef(topic, group, **{**fields, **kw})


class Log(EntryLog):
    def apply(self, sub: dict):
        self.clock += 1000
        return self.append(SUBSCRIBE, subscription=sub)

    def put(self, d: PushDef) -> PushOutcome:
        res = self.apply({"op": "put", "topic": d.topic, "group": d.group, "def": d.to_wire()})
        assert res.error is None, res.error
        return PushOutcome(res.subscription)

    def delete(self, topic: str, group: str) -> PushOutcome:
        res = self.apply({"op": "delete", "topic": topic, "group": group})
        assert res.error is None, res.error
        return PushOutcome(res.subscription)


def meta(sm: StateMachine):
    return sm.store.meta


def test_put_creates_then_answers_by_what_the_log_holds(tmp_path):
    log = Log(machine(tmp_path))
    assert log.put(hook()) == PushOutcome.CREATED
    held = definition(meta(log.sm), "orders", "hooks")
    assert held.same_request(hook()) and held.incarnation == 1 and held.created_at == T + 1000
    assert log.put(hook()) == PushOutcome.UNCHANGED  # a PUT sent again
    assert definition(meta(log.sm), "orders", "hooks").incarnation == 1
    assert log.put(hook(max_in_flight=2)) == PushOutcome.UPDATED
    changed = definition(meta(log.sm), "orders", "hooks")
    assert changed.max_in_flight == 2 and changed.incarnation == 3
    assert changed.created_at == T + 1000 and changed.updated_at == T + 3000


def test_names_stay_sorted_and_delete_removes_one(tmp_path):
    log = Log(machine(tmp_path))
    log.put(hook("b"))
    log.put(hook("a", topic="zz"))
    log.put(hook("a"))
    assert names(meta(log.sm)) == [("orders", "a"), ("orders", "b"), ("zz", "a")]
    assert log.delete("orders", "b") == PushOutcome.DELETED
    assert [(d.topic, d.group) for d in every(meta(log.sm))] == [("orders", "a"), ("zz", "a")]
    assert definition(meta(log.sm), "orders", "b") is None
    assert log.delete("orders", "b") == PushOutcome.NOT_FOUND


def test_past_the_limit_a_new_subscription_is_refused(tmp_path):
    log = Log(machine(tmp_path))
    taken = [[f"t{i}", "g"] for i in range(MAX_SUBSCRIPTIONS)]
    log.index += 1
    log.sm.store.apply(log.index, lambda tx: tx.set_meta(NAMES_KEY, taken))
    assert log.put(hook()) == PushOutcome.LIMIT
    assert definition(meta(log.sm), "orders", "hooks") is None


def test_entries_round_trip_and_two_nodes_hold_the_same_bytes(tmp_path):
    a = Log(machine(tmp_path / "a"))
    a.put(hook())
    a.put(hook("other", rate_per_s=100))
    a.put(replace(hook(), url="https://hooks.example.com/x"))
    a.delete("orders", "other")
    assert decode(a.blobs[0]).subscription["def"] == hook().to_wire()
    b = machine(tmp_path / "b")
    for i, blob in enumerate(a.blobs, 1):
        assert b.apply(i, blob).error is None
    assert every(meta(b)) == every(meta(a.sm))
    a.sm.store.close()
    b.store.close()
    assert_same_files(tmp_path / "a", tmp_path / "b")


def test_a_bad_subscription_entry_is_skipped_on_every_node(tmp_path):
    sm = machine(tmp_path)
    for i, sub in enumerate(
        [
            {"op": "explode", "topic": "t", "group": "g"},
            {"op": "put", "topic": "t", "group": "g", "def": {"bogus": 1}},
            {"op": "put", "topic": "t", "group": "g", "def": hook().to_wire()},  # defines orders/hooks
            {"op": "delete", "topic": 5, "group": "g"},
        ],
        1,
    ):
        res = sm.apply(i, Entry(SUBSCRIBE, Watermark(T), T, subscription=sub).encode())
        assert res.error is not None and sm.halted is None, sub
    assert names(sm.store.meta) == []
