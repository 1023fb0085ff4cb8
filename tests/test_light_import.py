"""A light import (issue 18): ``import sessiontree`` loads only what ``Session`` needs.

Asserted on ``sys.modules`` of a fresh interpreter (never on time: the machines are noisy);
the time itself is in ``benches/bench_import.py`` and docs/benchmarks.md.
"""

from __future__ import annotations

import json
import subprocess
import sys

import sessiontree

HEAVY = (
    "asyncio",
    "concurrent.futures",
    "socket",
    "ssl",
    "tempfile",
    "sessiontree.summarizers",
    "sessiontree.summarizers.base",
    "sessiontree.orchestration",
    "sessiontree.autocompact",
    "sessiontree.compaction",
    "sessiontree.branch_summary",
    "sessiontree.token_counter",
    "sessiontree.listing",
    "sessiontree.fleet",
    "sessiontree.html",
    "sessiontree.rpc",
    "sessiontree.cli",
    "sessiontree.otel",
    "sessiontree.convert",
    "sessiontree.search",
    "sessiontree.scrub",
    "sessiontree.hooks",
    # the third-party packages the fleet, convert, export and otel paths use
    "pyarrow",
    "tqdm",
    "numpy",
    "pandas",
    "duckdb",
    "ray",
    "opentelemetry",
    "httpx",
    "jinja2",
    "pydantic",
    # stdlib modules no open/read/append needs
    "subprocess",
    "multiprocessing",
    "logging",
    "hashlib",
    "secrets",
    "shutil",
    "zlib",
)


def _heavy_in(loaded: set[str]) -> list[str]:
    """The :data:`HEAVY` names in ``loaded``, a package counting when any of its modules is."""
    return sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in loaded))


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_loads_no_heavy_module():
    loaded = _modules_after("import sessiontree")
    # the package and its errors only (issue 32: no typing, re, pathlib; the core extension
    # loads with the first name that needs it)
    assert {m for m in loaded if m.split(".")[0] == "sessiontree"} == {"sessiontree", "sessiontree.errors"}
    assert not {"typing", "pathlib"} & loaded  # (re and enum: the json this check prints with)
    assert _heavy_in(loaded) == []
    loaded = _modules_after("from sessiontree import Session")
    assert "sessiontree.session" in loaded and "sessiontree._core" in loaded
    assert _heavy_in(loaded) == []


def test_the_search_command_loads_no_session(tmp_path):
    # `sessiontree search` needs the sources, the core's search and the output: not Session
    (tmp_path / "s.jsonl").write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}\n'
    )
    code = (
        "import contextlib, io, os, sys\n"
        f"os.environ['SESSIONTREE_INDEX_CACHE'] = {str(tmp_path / 'cache')!r}\n"
        "from sessiontree.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['search', 'zzz', {str(tmp_path)!r}, '--json']) == 0\n"
    )
    loaded = _modules_after(code)
    assert "sessiontree.search_hits" in loaded
    assert "sessiontree.session" not in loaded and "sessiontree.context" not in loaded


def test_heavy_check_sees_a_heavy_import():
    # the check above is live: importing one of the lazy packages is caught, by its submodules too
    loaded = _modules_after("import sessiontree\nimport sessiontree.fleet")
    assert "sessiontree.fleet" in _heavy_in(loaded)
    assert _heavy_in({"pyarrow.lib"}) == ["pyarrow"]
    assert _heavy_in({"pyarrowx", "sessiontree.session"}) == []


def test_every_listed_name_resolves_in_a_fresh_interpreter():
    # dir() and __all__ of a fresh ``import sessiontree`` (no other test's imports): every public
    # name resolves to a real object, the lazy ones to the object of the module they come from
    code = (
        "import sessiontree, json\n"
        "names = [n for n in dir(sessiontree) if not n.startswith('_')]\n"
        "missing = [n for n in names + sessiontree.__all__ if getattr(sessiontree, n, None) is None]\n"
        "print(json.dumps([sorted(set(names) - set(sessiontree.__all__)), missing]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    extra, missing = json.loads(out.splitlines()[-1])
    assert missing == []
    assert set(sessiontree.__all__) <= set(dir(sessiontree))
    # what dir() lists beyond __all__ is the loaded submodules and the typing names the module
    # itself uses, never a stray helper (``importlib`` stays inside ``__getattr__``)
    assert set(extra) <= _SUBMODULES | {"annotations", "Any", "TYPE_CHECKING"}, extra


_SUBMODULES = {
    "context",
    "entries",
    "errors",
    "session",
    "settings",
    "tokens",
    "usage",
    "index_cache",
    "paths",
    "writer",
    "migrate",
    "results",
    "provider_context",
    "validation",
    "entry_types",
    "message_shape",
}


def test_open_and_build_context_stay_light(tmp_path):
    # the per-turn path (open, context, tokens, tree) needs none of the heavy modules either
    s = sessiontree.Session.create(str(tmp_path), session_dir=str(tmp_path))
    s.append_message({"role": "user", "content": "hi", "timestamp": 0})
    path = s.path
    s.close()
    code = (
        "import sessiontree\n"
        f"s = sessiontree.Session.open({str(path)!r})\n"
        "s.build_context(); s.get_tree(); s.find_cut_point(100); s.context_table()\n"
    )
    loaded = _modules_after(code)
    assert sorted(m for m in ("asyncio", "sessiontree.summarizers", "sessiontree.orchestration") if m in loaded) == []


def test_every_public_name_importable_and_listed():
    code = "from sessiontree import *\nimport sessiontree\n"
    names = list(sessiontree.__all__)
    listed = dir(sessiontree)
    for name in names:
        assert name in listed, name
        exec(f"from sessiontree import {name}", {})
        assert getattr(sessiontree, name) is not None
    # a star import gets them all, in a fresh interpreter too
    loaded = _modules_after(code + f"assert all(n in globals() for n in {names!r})")
    assert "sessiontree.orchestration" in loaded  # a star import does load the lazy names


def test_lazy_names_are_the_real_objects():
    from sessiontree.autocompact import AutoCompactor
    from sessiontree.orchestration import CompactionResult
    from sessiontree.summarizers.base import SummarizerError

    assert sessiontree.AutoCompactor is AutoCompactor
    assert sessiontree.CompactionResult is CompactionResult
    assert sessiontree.SummarizerError is SummarizerError
    assert issubclass(sessiontree.SummarizerError, sessiontree.SessionTreeError)


def test_unknown_name_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError):
        sessiontree.NoSuchName  # noqa: B018
    with pytest.raises(ImportError):
        exec("from sessiontree import NoSuchName", {})


def test_light_named_tuples_build_no_forward_refs():
    # their modules keep annotations as objects (no ``from __future__ import annotations``), so
    # ``typing.NamedTuple`` does not compile a ForwardRef per field at import
    import typing

    from sessiontree import entries, entry_types, provider_context

    tuples = [
        v
        for mod in (entries, entry_types, provider_context)
        for v in vars(mod).values()
        if isinstance(v, type) and issubclass(v, tuple) and hasattr(v, "_fields") and v.__module__ == mod.__name__
    ]
    assert len(tuples) >= 13
    refs = [(t.__name__, n) for t in tuples for n, a in t.__annotations__.items() if isinstance(a, typing.ForwardRef)]
    assert refs == []
    # and the hints resolve as before
    assert typing.get_type_hints(entries.CutPoint)["first_kept_entry_id"] == str | None
