"""The CLI is a client of the public API: only the modules that own the Rust core touch it, and
nothing outside ``Session``'s own modules reaches into a ``Session``'s private members."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import sessiontree

PKG = Path(sessiontree.__file__).parent
#: The package internals that own the core: the Session facade (the ``session/`` folder, every
#: module in it) and its entry views, and the JavaScript rules and the clock Python takes from
#: Rust (Date parsing, JS number text, the ISO clock). Everything else reaches the core through
#: them (the scrubber and the HTML digest are handed out by ``session/``, the version by
#: ``paths.py``), and the search's one call into the core (``search_hits.py``, light so that
#: ``sessiontree search`` loads no ``Session``). A name ending in ``/`` is a folder.
CORE_OWNERS = {"session/", "entries.py", "_jsjson.py", "paths.py", "index_cache.py", "search_hits.py"}


def _owns_core(rel: str, owners: set[str] = CORE_OWNERS) -> bool:
    """Whether the module at ``rel`` (relative to the package, ``/``-separated) is a core owner."""
    return rel in owners or any(o.endswith("/") and rel.startswith(o) for o in owners)


def _names(path: Path) -> list[tuple[int, str, str]]:
    """(line, token, previous two tokens joined) for every NAME token (comments and strings excluded)."""
    out = []
    prev: list[str] = ["", ""]
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in (tokenize.NAME, tokenize.OP):
            if tok.type == tokenize.NAME:
                out.append((tok.start[0], tok.string, "".join(prev)))
            prev = [prev[1], tok.string]
    return out


def test_no_core_use_outside_the_modules_that_own_it():
    found = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG).as_posix()
        if _owns_core(rel):
            continue
        found += [f"{rel}:{line}" for line, name, _ in _names(f) if name == "_core"]
    assert found == []


#: Clients of the public API: the CLIs, the RPC server and the fleet package (which must scale
#: through the public batch views, never through the facade's internals).
def _package(name: str) -> list[str]:
    """A module of the package or, once it is a package, every module in it."""
    if (PKG / f"{name}.py").exists():
        return [f"{name}.py"]
    return sorted(f.relative_to(PKG).as_posix() for f in (PKG / name).rglob("*.py"))


CLIENTS = [*_package("cli"), *_package("rpc"), *_package("fleet")]


def test_the_fleet_is_among_the_clients_checked():
    assert {"fleet/__init__.py", "fleet/_rows.py", "fleet/_compact.py", "cli/fleet.py", "cli/read.py"} <= set(CLIENTS)


def test_clients_use_no_private_session_members():
    private = [
        f"{client}:{line}: {before}{name}"
        for client in CLIENTS
        for line, name, before in _names(PKG / client)
        if name.startswith("_") and not name.startswith("__") and before in ("s.", "session.")
    ]
    assert private == []


def _private_uses(path: Path, text: str | None = None) -> list[str]:
    """``x._name`` attribute accesses in ``path`` (found by AST; ``text``: its source, default
    read) on anything but ``self``/``cls``, except names the module itself defines (its own
    classes' members and module globals)."""
    tree = ast.parse(path.read_text() if text is None else text)
    own: set[str] = set()
    # classes defined here: their members, inherited ones included (a registry naming
    # ``RpcServer._get_entries`` of its own mixins), are the module's own
    classes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.alias):
            own.add(node.asname or node.name.split(".")[0])
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in own:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", *classes):
            continue
        found.append(
            f"{path.name if text is not None else path.relative_to(PKG).as_posix()}:{node.lineno}: {ast.unparse(node)}"
        )
    return found


def _above_the_facade() -> list[Path]:
    from tests.seams.test_layers import FACADE, floor_of
    from tests.seams.test_module_layout import MODULES

    return [p for m, p in sorted(MODULES.items()) if (floor_of(m) or 0) > FACADE]


def test_modules_above_the_facade_use_no_private_members_of_others():
    files = _above_the_facade()
    assert {"orchestration.py", "autocompact.py", "html/__init__.py", "hooks.py"} <= {
        f.relative_to(PKG).as_posix() for f in files
    }
    assert [u for f in files for u in _private_uses(f)] == []


def test_the_entry_views_and_pure_rules_use_no_private_members_of_others():
    # Pi's rules take what they need (buildSessionContext(entries, ...)); an Entry reads the
    # EntryView its session hands it, never ``session._core``
    from tests.seams.test_layers import FLOORS, floor_of
    from tests.seams.test_module_layout import MODULES

    floors = {k for k, (name, _) in enumerate(FLOORS) if name in ("entry views", "pure rules")}
    files = [p for m, p in sorted(MODULES.items()) if floor_of(m) in floors]
    assert {"entries.py", "context.py", "compaction.py"} <= {f.relative_to(PKG).as_posix() for f in files}
    assert [u for f in files for u in _private_uses(f)] == []


def test_the_private_use_check_finds_private_access():
    probe = (
        "class C:\n    def __init__(self):\n        self._mine = 1\n"
        "def g(session, s, c):\n    return session._span(), s._core.leaf(), s._load_raw(0), c._mine, self._x\n"
    )
    got = _private_uses(Path("probe.py"), probe)
    assert sorted(u.split(": ", 1)[1] for u in got) == ["s._core", "s._load_raw", "session._span"]


def _core_importers(files: dict[str, str]) -> set[str]:
    """The modules (``{relative path: source}``) that import ``_core``, at any depth."""
    importers = set()
    for rel, text in files.items():
        for node in ast.walk(ast.parse(text)):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module or ''}.{a.name}" for a in node.names] + [node.module or ""]
            if any(n.split(".")[-1] == "_core" or n.endswith("._core") or n == "_core" for n in names):
                importers.add(rel)
    return importers


def _core_owner_violations(files: dict[str, str], owners: set[str] = CORE_OWNERS) -> list[str]:
    """Modules importing ``_core`` that are not core owners, checked per folder."""
    return sorted(rel for rel in _core_importers(files) if not _owns_core(rel, owners))


def test_only_the_core_owners_import_the_core():
    files = {f.relative_to(PKG).as_posix(): f.read_text() for f in sorted(PKG.rglob("*.py"))}
    assert _core_owner_violations(files) == []
    importers = _core_importers(files)
    # every owner imports it (a stale entry in the list would hide nothing, but would mislead)
    assert {o for o in CORE_OWNERS if not any(_owns_core(r, {o}) for r in importers)} == set()
    assert {"session/__init__.py", "session/views.py"} <= importers


def test_the_core_owner_check_fails_on_a_planted_importer():
    planted = {
        "session/reads.py": "from .. import _core\n",
        "html/page.py": "def f():\n    from .. import _core\n    return _core\n",
        "listing.py": "import sessiontree._core as c\n",
        "entries.py": "from . import _core\n",
    }
    assert _core_owner_violations(planted) == ["html/page.py", "listing.py"]


def _package_of(name: str, sources: dict) -> str | None:
    """The subpackage ``sessiontree.<pkg>`` a module belongs to (None: a top-level module)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and sources[name][0]) else None


def _private_imports(sources: dict[str, tuple[bool, str]], floor_of) -> list[str]:
    """``from x import _name`` (anywhere in the module) where ``x`` is another package's module:
    allowed inside one subpackage (``cli/``, ``rpc/``...) and between top-level modules of one
    floor; ``_core`` has its own owners' check. ``sources``: ``{dotted name: (is a package's
    __init__, source text)}``; ``floor_of``: the layer test's."""
    found = []
    for name, (is_pkg, text) in sources.items():
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.ImportFrom):
                continue
            mod = node.module or ""
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            for a in node.names:
                if not a.name.startswith("_") or a.name.startswith("__") or a.name == "_core":
                    continue
                target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in sources else mod
                if target not in sources:
                    continue
                mine, theirs = _package_of(name, sources), _package_of(target, sources)
                if mine is not None and mine == theirs:
                    continue
                if mine is None and theirs is None and floor_of(name) == floor_of(target):
                    continue
                found.append(f"{name}: from {mod} import {a.name}")
    return sorted(found)


def test_no_private_name_is_imported_across_packages():
    from tests.seams.test_import_graph import package_sources
    from tests.seams.test_layers import floor_of

    assert _private_imports(package_sources(), floor_of) == []


def test_the_private_import_check_finds_a_planted_crossing():
    from tests.seams.test_layers import floor_of

    planted = {
        "sessiontree": (True, ""),
        "sessiontree.orchestration": (False, "def _usage_dict(u):\n    return u\n"),
        "sessiontree.autocompact": (False, "from .orchestration import _usage_dict\n"),  # one floor: allowed
        "sessiontree.results": (False, "def f():\n    from .orchestration import _usage_dict\n"),  # across floors
        "sessiontree.rpc": (True, "from .reads import _helper\n"),  # inside its package: allowed
        "sessiontree.rpc.reads": (False, "from ..hooks import _camel\nfrom .. import _core\n_helper = 1\n"),
        "sessiontree.hooks": (False, "_camel = str\n"),
        "sessiontree.cli": (True, ""),
        "sessiontree.cli.fleet": (False, "from ..rpc.reads import _helper as helper\n"),
    }
    assert _private_imports(planted, floor_of) == [
        "sessiontree.cli.fleet: from sessiontree.rpc.reads import _helper",
        "sessiontree.results: from sessiontree.orchestration import _usage_dict",
        "sessiontree.rpc.reads: from sessiontree.hooks import _camel",
    ]
