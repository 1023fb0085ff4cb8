"""``sessiontree rpc --listen unix:PATH``: many clients over one session.

The real process on a unix socket (mode 0600); several clients reading at once while one writes;
a client killed in the middle of a command line; an external writer process killed mid-stream
while a client resumes from its ``since`` cursor (nothing missed, nothing doubled); a second
writer refused (another process holding the session lock, and a second client writing while a
first one's write runs); ``follow`` pushing entries appended by another process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS
from tests.support.rpc_client import EXE, isolated_env

from sessiontree import Session
from sessiontree.rpc import RpcServer, SessionRegistry, _WriterGate

sys.setrecursionlimit(max(sys.getrecursionlimit(), 50000))


class SockClient:
    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.sock.settimeout(60)
        self.buf = b""
        self.events: list = []
        self.n = 0

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, command: dict) -> dict:
        self.n += 1
        command = {"id": f"r{self.n}", **command}
        self.send(json.dumps(command).encode() + b"\n")
        while True:
            obj = self.line()
            if obj.get("type") == "response" and obj.get("id") == command["id"]:
                return obj
            self.events.append(obj)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def served(tmp_path: Path):
    session = tmp_path / "s.jsonl"
    shutil.copyfile(CORPUS / "pi-generated" / "linear_tools.jsonl", session)
    sock = tmp_path / "rpc.sock"
    env = dict(os.environ, **isolated_env(tmp_path))
    proc = subprocess.Popen(
        [*EXE, "--listen", f"unix:{sock}", "--session", str(session)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield session, str(sock), proc
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_socket_is_private_and_serves_many_clients(served) -> None:
    session, sock, _ = served
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    expected = [e.id for e in Session.open(session).entries()]
    results: list = []
    errors: list = []

    def reader() -> None:
        try:
            c = SockClient(sock)
            for _ in range(20):
                r = c.request({"type": "get_entries"})
                ids = [e["id"] for e in r["data"]["entries"]]
                results.append(ids[: len(expected)] == expected)
                assert c.request({"type": "get_messages"})["success"]
            c.close()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def writer() -> None:
        try:
            c = SockClient(sock)
            for n in range(10):
                r = c.request({"type": "set_session_name", "name": f"name {n}"})
                assert r["success"], r
            c.close()
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert results and all(results)
    s = Session.open(session)
    assert s.session_name == "name 9"
    assert [e.type for e in s.entries()][len(expected) :] == ["session_info"] * 10


def test_client_killed_mid_line_writes_nothing_and_others_continue(served) -> None:
    session, sock, _ = served
    before = session.read_bytes()
    c = SockClient(sock)
    c.send(b'{"type":"set_session_name","name":"half')  # no newline: killed mid-command
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()
    other = SockClient(sock)
    assert other.request({"type": "get_state"})["success"]
    time.sleep(0.2)
    assert session.read_bytes() == before
    assert other.request({"type": "set_session_name", "name": "after"})["success"]
    assert Session.open(session).session_name == "after"
    other.close()


_WRITER = """
import sys, time
from sessiontree import Session
s = Session.open(sys.argv[1], durability="flush")
n = 0
while True:
    s.append_custom_entry("tick", {"n": n})
    n += 1
    print(n, flush=True)
    time.sleep(0.002)
"""


def test_reconnect_by_cursor_while_a_writer_is_killed_mid_stream(served, tmp_path: Path) -> None:
    session, sock, _ = served
    c = SockClient(sock)
    cursor = c.request({"type": "get_entries"})["data"]["entries"][-1]["id"]
    c.close()
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(session)], stdout=subprocess.PIPE)
    seen: list = []
    try:
        assert writer.stdout.readline()  # it is writing
        for round_ in range(15):
            c = SockClient(sock)  # reconnect every round, resume from the cursor
            r = c.request({"type": "get_entries", "since": cursor})
            assert r["success"], r
            for e in r["data"]["entries"]:
                seen.append(e["id"])
            if r["data"]["entries"]:
                cursor = r["data"]["entries"][-1]["id"]
            c.close()
            if round_ == 7:
                writer.send_signal(signal.SIGKILL)  # mid-stream
                writer.wait()
            time.sleep(0.03)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    c = SockClient(sock)
    r = c.request({"type": "get_entries", "since": cursor})
    seen.extend(e["id"] for e in r["data"]["entries"])
    c.close()
    on_disk = [e.id for e in Session.open(session).entries()]
    first_new = on_disk.index(seen[0])
    assert seen == on_disk[first_new:], "nothing missed, nothing doubled"
    assert len(seen) == len(set(seen)) and len(seen) > 10


def test_second_writer_process_is_refused_and_server_keeps_serving(served) -> None:
    session, sock, _ = served
    holder = Session.open(session)
    holder.append_custom_entry("holder", None)  # takes the writer lock and keeps it
    try:
        c = SockClient(sock)
        r = c.request({"type": "set_session_name", "name": "refused"})
        assert r["success"] is False and "lock" in r["error"].lower()
        assert c.request({"type": "get_entries"})["success"]  # readers never block
    finally:
        holder.close()
    assert c.request({"type": "set_session_name", "name": "now"})["success"]
    c.close()


def test_follow_pushes_entries_appended_by_another_process(served) -> None:
    session, sock, _ = served
    c = SockClient(sock)
    plain = c.request({"type": "follow"})
    assert plain["success"] is False and "Unknown command: follow" in plain["error"]  # Pi clients see nothing new
    hello = c.request({"type": "hello"})
    assert hello["success"] and "follow" in hello["data"]["capabilities"]
    assert c.events[0]["type"] == "hello"
    last = c.request({"type": "get_entries"})["data"]["entries"][-1]["id"]
    assert c.request({"type": "follow", "since": last, "intervalMs": 20})["success"]
    other = Session.open(session)
    ids = [other.append_custom_entry("pushed", {"n": n}) for n in range(3)]
    other.close()
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        ev = c.line()
        if ev.get("type") == "entry_appended":
            got.append(ev["entry"]["id"])
    assert got == ids
    c.close()


def test_one_writer_at_a_time_between_clients(tmp_path: Path) -> None:
    """Two clients of one socket server share the session and a writer gate: a write while
    another client's write runs (here a slow compaction) is refused, not queued."""
    path = tmp_path / "s.jsonl"
    shutil.copyfile(CORPUS / "pi-generated" / "compaction_1.jsonl", path)
    from sessiontree.summarizers.base import SummaryResult

    started = threading.Event()
    release = threading.Event()

    class Slow:
        name = "slow"

        async def summarize(self, request):
            started.set()
            import asyncio

            while not release.is_set():
                await asyncio.sleep(0.01)
            return SummaryResult("slow summary", None, "slow")

    registry = SessionRegistry(_WriterGate)
    shared = registry.adopt(Session.open(path))
    a = RpcServer(
        None,
        registry=registry,
        session_ref=shared,
        summarizer=Slow(),
        settings={"compaction": {"keepRecentTokens": 100}},
    )
    b = RpcServer(None, registry=registry, session_ref=shared)
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("a", a.handle({"type": "compact"})))
    t.start()
    assert started.wait(30)
    r = b.handle({"type": "set_session_name", "name": "second writer"})
    assert r["success"] is False and "one writer at a time" in r["error"]
    assert b.handle({"type": "get_entries"})["success"]  # reading is not blocked
    release.set()
    t.join(30)
    assert out["a"]["success"], out
    assert b.handle({"type": "set_session_name", "name": "after"})["success"]


def test_half_a_line_and_silence_or_a_disconnect_mid_answer_block_no_one(served) -> None:
    session, sock, _ = served
    stalled = SockClient(sock)
    stalled.send(b'{"type":"get_state"')  # half a line, then nothing: only this client waits
    for _ in range(5):
        gone = SockClient(sock)
        gone.send(b'{"type":"get_tree"}\n{"type":"get_entries"}\n')
        gone.sock.close()  # disconnects before (or while) the answers are written
    c = SockClient(sock)
    assert c.request({"type": "get_tree"})["success"]
    assert c.request({"type": "set_session_name", "name": "still serving"})["success"]
    stalled.send(b"}\n")  # the rest of the line arrives: it is answered
    assert stalled.line()["command"] == "get_state"
    stalled.close()
    c.close()


def test_listen_never_replaces_a_file_or_a_live_server(served, tmp_path: Path) -> None:
    session, sock, _ = served
    env = dict(os.environ, **isolated_env(tmp_path))
    out = subprocess.run(
        [*EXE, "--listen", f"unix:{sock}", "--session", str(session)], env=env, capture_output=True, timeout=60
    )
    assert out.returncode == 2 and b"another server is listening" in out.stderr  # the CLI's exit code
    plain = tmp_path / "not-a-socket"
    plain.write_text("keep me")
    out = subprocess.run(
        [*EXE, "--listen", f"unix:{plain}", "--session", str(session)], env=env, capture_output=True, timeout=60
    )
    assert out.returncode == 2 and b"not a socket" in out.stderr
    assert plain.read_text() == "keep me"
    c = SockClient(sock)  # the first server is untouched
    assert c.request({"type": "get_state"})["success"]
    c.close()
