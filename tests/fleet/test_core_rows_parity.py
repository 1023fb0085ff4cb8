"""Fleet rows from the core (issue 18) equal the Python rules' rows (``tests/fleet/oracle_rows.py``,
the rows as they were computed before) on every corpus file, on a generated store, and on
hostile usage lines built to reach each of the core's undecided cases and Python's int/float
arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from sessiontree import Session  # noqa: E402
from sessiontree.fleet import _rows  # noqa: E402
from sessiontree.fleet._sources import Item  # noqa: E402
from tests.fleet import oracle_rows  # noqa: E402
from tests.support.fleet_store import make_store  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
CORPUS = sorted((TESTS / "corpus").rglob("*.jsonl"))


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b if isinstance(a, float) or isinstance(b, float) else a == b


def _diff(got: dict, want: dict) -> dict:
    keys = set(got) | set(want)
    return {k: (got.get(k), want.get(k)) for k in sorted(keys) if not _same(got.get(k), want.get(k))}


def _outcome(fn, *args):
    """``fn(*args)``, or what it raised (the job turns that into an error row)."""
    try:
        return fn(*args)
    except Exception as exc:
        return {"raised": type(exc).__name__, "message": str(exc)}


def _stats_pair(path: Path):
    opts = _rows.Options(index_cache="off")
    item = Item(str(path))
    try:
        s, size, mtime = _rows.open_item(item, opts)
    except _rows._Unopenable:
        return None
    try:
        got = _outcome(_rows._stats_of, s, item, size, mtime, opts)
        want = _outcome(oracle_rows.stats_of, s, item, size, mtime, opts)
    finally:
        s.close()
    return got, want


def _entries_pair(path: Path):
    opts = _rows.Options(index_cache="off")
    item = Item(str(path))
    try:
        s, _size, _mtime = _rows.open_item(item, opts)
    except _rows._Unopenable:
        return None
    try:
        got = _outcome(_rows._entries_of, s, item)
        want = _outcome(oracle_rows.entries_of, s, item)
    finally:
        s.close()
    return got, want


def _check_entries(path: Path) -> None:
    pair = _entries_pair(path)
    if pair is None:
        return
    got, want = pair
    if isinstance(want, dict) or isinstance(got, dict):
        assert got == want, path
        return
    from sessiontree.fleet import entries_schema

    got_rows = got.to_pylist()
    want = oracle_rows.table(want, entries_schema()).to_pylist()
    assert len(got_rows) == len(want), path
    for g, w in zip(got_rows, want):
        assert _diff(g, w) == {}, (path, w.get("entry_index"))


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_stats_rows_equal_the_python_rules_on_the_corpus(path):
    pair = _stats_pair(path)
    if pair is None:
        pytest.skip("not an openable session")
    got, want = pair
    assert _diff(got, want) == {}


@pytest.mark.parametrize("path", CORPUS, ids=[p.name for p in CORPUS])
def test_entry_rows_equal_the_python_rules_on_the_corpus(path):
    _check_entries(path)


def test_rows_equal_the_python_rules_on_a_generated_store(tmp_path):
    for p in make_store(tmp_path, 60, seed=29):
        got, want = _stats_pair(p)
        assert _diff(got, want) == {}, p
        _check_entries(p)


def _session(tmp_path: Path, name: str, bodies: list) -> Path:
    """A session whose entries are ``bodies`` (raw JSON text or dicts), linearly linked."""
    lines = ['{"type":"session","version":3,"id":"h","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}']
    parent = None
    for k, b in enumerate(bodies):
        eid = f"e{k}"
        text = b if isinstance(b, str) else json.dumps(b)
        head = f'{{"id":"{eid}","parentId":{json.dumps(parent)},"timestamp":"2026-01-01T00:00:{k % 60:02d}.000Z",'
        lines.append(head + text.lstrip("{"))
        parent = eid
    p = tmp_path / f"{name}.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _asst(usage: str, extra: str = "") -> str:
    return (
        '{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","name":"x","arguments":{}}]'
        f',"usage":{usage}{extra}}}}}'
    )


HOSTILE = {
    "ints_then_floats": [
        _asst('{"input":9007199254740993,"output":1,"cacheRead":0,"cacheWrite":0,"cost":{"total":0.1}}'),
        _asst('{"input":1,"output":2.5,"cacheRead":null,"cacheWrite":true,"cost":{"total":0.2}}'),
        _asst('{"input":1e400,"output":"7","cacheRead":[1],"cacheWrite":{},"cost":5}'),
    ],
    "missing_fields_and_empty_usages": [
        _asst("{}"),
        '{"type":"message","message":{"role":"toolResult","content":"x","usage":{}}}',
        '{"type":"message","message":{"role":"toolResult","content":"x","usage":{"output":3}}}',
        '{"type":"compaction","summary":"s","firstKeptEntryId":"e0","usage":{"input":4}}',
        '{"type":"branch_summary","summary":"s","fromId":"e0","usage":{"cost":{"total":1}}}',
        '{"type":"usage","usage":{"input":2,"cacheWrite":-0.0}}',
    ],
    "repeated_keys": [
        '{"type":"message","message":{"role":"user"},"message":{"role":"assistant","content":[],"usage":{"input":1},"usage":{"output":2,"cost":{"total":1},"cost":2}}}',
        '{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","type":"text"},{"type":"text","type":"toolCall"}]}}',
    ],
    "undecided_escapes_and_huge_ints": [
        _asst('{"inp\\u0075t":5,"output":1}'),
        _asst('{"input":123456789012345678901234567890123456789012345678901234567890}'),
        '{"type":"message","message":{"role":"assistant","content":[{"type":"tool\\u0043all"}],"usage":{"input":1}}}',
        '{"type":"message","message":{"role":"assistant","content":"\\ud800","usage":{"input":2}}}',
    ],
    # orjson reads an integer outside [-2**63, 2**64 - 1] as a float (older versions refused
    # it, and the standard library then read it exactly): the sums differ from exact ones
    "ints_beyond_64_bits": [
        _asst(
            '{"input":18446744073709551616,"output":-18446744073709551615,'
            '"cacheRead":9223372036854775808,"cacheWrite":-9223372036854775809,"cost":{"total":1}}'
        ),
        _asst('{"input":1,"output":2,"totalTokens":-9223372036854775809}'),
        '{"type":"usage","usage":{"input":-9223372036854775809,"output":9223372036854775808}}',
    ],
    "last_activity_rules": [
        '{"type":"message","message":{"role":"user","content":"a","timestamp":1767225600123}}',
        '{"type":"message","message":{"role":"assistant","content":[],"timestamp":true}}',
        '{"type":"message","message":{"role":"user","timestamp":5}}',
    ],
    "last_activity_array_timestamp": [
        '{"type":"message","message":{"role":"user","content":"a"}}',
        '{"type":"message","timestamp":["2026-02-01"],"message":{"role":"user","content":"b"}}',
    ],
    "tool_results_told_by_their_bytes": [
        '{"type":"message","message":{"role":"toolResult","content":"no usage here \\u001b[0m"}}',
        '{"type":"message","message":{"role":"toolResult","content":"x","us\\u0061ge":{"input":7}}}',
        '{"type":"message","message":{"role":"toolResult","content":"says \\"usage\\" in text"}}',
        '{"type":"message","message":{"role":"toolResult","content":[' + "[" * 1001 + "]" * 1001 + "]}}",
    ],
    "deep_nesting": [
        '{"type":"message","message":{"role":"assistant","content":[],"usage":{"input":1}},"x":'
        + "[" * 1100
        + "]" * 1100
        + "}",
    ],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_rows_equal_the_python_rules_on_hostile_usage(tmp_path, name):
    p = _session(tmp_path, name, HOSTILE[name])
    got, want = _stats_pair(p)
    assert _diff(got, want) == {}
    _check_entries(p)


def test_the_core_decides_ordinary_lines_and_leaves_odd_ones():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = _session(Path(d), "x", HOSTILE["ints_then_floats"] + HOSTILE["repeated_keys"])
        with Session.open(p, index_cache="off") as s:
            cols = s.fleet_columns()
            assert cols["undecided"] == []
            assert cols["tool_calls"] == 3 + 1
        p = _session(Path(d), "y", HOSTILE["undecided_escapes_and_huge_ints"])
        with Session.open(p, index_cache="off") as s:
            assert s.fleet_columns()["undecided"] == [0, 1, 2]


def test_the_local_engine_splits_work_by_bytes(tmp_path):
    from sessiontree.fleet import _engine

    sizes = [500 << 20] + [60 << 10] * 100 + [20 << 20] * 4
    items = list(range(len(sizes)))
    parts = _engine.byte_chunks(items, sizes, 8)
    assert [x for p in parts for x in p] == items  # every item once, in order
    assert parts[0] == [0]  # the large session is a batch of its own
    work = [_engine.work_bytes([sizes[i] for i in p]) for p in parts]
    assert max(work[1:]) <= 256 << 20
    assert len(parts) >= 4  # the small ones are spread over several batches too
    even = _engine.byte_chunks(list(range(64)), [1 << 20] * 64, 8)
    assert [len(p) for p in even] == [8] * 8
    # the pool is chosen by bytes of work: 1,000 small files or 50 x 20 MiB stay in this
    # process (the core reads each file on every core already), 2,000 small ones or 4 GiB do not
    assert _engine.work_bytes([60 << 10] * 1000) < _engine.AUTO_POOL_MIN_BYTES
    assert _engine.work_bytes([20 << 20] * 50) < _engine.AUTO_POOL_MIN_BYTES
    assert _engine.work_bytes([60 << 10] * 2000) >= _engine.AUTO_POOL_MIN_BYTES
    assert _engine.work_bytes([100 << 20] * 41) >= _engine.AUTO_POOL_MIN_BYTES


def test_rows_equal_the_python_rules_on_a_long_generated_session(tmp_path):
    """A long, mostly linear session compacted now and then, with branches (what the core's
    context estimate and tool-result prefilter see most)."""
    import subprocess
    import sys

    for seed, branchiness in ((5, "0.05"), (11, "0.3")):
        p = tmp_path / f"long{seed}.jsonl"
        gen = TESTS / "tools" / "gen_session.py"
        subprocess.run(
            [
                sys.executable,
                str(gen),
                "--megabytes",
                "3",
                "--branchiness",
                branchiness,
                "--seed",
                str(seed),
                "--out",
                str(p),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        got, want = _stats_pair(p)
        assert _diff(got, want) == {}
        with Session.open(p, index_cache="off") as s:
            assert s.fleet_columns()["context"] is not None  # the core decided it
        _check_entries(p)
