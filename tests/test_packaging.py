"""The wheel ships every package of the source folders (pyproject.toml lists them by hand).

A folder left out installs without error and fails only where the wheel is installed
(the Docker image: every node unhealthy on an ImportError), so the list is checked here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_folder_with_an_init_under_a_shipped_package_dir_is_listed():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for dotted, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((dotted, *rel)))
    missing = sorted(name for name in found - listed if "__pycache__" not in name)
    assert missing == []
