"""64-bit Bloom signatures of tags (docs/storage.md, delay index entry): a message stores the OR of its tags'.

Each tag sets ``BITS_PER_TAG`` bits chosen from its xxh64 hash (stable across
processes and machines, unlike Python's ``hash()``). A subscribed tag *may* be on
a message when ``sig & tag_sig == tag_sig``; a miss is certain, a hit is checked
exactly by the server and once more by the client.
"""

from __future__ import annotations

from collections.abc import Iterable

import xxhash

BITS_PER_TAG = 3


def tag_signature(tag: str) -> int:
    h = xxhash.xxh64_intdigest(tag.encode())
    sig = 0
    for i in range(BITS_PER_TAG):
        sig |= 1 << ((h >> (6 * i)) & 63)
    return sig


def tags_signature(tags: Iterable[str]) -> int:
    sig = 0
    for tag in tags:
        sig |= tag_signature(tag)
    return sig


def may_match(message_sig: int, wanted_sig: int) -> bool:
    return message_sig & wanted_sig == wanted_sig
