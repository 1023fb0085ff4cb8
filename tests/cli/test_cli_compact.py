"""``sessiontree compact`` and ``sessiontree navigate``: dry runs write nothing, real runs append
what Pi would, ``--json`` shapes, exit codes, progress on stderr only, and an OpenAI-compatible
summary over a loopback server."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree.cli import main
from sessiontree.writer import SessionWriter

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = ROOT / "tests" / "corpus"
GEN = CORPUS / "pi-generated"
EXAMPLE = ROOT / "examples" / "session.jsonl"
GEN_FILES = sorted(GEN.glob("*.jsonl"))

UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")

DRY_RUN_KEYS = {
    "migrated_from_version",
    "would_migrate_from_version",
    "path",
    "dry_run",
    "settings",
    "first_kept_entry",
    "is_split_turn",
    "tokens_before",
    "tokens_before_source",
    "estimated_tokens_before",
    "to_summarize",
    "turn_prefix",
    "kept",
    "previous_summary",
    "files",
    "serialized_chars",
    "summary_requests",
    "auto_compaction",
    "summarizer",
}
COMPACT_KEYS = {
    "migrated_from_version",
    "would_migrate_from_version",
    "path",
    "dry_run",
    "compacted",
    "summarizer",
    "compaction_entry",
    "first_kept_entry",
    "tokens_before",
    "tokens_before_source",
    "estimated_tokens_before",
    "estimated_tokens_after",
    "summarized_messages",
    "turn_prefix_messages",
    "is_split_turn",
    "usage",
    "files",
    "summary",
}
NAVIGATE_KEYS = {
    "migrated_from_version",
    "would_migrate_from_version",
    "path",
    "dry_run",
    "target",
    "old_leaf_id",
    "position_id",
    "new_leaf_id",
    "editor_text",
    "abandoned_entries",
    "common_ancestor_id",
    "branch_summary_id",
    "summary",
    "label_entry_id",
    "usage",
    "written",
}


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def run_json(capsys, *argv) -> tuple[int, dict, str]:
    rc, out, err = run(capsys, *argv, "--json")
    assert not JSON_UNSAFE.search(out)
    return rc, (json.loads(out) if out else None), err


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copyfile(src, dst)
    return dst


def write_session(path: Path, entries: list[dict]) -> Path:
    header = {"type": "session", "version": 3, "id": "t", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp"}
    with open(path, "wb") as fh:
        for e in [header, *entries]:
            fh.write(orjson.dumps(e) + b"\n")
    return path


def msg(eid: str, parent: str | None, role: str, text: str) -> dict:
    content = text if role == "user" else [{"type": "text", "text": text}]
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {"role": role, "content": content, "timestamp": 0},
    }


# ==== compact --dry-run ======================================================================


@pytest.mark.parametrize("path", GEN_FILES, ids=lambda p: p.name)
def test_dry_run_never_writes_and_never_crashes(capsys, path):
    before = digest(path)
    rc, out, err = run(capsys, "compact", path, "--dry-run", "--keep-recent-tokens", "200")
    assert rc in (0, 1, 2)
    assert not UNSAFE.search(out) and not UNSAFE.search(err.replace("\n", ""))
    if rc == 0:
        assert out.startswith("dry run: nothing written")
    else:
        assert len(err.strip().splitlines()) == 1
    rc_json, doc, _ = run_json(capsys, "compact", path, "--dry-run", "--keep-recent-tokens", "200")
    assert rc_json == rc
    if rc == 0:
        assert set(doc) == DRY_RUN_KEYS and doc["dry_run"] is True
    elif rc == 1:
        assert doc["compacted"] is False and doc["reason"] in ("nothing_to_compact", "already_compacted")
    assert digest(path) == before


def test_dry_run_shows_the_plan(capsys):
    rc, out, _ = run(capsys, "compact", EXAMPLE, "--dry-run", "--keep-recent-tokens", "2000")
    assert rc == 0
    for label in (
        "first kept entry:",
        "split turn:",
        "tokens before:",
        "to summarize:",
        "turn prefix:",
        "kept verbatim:",
        "previous summary:",
        "read files:",
        "modified files:",
        "serialized text:",
    ):
        assert label in out
    rc, doc, _ = run_json(capsys, "compact", EXAMPLE, "--dry-run", "--keep-recent-tokens", "2000")
    s = Session.open(EXAMPLE)
    kept = doc["first_kept_entry"]
    entry = s.get_entry(kept["id"])
    assert entry is not None and kept["line"] == entry.line and kept["type"] == entry.type
    assert doc["to_summarize"]["messages"] > 0 and doc["summary_requests"] >= 1
    assert doc["serialized_chars"]["history"] > 0
    assert doc["previous_summary"]["present"] is True  # the example already holds a compaction
    assert doc["settings"] == {"keep_recent_tokens": 2000, "reserve_tokens": 16384}
    assert doc["auto_compaction"] is None


def test_dry_run_matches_the_real_run(capsys, tmp_path):
    path = copy(EXAMPLE, tmp_path)
    _, plan, _ = run_json(capsys, "compact", path, "--dry-run", "--keep-recent-tokens", "2000")
    rc, done, _ = run_json(capsys, "compact", path, "--keep-recent-tokens", "2000")
    assert rc == 0
    assert done["first_kept_entry"] == plan["first_kept_entry"]
    assert done["tokens_before"] == plan["tokens_before"]
    assert done["summarized_messages"] == plan["to_summarize"]["messages"]
    assert done["files"] == plan["files"]


def test_dry_run_reports_the_auto_compaction_threshold(capsys):
    rc, doc, _ = run_json(
        capsys,
        "compact",
        EXAMPLE,
        "--dry-run",
        "--keep-recent-tokens",
        "2000",
        "--context-window",
        "60000",
        "--reserve-tokens",
        "10000",
    )
    assert rc == 0
    auto = doc["auto_compaction"]
    assert auto["threshold"] == 50000 and auto["would_compact"] == (doc["tokens_before"] > 50000)


# ==== compact (real) ==========================================================================


def test_offline_compaction_then_context_starts_with_the_summary(capsys, tmp_path):
    path = copy(EXAMPLE, tmp_path)
    size = path.stat().st_size
    rc, out, err = run(capsys, "compact", path, "--keep-recent-tokens", "2000")
    assert rc == 0 and err == ""  # stderr is not a terminal: no progress lines
    assert "compaction entry:" in out and "first kept entry:" in out and "tokens:" in out and "→" in out
    assert "usage:" in out and "summary:" in out and "## Goal" in out
    assert path.stat().st_size > size
    s = Session.open(path)
    leaf = s.get_entry(s.leaf_id)
    assert leaf.type == "compaction"
    assert f"compaction entry:  {leaf.id}" in out
    rc, doc, _ = run_json(capsys, "context", path)
    assert rc == 0 and doc["messages"][0]["role"] == "compactionSummary"
    assert doc["messages"][0]["source_id"] == leaf.id


def test_compact_json_shape(capsys, tmp_path):
    path = copy(EXAMPLE, tmp_path)
    rc, doc, err = run_json(capsys, "compact", path, "--keep-recent-tokens", "2000", "--instructions", "focus on tests")
    assert rc == 0 and err == ""
    assert set(doc) == COMPACT_KEYS
    assert doc["compacted"] is True and doc["dry_run"] is False and doc["summarizer"] == "offline"
    assert set(doc["compaction_entry"]) == {"id", "line", "type", "role"}
    assert doc["compaction_entry"]["type"] == "compaction"
    assert isinstance(doc["tokens_before"], int) and isinstance(doc["estimated_tokens_after"], int)
    assert doc["estimated_tokens_after"] < doc["tokens_before"]
    assert doc["usage"]["total_tokens"] == 0 and doc["usage"]["cost"] is None
    assert set(doc["files"]) == {"read", "modified"}
    raw = Session.open(path).get_entry(doc["compaction_entry"]["id"])
    assert raw["summary"] == doc["summary"] and raw["firstKeptEntryId"] == doc["first_kept_entry"]["id"]


def test_nothing_to_compact_is_one_line_and_exit_1(capsys, tmp_path):
    path = write_session(tmp_path / "small.jsonl", [msg("a", None, "user", "hi"), msg("b", "a", "assistant", "hello")])
    before = digest(path)
    rc, out, err = run(capsys, "compact", path)
    assert rc == 1 and out == ""
    assert err.strip() == "sessiontree: Nothing to compact (session too small)"
    rc, doc, _ = run_json(capsys, "compact", path)
    assert rc == 1 and doc == {
        "path": str(path),
        "dry_run": False,
        "compacted": False,
        "reason": "nothing_to_compact",
        "message": "Nothing to compact (session too small)",
    }
    assert run(capsys, "compact", path, "--dry-run")[0] == 1
    assert digest(path) == before


def test_compacting_twice_says_already_compacted(capsys, tmp_path):
    path = copy(EXAMPLE, tmp_path)
    assert run(capsys, "compact", path, "--keep-recent-tokens", "2000")[0] == 0
    before = digest(path)
    rc, doc, err = run_json(capsys, "compact", path, "--keep-recent-tokens", "2000")
    assert rc == 1 and doc["reason"] == "already_compacted" and "Already compacted" in err
    assert digest(path) == before


def test_progress_goes_to_stderr_and_json_stays_clean(capsys, tmp_path):
    path = copy(EXAMPLE, tmp_path)
    rc, out, err = run(capsys, "compact", path, "--keep-recent-tokens", "2000", "--progress", "--json")
    assert rc == 0
    json.loads(out)
    lines = err.splitlines()
    assert any("preparing" in line for line in lines)
    assert any("summarizing (1 request" in line for line in lines)
    assert any("appending" in line for line in lines)
    assert all(line.startswith("sessiontree: [") for line in lines)


def test_a_locked_session_exits_2_and_writes_nothing(capsys, tmp_path):
    path = copy(EXAMPLE, tmp_path)
    before = digest(path)
    holder = SessionWriter(path)
    holder.acquire()
    try:
        rc, out, err = run(capsys, "compact", path, "--keep-recent-tokens", "2000")
        assert rc == 2 and out == ""
        assert "lock" in err and "--lock-timeout" in err and len(err.strip().splitlines()) == 1
        rc, _, err = run(capsys, "navigate", path, Session.open(path).get_branch()[1].id, "--summarize")
        assert rc == 2 and "lock" in err
        rc, _, _ = run(capsys, "compact", path, "--keep-recent-tokens", "2000", "--lock-timeout", "0.05")
        assert rc == 2
    finally:
        holder.close()
    assert digest(path) == before
    assert run(capsys, "compact", path, "--dry-run")[0] in (0, 1)  # dry runs never lock


def test_option_errors_exit_2(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    monkeypatch.delenv("ANTHROPIC_MODEL", raising=False)
    path = copy(EXAMPLE, tmp_path)
    before = digest(path)
    rc, _, err = run(capsys, "compact", path, "--model", "gpt-x")
    assert rc == 2 and "--summarizer openai or anthropic" in err
    rc, _, err = run(capsys, "compact", path, "--summarizer", "openai")
    assert rc == 2 and "model" in err and len(err.strip().splitlines()) == 1
    assert run(capsys, "compact", path, "--keep-recent-tokens", "-5")[0] == 2
    assert run(capsys, "compact", path, "--summarizer", "nope")[0] == 2
    assert run(capsys, "compact", tmp_path / "missing.jsonl")[0] == 2
    assert digest(path) == before


def test_compact_output_never_passes_control_sequences(capsys, tmp_path):
    evil = "\x1b[31mred\x1b[0m \u202e rtl \x9b2J"
    entries, parent = [], None
    for i in range(30):
        role = "user" if i % 2 == 0 else "assistant"
        entries.append(msg(f"e{i}", parent, role, f"{evil} {i} " + "word " * 80))
        parent = f"e{i}"
    path = write_session(tmp_path / f"evil{evil}.jsonl", entries)
    for extra in (["--dry-run"], []):
        rc, out, err = run(capsys, "compact", path, "--keep-recent-tokens", "300", *extra)
        assert rc == 0
        assert not UNSAFE.search(out) and "\x1b" not in err
        assert "\\x1b[31m" in out


# ==== navigate =============================================================================


def deep_copy(tmp_path: Path) -> Path:
    return copy(GEN / "deep_branching.jsonl", tmp_path)


def first_user_off_path(s: Session) -> str:
    """A user message on another branch than the leaf's."""
    on_path = {e.id for e in s.get_branch()}
    for e in s.entries():
        if e.type == "message" and e["message"]["role"] == "user" and e.id not in on_path:
            return e.id
    raise AssertionError("no user message off the active path")


def test_navigate_with_summarize_appends_a_branch_summary(capsys, tmp_path):
    path = deep_copy(tmp_path)
    s = Session.open(path)
    target = first_user_off_path(s)
    parent = s.get_entry(target).parent_id
    n = len(s)
    rc, doc, err = run_json(capsys, "navigate", path, target, "--summarize")
    assert rc == 0 and err == ""
    assert set(doc) == NAVIGATE_KEYS
    content = s.get_entry(target)["message"]["content"]
    assert doc["editor_text"] == (content if isinstance(content, str) else "".join(b["text"] for b in content))
    assert doc["abandoned_entries"] > 0 and doc["branch_summary_id"] is not None
    assert [w["type"] for w in doc["written"]] == ["branch_summary"]
    assert doc["new_leaf_id"] == doc["branch_summary_id"] == doc["position_id"]
    s2 = Session.open(path)
    assert len(s2) == n + 1 and s2.leaf_id == doc["branch_summary_id"]  # Pi reopens at the summary
    summary = s2.get_entry(doc["branch_summary_id"])
    assert summary.parent_id == parent and summary["fromId"] == s.leaf_id
    assert summary["summary"] == doc["summary"]
    rc, ctx, _ = run_json(capsys, "context", path)
    assert rc == 0 and ctx["messages"][-1]["role"] == "branchSummary"


def test_navigate_human_output(capsys, tmp_path):
    path = deep_copy(tmp_path)
    target = first_user_off_path(Session.open(path))
    rc, out, _ = run(capsys, "navigate", path, target, "--summarize", "--label", "retry here")
    assert rc == 0
    for label in (
        "target:",
        "old leaf:",
        "new leaf:",
        "editor text:",
        "branch summary:",
        "label:",
        "written:",
        "summary:",
    ):
        assert label in out
    assert "written:         2 entries" in out
    assert not UNSAFE.search(out)
    s = Session.open(path)
    assert s.labels.get(target) == "retry here"
    assert s.get_entry(s.leaf_id).type == "label"


def test_bare_navigate_is_refused_and_dry_run_writes_nothing(capsys, tmp_path):
    path = deep_copy(tmp_path)
    target = first_user_off_path(Session.open(path))
    before = digest(path)
    rc, out, err = run(capsys, "navigate", path, target)
    assert rc == 1 and out == ""
    assert "--summarize" in err and "--label" in err and len(err.strip().splitlines()) == 1
    rc, out, _ = run(capsys, "navigate", path, target, "--dry-run", "--summarize")
    assert rc == 0 and "dry run: nothing written" in out and "nothing (leaf moved in memory only)" in out
    rc, doc, _ = run_json(capsys, "navigate", path, target, "--dry-run")
    assert rc == 0 and doc["written"] == [] and doc["dry_run"] is True and doc["branch_summary_id"] is None
    assert doc["editor_text"] is not None and doc["abandoned_entries"] > 0
    assert digest(path) == before


def test_navigate_unknown_id_exits_2(capsys, tmp_path):
    path = deep_copy(tmp_path)
    before = digest(path)
    rc, out, err = run(capsys, "navigate", path, "no-such-id", "--summarize")
    assert rc == 2 and out == "" and "no-such-id" in err
    assert digest(path) == before


def test_navigate_to_a_non_user_entry_moves_the_leaf_there(capsys, tmp_path):
    path = deep_copy(tmp_path)
    s = Session.open(path)
    target = next(e.id for e in s.get_branch() if e.type == "message" and e["message"]["role"] == "assistant")
    rc, doc, _ = run_json(capsys, "navigate", path, target, "--summarize")
    assert rc == 0 and doc["editor_text"] is None
    assert Session.open(path).get_entry(doc["branch_summary_id"]).parent_id == target


def test_navigate_help_explains_persistence(capsys):
    rc, out, _ = run(capsys, "navigate", "--help")
    assert rc == 0 and "reopens at its last entry" in out and "--dry-run" in out
    rc, out, _ = run(capsys, "compact", "--help")
    assert rc == 0 and "--keep-recent-tokens" in out and "--dry-run" in out


# ==== OpenAI-compatible summarizer over loopback ==============================================


def test_openai_compatible_compaction_over_loopback(capsys, tmp_path, monkeypatch):
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from tests.summarizers.test_summarizer_http import FakeLLM, json_error, openai_sse

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fake = FakeLLM(default=openai_sse("## Goal\nShip the CLI"))
    try:
        path = copy(EXAMPLE, tmp_path)
        rc, doc, _ = run_json(
            capsys,
            "compact",
            path,
            "--keep-recent-tokens",
            "2000",
            "--summarizer",
            "openai",
            "--model",
            "fake-model",
            "--base-url",
            fake.openai_url,
            "--max-tokens",
            "1000",
        )
        assert rc == 0
        assert doc["summarizer"] != "offline"
        assert doc["summary"].startswith("## Goal\nShip the CLI")
        assert doc["usage"]["input"] == 1234 and doc["usage"]["output"] == 56
        (req,) = fake.requests
        assert req["path"] == "/v1/chat/completions" and req["body"]["model"] == "fake-model"
        assert req["body"]["max_completion_tokens"] <= 1000

        # a failing provider: one line, exit 2, nothing written
        fake.default = json_error(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
        (tmp_path / "again").mkdir()
        path2 = copy(EXAMPLE, tmp_path / "again")
        before = digest(path2)
        rc, out, err = run(
            capsys,
            "compact",
            path2,
            "--keep-recent-tokens",
            "2000",
            "--summarizer",
            "openai",
            "--model",
            "fake-model",
            "--base-url",
            fake.openai_url,
        )
        assert rc == 2 and out == "" and "nothing written" in err and len(err.strip().splitlines()) == 1
        assert digest(path2) == before
    finally:
        fake.close()


def test_cli_stderr_never_shows_an_api_key_a_server_echoes(capsys, tmp_path, monkeypatch):
    """Issue 11 item 4: a 401 body quoting ``Bearer <key>`` (the key from OPENAI_API_KEY)."""
    pytest.importorskip("openai")
    from tests.summarizers.test_summarizer_http import FakeLLM, json_error

    secret = "sk-proj-ECHOEDxyz0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fake = FakeLLM(default=json_error(401, {"error": {"message": f"Incorrect API key: Bearer {secret}"}}))
    try:
        path = copy(EXAMPLE, tmp_path)
        for extra in ((), ("--json",)):
            rc, out, err = run(
                capsys,
                "compact",
                path,
                "--keep-recent-tokens",
                "2000",
                "--summarizer",
                "openai",
                "--model",
                "fake-model",
                "--base-url",
                fake.openai_url,
                *extra,
            )
            assert rc == 2 and "401" in (out + err)
            assert secret not in out + err and secret[:12] not in out + err and "[REDACTED]" in out + err
    finally:
        fake.close()


# ==== the README's first command ============================================================


def test_readme_first_command(tmp_path):
    demo = copy(EXAMPLE, tmp_path)
    compact = subprocess.run(
        [sys.executable, "-m", "sessiontree", "compact", str(demo), "--keep-recent-tokens", "2000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compact.returncode == 0, compact.stderr
    assert "## Goal" in compact.stdout and compact.stderr == ""
    context = subprocess.run(
        [sys.executable, "-m", "sessiontree", "context", str(demo)], capture_output=True, text=True, timeout=120
    )
    assert context.returncode == 0, context.stderr
    assert context.stdout.lstrip().startswith("0") and "compactionSummary" in context.stdout.splitlines()[0]


def _as_v2(tmp_path: Path) -> Path:
    """The bundled example with a v2 header (its entries have ids: a valid v2 file)."""
    data = EXAMPLE.read_bytes()
    head, rest = data.split(b"\n", 1)
    head = head.replace(b'"version":3', b'"version":2')
    assert b'"version":2' in head
    p = tmp_path / "legacy.jsonl"
    p.write_bytes(head + b"\n" + rest)
    return p


def test_compact_and_navigate_say_when_they_migrate_a_legacy_file(capsys, tmp_path):
    """Issue 11 item 28: the first write to a v1/v2 file rewrites it as v3; both commands say
    so, in human and JSON output (and a dry run says it would)."""
    for mode in ("human", "json"):
        d = tmp_path / mode
        d.mkdir()
        p = _as_v2(d)
        if mode == "json":
            rc, doc, _ = run_json(capsys, "compact", p, "--keep-recent-tokens", "2000", "--dry-run")
            assert rc == 0 and doc["would_migrate_from_version"] == 2 and doc["migrated_from_version"] is None
            rc, doc, _ = run_json(capsys, "compact", p, "--keep-recent-tokens", "2000")
            assert rc == 0 and doc["migrated_from_version"] == 2
            rc, doc, _ = run_json(capsys, "compact", p, "--keep-recent-tokens", "2000")
            assert doc.get("migrated_from_version") is None  # already v3 now
        else:
            rc, out, _ = run(capsys, "compact", p, "--keep-recent-tokens", "2000", "--dry-run")
            assert rc == 0 and "v2 file would be rewritten as v3" in out
            rc, out, _ = run(capsys, "compact", p, "--keep-recent-tokens", "2000")
            assert rc == 0 and "the v2 file was rewritten as v3" in out
        assert Session.open(p).header["version"] == 3
        q = _as_v2(d / "nav") if (d / "nav").mkdir() is None else None
        target = Session.open(q).get_branch()[1].id
        if mode == "json":
            rc, doc, _ = run_json(capsys, "navigate", q, target, "--label", "here")
            assert rc == 0 and doc["migrated_from_version"] == 2
        else:
            rc, out, _ = run(capsys, "navigate", q, target, "--label", "here")
            assert rc == 0 and "the v2 file was rewritten as v3" in out


def test_token_figures_compare_like_with_like(capsys, tmp_path):
    # the example's tokens before come from provider usage (55717) while the context is ~2.3k
    # tokens by the chars/4 estimate: "55717 -> ~2139" read as a 96% saving; the real one is ~200
    path = copy(EXAMPLE, tmp_path)
    rc, out, _ = run(capsys, "compact", path, "--keep-recent-tokens", "2000", "--dry-run")
    assert rc == 0 and "provider usage + estimate" in out
    rc, out, _ = run(capsys, "compact", path, "--keep-recent-tokens", "2000")
    line = next(x for x in out.splitlines() if x.startswith("tokens:"))
    before, after = [int(t.strip("~").replace(",", "")) for t in line.split()[1:4:2]]
    assert "like with like" in line and 0 < before - after < before // 2
    (tmp_path / "b").mkdir()
    rc, doc, _ = run_json(capsys, "compact", copy(EXAMPLE, tmp_path / "b"), "--keep-recent-tokens", "2000")
    assert doc["tokens_before_source"] == "usage" and doc["estimated_tokens_before"] < doc["tokens_before"]
