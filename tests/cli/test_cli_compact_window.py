"""``sessiontree compact FILE --context-window N``: the window reaches the summary's output budget
when a model summarizes (Pi 1.6: ``min(maxTokens, window - 4096 - input)``, the budget the request
carries), and the offline summarizer, which sends nothing and has no window or output limit, is
never held to it (as ``compact-all`` treats it, ``fleet/_compact.py``): a window that ``--dry-run``
reports as past the auto-compaction threshold compacts with the offline summarizer too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.summarizers import estimate_request_tokens
from tests.cli.test_cli_compact import EXAMPLE, run, run_json


def _copy(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    return Path(shutil.copyfile(EXAMPLE, d / EXAMPLE.name))


def test_the_window_sets_a_model_summarizers_output_budget(capsys, tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from tests.summarizers.test_summarizer_http import FakeLLM, openai_sse

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fake = FakeLLM(default=openai_sse("## Goal\nShip the CLI"))
    try:

        def compact(path: Path, window: int) -> dict:
            argv = ["compact", path, "--keep-recent-tokens", "2000", "--summarizer", "openai"]
            argv += ["--model", "m", "--base-url", fake.openai_url, "--context-window", str(window)]
            rc, _, err = run_json(capsys, *argv)
            assert rc == 0, err
            (req,) = [r for r in fake.requests if r["path"] == "/v1/chat/completions"]
            fake.requests.clear()
            return req["body"]

        wide = compact(_copy(tmp_path, "a"), 10_000_000)
        assert wide["max_completion_tokens"] == 16384  # the output limit: the window is not the bound
        system, user = wide["messages"][0]["content"], wide["messages"][1]["content"][0]["text"]
        sent = estimate_request_tokens(system, user)
        narrow = compact(_copy(tmp_path, "b"), sent + 4096 + 1000)
        assert narrow["max_completion_tokens"] == 1000  # window - 4096 - input
    finally:
        fake.close()


def test_the_offline_summarizer_is_not_held_to_the_window(capsys, tmp_path):
    path = _copy(tmp_path, "a")
    rc, plan, _ = run_json(
        capsys, "compact", path, "--dry-run", "--keep-recent-tokens", "2000", "--context-window", "3000"
    )
    assert rc == 0 and plan["auto_compaction"]["would_compact"] is True
    rc, out, err = run(capsys, "compact", path, "--keep-recent-tokens", "2000", "--context-window", "3000")
    assert rc == 0, err  # was: "the summarizing model leaves 1 output tokens ... (nothing sent)"
    windowed = Session.open(path)
    plain_path = _copy(tmp_path, "b")
    rc, _, err = run(capsys, "compact", plain_path, "--keep-recent-tokens", "2000")
    assert rc == 0, err
    plain = Session.open(plain_path)
    a, b = windowed.get_entry(windowed.leaf_id), plain.get_entry(plain.leaf_id)
    assert a.type == b.type == "compaction"
    assert a.raw["summary"] == b.raw["summary"] and a.raw["firstKeptEntryId"] == b.raw["firstKeptEntryId"]
