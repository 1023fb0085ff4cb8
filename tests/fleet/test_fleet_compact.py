"""compact_sessions (local engine) against a loopback OpenAI-compatible server through the real
OpenAI SDK: every session over the threshold gets exactly one compaction with usage and cost,
concurrency is bounded, reruns do nothing twice, and a run killed mid-way (SIGKILL) and
restarted leaves no session with two."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("openai")

from tests.support.fleet_store import shared_store  # noqa: E402
from tests.summarizers.test_summarizer_http import FAKE_USAGE, FakeLLM, openai_sse  # noqa: E402

from sessiontree import CompactionSettings, Session  # noqa: E402
from sessiontree.fleet import compact_sessions, session_stats  # noqa: E402
from sessiontree.summarizers import OpenAICompatSummarizer, Pricing, RetryPolicy  # noqa: E402

WINDOW = 56_384  # over the threshold: context tokens > 40,000 (about half the generated sessions)
SETTINGS = CompactionSettings(keep_recent_tokens=2_000)
FAST = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05, timeout=20.0)
PRICING = Pricing(input=3.0, output=15.0)


class CountingLLM(FakeLLM):
    """The fake server, answering after ``delay`` seconds and recording the most requests in
    flight at once."""

    def __init__(self, delay: float = 0.0):
        self.in_flight = 0
        self.max_in_flight = 0
        self.count_lock = threading.Lock()
        answer = openai_sse("## Goal\nSUMMARY OF THE SESSION", usage=FAKE_USAGE)

        def act(h) -> None:
            with self.count_lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                time.sleep(delay)
                answer(h)
            finally:
                with self.count_lock:
                    self.in_flight -= 1

        super().__init__(act)


def _copy_store(src: list[Path], dest: Path) -> list[Path]:
    out = []
    for p in src:
        q = dest / p.parent.name / p.name
        q.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, q)
        out.append(q)
    return out


def _compactions(path: Path) -> int:
    s = Session.open(path)
    return sum(1 for e in s.iter_entries() if e.type == "compaction")


@pytest.fixture
def small_store(tmp_path_factory, tmp_path) -> tuple[Path, list[Path]]:
    _, paths = shared_store(tmp_path_factory)
    root = tmp_path / "sessions"
    return root, _copy_store(paths[:40], root)


def _needing(root: Path) -> set[str]:
    rows = session_stats(root, workers=1, context_window=WINDOW).to_pylist()
    return {r["path"] for r in rows if r["should_compact"] and r["leaf_type"] != "compaction"}


def test_compacts_each_needing_session_once_with_usage(small_store, tmp_path):
    root, paths = small_store
    need = _needing(root)
    assert 0 < len(need) < len(paths)
    before = {str(p): _compactions(p) for p in paths}
    fake = CountingLLM(delay=0.05)
    try:
        summ = OpenAICompatSummarizer("fake-model", base_url=fake.openai_url, retry=FAST, pricing=PRICING)
        out = compact_sessions(
            root, summ, context_window=WINDOW, settings=SETTINGS, concurrency=3, outcomes=tmp_path / "o.jsonl"
        )
    finally:
        fake.close()
    rows = {r["path"]: r for r in out.to_pylist()}
    assert set(rows) == {str(p) for p in paths}
    for p in paths:
        got = _compactions(p) - before[str(p)]
        r = rows[str(p)]
        if str(p) in need and r["outcome"] == "nothing_to_compact":  # nothing before the cut: Pi's rule
            assert got == 0
        elif str(p) in need:
            assert got == 1 and r["outcome"] == "compacted", r
            assert r["input_tokens"] >= FAKE_USAGE["prompt_tokens"] and r["output_tokens"] >= 56
            assert r["cost"] > 0 and r["compaction_entry_id"] == Session.open(p).leaf_id
            assert r["tokens_before"] > WINDOW - SETTINGS.reserve_tokens
        else:
            assert got == 0 and r["outcome"] in ("under_threshold", "already_compacted"), r
    compacted = {p for p, r in rows.items() if r["outcome"] == "compacted"}
    assert len(compacted) >= len(need) // 2
    assert 1 < fake.max_in_flight <= 3
    # the outcomes file holds the same rows; a rerun with it does nothing
    lines = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert sorted(x["path"] for x in lines) == sorted(rows)
    fake = CountingLLM()
    try:
        summ = OpenAICompatSummarizer("fake-model", base_url=fake.openai_url, retry=FAST)
        again = compact_sessions(
            root, summ, context_window=WINDOW, settings=SETTINGS, concurrency=3, outcomes=tmp_path / "o.jsonl"
        )
        # only the compacted sessions are skipped (issue 19, item 24); the others are looked at again
        assert again.num_rows == len(paths) - len(compacted)
        assert {r["outcome"] for r in again.to_pylist()} <= {
            "already_compacted",
            "under_threshold",
            "nothing_to_compact",
        }
        assert json.loads(again.schema.metadata[b"sessiontree.skipped"]) == {"compacted": len(compacted)}
        # without the outcomes file every session is looked at, and none compacted again
        fresh = compact_sessions(root, summ, context_window=WINDOW, settings=SETTINGS, concurrency=3).to_pylist()
        assert not fake.requests
    finally:
        fake.close()
    assert {r["outcome"] for r in fresh} <= {"already_compacted", "under_threshold", "nothing_to_compact"}
    assert all(_compactions(p) - before[str(p)] == (1 if str(p) in compacted else 0) for p in paths)


def test_killed_mid_run_and_restarted_none_gets_two(small_store, tmp_path):
    root, paths = small_store
    need = _needing(root)
    before = {str(p): _compactions(p) for p in paths}
    outcomes = tmp_path / "outcomes.jsonl"
    fake = CountingLLM(delay=0.3)
    try:
        code = (
            "import sys\n"
            "from sessiontree.fleet import compact_sessions\n"
            "from sessiontree.summarizers import OpenAICompatSummarizer, RetryPolicy\n"
            f"s = OpenAICompatSummarizer('fake-model', base_url={fake.openai_url!r}, retry=RetryPolicy(timeout=20))\n"
            "from sessiontree import CompactionSettings\n"
            f"compact_sessions({str(root)!r}, s, context_window={WINDOW}, concurrency=2, outcomes={str(outcomes)!r},\n"
            "                 settings=CompactionSettings(keep_recent_tokens=2000))\n"
        )
        proc = subprocess.Popen([sys.executable, "-c", code])
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if outcomes.exists() and outcomes.read_text().count('"compacted"') >= 3:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        first = [json.loads(x) for x in outcomes.read_text().splitlines() if x.strip()]
        assert 0 < len(first) < len(paths)
        summ = OpenAICompatSummarizer("fake-model", base_url=fake.openai_url, retry=FAST)
        rest = compact_sessions(
            root, summ, context_window=WINDOW, settings=SETTINGS, concurrency=2, outcomes=outcomes
        ).to_pylist()
    finally:
        fake.close()
    done_first = {r["path"] for r in first if r["outcome"] == "compacted"}
    assert not done_first & {r["path"] for r in rest}  # the rerun skipped what was compacted
    all_rows = first + rest
    assert {r["path"] for r in all_rows} == {str(p) for p in paths}
    outcome = {r["path"]: r["outcome"] for r in all_rows}
    killed_after_append = [p for p in rest if p["outcome"] == "already_compacted" and p["path"] in need]
    for p in paths:
        added = _compactions(p) - before[str(p)]
        assert added <= 1, p  # never two
        if outcome[str(p)] == "compacted" or any(r["path"] == str(p) for r in killed_after_append):
            assert added == 1 and str(p) in need, p
        else:
            assert added == 0 and outcome[str(p)] in ("under_threshold", "already_compacted", "nothing_to_compact")
    assert sum(outcome[str(p)] == "compacted" for p in paths) >= 3
