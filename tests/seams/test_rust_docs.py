"""Rust docs open as the Python docstrings do: one sentence of at most about 100 characters.

Checked on every module doc (``//!``) and every doc comment (``///``) of a ``pub`` item in
``rust/src`` (``pub(crate)`` and private items excepted), with the rule and the limit of
``tests/seams/test_docstrings.py``: rustdoc shows that sentence as the item's summary.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.seams.test_docstrings import LIMIT, first_sentence

SRC = Path(__file__).resolve().parents[2] / "rust" / "src"
_PUB_ITEM = re.compile(r"\s*pub\s")


def docs(text: str) -> list[tuple[int, str]]:
    """``(line, doc)`` for the module doc and each doc comment on a ``pub`` item of ``text``."""
    lines = text.split("\n")
    out = []
    k = 0
    while k < len(lines) and lines[k].lstrip().startswith("//!"):
        k += 1
    if k:
        out.append((1, "\n".join(x.lstrip()[3:] for x in lines[:k])))
    i = k
    while i < len(lines):
        if not re.match(r"\s*///(?!/)", lines[i]):
            i += 1
            continue
        start, block = i, []
        while i < len(lines) and re.match(r"\s*///(?!/)", lines[i]):
            block.append(lines[i].lstrip()[3:])
            i += 1
        j = i
        while j < len(lines) and (lines[j].lstrip().startswith("#[") or not lines[j].strip()):
            j += 1  # attributes between the doc and its item
        if j < len(lines) and _PUB_ITEM.match(lines[j]):
            out.append((start + 1, "\n".join(block)))
    return out


def long_openings(path: Path) -> list[str]:
    return [
        f"{path.relative_to(SRC)}:{line}: {first_sentence(doc)[:60]}..."
        for line, doc in docs(path.read_text())
        if len(first_sentence(doc)) > LIMIT
    ]


def test_rust_docs_open_with_one_short_sentence():
    files = sorted(SRC.rglob("*.rs"))
    assert sum(len(docs(f.read_text())) for f in files) > 500
    assert [x for f in files for x in long_openings(f)] == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("//! " + "word " * 30 + "more.\n//!\n//! Details.\n", 1),
        ("//! Short.\n//! " + "word " * 30 + ".\n\n/// " + "word " * 30 + ".\npub fn f() {}\n", 1),
        ("/// " + "word " * 30 + ".\n#[inline]\npub(crate) fn f() {}\n/// " + "word " * 30 + ".\nfn g() {}\n", 0),
        ("/// Short.\n/// " + "word " * 30 + ".\n#[must_use]\n\npub struct S;\n", 0),
    ],
)
def test_the_check_finds_a_long_opening(text, found):
    assert len([d for _, d in docs(text) if len(first_sentence(d)) > LIMIT]) == found
