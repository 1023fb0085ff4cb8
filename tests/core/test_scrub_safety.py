"""Scrubbing never loses or exposes data: an in-place rewrite while another program (Pi, which
takes no lock) appends, files with other hard links, keys written with escapes, ``scrub-all``
outputs inside the source or under a planted symlink, and the scrubbed entry table's offsets."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import orjson
import pytest

from sessiontree import Session
from sessiontree.errors import SessionArgumentError, SessionFileChangedError
from sessiontree.scrub import scrub_bytes, scrub_file

from tests.support.secrets import GITHUB_TOKEN as TOK, SESSION_HEAD as HEAD, user_entry as _entry


def _big_session(path, lines: int, pad: int = 400) -> str:
    """A session of ``lines`` chained entries, every tenth holding a secret; returns the last id."""
    filler = "lorem ipsum " * (pad // 12)
    parent = None
    with open(path, "wb") as fh:
        fh.write(HEAD)
        for n in range(lines):
            eid = f"e{n}"
            fh.write(_entry(eid, parent, f"{filler} {TOK if n % 10 == 0 else 'clean'} {n}") + b"\n")
            parent = eid
    return parent or ""


# A Pi-style writer: every append opens the path with O_APPEND, writes one whole line, closes
# (Node's appendFileSync), with no lock; one line every millisecond until told to stop.
_PI_WRITER = textwrap.dedent(
    """
    import os, sys, time, json
    path, parent, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    n = 0
    print("ready", flush=True)
    while not os.path.exists(stop):
        eid = f"pi{n}"
        line = json.dumps({"type": "message", "id": eid, "parentId": parent,
                           "timestamp": "2026-01-01T00:00:02.000Z",
                           "message": {"role": "user", "content": f"appended {n}", "timestamp": 2}},
                          separators=(",", ":")) + "\\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, line.encode())
        os.close(fd)
        parent = eid
        n += 1
        time.sleep(0.001)
    print(n, flush=True)
    """
)


def _scrub_while_pi_appends(tmp_path, scrub) -> tuple[int, list[dict]]:
    src = tmp_path / "s.jsonl"
    last = _big_session(src, 16_000)  # ~7 MB: the rewrite takes a while
    stop = tmp_path / "stop"
    pi = subprocess.Popen(
        [sys.executable, "-c", _PI_WRITER, str(src), last, str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert pi.stdout is not None and pi.stdout.readline().strip() == "ready"
        time.sleep(0.02)
        for _ in range(2):  # two rewrites, each racing the appends
            scrub(src)
        time.sleep(0.02)
    finally:
        stop.touch()
        out, _ = pi.communicate(timeout=60)
    appended = int(out.split()[-1])
    rows = [orjson.loads(x) for x in src.read_bytes().splitlines()]
    return appended, rows


def _assert_nothing_lost(appended: int, rows: list[dict]) -> None:
    ids = [r.get("id") for r in rows[1:]]
    pi_ids = [i for i in ids if isinstance(i, str) and i.startswith("pi")]
    assert appended > 0
    assert set(pi_ids) == {f"pi{n}" for n in range(appended)} and len(pi_ids) == appended  # none lost
    # in append order: a late append to the old file is put before what was appended to the new
    # one since (test_a_late_append_...); the bound is for a late append to a reinsertion's own
    # rewrite, three levels deep (docs/scrub.md, Data safety)
    late = [x for k, x in enumerate(pi_ids) if k and int(x[2:]) < int(pi_ids[k - 1][2:])]
    assert len(late) <= 2, late
    known = set(ids)
    assert all(r["parentId"] is None or r["parentId"] in known for r in rows[1:])  # parents intact
    assert not any(TOK in orjson.dumps(r).decode() for r in rows)


def test_in_place_scrub_keeps_every_append_of_a_writer_that_takes_no_lock(tmp_path):
    appended, rows = _scrub_while_pi_appends(tmp_path, lambda p: scrub_file(p, in_place=True))
    _assert_nothing_lost(appended, rows)


def test_session_scrub_in_place_keeps_every_append_of_a_writer_that_takes_no_lock(tmp_path):
    def scrub(p):
        s = Session.open(p)
        try:
            s.scrub(in_place=True)
        finally:
            s.close()

    appended, rows = _scrub_while_pi_appends(tmp_path, scrub)
    _assert_nothing_lost(appended, rows)


class _LateWriter:
    """Stands in for ``time`` in sessiontree.scrub: at the rewrite's wait after its rename, a
    Pi-style writer that opened the file before the rename (``old``) writes its line there, then
    appends its next line by path (the new file), as a descheduled Node ``appendFileSync`` would."""

    def __init__(self, path, old_fd: int, late: bytes, then: bytes):
        self.path, self.old_fd, self.late, self.then, self.done = path, old_fd, late, then, False

    def sleep(self, secs: float) -> None:
        if not self.done:
            self.done = True
            os.write(self.old_fd, self.late)
            os.close(self.old_fd)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            os.write(fd, self.then)
            os.close(fd)
        time.sleep(secs)

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_a_late_append_to_the_old_file_goes_before_the_appends_after_the_rename(tmp_path, monkeypatch):
    """The late line began first (its writer opened the file before the rename), so it is put
    before the line appended to the new file since, not after it: the file keeps append order
    and Pi resumes at the right leaf. Nothing is lost, the late line is scrubbed too."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    last = _big_session(src, 200)
    old = os.open(src, os.O_WRONLY | os.O_APPEND)
    late = _entry("late", last, f"late {TOK}") + b"\n"
    then = _entry("next", "late", "after it") + b"\n"
    writer = _LateWriter(src, old, late, then)
    monkeypatch.setattr(scrub_mod, "time", writer)
    scrub_file(src, in_place=True)
    assert writer.done
    rows = [orjson.loads(x) for x in src.read_bytes().splitlines()]
    assert [r["id"] for r in rows[-3:]] == [last, "late", "next"]
    assert len(rows) == 203 and not any(TOK in orjson.dumps(r).decode() for r in rows)
    # and again on the rewritten file, with nothing appended meanwhile: unchanged order
    scrub_file(src, in_place=True)
    assert [orjson.loads(x)["id"] for x in src.read_bytes().splitlines()[-3:]] == [last, "late", "next"]


def test_a_late_append_is_moved_before_an_append_that_beat_it_to_the_end(tmp_path, monkeypatch):
    """The new file looked untouched, but another writer's line landed between that look and the
    copy of the late line: the copy is taken out from after it and put in its place."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    last = _big_session(src, 200)
    old = os.open(src, os.O_WRONLY | os.O_APPEND)
    late = _entry("late", last, f"late {TOK}") + b"\n"
    then = _entry("next", "late", "after it") + b"\n"
    real_write_all = scrub_mod._write_all
    raced = []

    def write_all(fd: int, data: bytes) -> None:
        if not raced:  # the other writer wins the race to the end of the new file
            raced.append(True)
            w = os.open(src, os.O_WRONLY | os.O_APPEND)
            os.write(w, then)
            os.close(w)
        real_write_all(fd, data)

    class Late:
        done = False

        def sleep(self, secs: float) -> None:
            if not self.done:
                self.done = True
                os.write(old, late)
                os.close(old)
            time.sleep(secs)

        def __getattr__(self, name: str):
            return getattr(time, name)

    monkeypatch.setattr(scrub_mod, "time", Late())
    monkeypatch.setattr(scrub_mod, "_write_all", write_all)
    scrub_file(src, in_place=True)
    assert raced
    ids = [orjson.loads(x)["id"] for x in src.read_bytes().splitlines()]
    assert ids[-3:] == [last, "late", "next"] and ids.count("late") == 1 and len(ids) == 203
    assert TOK.encode() not in src.read_bytes()


def test_a_crash_before_the_late_line_is_reordered_loses_nothing(tmp_path, monkeypatch):
    """The late line is appended and fsynced before the reordering rewrite starts: a crash there
    leaves every line in the file (the late one after the line that beat it)."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    last = _big_session(src, 200)
    old = os.open(src, os.O_WRONLY | os.O_APPEND)
    late = _entry("late", last, f"late {TOK}") + b"\n"
    then = _entry("next", "late", "after it") + b"\n"
    monkeypatch.setattr(scrub_mod, "time", _LateWriter(src, old, late, then))

    class Crash(BaseException):
        pass

    def crash(*a, **k):
        raise Crash

    monkeypatch.setattr(scrub_mod, "_reinsert", crash)
    with pytest.raises(Crash):
        scrub_file(src, in_place=True)
    ids = [orjson.loads(x)["id"] for x in src.read_bytes().splitlines()]
    assert ids[-3:] == [last, "next", "late"] and len(ids) == 203
    assert TOK.encode() not in src.read_bytes()


def test_a_reordering_that_keeps_growing_leaves_the_file_as_it_is(tmp_path, monkeypatch):
    """The reordering rewrite copies what other writers append meanwhile; when they never stop it
    gives up and leaves the file as it was: every line there, the late one after the others."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    last = _big_session(src, 200)
    old = os.open(src, os.O_WRONLY | os.O_APPEND)
    late = _entry("late", last, f"late {TOK}") + b"\n"
    then = _entry("next", "late", "after it") + b"\n"
    monkeypatch.setattr(scrub_mod, "time", _LateWriter(src, old, late, then))
    monkeypatch.setattr(scrub_mod, "TAIL_ROUNDS", 3)
    made = []

    class Growing(scrub_mod.AtomicWriter):
        """The second rewrite (the reordering): another writer appends at every flush of its
        copy while it settles."""

        def __init__(self, *a, settle=None, **k):
            made.append(self)
            if len(made) >= 2 and settle is not None:
                inner = settle

                def settle(out):
                    class Out:
                        def __getattr__(self, name):
                            return getattr(out, name)

                        def flush(self):
                            out.flush()
                            fd = os.open(src, os.O_WRONLY | os.O_APPEND)
                            os.write(fd, _entry(f"more{len(made)}", "next", "more") + b"\n")
                            os.close(fd)
                            made.append(None)

                    inner(Out())

            super().__init__(*a, settle=settle, **k)

    monkeypatch.setattr(scrub_mod, "AtomicWriter", Growing)
    scrub_file(src, in_place=True)
    ids = [orjson.loads(x)["id"] for x in src.read_bytes().splitlines()]
    assert len(made) >= 2 + 3  # the reordering ran and saw the file grow at each of its 3 rounds
    assert ids[201:203] == ["next", "late"] and ids.count("late") == 1
    assert len(ids) == 203 + len(made) - 2 and all(i.startswith("more") for i in ids[203:])
    assert not list(tmp_path.glob(".*tmp*")) and TOK.encode() not in src.read_bytes()


# ---- hard links, modes ----


def test_in_place_on_a_file_with_another_hard_link_is_refused(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_bytes(HEAD + _entry("a", None, f"key {TOK}") + b"\n")
    other = tmp_path / "other-name.jsonl"
    os.link(src, other)
    before = src.read_bytes()
    with pytest.raises(SessionArgumentError, match="hard link") as exc:
        scrub_file(src, in_place=True)
    assert "\n" not in str(exc.value) and TOK not in str(exc.value)
    s = Session.open(src)
    try:
        with pytest.raises(SessionArgumentError, match="hard link"):
            s.scrub(in_place=True)
    finally:
        s.close()
    assert src.read_bytes() == before == other.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-name.jsonl", "s.jsonl"]  # no temp file


# ---- keys compared after JSON decoding ----


def test_escaped_tree_keys_are_never_changed():
    # "\u0069d" is "id", "p\u0061rentId" is "parentId", "t\u0061rgetId" is "targetId" (JSON.parse)
    lines = [
        b'{"type":"message","\\u0069d":"' + TOK.encode() + b'","p\\u0061rentId":null,'
        b'"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"k ' + TOK.encode() + b'"}}',
        b'{"type":"message","id":"b","p\\u0061rentId":"' + TOK.encode() + b'",'
        b'"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":'
        b'[{"type":"toolCall","\\u0069d":"' + TOK.encode() + b'","name":"bash","arguments":{}}]}}',
        b'{"type":"label","id":"l","parentId":"b","timestamp":"2026-01-01T00:00:02.000Z",'
        b'"t\\u0061rgetId":"' + TOK.encode() + b'","label":"x"}',
        b'{"type":"message","id":"c","parentId":"l","timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"toolResult","t\\u006folCallId":"' + TOK.encode() + b'","content":"ok"}}',
    ]
    data = HEAD + b"\n".join(lines) + b"\n"
    out, rep = scrub_bytes(data)
    got = [orjson.loads(x) for x in out.splitlines()[1:]]
    assert got[0]["id"] == TOK and got[1]["parentId"] == TOK and got[2]["targetId"] == TOK
    assert got[1]["message"]["content"][0]["id"] == TOK and got[3]["message"]["toolCallId"] == TOK
    assert TOK not in got[0]["message"]["content"]  # the text is still scrubbed
    assert rep.found == 1
    s, t = Session.from_bytes(data), Session.from_bytes(out)
    assert s.entry_table().id == t.entry_table().id and s.leaf_id == t.leaf_id


def test_replay_drop_finds_escaped_names():
    line = (
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm",'
        b'"thinking\\u0053ignature":"sig1"},{"type":"text","text":"t","textSignatur\\u0065":"sig2"}]}}'
    )
    out, rep = scrub_bytes(HEAD + line + b"\n", replay="drop")
    msg = orjson.loads(out.splitlines()[1])["message"]
    assert msg["content"] == [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "t"}]
    assert rep.replay_fields == 2
    out, rep = scrub_bytes(HEAD + line + b"\n", replay="keep")
    assert out == HEAD + line + b"\n" and rep.replay_fields == 2


def test_an_escaped_header_key_keeps_its_rule():
    head = (
        b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"c\\u0077d":"/w/' + TOK.encode() + b'"}\n'
    )
    out, _ = scrub_bytes(head)
    assert out == head  # the cwd is searched only with header=True
    out, rep = scrub_bytes(head, header=True)
    assert TOK.encode() not in out and rep.found == 1


# ---- scrub-all ----


def _store(root, names):
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        p = os.path.join(os.fsencode(root), name if isinstance(name, bytes) else os.fsencode(name))
        with open(p, "wb") as fh:
            fh.write(HEAD + _entry("a", None, f"key {TOK}") + b"\n")


def test_scrub_all_gives_a_non_utf8_name_its_row(tmp_path, capsys):
    from sessiontree.cli import main
    from sessiontree.fleet import scrub_sessions

    store = tmp_path / "store"
    _store(store, [b"caf\xe9.jsonl", "ok.jsonl"])
    rows = scrub_sessions(str(store), tmp_path / "out")
    assert len(rows) == 2 and all(r["error"] is None and r["found"] == 1 for r in rows)
    assert os.path.exists(os.path.join(os.fsencode(tmp_path / "out"), b"caf\xe9.jsonl"))
    assert main(["scrub-all", str(store), "--out", str(tmp_path / "out2")]) == 0
    lines = [orjson.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 and all(r["error"] is None for r in lines)
    assert any("caf" in r["path"] for r in lines)


def test_scrub_all_never_writes_through_a_symlinked_folder_inside_out(tmp_path):
    from sessiontree.fleet import scrub_sessions

    store = tmp_path / "store"
    _store(store / "proj", ["a.jsonl"])
    out = tmp_path / "out"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "proj").symlink_to(elsewhere, target_is_directory=True)  # planted
    rows = scrub_sessions(str(store), out)
    assert rows[0]["error"] is not None and "symbolic link" in rows[0]["error"]
    assert list(elsewhere.iterdir()) == []
    # a link planted deeper, and one to a file
    (out / "proj").unlink()
    (out / "proj").mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (out / "proj" / "a.jsonl").symlink_to(victim)
    rows = scrub_sessions(str(store), out)
    assert rows[0]["error"] is not None and victim.read_bytes() == b"keep"


def test_scrub_all_with_out_inside_the_source_does_not_nest_on_every_run(tmp_path):
    from sessiontree.fleet import scrub_sessions

    store = tmp_path / "store"
    _store(store / "proj", ["a.jsonl", "b.jsonl"])
    out = store / "scrubbed"
    for _ in range(3):
        rows = scrub_sessions(str(store), out)
        assert sorted(os.path.relpath(r["path"], store) for r in rows) == ["proj/a.jsonl", "proj/b.jsonl"]
        assert all(r["error"] is None for r in rows)
    written = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
    assert written == ["proj/a.jsonl", "proj/b.jsonl"]


# ---- entries_table(scrub=True) ----


def test_scrubbed_entry_table_offsets_address_the_original_file(tmp_path):
    pytest.importorskip("pyarrow")
    from sessiontree.fleet import entries_table

    src = tmp_path / "s.jsonl"
    src.write_bytes(
        HEAD
        + _entry("a", None, f"one {TOK} two {TOK}")
        + b"\n"
        + _entry("b", "a", "clean")
        + b"\n"
        + _entry("c", "b", f"x {TOK}")
        + b"\n"
    )
    plain, clean = entries_table(str(src)), entries_table(str(src), scrub=True)
    assert clean.column("offset").to_pylist() == plain.column("offset").to_pylist()
    assert clean.column("bytes").to_pylist() == plain.column("bytes").to_pylist()
    data = src.read_bytes()
    for off, n, eid in zip(*(clean.column(c).to_pylist() for c in ("offset", "bytes", "entry_id"))):
        assert orjson.loads(data[off : off + n])["id"] == eid


def test_in_place_refuses_a_file_that_keeps_growing(tmp_path, monkeypatch):
    from sessiontree import scrub as mod

    src = tmp_path / "s.jsonl"
    src.write_bytes(HEAD + _entry("a", None, f"key {TOK}") + b"\n")
    real_feed = mod._feed
    grown = []

    def feed_then_append(fh, sc, out, progress):
        real_feed(fh, sc, out, progress)
        with open(src, "ab") as w:  # another writer appends after every read, for ever
            w.write(_entry(f"g{len(grown)}", "a", "more") + b"\n")
        grown.append(1)

    monkeypatch.setattr(mod, "_feed", feed_then_append)
    monkeypatch.setattr(mod, "TAIL_ROUNDS", 5)
    with pytest.raises(SessionFileChangedError, match="kept growing") as exc:
        scrub_file(src, in_place=True)
    assert "\n" not in str(exc.value)
    data = src.read_bytes()
    assert TOK.encode() in data and data.count(b"\n") == 2 + len(grown)  # left as it was, appends kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_in_place_refuses_a_file_that_shrank_meanwhile(tmp_path, monkeypatch):
    from sessiontree import scrub as mod

    src = tmp_path / "s.jsonl"
    src.write_bytes(HEAD + _entry("a", None, f"key {TOK}") + b"\n" + _entry("b", "a", "x") + b"\n")
    real_feed = mod._feed

    def feed_then_truncate(fh, sc, out, progress):
        real_feed(fh, sc, out, progress)
        os.truncate(src, len(HEAD))

    monkeypatch.setattr(mod, "_feed", feed_then_truncate)
    with pytest.raises(SessionFileChangedError, match="shrank"):
        scrub_file(src, in_place=True)
    assert src.read_bytes() == HEAD and sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_scrub_all_refuses_an_out_that_is_the_source_or_holds_it(tmp_path):
    from sessiontree.fleet import scrub_sessions

    store = tmp_path / "store"
    _store(store / "proj", ["a.jsonl"])
    before = (store / "proj" / "a.jsonl").read_bytes()
    for out in (store, tmp_path, store / "proj"):
        with pytest.raises(SessionArgumentError, match="output folder"):
            scrub_sessions(str(store / "proj") if out != store else str(store), out)
    assert (store / "proj" / "a.jsonl").read_bytes() == before
    assert sorted(p.name for p in store.rglob("*")) == ["a.jsonl", "proj"]


# ---- a writer that opened the file before the rename and writes much later ----

# A Pi-style append descheduled between its open and its write (Node's appendFileSync, no lock):
# opens the path when told ("go" on stdin, or at once), says "open", waits STALL seconds, writes
# its line, closes, says "written". With HOLD it keeps the file open afterwards until stdin ends.
_STALLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    path, line, stall, wait_go, hold = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1", sys.argv[5] == "1"
    if wait_go:
        sys.stdin.readline()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    print("open", flush=True)
    time.sleep(stall)
    os.write(fd, line.encode())
    print("written", flush=True)
    if hold:
        sys.stdin.read()
    os.close(fd)
    """
)


def _stalled_writer(path, line: bytes, stall: float, *, wait_go: bool = False, hold: bool = False):
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            _STALLED_WRITER,
            str(path),
            line.decode(),
            str(stall),
            str(int(wait_go)),
            str(int(hold)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _ids(path) -> list[str]:
    return [orjson.loads(x).get("id") for x in path.read_bytes().splitlines()]


def test_an_append_stalled_between_open_and_write_is_kept(tmp_path):
    """The writer opened the file before the rewrite and writes 0.4 s later, long after the
    50 ms a rewrite used to wait: the rewrite waits until it has closed the file (before its
    rename), so its line is in the rewritten file, scrubbed. Before, it went into the old file,
    which no name reaches."""
    src = tmp_path / "s.jsonl"
    last = _big_session(src, 200)
    w = _stalled_writer(src, _entry("stalled", last, f"late {TOK}") + b"\n", 0.4)
    try:
        assert w.stdout is not None and w.stdout.readline().strip() == "open"
        report = scrub_file(src, in_place=True)
        assert w.stdout.readline().strip() == "written"
    finally:
        w.communicate(timeout=30)
    assert report.written and _ids(src)[-2:] == [last, "stalled"]
    assert TOK.encode() not in src.read_bytes()


def test_an_append_opened_just_before_the_rename_and_written_late_is_kept(tmp_path, monkeypatch):
    """The writer opens the file after the rewrite's last look for writers and before its rename,
    then writes 0.3 s later into the old file: after the rename the rewrite waits for every
    process that holds the old file open for writing and copies what it wrote, in its place."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    last = _big_session(src, 200)
    w = _stalled_writer(src, _entry("stalled", last, f"late {TOK}") + b"\n", 0.3, wait_go=True)
    real = scrub_mod._wait_writers
    calls = []

    def wait_writers(ident, wait):
        held = real(ident, wait)
        if not calls:  # the look before the rename: now the writer opens the file
            assert w.stdin is not None and w.stdout is not None
            w.stdin.write("go\n")
            w.stdin.flush()
            assert w.stdout.readline().strip() == "open"
        calls.append(held)
        return held

    monkeypatch.setattr(scrub_mod, "_wait_writers", wait_writers)
    try:
        scrub_file(src, in_place=True)
        assert w.stdout is not None and w.stdout.readline().strip() == "written"
    finally:
        w.communicate(timeout=30)
    assert len(calls) == 2 and calls == [[], []]  # the second waited for it to close
    assert _ids(src)[-2:] == [last, "stalled"] and len(_ids(src)) == 202
    assert TOK.encode() not in src.read_bytes()


def test_a_file_held_open_for_writing_is_not_rewritten(tmp_path, monkeypatch):
    """Another process keeps the file open for writing (a writer that opens once and appends
    for ever): a rewrite would lose what it writes later, so it is refused with one line naming
    the process, after a wait, and the file is left as it was, with no temp file."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    last = _big_session(src, 50)
    monkeypatch.setattr(scrub_mod, "WRITER_WAIT", 0.3)
    w = _stalled_writer(src, _entry("held", last, "held") + b"\n", 0, hold=True)
    try:
        assert w.stdout is not None and w.stdout.readline().strip() == "open"
        assert w.stdout.readline().strip() == "written"
        before = src.read_bytes()
        with pytest.raises(SessionFileChangedError, match=f"held open for writing by process {w.pid}") as exc:
            scrub_file(src, in_place=True)
        assert "\n" not in str(exc.value) and TOK not in str(exc.value)
        assert src.read_bytes() == before and TOK.encode() in before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]
    finally:
        w.communicate("", timeout=30)


def test_a_reader_holding_the_file_open_does_not_hold_up_the_rewrite(tmp_path):
    """Only writers count: a `tail -f` keeping the file open for reading does not delay or
    refuse the rewrite."""
    src = tmp_path / "s.jsonl"
    _big_session(src, 50)
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; f = open(sys.argv[1], 'rb'); print('open', flush=True); sys.stdin.read()",
            str(src),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        t = time.monotonic()
        assert scrub_file(src, in_place=True).written
        assert time.monotonic() - t < 1.5
    finally:
        reader.communicate("", timeout=30)
    assert TOK.encode() not in src.read_bytes()


# ---- where an in-place rewrite writes: FIFOs, devices, symlinks, folders it cannot write ----


def test_in_place_on_a_fifo_or_a_device_is_refused_without_hanging(tmp_path):
    """A FIFO with no reader used to hang the lock's open for writing for ever; a link to
    /dev/zero would have been a device. Both are refused with one line, nothing written."""
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    dev = tmp_path / "z.jsonl"
    dev.symlink_to("/dev/zero")
    code = textwrap.dedent(
        """
        import sys
        from sessiontree import Session
        from sessiontree.errors import SessionTreeError
        from sessiontree.scrub import scrub_file
        for p in sys.argv[1:]:
            try:
                scrub_file(p, in_place=True)
                print("written")
            except SessionTreeError as e:
                print(type(e).__name__, str(e).count(chr(10)))
        """
    )
    out = subprocess.run([sys.executable, "-c", code, str(fifo), str(dev)], capture_output=True, text=True, timeout=60)
    assert out.stdout.split("\n")[:2] == ["SessionArgumentError 0", "SessionArgumentError 0"], out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.jsonl", "z.jsonl"]


def test_in_place_through_a_symlink_rewrites_the_target_and_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = real_dir / "s.jsonl"
    _big_session(target, 30)
    os.chmod(target, 0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    scrub_file(link, in_place=True)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert TOK.encode() not in target.read_bytes() and len(_ids(target)) == 31
    assert oct(os.stat(target).st_mode & 0o777) == oct(0o640)


def test_a_target_swapped_for_a_symlink_during_the_rewrite_is_not_written_through(tmp_path, monkeypatch):
    """The file is replaced by a link to another file while the rewrite runs: the rewrite is
    refused and the other file is untouched."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    _big_session(src, 30)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me\n")
    real = scrub_mod._wait_writers

    def swap(ident, wait):
        if src.exists() and not src.is_symlink():
            os.replace(src, tmp_path / "moved.jsonl")
            src.symlink_to(victim)
        return real(ident, wait)

    monkeypatch.setattr(scrub_mod, "_wait_writers", swap)
    with pytest.raises((SessionFileChangedError, OSError)):
        scrub_file(src, in_place=True)
    assert victim.read_bytes() == b"keep me\n" and src.is_symlink()
    assert TOK.encode() in (tmp_path / "moved.jsonl").read_bytes()
    assert not [p for p in tmp_path.iterdir() if "tmp" in p.name]


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/chattr"), reason="needs root and chattr")
def test_in_place_in_a_folder_it_cannot_write_fails_cleanly(tmp_path):
    """The folder is immutable (no temp file can be made there, even by root): a clean error,
    the file as it was, nothing left behind."""
    d = tmp_path / "ro"
    d.mkdir()
    src = d / "s.jsonl"
    _big_session(src, 30)
    before = src.read_bytes()
    if subprocess.run(["chattr", "+i", str(d)], capture_output=True).returncode:
        pytest.skip("the file system does not support chattr +i")
    try:
        with pytest.raises(OSError):
            scrub_file(src, in_place=True)
    finally:
        subprocess.run(["chattr", "-i", str(d)], check=True)
    assert src.read_bytes() == before and sorted(p.name for p in d.iterdir()) == ["s.jsonl"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file another owner")
def test_in_place_keeps_the_owner_group_and_mode_of_another_users_file(tmp_path):
    src = tmp_path / "s.jsonl"
    _big_session(src, 30)
    os.chown(src, 4321, 4322)
    os.chmod(src, 0o620)
    scrub_file(src, in_place=True)
    st = os.stat(src)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (4321, 4322, 0o620)
    assert TOK.encode() not in src.read_bytes()


def test_a_writer_of_ours_waiting_for_the_lock_does_not_hold_up_the_rewrite(tmp_path, monkeypatch):
    """Another process waits for the writer lock (a `Session` append or a second scrub with a
    lock timeout): it waits on a descriptor open for reading only, so the rewrite that holds the
    lock does not take it for a writer that takes no lock (before, two `--in-place` scrubs at
    once refused each other after a 2 s wait)."""
    import sessiontree.scrub as scrub_mod

    src = tmp_path / "s.jsonl"
    _big_session(src, 50)
    monkeypatch.setattr(scrub_mod, "WRITER_WAIT", 1.0)
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from sessiontree.writer import SessionWriter
        w = SessionWriter(Path(sys.argv[1]), lock_timeout=30)
        print("waiting", flush=True)
        w.acquire()
        print("locked", flush=True)
        w.close()
        """
    )
    real = scrub_mod._wait_writers
    waiter: list[subprocess.Popen] = []

    def wait_writers(ident, wait):
        if not waiter:  # the rewrite holds the lock: another process starts waiting for it
            p = subprocess.Popen([sys.executable, "-c", code, str(src)], stdout=subprocess.PIPE, text=True)
            waiter.append(p)
            assert p.stdout is not None and p.stdout.readline().strip() == "waiting"
            time.sleep(0.3)  # polling the lock by now
        return real(ident, wait)

    monkeypatch.setattr(scrub_mod, "_wait_writers", wait_writers)
    try:
        assert scrub_file(src, in_place=True).written
        out, _ = waiter[0].communicate(timeout=60)
    finally:
        if waiter and waiter[0].poll() is None:
            waiter[0].kill()
    assert out.split() == ["locked"] and TOK.encode() not in src.read_bytes()


def test_a_lock_waited_for_while_the_file_is_replaced_is_taken_on_the_new_file(tmp_path):
    """A writer waits for the lock while a rewrite in place replaces the file: it ends up holding
    the lock of the file the path names now, appending there (before, it locked the old file,
    which no name reaches, and appended there)."""
    import threading
    from pathlib import Path

    from sessiontree.writer import SessionWriter

    src = tmp_path / "s.jsonl"
    _big_session(src, 5)
    holder = SessionWriter(Path(src))
    holder.acquire()
    got: list[SessionWriter] = []
    waiter = SessionWriter(Path(src), lock_timeout=10)
    t = threading.Thread(target=lambda: (waiter.acquire(), got.append(waiter)))
    t.start()
    time.sleep(0.2)  # waiting by now
    new = tmp_path / "new.jsonl"
    new.write_bytes(src.read_bytes())
    os.replace(new, src)
    holder.close()
    t.join(10)
    try:
        assert got and os.fstat(waiter.fd).st_ino == os.stat(src).st_ino
    finally:
        waiter.close()


def test_in_place_removes_the_temp_copies_a_killed_rewrite_left(tmp_path):
    """A rewrite killed mid-way (SIGKILL) leaves its temp copy; the next rewrite in place, under
    the lock, removes those older than a minute (a copy that recent may still be written) and
    touches no other name."""
    src = tmp_path / "s.jsonl"
    _big_session(src, 20)
    old = tmp_path / ".s.jsonl.0badc0de.tmp"
    fresh = tmp_path / ".s.jsonl.1badc0de.tmp"
    other = tmp_path / ".t.jsonl.2badc0de.tmp"
    for p in (old, fresh, other):
        p.write_bytes(b"partial copy\n")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    os.utime(other, (hour_ago, hour_ago))
    scrub_file(src, in_place=True)
    assert not old.exists() and fresh.exists() and other.exists()
