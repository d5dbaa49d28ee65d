"""The ``horologe`` command line.

One module of this package per group of commands (click's "complex application" layout).
:data:`COMMANDS` names each command's module and its one-line help: ``main`` imports a
module only when one of its commands is run or asked for its help, so ``horologe --help``
loads none of them, nor what they import (the node, the SDK, Spark).
"""

from __future__ import annotations

import importlib
from gettext import gettext as _

import click

from horologe import __version__

# command -> (module of this package, its one-line help as `horologe --help` lists it).
# The module holds the command as an attribute named like it, "-" written "_";
# tests/cli/test_lazy_commands.py checks that each resolves and says the same.
COMMANDS: dict[str, tuple[str, str]] = {
    "backup": ("backup", "Copy a running node's store into a new folder, consistent at one Raft index."),
    "cancel": ("messages", "Cancel a scheduled message by MESSAGE_ID, or by --topic and --key."),
    "cluster": ("cluster", "The cluster's membership: list, add and remove nodes, one at a time, online."),
    "consume": ("messages", "Print messages as they arrive, one JSON line each, and ack them."),
    "forecast": ("messages", "How many pending messages fall due in each minute, hour or day."),
    "local-cluster": ("local", "Start NODES node processes on 127.0.0.1 and keep them running until Ctrl-C."),
    "node": ("node", "Run one node: HTTP API, Raft replication, and the wheel when master."),
    "pending": (
        "messages",
        "List a topic's pending messages in the order they will fire, one JSON line each.",
    ),
    "produce": ("messages", "Schedule one message; prints its id and deliver time (epoch ms)."),
    "release-master": ("admin", "Make the master hand over: final sync, release marker, Raft transfer."),
    "restore": ("backup", "Make DATA_DIR a node's data folder holding exactly what BACKUP_DIR holds."),
    "reschedule": (
        "messages",
        "Move a scheduled message to a new time (--at or --after); its id stays the same.",
    ),
    "schedule": (
        "schedules",
        "Recurring schedules: a message to a topic at every fire time of a cron expression.",
    ),
    "spark": ("spark", "Batch jobs on Spark: bulk scheduling from files, audits of a node's store."),
    "status": ("admin", "Show MESSAGE_ID's state, or the node's status when no id is given."),
    "storage": ("storage", "Inspect and verify a stopped node's store folder, or a backup of a running one."),
    "subscription": (
        "subscriptions",
        "Push subscriptions: the master POSTs a group's messages, signed, to a URL of yours.",
    ),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported from their modules on first use."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return super().get_command(ctx, name)
        module = importlib.import_module(f"{__name__}.{self.lazy[name][0]}")
        return getattr(module, name.replace("-", "_"))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, but with the one-line help of COMMANDS: listing imports no command."""
        rows = [(name, self.lazy[name][1] if name in self.lazy else None) for name in self.list_commands(ctx)]
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _help in rows)
        shown = []
        for name, summary in rows:
            cmd = click.Command(name, help=summary) if summary is not None else self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                shown.append((name, cmd.get_short_help_str(limit)))
        with formatter.section(_("Commands")):
            formatter.write_dl(shown)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="horologe")
@click.option(
    "--retry-for",
    type=click.FloatRange(min=0),
    default=15.0,
    show_default=True,
    envvar="HOROLOGE_RETRY_FOR",
    show_envvar=True,
    metavar="SECONDS",
    help="How long a command that reaches the cluster keeps trying while no node answers "
    "or there is no master; 0: once. Give it before the command: horologe --retry-for 2 status.",
)
def main(retry_for: float) -> None:
    """Horologe: a replicated delayed-message service.

    Start a local cluster with `horologe local-cluster`, then use produce, status and
    release-master against it. Tokens come from --token / HOROLOGE_CLIENT_TOKEN and
    --admin-token / HOROLOGE_ADMIN_TOKEN. For nodes serving HTTPS, give https:// URLs and
    --ca / HOROLOGE_CA, the CA that signed their certificates (always verified).
    """
