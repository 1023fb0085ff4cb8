"""The HTML and OpenTelemetry exports as CPU ratios measured in the same run, small enough for CI.

The full-size figures (10 MiB to 1 GiB, wall and CPU) are ``benches/html_report.py
--export-only`` and ``benches/otel_speed.py`` (docs/benchmarks.md). Here: a 5 MiB generated
session, CPU seconds (this process's, every thread; pigz's from ``RUSAGE_CHILDREN``), the
best of interleaved rounds, bounds wide enough for a shared, noisy 2-core machine.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benches"))
from inputs import session_file  # noqa: E402

from sessiontree import Session  # noqa: E402
from sessiontree.otel import to_otlp  # noqa: E402


@pytest.fixture(autouse=True)
def _cold_opens(monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", "off")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _cpu(f) -> float:
    t = time.process_time()
    f()
    return time.process_time() - t


@pytest.mark.skipif(shutil.which("pigz") is None, reason="pigz is not installed (apt-get install -y pigz)")
def test_the_html_export_costs_about_what_pigz_costs(tmp_path):
    # Target (issue 18, 32): export-html at most 1.3x `pigz -1 -p 2` in wall time at 1 GiB; the
    # export takes 1.0-1.2x pigz's CPU seconds from 10 MiB up (docs/benchmarks.md). Here: 5 MiB,
    # the export (after the open) against pigz compressing the same file, in CPU seconds.
    src = session_file(5)
    s = Session.open(src)
    out = tmp_path / "page.html"
    export = pigz = float("inf")
    for _ in range(3):
        export = min(export, _cpu(lambda: s.export_html(out)))
        c = _children_cpu()
        with open(tmp_path / "x.gz", "wb") as fh:
            subprocess.run(["pigz", "-1", "-p", "2", "-c", str(src)], stdout=fh, check=True)
        pigz = min(pigz, _children_cpu() - c)
    s.close()
    assert export <= 2.0 * pigz, (export, pigz)


def test_the_otel_export_costs_about_what_the_html_export_costs(tmp_path):
    # Targets (issue 31): `sessiontree otel` at most 1.5x export-html in time (0.6-1.0x measured,
    # wall, 10 MiB to 1 GiB); `--content full` (every message's text, three times the output;
    # 1.5-1.7x measured) held to 3x here. Here: 5 MiB, in process, CPU seconds after the open
    # (the HTML export's on both cores, the mapping's on one: these CPU ratios sit below the
    # wall ones).
    s = Session.open(session_file(5))
    html = none = full = float("inf")
    for _ in range(3):
        html = min(html, _cpu(lambda: s.export_html(tmp_path / "page.html")))
        none = min(none, _cpu(lambda: to_otlp(s, tmp_path / "none.jsonl")))
        full = min(full, _cpu(lambda: to_otlp(s, tmp_path / "full.jsonl", content="full")))
    s.close()
    assert none <= 1.5 * html, (none, html)
    assert full <= 3.0 * html, (full, html)
