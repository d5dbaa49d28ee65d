"""Node configuration: a TOML file (DESIGN §6), then ``HOROLOGE_*`` env, then flags."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace

from horologe.cluster import ClusterSettings, Peer

from .errors import ConfigError

# RocketMQ's 16 retry levels: 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DEFAULT_RETRY_LEVELS_MS = tuple(
    s * 1000 for s in (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
)

ENV_SECRETS = {
    "client_token": "HOROLOGE_CLIENT_TOKEN",
    "admin_token": "HOROLOGE_ADMIN_TOKEN",
    "cluster_secret": "HOROLOGE_CLUSTER_SECRET",
}


@dataclass(frozen=True)
class NodeConfig:
    node_id: str
    data_dir: str
    http: str
    raft: str
    peers: tuple[Peer, ...] = field(default_factory=tuple)
    client_token: str | None = None
    admin_token: str | None = None
    cluster_secret: str | None = None
    insecure_dev: bool = False
    raft_bind: str | None = None
    sync_interval_ms: int = 50  # longest gap between wheel-state syncs
    batch_window_ms: int = 5  # produce group commit
    max_batch_items: int = 1000  # messages in one POST /v1/messages/batch
    max_request_bytes: int = 4 * 1024 * 1024  # a request body; a larger one gets 413
    fire_batch_limit: int = 10_000  # refs per delivering entry (hot seconds, fast-forward)
    fsync: bool = True
    log_compaction_min_entries: int = 50_000
    # Nack delays by attempt (RocketMQ's 16 levels, 10 s .. 2 h); after the last, the DLQ.
    retry_levels_ms: tuple[int, ...] = DEFAULT_RETRY_LEVELS_MS
    ack_window_ms: int = 50  # acks are replicated at most this often
    # The master's clock may stray this far from the quorum's before it is clamped and
    # hands the wheel over (node/quorum_clock.py).
    clock_tolerance_ms: int = 2000
    loop_lag_probe_ms: int = 1  # event-loop lag probe period (node/loop_lag.py); 0: off
    clock_offset_ms: int = 0  # test-only skew (HOROLOGE_TEST_CLOCK_OFFSET_MS); use libfaketime for real skew

    def cluster_settings(self) -> ClusterSettings:
        return ClusterSettings(
            node_id=self.node_id,
            raft=self.raft,
            data_dir=self.data_dir,
            peers=self.peers,
            cluster_secret=self.cluster_secret,
            insecure_dev=self.insecure_dev,
            bind=self.raft_bind,
            log_compaction_min_entries=self.log_compaction_min_entries,
        )

    def peer_by_raft(self, raft: str | None) -> Peer | None:
        if raft is None:
            return None
        if raft == self.raft:
            return Peer(self.node_id, self.raft, self.http)
        return next((p for p in self.peers if p.raft == raft), None)


def _host_port(value: str, key: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"{key} must be host:port, got {value!r}")
    return value


# Numeric keys and the range each must lie in (inclusive).
RANGES = {
    "sync_interval_ms": (1, 60_000),
    "batch_window_ms": (0, 1_000),
    "max_batch_items": (1, 100_000),
    "max_request_bytes": (64 * 1024, 1 << 30),
    "fire_batch_limit": (1, 10_000_000),
    "log_compaction_min_entries": (10, 1_000_000_000),
    "ack_window_ms": (1, 10_000),
    "clock_tolerance_ms": (100, 86_400_000),
    "loop_lag_probe_ms": (0, 1_000),
}


def _check_ranges(raw: dict) -> None:
    for key, (lo, hi) in RANGES.items():
        if key in raw:
            v = raw[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ConfigError(f"{key} must be an integer from {lo} to {hi}, got {v!r}")


def load_config(path: str | None, **overrides) -> NodeConfig:
    """Read ``path`` (TOML), apply env secrets and any non-None ``overrides``."""
    raw: dict = {}
    if path is not None:
        try:
            with open(path, "rb") as f:
                raw = tomllib.load(f)
        except FileNotFoundError as e:
            raise ConfigError(f"no config file at {path}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: {e}") from e
    peers_raw = raw.pop("peers", {})
    known = {f for f in NodeConfig.__dataclass_fields__ if f != "peers"}
    unknown = set(raw) - known
    if unknown:
        raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown))}")
    if "clock_offset_ms" in raw:
        raise ConfigError("clock_offset_ms is for tests only: they set HOROLOGE_TEST_CLOCK_OFFSET_MS")
    for key, env in ENV_SECRETS.items():
        if os.environ.get(env):
            raw[key] = os.environ[env]
    if os.environ.get("HOROLOGE_TEST_CLOCK_OFFSET_MS"):
        raw["clock_offset_ms"] = int(os.environ["HOROLOGE_TEST_CLOCK_OFFSET_MS"])
    raw.update({k: v for k, v in overrides.items() if v is not None})
    _check_ranges(raw)
    missing = [k for k in ("node_id", "data_dir", "http", "raft") if not raw.get(k)]
    if missing:
        raise ConfigError(f"missing config keys: {', '.join(missing)}")
    peers = []
    for pid, p in sorted(peers_raw.items()):
        if not isinstance(p, dict) or "raft" not in p or "http" not in p:
            raise ConfigError(f"peers.{pid} needs raft and http addresses")
        peers.append(
            Peer(
                pid,
                _host_port(p["raft"], f"peers.{pid}.raft"),
                _host_port(p["http"], f"peers.{pid}.http"),
                _host_port(p["dial"], f"peers.{pid}.dial") if p.get("dial") else None,
            )
        )
    if "retry_levels_ms" in raw:
        levels = raw["retry_levels_ms"]
        if not isinstance(levels, list) or not all(isinstance(x, int) and x > 0 for x in levels):
            raise ConfigError("retry_levels_ms must be a list of positive integers (ms)")
        raw["retry_levels_ms"] = tuple(levels)
    cfg = NodeConfig(peers=tuple(peers), **raw)
    _host_port(cfg.http, "http")
    _host_port(cfg.raft, "raft")
    if not cfg.insecure_dev:
        for key in ENV_SECRETS:
            if not getattr(cfg, key):
                raise ConfigError(
                    f"{key} is not set (config key or {ENV_SECRETS[key]}); "
                    "only --insecure-dev may run without it"
                )
    return replace(cfg)
