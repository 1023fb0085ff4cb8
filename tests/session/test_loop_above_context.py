"""A ``parentId`` loop above the latest compaction's first kept entry (docs/divergences.md row 6).

Pi walks the whole path (``getBranch`` / ``buildSessionContext``) and never returns from such a
file. The context span walks back from the leaf only to the first kept entry (and to the
settings it needs), so it answers without meeting the loop, while ``get_branch`` raises
``SessionCycleError``. The answer is not merely different from Pi's hang but right: it equals
Pi's answer on the same file with the loop broken, because nothing above the kept range counts
once the settings are found below it. When a needed setting is not below the loop, the walk for
it meets the loop and raises (bounded by the index's length), as the branch does.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from sessiontree import AutoCompactor, CompactionSettings, Session
from sessiontree.errors import SessionCycleError

TS = "2026-01-01T00:00:00.000Z"


def _line(etype: str, eid: str, parent, **fields) -> dict:
    return {"type": etype, "id": eid, "parentId": parent, "timestamp": TS, **fields}


def _msg(role: str, text: str) -> dict:
    m: dict = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        m.update(
            api="anthropic-messages",
            provider="anthropic",
            model="claude-x",
            usage={"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15},
            stopReason="stop",
        )
    return m


def _lines(loop: bool, settings_below: bool, filler: int = 0) -> list[dict]:
    """x <-> y loop (or x a root), a long stretch under it, then the kept range, a compaction
    and a tail; with ``settings_below`` the thinking level and the model are set in the kept
    range (else no thinking level is set anywhere: the walk for one meets the loop)."""
    out = [
        _line("message", "x", "y" if loop else None, message=_msg("user", "in the loop")),
        _line("thinking_level_change", "y", "x", thinkingLevel="high")
        if settings_below
        else _line("custom", "y", "x", customType="note", data={}),
    ]
    parent = "y"
    for k in range(filler):
        out.append(_line("message", f"f{k}", parent, message=_msg("user" if k % 2 == 0 else "assistant", f"f{k}")))
        parent = f"f{k}"
    out.append(_line("message", "k1", parent, message=_msg("user", "first kept")))
    parent = "k1"
    if settings_below:
        out.append(_line("thinking_level_change", "th", parent, thinkingLevel="low"))
        out.append(_line("model_change", "mc", "th", provider="openai", modelId="gpt-x"))
        parent = "mc"
    out += [
        _line("message", "k2", parent, message=_msg("assistant", "kept reply")),
        _line("compaction", "c", "k2", summary="summary of the start", firstKeptEntryId="k1", tokensBefore=1000),
        _line("message", "t1", "c", message=_msg("user", "after the compaction")),
        _line("message", "t2", "t1", message=_msg("assistant", "a reply")),
    ]
    return out


def _write(path: Path, lines: list[dict]) -> Path:
    header = {"type": "session", "version": 3, "id": "loop", "timestamp": TS, "cwd": "/p"}
    path.write_text("".join(json.dumps(x) + "\n" for x in [header, *lines]))
    return path


def _in_time(fn, seconds: float = 30.0):
    """``fn()``'s result or exception, failing the test if it does not return (Pi's hang)."""
    box: dict = {}

    def run():
        try:
            box["ok"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["err"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    if "err" in box:
        raise box["err"]
    return box["ok"]


def _context(s: Session):
    ctx = s.build_context()
    tokens = AutoCompactor(s, None, CompactionSettings(), context_window=10**9).context_tokens()
    return ctx.messages, ctx.thinking_level, ctx.model, tokens


@pytest.mark.parametrize("filler", [0, 2000])
def test_the_context_answers_as_with_the_loop_broken_while_the_branch_raises(tmp_path, filler):
    looped = Session.open(_write(tmp_path / "loop.jsonl", _lines(True, True, filler)))
    broken = Session.open(_write(tmp_path / "root.jsonl", _lines(False, True, filler)))
    assert looped.leaf_id == "t2"
    got = _in_time(lambda: _context(looped))
    assert got == _context(broken)
    assert got[1] == "low" and got[2] == {"provider": "anthropic", "modelId": "claude-x"}
    # the span is the context (settings, kept range, compaction, tail), never the looping branch
    assert [e.id for e in looped.get_context_entries()] == ["k1", "th", "mc", "k2", "c", "t1", "t2"]
    with pytest.raises(SessionCycleError) as exc:
        _in_time(looped.get_branch)
    assert set(exc.value.ids) == {"x", "y"}
    assert [e.id for e in broken.get_branch()][-3:] == ["c", "t1", "t2"]
    assert any(p["kind"] == "leaf_cycle" for p in looped.validate(content=False))


def test_a_setting_only_above_the_loop_raises_instead_of_hanging(tmp_path):
    looped = Session.open(_write(tmp_path / "loop.jsonl", _lines(True, False, 2000)))
    with pytest.raises(SessionCycleError):
        _in_time(looped.build_context)
    with pytest.raises(SessionCycleError):
        _in_time(looped.get_branch)
