"""``horologe node``: run one node."""

from __future__ import annotations

import dataclasses
import json

import click

from horologe.cluster.errors import UnsupportedPysyncobjError
from horologe.cluster.raft.seam import check_pysyncobj
from horologe.node.config import ENV_SECRETS, NodeConfig, load_config
from horologe.node.errors import ConfigError, DataDirInUseError, DataDirUnusableError, ListenError
from horologe.node.main import run_node
from horologe.storage import CorruptLogError


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    help='Node TOML file (docs/api.md, "Node config").',
)
@click.option("--node-id", help="Overrides node_id.")
@click.option("--data-dir", help="Overrides data_dir.")
@click.option("--http", "http_addr", help="Overrides http (host:port).")
@click.option("--raft", "raft_addr", help="Overrides raft (host:port; also this node's identity).")
@click.option(
    "--insecure-dev",
    is_flag=True,
    default=None,
    help="Allow running without tokens and cluster secret. Never in production.",
)
@click.option(
    "--join",
    is_flag=True,
    default=None,
    help="Join a running cluster (config: join = true): give the members as peers, start this node, "
    "then run `horologe cluster add` against the master. It votes once added.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    help="Overrides log_format: text lines, or one JSON object per line for log shippers.",
)
@click.option(
    "--check-config",
    is_flag=True,
    help="Validate the configuration (file, HOROLOGE_* env, flags), print it without secrets, and exit.",
)
def node(config_path, node_id, data_dir, http_addr, raft_addr, insecure_dev, join, log_format, check_config):
    """Run one node: HTTP API, Raft replication, and the wheel when master."""
    try:
        check_pysyncobj()
        cfg = load_config(
            config_path,
            node_id=node_id,
            data_dir=data_dir,
            http=http_addr,
            raft=raft_addr,
            insecure_dev=insecure_dev,
            join=join,
            log_format=log_format,
        )
    except (UnsupportedPysyncobjError, ConfigError) as e:
        raise click.ClickException(str(e)) from e
    if check_config:
        click.echo(
            f"{cfg.node_id}: {cfg.scheme} {cfg.http}, raft {cfg.raft} "
            f"(listening on {cfg.raft_listen}), data {cfg.data_dir}"
        )
        if cfg.join:
            click.echo(
                "  join = true: no vote until `horologe cluster add` makes it a member "
                "(once its log says it is one, it votes across restarts)"
            )
        if cfg.tls_cert:
            click.echo(f"  tls: certificate {cfg.tls_cert}, key {cfg.tls_key}")
        if cfg.tls_cert or cfg.tls_ca or any(cfg.http_url(p.http).startswith("https:") for p in cfg.peers):
            click.echo(f"  peers' certificates verified against {cfg.tls_ca or 'the system CAs'}")
        for p in cfg.peers:
            dial = p.dial or p.raft
            click.echo(f"  peer {p.node_id}: raft {p.raft} dialled at {dial}, http {cfg.http_url(p.http)}")
        for line in _settings(cfg):
            click.echo(f"  {line}")
        return
    try:
        run_node(cfg)
    except (DataDirInUseError, DataDirUnusableError) as e:
        raise click.ClickException(f"refusing to start: {e}") from e
    except ListenError as e:
        raise click.ClickException(f"{e} (http in the node config, or --http)") from e
    except CorruptLogError as e:  # its journal, its store's commit log or another file it opens
        raise click.ClickException(
            f"refusing to start: {e}. Committed data that fails its check is never read past or "
            'repaired by guess: replace this node (docs/cluster.md, "Damaged files").'
        ) from e


_SUMMED_UP = {
    "node_id",
    "data_dir",
    "http",
    "raft",
    "raft_bind",
    "peers",
    "join",
    "tls_cert",
    "tls_key",
    "tls_ca",
}


def _settings(cfg: NodeConfig) -> list[str]:
    """The settings the summary above leaves out, in TOML's syntax, those left at their
    default marked so; a secret only as set or not."""
    lines = []
    for f in dataclasses.fields(cfg):
        if f.name in _SUMMED_UP:
            continue
        value = getattr(cfg, f.name)
        if f.name in ENV_SECRETS:
            lines.append(f"{f.name}: {'set' if value else 'not set'} (not shown)")
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        shown = json.dumps(list(value) if isinstance(value, tuple) else value)
        lines.append(f"{f.name} = {shown}" + ("  # the default" if value == default else ""))
    return lines
