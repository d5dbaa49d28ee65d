"""Node configuration: a TOML file (DESIGN §6), then ``HOROLOGE_*`` env, then flags."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal, get_type_hints

import msgspec
from msgspec import Meta

from horologe.cluster import ClusterSettings, Peer

from . import tls
from .errors import ConfigError
from .push.allow import CONFIG_KEY as PUSH_ALLOW
from .push.allow import check_entries

# RocketMQ's 16 retry levels: 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DEFAULT_RETRY_LEVELS_MS = tuple(
    s * 1000 for s in (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)

ENV_SECRETS = {
    "client_token": "HOROLOGE_CLIENT_TOKEN",
    "admin_token": "HOROLOGE_ADMIN_TOKEN",
    "cluster_secret": "HOROLOGE_CLUSTER_SECRET",
}
# A node's clock may be skewed for tests by CLOCK_OFFSET_ENV, and only when TEST_MODE_ENV
# is "1": a stray variable on a production host must not move delivery times.
CLOCK_OFFSET_ENV = "HOROLOGE_TEST_CLOCK_OFFSET_MS"
TEST_MODE_ENV = "HOROLOGE_TEST_MODE"
MAX_CLOCK_OFFSET_MS = 86_400_000
# retry_levels_ms: how many levels (none: a nack goes straight to the DLQ), and each delay.
MAX_RETRY_LEVELS = 100
RETRY_LEVEL_RANGE = (1, 30 * 86_400_000)
LogFormat = Literal["text", "json"]


def ranged(lo: int, hi: int):
    """The type of an integer key that must lie in ``lo..hi`` (inclusive)."""
    return Annotated[int, Meta(ge=lo, le=hi)]


@dataclass(frozen=True)
class NodeConfig:
    node_id: str
    data_dir: str
    http: str
    raft: str
    # The members this node starts with (the replicated membership replaces them: docs/deploy.md).
    peers: tuple[Peer, ...] = field(default_factory=tuple)
    # Joins a running cluster: no vote until `horologe cluster add` commits it as a member.
    join: bool = False
    client_token: str | None = None
    admin_token: str | None = None
    cluster_secret: str | None = None
    insecure_dev: bool = False
    raft_bind: str | None = None
    # The longest gap between the master's S entries when nothing falls due (node/wheel_driver.py).
    sync_interval_ms: ranged(1, 500) = 250
    batch_window_ms: ranged(0, 1_000) = 0  # produce group commit linger (node/group_commit.py); 0: adaptive
    max_batch_items: ranged(1, 100_000) = 1000  # messages in one POST /v1/messages/batch
    max_request_bytes: ranged(64 * 1024, 1 << 30) = 4 * 1024 * 1024  # a request body; a larger one gets 413
    # A connection must send a whole request line and headers this soon after it opens or
    # after its last answer, else it is closed: idle keep-alives and slowloris alike.
    http_idle_timeout_ms: ranged(100, 3_600_000) = 15_000
    # Open HTTP connections at most; past it a new one is answered 503 and closed
    # (node/http/server.py). Lowered at start if the descriptor limit leaves less room.
    http_max_connections: ranged(1, 1_000_000) = 1024
    fire_batch_limit: ranged(1, 10_000_000) = 10_000  # refs per delivering entry (hot seconds, fast-forward)
    # The wheel commits what falls due up to this far ahead of the master's clock, so the
    # Raft round trip is over by the deliver time; a message is still handed out only once
    # it is due, or held by the consumer until then (docs/cluster.md, "Fire lead"). 0:
    # commit at the deliver time. At 20, on a loaded 2-core machine, half of what consumers
    # pulled ahead arrived after its time (commit plus pull took longer than the lead).
    fire_lead_ms: ranged(0, 1_000) = 50
    # When more than fire_batch_limit falls due within the lead (a hot millisecond), the
    # wheel fires those batches a lead apart, the last a lead ahead of its time, and none
    # further ahead than this (docs/cluster.md, "Fire lead"). 0: no stretch.
    fire_lead_max_ms: ranged(0, 1_000) = 1_000
    fsync: bool = False  # a store sync point every batch (storage/config.py); the Raft journal always syncs
    # Records of messages due within a minute of their production that the master keeps in
    # memory until a pull takes them (storage/recent_records.py); 0 keeps none.
    recent_records_mb: ranged(0, 1 << 20) = 64
    log_compaction_min_entries: ranged(10, 1_000_000_000) = 50_000
    log_compaction_bytes: ranged(1024 * 1024, 1 << 40) = 64 * 1024 * 1024
    # Nack delays by attempt (RocketMQ's 16 levels, 10 s .. 2 h); after the last, the DLQ.
    retry_levels_ms: Annotated[tuple[ranged(*RETRY_LEVEL_RANGE), ...], Meta(max_length=MAX_RETRY_LEVELS)] = (
        DEFAULT_RETRY_LEVELS_MS
    )
    ack_window_ms: ranged(0, 10_000) = 0  # linger of acks' and leases' group commit; 0: at once when idle
    # The master's clock may stray this far from quorum time before it hands the wheel
    # over; a clock behind is lifted to at most this below it (node/quorum_clock.py).
    clock_tolerance_ms: ranged(100, 86_400_000) = 2000
    # Event-loop lag probe period (node/ops/loop_lag.py); 0: off. At 1 ms the probe's own
    # wake-ups cost each node about 8% of a core with nothing else to do (docs/benchmarks.md).
    loop_lag_probe_ms: ranged(0, 1_000) = 10
    # Topics (and groups) with a label of their own in /metrics; the rest fold into "other".
    metrics_topic_cap: ranged(1, 100_000) = 100
    # Delivered data older than this goes once every consumer group passed it
    # (cluster/retention.py); 0 keeps everything. The master checks every retention_check_ms.
    retention_ms: ranged(0, 100 * 365 * 86_400_000) = 7 * 86_400_000
    retention_check_ms: ranged(100, 86_400_000) = 60_000
    # Recurring schedules (cluster/schedule_plan.py): the master produces each one's firings
    # up to this far ahead of its clock, refilling at half, checking every schedule_check_ms.
    schedule_horizon_ms: ranged(1_000, 3_600_000) = 60_000
    schedule_check_ms: ranged(10, 60_000) = 1_000
    clock_offset_ms: int = 0  # test-only skew (CLOCK_OFFSET_ENV); use libfaketime for real skew
    # HTTPS (node/tls.py): this node's certificate chain and key, and the CAs it trusts
    # when it calls a peer's HTTP API.
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    # Logs on stderr (node/ops/log_setup.py): "text" lines, or "json" objects for log shippers;
    # access_log: one line per HTTP request, with its request id (the X-Request-Id header).
    log_format: LogFormat = "text"
    access_log: bool = True
    # Hosts push subscriptions may POST to: CIDRs and host names (node/push/allow.py). Empty:
    # nothing is pushed until an operator allows a target.
    push_allow: tuple[str, ...] = ()

    def cluster_settings(self) -> ClusterSettings:
        return ClusterSettings(
            node_id=self.node_id,
            raft=self.raft,
            data_dir=self.data_dir,
            peers=self.peers,
            http=self.http,
            join=self.join,
            cluster_secret=self.cluster_secret,
            insecure_dev=self.insecure_dev,
            bind=self.raft_bind,
            log_compaction_min_entries=self.log_compaction_min_entries,
            log_compaction_bytes=self.log_compaction_bytes,
        )

    @property
    def raft_listen(self) -> str:
        """Where Raft listens: ``raft_bind``, else every interface at the ``raft`` address's
        port, as pysyncobj binds with no bind address (transport.py:268-273)."""
        if self.raft_bind:
            return self.raft_bind
        return f"0.0.0.0:{self.raft.rpartition(':')[2]}"

    @property
    def scheme(self) -> str:
        """How this node serves its HTTP API: ``https`` with a certificate, else ``http``."""
        return "https" if self.tls_cert else "http"

    def http_url(self, address: str) -> str:
        """A peer's HTTP address as a URL, for redirects and calls: the scheme it names, or
        this node's (a cluster serves HTTPS on every node or on none, unless told otherwise)."""
        return address if "://" in address else f"{self.scheme}://{address}"

    def dial_of(self, raft: str) -> str | None:
        """Where this node dials the member at ``raft``, when its config names a place."""
        return next((p.dial for p in self.peers if p.raft == raft), None)


def _host_port(value: str, key: str) -> str:
    host, sep, port = value.rpartition(":") if isinstance(value, str) else ("", "", "")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{key} must be host:port, got {value!r}")
    if ":" in host or host.startswith("["):
        # pysyncobj reads a Raft address as host:port, and resolves and dials IPv4 alone:
        # an IPv6 one was taken here and failed as the node started, or was never dialled.
        raise ConfigError(
            f"{key}: IPv6 addresses are not supported (an IPv4 address or a host name), got {value!r}"
        )
    return value


def _http_address(value: str, key: str) -> str:
    """A peer's HTTP address: host:port, or http(s)://host:port to name its scheme."""
    if isinstance(value, str) and "://" in value:
        scheme, _, rest = value.partition("://")
        if scheme not in ("http", "https"):
            raise ConfigError(f"{key} must be host:port or http(s)://host:port, got {value!r}")
        _host_port(rest, key)
        return value
    return _host_port(value, key)


# Numeric keys and the range each must lie in (inclusive), from their types.
RANGES = {
    k: (m.ge, m.le)
    for k, hint in get_type_hints(NodeConfig, include_extras=True).items()
    for m in getattr(hint, "__metadata__", ())
    if isinstance(m, Meta) and m.ge is not None
}


def _typed(raw: dict) -> NodeConfig:
    """``raw`` as a NodeConfig: each key's type and range, each error naming its key."""
    try:
        return msgspec.convert(raw, NodeConfig)
    except msgspec.ValidationError as e:
        key = re.search(r"`\$\.(\w+)", str(e))[1]
        got, hint = raw[key], get_type_hints(NodeConfig)[key]
        if key in RANGES:
            wants = "an integer from {} to {}".format(*RANGES[key])
        elif key == "retry_levels_ms":
            wants = "a list of at most {} delays, each an integer from {} to {} (ms)".format(
                MAX_RETRY_LEVELS, *RETRY_LEVEL_RANGE
            )
        else:
            wants = {bool: "true or false", LogFormat: "one of text, json"}.get(hint, "a string")
        raise ConfigError(f"{key} must be {wants}, got {got!r}") from e


def _clock_offset() -> int | None:
    """The test-only clock offset from the environment; refused outside test mode."""
    value = os.environ.get(CLOCK_OFFSET_ENV)
    if not value:
        return None
    if os.environ.get(TEST_MODE_ENV) != "1":
        raise ConfigError(
            f"{CLOCK_OFFSET_ENV} skews this node's clock and is for tests only: "
            f"refused unless {TEST_MODE_ENV}=1 (for a real skew, use libfaketime)"
        )
    try:
        offset = int(value)
    except ValueError as e:
        raise ConfigError(f"{CLOCK_OFFSET_ENV} must be an integer (ms), got {value!r}") from e
    if not -MAX_CLOCK_OFFSET_MS <= offset <= MAX_CLOCK_OFFSET_MS:
        raise ConfigError(f"{CLOCK_OFFSET_ENV} must be within ±{MAX_CLOCK_OFFSET_MS} ms, got {offset}")
    return offset


def _check_tls(cfg: NodeConfig) -> None:
    """Certificate and key come together, and every TLS file can be read and used."""
    if bool(cfg.tls_cert) != bool(cfg.tls_key):
        given, missing = ("tls_cert", "tls_key") if cfg.tls_cert else ("tls_key", "tls_cert")
        raise ConfigError(f"{given} is set but {missing} is not: HTTPS needs both")
    for key in ("tls_cert", "tls_key", "tls_ca"):
        if getattr(cfg, key):
            tls.check_readable(getattr(cfg, key), key)
    if cfg.tls_cert:
        tls.server_context(cfg.tls_cert, cfg.tls_key)
    if cfg.tls_ca:
        tls.client_context(cfg.tls_ca)


def load_config(path: str | None, **overrides) -> NodeConfig:
    """Read ``path`` (TOML), apply env secrets and any non-None ``overrides``."""
    raw: dict = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                raw = tomllib.load(f)
        except FileNotFoundError as e:
            raise ConfigError(f"no config file at {path}") from e
        except OSError as e:  # its permissions, a folder by that name, an I/O error
            raise ConfigError(f"cannot read the config file {path}: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path} is not UTF-8 text (TOML is): byte {e.start}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: {e}") from e
    peers_raw = raw.pop("peers", {})
    if not isinstance(peers_raw, dict):
        raise ConfigError("peers must be a table of [peers.<id>] sections")
    known = {f for f in NodeConfig.__dataclass_fields__ if f != "peers"}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown))}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "clock_offset_ms" in raw or "clock_offset_ms" in overrides:
        raise ConfigError(f"clock_offset_ms is for tests only: they set {CLOCK_OFFSET_ENV}")
    for key, env in ENV_SECRETS.items():
        if os.environ.get(env):
            raw[key] = os.environ[env]
    offset = _clock_offset()
    if offset is not None:
        raw["clock_offset_ms"] = offset
    raw.update(overrides)
    if PUSH_ALLOW in raw:
        try:
            raw[PUSH_ALLOW] = check_entries(raw[PUSH_ALLOW])
        except ValueError as e:
            raise ConfigError(str(e)) from e
    missing = [k for k in ("node_id", "data_dir", "http", "raft") if not raw.get(k)]
    if missing:
        raise ConfigError(f"missing config keys: {', '.join(missing)}")
    peers = []
    for pid, p in sorted(peers_raw.items()):
        if not isinstance(p, dict) or "raft" not in p or "http" not in p:
            raise ConfigError(f"peers.{pid} needs raft and http addresses")
        unknown = set(p) - {"raft", "http", "dial"}
        if unknown:
            raise ConfigError(f"unknown keys in peers.{pid}: {', '.join(sorted(unknown))}")
        peers.append(
            Peer(
                pid,
                _host_port(p["raft"], f"peers.{pid}.raft"),
                _http_address(p["http"], f"peers.{pid}.http"),
                _host_port(p["dial"], f"peers.{pid}.dial") if p.get("dial") else None,
            )
        )
    cfg = replace(_typed(raw), peers=tuple(peers))
    _host_port(cfg.http, "http")
    _host_port(cfg.raft, "raft")
    if cfg.raft_bind:
        _host_port(cfg.raft_bind, "raft_bind")
    _check_tls(cfg)
    if cfg.schedule_check_ms * 2 >= cfg.schedule_horizon_ms:
        raise ConfigError(
            f"schedule_check_ms ({cfg.schedule_check_ms}) must be under half of schedule_horizon_ms "
            f"({cfg.schedule_horizon_ms}): planning refills at half the horizon, and a check that "
            "comes later produces firings after their time"
        )
    if not cfg.insecure_dev:
        for key in ENV_SECRETS:
            if not getattr(cfg, key):
                raise ConfigError(
                    f"{key} is not set (config key or {ENV_SECRETS[key]}); "
                    "only --insecure-dev may run without it"
                )
    return cfg
