"""RPC ``search`` (a command beyond Pi, after ``hello``: docs/divergences.md row 34)."""

from __future__ import annotations

from pathlib import Path

from sessiontree import Session
from sessiontree.rpc import RpcServer

from ._build import Builder


def _server(tmp_path: Path) -> tuple[RpcServer, dict[str, str]]:
    b = Builder(tmp_path / "s.jsonl")
    e = {"a": b.user("rpc needle one"), "b": b.assistant("other words")}
    e["c"] = b.user("second needle", parent=e["a"])
    b.write()
    return RpcServer(Session.open(b.path)), e


def test_rpc_search_after_hello(tmp_path):
    server, e = _server(tmp_path)
    try:
        assert server.handle({"type": "search", "query": "needle"})["error"] == "Unknown command: search"
        assert server.handle({"type": "hello"})["success"]
        r = server.handle({"type": "search", "query": "needle", "id": "1"})
        assert r["success"] and r["id"] == "1", r
        d = r["data"]
        assert d["total"] == 2 and d["nextOffset"] is None and d["tookMs"] >= 0
        by = {h["entryId"]: h for h in d["hits"]}
        assert by[e["c"]]["branchState"] == "active"
        assert by[e["a"]]["branchState"] == "active"
        r = server.handle({"type": "search", "query": "other", "branchState": "abandoned"})
        (h,) = r["data"]["hits"]
        assert (h["entryId"], h["forkPoint"]) == (e["b"], e["a"])
        r = server.handle({"type": "search", "query": "needle", "limit": 1})
        assert r["data"]["nextOffset"] == 1
        r = server.handle({"type": "search", "query": "needle", "sessionDir": str(tmp_path)})
        assert r["data"]["total"] == 2
    finally:
        server.close()


def test_rpc_search_bad_query_is_one_line(tmp_path):
    server, _ = _server(tmp_path)
    try:
        server.handle({"type": "hello"})
        r = server.handle({"type": "search", "query": '"open'})
        assert r["success"] is False and "bad query" in r["error"] and "\n" not in r["error"]
        r = server.handle({"type": "search", "query": 3})
        assert r["success"] is False and '"query" must be a string' in r["error"]
        r = server.handle({"type": "search", "query": "x", "limit": -1})
        assert r["success"] is False
        r = server.handle({"type": "search", "query": "x", "sessionDir": "s3://bucket/prefix"})
        assert r["success"] is False and "not a URL" in r["error"]
        assert server.handle({"type": "get_state"})["success"]
    finally:
        server.close()


def test_rpc_search_names_a_non_utf8_file_as_the_cli_does(tmp_path):
    """A hit in a file whose name is not UTF-8: ``path`` has ``\\xNN`` for the byte (as
    ``search --json`` and the fleet's rows), over the current session and over a ``sessionDir``;
    the response is strict UTF-8 JSON (no lone surrogate escape)."""
    import json
    import os
    import subprocess
    import sys

    from sessiontree.rpc.protocol import encode

    b = Builder(tmp_path / "s.jsonl")
    eid = b.user("rpc needle one")
    b.write()
    odd = os.path.join(os.fsencode(tmp_path), b"caf\xe9.jsonl")
    os.rename(os.fsencode(b.path), odd)
    want = os.fsdecode(os.fsencode(tmp_path)) + "/caf\\xe9.jsonl"
    server = RpcServer(Session.open(os.fsdecode(odd)))
    try:
        server.handle({"type": "hello"})
        for extra in ({}, {"sessionDir": str(tmp_path)}):
            r = server.handle({"type": "search", "query": "needle", **extra})
            (h,) = r["data"]["hits"]
            assert (h["path"], h["entryId"]) == (want, eid), extra
            line = encode(r)
            line.decode("utf-8")
            assert b"\\ud" not in line and json.loads(line)["data"]["hits"][0]["path"] == want
    finally:
        server.close()
    p = subprocess.run([sys.executable, "-m", "sessiontree", "search", "needle", odd, "--json"], capture_output=True)
    assert p.returncode == 0 and json.loads(p.stdout)["hits"][0]["path"] == want
