"""A generated store of small Pi sessions in Pi's layout, for the fleet tests (built at run time
with ``tests/tools/gen_session.py``; nothing stored in the repo).

``make_store(root, count)``: ``root/--home-dev-p<k>--/<timestamp>_<id>.jsonl``, sizes from 6 to
90 entries (mostly linear, some branches and compactions), every 25th session forked from an
earlier one (its header names the earlier file as ``parentSession``), every 40th named."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

GEN = Path(__file__).resolve().parent.parent / "tools" / "gen_session.py"


def _gen():
    spec = importlib.util.spec_from_file_location("_fleet_gen_session", GEN)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _session_lines(gen, base, seed: int, entries: int, cwd: str) -> list[str]:
    """One session from the generator's entry steps, reusing ``base``'s text pools (building
    them is what makes one ``gen_session.py`` run slow)."""
    g = copy.copy(base)
    g.r = random.Random(seed)
    g.counter = 0
    g.id_add = g.r.getrandbits(32)
    g.t_ms = 1767225600000 + g.r.randrange(0, 86400000)
    g.leaf, g.path, g.all_recent, g.call_n, g.model = None, [], [], 0, gen.MODELS[0]
    iso, _ = g.ts()
    header = {"type": "session", "version": 3, "id": f"gen-{seed:08d}-{g.id_add:08x}", "timestamp": iso, "cwd": cwd}
    lines = [gen.dumps(header), g.entry("model_change", {"provider": g.model[0], "modelId": g.model[1]}, "model")]
    while len(lines) - 1 < entries:
        lines.extend(g.step()[: entries - (len(lines) - 1)])
    return lines


def make_store(root: Path, count: int, seed: int = 13) -> list[Path]:
    gen = _gen()
    base = gen.Gen(seed, 0.05, 0.05)
    rnd = random.Random(seed)
    paths: list[Path] = []
    for i in range(count):
        folder = root / f"--home-dev-p{i % 7}--"
        folder.mkdir(parents=True, exist_ok=True)
        entries = rnd.choice((6, 12, 20, 35, 50, 70, 90))
        lines = _session_lines(gen, base, 1000 + i, entries, f"/home/dev/p{i % 7}")
        header = json.loads(lines[0])
        sid = header["id"]
        if i % 25 == 24 and paths:
            header["parentSession"] = str(paths[rnd.randrange(len(paths))])
            lines[0] = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
        if i % 40 == 7:
            last = json.loads(lines[-1])
            info = {
                "type": "session_info",
                "id": f"n{i:07x}",
                "parentId": last["id"],
                "timestamp": last["timestamp"],
                "name": f"  session {i}  ",
            }
            lines.append(json.dumps(info, separators=(",", ":")))
        ts = header["timestamp"].replace(":", "-").replace(".", "-")
        path = folder / f"{ts}_{sid}.jsonl"
        path.write_bytes(("\n".join(lines) + "\n").encode())
        paths.append(path)
    return paths


def shared_store(tmp_path_factory, count: int = 1000) -> tuple[Path, list[Path]]:
    """The generated store, made once per test run (every fleet test module shares it)."""
    root = tmp_path_factory.getbasetemp() / f"fleet-store-{count}" / "sessions"
    done = root.parent / ".done"
    if done.exists():
        return root, sorted(root.glob("*/*.jsonl"))
    paths = make_store(root, count)
    done.touch()
    return root, sorted(paths)


@contextlib.contextmanager
def moto_credentials() -> Iterator[None]:
    """moto's test credentials in the environment while the block runs, the old values back after."""
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class LoopbackS3:
    """moto's S3-compatible server on 127.0.0.1 (an ephemeral port), holding ``bucket``;
    ``fs`` is a ``pyarrow.fs.S3FileSystem`` on it, ``uri(prefix)`` an ``s3://`` URL naming the
    endpoint in its query (credentials come from the environment the caller sets). moto keeps
    one state per process, shared by every server: a module that leaves objects behind names a
    bucket of its own."""

    def __init__(self, bucket: str = "fleet"):
        import logging
        import socket

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        from pyarrow import fs as pafs

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.bucket = bucket
        self.fs = pafs.S3FileSystem(
            access_key="testing",
            secret_key="testing",
            scheme="http",
            region="us-east-1",
            endpoint_override=f"127.0.0.1:{self.port}",
            allow_bucket_creation=True,
        )
        self.fs.create_dir(bucket)

    def uri(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}?endpoint_override=127.0.0.1:{self.port}&scheme=http&region=us-east-1"

    def upload(self, root: Path, paths: list[Path], prefix: str) -> dict[str, Path]:
        """Objects ``<bucket>/<prefix>/<path relative to root>``; returns {s3 url: local path}."""
        out = {}
        for p in paths:
            key = f"{self.bucket}/{prefix}/{p.relative_to(root).as_posix()}"
            with self.fs.open_output_stream(key) as fh:
                fh.write(p.read_bytes())
            out[f"s3://{key}"] = p
        return out

    def close(self) -> None:
        self.server.stop()
