"""The main job as history grows (pytest-benchmark view of ``benches/main_job.py``).

The same compaction and tail after TAIL_MB and after SESSIONTREE_BENCH_MAX_MB of history
(``inputs.compacted_with_tail``): every operation here has the same work on both, so each
``big`` figure should be within 2x of its ``small`` one. ``benches/report.py --main-job``
writes the 10 MB / 100 MB / 1 GB table to docs/benchmarks.md.
"""

from __future__ import annotations

import pytest

from inputs import MAX_MB, TAIL_MB, compacted_with_tail
from main_job import read_ops

SIZES = [TAIL_MB, MAX_MB] if MAX_MB > TAIL_MB else [TAIL_MB]
_ops: dict = {}


def _op(mb: float, name: str):
    if mb not in _ops:
        _ops[mb] = read_ops(compacted_with_tail(mb))
    return _ops[mb][name]


@pytest.mark.parametrize("mb", SIZES)
@pytest.mark.parametrize(
    "name",
    [
        "AutoCompactor.context_tokens()",
        "AutoCompactor.before_prompt(), nothing to compact",
        "plan_compaction() (compact --dry-run's plan)",
        "Session.find_cut_point(20000)",
    ],
)
def bench_main_job(benchmark, mb, name):
    benchmark.group = name
    benchmark(_op(mb, name))
