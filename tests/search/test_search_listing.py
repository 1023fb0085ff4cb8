"""The search path's listing of local sources: the fleet's rules (one home,
``sessiontree._local_sources``), a folder's walk reused only while none of its directories
changed, and a search of local files that imports no ``fleet`` package."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from sessiontree import _local_sources as ls
from sessiontree import search
from sessiontree.fleet._sources import resolve_source

HEADER = '{"type":"session","version":3,"id":"%s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}\n'
LINE = (
    '{"type":"message","id":"%s","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z",'
    '"message":{"role":"user","content":"%s","timestamp":1}}\n'
)


def _session(p, sid: str, word: str) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(HEADER % sid + LINE % ("e1", word))


def _age(_d=None) -> None:
    """Lets the directories settle: past a clock tick, with the settling time made 0 (the
    ctime it checks cannot be set back)."""
    time.sleep(0.05)


@pytest.fixture(autouse=True)
def _fresh_walks(monkeypatch, request):
    ls._walks.clear()
    if "racy" not in request.node.name:
        monkeypatch.setattr(ls, "_SETTLED_NS", 0)
    yield
    ls._walks.clear()


def test_the_cached_walk_lists_what_the_fleet_lists(tmp_path):
    _session(tmp_path / "--a--" / "x.jsonl", "x", "w")
    _session(tmp_path / "--b--" / "y.jsonl", "y", "w")
    (tmp_path / "--b--" / "z.jsonl").mkdir()  # a directory named like a session: a row
    (tmp_path / "--b--" / "z.jsonl" / "inner.jsonl").write_text("")
    (tmp_path / "notes.txt").write_text("")
    os.symlink(tmp_path / "--a--", tmp_path / "link")  # a symlinked folder is not followed
    _age(tmp_path)
    want = sorted(it.path for it in resolve_source(str(tmp_path)))
    assert sorted(ls.walk_local_cached(str(tmp_path))) == want
    assert str(tmp_path) in ls._walks  # settled: kept
    assert sorted(ls.walk_local_cached(str(tmp_path))) == want


@pytest.mark.parametrize("change", ["add", "remove", "rename", "new_folder"])
def test_a_change_in_any_listed_directory_is_seen(tmp_path, change):
    _session(tmp_path / "--a--" / "x.jsonl", "x", "w")
    _session(tmp_path / "--a--" / "deep" / "y.jsonl", "y", "w")
    _age(tmp_path)
    root = str(tmp_path)
    ls.walk_local_cached(root)
    assert root in ls._walks
    deep = tmp_path / "--a--" / "deep"
    if change == "add":
        _session(deep / "new.jsonl", "n", "w")
    elif change == "remove":
        (deep / "y.jsonl").unlink()
    elif change == "rename":
        (deep / "y.jsonl").rename(deep / "y2.jsonl")
    else:
        _session(deep / "more" / "m.jsonl", "m", "w")
    assert sorted(ls.walk_local_cached(root)) == sorted(it.path for it in resolve_source(root))


def test_a_racy_walk_of_a_directory_changed_within_a_second_is_not_kept(tmp_path):
    # a change in the same clock tick as the walk could leave the mtime where it was
    _session(tmp_path / "--a--" / "x.jsonl", "x", "w")
    _session(tmp_path / "--a--" / "fresh.jsonl", "f", "w")  # --a-- changed just now
    assert len(ls.walk_local_cached(str(tmp_path))) == 2
    assert str(tmp_path) not in ls._walks
    time.sleep(1.1)  # settled since: the next walk is kept
    assert len(ls.walk_local_cached(str(tmp_path))) == 2
    assert str(tmp_path) in ls._walks


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any directory")
def test_a_walk_with_an_unlistable_directory_is_not_kept(tmp_path):
    _session(tmp_path / "--a--" / "x.jsonl", "x", "w")
    (tmp_path / "--b--").mkdir()
    os.chmod(tmp_path / "--b--", 0)
    try:
        _age(tmp_path)
        ls.walk_local_cached(str(tmp_path))
        assert str(tmp_path) not in ls._walks
    finally:
        os.chmod(tmp_path / "--b--", 0o700)


def test_an_unlistable_directory_is_marked_in_visited(tmp_path, monkeypatch):
    # (as root, which lists anything, the failure is simulated: os.walk's onerror path)
    (tmp_path / "--a--").mkdir()
    real = os.scandir

    def scandir(p):
        if str(p).endswith("--a--"):
            raise PermissionError(13, "denied", str(p))
        return real(p)

    monkeypatch.setattr(os, "scandir", scandir)
    visited: list[str | None] = []
    ls.walk_local(str(tmp_path), visited)
    assert visited == [str(tmp_path), None]
    _age(tmp_path)
    ls.walk_local_cached(str(tmp_path))
    assert str(tmp_path) not in ls._walks


def test_a_session_added_to_a_settled_store_is_found_by_the_next_search(tmp_path):
    store = tmp_path / "store"
    _session(store / "--a--" / "x.jsonl", "x", "alpha")
    _age(store)
    cache = tmp_path / "cache"
    assert search("alpha", store, index_cache=cache).total == 1
    assert str(store) in ls._walks
    _session(store / "--b--" / "y.jsonl", "y", "alpha")  # a new folder and file
    r = search("alpha", store, index_cache=cache)
    assert r.total == 2
    assert {os.path.basename(h.path) for h in r.hits} == {"x.jsonl", "y.jsonl"}
    (store / "--a--" / "x.jsonl").unlink()
    assert [os.path.basename(h.path) for h in search("alpha", store, index_cache=cache).hits] == ["y.jsonl"]


def test_searching_local_files_imports_no_fleet_package(tmp_path):
    _session(tmp_path / "--a--" / "x.jsonl", "x", "alpha")
    code = (
        "import contextlib, io, os, sys\n"
        f"os.environ['SESSIONTREE_INDEX_CACHE'] = {str(tmp_path / 'cache')!r}\n"
        "from sessiontree.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['search', 'alpha', {str(tmp_path)!r}, '--json']) == 0\n"
        "print(sorted(m for m in sys.modules if m.startswith('sessiontree.fleet') or m == 'hashlib'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
