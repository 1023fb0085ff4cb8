"""Issue 11 hardening (items 1-10, 26-30): each test failed before its fix.

Inputs are small and generated at run time. Anything that could kill the interpreter with a
signal (SIGBUS) runs in a child process, so a regression fails the test instead of pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sessiontree import Session, SessionError
from tests.support.lines import HEADER, message_line as _msg


def _chain(n: int, size: int = 100) -> bytes:
    return HEADER + b"".join(_msg(f"e{i}", f"e{i - 1}" if i else None, "x" * size) for i in range(n))


def _child(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
    )


# ==== 7: no SIGBUS, ever ===========================================================


@pytest.mark.parametrize("how", ["truncate", "rewrite_in_place", "rewrite_shorter_then_grow"])
def test_a_file_changed_in_place_under_a_reader_raises_never_a_signal(tmp_path, how):
    """A file (well over the size that used to be memory-mapped) truncated, or rewritten in
    place as Pi's ``writeFileSync`` does (truncate, then write), under an open ``Session``
    that has noticed nothing: reading entries ends in ``SessionFileChangedError`` (or reads
    what is still there), never in SIGBUS."""
    p = tmp_path / "s.jsonl"
    p.write_bytes(_chain(4000))
    code = f"""
        import os
        from sessiontree import Session, SessionFileChangedError
        p = {str(p)!r}
        s = Session.open(p)
        size = os.path.getsize(p)
        how = {how!r}
        if how == "truncate":
            os.truncate(p, 100)
        elif how == "rewrite_in_place":
            # another session of another shape, written over ours in place (same inode)
            data = open(p, "rb").read()
            with open(p, "r+b") as f:
                f.truncate(0)
                f.write(data[:90] + b"\\n" * 3 + data[90:size // 3])
        else:
            with open(p, "r+b") as f:
                f.truncate(1000)
                f.seek(0, 2)
                f.write(b"x" * (size * 2))
        try:
            s.get_entry("e3999").raw
            for e in s.entries():
                e.raw
            s.build_context()
        except SessionFileChangedError as exc:
            print("changed:", exc)
        else:
            print("read")
    """
    proc = _child(code)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-800:])
    if how != "rewrite_shorter_then_grow" or "changed" in proc.stdout:
        assert proc.stdout.startswith("changed:"), proc.stdout


def test_a_file_truncated_while_listed_is_not_a_signal(tmp_path):
    """``list_sessions`` reads through plain reads: a file truncated between the header read and
    the backward search (done here from inside the listing, at its first parsed line) is
    listed from what is left or left out, never a SIGBUS."""
    d = tmp_path / "d"
    d.mkdir()
    p = d / "s.jsonl"
    info = (
        json.dumps(
            {
                "type": "session_info",
                "id": "n1",
                "parentId": "e0",
                "timestamp": "2026-01-01T00:00:02.000Z",
                "name": "nm",
            }
        ).encode()
        + b"\n"
    )
    p.write_bytes(_chain(4000)[:200000].rsplit(b"\n", 1)[0] + b"\n" + info + b"x" * 300000 + b"\n")
    code = f"""
        import os
        from sessiontree import listing
        p = {str(p)!r}
        real = listing.parse_json_line
        calls = []
        def hostile(line):
            calls.append(1)
            if len(calls) == 2:  # the header was read; the file is mapped or open now
                os.truncate(p, 10)
            return real(line)
        listing.parse_json_line = hostile
        out = listing.list_sessions(session_dir={str(d)!r})
        print("listed", len(out))
    """
    proc = _child(code)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-800:])
    assert proc.stdout.startswith("listed"), proc.stdout


def test_open_through_reads_indexes_lines_across_block_boundaries(tmp_path):
    """The open scan reads 8 MiB blocks cut at line ends; a line longer than a block is read
    whole. Over 20 MiB of lines of every length (one of 10 MiB, a torn last line) the index
    is the one a line-by-line reading gives."""
    import random

    rnd = random.Random(7)
    parts, ids, parent = [HEADER], [], None
    i = 0
    size = len(HEADER)
    while size < 20 << 20:
        n = 10 << 20 if i == 300 else rnd.choice([1, 50, 5000, 200000])
        line = _msg(f"e{i}", parent, "y" * n)
        parts.append(line)
        ids.append(f"e{i}")
        parent = f"e{i}"
        size += len(line)
        i += 1
    parts.append(b'{"type":"message","id":"torn"')
    p = tmp_path / "s.jsonl"
    p.write_bytes(b"".join(parts))
    s = Session.open(p)
    assert [e.id for e in s.entries()] == ids
    assert [(q.line, q.kind) for q in s.problems] == [(len(ids) + 2, "torn_last_line")]
    assert s.get_entry("e300")["message"]["content"] == "y" * (10 << 20)
    assert len(s.build_context().messages) == len(ids)


# ==== 1-3, 5, 6: rewrites of legacy files, creation ====================================

V2_HEADER = b'{"type":"session","version":2,"id":"old","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}\n'


def _v2_file(path: Path) -> Path:
    path.write_bytes(V2_HEADER + _msg("a1", None, "hello") + _msg("a2", "a1", "world"))
    return path


@pytest.mark.parametrize("how", ["migrate", "first_write"])
def test_a_legacy_file_replaced_by_rename_is_not_rewritten_with_the_stale_view(tmp_path, how):
    from sessiontree import SessionFileChangedError

    p = _v2_file(tmp_path / "s.jsonl")
    s = Session.open(p)
    assert s.needs_migration
    other = tmp_path / "other.jsonl"
    theirs = HEADER + _msg("b1", None, "theirs")
    other.write_bytes(theirs)
    os.replace(other, p)  # another program replaced the file by rename
    with pytest.raises(SessionFileChangedError):
        if how == "migrate":
            s.migrate()
        else:
            s.append_message({"role": "user", "content": "x", "timestamp": 1})
    assert p.read_bytes() == theirs  # nothing destroyed
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_atomic_rewrite_keeps_the_files_mode(tmp_path):
    p = _v2_file(tmp_path / "s.jsonl")
    os.chmod(p, 0o600)
    s = Session.open(p)
    s.append_message({"role": "user", "content": "x", "timestamp": 1})
    s.close()
    assert Session.open(p).header["version"] == 3
    assert (os.stat(p).st_mode & 0o7777) == 0o600
    os.chmod(p, 0o640)
    p2 = _v2_file(tmp_path / "t.jsonl")
    os.chmod(p2, 0o640)
    assert Session.open(p2).migrate()
    assert (os.stat(p2).st_mode & 0o7777) == 0o640


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_the_atomic_rewrite_keeps_the_files_owner_where_permitted(tmp_path):
    p = _v2_file(tmp_path / "s.jsonl")
    os.chown(p, 12345, 23456)
    assert Session.open(p).migrate()
    st = os.stat(p)
    assert (st.st_uid, st.st_gid) == (12345, 23456)


def test_the_first_write_through_a_symlink_rewrites_its_target_and_keeps_the_link(tmp_path):
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    target = _v2_file(real_dir / "s.jsonl")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    s = Session.open(link)
    new_id = s.append_message({"role": "user", "content": "via link", "timestamp": 1})
    s.close()
    assert link.is_symlink() and os.readlink(link) == str(target)
    reopened = Session.open(target)
    assert reopened.header["version"] == 3 and reopened.get_entry(new_id) is not None
    assert [e.id for e in reopened.entries()][:2] == ["a1", "a2"]


def test_stale_temp_copies_of_a_killed_rewrite_are_removed_under_the_lock(tmp_path):
    p = _v2_file(tmp_path / "s.jsonl")
    stale = tmp_path / ".s.jsonl.0badc0de.tmp"  # what a rewrite killed mid-way leaves
    stale.write_bytes(b"partial copy")
    os.utime(stale, (1, 1))
    foreign = tmp_path / ".s.jsonl.notours.tmp"  # not our pattern: never touched
    foreign.write_bytes(b"x")
    os.utime(foreign, (1, 1))
    other = tmp_path / ".t.jsonl.0badc0de.tmp"  # another session's: not under our lock
    other.write_bytes(b"x")
    os.utime(other, (1, 1))
    assert Session.open(p).migrate()
    assert not stale.exists()
    assert foreign.exists() and other.exists()


def test_create_on_a_full_disk_leaves_no_empty_file(tmp_path):
    """A file-size limit of 10 bytes makes the header write fail as a full disk does."""
    code = f"""
        import resource, signal, os
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10))
        from sessiontree import Session
        for _ in range(3):
            try:
                Session.create("/p", session_dir={str(tmp_path)!r})
            except OSError as e:
                print("error", e.errno)
        print(sorted(os.listdir({str(tmp_path)!r})))
    """
    proc = _child(code)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert proc.stdout.count("error") == 3 and proc.stdout.strip().endswith("[]"), proc.stdout


def test_create_in_fsync_mode_fsyncs_the_folder(tmp_path, monkeypatch):
    import stat

    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    Session.create("/p", session_dir=tmp_path, durability="fsync").close()
    assert True in synced and False in synced
    synced.clear()
    Session.create("/p", session_dir=tmp_path, durability="flush").close()
    assert synced == []


# ==== 8-10: threads, fork, lock timeouts ===========================================


def test_threads_sharing_a_session_never_see_already_borrowed_on_a_cycle_error(tmp_path):
    """One thread gets SessionCycleError over and over (the error is built after the index
    is let go) while others move the leaf and walk the tree: no ``RuntimeError: Already
    borrowed``."""
    import threading
    from sessiontree import SessionCycleError

    p = tmp_path / "s.jsonl"
    p.write_bytes(
        HEADER
        + _msg("a", "b")
        + _msg("b", "a")
        + b"".join(_msg(f"e{i}", f"e{i - 1}" if i else None) for i in range(200))
    )
    s = Session.open(p)
    errors: list[BaseException] = []
    stop = threading.Event()

    def cycles():
        while not stop.is_set():
            try:
                s.get_branch("a")
            except SessionCycleError:
                pass
            except BaseException as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

    def movers():
        while not stop.is_set():
            try:
                s.branch("e150")
                s.get_branch("e199")
                s.branch("e199")
                s.get_children("e10")
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=cycles) for _ in range(2)] + [
            threading.Thread(target=movers) for _ in range(2)
        ]
        for t in threads:
            t.start()
        import time

        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors[:3]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("durability", ["none", "flush"])
def test_a_forked_child_drops_the_writer_it_inherited(tmp_path, durability):
    """``os.fork()`` while a Session writes: the child neither writes the parent's buffered
    entries a second time (at exit) nor appends under the parent's lock."""
    code = f"""
        import os, sys
        from sessiontree import Session, SessionLockedError
        s = Session.create("/p", session_dir={str(tmp_path)!r}, durability={durability!r})
        ids = [s.append_message({{"role": "user", "content": f"m{{i}}", "timestamp": i}}) for i in range(3)]
        pid = os.fork()
        if pid == 0:
            try:
                s.append_message({{"role": "user", "content": "child", "timestamp": 9}})
                print("child appended")
            except SessionLockedError:
                print("child locked out")
            sys.stdout.flush()
            sys.exit(0)  # a normal exit: finalizers run
        _, status = os.waitpid(pid, 0)
        s.append_message({{"role": "user", "content": "parent again", "timestamp": 4}})
        s.close()
        lines = open(s.path, "rb").read().splitlines()
        print("lines", len(lines), "status", status)
    """
    proc = _child(code)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert "child locked out" in proc.stdout, proc.stdout
    assert "lines 5 status 0" in proc.stdout, proc.stdout  # header + 3 + 1: nothing twice


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, "5", True])
def test_a_lock_timeout_that_is_not_a_finite_number_of_seconds_is_refused(tmp_path, bad):
    """``lock_timeout=nan`` used to spin at 100% CPU forever; it is refused up front, as the
    CLI refuses ``--lock-timeout nan``."""
    s = Session.create("/p", session_dir=tmp_path)
    s.close()
    with pytest.raises((ValueError, TypeError)) as exc:
        Session.open(s.path, lock_timeout=bad)
    assert isinstance(exc.value, SessionError)
    with pytest.raises(SessionError):
        Session.create("/p", session_dir=tmp_path, lock_timeout=bad)
    assert Session.open(s.path, lock_timeout=0).session_id == s.session_id
    assert Session.open(s.path, lock_timeout=2.5).session_id == s.session_id


# ==== 26-30 ==========================================================================


@pytest.mark.parametrize("rest", [b"", b"\n" + _msg("a", None)])
def test_a_file_starting_with_a_bom_says_so(tmp_path, rest):
    """Issue 11 item 30: a BOM before the header (one line, or more) is refused as Pi refuses
    it, and the error names the BOM instead of "no JSON value in 1 lines"."""
    from sessiontree import SessionFormatError

    p = tmp_path / "s.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + HEADER.rstrip(b"\n") + rest)
    with pytest.raises(SessionFormatError, match=r"UTF-8 BOM at byte 0 \(Pi rejects it\)") as info:
        Session.open(p)
    assert "not a valid pi session" in str(info.value)
    corpus = Path(__file__).resolve().parent.parent / "corpus" / "pi-generated" / "edge_bom.jsonl"
    with pytest.raises(SessionFormatError, match="UTF-8 BOM at byte 0"):
        Session.open(corpus)


def test_open_expands_a_leading_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "s.jsonl").write_bytes(HEADER + _msg("a", None))
    s = Session.open("~/s.jsonl")
    assert s.path == tmp_path / "s.jsonl" and s.leaf_id == "a"
    assert Session.open("~/s.jsonl", session_dir="~").session_dir == tmp_path


def _assistant(**over):
    m = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "api": "openai-completions",
        "provider": "openai",
        "model": "m",
        "usage": {
            "input": 1,
            "output": 2,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 3,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": 1767225600000,
    }
    m.update(over)
    return m


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"content": "no role", "timestamp": 1}, "role"),
        ({"role": "robot", "content": "x", "timestamp": 1}, "role"),
        ({"role": "user", "content": float("nan"), "timestamp": 1}, "content"),
        (
            {"role": "user", "content": [{"type": "text", "text": "x", "n": float("inf")}], "timestamp": 1},
            "content[0].n",
        ),
        ({"role": "user", "content": "x", "timestamp": "2026-01-01T00:00:00Z"}, "timestamp"),
        ({"role": "user", "content": "x", "timestamp": 1.5}, "timestamp"),
        ({"role": "user", "content": "x"}, "timestamp"),
        (
            {
                "role": "user",
                "content": [{"type": "toolCall", "id": "a", "name": "b", "arguments": {}}],
                "timestamp": 1,
            },
            "content[0].type",
        ),
        ({"role": "user", "content": [{"type": "text"}], "timestamp": 1}, "content[0].text"),
        (_assistant(content="a string"), "content"),
        (_assistant(stopReason="pending"), "stopReason"),
        (_assistant(usage={"input": 1}), "usage"),
        (
            {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [], "isError": "no", "timestamp": 1},
            "isError",
        ),
        (
            {
                "role": "bashExecution",
                "command": "ls",
                "output": "",
                "exitCode": "0",
                "cancelled": False,
                "truncated": False,
                "timestamp": 1,
            },
            "exitCode",
        ),
        ({"role": "custom", "customType": "x", "content": "c", "timestamp": 1}, "display"),
    ],
)
def test_strict_append_message_checks_pis_message_shapes(tmp_path, bad, field):
    """Issue 11 item 29: ``strict=True`` refuses what Pi's types do not allow, naming the
    field; nothing is appended. Non-strict appends stay as permissive as Pi's."""
    import datetime
    from sessiontree import MessageShapeError

    s = Session.create("/p", session_dir=tmp_path)
    with pytest.raises(MessageShapeError, match=field.replace("[", r"\[").replace("]", r"\]")):
        s.append_message(bad, strict=True)
    assert len(s) == 0
    with pytest.raises(MessageShapeError, match="datetime"):
        s.append_message(
            {"role": "user", "content": "x", "timestamp": 1, "when": datetime.datetime(2026, 1, 1)}, strict=True
        )
    assert len(Session.open(s.path)) == 0


def test_strict_append_message_accepts_pis_own_shapes(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    good = [
        {"role": "user", "content": "hi", "timestamp": 1},
        {
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}],
            "timestamp": 2,
        },
        _assistant(
            content=[
                {"type": "thinking", "thinking": "t"},
                {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "x"}},
            ],
            stopReason="toolUse",
        ),
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [{"type": "text", "text": "x"}],
            "isError": False,
            "timestamp": 3,
        },
        {
            "role": "bashExecution",
            "command": "ls",
            "output": "a",
            "exitCode": None,
            "cancelled": False,
            "truncated": False,
            "timestamp": 4,
        },
        {"role": "custom", "customType": "note", "content": "c", "display": True, "timestamp": 5},
        {"role": "system", "content": "be brief", "timestamp": 6},
    ]
    for m in good:
        s.append_message(m, strict=True)
    assert len(s) == len(good)
    # outside strict mode, anything JSON can hold is still appended (as Pi does)
    s.append_message({"content": "no role", "timestamp": "later"})
    assert len(s) == len(good) + 1


def test_install_hints_name_the_extra_for_pypi_and_for_a_source_checkout():
    """Issue 11 item 27: ``pip install 'sessiontree[openai]'`` fails from a source checkout;
    every hint says both forms, and the README names the extras, variables and exceptions."""
    from sessiontree.summarizers import anthropic, openai_compat
    from sessiontree import token_counter
    import inspect

    for module, extra in ((openai_compat, "openai"), (anthropic, "anthropic"), (token_counter, "tiktoken")):
        text = inspect.getsource(module)
        assert f"pip install 'sessiontree[{extra}]'" in text and f"pip install '.[{extra}]'" in text, extra
    readme = (Path(__file__).resolve().parent.parent.parent / "README.md").read_text()
    for needle in (
        "pip install 'sessiontree[openai]'",
        "pip install '.[openai]'",
        "pip install '.[anthropic]'",
        "pip install '.[tiktoken]'",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "PI_CODING_AGENT_DIR",
        "PI_CODING_AGENT_SESSION_DIR",
        "TIKTOKEN_CACHE_DIR",
        "SessionFormatError",
        "SessionFileChangedError",
        "SessionLockedError",
        "SummarizerError",
        "MessageShapeError",
    ):
        assert needle in readme, needle
    import sessiontree

    for name in (
        "SessionFormatError",
        "SessionFileChangedError",
        "SessionLockedError",
        "SessionCycleError",
        "EntryNotFoundError",
        "SessionArgumentError",
        "MessageShapeError",
    ):
        assert issubclass(getattr(sessiontree, name), sessiontree.SessionError), name
