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

from inputs import MAX_MB, TAIL_MB, session_file, session_with_tail
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
    entry = {"type": "message", "id": f"w{n:07x}", "parentId": parent, "timestamp": "2026-02-01T00:00:00.000Z",
             "message": {"role": "user", "content": "appended by another writer " * 4, "timestamp": 1769904000000}}
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


MESSAGE = {"role": "user", "content": [{"type": "text", "text": "please refactor the parser " * 8}], "timestamp": 1769904000000}


@pytest.mark.parametrize("durability", ["flush", "fsync"])
def bench_append_message(benchmark, tmp_path, durability):
    s = Session.create("/bench", session_dir=tmp_path, durability=durability)
    benchmark.group = f"append ({durability})"
    benchmark.pedantic(s.append_message, args=(MESSAGE,), rounds=300 if durability == "flush" else 50, warmup_rounds=5)
    s.close()


@pytest.mark.parametrize("mode", ["buffered", "flush", "fsync"])
def bench_orjson_write_baseline(benchmark, tmp_path, mode):
    """The same entry line as append_message writes: orjson.dumps + write (buffered file object;
    `flush` also flushes it to the OS; `fsync` also fsyncs)."""
    entry = {"type": "message", "id": "0123abcd", "parentId": "89abcdef", "timestamp": "2026-02-01T00:00:00.000Z",
             "message": MESSAGE}
    fh = open(tmp_path / "baseline.jsonl", "ab")

    def write():
        fh.write(orjson.dumps(entry) + b"\n")
        if mode != "buffered":
            fh.flush()
        if mode == "fsync":
            os.fsync(fh.fileno())

    benchmark.group = f"append ({'fsync' if mode == 'fsync' else 'flush'})"
    benchmark.pedantic(write, rounds=300 if mode != "fsync" else 50, warmup_rounds=5)
    fh.close()
