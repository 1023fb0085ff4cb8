"""The binding's batch views (issue 21 step 4): one record per entry (``Index.record``, kept
by ``Entry``), the columns of ``Index.table`` and ``Index.metrics``, and the named results.

* On every corpus file (globbed, so hidden corpora are covered too) each ``Entry`` attribute
  equals its record's field, the record equals the entry's row of ``table`` and ``metrics``, and
  the fields equal what the parsed line says (id, parentId, type when strings).
* An ``Entry`` made before a rewrite (``migrate()`` opens a new index) answers from the new
  index, as it did when every attribute was a call into the core.
* Positions that name no entry raise ``IndexError`` with the core's message; problems and
  the header probe are the named tuples of ``sessiontree.entries``.
"""

from __future__ import annotations

import gc
import math
import shutil
from pathlib import Path

import pytest

from sessiontree import Session, _core
from sessiontree.entries import EntryColumns, EntryRecord, HeaderProbe, Problem

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted((ROOT / "corpus").rglob("*.jsonl"))


def _open(p: Path) -> Session | None:
    try:
        return Session.open(p)
    except Exception:  # not a session Pi opens: other tests cover those
        return None


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(ROOT / "corpus")) for p in CORPUS])
def test_records_entries_and_columns_agree(path):
    s = _open(path)
    if s is None:
        pytest.skip("not a session Pi opens")
    core = s._core
    idx = list(range(len(s)))
    cols = core.table(idx)
    assert isinstance(cols, EntryColumns)
    sizes, times, tokens = core.metrics(idx)
    assert tokens == core.estimate_tokens(idx)
    for i, e in enumerate(s.entries()):
        r = core.record(i)
        assert (e.id, e.parent_id, e.parent_is_null, e.type, e.role, e.line, e.offset) == (
            r.id,
            r.parent_id,
            r.parent_is_null,
            r.type,
            r.role,
            r.line,
            r.offset,
        )
        row = tuple(c[i] for c in cols)
        assert row == (r.id, r.parent_id, r.parent_is_null, r.type, r.role, r.line, r.offset)
        assert sizes[i] == len(core.line(i))
        if not core.needs_migration:
            raw = e.raw
            if isinstance(raw, dict):
                for key, got in (("id", r.id), ("parentId", r.parent_id), ("type", r.type)):
                    v = raw.get(key)
                    if isinstance(v, str) and "\ufffd" not in v and not any(0xD800 <= ord(c) < 0xE000 for c in v):
                        assert got == v
                    elif not isinstance(v, str):
                        assert got is None
                assert r.parent_is_null == ("parentId" in raw and raw["parentId"] is None)
    m = s.entry_metrics()
    assert m.bytes == sizes and m.timestamp_ms == times
    for i, t in enumerate(times):  # the times are the dates of the parsed timestamps
        raw = s.entry_at(i).raw
        if isinstance(raw, dict) and isinstance(raw.get("timestamp"), str) and not core.needs_migration:
            want = _core.date_parse(raw["timestamp"])
            assert t == (None if math.isnan(want) else want)


def test_an_entry_answers_from_the_index_the_session_holds_now(tmp_path):
    p = tmp_path / "v2.jsonl"
    shutil.copy(ROOT / "corpus" / "pi-generated" / "edge_v2_hookmessage.jsonl", p)
    s = Session.open(p)
    before = s.entries()
    old = [(e.id, e.line, e.offset) for e in before]  # records taken and kept
    assert s.migrate()
    now = [(e.id, e.line, e.offset) for e in s.entries()]
    assert now != old  # the rewrite moved lines (v3 header, migrated entries)
    assert [(e.id, e.line, e.offset) for e in before] == now


def test_positions_that_name_no_entry_raise_index_error():
    core = _core.Index.from_bytes(
        b'{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}\n'
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01Z",'
        b'"message":{"role":"user","content":"hi"}}\n'
        b"not json\n"
    )
    for call in (
        lambda: core.record(1),
        lambda: core.table([0, 1]),
        lambda: core.ids([3]),
        lambda: core.types([1]),
        lambda: core.metrics([0, 2]),
        lambda: core.lines([1]),
    ):
        with pytest.raises(IndexError, match=r"entry index \d out of range"):
            call()
    r = core.record(0)
    assert (r.id, r.parent_id, r.parent_is_null, r.type, r.role, r.line) == ("a", None, True, "message", "user", 2)
    assert isinstance(r, EntryRecord) and r == core.record(0) and not gc.is_tracked(r)  # atomic items only
    assert r.offset == len(b'{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}\n')
    assert core.metrics([0]) == ([len(core.line(0))], [1735689601000.0], [1])
    assert gc.is_tracked(core.table([0]))  # lists inside: the collector keeps it
    p = core.problem(0)
    assert isinstance(p, Problem) and (p.line, p.kind) == (3, "malformed_json")
    with pytest.raises(IndexError, match="problem index 1 out of range"):
        core.problem(1)


def test_header_probe_is_a_named_tuple():
    head = b'{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}\n'
    got = _core.header_probe(head, True)
    assert isinstance(got, HeaderProbe) and got == ("valid", None, 0, len(head) - 1)
    assert _core.header_probe(b"", False).state == "more"
    assert _core.header_probe(b"[1]\n", True).state == "invalid"
