"""Performance as ratios measured in the same run (never absolute times), small enough for CI.

Each check compares two measurements taken here and now, as the minimum of several
interleaved runs, in CPU seconds of this process (other jobs on a shared, noisy 2-core
machine inflate wall time, not CPU time), with margins
wide enough for that noise. The full-size figures (up to 1 GB) come from ``benches/``
(``python benches/report.py``; docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benches"))
import inputs  # noqa: E402
from inputs import (
    append_pair,
    chain,
    labels,
    orjson_loader,
    session_file,  # noqa: E402
    session_with_tail,
    siblings,
)

from sessiontree import Session  # noqa: E402


@pytest.fixture(autouse=True)
def _cold_opens(monkeypatch):
    """These ratios are about the scan: every open here is cold (no saved index), except in
    the saved-index tests below, which name their cache folder."""
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", "off")


def best_pair(a, b, rounds: int) -> tuple[float, float]:
    """``inputs.best_pair`` on CPU time (``time.process_time``, every thread of this process):
    other jobs sharing CI's two cores inflate wall time, not this."""
    return inputs.best_pair(a, b, rounds, clock=time.process_time)


# ==== opening ====================================================================


def test_open_is_much_faster_than_an_orjson_loader():
    # Target at 1 GB: >= 10x the orjson loader with GC off (docs/benchmarks.md has the
    # measured ratio: 16x at 1 GiB on the 2-core dev machine). Here: 12 MB, asserting a floor
    # that catches a regression to per-line Python-speed work.
    path = session_file(12)
    gc.disable()
    try:
        t_open, t_orjson = best_pair(lambda: Session.open(path), lambda: orjson_loader(path), 3)
    finally:
        gc.enable()
    assert t_orjson / t_open >= 3.0, f"open {t_open:.4f}s vs orjson loader (GC off) {t_orjson:.4f}s"


def test_open_time_is_linear_in_size():
    small, big = session_file(3), session_file(12)
    t_small, t_big = best_pair(lambda: Session.open(small), lambda: Session.open(big), 5)
    ratio = (t_big / t_small) / (big.stat().st_size / small.stat().st_size)
    assert 0.4 <= ratio <= 1.6, f"time per byte at 12 MB is {ratio:.2f}x that at 3 MB"


# ==== cost follows the work =========================================================


@pytest.fixture(scope="module")
def same_tail():
    """(small, big): a 2 MB session, and 16 MB whose active path is the same."""
    return Session.open(session_file(2)), Session.open(session_with_tail(16, tail_mb=2))


@pytest.mark.parametrize("op", ["build_context", "get_branch"])
def test_path_operations_cost_the_same_on_a_big_file_with_the_same_path(same_tail, op):
    small, big = same_tail
    assert [e.id for e in small.get_branch()] == [e.id for e in big.get_branch()]
    # best of 15 (CPU time of every thread of the process: a neighbour thread left by an earlier
    # test can inflate a few ~10 ms rounds; a fresh-clone CI run once read 1.54x at best of 7,
    # where the same build measures 0.98-1.07x idle)
    t_small, t_big = best_pair(getattr(small, op), getattr(big, op), 15)
    assert t_big / t_small <= 1.5, f"{op}: big {t_big:.5f}s vs small {t_small:.5f}s"


def test_refresh_cost_does_not_depend_on_file_size(tmp_path):
    def prepared(src: Path):
        path = tmp_path / src.name
        path.write_bytes(src.read_bytes())
        s = Session.open(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        return s, fd

    small, fd_small = prepared(session_file(2))
    big, fd_big = prepared(session_file(16))
    n = iter(range(10**6))

    def one(s, fd):
        line = {
            "type": "custom",
            "customType": "x",
            "id": f"r{next(n)}",
            "parentId": s.leaf_id,
            "timestamp": "2026-02-01T00:00:00.000Z",
        }
        os.write(fd, orjson.dumps(line) + b"\n")
        t = time.process_time()
        assert s.refresh() == 1
        return time.process_time() - t

    try:
        t_small = min(one(small, fd_small) for _ in range(30))
        t_big = min(one(big, fd_big) for _ in range(30))
    finally:
        os.close(fd_small)
        os.close(fd_big)
    assert t_big / t_small <= 2.0, f"refresh: 16 MB {t_big * 1e6:.1f}us vs 2 MB {t_small * 1e6:.1f}us"


# ==== nothing quadratic ===============================================================


# ==== appending ================================================================


def test_append_costs_at_most_twice_a_plain_orjson_write(tmp_path):
    # An entry appended through the API costs at most 2x orjson.dumps + write of the same line
    # on a buffered file (ours buffered too: durability "none"). About 1.7-1.8x on the 2-core dev
    # machine (docs/benchmarks.md). The ratio is the median of 7 trials, each the best of 7
    # interleaved rounds of both: one lucky round of the baseline (or one slow round of ours)
    # on a noisy machine moves one trial, not the answer.
    ours, baseline, close = append_pair(tmp_path, "none", 400)
    try:
        trials = [best_pair(ours, baseline, 7) for _ in range(7)]
    finally:
        close()
    ratios = sorted(t_ours / t_base for t_ours, t_base in trials)
    t_ours, t_base = trials[[t_ours / t_base for t_ours, t_base in trials].index(ratios[3])]
    assert ratios[3] <= 2.0, (
        f"append {t_ours / 400 * 1e6:.2f} us vs orjson + write {t_base / 400 * 1e6:.2f} us"
        f" (median of the trials' ratios {[round(r, 2) for r in ratios]})"
    )


SHAPES = {
    "siblings": (siblings, lambda s: s.get_children("root")),
    "chain": (chain, lambda s: s.get_branch()),
    "labels": (labels, lambda s: s.labels),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_no_quadratic_blowup(tmp_path, shape):
    make, op = SHAPES[shape]
    n_small, n_big = (5_000, 20_000) if shape == "labels" else (25_000, 100_000)
    small, big = make(tmp_path / "small.jsonl", n_small), make(tmp_path / "big.jsonl", n_big)

    def work(path):
        return lambda: op(Session.open(path))

    # the collector's passes over a big heap are Python's cost, not ours
    gc.collect()
    gc.disable()
    try:
        t_small, t_big = best_pair(work(small), work(big), 5)
    finally:
        gc.enable()
    # linear would be 4x; quadratic 16x
    assert t_big / t_small <= 8.0, f"{shape}: {n_big} took {t_big:.3f}s, {n_small} took {t_small:.3f}s"


# ==== sessiontree rpc ============================================================


def test_rpc_answers_cost_what_the_answer_needs():
    # get_messages and get_entries since <last> on a 20 MB session whose active path is a 2 MB
    # session's cost about what they cost on that 2 MB session (docs/benchmarks.md: 1 GiB vs 10 MiB)
    from sessiontree.rpc import RpcServer

    small, big = session_file(2), session_with_tail(20, 2)
    servers = {p: RpcServer(Session.open(p)) for p in (small, big)}
    last = {p: servers[p].handle({"type": "get_entries", "since": None})["data"]["leafId"] for p in (small, big)}
    assert last[small] == last[big]
    for command in ({"type": "get_messages"}, {"type": "get_entries", "since": last[small]}):
        t_small, t_big = best_pair(lambda: servers[small].handle(command), lambda: servers[big].handle(command), 5)
        assert servers[small].handle(command) == servers[big].handle(command)
        assert t_big / t_small < 3.0, f"{command['type']}: {t_big:.5f}s at 20 MB vs {t_small:.5f}s at 2 MB"


# ==== the main job as history grows (benches/main_job.py) ============================


@pytest.fixture(scope="module")
def main_job_inputs():
    """The same compaction and tail after 5 MB and after 50 MB of history."""
    from inputs import compacted_with_tail

    return compacted_with_tail(5), compacted_with_tail(50)


def test_the_main_job_costs_the_same_after_ten_times_the_history(main_job_inputs):
    # Target at 10 MB vs 1 GB: at most 2x (docs/benchmarks.md has the figures). Here 5 vs 50 MB,
    # best of interleaved rounds; before the context span every one of these grew with the
    # history (50x at 300 MB). Times under 0.3 ms are floored: at that scale a ratio is noise.
    from main_job import time_reads

    best = time_reads(list(main_job_inputs), rounds=9)
    floor = 3e-4
    slow = {
        name: round(max(b, floor) / max(s, floor), 2)
        for name, (s, b) in best.items()
        if max(b, floor) / max(s, floor) > 2.0
    }
    assert not slow, f"ratios 50 MB / 5 MB above 2x: {slow}"


def test_compaction_costs_the_same_and_holds_no_copy_of_the_file(main_job_inputs):
    from main_job import run_write

    small, big = main_job_inputs
    t_small = t_big = float("inf")
    hwm = 0
    for _ in range(3):
        t_small = min(t_small, run_write(small, "compact")["time"])
        r = run_write(big, "compact")
        t_big, hwm = min(t_big, r["time"]), max(hwm, r["hwm"])
    # one fresh process per run is noisier than the in-process rounds above: a wider margin
    # (it was 56x at 300 MB before the context span)
    assert t_big / t_small <= 2.5, f"compact: 50 MB {t_big:.3f}s vs 5 MB {t_small:.3f}s"
    size = big.stat().st_size
    # peak RSS within 1.3x the file (the target), plus the interpreter's own ~60 MiB
    assert hwm <= 1.3 * size + (60 << 20), f"peak RSS {hwm >> 20} MiB for a {size >> 20} MiB file"


# ==== the tree (issue 18) ========================================================


def test_get_tree_costs_at_most_what_the_open_costs():
    # Target at 1 GiB: get_tree() at most 1.3x Session.open (docs/benchmarks.md: 0.11x, it was
    # 3.45x when it made a TreeNode and an Entry per entry, ~1.1x already at 10 MiB). Here:
    # 12 MB, GC on as callers run; 0.5x leaves a wide margin over the lazy tree's ~0.01x and
    # fails the eager one.
    path = session_file(12)
    s = Session.open(path)
    t_tree, t_open = best_pair(s.get_tree, lambda: Session.open(path), 5)
    assert t_tree <= 0.5 * t_open, f"get_tree {t_tree:.4f}s vs open {t_open:.4f}s"


def test_rpc_get_tree_streamed_costs_at_most_the_open():
    # Target at 1 GiB: open + RPC get_tree (nested, as the transports send it) at most 1.5x the
    # open (docs/benchmarks.md: 1.43x under load; 5.9x when every line was checked at answer
    # time and the answer built as one bytes, ~4x the open's wall time for get_tree alone at
    # 10 MiB). Here: 12 MB, CPU time (every thread), get_tree alone at most 2x an open's
    # (~2.3x before the lines were read and checked on a thread of their own, the answer's
    # pieces written straight into their bytes objects and nothing zeroed or allocated per line;
    # ~1.0-1.2x since: the answer is the file again, read back once and copied once).
    from sessiontree.rpc import RpcServer

    path = session_file(12)
    server = RpcServer(Session.open(path))
    sink = [0]

    def tree() -> None:
        def write(b: bytes) -> None:
            sink[0] += len(b)

        server.handle_line(b'{"type":"get_tree"}', text_ok=True).write_to(write)  # type: ignore[attr-defined]

    t_tree, t_open = best_pair(tree, lambda: Session.open(path), 5)
    server.close()
    assert sink[0] > path.stat().st_size, sink[0]  # every entry's text was written
    assert t_tree <= 2.0 * t_open, f"get_tree {t_tree:.4f}s vs open {t_open:.4f}s"


def test_rpc_get_tree_after_own_appends_costs_what_it_costs_after_a_reopen(tmp_path):
    # Lines this process appends carry the scan's "already JSON.stringify's text" bit (we wrote
    # their text), so RPC get_tree copies them as it copies the lines a reopen scans; before,
    # each was parsed and written again in Python (about 2x the CPU of the whole answer here,
    # where half the file is appended lines). CPU time, best of 5, at most 1.3x.
    from sessiontree.rpc import RpcServer

    p = tmp_path / "s.jsonl"
    p.write_bytes(session_file(3).read_bytes())
    s = Session.open(p)
    for i in range(3000):
        s.append_message({"role": "user", "content": f"appended turn {i} " + "x" * 900, "timestamp": i})
    s.flush()
    own, reopened = RpcServer(s), RpcServer(Session.open(p))
    sizes = {}

    def tree(server) -> None:
        n = [0]

        def write(b: bytes) -> None:
            n[0] += len(b)

        server.handle_line(b'{"type":"get_tree"}', text_ok=True).write_to(write)  # type: ignore[attr-defined]
        sizes[id(server)] = n[0]

    t_own, t_reopened = best_pair(lambda: tree(own), lambda: tree(reopened), 5)
    own.close()
    reopened.close()
    assert sizes[id(own)] == sizes[id(reopened)] > p.stat().st_size
    print(f"get_tree after own appends / after a reopen: {t_own / t_reopened:.2f}x")
    assert t_own <= 1.3 * t_reopened, f"after own appends {t_own:.4f}s vs after a reopen {t_reopened:.4f}s"


@pytest.fixture(scope="module")
def odd_main_job_inputs():
    """(5 MB, 50 MB) main-job inputs whose compaction names an entry off the path before it."""
    from inputs import compacted_with_tail

    return compacted_with_tail(5, "off_path"), compacted_with_tail(50, "off_path")


def test_the_per_turn_checks_stay_bounded_when_the_first_kept_entry_is_off_the_path(odd_main_job_inputs):
    # A compaction whose firstKeptEntryId is not on the path before it (files get edited) sent
    # every per-turn check back to the whole branch: 72 ms at 10 MB, 1.0 s at 100 MB for
    # context_tokens() (14x / 600x the normal shape). Now the index remembers the compaction's
    # answer (rust/src/walk.rs SpanMemo): the same ratio bound as the normal shape.
    from main_job import time_reads

    best = time_reads(list(odd_main_job_inputs), rounds=9)
    floor = 3e-4
    slow = {
        name: round(max(b, floor) / max(s, floor), 2)
        for name, (s, b) in best.items()
        if max(b, floor) / max(s, floor) > 2.0
    }
    assert not slow, f"ratios 50 MB / 5 MB above 2x (first kept entry off the path): {slow}"


# ==== the saved index (issue 17) ====================================================


def test_a_warm_open_is_a_small_fraction_of_a_cold_open_and_saving_is_cheap(tmp_path):
    # Targets at 1 GiB (benches/saved_index.py, docs/benchmarks.md "Saved index"): a warm open
    # <= 2% of the cold open, saving adds <= 10%, the saved index <= 5% of the file. Here, at
    # 12 MB, fixed costs weigh more: floors that catch a warm open that scans, a save that
    # rewrites much more than the index, or an index that grew.
    path = session_file(12)
    cache = tmp_path / "cache"
    s = Session.open(path, index_cache=cache)
    assert s.index_cache_state()[0] == "saved"
    saved = sum(f.stat().st_size for f in cache.glob("*.stidx"))
    # (3.4% with the 28-byte records and 8-byte key records; 4.4% since format 7 saves a key
    # lookup beside them (4.33% at 1 GiB): the target, 5%, is the bound)
    assert saved <= 0.05 * path.stat().st_size, f"saved index {saved} bytes for {path.stat().st_size}"
    t_warm, t_cold = best_pair(
        lambda: Session.open(path, index_cache=cache), lambda: Session.open(path, index_cache=False), 7
    )
    assert Session.open(path, index_cache=cache).index_cache_state()[0] == "warm"
    assert t_warm <= 0.15 * t_cold, f"warm open {t_warm:.5f}s vs cold {t_cold:.5f}s"
    empty = tmp_path / "empty"

    def cold_and_save():
        for f in empty.glob("*"):
            f.unlink()
        Session.open(path, index_cache=empty)

    t_save, t_cold = best_pair(cold_and_save, lambda: Session.open(path, index_cache=False), 7)
    assert t_save <= 1.3 * t_cold, f"cold open + save {t_save:.5f}s vs cold open {t_cold:.5f}s"


def test_a_warm_reopen_and_the_per_turn_job_do_not_grow_with_the_file(tmp_path):
    # Targets at 1 GiB (benches/saved_index.py, docs/benchmarks.md "Saved index read on
    # demand"): a warm reopen (open + leaf + len) <= 3x the 10 MiB one, and the per-turn job
    # after a warm open (build_context + context_tokens) <= 5% of the cold open. Here: 2 MB
    # against 20 MB with the same active path (the same context), warm reopens as a ratio,
    # and the saved blocks the per-turn job reads, counted (what grows with the file if the
    # job read the whole index).
    from sessiontree import AutoCompactor

    small, big = session_file(2), session_with_tail(20, 2)
    cache = tmp_path / "cache"
    for p in (small, big):
        assert Session.open(p, index_cache=cache).index_cache_state()[0] == "saved"

    def reopen(p):
        s = Session.open(p, index_cache=cache)
        return s.leaf_id, len(s)

    t_big, t_small = best_pair(lambda: reopen(big), lambda: reopen(small), 9)
    assert t_big <= 3 * max(t_small, 2e-4), f"warm reopen 20 MB {t_big:.5f}s vs 2 MB {t_small:.5f}s"
    reads = {}
    for p in (small, big):
        s = Session.open(p, index_cache=cache)
        assert s.index_cache_state()[0] == "warm"
        s.build_context()
        AutoCompactor(s).context_tokens()
        reads[p] = s._core.cache_blocks_read()
    (r_small, n_small), (r_big, n_big) = reads[small], reads[big]
    assert n_big >= 5 * n_small, (reads, "the big session has about 10x the blocks")
    # the same context: about the same blocks (its entries sit at other positions in the big
    # file, so a few more block boundaries may fall inside it)
    assert r_big <= r_small + 6 and r_big < n_big // 4, reads


# ==== validate ====================================================================


def test_validate_costs_at_most_twice_the_open_and_the_structural_check():
    # Target at 200 MB: validate (the content check included) at most ~2x a cold Session.open
    # plus the structural check (docs/benchmarks.md, "validate"). The content check parsed every
    # message in Python (~15x); the core's check reads the lines once. Here: 12 MB, both from a
    # cold open; 2.5x leaves room for noise and fails the per-entry Python check.
    from sessiontree.validation import structural_problems

    path = session_file(12)
    t_validate, t_floor = best_pair(
        lambda: Session.open(path).validate(),
        lambda: structural_problems(Session.open(path)),
        3,
    )
    assert t_validate <= 2.5 * t_floor, f"validate {t_validate:.4f}s vs open + structural {t_floor:.4f}s"
