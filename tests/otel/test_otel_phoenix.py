"""End to end: the exported file loaded into a real tracing backend, Arize Phoenix (from PyPI,
run offline on 127.0.0.1), through its OTLP/HTTP endpoint, and the spans read back through its
REST API. Slow (Phoenix starts in seconds); ``.ci/run`` installs it through the test extra."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sessiontree.otel import export

from .otlp_check import attrs, read_spans, to_proto

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    if shutil.which("phoenix", path=os.path.dirname(sys.executable)) is None:
        pytest.skip("arize-phoenix is not installed (pip install '.[test]' brings it; .ci/run does)")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = dict(
        os.environ,
        PHOENIX_HOST="127.0.0.1",
        PHOENIX_PORT=str(port),
        PHOENIX_GRPC_PORT=str(grpc),
        PHOENIX_WORKING_DIR=str(work),
        PHOENIX_TELEMETRY_ENABLED="false",
        PHOENIX_SQL_DATABASE_URL=f"sqlite:///{work}/phoenix.db",
    )
    log = open(work / "phoenix.log", "wb")
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "phoenix"), "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                _get(f"{base}/v1/projects")
                break
            except (urllib.error.URLError, OSError, ValueError) as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise AssertionError(
                        "phoenix did not start: " + (work / "phoenix.log").read_text()[-3000:]
                    ) from exc
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _post(base: str, body: bytes, ctype: str) -> int:
    req = urllib.request.Request(f"{base}/v1/traces", data=body, headers={"Content-Type": ctype}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status


def test_phoenix_reads_back_every_span(phoenix, tmp_path):
    src = ROOT / "tests" / "corpus" / "pi-generated" / "branch_summaries.jsonl"
    out = tmp_path / "t.jsonl"
    rows = export(src, out, content="full")
    assert rows[0]["error"] is None
    spans = read_spans(out)
    for line in out.read_bytes().splitlines():
        # Phoenix's OTLP/HTTP receiver takes the protobuf encoding: each line as the official message
        assert _post(phoenix, to_proto(line).SerializeToString(), "application/x-protobuf") in (200, 204)
    want = {sp["spanId"]: sp for sp in spans}
    got: dict[str, dict] = {}
    deadline = time.monotonic() + 120
    while len(got) < len(want) and time.monotonic() < deadline:
        cursor = None
        got = {}
        while True:
            q = f"{phoenix}/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
            page = _get(q)
            for sp in page["data"]:
                got[sp["context"]["span_id"]] = sp
            cursor = page.get("next_cursor")
            if not cursor:
                break
        time.sleep(0.5)
    assert set(got) == set(want)
    for sid, sp in want.items():
        back = got[sid]
        assert back["name"] == sp["name"]
        assert back["context"]["trace_id"] == sp["traceId"]
        assert (back.get("parent_id") or None) == sp.get("parentSpanId")
        a = attrs(sp)
        battrs = back.get("attributes") or {}
        if "gen_ai.request.model" in a:
            assert battrs.get("gen_ai.request.model") == a["gen_ai.request.model"]
        if "gen_ai.usage.input_tokens" in a:
            assert int(battrs["gen_ai.usage.input_tokens"]) == a["gen_ai.usage.input_tokens"]
