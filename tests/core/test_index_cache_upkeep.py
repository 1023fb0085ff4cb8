"""The index cache's upkeep: eviction on save (files gone or rewritten, least recently used past
the cap), an unusable setting meaning no cache (one line on stderr, never a failed open), and
``cache clear`` removing only files the cache itself would load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree import index_cache as ic


@pytest.fixture(autouse=True)
def _save_everything(monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")
    monkeypatch.delenv("SESSIONTREE_INDEX_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_EVICT_SECONDS", "0")  # every save evicts


def _session(n: int, sid: str = "s1") -> bytes:
    out: list[dict] = [
        {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    ]
    parent = None
    for i in range(n):
        eid = f"{sid[:2]}{i:06x}"
        out.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user" if i % 2 == 0 else "assistant", "content": f"text {i}"},
            }
        )
        parent = eid
    return b"".join(orjson.dumps(x) + b"\n" for x in out)


def _indexes(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".stidx"))


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True, env=env, timeout=120
    )


# ---------------------------------------------------------------- eviction


def test_six_runs_on_one_rewritten_session_leave_one_index(tmp_path):
    """Each run follows a rewrite by rename (as ``compact``, ``scrub --in-place`` or an editor
    do: a new inode each time); the indexes of the old inodes are evicted on the next save."""
    folder = tmp_path / "cache"
    p = tmp_path / "s.jsonl"
    for run in range(6):
        q = tmp_path / "new.jsonl"
        q.write_bytes(_session(200 + run))
        os.replace(q, p)
        s = Session.open(p, index_cache=folder)  # a run: what every command's open does
        assert s.index_cache_state()[0] == "saved" and len(s) == 200 + run
    assert _indexes(folder) == [_name(p)]
    assert Session.open(p, index_cache=folder).index_cache_state()[0] == "warm"


def test_indexes_of_deleted_files_are_evicted_on_save(tmp_path):
    folder = tmp_path / "cache"
    gone = [tmp_path / f"gone{i}.jsonl" for i in range(3)]
    for i, g in enumerate(gone):
        g.write_bytes(_session(100, sid=f"g{i}"))
        assert Session.open(g, index_cache=folder).index_cache_state()[0] == "saved"
    assert len(_indexes(folder)) == 3
    for g in gone:
        g.unlink()
    live = tmp_path / "live.jsonl"
    live.write_bytes(_session(100, sid="lv"))
    assert Session.open(live, index_cache=folder).index_cache_state()[0] == "saved"
    st = live.stat()
    assert _indexes(folder) == [f"{st.st_dev:016x}-{st.st_ino:016x}.stidx"]


def test_an_index_rewritten_in_place_at_the_same_inode_is_replaced_not_added(tmp_path):
    folder = tmp_path / "cache"
    p = tmp_path / "s.jsonl"
    p.write_bytes(_session(300))
    Session.open(p, index_cache=folder)
    with open(p, "r+b") as f:  # Pi's rewrite: truncate and write, the same inode
        f.truncate(0)
        f.write(_session(120, sid="s2"))
    s = Session.open(p, index_cache=folder)
    assert s.index_cache_state()[0] == "saved" and len(s) == 120
    assert len(_indexes(folder)) == 1


def test_past_the_cap_the_least_recently_used_indexes_go(tmp_path):
    folder = tmp_path / "cache"
    files = [tmp_path / f"s{i}.jsonl" for i in range(3)]
    for i, f in enumerate(files):
        f.write_bytes(_session(400, sid=f"s{i}"))
    for f in files[:2]:
        assert Session.open(f, index_cache=folder).index_cache_state()[0] == "saved"
    one = max(os.path.getsize(folder / n) for n in _indexes(folder))
    now = os.path.getmtime(folder / _name(files[0]))
    os.utime(folder / _name(files[0]), (now - 100, now - 100))
    os.utime(folder / _name(files[1]), (now - 50, now - 50))
    # s0 is used again (a warm load counts as a use): s1 is now the least recently used
    assert Session.open(files[0], index_cache=folder).index_cache_state()[0] == "warm"
    cap = ic.CacheSettings(folder=folder, max_bytes=int(one * 2.5))  # room for two
    assert Session.open(files[2], index_cache=cap).index_cache_state()[0] == "saved"
    assert _indexes(folder) == sorted([_name(files[0]), _name(files[2])])
    # the environment's cap, in a size syntax: the index just saved is kept even when alone
    # it is larger than the cap
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(folder), SESSIONTREE_INDEX_CACHE_MAX_BYTES="1K")
    assert _cli("info", str(files[1]), env=env).returncode == 0
    assert _indexes(folder) == [_name(files[1])]


def _name(p: Path) -> str:
    st = p.stat()
    return f"{st.st_dev:016x}-{st.st_ino:016x}.stidx"


def test_read_only_commands_say_in_help_that_they_save_an_index_and_how_to_stop_it():
    import argparse

    from sessiontree.cli.app import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for cmd in ("info", "tree", "branch", "context", "entries", "validate"):
        out = " ".join(sub.choices[cmd].format_help().split())
        assert "saves the file's index" in out and "SESSIONTREE_INDEX_CACHE=off" in out, cmd
        assert "MB for a 200 MB session" in out and "SESSIONTREE_INDEX_CACHE_MAX_BYTES" in out, cmd


# ---------------------------------------------------------------- an unusable setting


def _unusable_cases(tmp_path: Path) -> dict[str, dict[str, str | None]]:
    a_file = tmp_path / "a-file"
    a_file.write_bytes(b"x")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    cases: dict[str, dict[str, str | None]] = {
        "no_such_user": {"SESSIONTREE_INDEX_CACHE": "~nosuchuser-st/x"},
        "a_file": {"SESSIONTREE_INDEX_CACHE": str(a_file)},
        "under_a_file": {"SESSIONTREE_INDEX_CACHE": str(a_file / "cache")},
        "missing_home": {"SESSIONTREE_INDEX_CACHE": None, "XDG_CACHE_HOME": None, "HOME": str(tmp_path / "nohome")},
        "empty_home": {"SESSIONTREE_INDEX_CACHE": None, "XDG_CACHE_HOME": None, "HOME": ""},
        "tilde_in_missing_home": {"SESSIONTREE_INDEX_CACHE": "~/x", "HOME": str(tmp_path / "nohome")},
    }
    if os.geteuid() != 0:  # root may create a folder anywhere
        cases["cannot_create"] = {"SESSIONTREE_INDEX_CACHE": str(locked / "cache")}
    else:
        cases["cannot_create"] = {"SESSIONTREE_INDEX_CACHE": "/proc/sessiontree-cache"}
    return cases


@pytest.mark.parametrize(
    "case",
    ["no_such_user", "a_file", "under_a_file", "missing_home", "empty_home", "tilde_in_missing_home", "cannot_create"],
)
def test_an_unusable_cache_setting_means_no_cache_and_one_line(tmp_path, case):
    env_change = _unusable_cases(tmp_path)[case]
    p = tmp_path / "s.jsonl"
    p.write_bytes(_session(300))
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE_MIN_BYTES="0")
    for k, v in env_change.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    before = sorted(os.listdir(tmp_path))
    code = (
        "from sessiontree import Session, list_sessions\n"
        f"s = Session.open({str(p)!r})\n"
        "print(len(s), s.index_cache_state()[0])\n"
        f"print(len(list_sessions(session_dir={str(tmp_path)!r})))\n"
        f"print(len(Session.open({str(p)!r})))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["300", "off", "1", "300"]
    assert len(r.stderr.splitlines()) <= 1, r.stderr
    assert "index cache off" in r.stderr
    assert sorted(os.listdir(tmp_path)) == before  # no home folder or cache made on the way
    assert (tmp_path / "a-file").read_bytes() == b"x"


# ---------------------------------------------------------------- cache clear


def _plant_user_files(d: Path) -> dict[str, bytes]:
    """Files with our suffixes that the cache did not write (a user's, in a shared folder)."""
    files = {
        "0000000000000001-0000000000000002.stidx": b"my own data, not an index",
        "notes.row": b"a user's row file",
        "0000000000000001-0000000000000002.list.row": b"0123\n{}",
        ".0000000000000001-0000000000000002.stidx.1.2.3.tmp": b"a user's temp",
        "mine.stidx": b"STIDX\0\r\n" + b"\0" * 200,
    }
    for n, b in files.items():
        (d / n).write_bytes(b)
    return files


def test_cache_clear_never_deletes_through_a_symlinked_or_shared_folder(tmp_path, monkeypatch):
    p = tmp_path / "s.jsonl"
    p.write_bytes(_session(200))
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    assert Session.open(p, index_cache=real).index_cache_state()[0] == "saved"
    planted = _plant_user_files(real)
    ours = _indexes(real)
    link = tmp_path / "link"
    os.symlink(real, link)
    for via in (link, str(link) + "/"):
        monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(via))
        assert ic.clear() == 0
        assert ic.info().files == 0
    assert set(planted) | set(ours) <= set(os.listdir(real))
    r = _cli("cache", "clear", env=dict(os.environ, SESSIONTREE_INDEX_CACHE=str(link)))
    assert r.returncode == 0 and "removed 0 files" in r.stdout
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    planted = _plant_user_files(shared)
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(shared))
    assert ic.clear() == 0
    assert {n: (shared / n).read_bytes() for n in planted} == planted


def test_cache_clear_removes_only_files_the_cache_would_load(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(folder))
    from sessiontree import list_sessions

    sd = tmp_path / "sessions"
    sd.mkdir()
    for i in range(3):
        (sd / f"s{i}.jsonl").write_bytes(_session(100 + i, sid=f"s{i}"))
        Session.open(sd / f"s{i}.jsonl")
    list_sessions(session_dir=sd)  # saves a row per file
    rows = [n for n in os.listdir(folder) if n.endswith(".row")]
    assert len(rows) == 3
    planted = _plant_user_files(folder)
    outside = tmp_path / "outside.stidx"
    outside.write_bytes(b"keep me")
    os.symlink(outside, folder / "0000000000000003-0000000000000004.stidx")
    inf = ic.info()
    assert inf.files == 6
    assert ic.clear() == 6
    left = set(os.listdir(folder))
    assert left == set(planted) | {"0000000000000003-0000000000000004.stidx"}
    assert {n: (folder / n).read_bytes() for n in planted} == planted
    assert outside.read_bytes() == b"keep me"


def test_one_process_evicts_at_most_once_per_interval(tmp_path):
    """A bulk job saving thousands of indexes does not read the whole folder on every save: a
    process evicts on its first save, then at most once per SESSIONTREE_INDEX_CACHE_EVICT_SECONDS."""
    folder = tmp_path / "cache"
    code = (
        "import os, sys\n"
        "from sessiontree import Session\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_index_cache_upkeep import _session\n"
        "ps = [os.path.join(sys.argv[2], f'gone{i}.jsonl') for i in range(3)]\n"
        "for i, p in enumerate(ps):  # three files at once: three inodes\n"
        "    open(p, 'wb').write(_session(100, sid=f'g{i}'))\n"
        "for i, p in enumerate(ps):\n"
        "    if i == 2:  # the first two are gone when the third is saved\n"
        "        os.unlink(ps[0]); os.unlink(ps[1])\n"
        "    assert Session.open(p, index_cache=sys.argv[3]).index_cache_state()[0] == 'saved'\n"
    )
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE_MIN_BYTES="0", SESSIONTREE_INDEX_CACHE_EVICT_SECONDS="3600")
    here = str(Path(__file__).resolve().parent)
    r = subprocess.run([sys.executable, "-c", code, here, str(tmp_path), str(folder)], env=env, capture_output=True)
    assert r.returncode == 0, r.stderr
    assert len(_indexes(folder)) == 3  # the later saves of that process did not evict
    live = tmp_path / "live.jsonl"
    live.write_bytes(_session(100, sid="lv"))
    code2 = f"from sessiontree import Session; Session.open({str(live)!r}, index_cache={str(folder)!r})"
    assert subprocess.run([sys.executable, "-c", code2], env=env).returncode == 0
    kept = sorted([_name(live), _name(tmp_path / "gone2.jsonl")])
    assert _indexes(folder) == kept  # a new process's first save did (gone0 and gone1 went)


@pytest.mark.parametrize("body", [b"[]", b"3", b'"row"', b"null"])
def test_a_saved_row_whose_checked_body_is_not_an_object_is_not_ours_and_not_loaded(tmp_path, monkeypatch, body):
    # a file under a row's name with a right checksum line but a body that is not a JSON object
    # (our own cache files are hostile input too): info() and clear() pass over it, load_row()
    # answers None; none of them raises
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(folder))
    src = tmp_path / "s.jsonl"
    src.write_bytes(_session(10))
    st = os.stat(src)
    name = ic._row_name(st, "info")
    (folder / name).write_bytes(ic._row_sum(body) + b"\n" + body)
    (folder / name).chmod(0o600)
    assert ic.info().files == 0
    assert ic.load_row("info", st, "k") is None
    assert ic.clear() == 0
    assert (folder / name).exists()
