"""Hostile session files: each has a clear outcome (an entry, a recorded problem, or a
SessionError), bounded memory and time, and never a crash, hang or recursion overflow.

Default sizes keep this file well under a minute. ``SESSIONTREE_HUGE=1`` runs the big
variants documented in docs/reliability.md: a 1 GiB line, a line over 4 GiB, one node with
1,000,000 children and a 1,000,000-deep chain (a few minutes, ~10 GB of disk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from sessiontree import Session, SessionCycleError, SessionError, SessionFormatError
from tests.support.cli_run import run_cli
from tests.support.lines import HEADER, message_line as _msg

ROOT = Path(__file__).resolve().parent.parent.parent
HUGE = os.environ.get("SESSIONTREE_HUGE") == "1"
MiB = 1 << 20


def _file(tmp_path: Path, *parts: bytes, name: str = "s.jsonl") -> Path:
    p = tmp_path / name
    p.write_bytes(b"".join(parts))
    return p


def _kinds(s: Session) -> list[tuple[int, str]]:
    return [(p.line, p.kind) for p in s.problems]


# ==== memory: measured in a child process ======================================

_MEASURE = textwrap.dedent("""
    import json, sys, threading, time
    def status():
        out = {}
        for line in open("/proc/self/status"):
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) * 1024
        return out
    from sessiontree import Session
    base = status()
    peak = [0]
    done = threading.Event()
    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], status()["RssAnon"])
            time.sleep(0.002)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.monotonic()
    s = Session.open(sys.argv[1])
    all_problems = s.problems
    problems = [(p.line, p.kind) for p in all_problems[:10]]
    n_problems = len(all_problems)
    ids = [e.id[:16] if e.id else e.id for e in s.entries()[:10]]
    secs = time.monotonic() - t0
    done.set(); t.join()
    end = status()
    print(json.dumps({"base": base, "end": end, "peak_anon": peak[0], "secs": secs, "len": len(s),
                      "problems": problems, "n_problems": n_problems, "ids": ids}))
""")


def _measure(path: Path, timeout: float = 600) -> dict:
    """Open ``path`` in a fresh interpreter; report RSS (VmHWM, sampled RssAnon peak), time,
    entry count and the first problems."""
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout)
    r["hwm_growth"] = r["end"]["VmHWM"] - r["base"]["VmRSS"]
    r["anon_growth"] = r["peak_anon"] - r["base"]["RssAnon"]
    return r


@pytest.fixture
def big_files(tmp_path):
    """A folder whose files are deleted after the test (pytest keeps old tmp folders)."""
    d = tmp_path / "big"
    d.mkdir()
    yield d
    for p in d.iterdir():
        p.unlink()


def _write_big_line(path: Path, head: bytes, fill: bytes, size: int, tail: bytes) -> None:
    chunk = fill * (4 * MiB // len(fill))
    with open(path, "wb") as fh:
        fh.write(head)
        left = size
        while left > 0:
            fh.write(chunk[:left])
            left -= len(chunk)
        fh.write(tail)


HUGE_LINE = (1 << 30) if HUGE else 64 * MiB
SLACK = 64 * MiB  # interpreter, extension and allocator noise


@pytest.mark.parametrize("shape", ["message", "garbage", "unterminated"])
def test_a_single_huge_line_has_a_clear_outcome_and_bounded_memory(big_files, shape):
    p = big_files / f"{shape}.jsonl"
    start = b'{"type":"message","id":"big","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"'
    if shape == "message":
        _write_big_line(p, HEADER + start, b"x", HUGE_LINE, b'","timestamp":1}}\n' + _msg("after", "big"))
    elif shape == "garbage":  # never closes its string: not JSON
        _write_big_line(p, HEADER + start, b"x", HUGE_LINE, b"\n" + _msg("after", None))
    else:  # torn at the end of the file
        _write_big_line(p, HEADER + start, b"x", HUGE_LINE, b"")
    r = _measure(p)
    size = p.stat().st_size
    # the file is read through a bounded buffer (never mapped: no SIGBUS), except that one line
    # longer than the buffer is read whole while it is parsed: at most its size, once
    assert r["hwm_growth"] <= size + SLACK, r
    assert r["anon_growth"] <= size + SLACK, r
    if shape == "message":
        assert r["len"] == 2 and r["ids"] == ["big", "after"] and r["n_problems"] == 0
    elif shape == "garbage":
        assert r["len"] == 1 and r["problems"] == [[2, "malformed_json"]]
    else:
        assert r["len"] == 0 and r["problems"] == [[2, "torn_last_line"]]


def test_a_huge_id_costs_a_bounded_multiple_of_its_size(big_files):
    size = (256 * MiB) if HUGE else 32 * MiB
    p = big_files / "id.jsonl"
    _write_big_line(p, HEADER + b'{"type":"message","id":"', b"i", size, b'","parentId":null}\n')
    r = _measure(p)
    assert r["len"] == 1 and r["ids"] == ["i" * 16]
    # an id is decoded and interned (a few copies); documented as ~6x its size at worst
    assert r["hwm_growth"] <= 7 * size + SLACK, r


@pytest.mark.skipif(not HUGE, reason="writes a 4.3 GB file: SESSIONTREE_HUGE=1")
def test_a_line_over_4_gib_is_reported_not_truncated(big_files):
    """Lines longer than MAX_LINE (u32::MAX bytes) become a ``line_too_long`` problem.

    Regression: a line that was a valid JSON object took the scanner's fast path, which
    skipped the MAX_LINE check; its length was stored truncated to 32 bits, so the entry's
    text was cut short and ``entry.raw`` raised ``json.JSONDecodeError``.
    """
    p = big_files / "over4g.jsonl"
    start = b'{"type":"message","id":"big","parentId":null,"message":{"role":"user","content":"'
    _write_big_line(p, HEADER + start, b"x", (4 << 30) + MiB, b'"}}\n' + _msg("after", None))
    s = Session.open(p)
    assert "line_too_long" in [k for _, k in _kinds(s)], _kinds(s)
    for e in s.entries():
        e.raw  # never a truncated line


@pytest.mark.parametrize("line", [b"\n", b"x\n", b"\x00\n"], ids=["blank", "garbage", "nul"])
def test_millions_of_problem_lines_stay_bounded(tmp_path, line):
    """One recorded problem per bad line must not cost hundreds of bytes each: Rust keeps a
    24-byte record per problem and ``Session.problems`` builds Python objects only on access."""
    n = 2_000_000
    p = _file(tmp_path, HEADER, line * n, _msg("a", None))
    r = _measure(p)
    assert r["len"] == 1 and r["ids"] == ["a"]
    assert r["n_problems"] >= 1 and r["problems"][0][0] == 2
    assert r["hwm_growth"] <= 48 * n + SLACK, r  # a compact record per line at most
    assert r["secs"] < 20, r


# ==== deep nesting ============================================================

DEPTH = 100_000


def test_json_nested_100k_deep_is_an_entry_and_loading_it_is_a_session_error(tmp_path):
    deep = b"[" * DEPTH + b"]" * DEPTH
    p = _file(
        tmp_path,
        HEADER,
        b'{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":' + deep + b',"timestamp":1}}\n',
        _msg("b", "a"),
    )
    s = Session.open(p)
    assert [e.id for e in s.entries()] == ["a", "b"] and not s.problems  # Pi accepts it too
    assert [e.id for e in s.get_branch()] == ["a", "b"]
    assert len(s.get_tree()) == 1
    with pytest.raises(SessionError, match="nested too deeply"):
        s.get_entry("a").raw
    with pytest.raises(SessionError, match="nested too deeply"):
        s.build_context()
    assert s.get_entry("b")["message"]["content"] == "t"
    assert run_cli("validate", p)[0] == 0
    assert run_cli("entries", p)[0] == 0
    for cmd in ("info", "tree", "branch", "context"):
        rc, _, err = run_cli(cmd, p)
        assert rc == 0 or (rc == 2 and "nested too deeply" in err), (cmd, rc, err)


def test_a_header_nested_100k_deep_cannot_be_opened_cleanly(tmp_path):
    p = _file(
        tmp_path, b'{"type":"session","version":3,"id":"s","x":' + b"[" * DEPTH + b"]" * DEPTH + b"}\n", _msg("a", None)
    )
    with pytest.raises(SessionError, match="nested too deeply"):
        Session.open(p)
    rc, _, err = run_cli("validate", p)
    assert rc == 2 and "nested too deeply" in err


# ==== bytes that are not text ==================================================


def test_invalid_utf8_inside_strings_is_read_as_replacement_and_reported(tmp_path):
    p = _file(
        tmp_path,
        HEADER,
        b'{"type":"message","id":"a\xff","parentId":null,"message":{"role":"user","content":"x\xc3","timestamp":1}}\n',
        b"\xff\xfe not json\n",
        _msg("b", "a\ufffd"),
    )
    s = Session.open(p)
    assert [e.id for e in s.entries()] == ["a\ufffd", "b"]
    assert _kinds(s) == [(2, "invalid_utf8"), (3, "malformed_json")]
    assert s.get_entry("a\ufffd")["message"]["content"] == "x\ufffd"
    assert [e.id for e in s.get_branch()] == ["a\ufffd", "b"]
    assert run_cli("validate", p)[0] == 1


def test_a_run_of_nul_bytes_mid_file_is_one_skipped_line(tmp_path):
    p = _file(
        tmp_path,
        HEADER,
        _msg("a", None),
        b"\x00" * 100_000 + b"\n",
        _msg("b", "a"),
        b'{"type":"message","id":"c\x00","parentId":"b"}\n',  # raw NUL inside a string: not JSON
        b"\x00" * 1000 + _msg("d", "b"),
    )  # NULs glued to a line: that line is lost
    s = Session.open(p)
    assert [e.id for e in s.entries()] == ["a", "b"]
    assert _kinds(s) == [(3, "malformed_json"), (5, "malformed_json"), (6, "malformed_json")]
    assert [e.id for e in s.get_branch()] == ["a", "b"]
    # the next append starts on a fresh line and is read back
    s.append_message({"role": "user", "content": "after", "timestamp": 2})
    assert [e.id for e in Session.open(p).get_branch()][-2:] == ["b", s.leaf_id]


def test_a_bom_before_the_header_is_not_a_session_like_in_pi(tmp_path):
    p = _file(tmp_path, b"\xef\xbb\xbf", HEADER, _msg("a", None))
    with pytest.raises(SessionFormatError):
        Session.open(p)
    assert p.read_bytes().startswith(b"\xef\xbb\xbf")  # untouched


def test_a_bom_inside_the_file(tmp_path):
    p = _file(tmp_path, HEADER, b"\xef\xbb\xbf" + _msg("a", None), b"\xef\xbb\xbf\n", _msg("b", None))
    s = Session.open(p)
    assert [e.id for e in s.entries()] == ["b"]  # JSON.parse refuses a BOM; a BOM-only line is blank
    assert _kinds(s) == [(2, "malformed_json"), (3, "blank_line")]


def test_crlf_line_ends(tmp_path):
    p = _file(
        tmp_path,
        HEADER.replace(b"\n", b"\r\n"),
        _msg("a", None).replace(b"\n", b"\r\n"),
        _msg("b", "a").replace(b"\n", b"\r\n"),
    )
    s = Session.open(p)
    assert [e.id for e in s.get_branch()] == ["a", "b"] and not s.problems
    assert not s._core.line(0).endswith(b"\r")
    s.append_message({"role": "user", "content": "c", "timestamp": 3})
    assert [e.id for e in Session.open(p).get_branch()] == ["a", "b", s.leaf_id]


# ==== wide and deep trees ======================================================

TREE_N = 1_000_000 if HUGE else 100_000


def _generated(tmp_path: Path, shape: str, n: int) -> Path:
    p = tmp_path / f"{shape}.jsonl"
    with open(p, "wb") as fh:
        fh.write(HEADER)
        fh.write(_msg("r", None))
        rows = []
        for i in range(n):
            parent = b"r" if shape == "wide" or i == 0 else b"e%d" % (i - 1)
            rows.append(
                b'{"type":"message","id":"e%d","parentId":"%s","timestamp":"2026-01-01T00:00:02.000Z",'
                b'"message":{"role":"user","content":"m","timestamp":1}}\n' % (i, parent)
            )
            if len(rows) == 10_000:
                fh.writelines(rows)
                rows = []
        fh.writelines(rows)
    return p


def test_one_node_with_many_children(big_files):
    p = _generated(big_files, "wide", TREE_N)
    s = Session.open(p)
    assert len(s.get_children("r")) == TREE_N
    roots = s.get_tree()
    assert len(roots) == 1 and len(roots[0].children) == TREE_N
    del roots
    assert [e.id for e in s.get_branch()] == ["r", f"e{TREE_N - 1}"]
    rc, out, _ = run_cli("tree", p, "--no-preview")
    assert rc == 0 and out.count("\n") == TREE_N + 1
    assert run_cli("validate", p)[0] == 0


def test_a_very_deep_chain_never_recurses(big_files):
    p = _generated(big_files, "deep", TREE_N)
    s = Session.open(p)
    branch = s.get_branch()
    assert len(branch) == TREE_N + 1 and branch[0].id == "r"
    del branch
    roots = s.get_tree()
    depth, node = 0, roots[0]
    while node.children:
        node, depth = node.children[0], depth + 1
    assert depth == TREE_N
    del roots, node  # freeing a deeply nested TreeNode chain must not overflow the C stack
    assert len(s.build_context().messages) == TREE_N + 1
    for cmd in ("tree", "branch", "validate"):
        rc, out, _ = run_cli(cmd, p, *(["--no-preview"] if cmd != "validate" else []))
        assert rc == 0, cmd
        if cmd != "validate":
            assert out.count("\n") == TREE_N + 1
    c = s.create_branched_session(f"e{TREE_N - 1}")
    assert len(c) == TREE_N + 1


# ==== cycles and duplicate ids =================================================


def test_a_cycle_on_the_active_path_raises_and_the_cli_says_so(tmp_path):
    p = _file(tmp_path, HEADER, _msg("a", "b"), _msg("b", "a"))
    s = Session.open(p)
    with pytest.raises(SessionCycleError) as exc:
        s.get_branch()
    assert sorted(exc.value.ids) == ["a", "b"]
    with pytest.raises(SessionCycleError):
        s.build_context()
    assert s.get_tree() == []  # nothing reaches a root
    assert run_cli("branch", p)[0] == 2 and run_cli("context", p)[0] == 2
    rc, out, err = run_cli("tree", p)
    assert rc == 0 and "loops" in err and "not reachable" in out
    rc, out, _ = run_cli("validate", p)
    assert rc == 1 and "parent_cycle" in out and "leaf_cycle" in out


def test_a_cycle_off_the_active_path_does_not_stop_reading(tmp_path):
    p = _file(tmp_path, HEADER, _msg("x", "y"), _msg("y", "x"), _msg("a", None), _msg("b", "a"))
    s = Session.open(p)
    assert [e.id for e in s.get_branch()] == ["a", "b"]
    assert len(s.build_context().messages) == 2
    with pytest.raises(SessionCycleError):
        s.get_branch("x")
    rc, out, _ = run_cli("validate", p)
    assert rc == 1 and "parent_cycle" in out


def test_a_self_parent_is_a_cycle(tmp_path):
    p = _file(tmp_path, HEADER, _msg("a", "a"))
    s = Session.open(p)
    with pytest.raises(SessionCycleError):
        s.get_branch()
    assert [n.entry.id for n in s.get_tree()] == ["a"]  # Pi's getTree makes it a root
    rc, out, _ = run_cli("validate", p)
    assert rc == 1 and "self_parent" in out


def test_duplicate_ids_later_wins_and_a_loop_through_them_is_reported(tmp_path):
    p = _file(tmp_path, HEADER, _msg("a", None, "first"), _msg("b", "a"), _msg("a", "b", "second"))
    s = Session.open(p)
    assert len(s) == 3 and s.entry_count() == 2
    assert s.get_entry("a")["message"]["content"] == "second"
    with pytest.raises(SessionCycleError):
        s.get_branch()
    with pytest.raises(SessionCycleError):  # the tree would hold "a" below itself (divergence 7)
        s.get_tree()
    # validate must list the loop (exit 1), not fail on it (exit 2)
    rc, out, err = run_cli("validate", p)
    assert rc == 1 and "duplicate_id" in out and "cycle" in out, (rc, out, err)


# ==== control characters and numbers ==========================================

CONTROL = "\x00\x01\x07\x08\x1b[31m\x1b]8;;http://e\x07\x7f\x85\x9b\u202e\u2028"


def test_ids_and_labels_with_control_characters_round_trip(tmp_path):
    p = _file(
        tmp_path,
        HEADER,
        _msg("a" + CONTROL, None),
        json.dumps(
            {
                "type": "label",
                "id": "l",
                "parentId": "a" + CONTROL,
                "timestamp": "2026-01-01T00:00:02.000Z",
                "targetId": "a" + CONTROL,
                "label": CONTROL,
            }
        ).encode()
        + b"\n",
    )
    s = Session.open(p)
    assert [e.id for e in s.get_branch()] == ["a" + CONTROL, "l"]
    assert s.get_label("a" + CONTROL) == CONTROL and s.labels == {"a" + CONTROL: CONTROL}
    s.append_label_change("a" + CONTROL, CONTROL + "2")
    s.append_session_info(CONTROL)
    s2 = Session.open(p)
    assert s2.get_label("a" + CONTROL) == CONTROL + "2" and not s2.problems
    assert s2.session_name == CONTROL.strip()


BIG = "123456789012345678901234567890"


def test_numbers_beyond_json_safe_range_do_not_crash(tmp_path):
    lines = [
        '{"type":"message","id":1e400,"parentId":null,"timestamp":1e400,"message":{"role":"assistant",'
        '"content":[{"type":"text","text":"x"}],"usage":{"input":1e400,"output":%s,"cacheRead":0,'
        '"cacheWrite":0,"totalTokens":%s},"stopReason":"stop","timestamp":1e400}}' % (BIG, BIG),
        '{"type":"message","id":%s,"parentId":1e400,"timestamp":%s,"message":{"role":"user","content":"x",'
        '"timestamp":-1e400}}' % (BIG, BIG),
        '{"type":"compaction","id":"c","parentId":%s,"timestamp":"2026-01-01T00:00:01.000Z","summary":"s",'
        '"firstKeptEntryId":%s,"tokensBefore":1e400}' % (BIG, BIG),
        '{"type":"message","id":"d","parentId":"c","timestamp":-%s,"message":{"role":"assistant","content":'
        '[{"type":"toolCall","id":"t","name":"x","arguments":{"n":1e400,"m":%s}}],"usage":{"input":'
        '9007199254740993,"output":1e308,"cacheRead":1e308,"cacheWrite":1e308,"totalTokens":1e309},'
        '"stopReason":"toolUse","timestamp":1}}' % (BIG, BIG),
        '{"type":"label","id":"l","parentId":"d","timestamp":1e-400,"targetId":%s,"label":1e400}' % BIG,
    ]
    p = _file(tmp_path, HEADER, "\n".join(lines).encode() + b"\n")
    s = Session.open(p)
    assert len(s) == 5 and not s.problems
    assert [e.id for e in s.entries()] == [None, None, "c", "d", "l"]  # ids that are not strings
    assert s.get_entry("c")["tokensBefore"] == float("inf")  # JavaScript reads Infinity too
    assert s.get_entry("c")["parentId"] == int(BIG)  # JavaScript would round it to a double
    # numeric ids link by value as in a JavaScript Map: c -> 1.2345678901234568e29 -> Infinity -> root
    assert [e.index for e in s.get_branch()] == [0, 1, 2, 3, 4]
    s.get_tree()
    s.build_context()
    for cmd in ("info", "tree", "branch", "context", "entries", "validate"):
        for extra in ([], ["--json"]):
            rc, out, _ = run_cli(cmd, p, *extra)
            assert rc in (0, 1), (cmd, extra, rc)
    s.append_message({"role": "user", "content": "n", "timestamp": int(BIG)})
    s.append_custom_entry("big", {"inf": float("inf"), "big": int(BIG)})
    assert not Session.open(p).problems


# ==== a torn line during refresh ===============================================


def test_a_torn_first_line_that_grows_into_garbage_leaves_no_trace(tmp_path):
    """A reader that saw an unterminated first line which parsed as a v1 header must forget
    it when the line turns out to be garbage.

    Regression (found by the ``scan`` fuzz target): ``Index::rollback_provisional`` did not
    restore the legacy v1/v2 flags, so after ``refresh()`` later entries got synthetic v1 ids
    and the session still ``needs_migration`` (a write would have rewritten the file).
    """
    p = _file(tmp_path, b'{"type":"session","id":"old"}')
    s = Session.open(p)
    with open(p, "ab") as fh:
        fh.write(b'garbage\n{"type":"session","version":3,"id":"new"}\n' + _msg("a", None))
    s.refresh()
    fresh = Session.open(p)
    assert [e.id for e in fresh.entries()] == ["a"] and not fresh.needs_migration
    assert [e.id for e in s.entries()] == ["a"]
    assert not s.needs_migration


def test_a_file_truncated_under_a_reader_is_an_error_not_a_crash(tmp_path):
    """Once ``refresh()`` has seen the file shrink (``SessionFileChangedError``), reading an
    entry must raise: the store refuses reads. (Truncation that nothing has noticed yet is
    caught by the reads themselves: tests/session/test_hardening.py.)
    """
    p = _file(tmp_path, HEADER, *[_msg(f"e{i}", f"e{i - 1}" if i else None, "x" * 100) for i in range(2000)])
    code = textwrap.dedent(f"""
        import os
        from sessiontree import Session, SessionError
        s = Session.open({str(p)!r})
        os.truncate({str(p)!r}, 100)
        try:
            s.refresh()
        except SessionError:
            pass
        try:
            s.get_entry("e1999").raw
        except SessionError:
            print("error")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "error", (proc.returncode, proc.stderr[-500:])


# ==== panics =================================================================


def test_rust_panics_unwind_into_python_exceptions():
    """A Rust panic must reach Python as ``pyo3_runtime.PanicException`` (PyO3 catches it at
    the boundary), never abort the interpreter: no profile may set ``panic = "abort"``."""
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    for name, profile in manifest.get("profile", {}).items():
        assert profile.get("panic", "unwind") == "unwind", name
    for cfg in (ROOT / ".cargo" / "config.toml", ROOT / ".cargo" / "config"):
        if cfg.exists():
            assert "panic=abort" not in cfg.read_text().replace(" ", "")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "panic=abort" not in json.dumps(pyproject.get("tool", {}).get("maturin", {})).replace(" ", "")


# ==== the terminal =============================================================

HOSTILE = (
    "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\ \x07bell \x9b2J csi "
    "\x85\x90\x9d c1 \u202eevil\u202c \u2066iso\u2069 \u200e\u200f\u061c \u2028\u2029 \x7f del \x08\r\x0b\x0c"
)
# What must never reach the terminal raw: C0 except newline, DEL, C1, bidi controls, LS/PS.
FORBIDDEN = (
    [bytes([c]) for c in range(0x20) if c != 0x0A]
    + [b"\x7f"]
    + [chr(c).encode() for c in range(0x80, 0xA0)]
    + [c.encode() for c in "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"]
)


def _hostile_session(tmp_path: Path) -> Path:
    h = HOSTILE
    header = {
        "type": "session",
        "version": 3,
        "id": "s" + h,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/p" + h,
        "parentSession": "/x" + h,
    }
    rows = [
        header,
        {
            "type": "message",
            "id": "a" + h,
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": h, "timestamp": 1},
        },
        {
            "type": "message",
            "id": "b" + h,
            "parentId": "a" + h,
            "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": h},
                    {"type": "thinking", "thinking": h},
                    {"type": "toolCall", "id": "t", "name": "x" + h, "arguments": {h: h}},
                ],
                "api": "x",
                "provider": "p" + h,
                "model": "m" + h,
                "errorMessage": h,
                "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
                "stopReason": "toolUse",
                "timestamp": 2,
            },
        },
        {
            "type": "message",
            "id": "c" + h,
            "parentId": "b" + h,
            "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {
                "role": "toolResult",
                "toolCallId": "t",
                "toolName": "x" + h,
                "content": [{"type": "text", "text": h}],
                "isError": False,
                "timestamp": 3,
            },
        },
        {
            "type": "message",
            "id": "d" + h,
            "parentId": "c" + h,
            "timestamp": "2026-01-01T00:00:04.000Z",
            "message": {
                "role": "bashExecution",
                "command": h,
                "output": h,
                "exitCode": 0,
                "cancelled": False,
                "truncated": False,
                "timestamp": 4,
            },
        },
        {
            "type": "model_change",
            "id": "e" + h,
            "parentId": "d" + h,
            "timestamp": "2026-01-01T00:00:05.000Z",
            "provider": "p" + h,
            "modelId": "m" + h,
        },
        {
            "type": "thinking_level_change",
            "id": "f" + h,
            "parentId": "e" + h,
            "timestamp": "2026-01-01T00:00:06.000Z",
            "thinkingLevel": h,
        },
        {
            "type": "custom_message",
            "id": "g" + h,
            "parentId": "f" + h,
            "timestamp": "2026-01-01T00:00:07.000Z",
            "customType": h,
            "content": h,
            "display": True,
        },
        {
            "type": "compaction",
            "id": "i" + h,
            "parentId": "g" + h,
            "timestamp": "2026-01-01T00:00:08.000Z",
            "summary": h,
            "firstKeptEntryId": "f" + h,
            "tokensBefore": 1,
        },
        {
            "type": "branch_summary",
            "id": "j" + h,
            "parentId": "a" + h,
            "timestamp": "2026-01-01T00:00:09.000Z",
            "fromId": "b" + h,
            "summary": h,
        },
        {
            "type": "label",
            "id": "k" + h,
            "parentId": "i" + h,
            "timestamp": "2026-01-01T00:00:10.000Z",
            "targetId": "a" + h,
            "label": h,
        },
        {
            "type": "label",
            "id": "l" + h,
            "parentId": "k" + h,
            "timestamp": "2026-01-01T00:00:11.000Z",
            "targetId": "missing" + h,
            "label": h,
        },
        {
            "type": "session_info",
            "id": "m" + h,
            "parentId": "l" + h,
            "timestamp": "2026-01-01T00:00:12.000Z",
            "name": h,
        },
        {
            "type": "custom",
            "id": "n" + h,
            "parentId": "orphan" + h,
            "timestamp": "2026-01-01T00:00:13.000Z",
            "customType": h,
        },
        {"type": h, "id": "o" + h, "parentId": "m" + h, "timestamp": h},
    ]
    name = "evil\x1b[2J\x07\u202e.jsonl"
    lines = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows)
    return _file(
        tmp_path,
        lines,
        b'{"type":"message","id":"raw\x1b[31m\xff","parentId":"o' + h.encode() + b'"}\n',
        b"\x1b[31mnot json\x07\n",
        name=name,
    )


def test_the_cli_never_passes_terminal_controls_from_the_file(tmp_path):
    p = _hostile_session(tmp_path)
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    for cmd in ("info", "tree", "branch", "context", "entries", "validate"):
        for extra in ([], ["--json"], ["--max-preview", "1000"] if cmd in ("tree", "branch", "context") else []):
            proc = subprocess.run(
                [sys.executable, "-m", "sessiontree", cmd, str(p), *extra], capture_output=True, timeout=120, env=env
            )
            assert proc.returncode in (0, 1), (cmd, extra, proc.stderr[-500:])
            for stream, data in (("stdout", proc.stdout), ("stderr", proc.stderr)):
                bad = [b for b in FORBIDDEN if b in data]
                assert not bad, f"{cmd} {extra}: raw {bad[:5]} on {stream}"
            assert proc.stdout, (cmd, extra)
    # the errors path too: a hostile file name that is not a session
    q = _file(tmp_path, b"\x1b[31m\n", name="bad\x1b]8;;x\x07.jsonl")
    proc = subprocess.run(
        [sys.executable, "-m", "sessiontree", "info", str(q)], capture_output=True, timeout=60, env=env
    )
    assert proc.returncode == 2 and not [b for b in FORBIDDEN if b in proc.stdout + proc.stderr]
