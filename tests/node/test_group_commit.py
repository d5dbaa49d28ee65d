"""Group commit: proposed at once when idle, batched while a proposal is in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from horologe.node.group_commit import GroupCommit


def _held_commits() -> tuple[list[list[int]], asyncio.Event, Callable]:
    """A commit that records each proposal and holds it in flight until ``release`` is set."""
    proposals: list[list[int]] = []
    release = asyncio.Event()

    async def commit(items: list[int]) -> str:
        proposals.append(list(items))
        await release.wait()
        return f"entry {len(proposals)}"

    return proposals, release, commit


def test_idle_calls_go_at_once_and_calls_in_flight_share_the_next_proposal():
    proposals, release, commit = _held_commits()  # the first proposal stays in flight

    async def run() -> None:
        gc = GroupCommit(commit, window_ms=0, size_of=len)
        task = asyncio.create_task(gc.run())
        first = asyncio.create_task(gc.submit([1]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert proposals == [[1]]  # proposed without waiting for a window
        later = [asyncio.create_task(gc.submit([n, n])) for n in (2, 3, 4)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert proposals == [[1]]  # they wait for the one in flight
        release.set()
        assert await first == ("entry 1", 0)
        results = await asyncio.gather(*later)
        assert proposals == [[1], [2, 2, 3, 3, 4, 4]]  # one proposal for all three
        assert results == [("entry 2", 0), ("entry 2", 2), ("entry 2", 4)]
        task.cancel()

    asyncio.run(run())


def test_a_proposal_never_grows_past_max_entry_bytes():
    from horologe.node.group_commit import MAX_ENTRY_BYTES

    sizes: list[int] = []
    release = asyncio.Event()

    async def commit(items: list[int]) -> None:
        sizes.append(sum(items))
        if len(sizes) == 1:
            await release.wait()

    async def run() -> None:
        gc = GroupCommit(commit, window_ms=0, size_of=sum)
        task = asyncio.create_task(gc.run())
        first = asyncio.create_task(gc.submit([10]))
        await asyncio.sleep(0)
        part = int(MAX_ENTRY_BYTES * 0.9)
        parts = [asyncio.create_task(gc.submit([part])) for _ in range(3)]  # queued meanwhile
        for _ in range(5):
            await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, *parts)
        assert sizes == [10, part, part, part]  # one part per proposal: two would pass the cap
        assert max(sizes) <= MAX_ENTRY_BYTES
        task.cancel()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (600, {f"h{k}": "\u9577" * 60 for k in range(4)}),  # headers past ASCII: 3 bytes a character
        (800, {f"{k:02}": "v" for k in range(32)}),  # many small headers: their framing
    ],
)
def test_every_part_of_a_batch_encodes_under_the_entry_cap(body, headers):
    """A batch whose items are each within the documented limits was estimated under the
    cap and encoded over it: the master refused it 413, after the parts before it had
    committed."""
    from horologe.cluster import PRODUCE, Entry
    from horologe.node.group_commit import MAX_ENTRY_BYTES
    from horologe.node.service import _entry_parts
    from horologe.storage import Message, MessageColumns
    from horologe.wheel import Watermark

    messages = [Message("t", b"x" * body, 1_000 + k, 0, key=f"k{k}", headers=headers) for k in range(1000)]
    for part, _size in _entry_parts(MessageColumns.from_messages(messages)):
        assert len(Entry(PRODUCE, Watermark(0), 0, messages=part).encode()) <= MAX_ENTRY_BYTES


def test_a_big_batch_goes_in_parts_under_the_cap_and_columns_combine_in_order():
    from horologe.node.group_commit import MAX_ENTRY_BYTES
    from horologe.node.service import _entry_parts
    from horologe.storage import Message, MessageColumns

    body = b"x" * (200 * 1024)
    messages = [Message("t", body, 1_000 + k, 0, key=f"k{k}") for k in range(12)]
    cols = MessageColumns.from_messages(messages)
    parts = _entry_parts(cols)
    assert len(parts) > 1 and all(size <= MAX_ENTRY_BYTES for _, size in parts)
    assert [size for _, size in parts] == [int(p.wire_sizes().sum()) for p, _ in parts]
    joined = MessageColumns.concat([p for p, _ in parts])
    assert [joined.message(i) for i in range(len(joined))] == messages

    proposals: list[MessageColumns] = []
    release = asyncio.Event()

    async def commit(items: MessageColumns) -> str:
        proposals.append(items)
        if len(proposals) == 1:
            await release.wait()
        return f"entry {len(proposals)}"

    async def run() -> list:
        gc = GroupCommit(commit, window_ms=0, size_of=len, combine=MessageColumns.concat)
        task = asyncio.create_task(gc.run())
        first = asyncio.create_task(gc.submit(cols.part(0, 1), 10))
        await asyncio.sleep(0)
        later = [asyncio.create_task(gc.submit(cols.part(k, k + 2), 10)) for k in (1, 3, 5)]
        for _ in range(5):
            await asyncio.sleep(0)
        release.set()
        results = await asyncio.gather(first, *later)
        task.cancel()
        return results

    results = asyncio.run(run())
    assert results == [("entry 1", 0), ("entry 2", 0), ("entry 2", 2), ("entry 2", 4)]
    assert [proposals[1].message(i) for i in range(6)] == messages[1:7]


def test_fail_waiting_fails_what_is_queued_and_lets_the_proposal_in_flight_go_on():
    """A master that stops leading: what its pulls queued under that lead is never proposed."""
    proposals, release, commit = _held_commits()

    async def run() -> None:
        gc = GroupCommit(commit, window_ms=0, size_of=len)
        task = asyncio.create_task(gc.run())
        in_flight = asyncio.create_task(gc.submit([1]))
        for _ in range(5):
            await asyncio.sleep(0)
        queued = [asyncio.create_task(gc.submit([n])) for n in (2, 3)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert gc.fail_waiting(RuntimeError("no longer master")) == 2
        release.set()
        assert await in_flight == ("entry 1", 0)
        for q in queued:
            with pytest.raises(RuntimeError, match="no longer master"):
                await q
        after = await gc.submit([4])  # the committer goes on
        assert proposals == [[1], [4]] and after == ("entry 2", 0)
        task.cancel()

    asyncio.run(run())
