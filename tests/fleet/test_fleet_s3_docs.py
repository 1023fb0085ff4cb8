"""docs/fleet.md's recipe for S3-compatible stores runs as written against a local moto server
(the documented port replaced by the server's): the endpoint from ``AWS_ENDPOINT_URL`` and from
the URL's query give the same rows as the local files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("moto.server")

from tests.support.fleet_store import LoopbackS3  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent.parent


def _recipe() -> str:
    text = (ROOT / "docs" / "fleet.md").read_text()
    start = text.index("\n## S3-compatible stores")
    end = text.index("\n## ", start + 1)
    blocks = re.findall(r"```bash\n(.*?)```", text[start:end], re.S)
    assert len(blocks) == 1
    return blocks[0]


@pytest.mark.slow  # a server or a process pool starts (seconds)
def test_the_documented_s3_compatible_recipe_runs_against_moto(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    recipe = _recipe()
    assert "AWS_ENDPOINT_URL=http://127.0.0.1:9000" in recipe and "endpoint_override=127.0.0.1:9000" in recipe
    readme = (ROOT / "README.md").read_text()
    assert "AWS_ENDPOINT_URL" in readme and "endpoint_override" in readme
    sessions = ROOT / "tests" / "corpus" / "pi-generated"
    files = sorted(sessions.glob("mix_0*.jsonl"))[:3]
    assert files
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # for the upload
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # moto keeps its buckets per process: another test's uploads to "fleet" may be there, so
    # this one runs the recipe on a bucket of its own
    bucket = f"docs-recipe-{os.getpid()}-{tmp_path.name}".lower().replace("_", "-")[:63]
    server = LoopbackS3(bucket=bucket)
    try:
        server.upload(sessions, files, "sessions/--home-me--")
        script = recipe.replace("127.0.0.1:9000", f"127.0.0.1:{server.port}").replace("s3://fleet/", f"s3://{bucket}/")
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
        )
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    by_env = pq.read_table(tmp_path / "by-env.parquet").to_pylist()
    by_query = pq.read_table(tmp_path / "by-query.parquet").to_pylist()
    local = {f.name: f.stat().st_size for f in files}
    assert sorted(Path(r["path"].split("?")[0]).name for r in by_env) == sorted(local)
    strip = ("path", "path_bytes", "file_modified")
    key = lambda r: Path(r["path"].split("?")[0]).name  # noqa: E731
    assert sorted(({k: v for k, v in r.items() if k not in strip} for r in by_env), key=repr) == sorted(
        ({k: v for k, v in r.items() if k not in strip} for r in by_query), key=repr
    )
    assert all(r["entries"] > 0 and not r["error"] for r in by_env), [key(r) for r in by_env]
