"""Pluggable token counters: Pi's estimate by default, tiktoken exact counts offline."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from sessiontree import CompactionSettings, Session
from sessiontree.compaction import prepare_compaction
from sessiontree.token_counter import (
    TiktokenCounter,
    TokenCounterError,
    cache_file_name,
    message_texts,
    pi_estimate,
)

tiktoken = pytest.importorskip("tiktoken")


def _byte_level_bpe(path: Path, merges: list[bytes]) -> Path:
    """A tiny real BPE ranks file: the 256 single bytes, then the given merges."""
    lines = [base64.b64encode(bytes([b])) + b" " + str(b).encode() for b in range(256)]
    for k, m in enumerate(merges):
        lines.append(base64.b64encode(m) + b" " + str(256 + k).encode())
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_default_counter_is_pis_estimate():
    assert CompactionSettings().token_counter is None
    assert pi_estimate({"role": "user", "content": "abcdefgh"}) == 2


def test_custom_bpe_file_counts_offline(tmp_path):
    f = _byte_level_bpe(tmp_path / "tiny.tiktoken", [b"ab", b"abab"])
    counter = TiktokenCounter.from_bpe_file(f, pat_str=r"\S+|\s+", name="tiny")
    assert counter.count_text("abab") == 1
    assert counter.count_text("abx") == 2
    assert counter({"role": "user", "content": "abab abab"}) == 3
    assert counter({"role": "user", "content": [{"type": "image", "data": "x"}]}) == 1200
    msg = {"role": "assistant", "content": [{"type": "toolCall", "name": "ab", "arguments": {"p": "ab"}}]}
    assert message_texts(msg)[0] == ['ab{"p":"ab"}']


def test_counter_drives_the_cut_point(tmp_path):
    f = _byte_level_bpe(tmp_path / "tiny.tiktoken", [])
    byte_counter = TiktokenCounter.from_bpe_file(f, pat_str=r"[\s\S]", name="bytes")  # 1 token per byte
    s = Session.in_memory()
    for i in range(6):
        s.append_message({"role": "user", "content": f"q{i} " + "x" * 400, "timestamp": i})
        s.append_message(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "y" * 400}],
                "provider": "p",
                "model": "m",
                "usage": {},
                "stopReason": "stop",
                "timestamp": i,
            }
        )
    path = [e.raw for e in s.get_branch()]
    pi = prepare_compaction(path, CompactionSettings(keep_recent_tokens=800))
    exact = prepare_compaction(path, CompactionSettings(keep_recent_tokens=800, token_counter=byte_counter))
    # a byte counter counts ~4x Pi's estimate, so it keeps ~4x fewer entries
    kept = lambda p: len(path) - [e["id"] for e in path].index(p.first_kept_entry_id)
    assert kept(exact) < kept(pi)


def test_missing_encoding_offline_fails_with_instructions(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(TokenCounterError) as ei:
        TiktokenCounter("o200k_base", connect_timeout=2.0)
    msg = str(ei.value)
    assert "encoding_file=" in msg and cache_file_name("o200k_base") in msg and "TIKTOKEN_CACHE_DIR" in msg


def test_wrong_encoding_file_is_rejected(tmp_path):
    f = _byte_level_bpe(tmp_path / "not-o200k.tiktoken", [])
    with pytest.raises(TokenCounterError):
        TiktokenCounter("o200k_base", encoding_file=f)
    with pytest.raises(TokenCounterError):
        TiktokenCounter("o200k_base", encoding_file=tmp_path / "missing")
    with pytest.raises(TokenCounterError):
        TiktokenCounter.from_bpe_file(tmp_path / "missing", pat_str=".")
