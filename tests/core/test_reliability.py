"""One writer at a time, durability modes, readers racing writers, and crash injection.

The crash test kills a writer with SIGKILL at random points; ``SESSIONTREE_CRASH_ROUNDS``
sets how many (default 25 here; ``SESSIONTREE_CRASH_ROUNDS=300 pytest tests/core/test_reliability.py``
is the long run documented in docs/reliability.md).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sessiontree import Session, SessionLockedError

ROOT = Path(__file__).resolve().parent.parent.parent


def _user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 0}


# ==== one writer ===============================================================


def test_second_writer_is_refused_and_readers_are_not_blocked(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("a"))
    other = Session.open(s.path)
    with pytest.raises(SessionLockedError):
        other.append_message(_user("b"))
    reader = Session.open(s.path)
    assert len(reader) == 1 and reader.refresh() == 0
    s.close()
    other.append_message(_user("b"))  # the lock was released
    assert [e["message"]["content"] for e in Session.open(s.path).entries()] == ["a", "b"]


def test_lock_timeout_waits_for_the_other_writer(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.append_message(_user("a"))
    waiting = Session.open(s.path, lock_timeout=5.0)
    threading.Timer(0.2, s.close).start()
    t0 = time.monotonic()
    waiting.append_message(_user("b"))
    assert time.monotonic() - t0 >= 0.1
    # the waiting writer saw the other writer's entry before appending after it
    assert [e.id for e in Session.open(s.path).get_branch()][-1] == waiting.leaf_id


def test_lock_dies_with_its_process(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.close()
    code = textwrap.dedent(f"""
        import sys, time
        from sessiontree import Session
        s = Session.open({str(s.path)!r})
        s.append_message({{"role": "user", "content": "child", "timestamp": 0}})
        print("locked", flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(SessionLockedError):
            Session.open(s.path).append_message(_user("parent"))
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        Session.open(s.path).append_message(_user("parent"))
    finally:
        if child.poll() is None:
            child.kill()
    assert [e["message"]["content"] for e in Session.open(s.path).entries()] == ["child", "parent"]


# ==== durability ===============================================================


def test_durability_modes(tmp_path):
    with pytest.raises(ValueError):
        Session.create("/p", session_dir=tmp_path, durability="sometimes")
    buffered = Session.create("/p", session_dir=tmp_path / "a", durability="none")
    buffered.append_message(_user("x"))
    assert len(Session.open(buffered.path)) == 0, "none: still in the process buffer"
    assert len(buffered) == 1
    buffered.flush()
    assert len(Session.open(buffered.path)) == 1
    buffered.append_message(_user("y"))
    buffered.close()
    assert len(Session.open(buffered.path)) == 2
    synced = Session.create("/p", session_dir=tmp_path / "b", durability="fsync")
    synced.append_message(_user("z"))
    assert len(Session.open(synced.path)) == 1


# ==== a reader racing a writer =================================================


def test_reader_refreshing_while_another_process_appends(tmp_path):
    s = Session.create("/p", session_dir=tmp_path)
    s.close()
    n = 400
    code = textwrap.dedent(f"""
        from sessiontree import Session
        s = Session.open({str(s.path)!r})
        for i in range({n}):
            s.append_message({{"role": "user", "content": "m" * (i % 97) + str(i), "timestamp": i}})
        s.close()
    """)
    reader = Session.open(s.path)
    child = subprocess.Popen([sys.executable, "-c", code])
    seen = 0
    while child.poll() is None or seen < n:
        seen += reader.refresh()
        # never a partial entry: every indexed entry parses and is a message
        assert not [p for p in reader.problems if p.kind != "torn_last_line"]
        if child.poll() is not None and seen < n:
            seen += reader.refresh()
            if seen >= n or reader.refresh() == 0:
                break
    assert child.wait() == 0
    reader.refresh()
    contents = [e["message"]["content"] for e in reader.entries()]
    assert contents == ["m" * (i % 97) + str(i) for i in range(n)]
    assert not reader.problems


# ==== crash injection ==========================================================

_WRITER = textwrap.dedent("""
    import sys
    from sessiontree import Session
    s = Session.open(sys.argv[1], durability="fsync")
    i = int(sys.argv[2])
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    while True:
        text = "entry %d " % i + "x" * (i * 37 % 3000)
        eid = s.append_message({"role": "user", "content": text, "timestamp": i})
        sys.stdout.write("%s %d\\n" % (eid, i))
        sys.stdout.flush()
        i += 1
""")


def test_sigkill_during_appends_loses_no_reported_entry(tmp_path):
    rounds = int(os.environ.get("SESSIONTREE_CRASH_ROUNDS", "25"))
    rng = random.Random(1234)
    s = Session.create("/p", session_dir=tmp_path)
    s.close()
    reported: dict[str, int] = {}
    counter = 0
    torn_seen = 0
    for _ in range(rounds):
        child = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(s.path), str(counter)], stdout=subprocess.PIPE, text=True
        )
        # kill it while it appends: wait for the child to have started (imports and open take
        # seconds on a loaded machine), then a random moment of its append loop
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.1))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:  # a half-printed line was not reported
                reported[parts[0]] = int(parts[1])
        opened = Session.open(s.path)
        by_id = {e.id: e for e in opened.entries()}
        for eid, i in reported.items():
            assert eid in by_id, f"entry {eid} (#{i}) reported written but lost"
            content = by_id[eid]["message"]["content"]
            assert content == "entry %d " % i + "x" * (i * 37 % 3000)
        damaged = [p for p in opened.problems if p.kind in ("torn_last_line", "malformed_json")]
        assert len(damaged) <= 1 + torn_seen, "at most the line being written when killed is damaged"
        torn_seen = len(damaged)
        counter = max(reported.values(), default=counter) + 1
    assert reported, "the writer never got to append"


# ==== parallel scans from several threads ======================================


def test_threads_opening_sessions_at_once_share_the_scan_pool(tmp_path):
    # each open scans on the shared two-thread pool; several at once must neither deadlock
    # nor mix up their files, and each must index what a one-thread scan indexes
    from sessiontree import _core

    files = []
    for k in range(3):
        p = tmp_path / f"s{k}.jsonl"
        subprocess.run(
            [
                sys.executable,
                str(Path(__file__).parent.parent / "tools" / "gen_session.py"),
                "--megabytes",
                "3",
                "--seed",
                str(k + 1),
                "--out",
                str(p),
            ],
            check=True,
            capture_output=True,
        )
        files.append(p)
    want = {}
    for p in files:
        alone = _core.Index.open(str(p), parallel=False)
        want[p] = (len(alone), alone.leaf_id())
    errors: list = []

    def worker(k: int) -> None:
        try:
            for r in range(6):
                p = files[(k + r) % len(files)]
                s = Session.open(p)
                if (len(s), s.leaf_id) != want[p]:
                    errors.append((p.name, len(s), s.leaf_id))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a scan hung"
    assert errors == []
