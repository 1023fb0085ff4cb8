"""Opening a session vs reading it with baselines, per size (1 MB .. SESSIONTREE_BENCH_MAX_MB).

Compare within a size: ``open`` against ``wc_l`` (a subprocess), ``line_count`` (memchr-based
newline count in-process) and the orjson loader (orjson.loads every line + a dict by id),
with and without the garbage collector.
"""

from __future__ import annotations

import pytest

from inputs import SIZES, line_count, orjson_loader, orjson_loader_gc_off, session_file, wc_l
from sessiontree import Session

pytestmark = pytest.mark.benchmark(group="open", min_rounds=3, warmup=False)


def rounds(mb: int) -> int:
    return 10 if mb <= 10 else 5 if mb <= 100 else 3


@pytest.mark.parametrize("mb", SIZES)
def bench_open(benchmark, mb):
    path = session_file(mb)
    benchmark.group = f"open {mb} MB"
    s = benchmark.pedantic(Session.open, args=(path,), rounds=rounds(mb), warmup_rounds=1)
    assert len(s) > 0


@pytest.mark.parametrize("mb", SIZES)
def bench_wc_l(benchmark, mb):
    path = session_file(mb)
    benchmark.group = f"open {mb} MB"
    assert benchmark.pedantic(wc_l, args=(path,), rounds=rounds(mb), warmup_rounds=1) > 0


@pytest.mark.parametrize("mb", SIZES)
def bench_line_count(benchmark, mb):
    path = session_file(mb)
    benchmark.group = f"open {mb} MB"
    assert benchmark.pedantic(line_count, args=(path,), rounds=rounds(mb), warmup_rounds=1) > 0


@pytest.mark.parametrize("gc", ["gc_on", "gc_off"])
@pytest.mark.parametrize("mb", SIZES)
def bench_orjson_loader(benchmark, mb, gc):
    path = session_file(mb)
    benchmark.group = f"open {mb} MB"
    load = orjson_loader if gc == "gc_on" else orjson_loader_gc_off
    r = 1 if mb > 100 else 3
    assert benchmark.pedantic(load, args=(path,), rounds=r, warmup_rounds=0)
