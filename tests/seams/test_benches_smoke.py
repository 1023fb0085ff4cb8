"""The benchmarks still run: every pytest-benchmark function once (timing disabled) and the
report script end to end, on tiny inputs. The real figures come from ``benches/`` itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ, SESSIONTREE_BENCH_MAX_MB="2", SESSIONTREE_BENCH_SHAPES="")
    env["SESSIONTREE_BENCH_DIR"] = str(tmp_path / "inputs")
    # the benches' own default (benches/conftest.py), not the suite's per-test folder: a warm open
    # of a few MB takes well under a millisecond, and ratios to it are noise
    env["SESSIONTREE_INDEX_CACHE"] = "off"
    return env


def test_every_benchmark_runs(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "benches" / "pytest.ini"),
            str(ROOT / "benches"),
            "--benchmark-disable",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert " passed" in out.stdout and "failed" not in out.stdout


#: Runs benches/report.py as a script with matplotlib unimportable (as without the bench extra).
NO_MATPLOTLIB = (
    "import runpy, sys; sys.modules['matplotlib'] = None; sys.argv = [sys.argv[1], *sys.argv[2:]]; "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)

#: Hand-written paragraphs of docs/benchmarks.md that the README and the docs cite: one from each
#: section that benches/report.py does not measure, and the prose beside its own tables.
HAND_WRITTEN = [
    '## Reading with pread: the cost of "no SIGBUS" (issue 11 item 7)',
    "Where the cost is: the copy itself",
    "## `sessiontree rpc`: start-up, `get_messages`, `get_entries since <last>`",
    "Pi 1.6.0's published figure for starting on a 128 MB session",
    "Since appended lines are `JSON.stringify`'s bytes",
    "## HTML view (`export-html`)",
    "## Fleet (`benches/fleet_bench.py`)",
    "## The main job as history grows",
]


def test_the_report_writes_its_tables_and_keeps_hand_written_text(tmp_path):
    """Issue 22: the report used to rewrite docs/benchmarks.md whole, dropping the hand-written
    sections, and crashed without matplotlib. Run on a copy of the real file, matplotlib blocked."""
    docs = tmp_path / "docs"
    docs.mkdir()
    original = (ROOT / "docs" / "benchmarks.md").read_text()
    for text in HAND_WRITTEN:
        assert text in original, text
    (docs / "benchmarks.md").write_text(original)
    out = subprocess.run(
        [sys.executable, "-c", NO_MATPLOTLIB, str(ROOT / "benches" / "report.py"), "--out", str(docs)],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "matplotlib" in out.stdout and ".[bench]" in out.stdout, out.stdout  # says which extra brings it
    assert not (docs / "benchmarks.png").exists()
    md = (docs / "benchmarks.md").read_text()
    opened = md[md.index("<!-- generated: open -->") : md.index("<!-- /generated: open -->")]
    assert "| 1 MiB |" in opened and "| 2 MiB |" in opened and "| 1024 MiB |" not in opened  # re-measured
    assert "## Appending an entry" in md and "| none | buffered |" in md
    for text in HAND_WRITTEN:
        assert text in md, f"dropped: {text}"
    # nothing outside the generated blocks changed
    assert _outside_generated(md) == _outside_generated(original)
    # a second run replaces the blocks instead of adding new ones
    again = subprocess.run(
        [sys.executable, str(ROOT / "benches" / "report.py"), "--out", str(docs), "--no-plot"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    md2 = (docs / "benchmarks.md").read_text()
    # (counted in the generated open block: hand-written tables may have a "| 2 MiB |" row too)
    opened2 = md2[md2.index("<!-- generated: open -->") : md2.index("<!-- /generated: open -->")]
    assert md2.count("## Appending an entry") == 1 and opened2.count("| 2 MiB |") == 1
    assert md2.count("<!-- generated: open -->") == 1 and _outside_generated(md2) == _outside_generated(original)
    assert _outside_generated(md2) == _outside_generated(original)


def _outside_generated(md: str) -> str:
    """The text with every block benches/report.py generates cut out (its markers kept)."""
    import re

    return re.sub(r"(<!-- generated: (\S+) -->).*?(<!-- /generated: \2 -->)", r"\1\3", md, flags=re.S)


def test_a_new_report_has_every_block(tmp_path):
    """With no docs/benchmarks.md yet, the report writes a complete file of its blocks."""
    sys.path.insert(0, str(ROOT / "benches"))
    try:
        import report
    finally:
        sys.path.remove(str(ROOT / "benches"))
    path = tmp_path / "benchmarks.md"
    report.splice_blocks(path, {"open": ["# Benchmarks", "", "table"], "append": ["## Appending an entry"]})
    text = path.read_text()
    assert text.index("<!-- generated: open -->") < text.index("<!-- generated: append -->")
    path.write_text(text.replace("table", "old table") + "\nhand-written tail\n")
    report.splice_blocks(path, {"open": ["# Benchmarks", "", "new table"]})
    text = path.read_text()
    assert "new table" in text and "old table" not in text and "hand-written tail" in text
    assert "## Appending an entry" in text  # a block not measured this run is kept as it was


def test_the_report_writes_the_main_job_section(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "benchmarks.md").write_text(
        "# Benchmarks\n\nearlier tables\n\n![open time and memory vs size](benchmarks.png)\n"
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "benches" / "report.py"), "--out", str(docs), "--main-job", "1", "2"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    md = (docs / "benchmarks.md").read_text()
    assert "earlier tables" in md and "## The main job as history grows" in md
    assert "Session.compact() (offline summarizer, keep 20000)" in md and "peak RSS" in md
