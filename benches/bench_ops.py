"""Operations whose cost should follow the work, not the file size.

``small`` is a generated session of TAIL_MB; ``big`` is SESSIONTREE_BENCH_MAX_MB of another
conversation followed by that same session, so both have the same active path. Compare each
operation's ``big`` figure with its ``small`` one (targets: build_context, get_branch,
prepare_compaction within 1.5x; refresh and get_entries(since) within 2x). Appends compare with
a plain ``orjson.dumps`` + write of the same line.
"""

from __future__ import annotations

import os

import orjson
import pytest

from inputs import APPEND_MODES, MAX_MB, TAIL_MB, append_pair, session_file, session_with_tail
from sessiontree import Session
from sessiontree.compaction import find_cut_point, prepare_compaction

SHAPES = ["small", "big"] if MAX_MB > TAIL_MB else ["small"]


def _path(shape: str):
    return session_file(TAIL_MB) if shape == "small" else session_with_tail(MAX_MB)


_open: dict = {}


def _session(shape: str) -> Session:
    if shape not in _open:
        _open[shape] = Session.open(_path(shape))
    return _open[shape]


@pytest.mark.parametrize("shape", SHAPES)
def bench_build_context(benchmark, shape):
    s = _session(shape)
    benchmark.group = "build_context"
    assert benchmark(s.build_context).messages


@pytest.mark.parametrize("shape", SHAPES)
def bench_get_branch(benchmark, shape):
    s = _session(shape)
    benchmark.group = "get_branch"
    assert benchmark(s.get_branch)


@pytest.mark.parametrize("shape", SHAPES)
def bench_prepare_compaction(benchmark, shape):
    s = _session(shape)
    benchmark.group = "prepare_compaction"
    benchmark(lambda: prepare_compaction([e.raw for e in s.get_branch()]))


@pytest.mark.parametrize("shape", SHAPES)
def bench_find_cut_point(benchmark, shape):
    s = _session(shape)
    path = [e.raw for e in s.get_branch()]
    benchmark.group = "find_cut_point"
    benchmark(find_cut_point, path, 0, len(path), 20000)


@pytest.mark.parametrize("shape", SHAPES)
def bench_get_entries_since_near_end(benchmark, shape):
    s = _session(shape)
    since = s.entries()[-10].id
    benchmark.group = "get_entries(since)"
    assert len(benchmark(s.get_entries, since)) == 9


def _line(parent: str | None, n: int) -> bytes:
    entry = {
        "type": "message",
        "id": f"w{n:07x}",
        "parentId": parent,
        "timestamp": "2026-02-01T00:00:00.000Z",
        "message": {"role": "user", "content": "appended by another writer " * 4, "timestamp": 1769904000000},
    }
    return orjson.dumps(entry) + b"\n"


@pytest.mark.parametrize("shape", SHAPES)
def bench_refresh_after_one_append(benchmark, shape, scratch_copy):
    """Another process appends one entry; refresh() indexes it."""
    path = scratch_copy(_path(shape))
    s = Session.open(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    n = iter(range(10**9))

    def append():
        os.write(fd, _line(s.leaf_id, next(n)))

    try:
        benchmark.group = "refresh"
        benchmark.pedantic(s.refresh, setup=append, rounds=200, warmup_rounds=5)
    finally:
        os.close(fd)


APPEND_BATCH = 1000


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
def bench_append_message(benchmark, tmp_path, durability):
    """APPEND_BATCH entries per round through Session.append_message (divide by the batch for
    the cost of one); compare with bench_orjson_write_baseline in the same group."""
    n = APPEND_BATCH if durability != "fsync" else 20
    ours, _, close = append_pair(tmp_path, durability, n)
    benchmark.group = f"append x{n} ({durability} / {dict(APPEND_MODES)[durability]})"
    benchmark.pedantic(ours, rounds=30 if durability != "fsync" else 5, warmup_rounds=2)
    close()


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
def bench_orjson_write_baseline(benchmark, tmp_path, durability):
    """The same entry line as append_message writes: orjson.dumps + write on a buffered file
    (plus flush() for "flush", plus os.fsync for "fsync")."""
    n = APPEND_BATCH if durability != "fsync" else 20
    _, baseline, close = append_pair(tmp_path, durability, n)
    benchmark.group = f"append x{n} ({durability} / {dict(APPEND_MODES)[durability]})"
    benchmark.pedantic(baseline, rounds=30 if durability != "fsync" else 5, warmup_rounds=2)
    close()
