"""A page's ``total`` does not depend on how many hits were asked for: a file the session
reader refuses (a UTF-8 BOM before the header, a first value that is not a header) has no
searchable entries, so the index never counts entries no hit can come from."""

from __future__ import annotations

import shutil
from pathlib import Path

import sessiontree

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _store(tmp_path: Path) -> list[str]:
    d = tmp_path / "store"
    d.mkdir()
    shutil.copy(CORPUS / "pi-generated" / "edge_bom.jsonl", d / "bom.jsonl")  # "test" in a user message
    shutil.copy(CORPUS / "real" / "pimono-large-session.jsonl", d / "big.jsonl")
    body = (CORPUS / "pi-generated" / "edge_bom.jsonl").read_bytes()[3:]  # the same lines, no BOM
    (d / "nohead.jsonl").write_bytes(body.split(b"\n", 1)[1])  # entries without a header line
    (d / "ok.jsonl").write_bytes(body)
    return [str(p) for p in sorted(d.iterdir())]


def test_total_is_the_same_whatever_the_limit(tmp_path):
    files = _store(tmp_path)
    totals = {lim: sessiontree.search("test", files, limit=lim, index_cache=False).total for lim in (0, 1, 5, 10_000)}
    everything = sessiontree.search("test", files, limit=10_000, index_cache=False)
    assert set(totals.values()) == {len(everything.hits)}, totals
    shown = {Path(h.path).name for h in everything.hits}
    assert "bom.jsonl" not in shown and "nohead.jsonl" not in shown and "ok.jsonl" in shown


def test_a_refused_file_becomes_searchable_once_rewritten_valid(tmp_path):
    files = _store(tmp_path)
    cache = sessiontree.index_cache.CacheSettings(folder=str(tmp_path / "cache"))
    first = sessiontree.search("test", files, limit=10_000, index_cache=cache)
    assert first.total == len(first.hits)
    (bom,) = [Path(f) for f in files if f.endswith("bom.jsonl")]
    bom.write_bytes(bom.read_bytes()[3:])  # the BOM removed: a rewrite, indexed again
    again = sessiontree.search("test", files, limit=1, index_cache=cache)
    assert again.total == first.total + 1
