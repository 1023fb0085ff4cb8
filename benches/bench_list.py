"""Listing a folder of many sessions (sessiontree.list_sessions; Pi's session picker)."""

from __future__ import annotations

import pytest

from inputs import MAX_MB, sessions_dir
import sessiontree

COUNTS = [50, 500] if MAX_MB >= 50 else [50]


@pytest.mark.parametrize("count", COUNTS)
def bench_list_sessions(benchmark, count):
    d = sessions_dir(count, entries=60)
    benchmark.group = "list_sessions"
    assert (
        len(benchmark.pedantic(sessiontree.list_sessions, kwargs={"session_dir": d}, rounds=5, warmup_rounds=1))
        == count
    )
