"""The saved index read on demand: a warm open reads the key groups and record blocks a query
needs, each checked when read. Properties: whatever questions are asked, in whatever order,
of a fresh warm open, the answers are the cold open's; a byte changed anywhere in one block
of the saved file is caught when that block is read, and the answers are still the cold
open's (the cold scan stands in, and a good index is saved again)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiontree import Session
from sessiontree.errors import SessionError, SessionFileChangedError

# records per block, keys per group (rust/src/index/recs.rs, keystore.rs)
BLOCK = 1024


def _file(n: int, branchy: int) -> bytes:
    out = [
        orjson.dumps(
            {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
        )
    ]
    ids: list[str] = []
    for i in range(n):
        # mostly a chain, every `branchy`-th entry forks from an older one
        parent = ids[-1] if ids else None
        if ids and branchy and i % branchy == 0:
            parent = ids[(i * 7919) % len(ids)]
        eid = f"e{i:07x}"
        if i % 11 == 10 and ids:
            e = {
                "type": "label",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "targetId": ids[i // 2],
                "label": f"l{i}",
            }
        elif i % 97 == 96 and ids:
            e = {
                "type": "compaction",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:02.000Z",
                "summary": f"sum {i}",
                "firstKeptEntryId": ids[-3] if len(ids) > 3 else ids[0],
                "tokensBefore": 1000,
            }
        else:
            role = "user" if i % 2 else "assistant"
            content = f"message {i}" if role == "user" else [{"type": "text", "text": f"reply {i}"}]
            e = {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": role, "content": content},
            }
        out.append(orjson.dumps(e))
        ids.append(eid)
    return b"\n".join(out) + b"\n"


QUESTIONS = ("leaf", "len", "get_entry", "children", "branch", "context", "labels", "entries", "tree")


def _ask(s: Session, q: str, k: int) -> object:
    n = len(s)
    eid = f"e{k % max(n, 1):07x}"
    if q == "leaf":
        return s.leaf_id
    if q == "len":
        return (len(s), s.entry_count())
    if q == "get_entry":
        e = s.get_entry(eid)
        return None if e is None else (e.id, e.parent_id, e.type, e.line)
    if q == "children":
        return [c.id for c in s.get_children(eid)]
    if q == "branch":
        return [e.id for e in s.get_branch(eid)] if s.get_entry(eid) is not None else None
    if q == "context":
        return s.build_context().messages
    if q == "labels":
        return s.labels
    if q == "entries":
        return [(e.id, e.parent_id, e.type, e.line) for e in s.entries()]
    return repr(s.tree_table())


def _try(s: Session, q: str, k: int) -> object:
    """`_ask`, or the error it raises (an id of the appended numbering names no entry)."""
    try:
        return _ask(s, q, k)
    except SessionError as e:
        return type(e).__name__


def _saved_file(cache: Path) -> Path:
    (f,) = [x for x in cache.iterdir() if x.suffix == ".stidx"]
    return f


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 3 * BLOCK + 50),
    branchy=st.sampled_from([0, 3, 50]),
    qs=st.lists(st.tuples(st.sampled_from(QUESTIONS), st.integers(0, 10**6)), min_size=1, max_size=6),
)
def test_warm_on_demand_answers_equal_cold_in_any_order(n, branchy, qs):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        cache = Path(d) / "cache"
        p.write_bytes(_file(n, branchy))
        os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"] = "0"
        try:
            assert Session.open(p, index_cache=cache).index_cache_state()[0] == "saved"
            warm = Session.open(p, index_cache=cache)
        finally:
            del os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"]
        assert warm.index_cache_state()[0] == "warm"
        # the open read at most one key group, one block of records and one of winners (the
        # leaf's): nothing that grows with the file. Records: one per entry; keys and winners
        # (the by-id map, one per key): the n ids and two more; the key lookup: one per id
        read, total = warm._core.cache_blocks_read()
        assert read <= 3 and total == 2 * -(-n // BLOCK) + 2 * -(-(n + 2) // BLOCK), (read, total)
        cold = Session.open(p, index_cache=False)
        for q, k in qs:
            assert _ask(warm, q, k) == _ask(cold, q, k), (q, k)
        assert warm.index_cache_state()[0] == "warm"  # nothing damaged was read
        # an append after on-demand reads (its keys and winner kept on top of the saved ones)
        # answers as a cold open of the grown file
        warm.append_message({"role": "user", "content": "more", "timestamp": 0})
        grown = Session.open(p, index_cache=False)
        for q, k in [("leaf", 0), ("len", 0), ("get_entry", n), ("context", 0), ("entries", 0), ("children", n - 1)]:
            assert _ask(warm, q, k) == _ask(grown, q, k), (q, k)
        assert warm.get_entry(grown.leaf_id) is not None


def _append(p: Path, n: int, m: int, k: int) -> None:
    """Appends `m` entries to a file of `n` made by `_file`: children of old entries, a label of
    an old entry, an entry reusing an old id (the later one wins) and a number id."""
    ids = [f"e{i:07x}" for i in range(n)]
    out = []
    for j in range(m):
        parent = ids[(k * 31 + j * 7) % len(ids)] if j % 3 == 0 else (f"a{j - 1:06x}" if j else ids[-1])
        e: dict[str, object] = {
            "type": "message",
            "id": f"a{j:06x}",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {"role": "user", "content": f"appended {j}"},
        }
        if j % 5 == 4:
            e = {
                "type": "label",
                "id": f"a{j:06x}",
                "parentId": f"a{j - 1:06x}",
                "timestamp": "2026-01-01T00:00:03.000Z",
                "targetId": ids[(k + j) % len(ids)],
                "label": f"new {j}",
            }
        elif j % 7 == 6:
            e["id"] = ids[(k * 13 + j) % len(ids)]  # an old id again
        elif j % 11 == 10:
            e["id"] = 1000 + j  # a number id
        out.append(orjson.dumps(e) + b"\n")
    with open(p, "ab") as f:
        f.write(b"".join(out))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 3 * BLOCK + 50),
    m=st.integers(1, 60),
    k=st.integers(0, 10**6),
    qs=st.lists(st.tuples(st.sampled_from(QUESTIONS), st.integers(0, 10**6)), min_size=1, max_size=6),
)
def test_a_warm_open_after_an_append_reads_on_demand_and_answers_equal_cold(n, m, k, qs):
    """Lines appended since the save are indexed on top of the saved index (their keys looked
    up in the saved key lookup, their winners kept beside the saved by-id map): the open reads
    a few blocks per appended line, never every saved key or winner, and every answer, asked in
    any order, is the cold open's."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        cache = Path(d) / "cache"
        p.write_bytes(_file(n, 3))
        os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"] = "0"
        try:
            assert Session.open(p, index_cache=cache).index_cache_state()[0] == "saved"
            _append(p, n, m, k)
            warm = Session.open(p, index_cache=cache)
        finally:
            del os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"]
        assert warm.index_cache_state()[0] == "warm"
        read, total = warm._core.cache_blocks_read()
        # per appended line at most its id's and its parent's lookup block and key group, and
        # the winners' block of an old id it reuses
        assert read <= min(total, 3 + 5 * m), (read, total)
        cold = Session.open(p, index_cache=False)
        for q, j in qs + [("len", 0), ("leaf", 0), ("labels", 0), ("get_entry", k), ("entries", 0), ("tree", 0)]:
            assert _try(warm, q, j) == _try(cold, q, j), (q, j)
        for j in range(0, m, 3):
            e, c = warm.get_entry(f"a{j:06x}"), cold.get_entry(f"a{j:06x}")
            assert (e and (e.id, e.parent_id, e.line)) == (c and (c.id, c.parent_id, c.line))
        assert warm.index_cache_state()[0] == "warm"  # nothing damaged was read


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(50, 3 * BLOCK + 50),
    where=st.floats(0.0, 1.0, exclude_max=True),
    bit=st.integers(0, 7),
    qs=st.lists(st.tuples(st.sampled_from(QUESTIONS), st.integers(0, 10**6)), min_size=1, max_size=4),
)
def test_a_damaged_block_is_caught_when_read_and_answers_equal_cold(n, where, bit, qs):
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        cache = Path(d) / "cache"
        p.write_bytes(_file(n, 7))
        os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"] = "0"
        try:
            Session.open(p, index_cache=cache)
            f = _saved_file(cache)
            good = f.read_bytes()
            # the keys, records and winners sections, and the key lookup (read on demand) end
            # the file, the lookup-block table (checked whole at the open) between them: flip
            # one bit in the sections read on demand
            lay = _layout(good)
            spans = [(lay["keys"], lay["ltab"]), (lay["lookup"], len(good))]
            size = sum(b - a for a, b in spans)
            off = int(where * size)
            at = (
                spans[0][0] + off
                if off < spans[0][1] - spans[0][0]
                else spans[1][0] + off - (spans[0][1] - spans[0][0])
            )
            bad = bytearray(good)
            bad[at] ^= 1 << bit
            f.write_bytes(bytes(bad))
            warm = Session.open(p, index_cache=cache)
        finally:
            del os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"]
        # (the open reads the leaf's key group only: a small session's one group may be the
        # damaged one)
        assert warm.index_cache_state()[0] in ("warm", "cold")
        cold = Session.open(p, index_cache=False)
        for q, k in qs + [("entries", 0), ("tree", 0), ("get_entry", n - 1), ("context", 0)]:
            assert _ask(warm, q, k) == _ask(cold, q, k), (q, k)
        # once every key and record was read, the damage was caught
        kind, _, why = warm.index_cache_state()
        if kind == "warm":
            # (only the winners block of a key no query followed can still be unread)
            assert warm._core.cache_blocks_read()[0] < warm._core.cache_blocks_read()[1]
        else:
            assert kind == "cold" and "damaged" in why, why
            # a good index was saved over the damaged one
            assert _saved_file(cache).read_bytes() == good


def _layout(saved: bytes) -> dict[str, int]:
    """Where the sections read on demand start (key records, records, winners, the lookup-block
    table, the key lookup), from the header's lengths (rust/src/saved.rs: u64 fields from byte
    24) and the key lookup's size, which ends the meta."""
    field = lambda i: int.from_bytes(saved[24 + 8 * i : 32 + 8 * i], sys.byteorder)  # noqa: E731
    meta_len, nrecs, nkeys, kb, path_len = field(7), field(8), field(10), field(11), field(12)
    meta_end = 128 + path_len + meta_len
    nlookup = int.from_bytes(saved[meta_end - 8 : meta_end], sys.byteorder)
    lookup = len(saved) - nlookup * 8
    ltab = lookup - -(-nlookup // BLOCK) * 16
    winners = ltab - nkeys * 4
    recs = winners - nrecs * 28
    return {"keys": recs - kb - nkeys * 8, "recs": recs, "winners": winners, "ltab": ltab, "lookup": lookup}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2 * BLOCK + 10, 3 * BLOCK + 50),
    section=st.sampled_from(["records", "winners", "keys", "lookup"]),
    q=st.sampled_from(QUESTIONS),
    k=st.integers(0, 10**6),
)
def test_a_damaged_block_of_a_changed_file_never_answers_from_placeholders(n, section, q, k):
    """A warm open, then the session file changes in place (an id rewritten: a cold scan no
    longer gives the saved keys), then a query reads a damaged block of the saved index: the
    block can be served neither from the saved file nor from the cold scan. That query raises
    SessionFileChangedError (as every later one does); an answer given instead is the one the
    saved index was built for (from blocks that were good), never one built from placeholders."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "s.jsonl"
        cache = Path(d) / "cache"
        data = _file(n, 0)
        p.write_bytes(data)
        os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"] = "0"
        try:
            Session.open(p, index_cache=cache)
            f = _saved_file(cache)
            good = f.read_bytes()
            lay = _layout(good)
            # the first block of the section (the open reads only the leaf's: the last ones)
            at = {
                "records": lay["recs"] + 5,
                "winners": lay["winners"] + 4,
                "keys": lay["keys"] + 3,
                "lookup": lay["lookup"] + 2,
            }[section]
            bad = bytearray(good)
            bad[at] ^= 0x10
            f.write_bytes(bytes(bad))
            warm = Session.open(p, index_cache=cache)
        finally:
            del os.environ["SESSIONTREE_INDEX_CACHE_MIN_BYTES"]
        assert warm.index_cache_state()[0] == "warm"
        before = Session.open(p, index_cache=False)
        want = _ask(before, q, k)
        # rewrite the first entry's id in place (same length, same mtime: a cold scan gives
        # other keys than the saved index's)
        st_ = p.stat()
        at = data.index(b'"id":"e0000000"') + len(b'"id":"e00000')
        with open(p, "r+b") as fh:
            fh.seek(at)
            fh.write(b"zz")
        os.utime(p, ns=(st_.st_atime_ns, st_.st_mtime_ns))
        try:
            got = _ask(warm, q, k)
        except SessionFileChangedError:
            got = None
        else:
            assert got == want, (q, k)
        # the entries read every block of records and keys: the damage shows now
        try:
            _ask(warm, "entries", 0)
            warm.entry_count()
            [warm.get_entry(f"e{i:07x}") for i in range(0, n, BLOCK // 2)]
        except SessionFileChangedError:
            return
        # a query could answer only if what it read was good (the winners' block of an id no
        # query followed, or the lookup block of an id none looked up, may stay unread)
        assert section in ("winners", "lookup") and warm.index_cache_state()[0] == "warm"
