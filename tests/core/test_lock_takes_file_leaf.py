"""Issue 19 item 6: after taking the writer lock, the leaf is the file's current leaf.

Two writers that take turns under the lock (each appends, then releases the lock with
``close()``) must build one chain: a writer that takes the lock after the other appended
continues from the other's last entry, instead of forking from the leaf it had before. A leaf
the caller moved on purpose (``branch``) is kept.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sessiontree import Session


def _msg(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 1}


def _assert_one_chain(path: Path, expected: int) -> None:
    s = Session.open(path)
    entries = s.entries()
    assert len(entries) == expected
    for prev, e in zip(entries, entries[1:]):
        assert e.parent_id == prev.id, f"{e.id} forks from {e.parent_id}, not {prev.id}"
    assert len(s.get_branch()) == expected  # nothing on an abandoned branch
    assert s.tree_leaves() == [len(entries) - 1]


def test_two_sessions_taking_turns_build_one_chain(tmp_path: Path) -> None:
    a = Session.create(str(tmp_path), session_dir=tmp_path)
    a.append_message(_msg("first"))
    a.close()
    b = Session.open(a.path)  # b indexes the file now, then a appends before b's first write
    for n in range(5):
        a.append_message(_msg(f"a{n}"))
        a.close()  # releases the lock
        b.append_message(_msg(f"b{n}"))  # takes the lock: indexes a's entry, continues from it
        b.close()
    _assert_one_chain(a.path, 11)


def test_a_leaf_moved_by_the_caller_is_kept_when_the_lock_is_taken(tmp_path: Path) -> None:
    a = Session.create(str(tmp_path), session_dir=tmp_path)
    root = a.append_message(_msg("root"))
    a.append_message(_msg("second"))
    a.close()
    b = Session.open(a.path)
    b.branch(root)  # on purpose: continue from the root
    a.append_message(_msg("third"))
    a.close()
    new = b.append_message(_msg("from root"))
    b.close()
    s = Session.open(a.path)
    assert s.get_entry(new).parent_id == root


_WRITER = r"""
import sys, time
from sessiontree import Session
path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = Session.open(path, lock_timeout=30)
for k in range(n):
    s.append_message({"role": "user", "content": f"{name}{k}", "timestamp": 1})
    s.close()  # release the lock: the other process appends in between
    time.sleep(0.002)
"""


def test_two_processes_appending_in_turn_build_one_chain(tmp_path: Path) -> None:
    s = Session.create(str(tmp_path), session_dir=tmp_path)
    s.append_message(_msg("first"))
    s.close()
    n = 60
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(s.path), name, str(n)], stderr=subprocess.PIPE)
        for name in ("a", "b")
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    _assert_one_chain(s.path, 1 + 2 * n)
