"""The transport's options, Celery's ``broker_transport_options`` (docs/task-queues.md,
"Settings"), read and checked once: a value of the wrong type or out of range is refused
naming the option, and a key that is not one of them but nearly is (a misspelling) is
warned of, since kombu passes every key along and would leave it unread."""

from __future__ import annotations

import difflib
import logging
from typing import Annotated

import msgspec
from msgspec import Meta

from horologe.client.lease_keeper import MIN_WORKER_VISIBILITY_MS
from horologe.client.limits import MAX_VISIBILITY_MS, MAX_WAIT_MS

log = logging.getLogger(__name__)


class Options(msgspec.Struct, kw_only=True, frozen=True):
    token: str | None = None
    ca: str | None = None
    topic_prefix: str = ""
    visibility_timeout: Annotated[  # s
        float, Meta(ge=MIN_WORKER_VISIBILITY_MS / 1000, le=MAX_VISIBILITY_MS / 1000)
    ] = 1800.0
    wait_ms: Annotated[int, Meta(ge=0, le=MAX_WAIT_MS)] = 1000
    timeout: Annotated[float, Meta(gt=0)] = 10.0  # s per request to a node
    retry_s: Annotated[float, Meta(ge=0)] = 15.0  # how long the SDK retries across a failover

    @property
    def visibility_ms(self) -> int:
        return int(self.visibility_timeout * 1000)


OPTIONS = Options.__struct_fields__


def read_options(options: dict) -> Options:
    """The transport's options of ``options`` (all of ``broker_transport_options``);
    ValueError naming the option when one is of the wrong type or out of range."""
    for key in options:
        if key not in OPTIONS and (near := difflib.get_close_matches(str(key), OPTIONS, n=1, cutoff=0.8)):
            log.warning("broker transport option %r is unknown (left unread): %r was meant?", key, near[0])
    try:
        return msgspec.convert({k: v for k, v in options.items() if k in OPTIONS}, Options, strict=False)
    except msgspec.ValidationError as e:
        why, _, key = str(e).rpartition(" - at `$.")
        raise ValueError(f"broker transport option {key.rstrip('`')}: {why}") from None
