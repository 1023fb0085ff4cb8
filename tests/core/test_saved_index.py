"""The saved index (issue 17, items 1-3): warm answers equal cold answers, and a saved index
is hostile input like any file — damaged, foreign, planted or racing saves give the cold open's
answers, never a crash, a hang, a wrong answer or a write outside the cache folder.

Every test has its own cache folder (``tests/conftest.py``); here the size floor is lowered to
0 so that the small corpus files are saved too.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree import index_cache as ic
from sessiontree.errors import SessionError

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
CORPUS_FILES = sorted(CORPUS.rglob("*.jsonl"))


@pytest.fixture(autouse=True)
def _save_everything(monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")


def answers(s: Session) -> dict:
    """What a caller can ask of a session, as plain data (entries, tree, context, problems)."""
    out: dict = {
        "len": len(s),
        "count": s.entry_count(),
        "leaf": s.leaf_id,
        "header": s.file_header,  # (an empty file's in-memory header is new at every open)
        "name": s.session_name,
        "labels": s.labels,
        "problems": [(p.line, p.offset, p.kind, p.message) for p in s.problems],
        "indexed": s.indexed_bytes,
        "migrate": s.needs_migration,
        "entries": [(e.id, e.parent_id, e.type, e.line) for e in s.entries()],
        "table": repr(s.entry_table()),
        "tree": repr(s.tree_table()),
        "validate": s.validate(content=False),
    }
    for name, fn in (("context", lambda: s.build_context().messages), ("tree_nodes", lambda: repr(s.get_tree()))):
        try:
            out[name] = fn()
        except SessionError as e:  # the cold open raises the same
            out[name] = ("raises", type(e).__name__, str(e))
    if out["entries"]:
        out["new_id_known"] = (
            s.get_entry(out["entries"][-1][0]) is not None if isinstance(out["entries"][-1][0], str) else None
        )
    return out


def open_pair(p: Path) -> tuple[Session, Session]:
    cold = Session.open(p, index_cache=False)
    warm = Session.open(p)
    return cold, warm


def _write(p: Path, lines: list[dict]) -> None:
    p.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def _session(n: int, sid: str = "s1", word: str = "hello") -> list[dict]:
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
                "message": {"role": "user" if i % 2 == 0 else "assistant", "content": f"{word} {i}"},
            }
        )
        if i % 7 == 3:
            out.append(
                {
                    "type": "label",
                    "id": f"lb{i:06x}",
                    "parentId": eid,
                    "timestamp": "2026-01-01T00:00:02.000Z",
                    "targetId": eid,
                    "label": f"L{i}",
                }
            )
            eid = f"lb{i:06x}"
        parent = eid
    return out


def _cache_files(folder: Path | None = None) -> list[Path]:
    d = folder or ic.resolve()
    return sorted(d.glob("*.stidx")) if d and d.exists() else []


def _open_ok(p: Path) -> Session:
    """A session file opened cold, its index saved; its saved file's path."""
    s = Session.open(p)
    assert s.index_cache_state()[0] == "saved", s.index_cache_state()
    return s


# ---------------------------------------------------------------- warm equals cold


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_warm_answers_equal_cold_answers_on_every_corpus_file(path, tmp_path):
    p = tmp_path / path.name
    p.write_bytes(path.read_bytes())
    try:
        cold = Session.open(p, index_cache=False)
    except Exception as e:  # a file the open refuses is refused the same way warm
        with pytest.raises(type(e)):
            Session.open(p)
        with pytest.raises(type(e)):
            Session.open(p)
        return
    first = Session.open(p)  # cold, and saves when it may
    second = Session.open(p)
    state = second.index_cache_state()[0]
    if first.index_cache_state()[0] == "saved":
        assert state == "warm"
    assert answers(second) == answers(cold) == answers(first)
    before = p.read_bytes()
    assert p.read_bytes() == before  # opening never writes the session file


def test_warm_open_scans_only_what_was_appended_and_equals_cold(tmp_path):
    p = tmp_path / "s.jsonl"
    lines = _session(400)
    _write(p, lines[:300])
    _open_ok(p)
    with open(p, "ab") as f:
        f.write(b"".join(orjson.dumps(x) + b"\n" for x in lines[300:]))
    warm = Session.open(p)
    kind, covered, _ = warm.index_cache_state()
    assert kind == "warm" and 0 < covered < p.stat().st_size
    assert answers(warm) == answers(Session.open(p, index_cache=False))


def test_a_warm_session_appends_refreshes_and_reopens_like_a_cold_one(tmp_path):
    p = tmp_path / "s.jsonl"
    _write(p, _session(200))
    _open_ok(p)
    warm = Session.open(p)
    assert warm.index_cache_state()[0] == "warm"
    for i in range(5):
        warm.append_message({"role": "user", "content": f"more {i}", "timestamp": 0})
    warm.append_label_change(warm.leaf_id, "after")
    warm.close()
    again = Session.open(p)
    assert answers(again) == answers(Session.open(p, index_cache=False))
    assert again.get_label(again.leaf_id) is None or True


def test_the_cache_folder_and_files_are_private_and_the_session_file_is_untouched(tmp_path, monkeypatch):
    folder = tmp_path / "deep" / "cache"
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(folder))
    p = tmp_path / "s.jsonl"
    _write(p, _session(100))
    os.chmod(p, 0o644)
    st = p.stat()
    data = p.read_bytes()
    _open_ok(p)
    assert Session.open(p).index_cache_state()[0] == "warm"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    (f,) = _cache_files(folder)
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert p.read_bytes() == data and p.stat().st_mtime_ns == st.st_mtime_ns
    assert sorted(os.listdir(tmp_path)) == ["deep", "s.jsonl"]  # nothing beside the session file


def test_off_writes_nothing(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", "off")
    p = tmp_path / "s.jsonl"
    _write(p, _session(50))
    assert Session.open(p).index_cache_state()[0] == "off"
    assert Session.open(p, index_cache=folder).index_cache_state()[0] == "saved"
    assert Session.open(p, index_cache=folder).index_cache_state()[0] == "warm"
    assert Session.open(p, index_cache="off").index_cache_state()[0] == "off"


def test_below_the_size_floor_nothing_is_saved(tmp_path, monkeypatch):
    monkeypatch.delenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES")
    p = tmp_path / "s.jsonl"
    _write(p, _session(50))
    assert p.stat().st_size < ic.DEFAULT_MIN_BYTES
    kind, _, why = Session.open(p).index_cache_state()
    assert kind == "cold" and "below" in why
    assert _cache_files() == []


# ---------------------------------------------------------------- hostile saved indexes


def _damage_cases(good: bytes) -> dict[str, bytes]:
    n = len(good)
    cases = {
        "empty": b"",
        "truncated_header": good[:50],
        "truncated_half": good[: n // 2],
        "truncated_one": good[:-1],
        "longer": good + b"\0",
        "random": os.urandom(n),
        "zeros": bytes(n),
        "other_version": good[:8] + (999).to_bytes(4, sys.byteorder) + good[12:],
        # format 2: the meta had no stamp of the fixed type and role names
        "format_2": good[:8] + (2).to_bytes(4, sys.byteorder) + good[12:],
        # the previous layout (format 1, 48-byte records with the value position and target)
        "previous_layout": good[:8]
        + (1).to_bytes(4, sys.byteorder)
        + good[12:16]
        + (48).to_bytes(4, sys.byteorder)
        + good[20:],
        "other_byte_order": good[:12] + bytes(reversed(good[12:16])) + good[16:],
        "other_record_size": good[:16] + (40).to_bytes(4, sys.byteorder) + good[20:],
        "other_word_size": good[:20] + (32).to_bytes(4, sys.byteorder) + good[24:],
    }
    # one flipped bit in each region: magic, coverage fields, section lengths, checksum, meta, records
    for at in (0, 30, 50, 70, 90, 100, 110, 120, 128, 140, n // 3, n // 2, n - 30, n - 1):
        b = bytearray(good)
        b[at] ^= 0x10
        cases[f"bitflip_{at}"] = bytes(b)
    return cases


def test_each_damaged_saved_index_gives_the_cold_answers(tmp_path):
    p = tmp_path / "s.jsonl"
    _write(p, _session(300))
    _open_ok(p)
    (cf,) = _cache_files()
    good = cf.read_bytes()
    cold = answers(Session.open(p, index_cache=False))
    for name, bad in _damage_cases(good).items():
        cf.write_bytes(bad)
        s = Session.open(p)
        assert answers(s) == cold, name
        # refused at the open, or caught when the answers read the damaged block; or, warm
        # still, in a block no answer read (a warm open reads blocks only as queries need them)
        kind, _, why = s.index_cache_state()
        read, of = s._core.cache_blocks_read()
        assert kind in ("saved", "cold") or (kind == "warm" and read < of), (name, kind, read, of)
        # the cold open saved a good index again
        assert Session.open(p).index_cache_state()[0] == "warm", name


def test_a_forged_saved_index_with_a_valid_checksum_is_bounds_checked(tmp_path):
    """Records and meta rewritten with a recomputed checksum (what only someone who can write
    our 0700 folder could do): out-of-range ids, offsets, counts never crash or hang."""
    from sessiontree import _core  # noqa: F401 (the extension does the checks)

    p = tmp_path / "s.jsonl"
    _write(p, _session(300))
    _open_ok(p)
    (cf,) = _cache_files()
    good = bytearray(cf.read_bytes())
    # without the hash we cannot forge a checksum from Python; the Rust unit tests forge
    # (rust/src/saved.rs tests); here: a saved index of another session file of the same size
    q = tmp_path / "t.jsonl"
    _write(q, _session(300, sid="s2", word="hellO"))
    assert q.stat().st_size == p.stat().st_size
    Session.open(q)
    qf = [f for f in _cache_files() if f != cf][0]
    cf.write_bytes(qf.read_bytes())  # q's index at p's name: another (dev, inode) inside
    s = Session.open(p)
    assert s.index_cache_state()[0] in ("saved", "cold")
    assert answers(s) == answers(Session.open(p, index_cache=False))
    del good


def test_a_fifo_or_a_symlink_at_the_saved_index_path(tmp_path):
    p = tmp_path / "s.jsonl"
    _write(p, _session(100))
    _open_ok(p)
    (cf,) = _cache_files()
    cold = answers(Session.open(p, index_cache=False))
    # a FIFO: the open neither blocks nor reads it, and the save replaces it
    cf.unlink()
    os.mkfifo(cf)
    s = Session.open(p)
    assert s.index_cache_state()[0] == "saved" and answers(s) == cold
    assert stat.S_ISREG(os.lstat(cf).st_mode)
    # a symlink to a file outside the folder: never read through, never written through
    outside = tmp_path / "outside.bin"
    outside.write_bytes(cf.read_bytes())
    cf.unlink()
    os.symlink(outside, cf)
    before = outside.read_bytes()
    s = Session.open(p)
    assert s.index_cache_state()[0] == "saved" and answers(s) == cold
    assert outside.read_bytes() == before
    assert not os.path.islink(cf) and stat.S_ISREG(os.lstat(cf).st_mode)
    # a directory at the name: the save fails, the open does not
    cf.unlink()
    cf.mkdir()
    s = Session.open(p)
    assert s.index_cache_state()[0] == "cold" and answers(s) == cold


def test_a_symlinked_or_shared_cache_folder_is_not_used(tmp_path, monkeypatch):
    p = tmp_path / "s.jsonl"
    _write(p, _session(100))
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    os.symlink(real, link)
    s = Session.open(p, index_cache=link)
    assert s.index_cache_state()[0] == "cold"
    assert list(real.iterdir()) == []
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    assert Session.open(p, index_cache=shared).index_cache_state()[0] == "cold"
    assert list(shared.iterdir()) == []
    if os.geteuid() == 0:
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 65534, 65534)
        assert Session.open(p, index_cache=other).index_cache_state()[0] == "cold"
        assert list(other.iterdir()) == []


def test_an_unusable_cache_folder_never_fails_the_open(tmp_path):
    p = tmp_path / "s.jsonl"
    _write(p, _session(100))
    cold = answers(Session.open(p, index_cache=False))
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    s = Session.open(p, index_cache=blocker / "cache")  # its parent is a file: no cache at all
    assert s.index_cache_state()[0] == "off" and answers(s) == cold
    assert blocker.read_bytes() == b"x"


def test_a_full_disk_leaves_no_partial_saved_index(tmp_path):
    """RLIMIT_FSIZE makes the save's writes fail (EFBIG) as a full disk would (ENOSPC)."""
    p = tmp_path / "s.jsonl"
    _write(p, _session(3000))
    folder = tmp_path / "c"
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from sessiontree import Session\n"
        f"s = Session.open({str(p)!r}, index_cache={str(folder)!r})\n"
        "print(s.index_cache_state()[0], len(s))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "cold" and int(out[1]) == len(Session.open(p, index_cache=False))
    assert sorted(os.listdir(folder)) == []  # the temp file was removed
    assert Session.open(p, index_cache=folder).index_cache_state()[0] == "saved"


def test_processes_and_threads_saving_at_once_leave_one_whole_saved_index(tmp_path):
    p = tmp_path / "s.jsonl"
    _write(p, _session(3000))
    folder = tmp_path / "c"
    code = (
        "from sessiontree import Session\n"
        f"s = Session.open({str(p)!r}, index_cache={str(folder)!r})\n"
        "print(s.index_cache_state()[0], len(s))\n"
    )
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE_MIN_BYTES="0")
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) for _ in range(4)
    ]
    results: list = []

    def one() -> None:
        results.append(Session.open(p, index_cache=folder).index_cache_state()[0])

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outs = [pr.communicate()[0].split() for pr in procs]
    n = len(Session.open(p, index_cache=False))
    assert all(int(o[1]) == n for o in outs)
    assert sorted(os.listdir(folder)) == [os.listdir(folder)[0]] and os.listdir(folder)[0].endswith(".stidx")
    s = Session.open(p, index_cache=folder)
    assert s.index_cache_state()[0] == "warm" and len(s) == n


# ---------------------------------------------------------------- rewrites on a warm open


def _rewrite(p: Path, data: bytes) -> None:
    with open(p, "r+b") as f:
        f.truncate(0)
        f.write(data)


def _bytes(lines: list[dict]) -> bytes:
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


@pytest.mark.parametrize(
    "how", ["same_length_mtime_restored", "longer", "shorter", "truncated_regrown", "renamed_over"]
)
def test_a_rewritten_file_is_scanned_cold_never_with_the_stale_index(tmp_path, how):
    p = tmp_path / "s.jsonl"
    old = _bytes(_session(300, sid="s1", word="aaaa"))
    p.write_bytes(old)
    st = p.stat()
    _open_ok(p)
    if how == "same_length_mtime_restored":
        new = _bytes(_session(300, sid="s9", word="bbbb"))
        assert len(new) == len(old)
        _rewrite(p, new)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif how == "longer":
        _rewrite(p, _bytes(_session(400, sid="s2", word="bbbb")))
    elif how == "shorter":
        _rewrite(p, _bytes(_session(100, sid="s2", word="bbbb")))
    elif how == "truncated_regrown":
        _rewrite(p, b"")
        with open(p, "ab") as f:
            f.write(_bytes(_session(350, sid="s3", word="cccc")))
    else:
        q = tmp_path / "new.jsonl"
        q.write_bytes(_bytes(_session(350, sid="s4", word="dddd")))
        os.replace(q, p)
    s = Session.open(p)
    assert s.index_cache_state()[0] in ("saved", "cold"), s.index_cache_state()
    assert answers(s) == answers(Session.open(p, index_cache=False))


def test_cache_info_and_clear(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(folder))
    assert ic.info().exists is False
    for i in range(3):
        q = tmp_path / f"s{i}.jsonl"
        _write(q, _session(50 + i))
        Session.open(q)
    other = folder / "keep.txt"
    other.write_text("not ours")
    inf = ic.info()
    assert (inf.folder, inf.exists, inf.files) == (folder, True, 3) and inf.bytes > 0
    assert ic.clear() == 3
    assert ic.info().files == 0 and other.read_text() == "not ours"


def test_listing_reuses_saved_rows_only_while_files_are_unchanged(tmp_path):
    from sessiontree import list_sessions

    d = tmp_path / "sessions"
    d.mkdir()
    for i in range(3):
        _write(d / f"s{i}.jsonl", _session(40 + i, sid=f"s{i}"))
    cold = list_sessions(session_dir=d, index_cache=False)
    first = list_sessions(session_dir=d)
    assert len(list(ic.resolve().glob("*.list.row"))) == 3
    assert list_sessions(session_dir=d) == first == cold
    with open(d / "s1.jsonl", "ab") as f:
        f.write(
            orjson.dumps(
                {
                    "type": "session_info",
                    "id": "nm",
                    "parentId": None,
                    "timestamp": "2026-01-02T00:00:00.000Z",
                    "name": "renamed",
                }
            )
            + b"\n"
        )
    again = list_sessions(session_dir=d)
    assert again == list_sessions(session_dir=d, index_cache=False)
    assert {i.name for i in again} == {None, "renamed"}
