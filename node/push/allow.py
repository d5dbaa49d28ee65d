"""The node config's ``push_allow``: which hosts push subscriptions may send to.

Entries are CIDRs (``127.0.0.1/32``, ``10.0.0.0/8``, ``::1/128``) and host names
(``hooks.example.com``, or ``*.example.com`` for every name below it). A URL's host is
allowed when it is an IP address inside one of the CIDRs, or a name equal to (or, for a
``*.`` entry, below) one of the names. Names are not resolved here: a name is allowed by
name only, so ``localhost`` needs its own entry even with ``127.0.0.1/32`` listed. The list
is empty by default: nothing is pushed until an operator allows it.

Each node checks its own list: the master when a subscription is put, and the push worker
before every send (another node's list may differ after a failover).
"""

from __future__ import annotations

import ipaddress
import re

CONFIG_KEY = "push_allow"
_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
HOST_NAME_RE = re.compile(rf"(?:\*\.)?{_LABEL}(?:\.{_LABEL})*\.?")
MAX_ENTRIES = 1000


class PushAllow:
    def __init__(self, entries: tuple[str, ...] = ()) -> None:
        """``entries`` as :func:`check_entries` accepts them."""
        self.entries = tuple(entries)
        self._networks = []
        self._names: set[str] = set()
        self._suffixes: list[str] = []
        for e in entries:
            try:
                self._networks.append(ipaddress.ip_network(e, strict=False))
                continue
            except ValueError:
                pass
            name = e.lower().rstrip(".")
            if name.startswith("*."):
                self._suffixes.append(name[1:])  # ".example.com"
            else:
                self._names.add(name)

    def allows(self, host: str | None) -> bool:
        """Whether a URL's host (an IP literal, brackets stripped, or a name) may be sent to."""
        if not host:
            return False
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            name = host.lower().rstrip(".")
            return name in self._names or any(name.endswith(s) for s in self._suffixes)
        return any(ip.version == net.version and ip in net for net in self._networks)


def check_entries(value) -> tuple[str, ...]:
    """``push_allow`` from a config: a list of CIDRs and host names; ValueError naming the
    first bad entry."""
    if not isinstance(value, list | tuple) or len(value) > MAX_ENTRIES:
        raise ValueError(f"{CONFIG_KEY} must be a list of at most {MAX_ENTRIES} CIDRs and host names")
    for e in value:
        if not isinstance(e, str):
            raise ValueError(f"{CONFIG_KEY} entries must be strings, got {e!r}")
        try:
            ipaddress.ip_network(e, strict=False)
            continue
        except ValueError:
            pass
        if len(e) > 253 or not HOST_NAME_RE.fullmatch(e):
            raise ValueError(f"{CONFIG_KEY} entry {e!r} is neither a CIDR (10.0.0.0/8) nor a host name")
    return tuple(value)
