"""``tests/support/goldens.py``'s regenerated ``scale/`` sessions: safe under concurrent runs.

Two test runs at once once collided on the cache's fixed-name temp file; now each run writes a
temp file of its own and renames it into place, a cached file is checked before use, and the
cache folder is this user's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import goldens

ROOT = Path(__file__).resolve().parent.parent


def _fake_corpus(tmp_path: Path) -> tuple[Path, str]:
    """A corpus with one 1 MB scale golden (its sha256 from a run of the generator)."""
    made = tmp_path / "made.jsonl"
    subprocess.run(
        [sys.executable, str(goldens.GENERATOR), "--megabytes", "1", "--seed", "5", "--branchiness", "0.03"]
        + ["--out", str(made)],
        check=True,
        capture_output=True,
    )
    import hashlib

    sha = hashlib.sha256(made.read_bytes()).hexdigest()
    corpus = tmp_path / "corpus"
    (corpus / "scale").mkdir(parents=True)
    (corpus / "scale" / "gen-1mb-seed5.jsonl.golden.json").write_text(json.dumps({"file_sha256": sha}))
    return corpus, sha


@pytest.mark.slow
def test_concurrent_runs_each_get_the_whole_file_and_leave_no_temp(tmp_path):
    corpus, sha = _fake_corpus(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    code = (
        "import hashlib, sys\n"
        "from pathlib import Path\n"
        "from tests.support import goldens\n"
        f"goldens.CORPUS = Path({str(corpus)!r})\n"
        f"goldens.scale_cache = lambda: Path({str(cache)!r})\n"
        "p = goldens.session_file('scale', 'gen-1mb-seed5')\n"
        "print(p, hashlib.sha256(p.read_bytes()).hexdigest())\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e.decode() for _, e in outs]
    assert {o.decode().split() == [str(cache / f"{sha}.jsonl"), sha] for o, _ in outs} == {True}
    assert sorted(os.listdir(cache)) == [f"{sha}.jsonl"]


@pytest.mark.slow
def test_a_damaged_cached_file_is_made_again(tmp_path, monkeypatch):
    corpus, sha = _fake_corpus(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(goldens, "CORPUS", corpus)
    monkeypatch.setattr(goldens, "scale_cache", lambda: cache)
    goldens._scale_session.cache_clear()
    (cache / f"{sha}.jsonl").write_bytes(b"half a file")
    try:
        p = goldens.session_file("scale", "gen-1mb-seed5")
    finally:
        goldens._scale_session.cache_clear()
    import hashlib

    assert hashlib.sha256(p.read_bytes()).hexdigest() == sha


def test_the_cache_folder_is_never_a_planted_link(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp_path / f"sessiontree-scale-cache-{os.getuid()}"
    planted.symlink_to(elsewhere)
    got = goldens.scale_cache()
    assert got != planted and got.is_dir() and not got.is_symlink()
    os.rmdir(got)
    planted.unlink()
    assert goldens.scale_cache() == planted and (planted.stat().st_mode & 0o777) == 0o700


def test_a_stored_golden_is_its_corpus_file():
    assert (
        goldens.session_file("pi-generated", "linear_short") == goldens.CORPUS / "pi-generated" / "linear_short.jsonl"
    )
