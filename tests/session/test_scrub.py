"""Secret scrubbing (issue 20): each kind is caught, each look-alike kept, the tree and the
context unchanged, the bytes are JSON.stringify's, replay fields follow the policy, reports
hold no value, and the labelled set's recall and false-positive rate (tests/support/secrets.py,
also printed by benches/scrub_quality.py)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import orjson
import pytest

from sessiontree import Session
from sessiontree._jsjson import js_stringify_bytes
from sessiontree.errors import SessionArgumentError
from sessiontree.scrub import KINDS, scrub_bytes, scrub_file
from tests.support.secrets import NEGATIVES, SECRETS, corpus_files, evaluate

PLACEHOLDER = re.compile(rb"\[REDACTED:([a-z0-9_]+):([0-9a-f]{6})\]")
HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}


def _session(*texts: str) -> bytes:
    lines = [HEADER]
    parent = None
    for n, t in enumerate(texts):
        eid = f"e{n:07d}"
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z",
                "message": {"role": "user", "content": [{"type": "text", "text": t}], "timestamp": 1},
            }
        )
        parent = eid
    return b"".join(js_stringify_bytes(x) + b"\n" for x in lines)


def test_at_least_25_kinds():
    assert len(KINDS) >= 25
    assert set(SECRETS) == set(KINDS), "the labelled set covers every kind the rules name"


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_each_kind_is_replaced_by_its_placeholder(kind):
    rng = random.Random(kind)
    text, value = SECRETS[kind](rng)
    data = _session(f"here it is:\n{text}\nthanks")
    out, report = scrub_bytes(data)
    assert value.encode() not in out
    assert [f.kind for f in report.findings] == [kind]
    got = orjson.loads(out.split(b"\n")[1])["message"]["content"][0]["text"]
    m = PLACEHOLDER.search(got.encode())
    assert m and m.group(1).decode() == kind
    f = report.findings[0]
    assert (f.line, f.entry_id, f.pointer, f.in_key) == (2, "e0000000", "/message/content/0/text", False)
    # offsets (code points) point at the value in the original string
    original = orjson.loads(data.split(b"\n")[1])["message"]["content"][0]["text"]
    assert original[f.start : f.end] == value


@pytest.mark.parametrize("kind", sorted(NEGATIVES))
def test_each_look_alike_is_kept(kind):
    rng = random.Random(kind)
    for _ in range(20):
        data = _session(f"see {NEGATIVES[kind](rng)} ok")
        out, report = scrub_bytes(data)
        assert out == data, report.findings


def test_equal_secrets_give_equal_placeholders_and_different_ones_differ():
    a = "ghp_" + "A1b2C3d4E5" * 3 + "xYz123"
    b = "ghp_" + "Z9y8X7w6V5" * 3 + "aBc456"
    out, report = scrub_bytes(_session(f"{a} {b}", f"again {a}"))
    marks = PLACEHOLDER.findall(out)
    assert len(marks) == 3 and marks[0] == marks[2] and marks[0] != marks[1]
    assert report.findings[0].hash == report.findings[2].hash


def test_scrubbing_twice_changes_nothing_more():
    rng = random.Random(1)
    texts = [SECRETS[k](rng)[0] for k in sorted(SECRETS)]
    once, _ = scrub_bytes(_session(*texts))
    twice, report = scrub_bytes(once)
    assert twice == once and report.found == 0


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_the_tree_and_context_are_unchanged_on_the_real_corpus(path, tmp_path):
    """Scrub a planted copy of each real session: same entries, ids, parents, types, leaf,
    labels, firstKeptEntryId/fromId/targetId, and the same number of context messages."""
    from tests.support.secrets import planted_corpus

    files, _ = planted_corpus(seed=3, per_kind=6)
    data = files[path.name]
    src = tmp_path / path.name
    src.write_bytes(data)
    out = tmp_path / ("clean-" + path.name)
    report = scrub_file(src, out)
    a, b = Session.open(src), Session.open(out)
    ta, tb = a.entry_table(), b.entry_table()
    assert (ta.id, ta.parent_id, ta.type, ta.role, ta.line) == (tb.id, tb.parent_id, tb.type, tb.role, tb.line)
    assert a.leaf_id == b.leaf_id and len(a) == len(b)
    assert a.labels.keys() == b.labels.keys()
    for i in range(len(a)):
        ra, rb = a.entry_at(i).raw, b.entry_at(i).raw
        if isinstance(ra, dict):
            for k in ("firstKeptEntryId", "fromId", "targetId", "id", "parentId", "timestamp"):
                assert ra.get(k) == rb.get(k)
    try:
        ca = len(a.build_context().messages)
    except Exception as exc:  # noqa: BLE001 - the same failure on both sides
        with pytest.raises(type(exc)):
            b.build_context()
    else:
        assert len(b.build_context().messages) == ca
    # every line that changed is exactly what JSON.stringify writes for its value
    for la, lb in zip(data.split(b"\n"), out.read_bytes().split(b"\n"), strict=True):
        if la != lb:
            assert js_stringify_bytes(orjson.loads(lb)) == lb
    assert report.found > 0


def test_replay_fields_keep_is_the_default_and_drop_removes_them():
    tok = "ghp_" + "Q1w2E3r4T5" * 3 + "yU7i8o"
    msg = {
        "type": "message",
        "id": "a1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"the key is {tok}", "thinkingSignature": "EqQBCkYIBxgCKkA" + tok},
                {"type": "thinking", "thinking": "", "thinkingSignature": "opaque", "redacted": True},
                {"type": "text", "text": "done", "textSignature": '{"v":1,"id":"msg_1"}'},
                {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {}, "thoughtSignature": "c2ln"},
            ],
        },
    }
    data = js_stringify_bytes(HEADER) + b"\n" + js_stringify_bytes(msg) + b"\n"
    out, rep = scrub_bytes(data)
    content = orjson.loads(out.split(b"\n")[1])["message"]["content"]
    assert content[0]["thinkingSignature"] == "EqQBCkYIBxgCKkA" + tok  # kept byte for byte
    assert tok not in content[0]["thinking"]
    assert (rep.replay, rep.replay_fields) == ("keep", 4)
    out, rep = scrub_bytes(data, replay="drop")
    content = orjson.loads(out.split(b"\n")[1])["message"]["content"]
    assert all(not any(k.endswith("Signature") for k in block) for block in content)
    assert content[1] == {"type": "thinking", "thinking": "", "redacted": True}
    assert (rep.replay, rep.replay_fields) == ("drop", 4)
    assert rep.to_json()["replayPolicy"] == "drop"
    with pytest.raises(SessionArgumentError):
        scrub_bytes(data, replay="zero")


def test_header_cwd_and_parent_session_only_when_asked():
    tok = "ghp_" + "Q1w2E3r4T5" * 3 + "yU7i8o"
    head = dict(HEADER, cwd=f"/w/{tok}", parentSession=f"/s/{tok}.jsonl")
    data = js_stringify_bytes(head) + b"\n"
    assert scrub_bytes(data)[0] == data
    out, rep = scrub_bytes(data, header=True)
    assert tok.encode() not in out and rep.found == 2
    assert orjson.loads(out)["id"] == "s1"


def test_reports_never_hold_a_value():
    rng = random.Random(7)
    samples = [SECRETS[k](rng) for k in sorted(SECRETS)]
    _, report = scrub_bytes(_session(*(t for t, _ in samples)))
    doc = orjson.dumps(report.to_json())
    assert report.found == len(samples)
    for _, value in samples:
        assert value.encode() not in doc


def test_secret_keys_are_replaced_with_the_pointer_naming_the_placeholder():
    tok = "sk-ant-api03-" + "x1Y2z3" * 16 + "AA"
    entry = {
        "type": "custom",
        "customType": "cfg",
        "id": "c1",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "data": {tok: {"apiKey": "Zx81Kq93LmA0pQ7rT5vW2yB4"}},
    }
    out, rep = scrub_bytes(js_stringify_bytes(HEADER) + b"\n" + js_stringify_bytes(entry) + b"\n")
    assert tok.encode() not in out and b"Zx81Kq93LmA0pQ7rT5vW2yB4" not in out
    kinds = sorted((f.kind, f.in_key) for f in rep.findings)
    assert kinds == [("anthropic_api_key", True), ("secret_keyed_value", False)]
    assert all(tok not in (f.pointer or "") for f in rep.findings)


def test_labelled_set_recall_and_false_positives():
    r = evaluate(seed=20, per_kind=20)
    assert r["tree_ok"]
    assert r["positives"] >= 25 * 20 and len(r["per_negative"]) >= 10
    assert r["recall"] >= 0.98, [(p["label"], p["slot"]) for p in r["misses"]]
    for kind, (ok, n) in r["per_kind"].items():
        assert ok / n >= 0.98 or n - ok <= 0, (kind, ok, n)
    assert r["false_positive_rate"] <= 0.01, [(p["label"], p["slot"]) for p in r["false_positives"]]
    # every kind of string got samples
    assert {"user_text", "assistant_text", "thinking", "tool_call_arguments", "tool_call_name", "tool_result"} <= set(
        r["per_slot"]
    )
    assert {"bash_command", "bash_output", "compaction_summary", "custom_data", "label", "session_name"} <= set(
        r["per_slot"]
    )
    assert "object_key" in r["per_slot"] and "branch_summary_summary" in r["per_slot"]


def test_session_scrub_api(tmp_path):
    tok = "glpat-" + "aB3dE6gH9jK2mN5pQ8sT"
    src = tmp_path / "s.jsonl"
    src.write_bytes(_session("a", f"token {tok}"))
    src.chmod(0o640)
    s = Session.open(src)
    rep = s.scrub(check=True)
    assert rep.found == 1 and not rep.written and src.read_bytes().count(tok.encode()) == 1
    out = tmp_path / "o.jsonl"
    rep = s.scrub(out)
    assert rep.written and tok.encode() not in out.read_bytes() and (out.stat().st_mode & 0o777) == 0o640
    leaf = s.leaf_id
    rep = s.scrub(in_place=True)
    assert rep.found == 1 and tok.encode() not in src.read_bytes()
    assert (src.stat().st_mode & 0o777) == 0o640
    assert s.leaf_id == leaf and len(s) == 2
    assert Path(src).read_bytes() == out.read_bytes()
    with pytest.raises(SessionArgumentError):
        s.scrub(src)  # the output is the input
    with pytest.raises(SessionArgumentError):
        s.scrub()
    with pytest.raises(SessionArgumentError):
        Session.in_memory().scrub(check=True)


def test_tokens_whose_last_character_is_a_dash_or_underscore_are_caught_whole():
    sg = "SG." + "aB3dE6gH9jK2mN5pQ8sT0u" + "." + "x" * 21 + "Y7z" * 7 + "-"  # 22 . 43
    dc = "M" + "Tk4NzY1NDMyMTIzNDU2Nzg5MA" + ".Gh7K2p." + "aZ" * 18 + "_"
    out, rep = scrub_bytes(_session(sg, f"discord token {dc}"))
    assert sg.encode() not in out and dc.encode() not in out
    assert [f.kind for f in rep.findings] == ["sendgrid_api_key", "discord_bot_token"]
    assert [f.end - f.start for f in rep.findings] == [len(sg), len(dc)]


def test_the_readme_scrub_example_runs(tmp_path, monkeypatch):
    text = (Path(__file__).resolve().parent.parent.parent / "README.md").read_text()
    start = text.index("\n## Scrubbing secrets")
    block = re.findall(r"```python\n(.*?)```", text[start : text.index("\n## ", start + 1)], re.S)[0]
    gh = "ghp_" + "Q1w2E3r4T5" * 3 + "yU7i8o"
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlc2lnbmF0dXJl"
    (tmp_path / "session.jsonl").write_bytes(_session(f"use {gh}", f"again {gh} and {jwt}"))
    monkeypatch.chdir(tmp_path)
    printed: list[str] = []
    exec(compile(block, "README", "exec"), {"print": lambda *a: printed.append(" ".join(map(str, a)))})
    assert printed == ["3 {'github_token': 2, 'jwt': 1} keep"]
    assert gh.encode() not in (tmp_path / "shared.jsonl").read_bytes()


@pytest.mark.skipif(__import__("shutil").which("node") is None, reason="node is not installed")
def test_node_reads_and_writes_the_scrubbed_lines_byte_for_byte():
    """Every line the scrubber rewrote is what node's JSON.stringify(JSON.parse(line)) writes,
    lone surrogates and control characters included (Pi reads and writes with those)."""
    import subprocess

    from tests.support.secrets import planted_corpus

    files, _ = planted_corpus(seed=5, per_kind=4)
    gh = "ghp_" + "Q1w2E3r4T5" * 3 + "yU7i8o"
    odd = _session(f'\ud800 \x01 \u2028 "q" \\ {gh} é 😀')
    changed: list[bytes] = []
    for data in [*files.values(), odd]:
        out, _ = scrub_bytes(data)
        changed += [b for a, b in zip(data.split(b"\n"), out.split(b"\n"), strict=True) if a != b]
    assert len(changed) > 100
    script = (
        "const ls=require('fs').readFileSync(0,'utf8').split('\\n');"
        "process.stdout.write(ls.map(l=>JSON.stringify(JSON.parse(l))).join('\\n'))"
    )
    got = subprocess.run(["node", "-e", script], input=b"\n".join(changed), capture_output=True, check=True).stdout
    assert got.split(b"\n") == changed
