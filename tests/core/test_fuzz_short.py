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
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fuzz"))

import session_checks  # noqa: E402

HARNESS = Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_session.py"


@pytest.mark.skipif(importlib.util.find_spec("atheris") is None, reason="atheris is not installed")
def test_atheris_harness_runs_clean_for_a_bounded_number_of_inputs(tmp_path):
    runs = int(os.environ.get("SESSIONTREE_ATHERIS_RUNS", "2000"))
    proc = subprocess.run(
        [sys.executable, str(HARNESS), f"-runs={runs}", "-seed=1", "-max_len=16384", "-print_final_stats=1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = "\n".join(proc.stderr.splitlines()[-40:])
    assert proc.returncode == 0, f"atheris found a failing input (saved in {tmp_path}):\n{tail}"
    assert f"Done {runs} runs" in proc.stderr, tail
    assert not list(tmp_path.glob("crash-*"))


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
