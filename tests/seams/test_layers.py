"""The layers of docs/architecture.md in the code (issue 21): every package module sits on one
floor, and what a module imports when it is imported (module level, outside ``TYPE_CHECKING``)
is on its own floor or below. A module above a floor reaches it only through functions it
imports later (``Session.compact`` imports the orchestration inside the method).

A new module fails :func:`test_every_module_is_on_a_floor` until it is placed here (and in the
architecture table)."""

from __future__ import annotations

import pytest

from tests.seams.test_module_layout import MODULES, _runtime_imports

#: Floors from the bottom up; a name ending in ``.*`` is a package and everything in it.
FLOORS: list[tuple[str, set[str]]] = [
    (
        "bottom",
        {
            "_core",
            "errors",
            "settings",
            "results",
            "_jsjson",
            "paths",
            "migrate",
            "message_shape",
            "index_cache",
            "writer",
            "providers",
            "entry_types",
            "_progress",
            "_local_sources",
        },
    ),
    ("entry views", {"entries"}),
    ("pure rules", {"tokens", "usage", "context", "compaction", "branch_summary", "provider_context"}),
    ("checks", {"validation"}),
    ("facade", {"session", "session.*"}),
    ("orchestration", {"hooks", "orchestration", "autocompact", "token_counter", "summarizers", "summarizers.*"}),
    (
        "streaming views",
        {"listing", "scrub", "convert", "html", "html.*", "otel", "otel.*", "searching", "search_hits"},
    ),
    (
        "clients",
        {"cli", "cli.*", "rpc", "rpc.*", "fleet", "fleet.*", "__main__", ""},
    ),
]
FACADE = next(k for k, (name, _) in enumerate(FLOORS) if name == "facade")


def floor_of(module: str) -> int | None:
    """The floor of ``sessiontree.<name>`` (``""``: the package's ``__init__``), or None."""
    name = module.removeprefix("sessiontree").removeprefix(".")
    for k, (_, names) in enumerate(FLOORS):
        for n in names:
            if name == n or (n.endswith(".*") and name.startswith(n[:-1])):
                return k
    return None


def test_every_module_is_on_a_floor():
    assert [m for m in sorted(MODULES) if floor_of(m) is None] == []
    assert floor_of("sessiontree.rpc.server") == floor_of("sessiontree.cli.render") == len(FLOORS) - 1


def upward_imports(name: str, path) -> list[str]:
    """The package modules above ``name``'s floor that its source at ``path`` imports at module level."""
    own = floor_of(name) or 0
    return sorted(dep for dep in _runtime_imports(name, path) if (floor_of(dep) or 0) > own)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_only(name):
    assert upward_imports(name, MODULES[name]) == [], f"{name} imports from above its floor at module level"


def test_the_layer_check_finds_a_planted_upward_import(tmp_path):
    # a facade module importing the orchestration at module level, one importing it inside a
    # method (allowed: it runs later), and one importing a pure rule (below it)
    probe = tmp_path / "reads.py"
    probe.write_text("from ..orchestration import acompact\nfrom ..context import build_session_context\n")
    assert upward_imports("sessiontree.session.reads", probe) == ["sessiontree.orchestration"]
    probe.write_text("def f():\n    from ..orchestration import acompact\n\nfrom ..context import latest_compaction\n")
    assert upward_imports("sessiontree.session.reads", probe) == []
    probe.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..cli import main\n")
    assert upward_imports("sessiontree.session.reads", probe) == []


def test_the_facade_imports_nothing_above_it():
    facade = [m for m in MODULES if floor_of(m) == FACADE]
    assert {"sessiontree.session", "sessiontree.session.reads", "sessiontree.session.writes"} <= set(facade)
    deps = set().union(*(_runtime_imports(m, MODULES[m]) for m in facade)) - set(facade)
    assert {floor_of(d) for d in deps} <= set(range(FACADE))
    assert not deps & {
        "sessiontree.orchestration",
        "sessiontree.hooks",
        "sessiontree.html",
        "sessiontree.listing",
        "sessiontree.scrub",
    }


def test_pure_rules_import_no_settings_or_summarizer_module_above_them():
    pure = FLOORS[2][1]
    for name in pure:
        deps = _runtime_imports(f"sessiontree.{name}", MODULES[f"sessiontree.{name}"])
        assert not {d for d in deps if d.startswith("sessiontree.summarizers")}, name
    assert floor_of("sessiontree.settings") == 0, "settings is on the bottom floor, under the pure rules"


def test_no_cli_module_is_over_600_lines_and_the_fleet_cli_is_inside():
    from tests.seams.test_module_layout import PKG

    sizes = {f.name: len(f.read_text().splitlines()) for f in (PKG / "cli").glob("*.py")}
    assert {"render.py", "read.py", "compact.py", "write.py", "fleet.py", "args.py", "app.py"} <= set(sizes)
    assert {k: v for k, v in sizes.items() if v > 600} == {}
    assert not (PKG / "cli.py").exists() and not (PKG / "_fleet_cli.py").exists()


def test_session_has_two_append_paths_and_no_file_io_of_its_own():
    import ast

    from tests.seams.test_module_layout import PKG

    trees = [ast.parse(f.read_text()) for f in sorted((PKG / "session").glob("*.py"))]
    assert not (PKG / "session.py").exists()
    methods = {n.name for tree in trees for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert sorted(m for m in methods if m.startswith("_append")) == ["_append_built", "_append_field"]
    # the atomic writes, temp-file cleanup, rewrites and copies live in writer.py
    assert not {"atomic_write", "atomic_writer", "remove_stale_temp_files", "_fsync_dir", "_check_target"} & methods
    assert not [n for tree in trees for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "AtomicWriter"]
    from sessiontree import session, writer

    assert session.atomic_write is writer.atomic_write and session.atomic_writer is writer.atomic_writer


def test_command_line_modules_live_in_the_cli_and_rpc_packages():
    # argparse parsers are built in cli/ (and rpc/cli.py: Pi's own flags of `sessiontree rpc`); a
    # command's module outside them (the old _scrub_cli.py) is a client module in the wrong place
    import ast

    def imports(path) -> set[str]:
        tree = ast.parse(path.read_text())
        return {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}

    outside = [m for m in sorted(MODULES) if not m.startswith(("sessiontree.cli", "sessiontree.rpc"))]
    assert [m for m in outside if "argparse" in imports(MODULES[m])] == []
