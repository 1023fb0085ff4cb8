"""Issue 19 items 10-12: ``session.atomic_write`` is the one place every output file is written.

Its rules, each tested here (each test failed before the rule existed):

* the target is a new path or a regular file; a FIFO, a device, a directory, a socket or a
  symbolic link at the target is refused with ``OutputPathError`` and left untouched;
* ``source=`` (the file being read) is never the target, by device and inode (same path, a
  hard link);
* the new file is never more readable than ``like=`` (the source's stat) nor than the file it
  replaces, and a new path gets the umask;
* the temp file is created ``O_EXCL`` beside the target, and a failure leaves nothing behind;
* ``atomic_writer`` is the same write as a file object a producer streams into.

Char devices are made with ``mknod`` in the test's folder (as root): never ``/dev/null`` itself.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from sessiontree import OutputPathError, SessionTreeError
from sessiontree.session import atomic_write, atomic_writer


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def _leftovers(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


def test_the_error_is_typed_and_an_oserror():
    assert issubclass(OutputPathError, SessionTreeError) and issubclass(OutputPathError, OSError)


def test_a_new_path_and_a_regular_file_are_written(tmp_path):
    out = tmp_path / "a.txt"
    atomic_write(out, [b"one ", b"two"])
    assert out.read_bytes() == b"one two"
    atomic_write(out, iter([b"three"]))
    assert out.read_bytes() == b"three"
    assert _leftovers(tmp_path) == []


def test_a_fifo_at_the_target_is_refused_and_stays_a_fifo(tmp_path):
    out = tmp_path / "fifo"
    os.mkfifo(out)
    with pytest.raises(OutputPathError, match="not a regular file"):
        atomic_write(out, [b"x"])
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a char device needs root")
def test_a_char_device_at_the_target_is_refused_and_stays_a_device(tmp_path):
    # a copy of /dev/null (major 1, minor 3) in the test's folder: the real one is never touched
    out = tmp_path / "null"
    os.mknod(out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(OutputPathError, match="not a regular file"):
        atomic_write(out, [b"x"])
    st = os.lstat(out)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert _leftovers(tmp_path) == []


def test_a_directory_and_a_socket_at_the_target_are_refused(tmp_path):
    import socket

    d = tmp_path / "dir"
    d.mkdir()
    with pytest.raises(OutputPathError, match="not a regular file"):
        atomic_write(d, [b"x"])
    assert d.is_dir()
    sp = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(sp))
        with pytest.raises(OutputPathError, match="not a regular file"):
            atomic_write(sp, [b"x"])
        assert stat.S_ISSOCK(os.lstat(sp).st_mode)
    finally:
        s.close()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("to", ["file", "dangling", "fifo"])
def test_a_symlink_at_the_target_is_refused_and_nothing_is_written_through_it(tmp_path, to):
    victim = tmp_path / "victim"
    if to == "file":
        victim.write_bytes(b"keep me")
    elif to == "fifo":
        os.mkfifo(victim)
    link = tmp_path / "out.html"
    link.symlink_to(victim)
    with pytest.raises(OutputPathError, match="symbolic link"):
        atomic_write(link, [b"x"])
    assert link.is_symlink() and os.readlink(link) == str(victim)
    if to == "file":
        assert victim.read_bytes() == b"keep me"
    elif to == "dangling":
        assert not victim.exists()
    assert _leftovers(tmp_path) == []


def test_the_source_itself_is_refused_by_path_and_by_hard_link(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"precious\n")
    hard = tmp_path / "hard.html"
    os.link(src, hard)
    for source in (src, os.stat(src)):
        for target in (src, hard):
            with pytest.raises(OutputPathError, match="the file being read"):
                atomic_write(target, [b"x"], source=source)
    assert src.read_bytes() == b"precious\n" and os.stat(src).st_nlink == 2
    assert _leftovers(tmp_path) == []
    # another file is fine
    atomic_write(tmp_path / "other.html", [b"x"], source=src)


def test_the_new_file_is_no_more_readable_than_like(tmp_path):
    src = tmp_path / "s"
    src.write_bytes(b"secret")
    os.chmod(src, 0o600)
    out = tmp_path / "page.html"
    atomic_write(out, [b"x"], like=os.stat(src))
    assert _mode(out) == 0o600


def test_the_new_file_is_no_more_readable_than_the_file_it_replaces(tmp_path):
    out = tmp_path / "page.html"
    out.write_bytes(b"old")
    os.chmod(out, 0o600)
    atomic_write(out, [b"new"])  # no like: the replaced file's mode still bounds it
    assert out.read_bytes() == b"new" and _mode(out) == 0o600
    src = tmp_path / "s"
    src.write_bytes(b"")
    os.chmod(src, 0o644)
    atomic_write(out, [b"newer"], like=os.stat(src))  # a wider source does not widen it
    assert _mode(out) == 0o600
    os.chmod(out, 0o640)
    os.chmod(src, 0o604)
    atomic_write(out, [b"newest"], like=os.stat(src))  # both bound it: 0o640 & 0o604
    assert _mode(out) == 0o600


def test_a_new_path_gets_the_umask(tmp_path):
    src = tmp_path / "s"
    src.write_bytes(b"")
    os.chmod(src, 0o666)
    old = os.umask(0o027)
    try:
        atomic_write(tmp_path / "a", [b"x"])
        atomic_write(tmp_path / "b", [b"x"], like=os.stat(src))
    finally:
        os.umask(old)
    assert _mode(tmp_path / "a") == 0o640
    assert _mode(tmp_path / "b") == 0o640


def test_replacing_keeps_the_replaced_files_mode_exactly(tmp_path):
    # the migration rewrite: like is the file it replaces, whatever the umask
    out = tmp_path / "s.jsonl"
    out.write_bytes(b"v1")
    os.chmod(out, 0o664)
    old = os.umask(0o077)
    try:
        atomic_write(out, [b"v3"], like=os.stat(out))
    finally:
        os.umask(old)
    assert _mode(out) == 0o664


def test_a_failed_producer_leaves_the_old_file_and_no_temp(tmp_path):
    out = tmp_path / "page.html"
    out.write_bytes(b"old page")

    def chunks():
        yield b"half"
        raise RuntimeError("producer died")

    with pytest.raises(RuntimeError):
        atomic_write(out, chunks())
    assert out.read_bytes() == b"old page"
    assert _leftovers(tmp_path) == []


def test_the_writer_object_streams_and_commits_only_on_success(tmp_path):
    out = tmp_path / "w.html"
    with atomic_writer(out) as fh:
        fh.write(b"a")
        fh.write(memoryview(b"bc"))
        assert not out.exists()  # nothing at the target until the rename
        assert len(_leftovers(tmp_path)) == 1
    assert out.read_bytes() == b"abc"
    with pytest.raises(ValueError):
        with atomic_writer(out) as fh:
            fh.write(b"zzz")
            raise ValueError("stop")
    assert out.read_bytes() == b"abc"
    assert _leftovers(tmp_path) == []


def test_a_target_turned_into_a_fifo_while_writing_is_not_replaced(tmp_path):
    # the check runs again just before the rename
    out = tmp_path / "page.html"
    with pytest.raises(OutputPathError, match="not a regular file"):
        with atomic_writer(out) as fh:
            fh.write(b"x")
            os.mkfifo(out)
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
    assert _leftovers(tmp_path) == []


def test_the_source_appearing_at_the_target_while_writing_is_not_replaced(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"precious\n")
    out = tmp_path / "page.html"
    with pytest.raises(OutputPathError, match="the file being read"):
        with atomic_writer(out, source=src) as fh:
            fh.write(b"x")
            os.link(src, out)
    assert src.read_bytes() == b"precious\n"
    assert _leftovers(tmp_path) == []


def test_the_temp_file_is_exclusive_and_beside_the_target(tmp_path, monkeypatch):
    from sessiontree import session as session_mod

    seen = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *a, **k):
        if str(path).endswith(".tmp"):
            seen.append((Path(path), flags))
        return real_open(path, flags, mode, *a, **k)

    monkeypatch.setattr(session_mod.os, "open", spy)
    atomic_write(tmp_path / "t.html", [b"x"])
    assert seen, "no temp file opened"
    path, flags = seen[0]
    assert path.parent == tmp_path and path.name.startswith(".t.html.")
    assert flags & os.O_EXCL and flags & os.O_CREAT and flags & os.O_NOFOLLOW


def test_the_file_and_the_folder_are_fsynced(tmp_path, monkeypatch):
    from sessiontree import session as session_mod

    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        return real(fd)

    monkeypatch.setattr(session_mod.os, "fsync", spy)
    atomic_write(tmp_path / "f", [b"x"])
    assert synced == [False, True]  # the file before the rename, the folder after


def test_forks_and_clones_of_a_private_session_stay_private(tmp_path):
    # a fork or a clone holds the source's entries: no more readable than the source
    from sessiontree import Session

    s = Session.create("/p", session_dir=tmp_path)
    s.append_message({"role": "user", "content": "secret", "timestamp": 1})
    s.append_message({"role": "assistant", "content": [{"type": "text", "text": "ok"}], "timestamp": 2})
    s.close()
    os.chmod(s.path, 0o600)
    fork = Session.fork_from(s.path, "/p", session_dir=tmp_path / "forks")
    assert _mode(fork.path) == 0o600
    src = Session.open(s.path)
    clone = src.create_branched_session(src.leaf_id)
    assert clone.path != src.path and _mode(clone.path) == 0o600
    os.chmod(s.path, 0o644)
    old = os.umask(0o022)
    try:
        assert _mode(Session.fork_from(s.path, "/p", session_dir=tmp_path / "f2").path) == 0o644
    finally:
        os.umask(old)


def test_special_bits_stay_only_on_a_rewrite_of_the_file_itself(tmp_path):
    out = tmp_path / "f"
    out.write_bytes(b"x")
    os.chmod(out, 0o4755)
    atomic_write(out, [b"rewritten"], like=os.stat(out))  # a migration: the file itself
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o4755
    atomic_write(out, [b"a page"])  # something else written over it
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o755


def test_mode_gives_the_new_file_exactly_those_bits(tmp_path):
    """``mode=``: the bits of the new file whatever the umask or the file it replaces (a
    private copy is 0600), still narrowed to ``like``'s; the temp file is never wider."""
    old = os.umask(0)
    try:
        new = tmp_path / "new"
        atomic_write(new, [b"x"], mode=0o600)
        assert _mode(new) == 0o600 and new.read_bytes() == b"x"
        wide = tmp_path / "wide"
        wide.write_bytes(b"old")
        os.chmod(wide, 0o666)
        atomic_write(wide, [b"y"], mode=0o600)
        assert _mode(wide) == 0o600 and wide.read_bytes() == b"y"
        like = tmp_path / "like"
        like.write_bytes(b"")
        os.chmod(like, 0o640)
        atomic_write(new, [b"z"], mode=0o644, like=os.stat(like))
        assert _mode(new) == 0o640
    finally:
        os.umask(old)


def test_the_temp_file_of_a_mode_is_created_private(tmp_path, monkeypatch):
    seen = []
    real_open = os.open

    def spy(path, flags, mode=0o777, *a, **k):
        if str(path).endswith(".tmp"):
            seen.append(mode)
        return real_open(path, flags, mode, *a, **k)

    monkeypatch.setattr(os, "open", spy)
    atomic_write(tmp_path / "f", [b"x"], mode=0o644)
    assert seen == [0o600] and _mode(tmp_path / "f") == 0o644  # the bits asked for, umask or not


@pytest.mark.parametrize("bad", [-1, 0o1000, 0o4755, True, 1.5, "600"])
def test_a_mode_that_is_not_permission_bits_is_refused(tmp_path, bad):
    with pytest.raises(ValueError):
        atomic_write(tmp_path / "f", [b"x"], mode=bad)
    assert list(tmp_path.iterdir()) == []


def test_fsync_false_skips_the_fsyncs_and_still_renames_into_place(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd))
    atomic_write(tmp_path / "f", [b"x"], fsync=False)
    assert calls == [] and (tmp_path / "f").read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]
