"""Issue 21 (layers): the facade's friends read through public batch views; this checks that
costs did not move. Ratios in one run, contenders interleaved:

* ``Session.validate()`` now (validation over the public views) against the previous
  implementation (validation over the core index, loaded from a git revision, default
  ``main``'s parent of this branch's first layers commit: pass ``--rev``) on the same open
  session;
* ``sessiontree`` CLI startup (``python -m sessiontree --help``) of this tree against the same
  revision's tree (``git archive``, with this build's core), bytecode warmed for both.

    python benches/bench_layers.py [--file /work/bench-data/gen-100MiB.jsonl] [--rounds 5] [--rev REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _old_validation(rev: str):
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:python/sessiontree/validation.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    d = tempfile.mkdtemp()
    p = Path(d) / "old_validation.py"
    p.write_text(re.sub(r"from \.(\w)", r"from sessiontree.\1", src))
    spec = importlib.util.spec_from_file_location("old_validation", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _best(fn, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default="/work/bench-data/gen-100MiB.jsonl")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rev", default="451ef75")
    args = ap.parse_args()
    from sessiontree import Session
    from sessiontree.validation import content_problems, structural_problems

    old = _old_validation(args.rev)
    s = Session.open(args.file, index_cache=False)
    assert structural_problems(s) == old.structural_problems(s._core, s._load_raw)
    new_t, old_t, newc_t, oldc_t = [], [], [], []
    for _ in range(args.rounds):  # interleaved
        new_t.append(_best(lambda: structural_problems(s), 1))
        old_t.append(_best(lambda: old.structural_problems(s._core, s._load_raw), 1))
        newc_t.append(_best(lambda: content_problems(s), 1))
        oldc_t.append(_best(lambda: old.content_problems(s._core, s._load_raw), 1))
    old_tree = tempfile.mkdtemp()
    subprocess.run(f"git -C {ROOT} archive {args.rev} python | tar -x -C {old_tree}", shell=True, check=True)
    import sessiontree

    shutil.copy(next(Path(sessiontree.__file__).parent.glob("_core*.so")), Path(old_tree, "python", "sessiontree"))

    def cli_run(pythonpath: str) -> float:
        t = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=pythonpath)
        subprocess.run([sys.executable, "-m", "sessiontree", "--help"], check=True, capture_output=True, env=env)
        return time.perf_counter() - t

    new_py, old_py = str(Path(sessiontree.__file__).parent.parent), str(Path(old_tree, "python"))
    cli_run(new_py), cli_run(old_py)  # warm-up: bytecode written for both
    cli, imp = [], []
    for _ in range(args.rounds * 2):
        cli.append(cli_run(new_py))
        imp.append(cli_run(old_py))
    med = statistics.median
    print(f"file {args.file} ({len(s)} entries), rounds {args.rounds}, load {os.getloadavg()[0]:.2f}")
    print(
        f"structural_problems  new {med(new_t) * 1e3:8.1f} ms  old {med(old_t) * 1e3:8.1f} ms  "
        f"ratio {med(new_t) / med(old_t):.2f}"
    )
    print(
        f"content_problems     new {med(newc_t) * 1e3:8.1f} ms  old {med(oldc_t) * 1e3:8.1f} ms  "
        f"ratio {med(newc_t) / med(oldc_t):.2f}"
    )
    print(
        f"sessiontree --help   new {med(cli) * 1e3:8.1f} ms  old {med(imp) * 1e3:8.1f} ms  "
        f"ratio {med(cli) / med(imp):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
