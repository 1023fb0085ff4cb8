"""``sessiontree rpc`` driven by the real Pi RPC client, pi-agent-python-sdk (PyPI), unmodified.

Issue 19: the launch flags a Pi client passes are honoured as Pi does (item 1), every other flag
is refused with one line and exit 2 (items 1 and 8); ``get_state`` reports the path a new session
will have before it is written (item 3); ``get_tree`` on a session deeper than Python's ``json``
can parse in Pi's nested shape is served flat and paged after ``hello`` (item 4).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS
from tests.support.rpc_client import EXE, isolated_env

from sessiontree import Session
from sessiontree.paths import encode_cwd

pi_agent = pytest.importorskip("pi_agent")
from pi_agent import PiClient  # noqa: E402
from pi_agent.errors import PiError  # noqa: E402

GEN = CORPUS / "pi-generated"


def _client(tmp_path: Path, cwd: Path | None = None, **kw) -> PiClient:
    env = isolated_env(tmp_path)
    return PiClient(executable=EXE, cwd=str(cwd or tmp_path), env=env, **kw)


def _copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copyfile(GEN / name, dst)
    return dst


# ==== item 1: Pi's launch flags ====


def test_fork_session_copies_the_whole_session_into_a_new_file(tmp_path: Path) -> None:
    src = _copy(tmp_path, "labels.jsonl")
    before = src.read_bytes()
    project = tmp_path / "project"
    project.mkdir()
    with _client(tmp_path, cwd=project, fork_session=str(src)) as c:
        st = c.get_state()
        f = Path(st["sessionFile"])
        assert f != src and f.is_file()
        assert f.parent == tmp_path / "agent" / "sessions" / encode_cwd(str(project))  # Pi's folder for the cwd
        assert st["sessionId"] != Session.open(src).session_id
        entries = c.get_entries()["entries"]
    forked = Session.open(f)
    assert forked.header["parentSession"] == str(src) and forked.cwd == str(project)
    assert [e.raw for e in forked.entries()] == [e.raw for e in Session.open(src).entries()]
    assert [e["id"] for e in entries] == [e.id for e in forked.entries()]
    assert src.read_bytes() == before  # the source is untouched


def test_session_id_names_the_new_session_and_its_file(tmp_path: Path) -> None:
    sdir = tmp_path / "store"
    with _client(tmp_path, session_id="abc123", session_dir=str(sdir)) as c:
        st = c.get_state()
        assert st["sessionId"] == "abc123"
        assert st["sessionFile"].endswith("_abc123.jsonl") and Path(st["sessionFile"]).parent == sdir
        assert not Path(st["sessionFile"]).exists()  # written with its first entry, as Pi does
        c.set_session_name("named")
        assert Path(st["sessionFile"]).is_file()
        assert c.get_state()["sessionFile"] == st["sessionFile"]
    s = Session.open(st["sessionFile"])
    assert s.session_id == "abc123" and s.session_name == "named"


def test_session_dir_starts_a_new_session_there_and_continue_resumes_the_latest(tmp_path: Path) -> None:
    sdir = tmp_path / "store"
    sdir.mkdir()
    old = sdir / "old.jsonl"
    shutil.copyfile(GEN / "linear_short.jsonl", old)
    with _client(tmp_path, session_dir=str(sdir)) as c:  # Pi: --session-dir only says where
        st = c.get_state()
        assert st["sessionFile"] != str(old) and Path(st["sessionFile"]).parent == sdir
        assert st["messageCount"] == 0
    with _client(tmp_path, session_dir=str(sdir), continue_session=True) as c:
        assert c.get_state()["sessionFile"] == str(old)


def test_session_opens_a_file_or_a_session_id(tmp_path: Path) -> None:
    src = _copy(tmp_path, "linear_short.jsonl")
    with _client(tmp_path, session=str(src)) as c:
        assert c.get_state()["sessionFile"] == str(src)
    project = tmp_path / "p"
    project.mkdir()
    env = isolated_env(tmp_path)
    old = os.environ.get("PI_CODING_AGENT_DIR")
    os.environ["PI_CODING_AGENT_DIR"] = env["PI_CODING_AGENT_DIR"]
    try:
        made = Session.create(str(project), session_id="feedc0de-1234")
        made.append_session_info("by id")
        made.close()
    finally:
        if old is None:
            del os.environ["PI_CODING_AGENT_DIR"]
        else:
            os.environ["PI_CODING_AGENT_DIR"] = old
    with _client(tmp_path, cwd=project, session="feedc0de") as c:  # a prefix of the id, as Pi
        st = c.get_state()
        assert st["sessionId"] == "feedc0de-1234" and st["sessionName"] == "by id"


def test_no_session_writes_nothing(tmp_path: Path) -> None:
    with _client(tmp_path, no_session=True) as c:
        st = c.get_state()
        assert "sessionFile" not in st
        c.set_session_name("mem")
        assert c.get_state()["sessionName"] == "mem"
    assert not any(p.suffix == ".jsonl" for p in tmp_path.rglob("*"))


def test_name_sets_the_session_name(tmp_path: Path) -> None:
    src = _copy(tmp_path, "linear_short.jsonl")
    with _client(tmp_path, session=str(src), extra_args=["--name", "from the flag"]) as c:
        assert c.get_state()["sessionName"] == "from the flag"
    assert Session.open(src).session_name == "from the flag"
    with _client(tmp_path, session_dir=str(tmp_path / "new"), extra_args=["-n", "new one"]) as c:
        st = c.get_state()
        assert st["sessionName"] == "new one"
        assert not Path(st["sessionFile"]).exists()  # nothing written on start
        c.set_session_name("renamed")
    assert Session.open(st["sessionFile"]).session_name == "renamed"


@pytest.mark.parametrize(
    "extra",
    [["--thinking", "high"], ["--no-tools"], ["--system-prompt", "x"], ["--my-extension-flag"], ["hello there"]],
)
def test_other_flags_are_refused_with_one_line_and_exit_2(tmp_path: Path, extra: list[str]) -> None:
    src = _copy(tmp_path, "linear_short.jsonl")
    env = dict(os.environ, **isolated_env(tmp_path))
    out = subprocess.run(
        [*EXE, "--mode", "rpc", "--session", str(src), *extra],
        input=b'{"type":"get_state"}\n',
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 2 and out.stdout == b""
    lines = out.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiontree: error: rpc: "), lines
    assert extra[0].split("=")[0] in lines[0]


def test_the_sdk_sees_a_refused_flag_fail_at_start(tmp_path: Path) -> None:
    src = _copy(tmp_path, "linear_short.jsonl")
    with pytest.raises(PiError):
        with _client(tmp_path, session=str(src), extra_args=["--thinking", "high"]):
            pass


# ==== item 8: errors like the other commands ====


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--session", "/nonexistent/x.jsonl"], "x.jsonl"),
        (["--mode", "json"], "--mode"),
        (["--listen", "tcp:1"], "--listen"),
        (["--fork", "/nonexistent/y.jsonl"], "y.jsonl"),
        (["--session-id", "../evil"], "session"),
        (["--session", "a.jsonl", "--fork", "b.jsonl"], "--fork"),
    ],
)
def test_rpc_errors_use_the_cli_prefix_and_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    env = dict(os.environ, **isolated_env(tmp_path))
    out = subprocess.run([*EXE, *args], input=b"", capture_output=True, env=env, timeout=60, cwd=tmp_path)
    lines = out.stderr.decode().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("sessiontree: error: "), lines
    assert needle in lines[0]


def test_a_cli_error_and_an_rpc_error_look_alike(tmp_path: Path) -> None:
    env = dict(os.environ, **isolated_env(tmp_path))
    cli = subprocess.run(
        [sys.executable, "-m", "sessiontree", "info", str(tmp_path / "none.jsonl")], capture_output=True, env=env
    )
    rpc = subprocess.run([*EXE, "--session", str(tmp_path / "none.jsonl")], capture_output=True, env=env, input=b"")
    assert cli.returncode == rpc.returncode == 2
    assert cli.stderr.split(b":")[:2] == rpc.stderr.split(b":")[:2] == [b"sessiontree", b" error"]


# ==== item 3: the path of a new session ====


def test_new_session_reports_the_path_it_will_be_written_to(tmp_path: Path) -> None:
    src = _copy(tmp_path, "linear_short.jsonl")
    with _client(tmp_path, session=str(src)) as c:
        c.new_session()
        st = c.get_state()
        path = Path(st["sessionFile"])
        assert path != src and not path.exists() and path.name.endswith(f"_{st['sessionId']}.jsonl")
        assert c.get_session_stats()["sessionFile"] == str(path)
        c.set_session_name("now written")
        assert path.is_file() and c.get_state()["sessionFile"] == str(path)
        assert c.get_state()["sessionId"] == st["sessionId"]
    assert Session.open(path).session_id == st["sessionId"]


# ==== item 4: get_tree on a deep session ====


def _deep_session(tmp_path: Path, n: int) -> Path:
    s = Session.create(str(tmp_path), session_dir=tmp_path / "deep")
    for k in range(n):
        s.append_message({"role": "user" if k % 2 == 0 else "assistant", "content": f"m{k}", "timestamp": k})
    s.append_label_change(s.entries()[3].id, "four")
    s.close()
    return s.path


def test_get_tree_is_served_flat_and_paged_after_hello(tmp_path: Path) -> None:
    path = _deep_session(tmp_path, 1000)
    with _client(tmp_path, session=str(path)) as c:
        hello = c.request("hello")["data"]
        assert "get_tree.flat" in hello["capabilities"]
        nodes: list = []
        offset = 0
        while True:
            page = c.request("get_tree", format="flat", offset=offset, limit=300)["data"]
            assert len(page["nodes"]) <= 300 and page["total"] == 1001
            nodes += page["nodes"]
            if not page["hasMore"]:
                break
            offset = page["nextOffset"]
        assert c.get_state()["messageCount"] == 1000  # the client is still alive
    s = Session.open(path)
    assert [n["id"] for n in nodes] == [e.id for e in s.entries()]  # one chain: pre-order = file order
    assert nodes[0]["parentId"] is None and all(n["parentId"] == p["id"] for p, n in zip(nodes, nodes[1:]))
    assert [n["childCount"] for n in nodes] == [1] * 1000 + [0]
    assert nodes[3]["label"] == "four" and "labelTimestamp" in nodes[3]
    assert "label" not in nodes[4] and nodes[5]["entry"] == s.entries()[5].raw


def test_the_default_get_tree_keeps_pis_nested_shape(tmp_path: Path) -> None:
    path = _deep_session(tmp_path, 20)
    with _client(tmp_path, session=str(path)) as c:
        tree = c.get_tree()
    assert len(tree["tree"]) == 1 and set(tree["tree"][0]) == {"entry", "children"}
    depth, node = 1, tree["tree"][0]
    while node["children"]:
        node, depth = node["children"][0], depth + 1
    assert depth == 21


def test_the_flat_form_needs_hello_and_checks_its_arguments(tmp_path: Path) -> None:
    path = _deep_session(tmp_path, 5)
    with _client(tmp_path, session=str(path)) as c:
        nested = c.request("get_tree", format="flat")["data"]  # before hello: Pi's command, Pi's shape
        assert "tree" in nested and "nodes" not in nested
        c.request("hello")
        for bad in ({"format": "flat", "limit": -1}, {"format": "flat", "offset": "x"}, {"format": "xml"}):
            with pytest.raises(PiError) as info:
                c.request("get_tree", **bad)
            assert "get_tree" in str(info.value)
        assert json.dumps(c.request("get_tree", format="flat", limit=0)["data"]["nodes"]) == "[]"
