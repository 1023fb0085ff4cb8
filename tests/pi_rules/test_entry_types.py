"""One table of entry types (issue 21): ``sessiontree.entry_types.ENTRY_TYPES``. Each test fails
when a type is added in one place and forgotten in another: the Rust core's fixed type names
(``_core.TYPE_NAMES``) and its projection of them (``rust/src/entry_kind.rs``: the cut-point
search, the HTML digest, the fleet rows), context building, the content checks, the usage sums,
the Session's append methods, the CLI's previews and the HTML view."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

import sessiontree
from sessiontree import Session, entries, entry_types
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
    # the core's own list (a module constant of the binding), not a parse of codes.rs
    core = entries.CORE_TYPE_NAMES
    assert core[:2] == ("", "session")  # "not a string", the header's type
    assert [t.name for t in ROWS] == list(core[2:]), (
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


HEADER = b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'
USER = {"type": "message", "id": "u", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z"} | {
    "message": {"role": "user", "content": "hello there", "timestamp": 0}
}


def _core_session(entry: dict) -> Session:
    """A session of a user message and ``entry`` (the leaf), read by the core from bytes."""
    return Session.from_bytes(HEADER + orjson.dumps(USER) + b"\n" + orjson.dumps(entry) + b"\n")


#: each fixed name of the core, the registry's example for it (every example also carries an
#: entry-level ``usage``, which only the usage types may count); types the core does not know
CORE_CASES = [
    (name, _entry(name) | {"parentId": "u", "usage": USAGE} if name in EXAMPLES else None)
    for name in entries.CORE_TYPE_NAMES[2:]
] + [
    ("x_future", {"type": "x_future", "summary": "s", "content": "c", "message": USER["message"], "usage": USAGE}),
    ("not-a-string", {"type": 7, "summary": "s", "content": "c", "message": USER["message"], "usage": USAGE}),
]


@pytest.mark.parametrize("name,entry", CORE_CASES, ids=[c[0] for c in CORE_CASES])
def test_the_cores_projection_handles_each_type_as_the_table_says(name, entry):
    """The core's projection (rust/src/entry_kind.rs) against the registry, through what each
    fast path answers: the cut-point search's estimate (``Index.estimate_tokens``), the HTML
    digest's estimate and usage, the fleet rows' usage sums and context estimate. A type the
    registry does not know is "undecided" where Python decides (the cut-point search and the
    context estimate), and contributes nothing in the digest, as Pi 1.6 ignores it."""
    entry = dict(entry, id="x", parentId="u", timestamp="2026-01-01T00:00:01.000Z")
    row = entry_types.entry_type_row(entry["type"])
    s = _core_session(entry)
    assert len(s) == 2
    est = s._core.estimate_tokens([1])[0]
    digest = json.loads(s._core.html_digest(1, 2, 80))
    cols = s.fleet_columns()
    py_tokens, _should, _err, py_messages = _python_context(s)
    if row is None:  # unknown to the registry and to the core
        assert est is None and cols["context"] is None
        assert digest["e"][0] is None and digest["u"][0] is None
        assert cols["totals"] is not None and cols["totals"][1] == 0  # no usage counted
        assert py_messages == 1  # Pi ignores it
        return
    # the cut-point search: a message's estimate; the compaction is the search's boundary;
    # a context edit is Python's to apply
    if row.name == "context_edit":
        assert est is None and cols["context"] is None
    elif row.context and row.name != "compaction":
        assert est and est > 0
    else:
        assert est == 0
    assert (digest["e"][0] is not None) is row.context
    assert (digest["u"][0] is not None) is row.usage
    # the fleet rows: the usage sums (the user message carries none) and the context
    assert cols["totals"] is not None
    assert (cols["totals"][1] == 2) is row.usage
    if cols["context"] is not None:
        assert cols["context"] == (float(py_tokens), py_messages)
        # the leaf's own message, after the user's (a compaction's summary replaces the path)
        assert py_messages == (1 if row.name == "compaction" else 1 + row.context)


def _python_context(s: Session):
    from sessiontree.fleet._rows import Options, _context

    return _context(s, Options(index_cache=False))
