"""Network faults by hand, on any toxiproxy whose proxies follow the suite's names
(``raft_n<i>_to_n<j>``, ``http_n<i>``), such as the docker-compose deployment's:

\b
    python -m chaos_tests.faults isolate n2     # cut n2 off from both peers
    python -m chaos_tests.faults cut n1 n3      # drop what n1 sends n3; n3 -> n1 still flows
    python -m chaos_tests.faults latency        # 100 ms +- 50 ms on every Raft link
    python -m chaos_tests.faults heal           # every proxy back, every toxic gone
    python -m chaos_tests.faults show           # the proxies and their toxics

The server is ``--url``, or ``TOXIPROXY_URL``, or http://127.0.0.1:8474.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import click
from toxiproxy import Toxiproxy

from .topology import Topology


def _node(value: str) -> int:
    if not (value.startswith("n") and value[1:].isdigit() and int(value[1:]) >= 1):
        raise click.BadParameter(f"a node is n1, n2, ...; got {value!r}")
    return int(value[1:]) - 1


@click.group(help=__doc__, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar="TOXIPROXY_URL", default="http://127.0.0.1:8474", show_default=True)
@click.pass_context
def main(ctx: click.Context, url: str) -> None:
    parts = urlsplit(url)
    client = Toxiproxy()
    client.update_api_consumer(parts.hostname, parts.port or 8474)
    if not client.running():
        raise click.ClickException(f"no toxiproxy answers at {url}")
    try:
        ctx.obj = Topology.attach(client)
    except LookupError as e:
        raise click.ClickException(f"{url}: {e}") from e


@main.command()
@click.argument("node")
@click.pass_obj
def isolate(topology: Topology, node: str) -> None:
    """Disable every Raft proxy to or from NODE."""
    topology.isolate(_node(node))
    click.echo(f"{node} isolated; `heal` undoes it")


@main.command()
@click.argument("src")
@click.argument("dst")
@click.pass_obj
def cut(topology: Topology, src: str, dst: str) -> None:
    """Drop the Raft bytes SRC sends DST (one way)."""
    topology.cut(_node(src), _node(dst))
    click.echo(f"{src} -> {dst} cut; `heal` undoes it")


@main.command()
@click.option("--ms", default=100, show_default=True, help="Added delay.")
@click.option("--jitter", default=50, show_default=True, help="Plus or minus this much.")
@click.pass_obj
def latency(topology: Topology, ms: int, jitter: int) -> None:
    """Delay both directions of every Raft link."""
    topology.raft_latency(ms, jitter)
    click.echo(f"{ms} ms +- {jitter} ms on every Raft link; `heal` undoes it")


@main.command()
@click.pass_obj
def heal(topology: Topology) -> None:
    """Enable every proxy and remove every toxic."""
    topology.heal()
    click.echo("healed")


@main.command()
@click.pass_obj
def show(topology: Topology) -> None:
    """List the proxies, whether they are enabled, and their toxics."""
    for name, p in sorted(topology.client.proxies().items()):
        toxics = ", ".join(sorted(p.toxics())) or "-"
        click.echo(f"{name:16} {p.listen:22} -> {p.upstream:22} {'up' if p.enabled else 'DOWN':4} {toxics}")


if __name__ == "__main__":
    main()
