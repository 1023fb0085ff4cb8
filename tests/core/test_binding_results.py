"""What the binding hands out has names (issue 21 step 4): the tree table, the scrubber's
findings and counts are the named tuples of ``sessiontree.entries``, made by the core; and the
HTML export's segment write lets the index go while it runs without the GIL."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.entries import ScrubFinding, ScrubStats, TreeTable
from sessiontree.scrub import scrub_bytes
from sessiontree.session import new_scrubber

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"
KEY = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8I9j0" * 4 + "-AAAAAAAA"


def test_tree_table_is_a_named_tuple_of_lists():
    s = Session.open(str(EXAMPLE))
    t = s.tree_table()
    assert type(t) is TreeTable
    assert all(type(x) is list for x in t)
    assert t.roots == s.tree_roots()
    assert len(t.start) == len(s) + 1 and t.start[-1] == len(t.kids)
    # a fresh table each call: a caller may change its lists
    t.kids.append(-1)
    assert s.tree_table().kids == t.kids[:-1]


def test_scrubber_findings_and_stats_are_named_tuples():
    line = (
        '{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"key ' + KEY + '"}}\n'
    )
    sc = new_scrubber(False, "keep", True)
    out = sc.feed(line.encode()) + sc.finish()
    assert KEY.encode() not in out
    stats = sc.stats()
    assert type(stats) is ScrubStats
    assert stats.bytes_in == len(line.encode()) and stats.found == stats.lines_changed == 1
    found = sc.take_findings()
    assert [type(f) for f in found] == [ScrubFinding]
    f = found[0]
    assert (f.line, f.entry_id, f.pointer, f.in_key) == (1, "a", "/message/content", False)
    assert f.to_json()["entryId"] == "a"
    assert sc.take_findings() == []  # taken
    # the report holds the core's tuples as they are
    _out, report = scrub_bytes(line.encode())
    assert report.findings == [f]


@pytest.mark.skipif(not hasattr(os, "pipe"), reason="needs os.pipe")
def test_segment_write_lets_the_index_go_while_it_blocks(tmp_path):
    """``html_write_segments`` writes with the GIL released; another thread may append to the
    session meanwhile (the index is not borrowed: before, this append raised "Already
    borrowed")."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(EXAMPLE.read_bytes())
    s = Session.open(str(path))
    data = os.urandom(1 << 20)  # base64 of gzip of random bytes: far over a pipe's buffer
    r, w = os.pipe()
    errors: list[BaseException] = []

    def export() -> None:
        try:
            s.html_write_segments(w, [(0, len(data))], [0], [b"<"], b">", data)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            os.close(w)

    t = threading.Thread(target=export)
    t.start()
    try:
        time.sleep(0.3)  # the writer is blocked on the full pipe, without the GIL
        assert t.is_alive()
        new_id = s.append_message({"role": "user", "content": "meanwhile"})
        assert s.get_entry(new_id) is not None
    finally:
        got = bytearray()
        while chunk := os.read(r, 1 << 16):
            got += chunk
        os.close(r)
        t.join()
    assert errors == []
    assert got.startswith(b"<") and got.endswith(b">") and len(got) > len(data)
    s.close()


@pytest.mark.parametrize("columns", [["nope"], ["entry_id", "entry_id"], "entry_id", b"type", [1], ["type", None]])
def test_fleet_columns_refuses_bad_column_names_with_the_packages_error(columns):
    """``Session.fleet_columns(columns=...)`` is public: a name the core does not make, a name
    given twice, a bare string (not a list of names) or a non-string name is a
    ``SessionArgumentError`` (under ``SessionTreeError``, still a ``ValueError``), never a bare
    ``ValueError``/``TypeError``, and a string is not read as its characters."""
    from sessiontree.errors import SessionArgumentError, SessionTreeError

    s = Session.from_bytes(
        b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi"}}\n'
    )
    with pytest.raises(SessionArgumentError) as e:
        s.fleet_columns(per_entry=True, columns=columns)
    assert isinstance(e.value, SessionTreeError) and isinstance(e.value, ValueError)
    # the good names still work, in the order asked (``on_active_path``, the bits, always comes)
    cols = s.fleet_columns(per_entry=True, columns=["type", "entry_id"])
    assert [c for c in cols["columns"] if c != "on_active_path"] == ["type", "entry_id"]
