"""Issue 19 items 9-12: where the HTML export writes, and how.

9: the export refuses to write over the session it exports (``-o`` set to it, a session named
``*.html`` with the default output, RPC ``export_html`` at the served file): exit 2 / an RPC
error, the session unchanged. 10: never over a FIFO, a device, a directory or through a
symbolic link. 11: the page is never more readable than the session or the page it replaces.
12: the export writes through ``session.atomic_writer`` (temp ``O_EXCL``, fsync, rename).

Char devices are made with ``mknod`` in the test's folder (as root), never ``/dev/null`` itself.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from sessiontree import OutputPathError, Session
from sessiontree.cli import main as cli_main
from sessiontree.rpc import RpcServer

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "session.jsonl"


def _copy(tmp: Path, name: str = "s.jsonl") -> Path:
    p = tmp / name
    shutil.copyfile(EXAMPLE, p)
    return p


def _mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def _tmps(folder: Path) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(".tmp")]


# ---- 9: never over the session itself ------------------------------------------------


def test_cli_refuses_an_output_that_is_the_session(tmp_path, capsys):
    src = _copy(tmp_path)
    before = src.read_bytes()
    assert cli_main(["export-html", str(src), "-o", str(src)]) == 2
    err = capsys.readouterr().err
    assert "the file being read" in err and err.count("\n") == 1
    assert src.read_bytes() == before and _tmps(tmp_path) == []


def test_cli_refuses_a_session_named_html_with_the_default_output(tmp_path, capsys):
    src = _copy(tmp_path, "s.html")
    before = src.read_bytes()
    assert cli_main(["export-html", str(src)]) == 2
    assert "the file being read" in capsys.readouterr().err
    assert src.read_bytes() == before and _tmps(tmp_path) == []


def test_cli_refuses_a_hard_link_to_the_session(tmp_path, capsys):
    src = _copy(tmp_path)
    before = src.read_bytes()
    os.link(src, tmp_path / "v.html")
    assert cli_main(["export-html", str(src), "-o", str(tmp_path / "v.html")]) == 2
    assert src.read_bytes() == before


def test_the_api_refuses_the_session_itself(tmp_path):
    src = _copy(tmp_path)
    before = src.read_bytes()
    s = Session.open(src)
    with pytest.raises(OutputPathError):
        s.export_html(src)
    assert src.read_bytes() == before


def test_rpc_export_html_at_the_served_file_is_an_error(tmp_path):
    src = _copy(tmp_path)
    before = src.read_bytes()
    server = RpcServer(Session.open(src))
    r = server.handle({"type": "export_html", "id": "x", "outputPath": str(src)})
    assert r["success"] is False and "the file being read" in r["error"], r
    assert server.handle({"type": "get_state"})["success"]
    assert src.read_bytes() == before and _tmps(tmp_path) == []


# ---- 10: only a regular file or a new path ----------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a char device needs root")
def test_rpc_export_html_over_a_char_device_is_an_error_and_the_device_stays(tmp_path):
    # what replaced /dev/null on a server running as root: a copy of it here
    dev = tmp_path / "null"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    server = RpcServer(Session.open(_copy(tmp_path)))
    r = server.handle({"type": "export_html", "id": "x", "outputPath": str(dev)})
    assert r["success"] is False and "not a regular file" in r["error"], r
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert _tmps(tmp_path) == []


def test_cli_export_over_a_fifo_or_through_a_symlink_is_exit_2(tmp_path, capsys):
    src = _copy(tmp_path)
    fifo = tmp_path / "f.html"
    os.mkfifo(fifo)
    assert cli_main(["export-html", str(src), "-o", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep")
    link = tmp_path / "l.html"
    link.symlink_to(victim)
    assert cli_main(["export-html", str(src), "-o", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert victim.read_bytes() == b"keep" and link.is_symlink()
    assert _tmps(tmp_path) == []


# ---- 11: modes -----------------------------------------------------------------------------


def test_a_0600_session_exports_to_a_0600_page(tmp_path):
    src = _copy(tmp_path)
    os.chmod(src, 0o600)
    out = Session.open(src).export_html(tmp_path / "p.html")
    assert _mode(out) == 0o600


def test_re_exporting_over_a_0600_page_keeps_it_0600(tmp_path):
    src = _copy(tmp_path)
    os.chmod(src, 0o644)
    out = tmp_path / "p.html"
    out.write_bytes(b"old page")
    os.chmod(out, 0o600)
    assert cli_main(["export-html", str(src), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"<!DOCTYPE html>") and _mode(out) == 0o600


def test_an_in_memory_session_exports_with_the_umask(tmp_path):
    s = Session.in_memory()
    s.append_message({"role": "user", "content": "hi", "timestamp": 1})
    old = os.umask(0o077)
    try:
        out = s.export_html(tmp_path / "m.html")
    finally:
        os.umask(old)
    assert _mode(out) == 0o600


# ---- 12: the package's atomic write -----------------------------------------------------


def test_the_export_writes_through_the_packages_atomic_writer(tmp_path, monkeypatch):
    from sessiontree import session as session_mod
    from sessiontree import writer

    calls = []
    real = writer.atomic_writer
    assert session_mod.atomic_writer is real  # still importable from the facade

    def spy(path, **kw):
        calls.append((Path(path), kw))
        return real(path, **kw)

    monkeypatch.setattr(writer, "atomic_writer", spy)
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        return real_fsync(fd)

    monkeypatch.setattr(session_mod.os, "fsync", fsync)
    src = _copy(tmp_path)
    out = Session.open(src).export_html(tmp_path / "p.html")
    assert [c[0] for c in calls] == [out]
    kw = calls[0][1]
    assert kw["like"] is not None and kw["source"] is not None
    assert synced == [False, True]


def test_a_failed_export_leaves_the_old_page_and_no_temp(tmp_path, monkeypatch):
    from sessiontree import html

    src = _copy(tmp_path)
    out = tmp_path / "p.html"
    out.write_bytes(b"old page")

    def boom(*a, **k):
        raise RuntimeError("gzip failed")

    monkeypatch.setattr(html, "_gz_b64", boom)
    with pytest.raises(RuntimeError):
        Session.open(src).export_html(out)
    assert out.read_bytes() == b"old page" and _tmps(tmp_path) == []
