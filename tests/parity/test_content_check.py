"""The core's content check (``rust/src/content.rs``) against its oracle, the Python rules.

``sessiontree validate``'s ``content_error`` comes from the core; ``entry_content_error`` runs
Pi's context building, estimate and serialization in Python on one parsed entry. The oracle
below is the check as it ran before, entry by entry in Python: the same problems, the same
messages, the same order, on every file of the corpus and the fixtures and on a file of
hand-made shapes that makes every stage throw every text it can.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from sessiontree import Session, SessionError, SessionFormatError, SessionTreeError
from sessiontree.convert import to_pi_bytes
from sessiontree.entry_types import CONTENT_TYPES
from sessiontree.validation import _STAGE_EFFECT, _content_check, _problem, content_problems

TESTS = Path(__file__).resolve().parent.parent
FILES = sorted([*(TESTS / "corpus").rglob("*.jsonl"), *(TESTS / "fixtures").rglob("*.jsonl")])


def oracle(session: Session) -> list[dict[str, Any]]:
    """The content check entry by entry in Python (what ``content_problems`` ran before)."""
    out = []
    table = session.entry_table()
    for i, etype in enumerate(table.type):
        if etype not in CONTENT_TYPES:
            continue
        line, offset = table.line[i], table.offset[i]
        try:
            (raw,) = session.raw_values([i])
        except SessionError as exc:
            message = (
                f"entry {table.id[i]!r}: {exc} (Pi reads it; building the context or compacting over it here fails)"
            )
            out.append(_problem(line, offset, "too_deep", message))
            continue
        found = _content_check(raw)
        if found is not None:
            stage, err = found
            message = f"entry {table.id[i]!r}: Pi throws {err.pi_error!r} on its content ({_STAGE_EFFECT[stage]})"
            out.append(_problem(line, offset, "content_error", message))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_the_core_finds_what_the_python_rules_find_on_every_corpus_and_fixture_file(path):
    try:
        s = Session.open(path)
    except SessionFormatError:
        # another agent's transcript (Claude Code, Codex): the Pi session it converts to
        try:
            data, _ = to_pi_bytes(path.read_bytes(), name=str(path))
            s = Session.from_bytes(data, name=str(path))
        except SessionTreeError:
            pytest.skip("not a session of any format read here")
    assert content_problems(s) == oracle(s)


# ==== hand-made shapes ============================================================

MISSING = object()
SCALARS = [None, "", "s", 0, 1, 1.5, True, False, [], [1], {}, {"a": [1]}]
BLOCKS = [
    None,
    "s",
    0,
    [],
    {},
    {"type": None},
    {"type": "image"},
    {"type": "text"},
    {"type": "text", "text": None},
    {"type": "text", "text": ""},
    {"type": "text", "text": 0},
    {"type": "text", "text": "x"},
    {"type": "text", "text": ["x"]},
    {"type": "thinking"},
    {"type": "thinking", "thinking": None},
    {"type": "thinking", "thinking": "t"},
    {"type": "toolCall"},
    {"type": "toolCall", "name": "n"},
    {"type": "toolCall", "name": None, "arguments": {}},
    {"type": "toolCall", "name": "n", "arguments": None},
    {"type": "toolCall", "name": "n", "arguments": {"a": [1, None]}},
    {"type": "toolCall", "name": 7, "arguments": "s"},
]
CONTENTS = [MISSING, *SCALARS, *([b] for b in BLOCKS), [{"type": "text", "text": "a"}, None]]
ROLES = [
    MISSING,
    None,
    5,
    "user",
    "assistant",
    "toolResult",
    "system",
    "custom",
    "bashExecution",
    "branchSummary",
    "compactionSummary",
    "hookMessage",
]
FIELD_VALUES = [MISSING, None, "", "x", 0]


def _obj(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not MISSING}


def _messages() -> list[Any]:
    out: list[Any] = [MISSING, *SCALARS]
    for role, content in itertools.product(ROLES, CONTENTS):
        out.append(_obj(role=role, content=content))
    for role in ("bashExecution", "branchSummary", "compactionSummary"):
        for a, b in itertools.product(FIELD_VALUES, FIELD_VALUES):
            out.append(_obj(role=role, command=a, output=b, summary=a))
    return out


def _entries() -> list[dict[str, Any]]:
    out = [_obj(type="message", message=m) for m in _messages()]
    out += [
        _obj(type="custom_message", customType="c", content=c, timestamp=t) for c in CONTENTS for t in (MISSING, {})
    ]
    out += [_obj(type="branch_summary", summary=v, fromId="x") for v in [MISSING, *SCALARS]]
    system_messages = [MISSING, *SCALARS] + [
        _obj(role=r, content=c)
        for r in ROLES
        for c in (MISSING, None, "s", [None], [{"type": "toolCall", "name": "n"}])
    ]
    out += [
        _obj(type="compaction", summary=v, systemMessage=sm, firstKeptEntryId="x", tokensBefore=1)
        for v in (MISSING, None, "s", 0)
        for sm in system_messages
    ]
    return out


#: Lines the core leaves to the Python rules (a read key given twice: the last wins; nesting of
#: 512 levels and more, past 1000 too deep for Python; a number beyond a double; a lone
#: surrogate in a read string), and lines it reads although they look like them.
UNDECIDED = [
    '{"type":"message","message":{"role":"assistant","content":"x"},"message":null}',
    '{"type":"message","message":{"role":"user","content":' + "[" * 600 + "]" * 600 + "}}",
    '{"type":"message","message":{"role":"user","content":' + "[" * 1100 + "]" * 1100 + "}}",
    '{"type":"message","message":{"role":"assistant","content":[{"type":"text"},' + "[" * 1100 + "]" * 1100 + "]}}",
    '{"type":"message","message":{"role":"user","content":' + "[" * 200 + "]" * 200 + "}}",
    '{"type":"message","message":{"role":"assistant","content":"' + "[{" * 600 + '"}}',
    '{"type":"message","message":{"role":"assistant","content":"x","n":1e400}}',
    '{"type":"message","message":{"role":"assistant","content":"\\ud800"}}',
    '{"type":"compaction","summary":null,"systemMessage":{"role":"us\\u0065r"}}',
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("content") / "shapes.jsonl"
    lines = ['{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}']
    for k, e in enumerate(_entries()):
        e.update(id=f"e{k}", parentId=None, timestamp="2026-01-01T00:00:01.000Z")
        lines.append(json.dumps(e))
    lines += [line[:-1] + f',"id":"u{k}","parentId":null}}' for k, line in enumerate(UNDECIDED)]
    p.write_text("\n".join(lines) + "\n")
    return p


def test_the_core_finds_what_the_python_rules_find_on_hand_made_shapes(hostile):
    s = Session.open(hostile)
    got = content_problems(s)
    assert got == oracle(s)
    # the shapes reach every stage and every text the rules throw
    texts = {
        p["message"].split("Pi throws ")[1].split(" on its content")[0] for p in got if "Pi throws" in p["message"]
    }
    assert len(texts) == 10, texts
    assert {effect for effect in _STAGE_EFFECT.values() if any(effect in p["message"] for p in got)} == set(
        _STAGE_EFFECT.values()
    )
    # the undecided lines were judged too (the duplicate key: the last `message`, null, wins)
    assert any(p["message"].startswith("entry 'u0': Pi throws") for p in got)
    assert [p["kind"] for p in got if p["message"].startswith(("entry 'u2'", "entry 'u3'"))] == ["too_deep"] * 2


def test_progress_counts_every_entry_once(hostile):
    s = Session.open(hostile)
    steps: list[int] = []
    content_problems(s, steps.append)
    assert sum(steps) == len(s) and all(n > 0 for n in steps)
