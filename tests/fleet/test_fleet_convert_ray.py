"""``convert_all(engine="ray")`` on a local Ray cluster (num_cpus=2): the same rows and the same
output bytes as the local engine, failures as rows."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from sessiontree.convert import convert_all  # noqa: E402
from tests.convert.test_convert_all import _store  # noqa: E402


def test_ray_converts_a_store_as_the_local_engine_does(ray_cluster, tmp_path):
    s = _store(tmp_path)
    local = convert_all(s["root"], tmp_path / "local", engine="local", workers=1)
    remote = convert_all(s["root"], tmp_path / "ray", engine="ray")
    assert [r.path for r in remote.rows] == [r.path for r in local.rows]
    assert remote.failed == local.failed == 1
    assert remote.by_format == local.by_format
    for a, b in zip(local.rows, remote.rows):
        assert (a.error_kind, a.lines, a.written, a.problems, len(a.files)) == (
            b.error_kind,
            b.lines,
            b.written,
            b.problems,
            len(b.files),
        )
        for fa, fb in zip(a.files, b.files):
            assert Path(fa).relative_to(tmp_path / "local") == Path(fb).relative_to(tmp_path / "ray")
            # the same bytes but for the output path named in sidechain headers
            text_a = Path(fa).read_text().replace(str(tmp_path / "local"), "OUT")
            text_b = Path(fb).read_text().replace(str(tmp_path / "ray"), "OUT")
            assert text_a == text_b
