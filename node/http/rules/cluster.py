"""The body of a change of the cluster's membership (``POST /admin/cluster/members``)."""

from __future__ import annotations

import functools
from typing import Annotated

from msgspec import Meta

from .messages import answered_over_http
from .model import Body, decode, matching

# A DNS name or an IPv4 address, or an IPv6 one in brackets, then a port. Spelled out
# rather than "no space": JSON Schema's \s (ECMA-262) and Python's differ (\x1c-\x1f).
HOST_PORT = r"(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}"
NODE_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


class NewMember(Body):
    """A node to add: started first with `join = true` and the members as its peers."""

    node_id: Annotated[
        str,
        matching(
            NODE_ID,
            description="the new node's id as its config names it, unused by any member: 1-64 of "
            "A-Z a-z 0-9 . _ -, the first a letter or digit",
        ),
    ]
    raft: Annotated[str, matching(HOST_PORT, description="its Raft address, host:port: its identity")]
    http: Annotated[
        str, matching(HOST_PORT, description="its HTTP address, host:port, as the members reach it")
    ]
    catch_up_s: Annotated[
        float,
        Meta(gt=0, le=86_400, description="how long it may take to catch up before the add is given up (s)"),
    ] = 600.0


parse_new_member = answered_over_http(functools.partial(decode, NewMember))
