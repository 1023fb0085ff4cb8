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
)


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
    assert "sessiontree.session" in loaded and "sessiontree._core" in loaded
    assert sorted(m for m in HEAVY if m in loaded) == []


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
