"""``horologe local-cluster``: a cluster of node processes on this machine."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time

import click

from horologe import local_cluster as lc
from horologe.client import HorologeError
from horologe.local_supervisor import Supervisor

OUTPUT_GONE = (errno.EPIPE, errno.EIO)  # a write to a closed pipe, to a terminal that was closed


@click.command("local-cluster")
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(1, 9))
@click.option(
    "--data",
    default="data/local",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where configs, data and logs go.",
)
@click.option(
    "--http-port",
    default=8081,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="First HTTP port; nodes take consecutive ones.",
)
@click.option(
    "--raft-port", default=7081, show_default=True, type=click.IntRange(1, 65535), help="First Raft port."
)
@click.option("--demo/--no-demo", default=False, help="Schedule a few messages and show them delivered.")
@click.option("--exit-after-demo", is_flag=True, help="Stop the cluster when the demo is done.")
@click.option(
    "--restart",
    type=click.Choice(["never", "on-failure"]),
    default="never",
    show_default=True,
    help="When a node dies: leave it down until a SIGHUP to local-cluster, or restart it by "
    "itself when it exited with an error or by a signal.",
)
@click.option(
    "--restart-delay",
    default=3.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds before an on-failure restart.",
)
@click.option(
    "--make-run-began",
    type=float,
    default=None,
    hidden=True,
    help="When `make run` began (epoch seconds): the demo times its first delivery from then.",
)
def local_cluster(
    nodes, data, http_port, raft_port, demo, exit_after_demo, restart, restart_delay, make_run_began
) -> None:
    """Start NODES node processes on 127.0.0.1 and keep them running until Ctrl-C.

    When a node dies the others go on: it prints which one and how to bring it back
    (SIGHUP to local-cluster restarts every dead node, or --restart on-failure). Tokens and
    the cluster secret come from HOROLOGE_CLIENT_TOKEN, HOROLOGE_ADMIN_TOKEN and
    HOROLOGE_CLUSTER_SECRET when set; otherwise they are generated and printed.
    Node logs go to DATA/n<i>.log.
    """
    began = time.monotonic()
    for option, first in (("--http-port", http_port), ("--raft-port", raft_port)):
        if first + nodes - 1 > 65535:
            raise click.BadParameter(f"{nodes} nodes from port {first} go past 65535", param_hint=option)
    http_ports, raft_ports = [http_port + i for i in range(nodes)], [raft_port + i for i in range(nodes)]
    if both := sorted(set(http_ports) & set(raft_ports)):
        raise click.BadParameter(
            f"the HTTP ports {http_port}-{http_ports[-1]} and the Raft ports {raft_port}-{raft_ports[-1]} "
            f"share {', '.join(map(str, both))}",
            param_hint="--http-port/--raft-port",
        )
    if taken := lc.taken_ports(http_ports + raft_ports):
        raise click.ClickException(
            f"already in use on 127.0.0.1: port {', '.join(map(str, taken))} (another local-cluster?); "
            'start elsewhere with --http-port and --raft-port (make run: RUN_ARGS="--http-port 9081 '
            '--raft-port 9071")'
        )
    if running := lc.running_nodes(data, nodes):
        raise click.ClickException(
            f"{data} is in use by running nodes: {', '.join(running)} (another local-cluster?); "
            "stop them first, or start elsewhere with --data"
        )
    env, generated = lc.secrets_env()
    try:
        configs = lc.write_configs(data, http_ports, raft_ports)
    except OSError as e:
        raise click.ClickException(f"cannot write the nodes' configs into {data}: {e.strerror}") from e
    urls = [f"http://127.0.0.1:{http_port + i}" for i in range(nodes)]
    procs: list = []  # filled one by one: a stop meanwhile stops those started
    supervisor = Supervisor(
        procs, configs, env, data, urls, restart=restart, delay_s=restart_delay, echo=click.echo
    )

    def on_signal(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, supervisor.request_restart)
    try:
        for config in configs:
            procs.append(lc.start_node(config, env, data))
        leader = lc.wait_ready(urls, procs=supervisor.procs, log_dir=data)
        click.echo(
            f"{nodes} nodes up; master is {leader} (ready {time.monotonic() - began:.1f} s after start)"
        )
        for i, u in enumerate(urls, 1):
            click.echo(
                f"  n{i}  {u}   pid {procs[i - 1].pid}   raft 127.0.0.1:{raft_port + i - 1}"
                f"   log {data}/n{i}.log"
            )
        if generated:
            click.echo("dev tokens (generated; export them to reuse):")
        for name in lc.TOKEN_ENV:
            click.echo(f"  export {name}={env[name]}")
        if demo:

            def first_shown() -> None:
                if make_run_began is None:
                    took, since = time.monotonic() - began, "local-cluster started"
                else:
                    took, since = time.time() - make_run_began, "make run began"
                click.echo(f"first delivery shown {took:.1f} s after {since}")

            lc.demo(urls[0], env["HOROLOGE_CLIENT_TOKEN"], click.echo, first_shown)
        if not exit_after_demo:
            click.echo(f"running (pid {os.getpid()}, --restart {restart}); Ctrl-C stops every node")
            supervisor.run()
    except KeyboardInterrupt:
        pass
    except lc.NodeExited as e:
        lc.stop(supervisor.procs)
        raise click.ClickException(str(e)) from e
    except (TimeoutError, HorologeError, click.ClickException) as e:
        lc.stop(supervisor.procs)
        raise click.ClickException(f"{e} (see {data}/n*.log)") from e
    except OSError as e:
        if e.errno not in OUTPUT_GONE:
            raise
        # Output closed (`| head`: EPIPE) or its terminal gone (a window closed: EIO): stop
        # the nodes, and say nothing more.
        for stream in (sys.stdout, sys.stderr):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    finally:
        with contextlib.suppress(OSError):  # output gone: the nodes stop all the same
            click.echo("stopping nodes...")
        lc.stop(supervisor.procs)
