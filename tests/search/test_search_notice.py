"""`sessiontree search` says it is indexing when a search takes seconds (a first search of a
big store gave no output for ~56 s on a 200 MB session)."""

from __future__ import annotations

import shutil
from pathlib import Path

from sessiontree.cli import main
from sessiontree.cli import search as cli_search

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "pi-generated"


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    store.mkdir()
    for p in sorted(CORPUS.glob("*.jsonl"))[:6]:
        shutil.copy(p, store / p.name)
    return store


def test_a_slow_search_says_it_is_indexing_on_stderr(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cli_search, "NOTICE_AFTER", 0.0)  # every search counts as slow
    store = _store(tmp_path)
    assert main(["search", "the", str(store), "--progress", "--json"]) == 0
    cap = capsys.readouterr()
    assert "indexing new or changed files" in cap.err
    assert cap.out.lstrip().startswith("{")  # stdout keeps the answer only


def test_no_notice_when_not_asked_or_quick(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path / "cache"))
    store = _store(tmp_path)
    monkeypatch.setattr(cli_search, "NOTICE_AFTER", 0.0)
    # not a terminal (as under pytest) and no --progress; --no-progress wins over --progress
    assert main(["search", "the", str(store)]) == 0
    assert main(["search", "the", str(store), "--progress", "--no-progress"]) == 0
    assert "indexing" not in capsys.readouterr().err
    # a search that answers before the notice's time says nothing
    monkeypatch.setattr(cli_search, "NOTICE_AFTER", 60.0)
    assert main(["search", "the", str(store), "--progress"]) == 0
    assert capsys.readouterr().err == ""
