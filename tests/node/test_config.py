"""Node config: bad values are refused with the key named, before anything starts."""

from __future__ import annotations

import pytest

from horologe.node.config import (
    CLOCK_OFFSET_ENV,
    ENV_SECRETS,
    MAX_CLOCK_OFFSET_MS,
    RANGES,
    TEST_MODE_ENV,
    load_config,
)
from horologe.node.errors import ConfigError
from testkit.tls import make_pki

BASE = 'node_id = "n1"\ndata_dir = "d"\nhttp = "127.0.0.1:1"\nraft = "127.0.0.1:2"\ninsecure_dev = true\n'


@pytest.fixture(autouse=True)
def no_test_env(monkeypatch):
    """The outer environment (a test run's HOROLOGE_*) must not leak into these loads."""
    for name in (CLOCK_OFFSET_ENV, TEST_MODE_ENV, *ENV_SECRETS.values()):
        monkeypatch.delenv(name, raising=False)


def _load(tmp_path, extra: str):
    path = tmp_path / "n.toml"
    path.write_text(BASE + extra)
    return load_config(str(path))


@pytest.mark.parametrize(
    "extra, key",
    [
        ("fire_batch_limit = 0", "fire_batch_limit"),
        ("sync_interval_ms = -5", "sync_interval_ms"),
        ("sync_interval_ms = 1000", "sync_interval_ms"),  # its gaps would pause leases (cluster/leases.py)
        ('max_batch_items = "many"', "max_batch_items"),
        ("clock_tolerance_ms = true", "clock_tolerance_ms"),
        ("max_request_bytes = 1", "max_request_bytes"),
        ("clock_offset_ms = 5000", "clock_offset_ms"),
        ("colour = 1", "colour"),
        ('fsync = "no"', "fsync"),
        ("fsync = 1", "fsync"),
        ("client_token = 7", "client_token"),
        ('raft_bind = "nowhere"', "raft_bind"),
        ("retry_levels_ms = [1000, 0]", "retry_levels_ms"),
        ("retry_levels_ms = [1000, true]", "retry_levels_ms"),
        ("retry_levels_ms = 1000", "retry_levels_ms"),
        (f"retry_levels_ms = [{31 * 86_400_000}]", "retry_levels_ms"),
        (f"retry_levels_ms = [{', '.join(['1000'] * 101)}]", "retry_levels_ms"),
        ('push_allow = "127.0.0.1/32"', "push_allow"),
        ('push_allow = ["127.0.0.1/32", 5]', "push_allow"),
        ('push_allow = ["hooks example com"]', "push_allow"),
        ('push_allow = ["-bad-.example.com"]', "push_allow"),
        ('[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "ftp://127.0.0.1:4"', "peers.n2.http"),
        ('[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "127.0.0.1:99999"', "peers.n2.http"),
        ('[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "127.0.0.1:4"\nhttps = "x"', "peers.n2"),
        # planning refills at half the horizon: a check that comes later plans firings late
        ("schedule_horizon_ms = 2000", "schedule_check_ms .* under half of schedule_horizon_ms"),
        ("schedule_check_ms = 30000", "schedule_check_ms .* under half of schedule_horizon_ms"),
    ],
)
def test_bad_values_are_refused_naming_the_key(tmp_path, extra, key):
    with pytest.raises(ConfigError, match=key):
        _load(tmp_path, extra)


# What a key's ends need of another key that a rule ties it to.
BESIDE = {
    "schedule_horizon_ms": "\nschedule_check_ms = 10",
    "schedule_check_ms": "\nschedule_horizon_ms = 3600000",
}


@pytest.mark.parametrize("key", sorted(RANGES))
def test_every_numeric_key_is_refused_just_outside_its_range(tmp_path, key):
    lo, hi = RANGES[key]
    beside = BESIDE.get(key, "")
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ConfigError, match=f"{key} must be an integer from {lo} to {hi}"):
            _load(tmp_path, f"{key} = {bad}{beside}")
    for good in (lo, hi):
        assert getattr(_load(tmp_path, f"{key} = {good}{beside}"), key) == good


def test_good_values_load(tmp_path):
    cfg = _load(
        tmp_path,
        "fire_batch_limit = 1\nmax_batch_items = 10\nclock_tolerance_ms = 500\nretry_levels_ms = []\n"
        '[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "https://127.0.0.1:4"\n'
        '[peers.n3]\nraft = "127.0.0.1:5"\nhttp = "127.0.0.1:6"',
    )
    assert (cfg.fire_batch_limit, cfg.max_batch_items, cfg.clock_tolerance_ms) == (1, 10, 500)
    assert cfg.retry_levels_ms == ()  # no retries: a nack goes straight to the DLQ
    assert cfg.push_allow == ()  # nothing may be pushed until an operator allows a target
    allowing = _load(tmp_path, 'push_allow = ["10.0.0.0/8", "::1/128", "hooks.example.com", "*.example.org"]')
    assert allowing.push_allow == ("10.0.0.0/8", "::1/128", "hooks.example.com", "*.example.org")
    # a peer's address keeps the scheme it names; a bare one takes this node's (no TLS: http)
    assert [cfg.http_url(p.http) for p in cfg.peers] == ["https://127.0.0.1:4", "http://127.0.0.1:6"]


# -- the test-only clock offset ------------------------------------------------------


def test_the_clock_offset_is_refused_outside_test_mode(tmp_path, monkeypatch):
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "5000")
    with pytest.raises(ConfigError, match=f"{CLOCK_OFFSET_ENV}.*tests only.*{TEST_MODE_ENV}=1"):
        _load(tmp_path, "")
    monkeypatch.setenv(TEST_MODE_ENV, "yes")  # only "1" turns test mode on
    with pytest.raises(ConfigError, match=TEST_MODE_ENV):
        _load(tmp_path, "")


def test_the_clock_offset_applies_in_test_mode(tmp_path, monkeypatch):
    monkeypatch.setenv(TEST_MODE_ENV, "1")
    assert _load(tmp_path, "").clock_offset_ms == 0
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "-5000")
    assert _load(tmp_path, "").clock_offset_ms == -5000


@pytest.mark.parametrize("value", ["5s", str(MAX_CLOCK_OFFSET_MS + 1), str(-MAX_CLOCK_OFFSET_MS - 1)])
def test_a_bad_clock_offset_is_refused_even_in_test_mode(tmp_path, monkeypatch, value):
    monkeypatch.setenv(TEST_MODE_ENV, "1")
    monkeypatch.setenv(CLOCK_OFFSET_ENV, value)
    with pytest.raises(ConfigError, match=CLOCK_OFFSET_ENV):
        _load(tmp_path, "")


def test_the_clock_offset_cannot_come_in_as_an_override(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text(BASE)
    with pytest.raises(ConfigError, match="clock_offset_ms"):
        load_config(str(path), clock_offset_ms=5000)


# -- TLS -------------------------------------------------------------------------------


@pytest.fixture
def pki(tmp_path):
    return make_pki(str(tmp_path / "tls"), ["n1", "other"])


def _tls(cert=None, key=None, ca=None) -> str:
    pairs = {"tls_cert": cert, "tls_key": key, "tls_ca": ca}
    return "".join(f'{k} = "{v}"\n' for k, v in pairs.items() if v is not None)


def test_tls_loads_and_serves_https(tmp_path, pki):
    cert, key = pki.certs["n1"]
    cfg = _load(tmp_path, _tls(cert, key, pki.ca) + '[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "127.0.0.1:4"')
    assert (cfg.scheme, cfg.tls_cert, cfg.tls_key, cfg.tls_ca) == ("https", cert, key, pki.ca)
    assert cfg.http_url(cfg.peers[0].http) == "https://127.0.0.1:4"  # a bare peer address takes https


@pytest.mark.parametrize("given, missing", [("tls_cert", "tls_key"), ("tls_key", "tls_cert")])
def test_tls_cert_and_key_come_together(tmp_path, pki, given, missing):
    cert, key = pki.certs["n1"]
    extra = _tls(cert=cert) if given == "tls_cert" else _tls(key=key)
    with pytest.raises(ConfigError, match=f"{given} is set but {missing} is not"):
        _load(tmp_path, extra)


@pytest.mark.parametrize("key", ["tls_cert", "tls_key", "tls_ca"])
def test_a_missing_tls_file_is_refused_naming_the_key(tmp_path, pki, key):
    cert, k = pki.certs["n1"]
    files = {"cert": cert, "key": k, "ca": pki.ca}
    files[key[4:]] = str(tmp_path / "nowhere.pem")
    with pytest.raises(ConfigError, match=f"{key}: no such file"):
        _load(tmp_path, _tls(**files))
    files[key[4:]] = str(tmp_path)  # a directory is no file either
    with pytest.raises(ConfigError, match=f"{key}: no such file"):
        _load(tmp_path, _tls(**files))


def test_an_unreadable_tls_file_is_refused(tmp_path, pki, monkeypatch):
    # Root reads through any mode bits, so the refusal is provoked at open().
    import builtins

    cert, key = pki.certs["n1"]
    real_open = builtins.open

    def deny(path, *args, **kwargs):
        if str(path) == key:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", deny)
    with pytest.raises(ConfigError, match="tls_key: cannot read .*Permission denied"):
        _load(tmp_path, _tls(cert, key))


def test_a_key_that_is_not_the_certificates_is_refused(tmp_path, pki):
    cert, _ = pki.certs["n1"]
    _, other_key = pki.certs["other"]
    with pytest.raises(ConfigError, match="tls_cert/tls_key: cannot use"):
        _load(tmp_path, _tls(cert, other_key))


def test_a_ca_file_without_certificates_is_refused(tmp_path, pki):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="tls_ca: .* no usable CA certificate"):
        _load(tmp_path, _tls(ca=str(junk)))
    cert, key = pki.certs["n1"]
    with pytest.raises(ConfigError, match="tls_cert/tls_key"):
        _load(tmp_path, _tls(str(junk), key))


def test_the_node_command_refuses_the_offset_outside_test_mode(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from horologe.cli import main

    path = tmp_path / "n.toml"
    path.write_text(BASE)
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "5000")
    r = CliRunner().invoke(main, ["node", "--config", str(path), "--check-config"])
    assert r.exit_code == 1 and f"{TEST_MODE_ENV}=1" in r.output, r.output
    monkeypatch.setenv(TEST_MODE_ENV, "1")
    r = CliRunner().invoke(main, ["node", "--config", str(path), "--check-config"])
    assert r.exit_code == 0 and "n1: http 127.0.0.1:1" in r.output, r.output


def test_check_config_speaks_of_certificates_only_where_tls_is_used(tmp_path, pki):
    """It said "peers' certificates verified against the system CAs" of a node without TLS."""
    from click.testing import CliRunner

    from horologe.cli import main

    path = tmp_path / "n.toml"
    said = "peers' certificates verified against"
    for extra, shown in (
        ('[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "127.0.0.1:4"\n', None),
        (_tls(ca=pki.ca), f"{said} {pki.ca}"),
        ('[peers.n2]\nraft = "127.0.0.1:3"\nhttp = "https://h:4"\n', f"{said} the system CAs"),
    ):
        path.write_text(BASE + extra)
        r = CliRunner().invoke(main, ["node", "--config", str(path), "--check-config"])
        assert r.exit_code == 0, r.output
        assert (shown in r.output) if shown else (said not in r.output), r.output


def test_check_config_prints_every_setting_but_the_secrets(tmp_path, monkeypatch):
    """It printed only the addresses and peers: a key set in the file did not show."""
    from click.testing import CliRunner

    from horologe.cli import main

    path = tmp_path / "n.toml"
    path.write_text(BASE + 'retention_ms = 3600000\npush_allow = ["127.0.0.1/32"]\n')
    monkeypatch.setenv(ENV_SECRETS["client_token"], "a-client-token-not-to-print")
    r = CliRunner().invoke(main, ["node", "--config", str(path), "--check-config"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert "  retention_ms = 3600000" in lines and '  push_allow = ["127.0.0.1/32"]' in lines
    assert "  sync_interval_ms = 250  # the default" in lines
    assert "  client_token: set (not shown)" in lines and "  cluster_secret: not set (not shown)" in lines
    assert "a-client-token-not-to-print" not in r.output


def test_a_config_file_that_cannot_be_read_or_is_not_utf8_is_refused_naming_it(tmp_path):
    """Each ended `horologe node` in a traceback (PermissionError, UnicodeDecodeError)."""
    (tmp_path / "folder.toml").mkdir()  # read as a file: an OSError, as its permissions would be
    with pytest.raises(ConfigError, match=r"cannot read the config file .*folder.toml: Is a directory"):
        load_config(str(tmp_path / "folder.toml"))
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'node_id = "n\xe9"\n')
    with pytest.raises(ConfigError, match=r"latin.toml is not UTF-8 text \(TOML is\): byte 12"):
        load_config(str(latin))


@pytest.mark.parametrize(
    "key, value", [("http", "[::1]:8080"), ("raft", "[fd00::1]:7000"), ("raft_bind", "[::]:7000")]
)
def test_an_ipv6_address_is_refused_naming_the_key(tmp_path, key, value):
    """Each was taken: the HTTP one failed as the node started (after its store and Raft),
    the Raft bind with a TypeError inside pysyncobj, a peer's was never dialled."""
    config = tmp_path / "n1.toml"
    lines = {"node_id": "n1", "data_dir": str(tmp_path), "http": "127.0.0.1:8080", "raft": "127.0.0.1:7000"}
    lines[key] = value
    config.write_text("".join(f'{k} = "{v}"\n' for k, v in lines.items()))
    with pytest.raises(ConfigError, match=rf"^{key}: IPv6 addresses are not supported"):
        load_config(str(config))
