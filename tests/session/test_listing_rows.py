"""Saved listing rows follow the cache settings handed to :func:`sessiontree.list_sessions`."""

from __future__ import annotations

import shutil
from pathlib import Path

from sessiontree import list_sessions
from sessiontree.index_cache import CacheSettings

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def test_cache_settings_min_bytes_applies_to_listing_rows(tmp_path, monkeypatch):
    # CacheSettings(min_bytes=0) saves the listing rows of small files too (the listing read
    # $SESSIONTREE_INDEX_CACHE_MIN_BYTES only, 1 MiB by default, so no row was ever saved here)
    monkeypatch.delenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", raising=False)
    folder = tmp_path / "sessions"
    folder.mkdir()
    sources = sorted(p for p in CORPUS.glob("real/*.jsonl") if p.stat().st_size < 1 << 20)[:3]
    assert len(sources) == 3
    for p in sources:
        shutil.copy(p, folder / p.name)
    settings = CacheSettings(folder=str(tmp_path / "cache"), min_bytes=0)
    first = list_sessions(session_dir=folder, index_cache=settings)
    rows = list((tmp_path / "cache").glob("*.list.row"))
    assert len(rows) == len(first) > 0
    again = list_sessions(session_dir=folder, index_cache=settings)
    assert again == first
    # the default (1 MiB) saves none for files this small
    other = tmp_path / "cache2"
    list_sessions(session_dir=folder, index_cache=CacheSettings(folder=str(other)))
    assert not list(other.glob("*.list.row"))
