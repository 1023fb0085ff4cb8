"""One table of entry types (issue 21): ``sessiontree.entry_types.ENTRY_TYPES``. Each test fails
when a type is added in one place and forgotten in another: the Rust core's fixed type names,
context building, the content checks, the usage sums, the Session's append methods, the CLI's
previews and the HTML view."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sessiontree
from sessiontree import Session, entry_types
from sessiontree.cli import entry_preview
from sessiontree.context import entry_to_context_messages
from sessiontree.usage import usage_totals_of_entries
from sessiontree.validation import _CONTENT_TYPES

ROOT = Path(__file__).resolve().parent.parent.parent
ROWS = entry_types.ENTRY_TYPES
USAGE = {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3, "cost": {"total": 0.5}}

#: one well-formed entry of each type (the fields Pi writes)
EXAMPLES = {
    "message": {"message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "usage": USAGE}},
    "model_change": {"provider": "p", "modelId": "m"},
    "thinking_level_change": {"thinkingLevel": "high"},
    "compaction": {"summary": "s", "firstKeptEntryId": "a", "tokensBefore": 5, "usage": USAGE},
    "branch_summary": {"fromId": "a", "summary": "s", "usage": USAGE},
    "custom": {"customType": "ext", "data": {}},
    "custom_message": {"customType": "ext", "content": "text", "display": True},
    "label": {"targetId": "a", "label": "L"},
    "session_info": {"name": "n"},
    "context_edit": {"targetId": "a", "replacement": None},
    "usage": {"usage": USAGE},
}


def _entry(name: str) -> dict:
    return {"type": name, "id": f"id-{name}", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z"} | EXAMPLES[
        name
    ]


def test_the_table_names_the_cores_fixed_types():
    text = (ROOT / "rust/src/index/codes.rs").read_text()
    body = re.search(r"pub const TYPE_NAMES: \[&str; \d+\] = \[(.*?)\];", text, re.S).group(1)
    core = [n for n in re.findall(r'"([^"]*)"', body) if n not in ("", "session")]
    assert [t.name for t in ROWS] == core, (
        "ENTRY_TYPES (python/sessiontree/entry_types.py) and TYPE_NAMES (rust/src/index/codes.rs) "
        "name the same types in the same order"
    )
    assert set(EXAMPLES) == {t.name for t in ROWS}, "EXAMPLES in this test: one entry of each type"


def test_the_derived_lists_are_the_tables():
    assert _CONTENT_TYPES == entry_types.CONTENT_TYPES == tuple(t.name for t in ROWS if t.content)
    assert entry_types.USAGE_TYPES == tuple(t.name for t in ROWS if t.usage)
    assert entry_types.entry_type_row("no-such-type") is None and entry_types.entry_type_row(None) is None


@pytest.mark.parametrize("row", ROWS, ids=[t.name for t in ROWS])
def test_each_layer_handles_the_type_as_the_table_says(row):
    e = _entry(row.name)
    assert bool(entry_to_context_messages(e)) is row.context, "context.py (entry_to_context_messages)"
    totals = usage_totals_of_entries([e])
    assert (totals.output == 2) is row.usage, "usage.py"
    assert bool(entry_preview(e)) is row.preview, "cli/render.py (entry_preview)"
    viewer = (Path(sessiontree.__file__).parent / "html" / "viewer.js").read_text()
    assert row.name in viewer, f"html/viewer.js: how the page shows a {row.name!r} entry"


@pytest.mark.parametrize("row", [t for t in ROWS if t.appended_by], ids=[t.name for t in ROWS if t.appended_by])
def test_the_session_appends_each_type_it_writes(row):
    s = Session.in_memory()
    first = s.append_message({"role": "user", "content": "hi", "timestamp": 0})
    method = getattr(s, row.appended_by, None)
    assert method is not None, f"Session.{row.appended_by} (session.py), named by ENTRY_TYPES"
    args = {
        "append_message": ({"role": "user", "content": "x", "timestamp": 1},),
        "append_model_change": ("p", "m"),
        "append_thinking_level_change": ("high",),
        "append_compaction": ("s", first, 5),
        "branch_with_summary": (first, "s"),
        "append_custom_entry": ("ext",),
        "append_custom_message_entry": ("ext", "text", True),
        "append_label_change": (first, "L"),
        "append_session_info": ("n",),
        "append_context_edit": (first, None),
    }.get(row.appended_by)
    assert args is not None, f"the arguments of {row.appended_by} in this test"
    new_id = method(*args)
    assert s.get_entry(new_id).type == row.name
