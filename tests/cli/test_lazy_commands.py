"""``horologe.cli`` imports a command's module only when that command is asked for, and its
table of commands (COMMANDS) says what the modules hold."""

from __future__ import annotations

import importlib
import subprocess
import sys

import click
import pytest

from horologe.cli import COMMANDS, main

# Run in a fresh interpreter: this one may have imported any of them already.
PROBE = """
import sys
from horologe.cli import main
try:
    main(sys.argv[1:], prog_name="horologe")
except SystemExit:
    pass
loaded = [m for m in sys.modules if m.split(".")[0] in ("horologe", "httpx", "pyspark", "pandas")]
print("loaded:", " ".join(sorted(loaded)))
"""


def loaded_after(*args: str) -> tuple[str, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True
    ).stdout
    shown, _, loaded = out.rpartition("loaded:")
    return shown, set(loaded.split())


def test_the_help_lists_every_command_and_imports_none_of_them():
    shown, loaded = loaded_after("--help")
    assert loaded == {"horologe", "horologe.cli"}  # not the SDK (httpx), the node, Spark ...
    for name in COMMANDS:
        assert f"\n  {name} " in shown


def test_a_command_imports_its_own_module_only():
    shown, loaded = loaded_after("schedule", "--help")
    assert "horologe.cli.schedules" in loaded and "first occurrence" in shown
    assert not loaded & {f"horologe.cli.{m}" for m, _ in COMMANDS.values() if m != "schedules"}
    assert not {m for m in loaded if m.startswith(("pyspark", "pandas", "horologe.node"))}


def test_every_listed_command_resolves_to_a_command_of_that_name():
    ctx = click.Context(main)
    assert main.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        cmd = main.get_command(ctx, name)
        assert isinstance(cmd, click.Command) and cmd.name == name
    assert main.get_command(ctx, "nosuch") is None


def _top_level_commands(module) -> set[str]:
    """The commands a module defines that are not a subcommand of one of its groups."""
    found = [v for v in vars(module).values() if isinstance(v, click.Command)]
    nested = {id(c) for g in found if isinstance(g, click.Group) for c in g.commands.values()}
    return {c.name for c in found if id(c) not in nested}


def test_each_module_holds_exactly_the_commands_listed_for_it():
    for module_name in {m for m, _ in COMMANDS.values()}:
        module = importlib.import_module(f"horologe.cli.{module_name}")
        assert _top_level_commands(module) == {n for n, (m, _) in COMMANDS.items() if m == module_name}


@pytest.mark.parametrize("width", [40, 80, 200])
def test_the_listed_one_line_help_is_each_command_own(width):
    """COMMANDS' summaries give the rows that importing every command would give."""

    def rows(format_commands) -> str:
        formatter = click.HelpFormatter(width=width)
        format_commands(main, click.Context(main), formatter)
        return formatter.getvalue()

    assert rows(type(main).format_commands) == rows(click.Group.format_commands)
