"""Property tests: search against a brute-force oracle (tests/search/_build.py) on generated
stores. Every hit is real (its text matches the query) and nothing is missed for phrases, id
tokens, prefixes, OR and negation."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import search

from ._build import Builder, oracle_parts

WORDS = ["alpha", "beta", "Gamma", "delta", "fooBar", "snake_case", "bd-q3fy", "src/lib.rs", "a1b2", "HTTPServer", "x9"]
SEPS = [" ", "  ", ", ", ". ", "\n", " (", ") ", "/", "-"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 8))
    out = []
    for _ in range(n):
        out.append(draw(st.sampled_from(WORDS)))
        out.append(draw(st.sampled_from(SEPS)))
    return "".join(out)


def _has(text_parts: list[str], q: list[str], prefix: bool = False) -> bool:
    n = len(q)
    for i in range(len(text_parts) - n + 1):
        w = text_parts[i : i + n]
        if w[:-1] == q[:-1] and (w[-1].startswith(q[-1]) if prefix else w[-1] == q[-1]):
            return True
    return False


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, object]:
    """A query and its oracle: a function of a text's parts."""
    kind = draw(st.sampled_from(["word", "phrase", "id", "prefix", "or", "not"]))
    w1 = draw(st.sampled_from(WORDS))
    w2 = draw(st.sampled_from(WORDS))
    p1, p2 = oracle_parts(w1), oracle_parts(w2)
    if kind == "word":
        return p1[0], lambda t: _has(t, p1[:1])
    if kind == "phrase":
        return f'"{w1} {w2}"', lambda t: _has(t, p1 + p2)
    if kind == "id":
        return w1, lambda t: _has(t, p1)
    if kind == "prefix":
        stem = p1[0][: max(1, len(p1[0]) - 2)]
        return f"{stem}*", lambda t: _has(t, [stem], prefix=True)
    if kind == "or":
        return f"{w1} OR {w2}", lambda t: _has(t, p1) or _has(t, p2)
    return f"{w1} -{w2}", lambda t: _has(t, p1) and not _has(t, p2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(texts(), min_size=1, max_size=12), qs=st.lists(queries(), min_size=1, max_size=4))
def test_hits_equal_the_brute_force_oracle(docs, qs):
    with tempfile.TemporaryDirectory() as tmp:
        b = Builder(Path(tmp) / "s.jsonl")
        made = {b.user(t): t for t in docs}
        b.write()
        for q, oracle in qs:
            got = {h.entry_id for h in search(q, b.path, limit=1000, index_cache=False).hits}
            want = {k for k, t in made.items() if oracle(oracle_parts(t))}  # type: ignore[operator]
            assert got == want, (q, docs)
