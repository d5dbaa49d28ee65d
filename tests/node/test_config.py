"""Node config: bad values are refused with the key named, before anything starts."""

from __future__ import annotations

import pytest

from horologe.node.config import load_config
from horologe.node.errors import ConfigError

BASE = 'node_id = "n1"\ndata_dir = "d"\nhttp = "127.0.0.1:1"\nraft = "127.0.0.1:2"\ninsecure_dev = true\n'


def _load(tmp_path, extra: str):
    path = tmp_path / "n.toml"
    path.write_text(BASE + extra)
    return load_config(str(path))


@pytest.mark.parametrize(
    "extra, key",
    [
        ("fire_batch_limit = 0", "fire_batch_limit"),
        ("sync_interval_ms = -5", "sync_interval_ms"),
        ('max_batch_items = "many"', "max_batch_items"),
        ("clock_tolerance_ms = true", "clock_tolerance_ms"),
        ("max_request_bytes = 1", "max_request_bytes"),
        ("clock_offset_ms = 5000", "clock_offset_ms"),
        ("colour = 1", "colour"),
    ],
)
def test_bad_values_are_refused_naming_the_key(tmp_path, extra, key):
    with pytest.raises(ConfigError, match=key):
        _load(tmp_path, extra)


def test_good_values_load(tmp_path):
    cfg = _load(tmp_path, "fire_batch_limit = 1\nmax_batch_items = 10\nclock_tolerance_ms = 500")
    assert (cfg.fire_batch_limit, cfg.max_batch_items, cfg.clock_tolerance_ms) == (1, 10, 500)
