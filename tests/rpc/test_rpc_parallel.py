"""Many clients on ``--listen`` (issue 18): reads for different clients run at the same time
(one thread per connection; the cached answers and the core's GIL-free reads let them
overlap), writes stay one at a time, and a client that stops reading its socket holds no one
else (its answers wait in its own connection only)."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS

import sessiontree.rpc as rpc
from sessiontree import Session
from sessiontree.rpc import RpcServer, SessionRegistry, UnixServer, _WriterGate


class Client:
    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.rfile = self.sock.makefile("rb")

    def request(self, command: dict) -> dict:
        self.sock.sendall(json.dumps(command).encode() + b"\n")
        while True:  # events (session_info_changed...) come before the answer
            got = json.loads(self.rfile.readline())
            if got.get("type") == "response":
                return got

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()


@pytest.fixture
def served(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    shutil.copyfile(CORPUS / "pi-generated" / "long_outputs.jsonl", path)
    registry = SessionRegistry(_WriterGate)
    first = registry.adopt(Session.open(path))
    sock = str(tmp_path / "rpc.sock")
    us = UnixServer(
        sock, lambda on_event=None: RpcServer(None, on_event=on_event, registry=registry, session_ref=first)
    )
    us.bind()
    t = threading.Thread(target=us.serve_forever, daemon=True)
    t.start()
    try:
        yield sock, path
    finally:
        us.close()
        t.join(timeout=10)
        registry.release(first)


def test_reads_of_different_clients_run_at_the_same_time(served, monkeypatch):
    sock, _ = served
    both = threading.Barrier(2, timeout=10)
    original = rpc._PI_COMMANDS["get_fork_messages"]

    def meet(self, c, cmd_id, ctype):
        both.wait()  # returns only when the other client's read is running too
        return original(self, c, cmd_id, ctype)

    monkeypatch.setitem(rpc._PI_COMMANDS, "get_fork_messages", meet)
    answers: list = []
    clients = [Client(sock), Client(sock)]

    def ask(c: Client) -> None:
        answers.append(c.request({"type": "get_fork_messages"}))

    threads = [threading.Thread(target=ask, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(answers) == 2 and all(a["success"] for a in answers), answers  # a serial server breaks the barrier
    for c in clients:
        c.close()


def test_a_client_that_stops_reading_holds_no_one(served):
    sock, path = served
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(sock)
    slow.setblocking(False)
    line = b'{"type":"get_tree"}\n'
    one = len(line)
    sent = 0
    deadline = time.monotonic() + 20
    # commands until the server cannot write our answers any more (its socket buffers are full)
    # and we cannot send more (ours are): the slow client's thread is stuck in a write
    while time.monotonic() < deadline:
        try:
            sent += slow.send(line * 64)
        except BlockingIOError:
            time.sleep(0.2)
            try:
                sent += slow.send(line)
            except BlockingIOError:
                break
    assert sent > one * 64, "the slow client never filled its socket"
    other = Client(sock)
    t0 = time.monotonic()
    assert other.request({"type": "get_messages"})["success"]
    assert other.request({"type": "get_entries"})["success"]
    assert other.request({"type": "get_tree"})["success"]
    assert other.request({"type": "set_session_name", "name": "still writing"})["success"]  # writes too
    assert time.monotonic() - t0 < 15
    assert Session.open(path).session_name == "still writing"
    other.close()
    slow.close()
