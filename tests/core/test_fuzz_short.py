"""A short, bounded fuzz pass on every CI run (the long runs are in docs/reliability.md).

* the atheris harness (tests/fuzz/fuzz_session.py) for ``SESSIONTREE_ATHERIS_RUNS`` inputs
  (default 2000), when atheris is installed. It runs in a child process: libFuzzer ends its
  process when done, and a Rust abort (which must never happen) would take pytest down;
* a pure-Python mutation loop over the corpus that always runs (``SESSIONTREE_PYFUZZ_ITERS``,
  default 600), with the same checks (tests/fuzz/session_checks.py).
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fuzz"))

import session_checks  # noqa: E402

HARNESS = Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_session.py"


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris is not installed")
def test_atheris_harness_runs_clean_for_a_bounded_number_of_inputs(tmp_path):
    """Two harness processes at once (seeds 1 and 2, half the inputs each): the machine's two cores."""
    runs = int(os.environ.get("SESSIONTREE_ATHERIS_RUNS", "2000"))
    halves = [(seed, runs // 2 + (runs % 2 if seed == 1 else 0)) for seed in (1, 2)]
    procs = []
    for seed, n in halves:
        folder = tmp_path / f"seed{seed}"
        folder.mkdir()
        err = (folder / "stderr.txt").open("w+")
        cmd = [sys.executable, str(HARNESS), f"-runs={n}", f"-seed={seed}", "-max_len=16384", "-print_final_stats=1"]
        procs.append((subprocess.Popen(cmd, cwd=folder, stdout=subprocess.DEVNULL, stderr=err), err, folder, n))
    for proc, err, folder, n in procs:
        try:
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
        err.seek(0)
        text = err.read()
        err.close()
        tail = "\n".join(text.splitlines()[-40:])
        assert proc.returncode == 0, f"atheris found a failing input (saved in {folder}):\n{tail}"
        # libFuzzer counts the seed corpus's inputs in its runs too
        done = re.search(r"^Done (\d+) runs", text, re.M)
        assert done and int(done.group(1)) >= n, tail
        assert not list(folder.glob("crash-*"))


def test_random_mutations_of_the_corpus_never_escape_as_bugs(tmp_path):
    iters = int(os.environ.get("SESSIONTREE_PYFUZZ_ITERS", "600"))
    rng = random.Random(20260101)
    seeds = session_checks.corpus_seeds(limit=32 << 10)
    assert seeds, "no corpus found"
    target = tmp_path / "input.jsonl"
    for k in range(iters):
        data = session_checks.mutate(rng, seeds)
        try:
            # the tree command is the slowest: check it on every fourth input
            session_checks.check_bytes(data, target, cli_commands=("validate", "tree") if k % 4 == 0 else ("validate",))
        except BaseException:
            (tmp_path / "failing-input.jsonl").write_bytes(data)
            raise


def test_every_corpus_file_passes_the_fuzz_checks(tmp_path):
    for seed in session_checks.corpus_seeds(limit=1 << 30):
        session_checks.check_bytes(seed, tmp_path / "input.jsonl", cli_commands=("validate",))
