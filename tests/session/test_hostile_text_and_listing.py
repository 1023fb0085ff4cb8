"""Hardening against hostile files, replies and listings (issue 11, items 11-25): each probe
has a clear outcome (a value, a recorded problem or a typed error) in bounded time and memory.

Inputs are generated at run time and kept small; the big-memory figures quoted in
docs/reliability.md were measured once in a subprocess (the tests below measure the same
shape at a size that runs in a second or two).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sessiontree import Session, SessionError, _core
from tests.support.cli_run import run_cli
from sessiontree.entries import parse_json_line
from tests.support.lines import HEADER, message_line as _msg

MiB = 1 << 20


def _run_child(code: str, *args: str, timeout: float = 120) -> dict:
    """Run ``code`` in a fresh interpreter (with ``anon()``/``hwm()``: RssAnon and VmHWM in
    bytes); it prints one JSON document."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_RSS) + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


_RSS = """
    def anon():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
"""


# ==== 12: lines orjson refuses are parsed in linear time and memory ==============


def test_a_torn_line_of_escaped_quotes_is_refused_in_linear_time():
    # The old fallback ran a backtracking regex from every quote: 64 KB took 30 s.
    line = b'{"type":"message","s":"' + b'\\"' * (64 * 1024)
    t = time.process_time()  # CPU time: a loaded machine does not inflate it
    with pytest.raises(ValueError):
        parse_json_line(line)
    assert time.process_time() - t < 0.5


def test_lines_orjson_refuses_parse_as_javascript_reads_them():
    assert parse_json_line(b'{"s":"\\ud800x"}') == {"s": "\ud800x"}
    big = parse_json_line(b'{"s":"\\ud800","n":123456789012345678901234567890}')["n"]
    assert big == 123456789012345678901234567890  # JS reads the nearest double; _jsjson rounds
    assert parse_json_line(b'{"s":"a\xffb"}') == {"s": "a\ufffdb"}
    huge = parse_json_line(b'{"s":"\\udc00","n":' + b"9" * 5000 + b"}")
    assert huge["n"] == float("inf")  # JSON.parse: Infinity; Python's int() refuses 5,000 digits
    for not_json in (b'{"n":NaN}', b'{"n":-Infinity}', b'{"s":"\\ud800",}', b'{"s":"\\ud800"} x'):
        with pytest.raises(ValueError):
            parse_json_line(not_json)
    deep = b"[" * 1500 + b'"\\ud800"' + b"]" * 1500
    with pytest.raises(SessionError, match="nested too deeply"):
        parse_json_line(deep)


def test_a_long_string_orjson_refuses_costs_a_small_multiple_of_its_size(tmp_path):
    # 4 MiB here (19 MiB measured for docs/reliability.md): the old regex fallback peaked at
    # about 120x the string (+480 MiB for this size).
    r = _run_child("""
        import json, sys
        from sessiontree.entries import parse_json_line
        line = b'{"type":"message","s":"\\\\ud800' + b"x" * (4 << 20) + b'"}'
        base = hwm()
        v = parse_json_line(line)
        print(json.dumps({"growth": hwm() - base, "len": len(v["s"])}))
    """)
    assert r["len"] == (4 << 20) + 1
    assert r["growth"] < 12 * 4 * MiB, r


# ==== 13: runs of problems are stored compactly ================================


def test_many_blank_lines_cost_no_memory_per_line(tmp_path):
    p = tmp_path / "blank.jsonl"
    p.write_bytes(HEADER + b"\n" * (8 * MiB) + _msg("a", None))
    r = _run_child(
        """
        import json, sys
        from sessiontree import Session
        base = anon()
        s = Session.open(sys.argv[1])
        grown = anon() - base
        pr = s.problems
        print(json.dumps({"grown": grown, "n": len(pr), "mid": list(pr[4 << 20][:3]),
                          "last": list(pr[-1][:3]), "ids": [e.id for e in s.entries()]}))
    """,
        str(p),
    )
    assert r["n"] == 8 * MiB and r["ids"] == ["a"]
    assert r["mid"] == [2 + (4 << 20), len(HEADER) + (4 << 20), "blank_line"]
    assert r["last"] == [1 + 8 * MiB, len(HEADER) + 8 * MiB - 1, "blank_line"]
    assert r["grown"] < 16 * MiB, r  # was 24 bytes per blank line: +192 MiB


def test_problem_runs_answer_the_same_per_line_facts(tmp_path):
    rnd = random.Random(13)
    parts, want = [HEADER], []
    off, line = len(HEADER), 2
    for _ in range(3000):
        kind = rnd.choice(["nl", "crlf", "spaces", "junk", "junk2", "entry"])
        for _ in range(rnd.choice([1, 1, 2, 50])):
            b = {
                "nl": b"\n",
                "crlf": b"\r\n",
                "spaces": b"   \n",
                "junk": b"xyz\n",
                "junk2": b"[1,\n",
                "entry": _msg(f"e{line}", None),
            }[kind]
            if kind != "entry":
                want.append((line, off, "blank_line" if kind in ("nl", "crlf", "spaces") else "malformed_json"))
            parts.append(b)
            off += len(b)
            line += 1
    p = tmp_path / "mixed.jsonl"
    p.write_bytes(b"".join(parts))
    s = Session.open(p)
    got = [(q.line, q.offset, q.kind) for q in s.problems]
    assert got == want
    for i in range(0, len(want), 97):
        assert tuple(s.problems[i][:3]) == want[i]


# ==== 15: no recursion on content ==============================================


def test_the_js_serializers_do_not_recurse_on_depth():
    from sessiontree._jsjson import js_stringify, js_to_string

    n = 100_000
    deep: list = ["x", 1.0]
    for _ in range(n):
        deep = [deep, {"k": 1e21}]
    out = js_stringify(deep)
    assert out.startswith("[" * n + '["x",1]') and out.endswith(',{"k":1e+21}]')
    assert js_to_string(deep) == "x,1" + ",[object Object]" * n


def test_content_nested_to_the_loader_limit_compacts_and_prints(tmp_path):
    from sessiontree.entries import MAX_DEPTH

    deep = "[" * (MAX_DEPTH - 6) + '"x"' + "]" * (MAX_DEPTH - 6)
    lines, prev = [HEADER.decode().rstrip("\n")], None
    for i in range(6):
        role = ("user", "assistant")[i % 2]
        extra = (
            (
                ',"usage":{"input":10,"output":10,"cacheRead":0,"cacheWrite":0,"totalTokens":20,'
                '"cost":{"total":0}},"stopReason":"stop","api":"x","provider":"x","model":"x"'
            )
            if i % 2
            else ""
        )
        content = '[{"type":"text","text":"%s","deep":%s}]' % ("w " * 2000, deep)
        lines.append(
            '{"type":"message","id":"e%d","parentId":%s,"timestamp":"2026-01-01T00:00:0%d.000Z",'
            '"message":{"role":"%s","content":%s,"timestamp":1%s}}' % (i, json.dumps(prev), i, role, content, extra)
        )
        prev = f"e{i}"
    p = tmp_path / "deep.jsonl"
    p.write_text("\n".join(lines) + "\n")
    for argv in (
        ["context", p, "--json"],
        ["context", p, "--llm", "--json"],
        ["tree", p, "--json"],
        ["compact", p, "--dry-run", "--keep-recent-tokens", "100", "--json"],
    ):
        rc, out, _ = run_cli(*argv)
        depth, error = _core.json_check(out.encode())  # json.loads itself would recurse
        assert rc == 0 and error is None and depth >= (MAX_DEPTH - 6 if argv[0] == "context" else 1), argv
    s = Session.open(p)
    assert s.find_cut_point(100).first_kept_entry_id
    s.close()
    rc, _, _ = run_cli("compact", p, "--keep-recent-tokens", "100")
    assert rc == 0
    assert Session.open(p).entries()[-1].type == "compaction"


# ==== 14: every scan of untrusted text is linear ===============================


def _timed(fn, *args):
    """(result, CPU seconds of this process): a loaded machine does not inflate CPU time."""
    t = time.process_time()
    r = fn(*args)
    return r, time.process_time() - t


def test_the_overflow_patterns_scan_a_huge_error_in_linear_time():
    from sessiontree.autocompact import is_overflow_error
    from sessiontree.summarizers.overflow import is_context_overflow

    assert is_context_overflow(400, "The input token count (1200000) exceeds the maximum number of tokens allowed")
    assert not is_context_overflow(400, "the maximum number of tokens exceeds the input token count")
    hostile = "input token count " * (288 * 1024 // 18)  # 288 KB: 22-38 s before
    r, secs = _timed(is_context_overflow, 400, hostile)
    assert r is False and secs < 2
    msg = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": hostile}
    r, secs = _timed(is_overflow_error, msg)
    assert r is False and secs < 2


def test_offline_rolling_updates_are_linear_in_the_previous_summary():
    from sessiontree.summarizers.base import SummaryRequest
    from sessiontree.summarizers.offline import OfflineSummarizer, parse_summary

    conv = '[User]: continue the work please.\n\n[Assistant tool calls]: read(path="a.py"); read(path="b.py")'
    summarize = OfflineSummarizer().summarize_text
    # a 40 KB token where a "name×count" is looked for (15-25 s before)
    prev = "## Goal\nShip\n\n## Critical Context\n- Tool calls: " + "x" * 40_000 + "\n- Tool calls: bash×2\n"
    text, secs = _timed(summarize, SummaryRequest("compaction", conv, previous_summary=prev))
    assert secs < 2 and "read×2" in text and "bash×2" in text
    # 20,000 bullets and 20,000 tool-call lines to merge (minutes before)
    prev = (
        "## Goal\nShip\n\n## Progress\n### In Progress\n"
        + "".join(f"- [ ] item number {i} of the work\n" for i in range(20_000))
        + "## Critical Context\n"
        + "".join(f"- Tool calls: t{i % 50}×1\n- note {i} about things\n" for i in range(20_000))
    )
    text, secs = _timed(summarize, SummaryRequest("compaction", conv, previous_summary=prev))
    assert secs < 5 and "note 19999 about things" in text
    # a count too long for int() is not a crash
    prev = "## Critical Context\n- Tool calls: a×" + "9" * 5000 + "\n"
    assert "Tool calls:" in summarize(SummaryRequest("compaction", conv, previous_summary=prev))
    # unclosed file-list blocks
    r, secs = _timed(parse_summary, "<read-files>\n" * 20_000 + "## Goal\nShip\n<modified-files>\na\n</modified-files>")
    assert secs < 1 and r["goal"] == ["Ship"]


def test_tool_call_arguments_nested_too_deep_for_python_end_that_call():
    from sessiontree.summarizers.offline import parse_tool_calls

    deep = "[" * 100_000 + "]" * 100_000  # json.JSONDecoder raises RecursionError on it
    calls = parse_tool_calls(f'read(path="a", x={deep}); bash(command="ls")')
    assert [name for name, _ in calls] == ["read", "bash"]
    assert calls[0][1]["path"] == "a" and calls[1][1] == {"command": "ls"}


# ==== 16: wrong types and huge integers: a value, a problem or a typed error ====

_U = (
    '{"type":"message","id":"u%d","parentId":%s,"timestamp":"2026-01-01T00:00:01.000Z",'
    '"message":{"role":"user","content":"%s","timestamp":1}}'
)
_A = (
    '{"type":"message","id":"a%d","parentId":"u%d","timestamp":"2026-01-01T00:00:02.000Z",'
    '"message":{"role":"assistant","content":[{"type":"text","text":"%s"}],"usage":{"input":%s,"output":1,'
    '"cacheRead":0,"cacheWrite":0,"totalTokens":%s,"cost":{"total":0}},"stopReason":"stop","timestamp":1}}'
)


def _chain(n: int, usage: str = "1", text: str = "x ") -> list[str]:
    out, prev = [], "null"
    for i in range(n):
        out.append(_U % (i, prev, "w " * 500))
        out.append(_A % (i, i, text * 500, usage, usage))
        prev = '"a%d"' % i
    return out


def _session_file(tmp_path: Path, lines: list[str], name: str = "s.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join([HEADER.decode().rstrip("\n")] + lines) + "\n")
    return p


@pytest.mark.parametrize("case", ["huge_int", "label_target_object", "role_object"])
def test_wrong_shapes_never_escape_as_stray_exceptions(tmp_path, case):
    if case == "huge_int":  # a lone surrogate sends the line past orjson, to Python's int limit
        lines = _chain(4, usage="9" * 5000, text="\\ud800 ")
    elif case == "label_target_object":
        lines = _chain(2) + [
            '{"type":"label","id":"l1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z",'
            '"targetId":{"x":1},"label":"hi"}',
            '{"type":"label","id":"l2","parentId":"l1","timestamp":"2026-01-01T00:00:03.000Z",'
            '"targetId":"u0","label":"ok"}',
        ]
    else:
        lines = (
            _chain(2)
            + [
                '{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z",'
                '"message":{"role":{"x":1},"content":"hi","timestamp":1}}'
            ]
            + _chain(2)[2:]
        )
    p = _session_file(tmp_path, lines)
    s = Session.open(p)
    raws = [e.raw for e in s.entries()]
    assert all(isinstance(r, dict) for r in raws)
    s.build_context()
    s.usage_totals()
    s.find_cut_point(100)
    s.get_tree()
    if case == "label_target_object":
        assert s.labels == {"u0": "ok"}  # Pi keys its Map by the object: no id can find it
    if case == "huge_int":
        assert raws[1]["message"]["usage"]["input"] == float("inf")  # JSON.parse: Infinity
    s.close()
    for argv in (
        ["info", p],
        ["tree", p],
        ["branch", p],
        ["context", p, "--json"],
        ["compact", p, "--keep-recent-tokens", "100", "--dry-run"],
        ["compact", p, "--keep-recent-tokens", "100"],
    ):
        rc, _, err = run_cli(*argv)
        assert rc == 0, (argv, err)


# ==== 18: the CLI's write and output failures: one line, exit 2, JSON with --json ====


def _sessiontree(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sessiontree", *map(str, argv)], text=True, timeout=120, **kw)


@pytest.mark.parametrize("command", [["compact", "--keep-recent-tokens", "100"], ["navigate", "u0", "--summarize"]])
@pytest.mark.parametrize("as_json", [False, True])
def test_a_failed_append_is_one_line_and_exit_2(tmp_path, command, as_json):
    import resource

    p = _session_file(tmp_path, _chain(4))
    before = p.read_bytes()
    limit = len(before) + 10  # the file may not grow past this: the append fails with EFBIG

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    argv = [command[0], p, *command[1:]] + (["--json"] if as_json else [])
    r = _sessiontree(argv, capture_output=True, preexec_fn=small_files)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "File too large" in r.stderr
    if as_json:
        doc = json.loads(r.stdout)
        assert doc["error"] is True and doc["exit_code"] == 2 and "File too large" in doc["message"]
    else:
        assert r.stdout == ""
    assert p.read_bytes() == before  # nothing reported written, nothing half-written


@pytest.mark.parametrize("argv", [["info"], ["info", "--json"], ["tree"], ["compact", "--keep-recent-tokens", "100"]])
def test_stdout_full_or_closed_is_one_line_and_exit_2(tmp_path, argv):
    import os

    p = _session_file(tmp_path, _chain(4))
    full_argv = [argv[0], p, *argv[1:]]
    with open("/dev/full", "w") as full:
        r = _sessiontree(full_argv, stdout=full, stderr=subprocess.PIPE)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "No space left on device" in r.stderr and "Traceback" not in r.stderr
    if argv[0] == "compact":  # the entry was appended before the report failed: say so
        assert "was written" in r.stderr
    r = _sessiontree(full_argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "standard output is closed" in r.stderr, r.stderr


def test_every_json_failure_prints_a_json_error_document(tmp_path):
    for argv in (
        ["info", tmp_path / "missing.jsonl", "--json"],
        ["branch", _session_file(tmp_path, _chain(1)), "--from", "nope", "--json"],
        ["info", "--json", "--no-such-option", tmp_path / "x.jsonl"],
    ):
        r = _sessiontree(argv, capture_output=True)
        assert r.returncode == 2
        doc = json.loads(r.stdout)
        assert doc["error"] is True and doc["exit_code"] == 2 and doc["message"]


# ==== 17: hostile summarizer replies raise the summarizer error ================


def _raw_openai_stream(text_chunks: list[str], usage_json: str):
    """An OpenAI SSE stream whose chunks and usage are raw JSON text (``1e400`` cannot come
    out of json.dumps)."""

    def act(h) -> None:
        base = '"id":"c","object":"chat.completion.chunk","created":1,"model":"m"'
        try:
            h.send_sse_headers()
            for delta in text_chunks:
                h.write('data: {%s,"choices":[{"index":0,"delta":%s,"finish_reason":null}]}\n\n' % (base, delta))
            h.write('data: {%s,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n' % base)
            h.write('data: {%s,"choices":[],"usage":%s}\n\n' % (base, usage_json))
            h.write("data: [DONE]\n\n")
        except OSError:  # the client gave up on the reply (as it should): not this test's concern
            pass

    return act


def _raw_anthropic_stream(delta_text_json: str, usage_json: str):
    def act(h) -> None:
        h.send_sse_headers()

        def event(name: str, data: str) -> None:
            h.write(f"event: {name}\ndata: {data}\n\n")

        event(
            "message_start",
            '{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant",'
            '"model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,'
            '"usage":%s}}' % usage_json,
        )
        event(
            "content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
        )
        event(
            "content_block_delta",
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}' % delta_text_json,
        )
        event("content_block_stop", '{"type":"content_block_stop","index":0}')
        event(
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
            '"usage":{"output_tokens":4}}',
        )
        event("message_stop", '{"type":"message_stop"}')

    return act


_GOOD_TEXT = ['{"content":"## Goal\\nShip"}']
_OPENAI_HOSTILE = {
    "usage_1e400": (_GOOD_TEXT, '{"prompt_tokens":1e400,"completion_tokens":5,"total_tokens":1}'),
    "usage_nan": (_GOOD_TEXT, '{"prompt_tokens":NaN,"completion_tokens":5,"total_tokens":1}'),
    "details_string": (
        _GOOD_TEXT,
        '{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":"cached"}',
    ),
    "cost_infinite": (_GOOD_TEXT, '{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"cost":1e400}'),
    "content_object": (
        ['{"content":{"text":"## Goal"}}'],
        '{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}',
    ),
}
_ANTHROPIC_HOSTILE = {
    "usage_1e400": ('"## Goal"', '{"input_tokens":1e400,"output_tokens":1}'),
    "usage_nan": ('"## Goal"', '{"input_tokens":NaN,"output_tokens":1}'),
    "text_object": ('{"a":1}', '{"input_tokens":10,"output_tokens":1}'),
}


@pytest.mark.parametrize("case", sorted(_OPENAI_HOSTILE))
def test_hostile_openai_replies_raise_the_summarizer_error(case):
    pytest.importorskip("openai")
    import asyncio

    from tests.summarizers.test_summarizer_http import REQ, FakeLLM, make_openai

    from sessiontree.summarizers import SummarizerError

    fake = FakeLLM()
    try:
        chunks, usage = _OPENAI_HOSTILE[case]
        fake.default = _raw_openai_stream(chunks, usage)
        with pytest.raises(SummarizerError):
            asyncio.run(make_openai(fake).summarize(REQ))
    finally:
        fake.close()


@pytest.mark.parametrize("case", sorted(_ANTHROPIC_HOSTILE))
def test_hostile_anthropic_replies_raise_the_summarizer_error(case):
    pytest.importorskip("anthropic")
    import asyncio

    from tests.summarizers.test_summarizer_http import REQ, FakeLLM, make_anthropic

    from sessiontree.summarizers import SummarizerError

    fake = FakeLLM()
    try:
        text, usage = _ANTHROPIC_HOSTILE[case]
        fake.default = _raw_anthropic_stream(text, usage)
        with pytest.raises(SummarizerError):
            asyncio.run(make_anthropic(fake).summarize(REQ))
    finally:
        fake.close()


def test_the_cli_reports_a_hostile_reply_in_one_line(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from tests.summarizers.test_summarizer_http import FakeLLM

    fake = FakeLLM()
    try:
        fake.default = _raw_openai_stream(_GOOD_TEXT, '{"prompt_tokens":NaN,"completion_tokens":5,"total_tokens":1}')
        p = _session_file(tmp_path, _chain(4))
        before = p.read_bytes()
        monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
        for extra in ([], ["--json"]):
            rc, out, err = run_cli(
                "compact",
                p,
                "--keep-recent-tokens",
                "100",
                "--summarizer",
                "openai",
                "--model",
                "m",
                "--base-url",
                fake.openai_url,
                *extra,
            )
            assert rc == 2 and err.count("\n") == 1 and "impossible token count" in err, err
            assert (json.loads(out)["exit_code"] == 2) if extra else out == ""
        assert p.read_bytes() == before
    finally:
        fake.close()


# ==== 11: get_tree never returns a cyclic graph =================================


def _no_node_below_itself(roots) -> None:
    """Depth-first over the returned TreeNodes with an explicit stack, tracking the path."""
    stack = [(r, False) for r in roots]
    on_path: set[int] = set()
    while stack:
        node, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            continue
        assert id(node) not in on_path, f"{node} is below itself"
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in node.children)


def test_get_tree_raises_when_duplicate_ids_put_a_node_below_itself(tmp_path):
    from sessiontree import SessionCycleError

    m = '{"type":"custom","id":"%s","parentId":%s,"timestamp":"2026-01-01T00:00:0%d.000Z"}'
    p = _session_file(tmp_path, [m % ("a", "null", 1), m % ("b", '"a"', 2), m % ("a", '"b"', 3)])
    s = Session.open(p)
    with pytest.raises(SessionCycleError):
        s.get_tree()
    rc, out, err = run_cli("tree", p)  # the CLI's own walk shows the repeat once and warns
    assert rc == 0 and "(shown above)" in out and "cycle" in err
    # a repeated id that is not a cycle (listed under two parents) still gives a tree
    p = _session_file(tmp_path, [m % ("r", "null", 1), m % ("a", '"r"', 2), m % ("a", '"a"', 3)], name="dag.jsonl")
    roots = Session.open(p).get_tree()
    _no_node_below_itself(roots)
    assert [r.entry.id for r in roots] == ["r", "a"]


# ==== 19-23: listing agrees with opening, in bounded reads =====================


def _header(sid="s1", ts="2026-01-01T00:00:00.000Z", **extra) -> str:
    return json.dumps(
        {"type": "session", "version": 3, "id": sid, "timestamp": ts, "cwd": "/p", **extra}, separators=(",", ":")
    )


def _listed(d: Path) -> dict:
    from sessiontree import list_sessions

    return {i.id: i for i in list_sessions(session_dir=d)}


def test_listing_survives_times_beyond_python_datetimes(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    # year 10000 (JavaScript accepts it; datetime stops at 9999), a 1e400 message time
    (d / "a.jsonl").write_text(_header("y10k", ts="+010000-01-01T00:00:00.000Z") + "\n")
    (d / "b.jsonl").write_text(
        _header("inf") + "\n" + (_U % (0, "null", "hi")).replace('"timestamp":1}', '"timestamp":1e400}') + "\n"
    )
    (d / "c.jsonl").write_text(_header("old", ts="2020-01-01T00:00:00.000Z") + "\n")
    for name in ("a", "b", "c"):
        Session.open(d / f"{name}.jsonl").close()  # Session reads each: listing must list each
    got = _listed(d)
    assert set(got) == {"y10k", "inf", "old"}
    assert got["y10k"].modified.year == 9999 and got["y10k"].modified_ms == 253402300800000.0
    assert got["inf"].modified.year == 2026  # 1e400 is no time: the header time stands
    from sessiontree import list_sessions

    assert [i.id for i in list_sessions(session_dir=d)] == ["y10k", "inf", "old"]


def test_listing_and_opening_agree_on_what_a_session_is(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    files = {
        "late_header": "\n  \nnot json\n" + _header("late") + "\n" + _U % (0, "null", "first prompt") + "\n",
        "long_header": _header("long", pad="x" * (2 << 20)) + "\n",
        "nan_lines": _header("nan")
        + "\n"
        + _U % (0, "null", "hi")
        + "\n"
        + '{"type":"session_info","id":"i1","parentId":"u0","timestamp":"2026-01-01T00:00:05.000Z","name":"evil","x":NaN}\n'
        + '{"type":"message","id":"m9","parentId":"u0","timestamp":"2030-01-01T00:00:00.000Z","message":{"role":"user","content":"x","timestamp":Infinity}}\n',
        "id_not_string": '{"type":"session","version":3,"id":1,"cwd":"/p"}\n',
        "array_first": "[1]\n" + _header("after") + "\n",
    }
    for name, text in files.items():
        (d / f"{name}.jsonl").write_text(text)
    got = _listed(d)
    for name in files:
        try:
            opened = Session.open(d / f"{name}.jsonl").header["id"]
        except Exception:
            opened = None
        listed = [i for i in got.values() if i.path.name == f"{name}.jsonl"]
        assert (listed[0].id if listed else None) == opened, name
    assert got["late"].first_message == "first prompt"
    assert got["nan"].name is None and got["nan"].modified_ms == 1.0  # the NaN lines are skipped


def test_listing_a_big_session_reads_its_head_and_tail_only(tmp_path):
    p = tmp_path / "s" / "big.jsonl"
    p.parent.mkdir()
    filler = (_A % (0, 0, "y " * 2000, "1", "1")).replace('"id":"a0"', '"id":"f"') + "\n"
    with open(p, "w") as fh:
        fh.write(_header("big") + "\n" + _U % (0, "null", "the first prompt") + "\n")
        fh.write(filler * ((64 << 20) // len(filler)))
        fh.write(_A % (9, 0, "last", "1", "1") + "\n")
    r = _run_child(
        """
        import json, sys
        from sessiontree import list_sessions
        def rchar():
            for line in open("/proc/self/io"):
                if line.startswith("rchar:"):
                    return int(line.split()[1])
        before = rchar()
        (info,) = list_sessions(session_dir=sys.argv[1])
        print(json.dumps({"read": rchar() - before, "first": info.first_message, "id": info.id}))
    """,
        str(p.parent),
    )
    assert r["id"] == "big" and r["first"] == "the first prompt"
    assert r["read"] < 8 << 20, r  # of 64 MiB; the old listing read the whole file
    p.unlink()


def test_the_first_user_message_is_found_beyond_a_long_first_line(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    big_prompt = "log line\\n" * 40_000  # ~340 KB pasted as the first prompt
    (d / "a.jsonl").write_text(_header("a") + "\n" + _U % (0, "null", big_prompt) + "\n")
    system = (
        '{"type":"message","id":"sys","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"system","content":"%s","timestamp":1}}' % ("s" * 350_000)
    )
    (d / "b.jsonl").write_text(_header("b") + "\n" + system + "\n" + _U % (0, '"sys"', "after the system") + "\n")
    got = _listed(d)
    assert got["a"].first_message.startswith("log line\nlog line")
    assert got["b"].first_message == "after the system"


def test_branched_from_is_the_parent_and_its_id_is_read_from_its_header(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    parent = d / "parent.jsonl"
    parent.write_text(_header("the-parent") + "\n")
    (d / "new.jsonl").write_text(_header("child1", parentSession=str(parent)) + "\n")
    (d / "old.jsonl").write_text(_header("child2", branchedFrom="parent.jsonl") + "\n")
    (d / "gone.jsonl").write_text(_header("child3", branchedFrom=str(d / "missing.jsonl")) + "\n")
    got = _listed(d)
    assert got["child2"].parent_session == "parent.jsonl"
    assert got["child1"].parent_session_id() == "the-parent"
    assert got["child2"].parent_session_id() == "the-parent"  # relative: next to the child
    assert got["child3"].parent_session_id() is None  # a missing parent is tolerated
    rc, out, _ = run_cli("info", d / "old.jsonl", "--json")
    assert rc == 0 and json.loads(out)["parent_session"] == "parent.jsonl"


# ==== 25: parentSession is written absolute =====================================


def test_fork_and_clone_write_an_absolute_parent_session(tmp_path, monkeypatch):
    import os

    src = _session_file(tmp_path, _chain(1), name="src.jsonl")
    monkeypatch.chdir(tmp_path)
    fork = Session.fork_from("src.jsonl", "/elsewhere", session_dir=tmp_path / "forks")
    assert fork.header["parentSession"] == str(src) and os.path.isabs(fork.header["parentSession"])
    clone = Session.open("src.jsonl").create_branched_session(Session.open(src).leaf_id)
    assert clone.header["parentSession"] == str(src)


# ==== 24: a v3 header over entries without ids (Pi 1.6 forkFrom of a v1 source) ====


def test_a_v3_header_over_id_less_entries_is_read_as_v1(tmp_path):
    h = _header("fork1", parentSession="/x/src.jsonl")
    ents = [
        {
            "type": "message",
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": "one", "timestamp": 1},
        },
        {
            "type": "message",
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "two"}], "timestamp": 2},
        },
        {
            "type": "message",
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {"role": "user", "content": "three", "timestamp": 3},
        },
    ]
    p = tmp_path / "fork.jsonl"
    p.write_text("\n".join([h] + [json.dumps(e) for e in ents]) + "\n")
    before = p.read_bytes()
    s = Session.open(p)
    ids = [e.id for e in s.entries()]
    assert all(ids) and len(set(ids)) == 3
    assert [e.parent_id for e in s.entries()] == [None, ids[0], ids[1]]  # linked by position
    assert [m["content"] for m in s.build_context().messages][::2] == ["one", "three"]
    assert s.needs_migration and p.read_bytes() == before  # opening never writes
    s.append_message({"role": "assistant", "content": [{"type": "text", "text": "four"}], "timestamp": 4})
    s.close()
    lines = [json.loads(x) for x in p.read_text().splitlines()]
    assert lines[0]["id"] == "fork1" and [x["id"] for x in lines[1:4]] == ids  # rewritten migrated
    assert lines[4]["parentId"] == ids[2]
    again = Session.open(p)
    assert not again.needs_migration and len(again.build_context().messages) == 4
