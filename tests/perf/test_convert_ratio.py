"""The conversion's speed against ``pigz -1 -p 2`` on the same file, at a small size (the full
figures: ``benches/convert_speed.py``, docs/benchmarks.md "Converting Claude Code and Codex
files"). CPU seconds (this process for the conversion, the child for pigz), minimum of
interleaved runs, with a margin for a loaded 2-core machine; and the cost is linear in size."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benches"))
from convert_speed import gen_claude_code, gen_codex  # noqa: E402

from sessiontree import convert  # noqa: E402

PIGZ = shutil.which("pigz")


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _pigz(path: Path) -> None:
    """``pigz -1 -p 2 -c path > path.gz``: the floor writes its output to a file on the same
    disk as the conversion's (like for like), as ``benches/convert_speed.py`` does."""
    gz = path.with_name(path.name + ".gz")
    with open(gz, "wb") as out:
        subprocess.run([PIGZ, "-1", "-p", "2", "-c", str(path)], stdout=out, check=True)


def _pigz_cpu(path: Path) -> float:
    before = _child_cpu()
    _pigz(path)
    return _child_cpu() - before


def _convert_cpu(path: Path, out: Path) -> float:
    t = time.process_time()
    convert.to_pi(path, out)
    return time.process_time() - t


def _pigz_wall(path: Path) -> float:
    t = time.perf_counter()
    _pigz(path)
    return time.perf_counter() - t


def _convert_wall(path: Path, out: Path) -> float:
    t = time.perf_counter()
    convert.to_pi(path, out)
    return time.perf_counter() - t


@pytest.mark.skipif(PIGZ is None, reason="pigz is not installed (.ci/run installs it)")
@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_conversion_wall_time_is_a_small_multiple_of_pigz(tmp_path, fmt):
    """Wall time (the target's measure) against pigz on both cores, the file written and
    fsynced: the conversion uses both cores too, both Claude Code passes on two workers
    (docs/benchmarks.md "Session 13": 1.26x to 1.49x at 10 and 100 MB at load 8); the bound,
    4.5x, leaves room for a loaded machine and still fails the single-threaded build with the
    write-back left to the final fsync at its worst (3x to 6x)."""
    src = tmp_path / "src.jsonl"
    (gen_claude_code if fmt == "claude-code" else gen_codex)(src, 8)
    best_c = best_p = float("inf")
    for k in range(3):
        best_p = min(best_p, _pigz_wall(src))
        best_c = min(best_c, _convert_wall(src, tmp_path / f"w{k}.jsonl"))
    assert best_c <= 4.5 * best_p, (best_c, best_p)


@pytest.mark.skipif(PIGZ is None, reason="pigz is not installed (.ci/run installs it)")
@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_conversion_costs_a_small_multiple_of_pigz(tmp_path, fmt):
    src = tmp_path / "src.jsonl"
    (gen_claude_code if fmt == "claude-code" else gen_codex)(src, 8)
    best_c = best_p = float("inf")
    for k in range(3):
        best_p = min(best_p, _pigz_cpu(src))
        best_c = min(best_c, _convert_cpu(src, tmp_path / f"o{k}.jsonl"))
    # target: 1.5x pigz (docs/benchmarks.md has the measured figures: about 1.1x to 1.3x in
    # CPU at 100 MB, every thread counted); here CPU time at 8 MB with a margin for a loaded
    # 2-core machine: it catches a return to a value tree per line (about 2x) or to
    # per-line Python-speed work
    assert best_c <= 2 * best_p, (best_c, best_p)


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_conversion_time_is_linear_in_size(tmp_path, fmt):
    gen = gen_claude_code if fmt == "claude-code" else gen_codex
    small, big = tmp_path / "s.jsonl", tmp_path / "b.jsonl"
    gen(small, 2)
    gen(big, 8)
    t_small = min(_convert_cpu(small, tmp_path / f"s{k}.jsonl") for k in range(3))
    t_big = min(_convert_cpu(big, tmp_path / f"b{k}.jsonl") for k in range(3))
    assert t_big <= 4 * t_small * 1.8, (t_small, t_big)
