"""The ``sessiontree`` command line: every subcommand, human and ``--json``, on the corpus.

Most runs call :func:`sessiontree.cli.main` in-process (capsys); a few go through a real
subprocess (the installed ``sessiontree`` script and ``python -m sessiontree``). Where a Pi
golden exists, the ``--json`` output is checked against it; human output is checked for
shape and, above all, for never passing a terminal control sequence through.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sessiontree.cli import clip, main, preview, safe_text, validate_session
from sessiontree import Session

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
GEN = CORPUS / "pi-generated"
REAL_FILES = sorted((CORPUS / "real").glob("*.jsonl"))
COMMANDS = ["info", "tree", "branch", "context", "entries", "validate"]
# the files the brief names, plus a legacy v1 one and an empty one
SAMPLE = [
    "deep_branching",
    "labels",
    "compaction_2",
    "edge_malformed_middle",
    "edge_blank_lines",
    "edge_duplicate_ids",
    "edge_v1_legacy",
    "edge_empty",
    "edge_lone_surrogate",
    "unicode_heavy",
]

# What human output must never contain: C0 except newline, DEL, C1, bidi controls, LS/PS.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
# What --json output must never contain raw (JSON already escapes C0).
JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv: str) -> tuple[int, object]:
    rc, out, err = run(capsys, *argv, "--json")
    assert "Traceback" not in err
    assert not JSON_UNSAFE.search(out)
    return rc, json.loads(out)


def golden(path: Path) -> dict | None:
    g = path.with_name(path.name + ".golden.json")
    return json.loads(g.read_text()) if g.exists() else None


def legacy(g: dict) -> bool:
    return bool(g["open"].get("ids_generated_by_pi"))


def write_session(path: Path, entries: list[dict], header: dict | None = None) -> Path:
    header = header or {
        "type": "session",
        "version": 3,
        "id": "test-session",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/tmp/project",
    }
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(header) + b"\n")
        for e in entries:
            fh.write(orjson.dumps(e) + b"\n")
    return path


def write_chain(path: Path, n: int) -> Path:
    """A linear chain of ``n`` user/assistant messages, written line by line."""
    head = {"type": "session", "version": 3, "id": "deep", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/tmp"}
    with open(path, "wb") as fh:
        fh.write(orjson.dumps(head) + b"\n")
        prev = None
        for i in range(n):
            eid = f"e{i:07d}"
            msg = (
                {"role": "user", "content": f"question {i}", "timestamp": 0}
                if i % 2 == 0
                else {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]}
            )
            fh.write(
                orjson.dumps(
                    {
                        "type": "message",
                        "id": eid,
                        "parentId": prev,
                        "timestamp": "2025-01-01T00:00:00.000Z",
                        "message": msg,
                    }
                )
                + b"\n"
            )
            prev = eid
    return path


# ==== safe_text / previews ==============================================================


def test_safe_text_escapes_escape_sequences_and_controls():
    assert safe_text("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert safe_text("bell\x07 nul\x00 cr\r del\x7f") == "bell\\x07 nul\\x00 cr\\x0d del\\x7f"
    assert safe_text("csi\x9b31m nel\x85") == "csi\\x9b31m nel\\x85"


def test_safe_text_escapes_bidi_overrides_and_separators():
    for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u2028\u2029":
        assert safe_text(f"a{ch}b") == f"a\\u{ord(ch):04x}b"


def test_safe_text_keeps_ordinary_unicode_and_escapes_lone_surrogates():
    text = "日本語 👨‍👩‍👧‍👦 e\u0301 ｆｕｌｌ \u00a0nbsp"
    assert safe_text(text) == text
    assert safe_text("lone \ud83d here") == "lone \\ud83d here"
    assert safe_text(None) == ""


def test_preview_is_one_line_clipped_and_escaped():
    assert clip("one\ntwo\r\nthree\tfour", 100) == "one⏎two⏎three four"
    assert preview("x" * 100, 10) == "x" * 9 + "…"
    assert preview("\x1b]0;title\x07", 60) == "\\x1b]0;title\\x07"
    assert preview("anything", 0) == ""


# ==== every subcommand, human and --json ====================================================


@pytest.mark.parametrize("name", SAMPLE)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_runs_in_human_and_json_mode(capsys, command, name):
    path = GEN / f"{name}.jsonl"
    rc, out, err = run(capsys, command, path)
    # validate: an empty file is not "ok" either (issue 19 item 30)
    failing = ("edge_malformed_middle", "edge_duplicate_ids", "edge_empty")
    expected = 0 if command != "validate" else (1 if name in failing else 0)
    assert rc == expected, err
    assert "Traceback" not in err
    assert out.endswith("\n") and not UNSAFE.search(out)
    rc_json, doc = run_json(capsys, command, path)
    assert rc_json == rc
    assert isinstance(doc, dict)


@pytest.mark.parametrize(
    "name",
    [
        "deep_branching",
        "labels",
        "compaction_2",
        "edge_orphan_parent",
        "edge_leaf_on_old_branch",
        "reset_leaf_roots",
        "model_thinking_names",
    ],
)
def test_info_json_matches_golden(capsys, name):
    path = GEN / f"{name}.jsonl"
    g = golden(path)
    rc, info = run_json(capsys, "info", path)
    assert rc == 0
    assert info["entries"] == len(g["entries"])
    assert info["distinct_ids"] == g["entry_count"]
    assert info["leaf_id"] == g["leaf_id"]
    assert info["session_name"] == g["session_name"]
    assert info["labels"] == len(g["labels"])
    assert info["roots"] == len(g["tree"]["roots"])
    assert info["session_id"] == g["header"]["id"]
    assert info["active_branch_length"] == len(g["path"]["ids"])
    assert info["context_messages"] == len(g["context"]["messages"])
    assert info["context_tokens"] == sum(m["tokens"] for m in g["context"]["messages"])
    roles: dict[str, int] = {}
    for _, role, _ in g["path_message_tokens"]:
        roles[role] = roles.get(role, 0) + 1
    assert info["message_roles"] == roles


def test_info_human_lists_the_header_and_counts(capsys):
    rc, out, _ = run(capsys, "info", GEN / "labels.jsonl")
    assert rc == 0
    assert "session id:      sess-shared-labels" in out
    assert "entries:         35 (35 distinct ids)" in out
    assert "labels:          6" in out
    assert "context:         10 messages" in out


def test_info_on_a_legacy_file_says_it_is_migrated_in_memory(capsys):
    rc, out, _ = run(capsys, "info", CORPUS / "real" / "whamp-pi-v1-linear.jsonl")
    assert rc == 0 and "legacy" in out
    rc, doc = run_json(capsys, "info", CORPUS / "real" / "whamp-pi-v1-linear.jsonl")
    assert doc["version"] is None and doc["legacy_migrated_in_memory"] is True


def test_info_on_an_empty_file_reports_no_header(capsys):
    rc, doc = run_json(capsys, "info", GEN / "edge_empty.jsonl")
    assert rc == 0 and doc["empty_file"] is True and doc["entries"] == 0 and doc["session_id"] is None


# ==== tree =================================================================================


@pytest.mark.parametrize(
    "name",
    [
        "deep_branching",
        "labels",
        "compaction_3",
        "branch_summaries",
        "reset_leaf_roots",
        "mix_02",
        "edge_orphan_parent",
        "edge_self_parent",
    ],
)
def test_tree_json_is_pis_preorder(capsys, name):
    path = GEN / f"{name}.jsonl"
    g = golden(path)
    rc, doc = run_json(capsys, "tree", path)
    assert rc == 0
    assert [n["id"] for n in doc["nodes"]] == g["tree"]["preorder"]
    assert doc["roots"] == g["tree"]["roots"]
    for n in doc["nodes"]:
        assert n["children"] == g["tree"]["nodes"][n["id"]]["children"]
        assert n["label"] == g["tree"]["nodes"][n["id"]].get("label")
    on_path = [n["id"] for n in doc["nodes"] if n["on_active_branch"]]
    assert sorted(on_path) == sorted(g["path"]["ids"])
    assert [n["id"] for n in doc["nodes"] if n["is_leaf"]] == [g["leaf_id"]]


def test_tree_human_draws_branch_guides_labels_and_the_leaf(capsys):
    rc, out, _ = run(capsys, "tree", GEN / "labels.jsonl")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 35
    assert any("├─ " in l for l in lines) and any("└─ " in l for l in lines) and any("│  " in l for l in lines)
    assert "e8e1e2e1 user [start-overwritten-later]: " in lines[0]
    assert lines[0].startswith("• ")  # on the active branch
    leaf_lines = [l for l in lines if l.endswith("← leaf")]
    assert len(leaf_lines) == 1 and "fdaf5370" in leaf_lines[0] and leaf_lines[0].startswith("• ")
    assert sum(l.startswith("• ") for l in lines) == 13  # golden path length


def test_tree_keeps_a_linear_run_at_one_indentation(capsys):
    rc, out, _ = run(capsys, "tree", GEN / "linear_short.jsonl")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 12
    assert all(l.startswith("• ") and l[2] != " " and "─" not in l for l in lines)


def test_tree_preview_options(capsys):
    rc, out, _ = run(capsys, "tree", GEN / "deep_branching.jsonl", "--max-preview", "10")
    assert rc == 0
    previews = [l.split(": ", 1)[1].removesuffix("  ← leaf") for l in out.splitlines() if ": " in l]
    assert previews and all(len(p) <= 10 for p in previews if "\\x" not in p)
    rc, out, _ = run(capsys, "tree", GEN / "deep_branching.jsonl", "--no-preview")
    assert rc == 0 and ": " not in out
    rc, doc = run_json(capsys, "tree", GEN / "deep_branching.jsonl", "--no-preview")
    assert "preview" not in doc["nodes"][0]


def test_tree_shows_a_duplicated_id_once_more_without_expanding_it(capsys):
    rc, out, _ = run(capsys, "tree", GEN / "edge_duplicate_ids.jsonl")
    assert rc == 0
    assert sum("(shown above)" in l for l in out.splitlines()) == 1


def test_tree_draws_entries_stuck_in_a_cycle_after_the_tree(capsys):
    rc, out, err = run(capsys, "tree", GEN / "edge_cycle_off_path.jsonl")
    assert rc == 0
    assert "not reachable from any root" in out
    assert "cyc0000c" in out and "cyc0000d" in out
    rc, doc = run_json(capsys, "tree", GEN / "edge_cycle_off_path.jsonl")
    assert sorted(doc["unreachable_ids"]) == ["cyc0000c", "cyc0000d"]
    assert {n["id"] for n in doc["nodes"]} == {e[0] for e in golden(GEN / "edge_cycle_off_path.jsonl")["entries"]}


def test_tree_on_a_looping_leaf_still_draws_and_warns(capsys):
    rc, out, err = run(capsys, "tree", GEN / "edge_parent_cycle.jsonl")
    assert rc == 0
    assert "warning" in err and "Traceback" not in err
    assert "cyc0000a" in out and "← leaf" in out


def test_tree_folds_guides_of_very_deep_branching(tmp_path, capsys):
    # a comb: every node has a dead-end child and a continuing child, 300 levels deep
    entries = []
    prev = None
    for i in range(300):
        ts = f"2025-01-01T00:00:{i % 60:02d}.000Z"
        entries.append(
            {
                "type": "message",
                "id": f"x{i}",
                "parentId": prev,
                "timestamp": ts,
                "message": {"role": "user", "content": f"dead end {i}", "timestamp": 0},
            }
        )
        entries.append(
            {
                "type": "message",
                "id": f"c{i}",
                "parentId": prev,
                "timestamp": ts,
                "message": {"role": "user", "content": f"continue {i}", "timestamp": 0},
            }
        )
        prev = f"c{i}"
    path = write_session(tmp_path / "comb.jsonl", entries)
    rc, out, _ = run(capsys, "tree", path, "--no-preview")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 600
    assert any("⋯" in l for l in lines)
    assert max(len(l) for l in lines) < 120


# ==== branch ===============================================================================


@pytest.mark.parametrize("name", ["deep_branching", "labels", "compaction_2", "edge_leaf_on_old_branch"])
def test_branch_json_is_the_golden_path(capsys, name):
    path = GEN / f"{name}.jsonl"
    g = golden(path)
    rc, doc = run_json(capsys, "branch", path)
    assert rc == 0
    assert [e["id"] for e in doc["entries"]] == g["path"]["ids"]
    assert doc["leaf_id"] == g["leaf_id"]
    assert doc["entries"][-1]["is_leaf"]


def test_branch_from_another_entry(capsys):
    path = GEN / "deep_branching.jsonl"
    rc, out, _ = run(capsys, "branch", path, "--from", "c3aeebbb")
    assert rc == 0
    lines = out.splitlines()
    assert "c3aeebbb" in lines[-1] and "← leaf" not in lines[-1]
    assert lines[0].startswith(" 0  26467568  model_change")
    rc, doc = run_json(capsys, "branch", path, "--from", "c3aeebbb")
    assert doc["from_id"] == "c3aeebbb" and doc["entries"][-1]["id"] == "c3aeebbb"


def test_branch_from_an_unknown_id_is_a_clean_error(capsys):
    rc, out, err = run(capsys, "branch", GEN / "labels.jsonl", "--from", "nosuchid")
    assert rc == 2 and out == "" and "nosuchid" in err and "Traceback" not in err


# ==== context ==============================================================================


@pytest.mark.parametrize(
    "name",
    ["deep_branching", "compaction_2", "branch_summaries", "bash_exec", "custom_entries", "system_v16", "images"],
)
def test_context_json_matches_golden(capsys, name):
    path = GEN / f"{name}.jsonl"
    g = golden(path)["context"]
    rc, doc = run_json(capsys, "context", path)
    assert rc == 0
    assert [(m["source_id"], m["role"], m["tokens"]) for m in doc["messages"]] == [
        (m["source_id"], m["role"], m["tokens"]) for m in g["messages"]
    ]
    assert doc["thinking_level"] == g["thinkingLevel"]
    assert doc["model"] == g["model"]
    assert doc["total_tokens"] == sum(m["tokens"] for m in g["messages"])
    rc, doc = run_json(capsys, "context", path, "--llm")
    assert rc == 0 and doc["llm"] is True
    assert [m["role"] for m in doc["messages"]] == [r for r, _ in g["llm_messages"]]


def test_context_human_lists_messages_then_totals(capsys):
    rc, out, _ = run(capsys, "context", GEN / "compaction_2.jsonl")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["0", "compactionSummary"]
    assert lines[-3] == "thinking level: high"
    assert lines[-2] == "model:          anthropic/claude-sonnet-4-5"
    assert lines[-1].startswith("total:          33 messages, ~4910 tokens")
    rc, out, _ = run(capsys, "context", GEN / "compaction_2.jsonl", "--llm")
    assert rc == 0 and out.splitlines()[0].split()[1] == "user"


# ==== entries ==============================================================================


@pytest.mark.parametrize("name", ["labels", "edge_malformed_middle", "edge_duplicate_ids", "forked_out"])
def test_entries_json_is_file_order(capsys, name):
    path = GEN / f"{name}.jsonl"
    g = golden(path)
    rc, doc = run_json(capsys, "entries", path)
    assert rc == 0
    assert [[e["id"], e["parent_id"], e["type"]] for e in doc["entries"]] == g["entries"]
    lines = [e["line"] for e in doc["entries"]]
    assert lines == sorted(lines)


def test_entries_since(capsys):
    path = GEN / "labels.jsonl"
    g = golden(path)
    middle = g["entries"][17][0]
    rc, doc = run_json(capsys, "entries", path, "--since", middle)
    assert rc == 0 and [e["id"] for e in doc["entries"]] == [e[0] for e in g["entries"][18:]]
    rc, out, _ = run(capsys, "entries", path, "--since", middle)
    assert rc == 0 and len(out.splitlines()) == len(g["entries"]) - 18
    rc, out, err = run(capsys, "entries", path, "--since", "nosuchid")
    assert rc == 2 and "Entry not found: nosuchid" in err


def test_entries_human_columns(capsys):
    rc, out, _ = run(capsys, "entries", GEN / "labels.jsonl")
    first = out.splitlines()[0].split()
    assert first == ["2", "e8e1e2e1", "null", "user"]


# ==== validate =============================================================================


@pytest.mark.parametrize(
    "name,kinds",
    [
        ("edge_parent_cycle", {"parent_cycle", "leaf_cycle"}),
        ("edge_cycle_off_path", {"parent_cycle"}),
        ("edge_duplicate_ids", {"duplicate_id"}),
        ("edge_orphan_parent", {"orphan"}),
        ("edge_self_parent", {"self_parent"}),
        ("edge_label_unknown_target", {"label_target_missing"}),
        ("edge_truncated_last_line", {"torn_last_line"}),
        ("edge_malformed_middle", {"malformed_json", "skipped_value", "missing_id", "blank_line"}),
    ],
)
def test_validate_finds_each_problem_and_exits_1(capsys, name, kinds):
    path = GEN / f"{name}.jsonl"
    rc, doc = run_json(capsys, "validate", path)
    assert rc == 1 and doc["ok"] is False
    assert {p["kind"] for p in doc["problems"]} == kinds
    rc, out, _ = run(capsys, "validate", path)
    assert rc == 1
    for p in doc["problems"]:
        assert f"line {p['line']} (byte {p['offset']}): {p['kind']}" in out


def test_validate_problem_positions_point_at_the_line(capsys):
    path = GEN / "edge_malformed_middle.jsonl"
    data = path.read_bytes()
    rc, doc = run_json(capsys, "validate", path)
    for p in doc["problems"]:
        assert p["offset"] == 0 or data[p["offset"] - 1 : p["offset"]] == b"\n"
        assert data[: p["offset"]].count(b"\n") + 1 == p["line"]


@pytest.mark.parametrize(
    "name",
    [
        "deep_branching",
        "labels",
        "compaction_3",
        "edge_crlf",
        "edge_header_only",
        "edge_v1_legacy",
        "edge_blank_lines",
    ],
)
def test_validate_clean_files_exit_0(capsys, name):
    rc, out, _ = run(capsys, "validate", GEN / f"{name}.jsonl")
    assert rc == 0
    assert out.splitlines()[-1].endswith(": ok") or "note" in out.splitlines()[-1]


def test_validate_blank_lines_are_notes_not_failures(capsys):
    rc, doc = run_json(capsys, "validate", GEN / "edge_blank_lines.jsonl")
    assert rc == 0 and doc["ok"] is True and doc["errors"] == 0 and doc["notes"] > 0
    assert {p["severity"] for p in doc["problems"]} == {"note"}


def test_validate_is_2_for_a_file_that_is_not_a_session(capsys):
    for name in ("edge_bom", "edge_missing_header", "edge_header_not_first_entry"):
        rc, out, err = run(capsys, "validate", GEN / f"{name}.jsonl")
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and "not a valid pi session" in err


def test_validate_session_function_agrees_with_the_cli(capsys):
    s = Session.open(GEN / "edge_orphan_parent.jsonl")
    assert [p["kind"] for p in validate_session(s)] == ["orphan"]


# ==== errors ===============================================================================


@pytest.mark.parametrize("command", COMMANDS)
def test_errors_are_one_line_on_stderr_with_exit_2(capsys, tmp_path, command):
    for target in (tmp_path / "missing.jsonl", tmp_path, GEN / "edge_bom.jsonl"):
        rc, out, err = run(capsys, command, target)
        assert rc == 2, target
        assert out == ""
        assert err.startswith("sessiontree: error: ") and err.count("\n") == 1
        assert "Traceback" not in err


@pytest.mark.parametrize("command", ["branch", "context"])
def test_a_looping_active_branch_is_exit_2_where_a_branch_is_needed(capsys, command):
    rc, out, err = run(capsys, command, GEN / "edge_parent_cycle.jsonl")
    assert rc == 2 and out == ""
    assert "parentId cycle" in err and "cyc0000a" in err and err.count("\n") == 1


def test_info_reports_a_looping_active_branch_instead_of_failing(capsys):
    rc, doc = run_json(capsys, "info", GEN / "edge_parent_cycle.jsonl")
    assert rc == 0
    assert doc["active_branch_cycle"] == ["cyc0000a", "cyc0000b"]
    assert doc["context_messages"] is None


def test_usage_errors_exit_2(capsys):
    assert run(capsys)[0] == 2
    assert run(capsys, "frobnicate", GEN / "labels.jsonl")[0] == 2
    assert run(capsys, "tree", GEN / "labels.jsonl", "--max-preview", "-1")[0] == 2
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "validate" in out


# ==== terminal safety ======================================================================


@pytest.mark.parametrize(
    "name", ["edge_parent_cycle", "edge_malformed_middle", "edge_orphan_parent", "edge_label_unknown_target"]
)
@pytest.mark.parametrize("command", COMMANDS)
def test_ansi_escapes_in_content_are_shown_not_sent(capsys, command, name):
    rc, out, err = run(capsys, command, GEN / f"{name}.jsonl")
    assert "\x1b" not in out and "\x1b" not in err
    assert not UNSAFE.search(out)
    if command in ("tree",) or (command in ("branch", "context") and rc == 0):
        assert "\\x1b[31m" in out


def test_hostile_ids_labels_names_and_header_are_escaped(tmp_path, capsys):
    header = {
        "type": "session",
        "version": 3,
        "id": "evil\x1b]0;pwned\x07",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/tmp/\u202eevil",
        "parentSession": "\x1b[2J",
    }
    entries = [
        {
            "type": "message",
            "id": "a\x1b[2J",
            "parentId": None,
            "timestamp": "2025-01-01T00:00:01.000Z",
            "message": {
                "role": "user",
                "content": "hi \x9b31m \u202e rtl \u2066 \x1b[31mred\x1b[0m \x7f",
                "timestamp": 0,
            },
        },
        {
            "type": "label",
            "id": "l1",
            "parentId": "a\x1b[2J",
            "timestamp": "2025-01-01T00:00:02.000Z",
            "targetId": "a\x1b[2J",
            "label": "lab\x1b[5m\x85",
        },
        {
            "type": "session_info",
            "id": "n1",
            "parentId": "l1",
            "timestamp": "2025-01-01T00:00:03.000Z",
            "name": "name\x1b[1m\u202d",
        },
        {
            "type": "message",
            "id": "b\x9b",
            "parentId": "n1",
            "timestamp": "2025-01-01T00:00:04.000Z",
            "message": {"role": "assistant\x1b", "content": [{"type": "text", "text": "x\u2028y"}]},
        },
        {
            "type": "label",
            "id": "l2",
            "parentId": "b\x9b",
            "timestamp": "2025-01-01T00:00:05.000Z",
            "targetId": "gone\x1b[0m",
            "label": "x",
        },
    ]
    path = write_session(tmp_path / "evil.jsonl", entries, header)
    for command in COMMANDS:
        rc, out, err = run(capsys, command, path)
        assert "Traceback" not in err
        assert not UNSAFE.search(out), (command, UNSAFE.findall(out))
        assert not UNSAFE.search(err.replace("\n", ""))
        rc_json, doc = run_json(capsys, command, path)
        assert rc_json == rc
    rc, out, _ = run(capsys, "info", path)
    assert "evil\\x1b]0;pwned\\x07" in out and "/tmp/\\u202eevil" in out and "name\\x1b[1m\\u202d" in out
    rc, out, _ = run(capsys, "tree", path)
    assert "a\\x1b[2J user [lab\\x1b[5m\\x85]" in out and "\\x9b31m \\u202e rtl \\u2066" in out
    # --json keeps the real values (JSON escapes them)
    rc, doc = run_json(capsys, "info", path)
    assert doc["session_id"] == "evil\x1b]0;pwned\x07" and doc["session_name"] == "name\x1b[1m\u202d"
    rc, doc = run_json(capsys, "tree", path)
    assert doc["nodes"][0]["label"] == "lab\x1b[5m\x85"
    assert doc["nodes"][0]["preview"].startswith("hi \x9b31m \u202e")
    rc, out, _ = run(capsys, "validate", path)
    assert rc == 1 and "gone\\x1b[0m" in out


def test_lone_surrogates_print_and_serialize(capsys):
    path = GEN / "edge_lone_surrogate.jsonl"
    rc, out, _ = run(capsys, "tree", path)
    assert rc == 0 and "\\ud83d" in out
    rc, doc = run_json(capsys, "context", path)
    assert rc == 0


# ==== scale: no recursion ==================================================================


@pytest.fixture(scope="module")
def deep_chain(tmp_path_factory) -> Path:
    return write_chain(tmp_path_factory.mktemp("deep") / "chain200k.jsonl", 200_000)


def test_tree_of_a_200k_deep_chain(deep_chain, capsys):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # anything recursive per entry would blow up at once
    try:
        rc, out, err = run(capsys, "tree", deep_chain)
    finally:
        sys.setrecursionlimit(old)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 200_000
    assert lines[0] == "• e0000000 user: question 0"
    assert lines[-1] == "• e0199999 assistant: answer 199999  ← leaf"
    assert max(len(l) for l in lines) < 80  # a linear run never indents


def test_tree_json_of_a_200k_deep_chain(deep_chain, capsys):
    rc, doc = run_json(capsys, "tree", deep_chain, "--no-preview")
    assert rc == 0
    assert len(doc["nodes"]) == 200_000 and doc["nodes"][-1]["depth"] == 199_999


def test_branch_of_a_200k_deep_chain(deep_chain, capsys):
    rc, out, err = run(capsys, "branch", deep_chain, "--no-preview")
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 200_000
    assert lines[-1] == "199999  e0199999  assistant  ← leaf"
    rc, out, _ = run(capsys, "branch", deep_chain, "--from", "e0000002")
    assert out.splitlines() == [
        "0  e0000000  user: question 0",
        "1  e0000001  assistant: answer 1",
        "2  e0000002  user: question 2",
    ]


# ==== every real file ======================================================================


@pytest.mark.parametrize("path", REAL_FILES, ids=[p.name for p in REAL_FILES])
def test_tree_and_context_succeed_on_every_real_file(capsys, path):
    for command in ("tree", "context", "info", "branch", "entries"):
        rc, out, err = run(capsys, command, path)
        assert rc == 0, (command, err)
        assert not UNSAFE.search(out)
        rc, doc = run_json(capsys, command, path)
        assert rc == 0
    g = golden(path)
    rc, doc = run_json(capsys, "tree", path)
    assert len(doc["nodes"]) == len(g["tree"]["nodes"])
    if not legacy(g):  # each node once, in Pi's pre-order of first visits
        assert [n["id"] for n in doc["nodes"]] == list(dict.fromkeys(g["tree"]["preorder"]))
    rc, doc = run_json(capsys, "context", path)
    ctx = g["context"]
    if isinstance(ctx, dict) and "messages" in ctx:
        # where Pi's estimateTokens throws, the golden holds {"pi_error": ...} and we report null
        expected = [(m["role"], None if isinstance(m["tokens"], dict) else m["tokens"]) for m in ctx["messages"]]
        assert [(m["role"], m["tokens"]) for m in doc["messages"]] == expected


# ==== real processes =======================================================================


def _script() -> Path:
    return Path(sys.executable).with_name("sessiontree")


def test_installed_script_runs(tmp_path):
    script = _script()
    if not script.exists():
        pytest.skip("sessiontree script not installed in this environment")
    res = subprocess.run([str(script), "info", "--json", str(GEN / "labels.jsonl")], capture_output=True, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["leaf_id"] == "fdaf5370"
    res = subprocess.run([str(script), "validate", str(GEN / "edge_parent_cycle.jsonl")], capture_output=True)
    assert res.returncode == 1 and b"\x1b" not in res.stdout
    res = subprocess.run([str(script), "tree", str(tmp_path / "missing.jsonl")], capture_output=True)
    assert res.returncode == 2 and b"Traceback" not in res.stderr and res.stderr.count(b"\n") == 1


def test_python_dash_m_runs_and_escapes_on_a_real_terminal_stream():
    env = dict(os.environ, PYTHONIOENCODING="ascii")  # even a non-UTF-8 stdout must not crash
    res = subprocess.run(
        [sys.executable, "-m", "sessiontree", "tree", str(GEN / "edge_malformed_middle.jsonl")],
        capture_output=True,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert b"\x1b" not in res.stdout and b"\\x1b[31m" in res.stdout
    res = subprocess.run(
        [sys.executable, "-m", "sessiontree", "context", "--json", str(GEN / "unicode_heavy.jsonl")],
        capture_output=True,
    )
    assert res.returncode == 0 and json.loads(res.stdout)["count"] > 0


def test_output_into_a_closed_pipe_is_quiet(tmp_path):
    path = write_chain(tmp_path / "chain.jsonl", 20_000)  # ~600 kB of tree: more than a pipe holds
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiontree", "tree", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout.readline().startswith(b"\xe2\x80\xa2 e0000000 user")
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert err == b""


def test_info_writes_a_name_that_is_not_utf8_as_the_store_commands_do(tmp_path, capsys):
    """A file name with bytes that are not UTF-8: ``info`` shows each as ``\\xNN`` (the
    ``path`` of scrub-all, convert-all and the fleet's rows), not Python's ``\\udcNN``."""
    name = os.fsdecode(b"name-\xff\xfe.jsonl")
    path = tmp_path / name
    path.write_bytes((GEN / "labels.jsonl").read_bytes())
    rc, out, _ = run(capsys, "info", path)
    assert rc == 0
    first = out.splitlines()[0]
    assert first.endswith("name-\\xff\\xfe.jsonl") and "\\udc" not in out, first


def test_errors_name_a_file_that_is_not_utf8_with_xnn(tmp_path):
    """A one-line error naming a file (here a missing one) writes the name's bytes
    that are not UTF-8 as ``\\xNN``, like ``info`` and the store rows, not ``\\udcNN``."""
    missing = os.fsdecode(os.fsencode(str(tmp_path)) + b"/nope-\xff.jsonl")
    res = subprocess.run([sys.executable, "-m", "sessiontree", "info", missing], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.rstrip().endswith("nope-\\xff.jsonl: no such file"), res.stderr
    assert "\\udc" not in res.stderr
