"""``sessiontree rpc`` opens through the saved index (``--session`` and ``switch_session``): the
second server over an unchanged file loads the saved index (it is not written again) and
answers exactly as the first."""

from __future__ import annotations

import os

import orjson

from tests.support.rpc_client import PiRpcClient, isolated_env


def _write(p, n, sid="s1"):
    lines = [{"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}]
    parent = None
    for i in range(n):
        eid = f"{sid}{i:05d}"
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": f"q{i}"},
            }
        )
        parent = eid
    p.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def _answers(p, other, env):
    c = PiRpcClient(["--mode", "rpc", "--session", str(p)], env=env)
    try:
        out = [c.request({"id": "1", "type": "get_messages"})]
        out.append(c.request({"id": "2", "type": "switch_session", "sessionPath": str(other)}))
        out.append(c.request({"id": "3", "type": "get_messages"}))
    finally:
        c.close()
    return out


def test_rpc_session_and_switch_session_use_the_saved_index(tmp_path):
    folder = tmp_path / "cache"
    env = dict(isolated_env(tmp_path), SESSIONTREE_INDEX_CACHE=str(folder), SESSIONTREE_INDEX_CACHE_MIN_BYTES="0")
    p, q = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write(p, 120, "s1")
    _write(q, 80, "s2")
    first = _answers(p, q, env)
    saved = sorted(folder.glob("*.stidx"))
    assert len(saved) == 2  # both opens saved their index
    stamps = [f.stat().st_ino for f in saved]  # a save renames a new file in: a new inode
    second = _answers(p, q, env)
    assert second == first
    assert [f.stat().st_ino for f in saved] == stamps  # loaded (a load sets mtime: its last use), not saved again
    off = _answers(p, q, dict(env, SESSIONTREE_INDEX_CACHE="off"))
    assert off == first
    assert os.path.getsize(p) > 0
