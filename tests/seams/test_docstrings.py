"""Docstrings open with one sentence of at most about 100 characters (then the details).

Checked in the facade (``session/``), the CLI (but the modules of the store-wide commands, whose
owners keep their own), ``rpc/`` and the pure rules and views; the rest of the package follows as
it is touched.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sessiontree

PKG = Path(sessiontree.__file__).parent
CHECKED = [
    *sorted((PKG / "session").glob("*.py")),
    *sorted(p for p in (PKG / "cli").glob("*.py") if p.stem not in ("search", "convert", "otel", "fleet")),
    *sorted((PKG / "rpc").glob("*.py")),
    *(PKG / f"{m}.py" for m in ("context", "compaction", "branch_summary", "entries", "listing", "tokens", "usage")),
]
LIMIT = 105  # "about 100": a long Pi function name in backquotes may tip it over


def first_sentence(doc: str) -> str:
    """The first sentence of a docstring's first paragraph, its lines joined."""
    text = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.search(r"[.!?](\s|$)", text)
    return text[: m.start() + 1] if m else text


def long_openings(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node)
            if doc and len(first_sentence(doc)) > LIMIT:
                found.append(f"{path.relative_to(PKG)}:{getattr(node, 'lineno', 1)}: {first_sentence(doc)[:60]}...")
    return found


def test_docstrings_open_with_one_short_sentence():
    assert len(CHECKED) > 30
    assert [f for p in CHECKED for f in long_openings(p)] == []


def test_the_check_finds_a_long_opening(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('def f():\n    """' + "word " * 30 + 'and more.\n\n    Details."""\n')
    global PKG
    old, PKG = PKG, tmp_path
    try:
        assert len(long_openings(probe)) == 1
        probe.write_text('def f():\n    """Short.\n\n    ' + "word " * 30 + '."""\n')
        assert long_openings(probe) == []
    finally:
        PKG = old
