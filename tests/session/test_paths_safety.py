"""Paths: sessiontree writes and reads only inside the session directory it was given.

Values read out of a file (the header's session id, cwd, ``parentSession``) never build a
path; ``parentSession`` is never opened (it names a FIFO below: opening it would hang);
listing reads only regular ``*.jsonl`` files directly inside the folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.paths import default_session_dir, encode_cwd, inside, sessions_root

EVIL_IDS = ["../../evil", "/etc/passwd", "..", ".", "a/b", "a\\b", "a\x00b", "C:evil", "x\n", ""]
EVIL_CWDS = [
    "../../x",
    "..",
    ".",
    "/",
    "",
    "a\x00b",
    "/a/../../b",
    "C:\\x",
    "x/../../../etc",
    "\\\\server\\share",
    "~",
    "/" + "x" * 300,
]


def _all_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def _header(sid: str, cwd: str, parent: str | None = None) -> dict:
    h = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": cwd}
    if parent is not None:
        h["parentSession"] = parent
    return h


def _write(path: Path, header: dict, n: int = 2) -> Path:
    rows = [header]
    parent = None
    for i in range(n):
        rows.append(
            {
                "type": "message",
                "id": f"m{i}",
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": f"hello {i}", "timestamp": 1},
            }
        )
        parent = f"m{i}"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _new_files(before: set[Path], root: Path) -> set[Path]:
    return _all_files(root) - before


@pytest.fixture
def sessions_env(tmp_path, monkeypatch):
    # the sessions root <agent>/sessions, grouped by cwd below it ($PI_CODING_AGENT_SESSION_DIR
    # would be the folder of the files itself: tests/session/test_session_dir_env.py)
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    return agent / "sessions"


# ==== file names and directory names ==========================================


@pytest.mark.parametrize("sid", EVIL_IDS)
def test_create_refuses_a_session_id_that_could_leave_the_directory(tmp_path, sid):
    d = tmp_path / "d"
    with pytest.raises(ValueError):
        Session.create("/p", session_dir=d, session_id=sid)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "a\\b", "..", ".", "", "a\x00b"])
def test_inside_refuses_names_that_leave_the_directory(tmp_path, name):
    with pytest.raises(ValueError):
        inside(tmp_path, name)


@pytest.mark.parametrize("cwd", EVIL_CWDS)
def test_the_default_session_dir_of_any_cwd_is_one_folder_under_the_root(sessions_env, cwd):
    d = default_session_dir(cwd)
    assert d.parent == sessions_root()
    name = encode_cwd(cwd)
    assert name.startswith("--") and name.endswith("--")
    assert "/" not in name and "\\" not in name and "\x00" not in name and name not in (".", "..")
    if len(name.encode()) > 255:  # longer than a file name may be (Pi fails the same way)
        with pytest.raises(OSError):
            Session.create(cwd)
        return
    s = Session.create(cwd)
    assert s.path.parent == d and s.path.resolve().is_relative_to(sessions_env.resolve())


# ==== values read from a file never build a path ================================


def test_a_hostile_header_never_decides_where_clones_and_forks_go(tmp_path, sessions_env):
    fifo = tmp_path / "parent.fifo"
    os.mkfifo(fifo)
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    src = _write(src_dir / "hostile.jsonl", _header("../../evil", "../../x", parent=str(fifo)))
    before = _all_files(tmp_path)
    code = textwrap.dedent(f"""
        import json, sys
        from sessiontree import Session, list_sessions
        s = Session.open({str(src)!r})
        assert s.session_id == "../../evil" and s.cwd == "../../x"
        clone = s.create_branched_session("m0")
        fork_here = Session.fork_from({str(src)!r}, s.cwd, session_dir={str(tmp_path / "forks")!r})
        fork_default = Session.fork_from({str(src)!r}, s.cwd)
        listed = list_sessions(session_dir={str(src_dir)!r})
        print(json.dumps([str(clone.path), str(fork_here.path), str(fork_default.path),
                          sorted(i.parent_session for i in listed)]))
    """)
    # in a child with a timeout: opening parentSession (a FIFO) would block forever
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PI_CODING_AGENT_DIR=str(sessions_env.parent)),
    )
    assert proc.returncode == 0, proc.stderr
    clone, fork_here, fork_default, parents = json.loads(proc.stdout)
    assert Path(clone).parent == src_dir
    assert Path(fork_here).parent == tmp_path / "forks"
    assert Path(fork_default).parent == sessions_env / encode_cwd("../../x")
    new = _new_files(before, tmp_path)
    assert new == {Path(clone), Path(fork_here), Path(fork_default)}
    for p in new:
        assert "evil" not in p.name  # named from a fresh id, not the header's
        assert Session.open(p).header["parentSession"] in (str(src), str(src))
    assert str(fifo) in parents  # reported as written, never opened


def test_parent_session_is_never_opened(tmp_path):
    fifo = tmp_path / "parent.fifo"
    os.mkfifo(fifo)
    d = tmp_path / "d"
    d.mkdir()
    p = _write(d / "child.jsonl", _header("c", "/p", parent=str(fifo)))
    code = textwrap.dedent(f"""
        from sessiontree import Session, list_sessions, cli
        s = Session.open({str(p)!r})
        s.get_tree(); s.build_context(); s.append_message({{"role": "user", "content": "x", "timestamp": 1}})
        s.close()
        Session.continue_recent("/p", session_dir={str(d)!r})
        list_sessions(session_dir={str(d)!r})
        for cmd in ("info", "tree", "branch", "context", "entries", "validate"):
            assert cli.main([cmd, {str(p)!r}]) in (0, 1)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_symlinked_session_file_clones_into_the_directory_it_was_opened_from(tmp_path):
    """Node's path.resolve is lexical: Pi's session dir is the folder of the path given,
    not of the link's target (fixed: Session.open used Path.resolve())."""
    real = tmp_path / "real"
    real.mkdir()
    d = tmp_path / "d"
    d.mkdir()
    target = _write(real / "t.jsonl", _header("t", "/p"))
    os.symlink(target, d / "link.jsonl")
    s = Session.open(d / "link.jsonl")
    assert s.session_dir == d
    before = _all_files(tmp_path)
    clone = s.create_branched_session("m1")
    assert clone.path.parent == d and _new_files(before, tmp_path) == {clone.path}


# ==== listing ======================================================================


def test_listing_reads_only_regular_jsonl_files_directly_in_the_folder(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    _write(d / "in.jsonl", _header("inside", "/p"))
    _write(outside / "o.jsonl", _header("outside", "/p"))
    (d / "sub").mkdir()
    _write(d / "sub" / "deep.jsonl", _header("deep", "/p"))  # not descended into
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "fifo", d / "fifo-link.jsonl")  # would hang if opened
    os.mkfifo(d / "fifo.jsonl")
    os.symlink("/dev/zero", d / "zero.jsonl")  # would never end if read
    os.symlink(outside, d / "dir.jsonl")
    os.symlink(d / "nowhere", d / "dangling.jsonl")
    os.symlink(d / "loop.jsonl", d / "loop.jsonl")
    os.symlink(outside / "o.jsonl", d / "link.jsonl")  # a link to a regular file: followed, as Pi does
    (d / "not-a-session.jsonl").write_bytes(b"\x1b[31m\x00garbage\n")
    (d / "empty.jsonl").write_bytes(b"")
    (d / "notes.txt").write_text(json.dumps(_header("txt", "/p")) + "\n")
    code = textwrap.dedent(f"""
        import json
        from sessiontree import Session, list_sessions
        listed = list_sessions(session_dir={str(d)!r})
        recent = Session.continue_recent("/p", session_dir={str(d)!r})
        print(json.dumps([sorted(i.path.name for i in listed), recent.path.name]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    names, recent = json.loads(proc.stdout)
    assert names == ["in.jsonl", "link.jsonl"]
    assert recent in names


@pytest.mark.parametrize("target", ["fifo", "zero", "dir", "loop"])
def test_opening_something_that_is_not_a_regular_file_never_blocks(tmp_path, target):
    p = tmp_path / "x.jsonl"
    if target == "fifo":
        os.mkfifo(p)
    elif target == "zero":
        os.symlink("/dev/zero", p)
    elif target == "dir":
        p.mkdir()
    else:
        os.symlink(p, p)
    code = textwrap.dedent(f"""
        from sessiontree import Session
        try:
            Session.open({str(p)!r})
        except (OSError, ValueError) as exc:
            print(type(exc).__name__)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() in ("SessionFormatError", "FileNotFoundError"), proc
