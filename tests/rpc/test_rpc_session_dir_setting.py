"""``sessiontree rpc`` honours Pi's ``sessionDir`` setting (settings.json): Pi resolves
``--session-dir ?? PI_CODING_AGENT_SESSION_DIR ?? settings.getSessionDir()`` (sessions.md: "The CLI
option has highest precedence"); project ``<cwd>/.pi/settings.json`` over the global one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.rpc_client import PiRpcClient, isolated_env


def _started_dir(args: list[str], env: dict, cwd: Path) -> Path:
    client = PiRpcClient(["--mode", "rpc", *args], env=env, check_version=False, cwd=cwd)
    started = client.request({"type": "get_state"})["data"]["sessionFile"]
    assert client.close()[0] == 0
    return Path(started).parent


def _setup(tmp_path: Path) -> tuple[dict, Path]:
    env = isolated_env(tmp_path)
    proj = tmp_path / "proj"
    proj.mkdir()
    return env, proj


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")


def test_global_setting_session_dir(tmp_path: Path) -> None:
    env, proj = _setup(tmp_path)
    _write(Path(env["PI_CODING_AGENT_DIR"]) / "settings.json", {"sessionDir": str(tmp_path / "glob")})
    assert _started_dir([], env, proj) == tmp_path / "glob"


def test_project_setting_over_global(tmp_path: Path) -> None:
    env, proj = _setup(tmp_path)
    _write(Path(env["PI_CODING_AGENT_DIR"]) / "settings.json", {"sessionDir": str(tmp_path / "glob")})
    _write(proj / ".pi" / "settings.json", {"sessionDir": str(tmp_path / "projdir")})
    assert _started_dir([], env, proj) == tmp_path / "projdir"


def test_tilde_expanded(tmp_path: Path) -> None:
    env, proj = _setup(tmp_path)
    env["HOME"] = str(tmp_path / "home")
    _write(Path(env["PI_CODING_AGENT_DIR"]) / "settings.json", {"sessionDir": "~/pi-sessions"})
    assert _started_dir([], env, proj) == tmp_path / "home" / "pi-sessions"


def test_env_and_cli_take_precedence(tmp_path: Path) -> None:
    env, proj = _setup(tmp_path)
    _write(proj / ".pi" / "settings.json", {"sessionDir": str(tmp_path / "projdir")})
    cli = tmp_path / "cli"
    assert _started_dir(["--session-dir", str(cli)], env, proj) == cli
    env["PI_CODING_AGENT_SESSION_DIR"] = str(tmp_path / "envroot")
    assert _started_dir([], env, proj) == tmp_path / "envroot"  # the folder itself, no --<cwd>--
    assert _started_dir(["--session-dir", str(cli)], env, proj) == cli


def test_bad_setting_ignored(tmp_path: Path) -> None:
    env, proj = _setup(tmp_path)
    _write(Path(env["PI_CODING_AGENT_DIR"]) / "settings.json", {"sessionDir": 7})
    got = _started_dir([], env, proj)
    assert got.is_relative_to(Path(env["PI_CODING_AGENT_DIR"]) / "sessions")
