"""``PI_CODING_AGENT_SESSION_DIR`` is the folder that holds the session files, as Pi 1.6 uses it:
Pi's ``main.ts`` resolves ``--session-dir ?? expandTildePath($PI_CODING_AGENT_SESSION_DIR) ??
settings.getSessionDir()`` and hands that folder to ``SessionManager.create/continueRecent/list/
open/forkFrom(…, sessionDir)``, which use it as it is (``sessionDir ?? getDefaultSessionDir(cwd)``:
the ``--<cwd>--`` folder is only the default's). ``listAll(sessionDir)`` lists that one folder.
Without the variable, sessions live in ``<agent>/sessions/--<cwd>--/``.

One test per reader: ``paths``, ``Session.create``/``continue_recent``/``fork_from``,
``list_sessions``, and ``sessiontree rpc`` (a new session, ``--continue``, ``--session``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiontree import Session, list_sessions
from sessiontree.paths import default_session_dir, encode_cwd, session_dir_env, sessions_root
from tests.support.rpc_client import PiRpcClient, isolated_env

CWD = "/home/me/proj"


@pytest.fixture
def env_dir(tmp_path, monkeypatch):
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    d = tmp_path / "flat-sessions"
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(d))
    return d


def _session(sdir: Path, cwd: str = CWD) -> Session:
    s = Session.create(cwd, session_dir=sdir)
    s.append_message({"role": "user", "content": "hi", "timestamp": 1})
    s.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2})
    return s


def test_paths_the_variable_is_the_folder_itself(env_dir, tmp_path):
    assert session_dir_env() == env_dir
    assert default_session_dir(CWD) == env_dir  # no --<cwd>-- below it
    assert default_session_dir("/elsewhere") == env_dir
    assert sessions_root() == tmp_path / "agent" / "sessions"  # Pi getSessionsDir: the agent's


def test_paths_without_the_variable_sessions_are_grouped_by_cwd(tmp_path, monkeypatch):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    assert session_dir_env() is None
    assert default_session_dir(CWD) == tmp_path / "agent" / "sessions" / encode_cwd(CWD)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "")  # empty is unset, as in Pi
    assert session_dir_env() is None


def test_paths_tilde_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "~/pi-sessions")
    assert default_session_dir(CWD) == tmp_path / "home" / "pi-sessions"


def test_session_create_continue_and_fork_write_into_the_folder(env_dir, tmp_path):
    s = Session.create(CWD)
    s.append_message({"role": "user", "content": "hi", "timestamp": 1})
    s.append_message({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 2})
    assert s.path.parent == env_dir
    again = Session.continue_recent(CWD)
    assert again.path == s.path
    fork = Session.fork_from(s.path, "/other/cwd")
    assert fork.path.parent == env_dir
    assert not (tmp_path / "agent" / "sessions").exists()


def test_list_sessions_reads_the_folder(env_dir, tmp_path):
    a = _session(env_dir, CWD)
    b = _session(env_dir, "/other/cwd")
    elsewhere = _session(tmp_path / "agent" / "sessions" / encode_cwd(CWD), CWD)
    listed = {i.path for i in list_sessions(CWD)}  # Pi list(cwd, sessionDir): that folder
    assert a.path in listed and elsewhere.path not in listed
    # (whether b, another cwd's session in the same folder, is listed for CWD is left open:
    # newer Pi sources filter list(cwd, sessionDir) by the header's cwd, older ones do not)
    assert {i.path for i in list_sessions()} == {a.path, b.path}  # Pi listAll(sessionDir): that folder


def _rpc(args: list[str], env: dict, cwd: Path) -> str:
    client = PiRpcClient(["--mode", "rpc", *args], env=env, check_version=False, cwd=cwd)
    got = client.request({"type": "get_state"})["data"]["sessionFile"]
    assert client.close()[0] == 0
    return got


def test_rpc_new_continue_and_session_use_the_folder(tmp_path):
    env = isolated_env(tmp_path)
    flat = tmp_path / "flat"
    env["PI_CODING_AGENT_SESSION_DIR"] = str(flat)
    proj = tmp_path / "proj"
    proj.mkdir()
    started = Path(_rpc([], env, proj))
    assert started.parent == flat
    s = _session(flat, str(proj))
    assert Path(_rpc(["--continue"], env, proj)) == s.path
    assert Path(_rpc(["--session", str(s.session_id)[:8]], env, proj)) == s.path
    # a session opened by file keeps the folder for the sessions made from it (Pi open(path, sessionDir))
    other = _session(tmp_path / "elsewhere", str(proj))
    client = PiRpcClient(["--mode", "rpc", "--session", str(other.path)], env=env, check_version=False, cwd=proj)
    new = client.request({"type": "new_session"})
    assert new["success"], json.dumps(new)
    got = client.request({"type": "get_state"})["data"]["sessionFile"]
    assert client.close()[0] == 0
    assert Path(got).parent == flat
