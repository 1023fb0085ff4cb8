"""The package's modules import on their own, import each other without cycles, and the
``Session`` facade's methods carry real return types."""

from __future__ import annotations

import ast
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import sessiontree
from sessiontree import CompactionResult, NavigationResult, ProviderContext, Session, SessionHooks, UsageTotals

PKG = Path(sessiontree.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


MODULES = _modules()
MODULES.pop("sessiontree.__main__")  # runs the CLI when imported


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_imports_alone_in_a_fresh_interpreter(name):
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(name: str, path: Path) -> set[str]:
    """Package modules ``name`` imports when it is imported (module level, outside
    ``if TYPE_CHECKING``; imports inside functions run later and are left out)."""
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()

    def visit(stmts: list) -> None:
        for node in stmts:
            if isinstance(node, ast.If):
                if not _is_type_checking(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)

    visit(ast.parse(path.read_text()).body)
    deps = set()
    for mod in found:
        parts = mod.split(".")
        # a submodule import also runs its parent packages' __init__, except the packages that
        # contain ``name`` (they are already importing when ``name`` runs)
        for k in range(2, len(parts) + 1):
            cand = ".".join(parts[:k])
            if cand in MODULES and cand != name and not name.startswith(cand + "."):
                deps.add(cand)
    return deps


def test_no_import_cycles_between_package_modules():
    graph = {name: _runtime_imports(name, path) for name, path in MODULES.items() if name != "sessiontree"}
    assert graph["sessiontree.orchestration"], "the graph sees imports"
    state: dict[str, int] = {}
    cycles = []

    def dfs(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                dfs(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            dfs(node, [])
    assert cycles == []


def test_session_facade_methods_have_real_return_types():
    hints = {
        m: typing.get_type_hints(getattr(Session, m)).get("return")
        for m in ("compact", "acompact", "navigate_tree", "anavigate_tree", "usage_totals", "build_provider_context")
    }
    assert hints == {
        "compact": CompactionResult,
        "acompact": CompactionResult,
        "navigate_tree": NavigationResult,
        "anavigate_tree": NavigationResult,
        "usage_totals": UsageTotals,
        "build_provider_context": ProviderContext,
    }
    assert typing.get_type_hints(Session.hooks.fget)["return"] is SessionHooks
