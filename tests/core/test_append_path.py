"""The append path: one core call builds, checks, writes and indexes an entry.

What is checked here: a live session's index after appends equals what a fresh open of the
file gives (the core parses only the body of a line it built, so this is the proof that the
shortcut is exact); bad bodies and failed writes append nothing, in memory or on disk; the
``none`` buffer, its flushes and its errors; folding the in-memory copy into the mapping.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import orjson
import pytest

from sessiontree import Session, _core


def _user(text: str, ts: int = 0) -> dict:
    return {"role": "user", "content": text, "timestamp": ts}


def _shape(s: Session) -> list[tuple]:
    core = s._core
    return [(*core.record(i), *(column[0] for column in core.metrics([i]))) for i in range(len(core))]


def _assert_same_as_reopened(s: Session) -> None:
    s.flush()
    again = Session.open(s.path)
    assert _shape(again) == _shape(s)
    assert again.leaf_id == s.leaf_id
    assert again.labels == s.labels
    assert again.session_name == s.session_name
    assert [e.raw for e in again.entries()] == [e.raw for e in s.entries()]
    assert not again.problems


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
def test_live_index_equals_a_fresh_open(tmp_path, durability):
    s = Session.create("/p", session_dir=tmp_path, durability=durability)
    a = s.append_message(_user("hello"))
    s.append_message(
        {"role": "assistant", "content": [{"type": "text", "text": 'ünïcödé \u2028 "quoted" \\'}], "timestamp": 1}
    )
    s.append_thinking_level_change("high")
    s.append_model_change("anthropic", "claude")
    s.append_session_info("  named  ")
    s.append_label_change(a, "start")
    s.branch(a)
    s.append_message({"role": "toolResult", "toolCallId": "c1", "content": [], "isError": False, "timestamp": 2})
    # bodies the fast path must read exactly as a full parse does: a later duplicate member
    # wins (JSON.parse), odd roles, nested depth
    s._core.append_entry("custom", orjson.dumps({"customType": "x", "data": {"a": [1, {"b": None}]}}))
    s._core.append_entry("message", orjson.dumps({"role": "hookMessage", "content": "h"}), "message")
    s._core.append_entry("custom", b'{"timestamp":"2020-01-01T00:00:00.000Z","parentId":null}')
    s._core.append_entry("label", orjson.dumps({"targetId": a, "label": "later"}))
    _assert_same_as_reopened(s)
    s.close()


def test_a_parent_id_that_needs_escapes(tmp_path):
    path = tmp_path / "odd.jsonl"
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"},
        {
            "type": "message",
            "id": 'a"b\\c\n',
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": _user("x"),
        },
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    s = Session.open(path)
    new = s.append_message(_user("child"))
    assert s.get_entry(new).parent_id == 'a"b\\c\n'
    _assert_same_as_reopened(s)
    s.close()


@pytest.mark.parametrize(
    "etype, body, field",
    [
        ("Message", b'{"a":1}', None),  # type must be lowercase letters and _
        ("", b'{"a":1}', None),
        ("custom", b"[1]", None),  # not an object
        ("custom", b'{"a":1', None),  # unterminated
        ("custom", b'{"a":}', None),  # not JSON
        ("custom", b'{"a":\n1}', None),  # a raw newline would split the line
        ("custom", b'{"a":"\xff"}', None),  # not UTF-8
        ("custom", b'{"a":1} {"b":2}', None),
        ("message", b'{"role":"user"', "message"),
        ("message", b"", "message"),
        ("message", b"1", 'mess"age'),  # field names are plain
    ],
)
def test_bad_bodies_append_nothing(tmp_path, etype, body, field):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("first"))
    before = (s.path.read_bytes(), _shape(s), s.leaf_id)
    with pytest.raises(ValueError):
        s._core.append_entry(etype, body, field)
    assert (s.path.read_bytes(), _shape(s), s.leaf_id) == before
    s.append_message(_user("still fine"))
    _assert_same_as_reopened(s)
    s.close()


def test_forbidden_roles_and_non_dicts_are_refused_before_anything_is_written(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    before = s.path.read_bytes() if s.path.exists() else b""
    with pytest.raises(ValueError, match="own entries"):
        s.append_message({"role": "compactionSummary", "summary": "s"})
    with pytest.raises(TypeError):
        s.append_message(["not", "a", "dict"])  # type: ignore[arg-type]
    assert (s.path.read_bytes() if s.path.exists() else b"") == before and len(s) == 0


# ==== failed writes ============================================================

_FAILING_WRITER = textwrap.dedent("""
    import os, resource, signal, sys
    from sessiontree import Session
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    path, durability, room = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = Session.open(path, durability=durability)
    s.append_message({"role": "user", "content": "ok", "timestamp": 0})
    s.flush()
    before_len, before_leaf = len(s), s.leaf_id
    size = os.path.getsize(path)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + room, hard))
    try:
        for _ in range(4):
            s.append_message({"role": "user", "content": "x" * 300, "timestamp": 1})
        s.flush()
        print("NO ERROR")
    except OSError as e:
        print("OSError", e.errno)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    print("size", os.path.getsize(path) - size)
    print("entries", len(s) - before_len)
    s.append_message({"role": "user", "content": "after", "timestamp": 2})
    s.close()
""")


@pytest.mark.parametrize("durability", ["flush", "fsync"])
def test_a_write_that_fails_part_way_leaves_no_torn_line(tmp_path, durability):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("first"))
    s.close()
    # room for one whole entry and part of the next: the second write is cut short
    out = subprocess.run(
        [sys.executable, "-c", _FAILING_WRITER, str(s.path), durability, "500"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "OSError 27"  # EFBIG
    grown, indexed = int(lines[1].split()[1]), int(lines[2].split()[1])
    assert indexed == 1, "only the entry that was fully written is indexed"
    again = Session.open(s.path)
    assert not again.problems, "the partial bytes were cut off again"
    contents = [e["message"]["content"] for e in again.entries()]
    assert contents == ["first", "ok", "x" * 300, "after"]
    assert grown == len(again._core.line(2)) + 1


def test_a_failed_flush_in_none_mode_raises_and_keeps_the_file_whole(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("first"))
    s.close()
    out = subprocess.run(
        [sys.executable, "-c", _FAILING_WRITER, str(s.path), "none", "500"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "OSError 27"
    again = Session.open(s.path)
    assert not again.problems
    # the entries stayed buffered and were written once the file could grow again
    assert [e["message"]["content"] for e in again.entries()] == ["first", "ok"] + ["x" * 300] * 4 + ["after"]


# ==== the none buffer ==========================================================


def test_none_mode_writes_a_full_buffer_and_refresh_writes_the_rest_first(tmp_path):
    s = Session.create("/p", session_dir=tmp_path, durability="none")
    header_only = s.path.stat().st_size
    s.append_message(_user("a"))
    assert s.path.stat().st_size == header_only
    big = "y" * 1000
    for _ in range(80):  # > 64 KiB: the buffer is written before the next entry is added
        s.append_message(_user(big))
    on_disk = len(Session.open(s.path))
    assert 50 <= on_disk < 81  # one 64 KiB write of ~1.1 KB lines
    assert s.refresh() == 0  # flushes first: no "file shrank", nothing new
    assert len(Session.open(s.path)) == 81
    s.close()


def test_a_forgotten_session_still_writes_its_buffer(tmp_path):
    s = Session.create("/p", session_dir=tmp_path, durability="none")
    s.append_message(_user("kept"))
    path = s.path
    del s
    gc.collect()
    assert [e["message"]["content"] for e in Session.open(path).entries()] == ["kept"]


def test_close_releases_the_lock_and_a_new_append_takes_it_again(tmp_path):
    s = Session.create("/p", session_dir=tmp_path, durability="none")
    s.append_message(_user("a"))
    s.close()
    other = Session.open(s.path)
    other.append_message(_user("b"))  # the lock is free
    other.close()
    s.append_message(_user("c"))  # takes it again, indexing b first
    s.close()
    assert [e["message"]["content"] for e in Session.open(s.path).entries()] == ["a", "b", "c"]


# ==== folding the in-memory copy into the mapping ===============================


@pytest.mark.parametrize("durability", ["none", "flush"])
def test_memory_of_a_long_writer_stays_bounded(tmp_path, durability):
    s = Session.create("/p", session_dir=tmp_path, durability=durability)
    text = "z" * 2000
    ids = [s.append_message(_user(text, i)) for i in range(3000)]  # ~6 MB
    assert s._core.appended_in_memory < 2 << 20
    # every entry reads back right, old ones from the mapping and new ones from memory
    assert [s.get_entry(i)["message"]["timestamp"] for i in ids[::97]] == list(range(0, 3000, 97))
    assert len(s.build_context().messages) == 3000
    _assert_same_as_reopened(s)
    s.close()


def test_folding_after_another_program_appended_to_the_file(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("ours"))
    # a writer that ignores the lock (Pi does not lock) appends a line of its own
    fd = os.open(s.path, os.O_WRONLY | os.O_APPEND)
    os.write(
        fd,
        orjson.dumps(
            {
                "type": "custom",
                "customType": "x",
                "id": "foreign1",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:00.000Z",
            }
        )
        + b"\n",
    )
    os.close(fd)
    text = "w" * 2000
    ids = [s.append_message(_user(text, i)) for i in range(700)]  # past the fold size
    # the foreign line was indexed before our next write, so the file is ours byte for byte
    # again and the copy is folded; reads stay right
    assert s.get_entry("foreign1") is not None
    assert s._core.appended_in_memory < 1 << 20
    assert [s.get_entry(i)["message"]["timestamp"] for i in ids[::50]] == list(range(0, 700, 50))
    _assert_same_as_reopened(s)
    s.close()


def test_in_memory_sessions_append_through_the_same_path():
    s = Session.in_memory("/p")
    a = s.append_message(_user("a"))
    b = s.append_message(_user("b"))
    assert s.get_entry(b).parent_id == a and s.leaf_id == b
    s.flush()
    s.sync()
    s.close()
    assert s.append_message(_user("c"))
    with pytest.raises(ValueError):
        s._core.append_entry("custom", b"{")
    assert len(s) == 3


def test_core_rejects_an_unknown_durability(tmp_path):
    core = _core.Index.in_memory()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        with pytest.raises(ValueError):
            core.attach_writer(fd, "sometimes")
    finally:
        os.close(fd)


def test_close_releases_the_lock_even_when_its_flush_fails(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.close()
    code = textwrap.dedent("""
        import os, resource, signal, sys
        from sessiontree import Session, SessionError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        path = sys.argv[1]
        s = Session.open(path, durability="none")
        s.append_message({"role": "user", "content": "x" * 300, "timestamp": 0})
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 10, hard))
        try:
            s.close()
        except OSError as e:
            print("close raised", e.errno)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        other = Session.open(path)
        other.append_message({"role": "user", "content": "other", "timestamp": 1})
        other.close()
        print("lock free")
        # the entry close could not write exists only in `s`: it says so instead of going on
        for op in (lambda: s.append_message({"role": "user", "content": "y", "timestamp": 2}), s.refresh):
            try:
                op()
                print("no error")
            except SessionError as e:
                print("SessionError", "could not be written" in str(e))
    """)
    out = subprocess.run([sys.executable, "-c", code, str(s.path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == ["close raised 27", "lock free", "SessionError True", "SessionError True"]
    again = Session.open(s.path)
    assert not again.problems
    assert [e["message"]["content"] for e in again.entries()] == ["other"]


# ==== threads ==================================================================


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
def test_a_session_shared_by_threads(tmp_path, durability):
    import threading

    path = tmp_path / "deep.jsonl"
    head = {"type": "session", "version": 3, "id": "t", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    rows = [
        {
            "type": "message",
            "id": f"c{i}",
            "parentId": f"c{i - 1}" if i else None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": _user(f"m{i}", i),
        }
        for i in range(20_000)
    ]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in [head, *rows]))
    s = Session.open(path, durability=durability)
    per_writer = 40 if durability == "fsync" else 400
    errors: list[str] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                s.get_branch()
                s.find_cut_point(keep_recent_tokens=2000)
                s.get_entry(s.leaf_id)
                s.labels
        except Exception as e:  # noqa: BLE001 - the test reports any failure
            errors.append(f"reader: {e!r}")

    def writer(tag: str) -> None:
        try:
            for i in range(per_writer):
                s.append_message(_user(f"{tag}{i}"))
        except Exception as e:  # noqa: BLE001
            errors.append(f"writer {tag}: {e!r}")

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    s.close()
    assert errors == []
    again = Session.open(path)
    texts = [e["message"]["content"] for e in again.entries()][20_000:]
    assert sorted(texts) == sorted(f"{t}{i}" for t in "ab" for i in range(per_writer))
    # every append was a whole step: each new entry hangs under the one appended before it
    ids = [e.id for e in again.entries()]
    assert [e.parent_id for e in again.entries()][20_000:] == ids[19_999:-1]
    assert not again.problems


# ==== found by trying to break it ==============================================


def _torn(s: Session) -> None:
    fd = os.open(s.path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'{"type":"message","id":"torn')  # another writer died mid-line
    os.close(fd)
    s.refresh()
    assert [p.kind for p in s.problems] == ["torn_last_line"]


@pytest.mark.parametrize("how", ["message", "custom", "compaction", "branch_summary", "label"])
def test_an_append_after_a_torn_line_starts_a_fresh_line(tmp_path, how):
    s = Session.create("/p", session_dir=tmp_path)
    a = s.append_message(_user("a"))
    _torn(s)
    new = {
        "message": lambda: s.append_message(_user("b")),
        "custom": lambda: s.append_custom_entry("t", {"x": 1}),
        "compaction": lambda: s.append_compaction("sum", a, 10),
        "branch_summary": lambda: s.branch_with_summary(a, "sum"),
        "label": lambda: s.append_label_change(a, "l"),
    }[how]()
    assert s.get_entry(new) is not None and s.leaf_id == new
    s.close()
    again = Session.open(s.path)
    assert again.get_entry(new) is not None
    assert [p.kind for p in again.problems] == ["malformed_json"]  # the torn text, on its own line
    assert [e.raw for e in again.entries()] == [e.raw for e in s.entries()] and again.leaf_id == new


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
@pytest.mark.parametrize("refresh_first", [True, False])
def test_a_file_renamed_over_a_writers_file_is_an_error_not_a_silent_loss(tmp_path, durability, refresh_first):
    s = Session.create("/p", session_dir=tmp_path, durability=durability)
    s.append_message(_user("a"))
    s.flush()
    copy = s.path.with_suffix(".new")
    copy.write_bytes(s.path.read_bytes())
    os.replace(copy, s.path)  # an editor or a backup tool saving the file
    from sessiontree import SessionFileChangedError

    with pytest.raises(SessionFileChangedError, match="replaced"):
        if refresh_first:
            s.refresh()
        s.append_message(_user("after"))
        s.flush()  # none mode: the buffer is where the check happens
    with pytest.raises(SessionFileChangedError):
        s.append_message(_user("again"))
    s._writer and s._writer.close()  # release the lock without writing the buffer
    s._writer = None
    assert [e["message"]["content"] for e in Session.open(s.path).entries()] == ["a"]


def test_a_removed_file_is_an_error_too(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("a"))
    os.unlink(s.path)
    from sessiontree import SessionFileChangedError

    with pytest.raises(SessionFileChangedError):
        s.append_message(_user("b"))


def test_threads_mixing_message_and_dict_appends_still_form_one_chain(tmp_path):
    import threading

    s = Session.create("/p", session_dir=tmp_path)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:

        def messages():
            for i in range(1500):
                s.append_message(_user(f"m{i}"))

        def customs():
            for i in range(1500):
                s.append_custom_entry("c", {"i": i})

        threads = [threading.Thread(target=messages), threading.Thread(target=customs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    s.close()
    again = Session.open(s.path)
    ids = [e.id for e in again.entries()]
    assert [e.parent_id for e in again.entries()] == [None] + ids[:-1]
    assert len(again.get_branch()) == 3000


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.append_session_info(5),
        lambda s: s.append_session_info(None),
        lambda s: s.append_session_info(b"x"),
        lambda s: s.append_model_change(123, "m"),
        lambda s: s.append_model_change("p", None),
        lambda s: s.append_thinking_level_change(None),
        lambda s: s.append_thinking_level_change({"level": "high"}),
        lambda s: s.append_label_change(s.leaf_id, 5),
        lambda s: s.append_custom_entry(5),
        lambda s: s.append_custom_message_entry(None, "x", True),
    ],
)
def test_wrong_argument_types_are_type_errors_and_append_nothing(tmp_path, call):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("a"))
    before = s.path.read_bytes()
    with pytest.raises(TypeError):
        call(s)
    assert s.path.read_bytes() == before and len(s) == 1


def test_ids_with_lone_surrogates_are_looked_up_not_crashed_on(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("a"))
    assert s.get_entry("\ud800") is None
    assert s.get_label("\ud800") is None
    from sessiontree import EntryNotFoundError

    with pytest.raises(EntryNotFoundError):
        s.append_label_change("\ud800", "x")
    with pytest.raises(EntryNotFoundError):
        s.branch("x\udfff")


@pytest.mark.parametrize("durability", ["none", "flush", "fsync"])
def test_pi_appending_without_the_lock_between_our_appends(tmp_path, durability):
    # Pi takes no lock: its whole lines can land between ours. The live index must stay what a
    # fresh open sees (Pi's entry indexed where it is; ours after it, still on our branch).
    s = Session.create("/p", session_dir=tmp_path, durability=durability)
    a = s.append_message(_user("ours-1"))
    s.flush()
    fd = os.open(s.path, os.O_WRONLY | os.O_APPEND)
    os.write(
        fd,
        orjson.dumps(
            {
                "type": "message",
                "id": "pi000001",
                "parentId": a,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": _user("from pi", 2),
            }
        )
        + b"\n",
    )
    os.close(fd)
    b = s.append_message(_user("ours-2"))
    c = s.append_message(_user("ours-3"))
    s.flush()
    s.refresh()
    assert s.get_entry(b).parent_id == a and s.get_entry(c).parent_id == b
    assert [e["message"]["content"] for e in s.get_branch()] == ["ours-1", "ours-2", "ours-3"]
    again = Session.open(s.path)
    assert [e.raw for e in again.entries()] == [e.raw for e in s.entries()]
    assert [e.id for e in again.entries()] == [a, "pi000001", b, c]
    assert not again.problems and not s.problems
    s.close()


def test_a_number_id_on_the_leaf_stays_a_number_in_parent_id(tmp_path):
    # hostile but valid for Pi: the leaf's id is whatever JSON value the line holds
    path = tmp_path / "num.jsonl"
    head = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    row = {
        "type": "message",
        "id": 123,
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": _user("x"),
    }
    path.write_bytes(orjson.dumps(head) + b"\n" + orjson.dumps(row) + b"\n")
    s = Session.open(path)
    new = s.append_message(_user("child"))
    s.close()
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    assert last["id"] == new and last["parentId"] == 123
    again = Session.open(path)
    assert len(again._core.branch(again._core.leaf())) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fsync descriptor is a fresh open on Linux only")
def test_closing_while_another_thread_appends_in_fsync_mode_never_locks_us_out(tmp_path):
    import threading

    s = Session.create("/p", session_dir=tmp_path, durability="fsync")
    errors: list[str] = []
    done = threading.Event()

    def appender() -> None:
        for i in range(60):
            try:
                s.append_message(_user(f"a{i}"))
            except Exception as e:  # noqa: BLE001 - a close racing an append may refuse it
                if "lock" in str(e).lower():
                    errors.append(repr(e))

    def closer() -> None:
        while not done.is_set():
            s.close()

    threads = [threading.Thread(target=appender) for _ in range(2)]
    c = threading.Thread(target=closer)
    c.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    c.join()
    s.close()
    assert errors == []
    assert not Session.open(s.path).problems
