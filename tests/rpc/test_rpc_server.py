"""``sessiontree rpc`` beyond the recordings: the embeddable :class:`RpcServer`, bad input,
launch flags, the beyond-Pi commands (after ``hello``), and the Session methods it relies on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS
from tests.support.rpc_client import EXE, PiRpcClient, isolated_env

from sessiontree import Session
from sessiontree.rpc import MAX_LINE_BYTES, RpcServer, encode, read_lines, serve_stdio

GEN = CORPUS / "pi-generated"


def _copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copyfile(GEN / name, dst)
    return dst


# ==== Session methods the server relies on ====


def test_get_entries_since_a_repeated_id_starts_after_its_first_occurrence(tmp_path: Path) -> None:
    # Pi's get_entries uses entries.findIndex: the first entry carrying the id
    p = tmp_path / "dup.jsonl"
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "custom", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:01.000Z", "customType": "x"},
        {"type": "custom", "id": "dup", "parentId": "a", "timestamp": "2026-01-01T00:00:02.000Z", "customType": "x"},
        {"type": "custom", "id": "b", "parentId": "dup", "timestamp": "2026-01-01T00:00:03.000Z", "customType": "x"},
        {"type": "custom", "id": "dup", "parentId": "b", "timestamp": "2026-01-01T00:00:04.000Z", "customType": "x"},
        {"type": "custom", "id": "c", "parentId": "dup", "timestamp": "2026-01-01T00:00:05.000Z", "customType": "x"},
    ]
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    s = Session.open(p)
    assert [e.id for e in s.get_entries("dup")] == ["b", "dup", "c"]
    assert [e.id for e in s.get_entries_page("dup", 2)] == ["b", "dup"]


def test_get_entries_page(tmp_path: Path) -> None:
    s = Session.open(_copy(tmp_path, "linear_tools.jsonl"))
    ids = [e.id for e in s.entries()]
    assert [e.id for e in s.get_entries_page(None, 3)] == ids[:3]
    assert [e.id for e in s.get_entries_page(ids[2], 3)] == ids[3:6]
    assert [e.id for e in s.get_entries_page(ids[-2], 10)] == ids[-1:]
    assert s.get_entries_page(ids[-1], 10) == []
    assert [e.id for e in s.get_entries_page(ids[0])] == ids[1:]
    with pytest.raises(KeyError):
        s.get_entries_page("nope", 1)
    with pytest.raises(ValueError):
        s.get_entries_page(None, -1)


# ==== the embeddable server ====


def test_embedded_server_answers_and_emits_events(tmp_path: Path) -> None:
    events: list = []
    path = _copy(tmp_path, "linear_short.jsonl")
    server = RpcServer(Session.open(path), on_event=events.append)
    r = server.handle({"id": 1, "type": "get_entries"})
    assert r["id"] == 1 and r["success"] and r["command"] == "get_entries"
    last = r["data"]["entries"][-1]["id"]
    assert r["data"]["leafId"] == last
    r = server.handle({"type": "set_session_name", "name": "  renamed  "})
    assert r == {"type": "response", "command": "set_session_name", "success": True}
    assert events == [{"type": "session_info_changed", "name": "renamed"}]
    r = server.handle({"type": "get_entries", "since": last})
    (info,) = r["data"]["entries"]
    assert info["type"] == "session_info" and info["name"] == "renamed" and info["parentId"] == last
    assert server.handle({"type": "get_state"})["data"]["sessionName"] == "renamed"
    server.close()
    # the write released the session lock: another writer can write at once
    other = Session.open(path)
    other.append_session_info("again")
    other.close()


@pytest.mark.parametrize(
    "command,needle",
    [
        ({"type": "prompt", "message": "hi"}, "not an agent"),
        ({"type": "bash", "command": "ls"}, "not an agent"),
        ({"type": "set_model", "provider": "x", "modelId": "y"}, "not an agent"),
        ({"type": "steer", "message": "x"}, "not an agent"),
        ({"type": "no_such_thing"}, "Unknown command: no_such_thing"),
        ({"type": "navigate_tree", "targetId": "x"}, "Unknown command: navigate_tree"),  # needs hello
        ({"type": 5}, '"type" must be a string'),
        ({"type": "get_entries", "since": 12}, "Entry not found: 12"),
        ({"type": "set_session_name", "name": ["x"]}, "must be a string"),
        ({"type": "set_session_name", "name": "   "}, "Session name cannot be empty"),
        ({"type": "compact", "customInstructions": 3}, "must be a string"),
        ({"type": "compact"}, "No model configured"),
        ({"type": "fork", "entryId": "nope"}, "Invalid entry ID for forking"),
        ({"type": "switch_session", "sessionPath": 7}, "sessionPath"),
        ({"type": "switch_session", "sessionPath": "/no/such/file.jsonl"}, "not found"),
    ],
)
def test_bad_commands_get_clear_errors(tmp_path: Path, command: dict, needle: str) -> None:
    server = RpcServer(Session.open(_copy(tmp_path, "linear_short.jsonl")))
    before = (tmp_path / "linear_short.jsonl").read_bytes()
    r = server.handle(dict(command, id="x"))
    assert r["success"] is False and r["id"] == "x"
    assert needle in r["error"], r
    assert server.handle({"type": "get_state"})["success"]  # still serving
    assert (tmp_path / "linear_short.jsonl").read_bytes() == before


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    server = RpcServer(Session.open(_copy(tmp_path, "linear_short.jsonl")))
    a = server.handle({"type": "get_messages"})
    b = server.handle({"type": "get_messages", "extra": {"deep": [1, 2]}, "limit": 1})
    assert a == b


def test_read_lines_framing() -> None:
    import io

    data = ('{"a":"x\u2028y\u2029z"}\r\n\n  \n{"b":1}\n' + "x" * 100 + '\n{"c":2}').encode()
    got = list(read_lines(io.BytesIO(data), max_bytes=50))
    assert got[0] == '{"a":"x\u2028y\u2029z"}'.encode()
    assert got[1] == b'{"b":1}'
    assert got[2] is not got[1] and not isinstance(got[2], bytes)  # too long
    assert got[3] == b'{"c":2}'


def test_stdio_bad_input_keeps_serving(tmp_path: Path) -> None:
    import io

    server = RpcServer(Session.open(_copy(tmp_path, "linear_short.jsonl")))
    lines = [
        b"not json",
        b"[1,2]",
        b'{"type":"get_state","x":NaN}',
        b'{"type":"get_state"',
        b"{" * 100000 + b"}" * 100000,
        b'"just a string"',
        b"x" * 5000,
        b'{"id":"ok","type":"get_last_assistant_text"}',
    ]
    out = io.BytesIO()
    serve_stdio(server, io.BytesIO(b"\n".join(lines) + b"\n"), out, max_bytes=300000)
    replies = [json.loads(x) for x in out.getvalue().splitlines()]
    assert len(replies) == len(lines)
    for r in replies[:-1]:
        assert r["command"] == "parse" and r["success"] is False and r["error"].startswith("Failed to parse command")
    assert replies[-1]["id"] == "ok" and replies[-1]["success"]


def test_deep_tree_is_encoded_without_recursion() -> None:
    value: dict = {"leaf": True}
    for _ in range(5000):
        value = {"children": [value]}
    text = encode(value)
    assert text.startswith(b'{"children":[{"children":[') and text.count(b"[") == 5000


# ==== the process ====


def test_version_and_launch_flags(tmp_path: Path) -> None:
    env = dict(os.environ, **isolated_env(tmp_path))
    out = subprocess.run([*EXE, "--version"], capture_output=True, env=env, timeout=60)
    assert out.returncode == 0 and out.stdout == b"1.6.0\n"
    path = _copy(tmp_path, "linear_short.jsonl")
    before = path.read_bytes()
    out = subprocess.run(
        [
            *EXE,
            "--mode",
            "rpc",
            "--session",
            str(path),
            "--provider",
            "anthropic",
            "--model",
            "claude-x",
        ],
        input=b'{"type":"get_state"}\n',
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0
    r = json.loads(out.stdout)
    assert r["success"] and r["data"]["sessionFile"] == str(path)
    assert b"--model" in out.stderr  # noted, not fatal (agent flags such as --thinking: exit 2, test_rpc_sdk.py)
    assert path.read_bytes() == before  # nothing written on start


def test_huge_line_over_a_pipe(tmp_path: Path) -> None:
    path = _copy(tmp_path, "linear_short.jsonl")
    client = PiRpcClient(["--mode", "rpc", "--session", str(path)], env=isolated_env(tmp_path), check_version=False)
    client.send_raw(b'{"type":"get_state","pad":"' + b"x" * (MAX_LINE_BYTES + 10) + b'"}\n')
    r = client.next_line()
    assert r["command"] == "parse" and "longer than" in r["error"]
    assert client.request({"type": "get_state"})["success"]
    assert client.close()[0] == 0


def test_no_session_and_session_dir(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    client = PiRpcClient(["--mode", "rpc", "--no-session"], env=env, check_version=False, cwd=tmp_path)
    st = client.request({"type": "get_state"})["data"]
    assert "sessionFile" not in st and st["messageCount"] == 0
    assert client.request({"type": "set_session_name", "name": "mem"})["success"]
    assert client.close()[0] == 0
    assert not any(p.suffix == ".jsonl" for p in tmp_path.rglob("*"))

    sdir = tmp_path / "sessions"
    sdir.mkdir()
    old = sdir / "old.jsonl"
    new = sdir / "new.jsonl"
    shutil.copyfile(GEN / "linear_short.jsonl", old)
    shutil.copyfile(GEN / "labels.jsonl", new)
    os.utime(old, (1, 1))
    # Pi: --session-dir says where sessions live (a new one starts there); --continue resumes the latest
    client = PiRpcClient(["--mode", "rpc", "--session-dir", str(sdir)], env=env, check_version=False)
    started = client.request({"type": "get_state"})["data"]["sessionFile"]
    assert Path(started).parent == sdir and not Path(started).exists()
    assert client.close()[0] == 0
    client = PiRpcClient(["--mode", "rpc", "--session-dir", str(sdir), "--continue"], env=env, check_version=False)
    assert client.request({"type": "get_state"})["data"]["sessionFile"] == str(new)
    assert client.close()[0] == 0


def test_new_session_fork_clone_switch(tmp_path: Path) -> None:
    path = _copy(tmp_path, "linear_tools.jsonl")
    client = PiRpcClient(["--mode", "rpc", "--session", str(path)], env=isolated_env(tmp_path), check_version=False)
    forks = client.request({"type": "get_fork_messages"})["data"]["messages"]
    target = forks[-1]
    r = client.request({"type": "fork", "entryId": target["entryId"]})
    assert r["success"] and r["data"] == {"text": target["text"], "cancelled": False}
    st = client.request({"type": "get_state"})["data"]
    assert st["sessionFile"] != str(path)
    forked = Session.open(st["sessionFile"])
    assert forked.header["parentSession"] == str(path)
    assert target["entryId"] not in [e.id for e in forked.entries()]
    assert client.request({"type": "clone"})["data"] == {"cancelled": False}
    cloned = client.request({"type": "get_state"})["data"]["sessionFile"]
    assert Session.open(cloned).header["parentSession"] == st["sessionFile"]
    assert client.request({"type": "switch_session", "sessionPath": str(path)})["data"] == {"cancelled": False}
    assert client.request({"type": "get_state"})["data"]["sessionFile"] == str(path)
    r = client.request({"type": "new_session"})
    assert r["data"] == {"cancelled": False}
    st = client.request({"type": "get_state"})["data"]
    assert st["messageCount"] == 0 and not Path(st["sessionFile"]).exists()  # written with its first entry
    assert client.close()[0] == 0


def test_export_html_writes_the_html_view(tmp_path: Path) -> None:
    server = RpcServer(Session.open(_copy(tmp_path, "linear_short.jsonl")))
    r = server.handle({"type": "export_html", "outputPath": str(tmp_path / "x.html")})
    assert r["success"] and r["data"]["path"] == str(tmp_path / "x.html")
    page = (tmp_path / "x.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    bad = server.handle({"type": "export_html", "outputPath": 5})
    assert bad["success"] is False and "outputPath" in bad["error"]


def test_an_unexpected_failure_in_a_command_is_an_answer_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    import sessiontree.rpc as rpc

    def boom(self, c, cmd_id, ctype):
        raise RuntimeError("exploded")

    monkeypatch.setitem(rpc._PI_COMMANDS, "get_tree", boom)
    server = RpcServer(Session.open(_copy(tmp_path, "linear_short.jsonl")))
    r = server.handle({"id": 9, "type": "get_tree"})
    assert r == {
        "id": 9,
        "type": "response",
        "command": "get_tree",
        "success": False,
        "error": "internal error in get_tree: RuntimeError: exploded",
    }
    assert server.handle({"type": "get_messages"})["success"]


def test_continue_starts_a_new_session_written_with_its_first_entry_then_resumes_it(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    sessions = tmp_path / "agent" / "sessions"
    client = PiRpcClient(["--mode", "rpc", "--continue"], env=env, check_version=False, cwd=project)
    st = client.request({"type": "get_state"})["data"]
    assert not Path(st["sessionFile"]).exists()  # nothing written on start; the path it will have
    assert not sessions.exists() or not list(sessions.rglob("*.jsonl"))
    assert client.request({"type": "set_session_name", "name": "first"})["success"]
    written = client.request({"type": "get_state"})["data"]["sessionFile"]
    assert written == st["sessionFile"]
    assert client.close()[0] == 0
    assert Path(written).is_file() and Path(written).is_relative_to(sessions)
    client = PiRpcClient(["--mode", "rpc", "--continue"], env=env, check_version=False, cwd=project)
    st = client.request({"type": "get_state"})["data"]
    assert st["sessionFile"] == written and st["sessionName"] == "first"
    assert client.close()[0] == 0
