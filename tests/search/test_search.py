"""sessiontree.search: every query form and filter, hits read back and re-checked, branch states
against Session, the index kept true to files appended, rewritten, replaced and deleted, a
damaged index rebuilt, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sessiontree
from sessiontree import Session, SearchQueryError, search
from sessiontree import _core

from ._build import Builder, oracle_contains, oracle_parts

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def ids(r: sessiontree.SearchResult) -> set[str | None]:
    return {h.entry_id for h in r.hits}


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """Two sessions: ids named by what they hold."""
    d = tmp_path / "store"
    d.mkdir()
    b = Builder(d / "a.jsonl", sid="sess-a", cwd="/proj/a")
    e = {}
    e["greet"] = b.user("Hello world, please fix bd-q3fy in src/foo_bar.rs")
    e["reply"] = b.assistant(
        "Looking at snake_case_name and CamelCase now", tool="bash", args={"command": "cargo test --all"}
    )
    e["result"] = b.tool_result("bash", "test result: ok. 12 passed; hash a1b2c3d4")
    e["quote"] = b.user("the quick brown fox jumps")
    b.write()
    c = Builder(d / "b.jsonl", sid="sess-b", cwd="/proj/b")
    e["other"] = c.user("brown bears and a quick look at HTTPServer")
    e["name"] = c.add("session_info", name="Nightly flaky hunt")
    c.write()
    return d, e


def test_words_are_anded_case_insensitively(store):
    d, e = store
    assert ids(search("QUICK brown", d)) == {e["quote"], e["other"]}
    assert ids(search("quick fox", d)) == {e["quote"]}


def test_phrases_match_in_order_only(store):
    d, e = store
    assert ids(search('"quick brown"', d)) == {e["quote"]}
    assert ids(search('"brown quick"', d)) == set()


def test_or_not_and_prefix(store):
    d, e = store
    assert ids(search("fox OR bears", d)) == {e["quote"], e["other"]}
    assert ids(search("brown -fox", d)) == {e["other"]}
    assert ids(search("jump*", d)) == {e["quote"]}
    assert ids(search("nightl*", d)) == {e["name"]}


@pytest.mark.parametrize(
    "token,key",
    [
        ("bd-q3fy", "greet"),
        ("src/foo_bar.rs", "greet"),
        ("a1b2c3d4", "result"),
        ("snake_case_name", "reply"),
        ("CamelCase", "reply"),
        ("camelcase", "reply"),
        ("HTTPServer", "other"),
        ("server", "other"),
        ("foo_bar", "greet"),
        ("cargo", "reply"),
    ],
)
def test_ids_paths_hashes_identifiers_as_typed_and_split(store, token, key):
    d, e = store
    assert ids(search(token, d)) == {e[key]}


def test_the_whole_token_ranks_above_its_parts(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    split = b.user("bd and q3fy apart: bd q3fy")
    whole = b.user("the id bd-q3fy whole")
    b.write()
    r = search("bd-q3fy", tmp_path / "s.jsonl")
    assert [h.entry_id for h in r.hits] == [whole, split]


def test_hit_fields_and_snippet(store):
    d, e = store
    (h,) = search("a1b2c3d4", d).hits
    assert h.path == str(d / "a.jsonl")
    assert h.session_id == "sess-a"
    assert (h.type, h.role, h.tool) == ("message", "toolResult", "bash")
    assert h.line == 4 and h.branch_state == "active"
    a, b = h.spans[0]
    assert h.snippet[a:b] == "a1b2c3d4"
    assert "[a1b2c3d4]" in h.marked()
    assert h.timestamp_ms is not None and h.score > 0
    with open(h.path, "rb") as f:
        f.seek(h.offset)
        assert json.loads(f.readline())["id"] == h.entry_id


def test_snippets_are_at_most_160_chars(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    b.user(("filler " * 100) + "needle " + ("tail " * 100))
    b.write()
    (h,) = search("needle", tmp_path).hits
    assert len(h.snippet) <= 160
    a, z = h.spans[0]
    assert h.snippet[a:z] == "needle"


def test_filters(store):
    d, e = store
    assert ids(search("quick", d, role="user")) == {e["quote"], e["other"]}
    assert ids(search("quick OR looking", d, role="assistant")) == {e["reply"]}
    assert ids(search("nightly OR quick", d, type="session_info")) == {e["name"]}
    assert ids(search("cargo OR passed", d, tool="bash")) == {e["reply"], e["result"]}
    assert ids(search("quick", d, session="sess-b")) == {e["other"]}
    assert ids(search("quick", d, cwd="/proj/a")) == {e["quote"]}
    assert ids(search("quick", d, cwd="/nowhere")) == set()
    # Builder stamps entry n at 00:00:n
    assert ids(search("quick", d, since="2025-01-01T00:00:02Z")) == {e["quote"]}
    assert ids(search("quick", d, until="2025-01-01T00:00:01Z")) == {e["other"]}


def test_paging(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    made = [b.user(f"common word number {i}") for i in range(25)]
    b.write()
    r1 = search("common", tmp_path, limit=10)
    assert (len(r1.hits), r1.total, r1.next_offset) == (10, 25, 10)
    r3 = search("common", tmp_path, limit=10, offset=20)
    assert (len(r3.hits), r3.next_offset) == (5, None)
    every = search("common", tmp_path, limit=100)
    assert {h.entry_id for h in every.hits} == set(made)
    # equal scores: the newer entry first
    stamps = [h.timestamp_ms for h in every.hits]
    assert stamps == sorted(stamps, reverse=True)


@pytest.mark.parametrize("q", ["", "   ", '"open', "OR a", "a OR", "-a", "a OR -b", "*", "!!!"])
def test_a_bad_query_is_a_typed_error(store, q):
    d, _ = store
    with pytest.raises(SearchQueryError) as ei:
        search(q, d)
    assert "\n" not in str(ei.value) and str(ei.value).startswith("bad query")
    assert isinstance(ei.value, sessiontree.SessionTreeError)


def test_argument_errors(store):
    d, _ = store
    with pytest.raises(sessiontree.SessionArgumentError):
        search("x", d, branch_state="lost")  # type: ignore[arg-type]
    with pytest.raises(sessiontree.SessionArgumentError):
        search("x", d, limit=-1)
    with pytest.raises(sessiontree.SessionArgumentError):
        search("x", d, since="not a date")
    with pytest.raises(sessiontree.SessionArgumentError):
        search("x", d, engine="spark")
    with pytest.raises(sessiontree.SessionArgumentError):
        search("x", d, engine="ray", shards=0)
    with pytest.raises(sessiontree.SearchQueryError):  # before the URL is listed (no network here)
        search('"unclosed', "s3://bucket/prefix")


# ---- branch states ---------------------------------------------------------------------------


def _tree(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    b = Builder(tmp_path / "t.jsonl")
    e = {}
    e["root"] = b.user("marker root question")
    e["old1"] = b.assistant("marker old answer")
    e["old2"] = b.user("marker old followup")
    e["lost"] = b.assistant("marker lost branch reply")
    # back to old2's parent: the branch old2..lost is abandoned, summarized
    e["fork_child"] = b.user("marker new direction", parent=e["old1"])
    e["summary"] = b.add("branch_summary", fromId=e["lost"], summary="marker summary of the lost branch")
    e["kept"] = b.assistant("marker kept answer")
    e["compaction"] = b.add(
        "compaction", summary="marker compacted history", firstKeptEntryId=e["kept"], tokensBefore=100
    )
    e["after"] = b.user("marker after compaction")
    e["label"] = b.add("label", targetId=e["kept"], label="checkpoint")
    b.write()
    return b.path, e


def test_branch_states_fork_points_summaries_and_labels(tmp_path):
    path, e = _tree(tmp_path)
    hits = {h.entry_id: h for h in search("marker", path, limit=100).hits}
    assert hits[e["root"]].branch_state == "compacted"
    assert hits[e["old1"]].branch_state == "compacted"
    assert hits[e["kept"]].branch_state == "active"
    assert hits[e["after"]].branch_state == "active"
    assert hits[e["compaction"]].branch_state == "active"
    for k in ("old2", "lost"):
        h = hits[e[k]]
        assert h.branch_state == "abandoned"
        assert h.fork_point == e["old1"]
        assert h.summary_id == e["summary"]
    assert hits[e["after"]].labels == ("checkpoint",)
    assert hits[e["root"]].labels == ()
    assert {h.entry_id for h in search("marker", path, branch_state="abandoned").hits} == {e["old2"], e["lost"]}
    assert {h.entry_id for h in search("marker", path, label="checkpoint").hits} == {
        e["kept"],
        e["compaction"],
        e["after"],
    }


def _oracle_states(path: Path) -> dict[str, str]:
    """Each entry's branch state from Session's active path (get_branch) and Pi's rule for the
    context (buildSessionContext): after the latest compaction on the path, the entries from
    the first one before it whose id is its firstKeptEntryId (none: from the compaction) on."""
    from sessiontree.errors import SessionCycleError, SessionFormatError

    try:
        s = Session.open(path)
        branch = s.get_branch()
    except (SessionFormatError, SessionCycleError) as exc:
        pytest.skip(f"Pi opens no branch here: {exc}")
    kept_from = 0
    comps = [i for i, x in enumerate(branch) if x.type == "compaction"]
    if comps:
        c = comps[-1]
        fk = branch[c].raw.get("firstKeptEntryId")
        kept_from = next((i for i in range(c) if branch[i].id == fk), c)
    pos = {x.id: i for i, x in enumerate(branch)}
    out = {}
    for x in s.entries():
        if x.id not in pos:
            out[x.id] = "abandoned"
        elif pos[x.id] >= kept_from:
            out[x.id] = "active"
        else:
            out[x.id] = "compacted"
    return out


def _every_hit(path: Path) -> list[sessiontree.SearchHit]:
    r = search("a OR e OR i OR o OR u OR the OR to OR marker", path, limit=100000)
    return list(r.hits)


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (CORPUS / "pi-generated").glob("*.jsonl")),
)
def test_branch_states_match_session_on_the_corpus(name):
    path = CORPUS / "pi-generated" / name
    want = _oracle_states(path)
    for h in _every_hit(path):
        assert h.branch_state == want[h.entry_id], (h.entry_id, h.type)


def test_branch_states_match_session_on_generated_trees(tmp_path):
    import random

    rnd = random.Random(7)
    for t in range(5):
        b = Builder(tmp_path / f"g{t}.jsonl")
        made: list[str] = []
        for i in range(60):
            r = rnd.random()
            if made and r < 0.1:
                made.append(b.user(f"marker fork {i}", parent=rnd.choice(made)))
            elif len(made) > 4 and r < 0.15:
                path_ids = made[-3:]
                made.append(
                    b.add("compaction", summary=f"marker c{i}", firstKeptEntryId=rnd.choice(path_ids), tokensBefore=1)
                )
            elif made and r < 0.2:
                made.append(b.add("branch_summary", fromId=rnd.choice(made), summary=f"marker s{i}"))
            else:
                made.append(b.user(f"marker step {i}"))
        b.write()
        want = _oracle_states(b.path)
        got = search("marker", b.path, limit=1000).hits
        assert len(got) == 60
        for h in got:
            assert h.branch_state == want[h.entry_id], (t, h.entry_id)


def _loop_at_leaf(tmp_path: Path, with_compaction: bool) -> tuple[Path, dict[str, str]]:
    """A file whose parent chain from the leaf loops: ``a`` names the leaf's ancestor ``c`` as
    its parent (a -> c -> b -> a). ``x`` branches off ``a`` and was left; with a compaction
    below the loop, the leaf is ``e`` (e -> comp -> d -> c ...), and the context kept from d."""
    b = Builder(tmp_path / "loop.jsonl")
    e = {}
    e["a"] = b.user("marker a")
    e["b"] = b.assistant("marker b")
    e["x"] = b.user("marker x", parent=e["a"])
    e["c"] = b.user("marker c", parent=e["b"])
    if with_compaction:
        e["d"] = b.assistant("marker d")
        e["comp"] = b.add("compaction", summary="marker comp", firstKeptEntryId=e["d"], tokensBefore=10)
        e["e"] = b.user("marker e")
    b.lines[1]["parentId"] = e["c"]
    b.write()
    return b.path, e


def test_a_loop_at_the_leaf_keeps_the_walked_entries_on_the_path(tmp_path):
    """The walk from the leaf visits each entry of the loop once: those entries are on the
    active path (Session raises SessionCycleError for the branch; a store-wide search places
    the hits instead), the others are abandoned with their fork point on the walk."""
    path, e = _loop_at_leaf(tmp_path, with_compaction=False)
    with pytest.raises(sessiontree.SessionCycleError):
        Session.open(path).get_branch()
    hits = {h.entry_id: h for h in search("marker", path, limit=100).hits}
    assert {k: hits[v].branch_state for k, v in e.items()} == {
        "a": "active",
        "b": "active",
        "c": "active",
        "x": "abandoned",
    }
    assert hits[e["x"]].fork_point == e["a"]


def test_a_loop_above_the_kept_range_agrees_with_session_context(tmp_path):
    """A loop above the latest compaction's kept range: Session's context span (the walk back
    to the kept entry) does not meet it; search's active hits are that context, the rest of the walk is
    compacted."""
    path, e = _loop_at_leaf(tmp_path, with_compaction=True)
    s = Session.open(path)
    span = set(s.context_span(with_settings=False, context_rule=False))
    in_ctx = {x.id for x in s.entries() if x.index in span}
    assert in_ctx == {e["d"], e["comp"], e["e"]}
    hits = {h.entry_id: h for h in search("marker", path, limit=100).hits}
    for k, v in e.items():
        want = "active" if v in in_ctx else ("abandoned" if k == "x" else "compacted")
        assert hits[v].branch_state == want, k
    assert hits[e["x"]].fork_point == e["a"]


def test_a_new_leaf_changes_states_without_reindexing(tmp_path):
    path, e = _tree(tmp_path)
    assert search("lost", path).hits[0].branch_state == "abandoned"
    b = Builder(path)
    # navigate back onto the lost branch: a new entry under it
    b.append_line(
        {
            "type": "message",
            "id": "z1",
            "parentId": e["lost"],
            "timestamp": "2025-01-02T00:00:00.000Z",
            "message": {"role": "user", "content": "zzz"},
        }
    )
    assert search("lost", path).hits[0].branch_state == "active"


# ---- the index against the files ---------------------------------------------------------------


def test_append_is_indexed_incrementally(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    b.user("first words")
    b.write()
    assert search("second", tmp_path).total == 0
    size = os.path.getsize(b.path)
    b.append_line(
        {
            "type": "message",
            "id": "n1",
            "parentId": b.last,
            "timestamp": "2025-01-02T00:00:00.000Z",
            "message": {"role": "user", "content": "second words"},
        }
    )
    r = search("second OR first", tmp_path)
    assert {h.entry_id for h in r.hits} == {"e0001", "n1"}
    assert any(h.offset == size for h in r.hits)


def test_an_unterminated_last_line_waits_for_its_newline(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    b.user("first")
    b.write()
    line = json.dumps(
        {"type": "message", "id": "p1", "parentId": "e0001", "message": {"role": "user", "content": "partial"}}
    )
    with open(b.path, "a") as f:
        f.write(line)
    assert search("partial", tmp_path).total == 0
    with open(b.path, "a") as f:
        f.write("\n")
    assert ids(search("partial", tmp_path)) == {"p1"}


def test_rewrite_in_place_and_replace_are_reindexed(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    b.user("alpha original")
    b.write()
    assert search("alpha", tmp_path).total == 1
    # rewritten in place (same inode, same size): different text
    data = b.path.read_bytes().replace(b"alpha original", b"omega original")
    with open(b.path, "r+b") as f:
        f.write(data)
    os.utime(b.path, ns=(1, 1))
    assert search("alpha", tmp_path).total == 0
    assert search("omega", tmp_path).total == 1
    # replaced by rename (another inode)
    c = Builder(tmp_path / "new.tmp")
    c.user("gamma replaced")
    c.write()
    os.replace(c.path, b.path)
    assert search("omega", tmp_path).total == 0
    assert ids(search("gamma", tmp_path)) == {"e0001"}


def test_a_deleted_file_is_evicted(store):
    d, e = store
    assert search("quick", d).total == 2
    os.unlink(d / "b.jsonl")
    r = search("quick", d)
    assert ids(r) == {e["quote"]} and r.total == 1


def test_a_file_whose_name_is_not_utf8_is_searched(store, tmp_path):
    """In a folder and named directly; the hit's path is the name as ``os.fsdecode`` gives it
    (surrogates for the bytes that are not UTF-8), as the fleet's rows name such files."""
    d, e = store
    odd = os.path.join(os.fsencode(d), b"caf\xe9.jsonl")
    os.rename(os.fsencode(d / "b.jsonl"), odd)
    name = os.fsdecode(odd)
    for cache in (None, False):
        r = search("bears", d, index_cache=cache)
        assert ids(r) == {e["other"]} and [h.path for h in r.hits] == [name]
        r = search("bears", name, index_cache=cache)  # a non-UTF-8 store key, named directly
        assert ids(r) == {e["other"]} and r.hits[0].path == name
    assert ids(search("quick", d)) == {e["quote"], e["other"]}  # warm: the same answer
    os.unlink(odd)
    assert ids(search("quick", d)) == {e["quote"]}  # evicted when gone
    p = _cli("search", "quick", str(d), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["total"] == 1


def test_the_cli_names_a_non_utf8_file_as_text(store):
    d, e = store
    odd = os.path.join(os.fsencode(d), b"caf\xe9.jsonl")
    os.rename(os.fsencode(d / "b.jsonl"), odd)
    for src in (os.fsencode(d), odd):
        p = subprocess.run([sys.executable, "-m", "sessiontree", "search", "bears", src, "--json"], capture_output=True)
        assert p.returncode == 0, p.stderr
        doc = json.loads(p.stdout)
        assert doc["total"] == 1 and doc["hits"][0]["path"].endswith("caf\\xe9.jsonl")
        p = subprocess.run([sys.executable, "-m", "sessiontree", "search", "bears", src], capture_output=True)
        assert p.returncode == 0 and b"caf\\udce9.jsonl:" in p.stdout, p.stderr


def test_a_stale_hit_is_never_returned(tmp_path):
    """A file rewritten between the index check and the read: simulated by changing the file
    under a manifest that still matches its stamp (same size, mtime restored)."""
    b = Builder(tmp_path / "s.jsonl")
    b.user("stale needle here")
    b.write()
    assert search("needle", tmp_path).total == 1
    st = os.stat(b.path)
    data = b.path.read_bytes().replace(b"needle", b"noodle")
    with open(b.path, "r+b") as f:
        f.write(data)
    os.utime(b.path, ns=(st.st_atime_ns, st.st_mtime_ns))
    # ctime changed, so the index notices; either way the old text is never returned
    r = search("needle", tmp_path)
    assert r.hits == ()


def _index_dirs(cache: Path) -> list[Path]:
    return [p for p in (cache / "search").iterdir() if p.is_dir()] if (cache / "search").exists() else []


def test_a_damaged_index_is_rebuilt(store, tmp_path):
    d, e = store
    cache = Path(os.environ["SESSIONTREE_INDEX_CACHE"])
    want = ids(search("quick", d))
    (idx,) = _index_dirs(cache)
    for f in idx.iterdir():
        if f.is_file() and f.name != ".tantivy-writer.lock":
            f.write_bytes(os.urandom(64) + f.read_bytes()[64:])
    assert ids(search("quick", d)) == want
    (idx,) = _index_dirs(cache)
    (idx / "meta.json").write_text('{"not": "a tantivy meta"')
    assert ids(search("quick", d)) == want


def test_cache_off_searches_in_memory(store):
    d, e = store
    cache = Path(os.environ["SESSIONTREE_INDEX_CACHE"])
    assert ids(search("quick", d, index_cache=False)) == {e["quote"], e["other"]}
    assert _index_dirs(cache) == []


def test_cache_clear_removes_the_search_index(store):
    from sessiontree import index_cache

    d, _ = store
    cache = Path(os.environ["SESSIONTREE_INDEX_CACHE"])
    search("quick", d)
    assert _index_dirs(cache)
    assert index_cache.clear() > 0
    assert _index_dirs(cache) == []


def test_search_indexes_are_capped_across_stores(tmp_path, monkeypatch):
    """The search indexes of all stores in one cache folder are held to the folder's cap
    (``max_bytes``, as the saved indexes are): after a search that indexed, the least recently
    used other stores' indexes are removed; the one in use is kept even when alone larger."""
    from sessiontree.index_cache import CacheSettings

    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_EVICT_SECONDS", "0")
    cache = tmp_path / "cache"
    stores = []
    for i in range(4):
        (tmp_path / f"s{i}").mkdir()
        b = Builder(tmp_path / f"s{i}" / "a.jsonl")
        b.user(f"needle in store {i}")
        b.write()
        stores.append(tmp_path / f"s{i}")
    roomy = CacheSettings(folder=cache, max_bytes=1 << 30)
    for d in stores[:3]:
        assert search("needle", d, index_cache=roomy).total == 1
    assert len(_index_dirs(cache)) == 3
    tight = CacheSettings(folder=cache, max_bytes=1)
    assert search("needle", stores[3], index_cache=tight).total == 1
    (left,) = _index_dirs(cache)
    assert search("needle", stores[3], index_cache=tight).hits[0].snippet == "needle in store 3"
    # an evicted store's index is built again on its next search, with the same answer
    assert search("needle", stores[0], index_cache=tight).hits[0].snippet == "needle in store 0"
    assert len(_index_dirs(cache)) == 1 and _index_dirs(cache) != [left]


def test_session_search(store):
    d, e = store
    s = Session.open(d / "a.jsonl")
    assert ids(s.search("quick")) == {e["quote"]}
    with pytest.raises(sessiontree.SessionArgumentError):
        Session.in_memory().search("x")


# ---- the oracle -------------------------------------------------------------------------------


def test_tokens_match_the_oracle():
    for text in ["bd-q3fy src/foo_bar.rs a1b2c3d4 snake_case_name CamelCase HTTPServer v2Api", "Ab1C A1b x__y"]:
        parts = [t for t, _, whole in _core.search_tokens(text) if not whole]
        assert parts == oracle_parts(text)


def _user_texts(path: Path) -> dict[str, str]:
    from sessiontree.errors import SessionFormatError

    out: dict[str, str] = {}
    try:
        Session.open(path)
    except SessionFormatError:
        pytest.skip("not a Pi session")
    for x in Session.open(path).entries():
        m = x.raw.get("message") if isinstance(x.raw, dict) else None
        if (
            x.type == "message"
            and isinstance(m, dict)
            and m.get("role") == "user"
            and isinstance(m.get("content"), str)
        ):
            out[x.id] = m["content"]
    return out


@pytest.mark.parametrize("name", sorted(p.name for p in (CORPUS / "pi-generated").glob("*.jsonl"))[:12])
def test_corpus_recall_for_phrases(name):
    """On real files: every user message whose text holds a sampled two-word phrase is found,
    and every such message found holds it."""
    import random

    path = CORPUS / "pi-generated" / name
    texts = _user_texts(path)
    rnd = random.Random(name)
    for _eid, text in sorted(texts.items())[:5]:
        words = oracle_parts(text)
        if len(words) < 2:
            continue
        i = rnd.randrange(len(words) - 1)
        phrase = words[i : i + 2]
        got = {h.entry_id for h in search(f'"{phrase[0]} {phrase[1]}"', path, limit=100000).hits}
        want = {k for k, t in texts.items() if oracle_contains(t, phrase)}
        assert want <= got
        assert {k for k in got if k in texts} <= want


# ---- concurrency ----------------------------------------------------------------------------------

_SEARCHER = """
import sys, time
from sessiontree import search
end = time.time() + float(sys.argv[2])
n = 0
while time.time() < end:
    r = search("steady OR appended", sys.argv[1], limit=1000)
    for h in r.hits:
        assert h.snippet and h.entry_id, h
    n += 1
print(n)
"""

_APPENDER = """
import json, sys, time
path = sys.argv[1]
for i in range(int(sys.argv[2])):
    with open(path, "a") as f:
        f.write(json.dumps({"type": "message", "id": f"x{i}", "parentId": None,
                            "timestamp": "2025-01-03T00:00:00.000Z",
                            "message": {"role": "user", "content": f"appended line {i}"}}) + "\\n")
    time.sleep(0.01)
"""


@pytest.mark.slow
def test_two_searchers_and_an_appender(tmp_path):
    b = Builder(tmp_path / "s.jsonl")
    for i in range(50):
        b.user(f"steady text {i}")
    b.write()
    env = dict(os.environ)
    procs = [
        subprocess.Popen([sys.executable, "-c", _SEARCHER, str(tmp_path), "4"], env=env, stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    app = subprocess.Popen([sys.executable, "-c", _APPENDER, str(b.path), "100"], env=env)
    assert app.wait(60) == 0
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        assert int(out) >= 1
    r = search("appended", tmp_path, limit=1000)
    assert r.total == 100 and len({h.entry_id for h in r.hits}) == 100


# ---- the CLI ---------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True, timeout=120)


def test_cli_text_json_and_bad_query(store):
    d, e = store
    p = _cli("search", "a1b2c3d4", str(d))
    assert p.returncode == 0, p.stderr
    assert "[a1b2c3d4]" in p.stdout and "1 hit" in p.stdout
    p = _cli("search", "quick", str(d), "--json", "--limit", "1")
    doc = json.loads(p.stdout)
    assert set(doc) == {"hits", "total", "next_offset", "took_ms"}
    assert doc["total"] == 2 and doc["next_offset"] == 1
    h = doc["hits"][0]
    assert h["branch_state"] == "active" and h["snippet"][h["spans"][0][0] : h["spans"][0][1]].lower() == "quick"
    p = _cli("search", '"unclosed', str(d))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "bad query" in p.stderr
    p = _cli("search", "x", str(d / "missing"))
    assert p.returncode == 2


@pytest.mark.slow
def test_cli_default_source_is_pis_session_folder(tmp_path, monkeypatch):
    agent = tmp_path / "agent"
    (agent / "sessions" / "--proj--").mkdir(parents=True)
    b = Builder(agent / "sessions" / "--proj--" / "s.jsonl")
    b.user("findme please")
    b.write()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    p = _cli("search", "findme", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["total"] == 1


def test_oracle_helper_sanity():
    assert oracle_contains("see bd-q3fy here", ["bd", "q3fy"])
    assert not oracle_contains("see bd-q3fz here", ["bd", "q3fy"])


def test_extraction_reads_a_line_as_json_parse_does():
    """One pass over the line: the last of a duplicated key, escapes decoded, bytes that are
    not UTF-8 as U+FFFD (Pi decodes the file as UTF-8), keys of tool-call arguments in sorted
    order, non-string values where strings are expected ignored, trailing bytes refused."""
    ex = _core.search_extract
    assert ex(b'{"type":"message","message":{"role":"user","content":"first","content":"second"}}') == "second"
    assert ex(b'{"type":"message","message":{"role":"user","content":"caf\xff ok"}}') == "caf\ufffd ok"
    assert ex(b'{"type":"message","message":{"role":"user","content":"a\\nb\\u00e9"}}') == "a\nb\u00e9"
    assert ex(b'{"type":"label","id":5,"timestamp":7,"label":"x"}') == "x"
    call = b'{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","name":"bash","arguments":{"b":2,"a":"z"}}]}}'
    assert ex(call) == "bash\nz\n2"
    assert ex(b'{"type":"message","message":"not an object"}') == ""
    assert (
        ex(
            b'{"type":"message","message":{"role":"user","content":[1,{"type":"text","text":7},{"type":"text","text":"ok"}]}}'
        )
        == "ok"
    )
    assert ex(b'{"type":"label","label":"x"} trailing') is None
    assert ex(b'{"type":"session","id":"s"}') is None
    assert ex(b'["type","label"]') is None


def test_labels_on_the_path_match_session(tmp_path):
    """A hit's labels are those Session gives (``get_label``) for the entries of its branch
    (``get_branch(entry id)``), root first; a relabel or an unlabel counts as Pi replays it."""
    import random

    rnd = random.Random(3)
    b = Builder(tmp_path / "labels.jsonl")
    made: list[str] = []
    for i in range(80):
        r = rnd.random()
        if made and r < 0.15:
            made.append(b.add("label", targetId=rnd.choice(made), label=rnd.choice(["one", "two", "", "three"])))
        elif made and r < 0.25:
            made.append(b.user(f"marker fork {i}", parent=rnd.choice(made)))
        else:
            made.append(b.user(f"marker step {i}"))
    b.write()
    s = Session.open(b.path)
    hits = search("marker", b.path, limit=1000).hits
    assert len(hits) > 40
    for h in hits:
        want = tuple(x for x in (s.get_label(e.id) for e in s.get_branch(h.entry_id)) if x)
        assert h.labels == want, h.entry_id


def test_cli_output_to_a_closed_pipe_or_a_full_device(store, tmp_path):
    """`search ... | head -1` stops quietly; `> /dev/full` is one line on stderr, exit 2: never a
    traceback."""
    d, _ = store
    cmd = [sys.executable, "-m", "sessiontree", "search", "quick", str(d)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        p.stdout.close()  # the reader is gone before the first line
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0
    assert "Traceback" not in err and err == ""
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            p2 = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        assert p2.returncode == 2 and "Traceback" not in p2.stderr
        assert p2.stderr.count("\n") == 1 and "No space left on device" in p2.stderr


def test_cli_text_shows_a_few_labels_per_hit(tmp_path):
    """A hit under hundreds of labels: its line names three and how many more, not all."""
    b = Builder(tmp_path / "l.jsonl")
    for k in range(40):  # forty labelled entries on the hit's path
        target = b.user(f"labelled step {k}")
        b.add("label", targetId=target, label=f"mark{k}")
    b.user("marker below the labels")
    b.write()
    p = _cli("search", "below", str(b.path))
    assert p.returncode == 0, p.stderr
    head = p.stdout.splitlines()[1]
    assert "(+37 more)" in head and len(head) < 200
