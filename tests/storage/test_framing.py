"""What a scan past damage finds (``frames_past``) and what damage a power cut leaves
(``lost_write``): storage/framing.py."""

from __future__ import annotations

import random

from horologe.storage.framing import SECTOR, frame, frames_past, lost_write


def test_frames_past_damage_are_found_wherever_they_begin():
    rng = random.Random(7)
    payloads = [rng.randbytes(rng.randrange(1, 300)) for _ in range(40)]
    junk = rng.randbytes(1000) + bytes(333)
    buf = junk + b"".join(frame(p) for p in payloads)
    found = frames_past(buf, 0)
    assert [p for _, p in found] == payloads
    assert found[0][0] == len(junk)


def test_frames_past_skips_what_lies_inside_a_frame_found():
    inner = frame(b"inside")
    buf = frame(b"outer " + inner + b" end") + frame(b"next")
    assert [p for _, p in frames_past(buf, 0)] == [b"outer " + inner + b" end", b"next"]


def test_frames_past_finds_nothing_in_junk():
    assert frames_past(random.Random(3).randbytes(100_000), 0) == []
    assert frames_past(bytes(50), 0) == []


def test_what_a_lost_write_leaves_and_what_it_does_not():
    good = frame(b"x" * 100)
    assert lost_write(bytes(12) + good, 0)  # a zero length: a sector never written
    torn = bytearray(good)
    torn[-4:] = bytes(4)  # the tail's length lies in a sector left as zeros
    assert lost_write(bytes(torn) + good, 0)
    flipped = bytearray(good)
    flipped[20] ^= 0x01  # lengths agree, no sector empty: bit rot, not a lost write
    assert not lost_write(bytes(flipped) + good, 0)
    big = bytearray(frame(b"y" * 3 * SECTOR))
    big[SECTOR : 2 * SECTOR] = bytes(SECTOR)  # a whole sector inside it never written
    assert lost_write(bytes(big) + good, 0)


def test_a_lost_sector_is_the_file_s_not_the_buffer_s():
    """A buffer read from the middle of a file: the sectors are counted from the file's start."""
    big = bytearray(frame(b"y" * 3 * SECTOR))
    big[SECTOR - 100 : 2 * SECTOR - 100] = bytes(SECTOR)  # the file's sector 1, if big starts at 100
    assert lost_write(bytes(big), 0, file_at=100)
    assert not lost_write(bytes(big), 0)  # from the start of a file, no whole sector of it is empty
