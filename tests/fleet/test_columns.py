"""One list of the stats table's columns (issue 21): ``sessiontree.fleet.columns.STATS_COLUMNS``
builds the Arrow schema; the rows, the schema's docstring and docs/fleet.md are checked against
it, so a column added in one place and forgotten in another fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sessiontree.fleet import columns

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = ROOT / "tests" / "corpus"


def _groups() -> list[str]:
    """The column names as the docs write them: ``messages_<role>`` and ``problems_<kind>`` stand
    for their expansions."""
    roles = {f"messages_{c}" for _, c in columns.ROLES}
    kinds = {f"problems_{k}" for k in columns.PROBLEM_KINDS}
    out: list[str] = []
    for name in columns.column_names():
        shown = "messages_<role>" if name in roles else "problems_<kind>" if name in kinds else name
        if shown not in out:
            out.append(shown)
    return out


def test_the_schema_is_the_list():
    pa = pytest.importorskip("pyarrow")
    from sessiontree.fleet import stats_schema

    schema = stats_schema()
    assert schema.names == columns.column_names()
    kinds = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_()}
    for (name, kind), field in zip(columns.STATS_COLUMNS, schema):
        if kind in kinds:
            assert field.type == kinds[kind], name


def test_the_python_rows_have_every_column_and_no_other():
    pytest.importorskip("pyarrow")
    from sessiontree.fleet._rows import Options, stats_rows
    from sessiontree.fleet._sources import resolve_source

    items = resolve_source(str(CORPUS / "real" / "*.jsonl"))[:20]
    opened = [r for r in stats_rows(items, Options(index_cache=False)) if r.get("error_kind") is None]
    assert opened, "some corpus files open"
    names = set(columns.column_names())
    for row in opened:
        assert set(row) <= names, f"STATS_COLUMNS (fleet/columns.py) lacks {sorted(set(row) - names)}"
        # every column but the error pair is set on a row of a file that opened
        # path_bytes is added as the table is built; the error columns only where there is one
        unset = names - set(row)
        assert unset <= {"path_bytes", "error_kind", "error", "context_error", "parent_session_id"} | {
            n for n in names if n.startswith(("messages_", "problems_"))
        }, f"fleet/_rows.py (_stats_of) sets no {sorted(unset)}"


def test_the_docs_name_every_column():
    from sessiontree import fleet

    doc = (ROOT / "docs" / "fleet.md").read_text()
    stats_bullet = re.search(r"\* \*\*stats\*\*.*?(?=\n\* \*\*)", doc, re.S).group(0)
    missing_md = [g for g in _groups() if f"`{g}`" not in stats_bullet]
    missing_doc = [g for g in _groups() if f"``{g}``" not in fleet.stats_schema.__doc__]
    assert (missing_md, missing_doc) == ([], []), "(docs/fleet.md's stats paragraph, stats_schema's docstring)"


def test_the_problem_kinds_are_the_cores_and_the_docs_list_them():
    """``problems_<kind>``: one column per kind of the core's scanner (``_core.PROBLEM_KINDS``
    through ``sessiontree.entries``, not a copy), every kind a scan of the corpus records is one
    of them, and docs/fleet.md names each."""
    from sessiontree import Session, entries

    assert columns.PROBLEM_KINDS is entries.PROBLEM_KINDS
    assert len(set(columns.PROBLEM_KINDS)) == len(columns.PROBLEM_KINDS) and "" not in columns.PROBLEM_KINDS
    seen = set()
    for path in sorted(CORPUS.rglob("*.jsonl")):
        try:
            s = Session.open(path)
        except Exception:
            continue
        seen |= {p.kind for p in s.problems}
        s.close()
    assert seen and seen <= set(columns.PROBLEM_KINDS), seen - set(columns.PROBLEM_KINDS)
    hostile = Session.from_bytes(
        b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
        b'\n{\nnull\n{"type":"custom","id":"b","parentId":null,"x":"\xff"}\n'
        b'{"type":"session","version":3,"id":"t","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n{"torn'
    )
    kinds = {p.kind for p in hostile.problems}
    assert kinds == {"blank_line", "malformed_json", "skipped_value", "invalid_utf8", "extra_header", "torn_last_line"}
    doc = (ROOT / "docs" / "fleet.md").read_text()
    assert [k for k in columns.PROBLEM_KINDS if f"`{k}`" not in doc] == []
