#!/usr/bin/env python3
"""atheris harness: arbitrary bytes as a session file, through ``Session.open``, the tree,
the branch, ``build_context``, ``problems`` and the CLI's ``validate`` and ``tree``
(checks in session_checks.py).

    python tests/fuzz/fuzz_session.py -runs=2000                 # what CI runs (test_fuzz_short.py)
    python tests/fuzz/fuzz_session.py -max_total_time=3600       # a long run
    python tests/fuzz/fuzz_session.py -runs=1 crash-<sha>         # replay one input

Seeds are the session files of tests/corpus (copied into a scratch folder that libFuzzer
may add to; pass your own folder as the last argument to keep what it finds). A crash
writes ``crash-<sha>`` in the current folder and exits non-zero. The Rust extension is not
instrumented, so coverage guidance comes from the Python side only.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the repository root, for tests.support
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["sessiontree", "session_checks"]):
    import session_checks

_WORK = Path(tempfile.mkdtemp(prefix="sessiontree-fuzz-"))
_FILE = _WORK / "input.jsonl"


def TestOneInput(data: bytes) -> None:
    session_checks.check_bytes(data, _FILE)


def _seed_dir() -> str:
    seeds = _WORK / "seeds"
    seeds.mkdir(exist_ok=True)
    for k, data in enumerate(session_checks.corpus_seeds()):
        (seeds / f"seed-{k:03d}.jsonl").write_bytes(data)
    return str(seeds)


def main(argv: list[str]) -> None:
    args = list(argv)
    if not any(not a.startswith("-") for a in args[1:]):
        args.append(_seed_dir())
    if not any(a.startswith("-max_len=") for a in args):
        args.append("-max_len=65536")
    if not any(a.startswith("-timeout=") for a in args):
        args.append("-timeout=30")
    atheris.Setup(args, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "100")
    main(sys.argv)
