"""Benchmark inputs: generated on the fly, cached in a temp folder, never committed.

Sizes run from 1 MB up to ``SESSIONTREE_BENCH_MAX_MB`` (default 50, for CI; 1024 for the
full run). Files come from ``tests/tools/gen_session.py`` (deterministic: same seed, same
bytes) and are cached in ``SESSIONTREE_BENCH_DIR`` (default ``$TMPDIR/sessiontree-bench``).

Run: ``pytest benches/ --benchmark-only`` (``pip install -e '.[bench]'`` first).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the open benchmarks measure the scan: no saved index unless a run asks for one (the saved
# index has its own script, benches/saved_index.py)
os.environ.setdefault("SESSIONTREE_INDEX_CACHE", "off")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from inputs import (  # noqa: E402
    MAX_MB,
    SIZES,
    TAIL_MB,
    bench_dir,
    session_file,
    session_with_tail,
    sessions_dir,
)

__all__ = ["MAX_MB", "SIZES", "TAIL_MB", "bench_dir", "session_file", "session_with_tail", "sessions_dir"]


def pytest_report_header(config):
    return f"sessiontree benches: sizes {SIZES} MB (SESSIONTREE_BENCH_MAX_MB={MAX_MB}), inputs in {bench_dir()}"


@pytest.fixture
def scratch_copy(tmp_path):
    """Copy a cached input into a temp folder (for benchmarks that append to it)."""

    def copy(path: Path) -> Path:
        dst = tmp_path / path.name
        shutil.copyfile(path, dst)
        return dst

    return copy


@pytest.fixture(autouse=True)
def _gc_collect():
    """Start every benchmark from a collected heap (the orjson baselines leave a lot behind)."""
    import gc

    gc.collect()
    yield
    gc.collect()


os.environ.setdefault("TMPDIR", tempfile.gettempdir())
