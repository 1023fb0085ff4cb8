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


def test_the_report_writes_its_tables(tmp_path):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benches" / "report.py"), "--out", str(tmp_path / "docs"), "--no-plot"],
        cwd=ROOT,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    md = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "| 1 MiB |" in md and "| 2 MiB |" in md
    assert "## Appending an entry" in md and "| none | buffered |" in md


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
