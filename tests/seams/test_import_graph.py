"""The package's module import graph has no circle, imports inside functions included.

The layer test (``test_layers.py``) looks at what a module imports when it is imported; an
import inside a function runs later, so it cannot make an import fail, but it still ties the
two modules together: a circle of such imports is one knot of modules that cannot be read,
tested or changed apart. This test draws every import (module level, inside functions and
methods; ``if TYPE_CHECKING:`` blocks left out, they never run) and fails on any circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessiontree

PKG = Path(sessiontree.__file__).parent


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(name: str, is_pkg: bool, tree: ast.Module) -> set[str]:
    """Dotted names ``name``'s source imports anywhere (a ``from m import x`` gives ``m`` and
    ``m.x``), leaving out the bodies of ``if TYPE_CHECKING:``."""
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names)
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph(sources: dict[str, tuple[bool, str]]) -> dict[str, set[str]]:
    """``{module: modules it imports}`` over ``sources`` (``{dotted name: (is a package's
    __init__, source text)}``). An import names the deepest module of the package it reaches
    (``from .session import Session`` is ``session``); a module's own parent packages are left
    out (they are importing when it runs)."""
    graph: dict[str, set[str]] = {}
    for name, (is_pkg, text) in sources.items():
        deps = set()
        for mod in _imported(name, is_pkg, ast.parse(text)):
            parts = mod.split(".")
            deepest = next(
                (".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in sources), None
            )
            if deepest is not None and deepest != name and not name.startswith(deepest + "."):
                deps.add(deepest)
        graph[name] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative), each
    sorted; a module importing itself is left out (it is not a tie between two)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, deps = work[-1]
            for dep in deps:
                if dep not in index:
                    index[dep] = low[dep] = counter
                    counter += 1
                    stack.append(dep)
                    on.add(dep)
                    work.append((dep, iter(sorted(graph.get(dep, ())))))
                    break
                if dep in on:
                    low[node] = min(low[node], index[dep])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def package_sources() -> dict[str, tuple[bool, str]]:
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join(parts)] = (is_pkg, f.read_text())
    return out


def test_the_package_has_no_import_circle_inner_imports_included():
    graph = import_graph(package_sources())
    # the graph sees imports inside functions (the facade loads the orchestration in a method)
    assert "sessiontree.orchestration" in graph["sessiontree.session.delegates"]
    assert circles(graph) == []


def test_the_circle_check_finds_a_planted_circle_through_an_inner_import():
    planted = {
        "pkg": (True, "from .a import A\n"),
        "pkg.a": (False, "from .b import B\nA = 1\n"),
        "pkg.b": (False, "def f():\n    from .sub.c import C\n    return C\nB = 2\n"),
        "pkg.sub": (True, ""),
        "pkg.sub.c": (
            False,
            "import pkg.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..d import D\n",
        ),
        "pkg.d": (False, "from .sub import c\n"),
    }
    graph = import_graph(planted)
    assert graph["pkg.b"] == {"pkg.sub.c"}  # the inner import counts
    assert "pkg.d" not in graph["pkg.sub.c"]  # a TYPE_CHECKING import does not
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    # the module level alone has no circle: only the inner import closes it
    planted["pkg.b"] = (False, "B = 2\n")
    assert circles(import_graph(planted)) == []
