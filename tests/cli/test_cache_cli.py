"""``sessiontree cache info|clear`` and the CLI/RPC opening through the saved index."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import orjson

from sessiontree import Session


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sessiontree", *args], capture_output=True, text=True, env=env)


def _write(p, n):
    lines = [{"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}]
    parent = None
    for i in range(n):
        lines.append(
            {
                "type": "message",
                "id": f"e{i:05d}",
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": f"q{i}"},
            }
        )
        parent = f"e{i:05d}"
    p.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def test_cache_info_and_clear_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE_MIN_BYTES", "0")
    folder = tmp_path / "c"
    env = dict(os.environ, SESSIONTREE_INDEX_CACHE=str(folder), SESSIONTREE_INDEX_CACHE_MIN_BYTES="0")
    doc = json.loads(_run("cache", "info", "--json", env=env).stdout)
    assert doc["folder"] == str(folder) and doc["exists"] is False and doc["files"] == 0
    p = tmp_path / "s.jsonl"
    _write(p, 100)
    assert _run("info", str(p), env=env).returncode == 0  # a CLI open saves the index
    doc = json.loads(_run("cache", "info", "--json", env=env).stdout)
    assert doc["files"] == 1 and doc["bytes"] > 0
    assert Session.open(p, index_cache=folder).index_cache_state()[0] == "warm"
    out = _run("cache", "clear", env=env)
    assert out.returncode == 0 and "removed 1" in out.stdout
    assert json.loads(_run("cache", "info", "--json", env=env).stdout)["files"] == 0
    off = json.loads(_run("cache", "info", "--json", env=dict(env, SESSIONTREE_INDEX_CACHE="off")).stdout)
    assert off["enabled"] is False
