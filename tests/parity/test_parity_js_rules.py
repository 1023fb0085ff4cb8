"""JavaScript rules that both the Rust core and Python need, each with one home, pinned by parity:

* ``new Date(x)``: one parser (``rust/src/jsdate.rs``); the index reads timestamps from raw lines
  (``jsdate::date_value``), Python calls the same rule through ``_core.date_parse``
  (``sessiontree._jsjson.js_date_parse``); both must agree on every corpus timestamp and on
  generated strings.
* ``String.prototype.trim()``: ``_jsjson.js_trim`` (session names, in ``Session.session_name`` and
  ``list_sessions``) and the Rust date parser's ``is_js_whitespace`` are the same set.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiontree import Session, _core, list_sessions
from sessiontree._jsjson import JS_WHITESPACE, js_date_parse, js_trim
from sessiontree.context import build_session_context

CORPUS = Path(__file__).parent.parent / "corpus"
HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _ts(core, i: int) -> float:
    """Entry ``i``'s ``new Date(timestamp).getTime()`` from the index (NaN when invalid)."""
    t = core.metrics([i])[1][0]
    return float("nan") if t is None else t


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _timestamps_file(path: Path, stamps: list) -> Path:
    lines = [json.dumps(HEADER)]
    for k, ts in enumerate(stamps):
        lines.append(
            json.dumps(
                {
                    "type": "custom",
                    "customType": "t",
                    "id": f"e{k}",
                    "parentId": f"e{k - 1}" if k else None,
                    "timestamp": ts,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_date_parse_index_and_python_agree_on_every_corpus_timestamp():
    checked = 0
    for f in sorted(CORPUS.rglob("*.jsonl")):
        try:
            s = Session.open(f)
        except Exception:
            continue
        for e in s.iter_entries():
            raw = e.raw
            if not isinstance(raw, dict):
                continue
            want = _ts(s._core, e.index)
            got = js_date_parse(raw["timestamp"]) if "timestamp" in raw else math.nan
            assert _same(want, got), (f.name, e.line, raw.get("timestamp"))
            checked += 1
    assert checked > 1000


_DATEISH = st.text(alphabet="0123456789-+:.TtZz ,\t\u00a0\u0085\u001f\ufeff\u2028x", max_size=32)


@settings(max_examples=300, deadline=None)
@given(
    stamps=st.lists(
        st.one_of(
            _DATEISH,
            st.builds(
                lambda ws, d, ws2: ws + d + ws2,
                st.text(JS_WHITESPACE + "\x85\x1f", max_size=3),
                st.sampled_from(["2026-01-16", "2026-01-16T03:12:09.462Z", "+002026-01", "2026-01-16 03:12"]),
                st.text(JS_WHITESPACE + "\x85\x1f", max_size=3),
            ),
            st.integers(-(10**16), 10**16),
            st.none(),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_date_parse_index_and_python_agree_on_generated_values(tmp_path_factory, stamps):
    path = _timestamps_file(tmp_path_factory.mktemp("d") / "s.jsonl", stamps)
    s = Session.open(path)
    for k, ts in enumerate(stamps):
        assert _same(_ts(s._core, k), js_date_parse(ts)), ts


def test_leading_space_date_is_a_date_in_the_context_as_in_node():
    # Node: new Date(" 2026-01-16").getTime() === 1768521600000
    assert js_date_parse(" 2026-01-16") == 1768521600000.0
    path = [
        {
            "type": "branch_summary",
            "id": "b",
            "parentId": None,
            "timestamp": " 2026-01-16",
            "fromId": "a",
            "summary": "went elsewhere",
        }
    ]
    (message,) = build_session_context(path).messages
    assert message["timestamp"] == 1768521600000


def test_js_trim_set_is_the_rust_date_parsers_whitespace_over_every_code_point():
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        trims = js_trim(c + "x") == "x"
        skipped = not math.isnan(_core.date_parse(c + "2024-01-01"))
        assert trims == skipped, hex(cp)


def _named_session(tmp_path: Path, name: str) -> Path:
    d = tmp_path / "sessions"
    d.mkdir(exist_ok=True)
    p = d / "2026-01-01T00-00-00-000Z_s1.jsonl"
    lines = [
        json.dumps(HEADER),
        json.dumps(
            {
                "type": "message",
                "id": "m",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {"role": "user", "content": "hi", "timestamp": 0},
            }
        ),
        json.dumps(
            {"type": "session_info", "id": "i", "parentId": "m", "timestamp": "2026-01-01T00:00:01.000Z", "name": name}
        ),
    ]
    p.write_text("\n".join(lines) + "\n")
    return p


def test_session_name_is_js_trimmed_in_the_session_and_in_the_listing(tmp_path):
    p = _named_session(tmp_path, "\x1fname\x85")
    assert Session.open(p).session_name == "\x1fname\x85"
    (info,) = list_sessions(session_dir=p.parent)
    assert info.name == "\x1fname\x85"


@settings(max_examples=100, deadline=None)
@given(name=st.text(alphabet=JS_WHITESPACE + "\x85\x1c\x1d\x1e\x1fab", max_size=8))
def test_session_name_parity_between_session_and_listing(tmp_path_factory, name):
    p = _named_session(tmp_path_factory.mktemp("n"), name)
    (info,) = list_sessions(session_dir=p.parent)
    assert Session.open(p).session_name == info.name == (js_trim(name) or None)


def test_entries_built_in_python_and_in_the_core_share_one_id_generator_and_clock():
    import re

    s = Session.in_memory("/p")
    core_id = s.append_message({"role": "user", "content": "x", "timestamp": 0})  # built by the core
    py_id = s.append_compaction("summary", core_id, 10)  # built in Python (_append_built)
    iso = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
    for eid in (core_id, py_id):
        e = s.get_entry(eid)
        assert re.fullmatch(r"[0-9a-f]{8}", eid)
        assert iso.fullmatch(e.raw["timestamp"])
    ids = {s._core.new_id() for _ in range(2000)}
    assert len(ids) == 2000 and not ids & {core_id, py_id}
