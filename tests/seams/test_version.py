"""One version (issue 22): ``Cargo.toml`` holds it; the package metadata, ``sessiontree.__version__``,
the core's ``_core.__version__`` and ``sessiontree --version`` all report that one."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import sessiontree
from sessiontree import _core

ROOT = Path(__file__).resolve().parent.parent.parent


def cargo_version() -> str:
    return tomllib.loads((ROOT / "Cargo.toml").read_text())["package"]["version"]


def test_pyproject_reads_the_version_from_cargo():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project, "the version is typed once, in Cargo.toml"
    assert "version" in project.get("dynamic", [])


def test_every_place_reports_the_cargo_version():
    v = cargo_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:[-.+][0-9A-Za-z.]+)?", v)
    assert _core.__version__ == v
    assert sessiontree.__version__ == v
    assert importlib.metadata.version("sessiontree") == v


def test_cli_version_is_the_cargo_version():
    out = subprocess.run(
        [sys.executable, "-m", "sessiontree", "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == f"sessiontree {cargo_version()}"


def test_changelog_names_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in text
    assert re.search(rf"^## \[{re.escape(cargo_version())}\]", text, re.M), "CHANGELOG.md has a section for it"
    assert re.search(r"^## \[Unreleased\]", text, re.M)
