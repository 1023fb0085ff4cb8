"""``sessiontree otel --engine ray`` on a local Ray cluster (num_cpus=2, one ``ray.init`` for the
module, as the fleet's Ray tests): the same file as the local engine, byte for byte and in
source order, over the corpus (unreadable files as rows) and the converted fixtures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pytest.importorskip("pyarrow")

from sessiontree.cli import main  # noqa: E402
from sessiontree.otel import export  # noqa: E402

from .otlp_check import check_registry, check_structure, read_spans  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The pi-generated corpus and a file that is not a session, in one folder."""
    root = tmp_path_factory.mktemp("store")
    for p in sorted((ROOT / "tests" / "corpus" / "pi-generated").glob("*.jsonl")):
        shutil.copy(p, root / p.name)
    (root / "zz_not_a_session.jsonl").write_text("nope\n")
    return root


@pytest.mark.slow  # a Ray cluster's start and two exports: ~60 s on the loaded 2-core machine (CI runs it)
def test_ray_and_local_write_the_same_file(ray_cluster, store, tmp_path):
    for content in ("none", "full"):
        local, remote = tmp_path / f"local-{content}.jsonl", tmp_path / f"ray-{content}.jsonl"
        rows_local = export(store, local, content=content)
        rows_ray = export(store, remote, content=content, engine="ray")
        assert rows_ray == rows_local
        assert remote.read_bytes() == local.read_bytes()
        failed = {Path(r["path"]).name for r in rows_ray if r["error"] is not None}
        assert "zz_not_a_session.jsonl" in failed and len(failed) < len(rows_ray) // 2
        assert sum(r["spans"] for r in rows_ray) == len(read_spans(remote)) > 500
    spans = read_spans(remote)
    check_registry(spans)
    check_structure(spans)


@pytest.mark.slow  # see above
def test_the_cli_on_ray(ray_cluster, store, tmp_path, capsys):
    out = tmp_path / "t.jsonl"
    assert main(["otel", str(store), "-o", str(out), "--engine", "ray", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["failed"] >= 1 and doc["sessions"] == len(list(store.glob("*.jsonl")))
    assert doc["spans"] == len(read_spans(out))
