"""Scrubbing hostile input (issue 20): a 100 MB string, a million tiny secrets, deep nesting,
invalid UTF-8 in a torn line, outputs that are the input, a symlink or a FIFO, a failure part
way: a correct result or a clear error, never a partial file, never a secret in an error."""

from __future__ import annotations

import os
import random
import time

import orjson
import pytest

from sessiontree.cli import main
from sessiontree.errors import SessionArgumentError, SessionTreeError
from sessiontree.scrub import scrub_bytes, scrub_file
from tests.support.secrets import GITHUB_TOKEN as TOK, SESSION_HEAD as HEAD, user_entry

AWS = "AKIA" + "QWERTYUIOPASDFGH"


def _entry(text: str, eid: str = "e1") -> bytes:
    return user_entry(eid, None, text)


def test_a_100_mb_string():
    filler = "lorem ipsum token: dolor \\n sit " * (100_000_000 // 32)
    data = HEAD + _entry(f"{filler} {TOK} {filler[:1000]} {AWS}") + b"\n"
    t = time.perf_counter()
    out, rep = scrub_bytes(data)
    took = time.perf_counter() - t
    assert TOK.encode() not in out and AWS.encode() not in out
    assert sorted(f.kind for f in rep.findings) == ["aws_access_key_id", "github_token"]
    assert len(out) == len(data) - len(TOK) - len(AWS) + sum(len(f"[REDACTED:{f.kind}:{f.hash}]") for f in rep.findings)
    assert took < 60, took


def test_a_million_tiny_secrets():
    # ten drawn key ids (`AKIA` + 16 of [A-Z2-7]); `AKIAAAAAAAAAAAAAAAAB` would be filler, kept
    rng = random.Random(46)
    keys = ["AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16)) for _ in range(10)]
    text = " ".join(keys[n % 10] for n in range(1_000_000))
    out, rep = scrub_bytes(HEAD + _entry(text) + b"\n")
    assert rep.found == 1_000_000 and len(rep.findings) == 1_000_000
    assert b"AKIA" not in out.split(b"\n", 1)[1].replace(b"[REDACTED:aws_access_key_id:", b"")
    # equal secrets, equal placeholders: ten distinct ones
    assert len({f.hash for f in rep.findings}) == 10
    # and a million lines with one each
    lines = HEAD + b"".join(_entry(f"k {keys[n % 10]}", f"e{n}") + b"\n" for n in range(200_000))
    out, rep = scrub_bytes(lines)
    assert rep.found == 200_000 and rep.lines_changed == 200_000


def test_deeply_nested_json_is_walked_without_recursion_in_linear_time():
    depth = 200_000
    inner = b'{"a":' * depth + orjson.dumps(TOK) + b"}" * depth
    line = b'{"type":"custom","customType":"x","id":"c","parentId":null,"timestamp":"t","data":' + inner + b"}"
    t = time.perf_counter()
    out, rep = scrub_bytes(HEAD + line + b"\n")
    assert time.perf_counter() - t < 20
    assert TOK.encode() not in out and rep.found == 1
    assert rep.findings[0].pointer == "/data" + "/a" * depth
    arr = b"[" * depth + orjson.dumps(TOK) + b"]" * depth
    out, rep = scrub_bytes(HEAD + arr + b"\n")
    assert TOK.encode() not in out and rep.found == 1


def test_invalid_utf8_in_a_torn_line_and_in_a_string():
    torn = b'{"type":"message","id":"t","message":{"content":"\xff\xfe ' + TOK.encode() + b" \xc3"
    data = HEAD + _entry("ok") + b"\n" + torn
    out, rep = scrub_bytes(data)
    assert TOK.encode() not in out
    assert out.startswith(HEAD + _entry("ok") + b"\n")
    assert out.endswith(b" \xc3") and b"\xff\xfe " in out  # the other bytes are kept
    assert [(f.line, f.pointer, f.kind) for f in rep.findings] == [(3, None, "github_token")]
    # inside a valid line, bytes that are not UTF-8 are kept as they are
    line = b'{"type":"message","id":"u","message":{"content":"\xff ' + TOK.encode() + b' \xfe"}}\n'
    out, rep = scrub_bytes(HEAD + line)
    assert TOK.encode() not in out and b"\xff [REDACTED:github_token:" in out and b" \xfe" in out


def _src(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(HEAD + _entry(f"key {TOK}") + b"\n")
    return p


def test_output_is_the_input(tmp_path):
    src = _src(tmp_path)
    before = src.read_bytes()
    with pytest.raises(SessionArgumentError, match="the output is the input") as exc:
        scrub_file(src, src)
    assert TOK not in str(exc.value)
    link = tmp_path / "hard.jsonl"
    os.link(src, link)
    with pytest.raises(SessionArgumentError):
        scrub_file(src, link)
    assert src.read_bytes() == before


def test_symlink_and_fifo_outputs_are_refused(tmp_path):
    src = _src(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    with pytest.raises(SessionArgumentError, match="symbolic link"):
        scrub_file(src, link)
    assert victim.read_bytes() == b"keep me" and link.is_symlink()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(SessionArgumentError, match="not a regular file"):
        scrub_file(src, fifo)  # refused without opening it (no hang)
    with pytest.raises(SessionArgumentError, match="not a regular file"):
        scrub_file(fifo, tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()


def test_a_failure_part_way_leaves_no_file(tmp_path, monkeypatch):
    from sessiontree import scrub as mod

    src = _src(tmp_path)
    out = tmp_path / "out.jsonl"

    def failing(fh):
        yield fh.read(10)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(mod, "_blocks", failing)
    with pytest.raises(OSError):
        scrub_file(src, out)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]  # no temp file left
    # in place: the file is left as it was
    before = src.read_bytes()
    with pytest.raises(OSError):
        scrub_file(src, in_place=True)
    assert src.read_bytes() == before


def test_cli_errors_never_print_the_secret(tmp_path, capsys):
    src = _src(tmp_path)
    assert main(["scrub", str(src), "-o", str(src)]) == 2
    assert main(["scrub", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o.jsonl")]) == 2
    cap = capsys.readouterr()
    assert TOK not in cap.out + cap.err
    assert "the output is the input" in cap.err and "missing.jsonl" in cap.err


def test_errors_are_the_package_errors():
    assert issubclass(SessionArgumentError, SessionTreeError)
