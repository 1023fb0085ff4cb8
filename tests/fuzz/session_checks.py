"""What every fuzz input must satisfy, shared by the atheris harness (fuzz_session.py) and the
pure-Python mutation loop in tests/core/test_fuzz_short.py.

:func:`check_bytes` writes the bytes to a file and drives the public API and the CLI over it.
The only exceptions allowed out of the library are :class:`sessiontree.SessionError` and its
subclasses (not a session, a cycle, Pi's context error, an entry nested too deeply for Python);
anything else (``TypeError``, ``RecursionError``, a Rust ``PanicException``, ...) is a bug and
propagates, which atheris reports as a crash. The CLI must return an exit code and never raise.
Opening must never change the file.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Callable

from sessiontree import Session, SessionError
from tests.support.cli_run import run_cli

CORPUS = Path(__file__).resolve().parent.parent / "corpus"

#: Walks over a fuzz input visit at most this many entries (each input stays fast).
ENTRY_BUDGET = 400


def _cli(argv: list[str]) -> int:
    rc, out, err = run_cli(*argv)
    assert isinstance(rc, int) and rc in (0, 1, 2), f"cli {argv[0]} returned {rc!r}"
    text = out + err
    assert "\x1b" not in text and "\x07" not in text, f"cli {argv[0]} printed a raw control character"
    return rc


def _tree_size(roots: list) -> int:
    """Count nodes iteratively (a duplicated id can make the node graph cyclic)."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(n.children)
    return len(seen)


def _allowed(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except SessionError:
        return None


def check_bytes(data: bytes, path: Path, *, cli_commands: tuple[str, ...] = ("validate", "tree")) -> None:
    """Drive the API and CLI over ``data`` written at ``path`` (see the module docs)."""
    path.write_bytes(data)
    try:
        s = Session.open(path)
    except SessionError:
        # not a session (or a header Python cannot hold): the CLI says so with exit code 2
        assert _cli(["validate", str(path)]) == 2
        assert path.read_bytes() == data, "a failed open changed the file"
        return
    try:
        n = len(s)
        assert n >= 0 and s.entry_count() <= n
        problems = s.problems
        assert all(p.line >= 1 and p.offset >= 0 and isinstance(p.kind, str) for p in problems)
        s.leaf_id, s.needs_migration, s.header
        _allowed(lambda: s.labels)
        _allowed(lambda: s.session_name)
        for e in s.entries()[:ENTRY_BUDGET]:
            e.id, e.parent_id, e.type, e.role, e.line, e.offset
            _allowed(lambda: e.raw)
            if e.id is not None:
                assert s.get_entry(e.id) is not None
                _allowed(lambda: s.get_children(e.id))
        roots = _allowed(s.get_tree)
        if roots is not None:
            assert _tree_size(roots) <= max(n, 0)
        branch = _allowed(s.get_branch)
        if branch is not None and branch:
            assert branch[-1].index == s._core.leaf()
        _allowed(s.build_context)
        for cmd in cli_commands:
            _cli([cmd, str(path)])
    finally:
        s.close()
    assert path.read_bytes() == data, "opening or reading changed the file"


# ==== a pure-Python mutator (no atheris needed) ================================

TOKENS: list[bytes] = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b",",
    b":",
    b"\\",
    b"\\ud800",
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00" * 8,
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xe2\x80\xae",
    b"\x1b[31m",
    b"\x1b]8;;http://x\x07",
    b"null",
    b"true",
    b"0",
    b"1e400",
    b"123456789012345678901234567890",
    b'"type":',
    b'"id":',
    b'"parentId":',
    b'"label":',
    b'"targetId":',
    b'"message":null',
    b'"message":{"role":"user","content":null}',
    b'"role":"assistant"',
    b'{"type":"session","version":3,"id":"s","cwd":"/"}\n',
    b'{"type":"session","id":"v1"}\n',
    b'{"type":"message","id":"a","parentId":"b","message":{"role":"user","content":"x"}}\n',
    b'{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"y"}}\n',
    b'{"type":"compaction","id":"c","parentId":"a","summary":"s","firstKeptEntryId":"a","tokensBefore":1e400}\n',
    b'{"type":"label","id":"l","parentId":"a","targetId":"a","label":"\\u001b[2J"}\n',
    b'{"type":"branch_summary","id":"bs","parentId":null,"fromId":"root","summary":"s"}\n',
    b"[" * 2000 + b"]" * 2000,
]


def corpus_seeds(limit: int = 64 << 10) -> list[bytes]:
    """Session files of tests/corpus up to ``limit`` bytes (the fuzz seeds)."""
    out = []
    for p in sorted(CORPUS.glob("**/*.jsonl")):
        if p.stat().st_size <= limit:
            out.append(p.read_bytes())
    return out


def mutate(rng: random.Random, seeds: list[bytes]) -> bytes:
    """A seed with a few random edits: bit flips, deletions, inserted tokens, duplicated or
    spliced spans, truncation; one time in ten, random bytes."""
    if rng.random() < 0.1:
        return rng.randbytes(rng.randrange(300))
    d = bytearray(rng.choice(seeds))
    if len(d) > 8192 and rng.random() < 0.5:
        # keep the header, take a window of the rest
        nl = d.find(b"\n") + 1
        s = rng.randrange(nl, len(d) - 4096)
        d = d[:nl] + d[s : s + 4096]
    for _ in range(rng.randrange(1, 6)):
        at = rng.randrange(len(d) + 1)
        op = rng.randrange(7)
        if op == 0 and d:
            i = rng.randrange(len(d))
            d[i] ^= 1 << rng.randrange(8)
        elif op == 1 and d:
            del d[at : at + rng.randrange(1, 32)]
        elif op == 2:
            d[at:at] = rng.choice(TOKENS)
        elif op == 3 and d:
            s = rng.randrange(len(d))
            d[at:at] = d[s : s + rng.randrange(1, 400)]
        elif op == 4:
            del d[at:]
        elif op == 5:
            other = rng.choice(seeds)
            s = rng.randrange(len(other) + 1)
            d[at:at] = other[s : s + rng.randrange(600)]
        else:
            d.insert(min(at, len(d)), rng.randrange(256))
    return bytes(d)
