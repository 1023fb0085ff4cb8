"""One error tree: everything the package defines derives from ``sessiontree.SessionTreeError``;
errors raised from an entry's content name the entry."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import sessiontree
from sessiontree import CompactionSettings, Session, SessionTreeError
from sessiontree.errors import EntryNotFoundError, PiError, SessionCycleError, SessionError


def _package_modules() -> list:
    mods = [sessiontree]
    for info in pkgutil.walk_packages(sessiontree.__path__, "sessiontree."):
        if info.name == "sessiontree.__main__":
            continue
        mods.append(importlib.import_module(info.name))
    return mods


def test_every_exception_class_the_package_defines_derives_from_session_tree_error():
    defined = []
    for mod in _package_modules():
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if obj.__module__ == mod.__name__ and issubclass(obj, BaseException):
                defined.append(obj)
    assert len(defined) >= 15, defined  # the walk found the package's exceptions
    strays = [f"{c.__module__}.{c.__qualname__}" for c in defined if not issubclass(c, SessionTreeError)]
    assert strays == []


def test_standard_bases_are_kept_for_existing_except_clauses():
    from sessiontree.summarizers import ContextOverflowError, SummarizerError
    from sessiontree.tokens import EstimateError

    assert issubclass(EstimateError, ValueError) and issubclass(EstimateError, SessionError)
    assert issubclass(EntryNotFoundError, KeyError)
    assert issubclass(ContextOverflowError, SummarizerError)
    assert sessiontree.SessionTreeError is SessionTreeError
    assert sessiontree.SummarizerError is SummarizerError


def test_rust_core_raises_the_package_cycle_error_with_ids(tmp_path):
    p = tmp_path / "loop.jsonl"
    p.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"message","id":"a","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"x","timestamp":0}}\n'
        '{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"y","timestamp":0}}\n'
    )
    s = Session.open(p)
    with pytest.raises(SessionTreeError) as info:
        s.get_branch()
    assert type(info.value) is SessionCycleError
    assert sorted(info.value.ids) == ["a", "b"]


def _session_with_bad_tool_call() -> tuple[Session, str, int]:
    s = Session.in_memory("/p")
    for k in range(3):
        s.append_message({"role": "user", "content": "hello " * 50, "timestamp": 0})
        content = [{"type": "toolCall", "name": "x", "id": "t"}] if k == 1 else [{"type": "text", "text": "ok " * 50}]
        s.append_message({"role": "assistant", "content": content, "timestamp": 0})
    bad = [e for e in s.entries() if e.role == "assistant"][1]
    return s, bad.id, bad.line


def test_compaction_error_from_entry_content_names_the_entry_id_and_line():
    s, bad_id, bad_line = _session_with_bad_tool_call()
    with pytest.raises(PiError) as info:
        s.compact(settings=CompactionSettings(keep_recent_tokens=10))
    err = info.value
    assert err.pi_error == "TypeError: Cannot read properties of undefined (reading 'length')"  # Pi's text kept
    assert (err.entry_id, err.line) == (bad_id, bad_line)
    assert f"entry '{bad_id}', line {bad_line}" in str(err)


def test_pure_estimate_errors_keep_pis_exact_text():
    from sessiontree import estimate_tokens

    with pytest.raises(PiError) as info:
        estimate_tokens({"role": "user", "content": None})
    assert str(info.value) == info.value.pi_error == "TypeError: content is not iterable"
    assert info.value.entry_id is None
