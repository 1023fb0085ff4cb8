"""Issue 19 items 28-31: CLI and core.

28. ``info`` counts the active branch's entries (not a named tuple's fields).
29. Files that report size 0 but hold bytes (``/proc`` files) are refused as every file that is
    not a session is, by the one rule of :meth:`Session.open` (CLI, RPC, fleet alike).
30. ``validate`` on an empty file is not "ok"; "Entry not found" is worded one way; a missing
    ``openai`` package is reported before ``--model`` matters; a BOM is explained in one text,
    locally and from bytes (S3).
31. Public methods take explicit keyword parameters: a typo is a TypeError naming the method,
    and mypy catches it.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessiontree import Session
from sessiontree.cli import main
from sessiontree.errors import EntryNotFoundError, SessionFormatError
from sessiontree.rpc import RpcServer

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
GEN = CORPUS / "pi-generated"


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ==== 28 ====


@pytest.mark.parametrize("name", ["linear_short", "deep_branching", "compaction_2"])
def test_info_counts_the_active_branch(capsys, name: str) -> None:
    path = GEN / f"{name}.jsonl"
    n = len(Session.open(path).get_branch())
    assert n != 8
    rc, out, _ = run(capsys, "info", path)
    assert rc == 0 and f"active branch:   {n} entries;" in out
    rc, out, _ = run(capsys, "info", path, "--json")
    assert '"active_branch_length": ' + str(n) in out.replace("\n", " ") or f'"active_branch_length":{n}' in out


# ==== 29 ====

PSEUDO = [p for p in ("/proc/version", "/proc/self/status") if os.path.exists(p)]


@pytest.mark.skipif(not PSEUDO, reason="no /proc")
@pytest.mark.parametrize("pseudo", PSEUDO)
def test_a_file_reporting_size_0_but_holding_bytes_is_refused_everywhere(capsys, tmp_path: Path, pseudo: str) -> None:
    assert os.stat(pseudo).st_size == 0
    with pytest.raises(SessionFormatError, match="size 0"):
        Session.open(pseudo)
    rc, _, err = run(capsys, "validate", pseudo)
    assert rc == 2 and "size 0" in err
    server = RpcServer(Session.open(GEN / "linear_short.jsonl"))
    r = server.handle({"type": "switch_session", "sessionPath": pseudo})
    assert r["success"] is False and "size 0" in r["error"]
    assert server.session.path == GEN / "linear_short.jsonl"
    # the same bytes in a regular file: refused too (not a session), by the same rule
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(Path(pseudo).read_bytes())
    with pytest.raises(SessionFormatError):
        Session.open(copy)


def test_a_truly_empty_file_still_opens(tmp_path: Path) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"")
    assert len(Session.open(empty)) == 0


# ==== 30 ====


def test_validate_does_not_call_an_empty_file_ok(capsys, tmp_path: Path) -> None:
    empty = tmp_path / "e.jsonl"
    empty.write_bytes(b"")
    problems = Session.open(empty).validate()
    assert [p["kind"] for p in problems] == ["empty_file"] and problems[0]["severity"] == "error"
    rc, out, _ = run(capsys, "validate", empty)
    assert rc == 1 and "empty_file" in out and ": ok" not in out
    blank = tmp_path / "b.jsonl"
    blank.write_bytes(b"\n\n")
    assert "empty_file" in [p["kind"] for p in Session.open(blank).validate()]


def test_entry_not_found_is_worded_one_way(capsys, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes((GEN / "linear_short.jsonl").read_bytes())
    s = Session.open(path)
    texts = []
    for call in (
        lambda: s.branch("nope"),
        lambda: s.get_entries("nope"),
        lambda: s.get_branch("nope"),
        lambda: s.navigate_tree("nope"),
    ):
        with pytest.raises(EntryNotFoundError) as info:
            call()
        texts.append(str(info.value))
    assert texts == ["Entry not found: nope"] * len(texts)
    rc, _, err = run(capsys, "navigate", path, "nope", "--label", "x")
    assert rc == 2 and "Entry not found: nope" in err
    r = RpcServer(Session.open(path)).handle({"type": "get_entries", "since": "nope"})
    assert r["error"] == "Entry not found: nope"


def test_a_missing_openai_package_is_reported_before_the_model(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['openai'] = None\n"
        "from sessiontree.cli import main\n"
        "sys.exit(main(['compact', sys.argv[1], '--summarizer', 'openai']))\n"
    )
    path = tmp_path / "s.jsonl"
    path.write_bytes((GEN / "compaction_1.jsonl").read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    out = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, env=env, timeout=60)
    err = out.stderr.decode()
    assert out.returncode == 2 and "openai" in err and "not available" in err, err
    assert "--model" not in err and "OPENAI_MODEL" not in err


def test_a_bom_is_explained_the_same_locally_and_from_bytes(tmp_path: Path) -> None:
    data = (GEN / "linear_short.jsonl").read_bytes()
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + data)
    with pytest.raises(SessionFormatError) as local:
        Session.open(bom)
    with pytest.raises(SessionFormatError) as remote:
        Session.from_bytes(b"\xef\xbb\xbf" + data, name="s3://bucket/bom.jsonl")
    assert "BOM" in str(local.value)
    assert str(local.value).replace(str(bom), "<name>") == str(remote.value).replace("s3://bucket/bom.jsonl", "<name>")


# ==== 31 ====


@pytest.mark.parametrize("method", ["compact", "acompact", "navigate_tree", "anavigate_tree"])
def test_public_methods_take_explicit_keywords(method: str) -> None:
    sig = inspect.signature(getattr(Session, method))
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()), sig


def test_a_keyword_typo_is_a_type_error_naming_the_method(tmp_path: Path) -> None:
    s = Session.open(GEN / "compaction_1.jsonl")
    with pytest.raises(TypeError, match="compact.*context_windw"):
        s.compact(context_windw=1000)
    with pytest.raises(TypeError, match="navigate_tree.*sumarize"):
        s.navigate_tree("x", sumarize=True)


def test_mypy_catches_a_keyword_typo(tmp_path: Path) -> None:
    mypy = pytest.importorskip("mypy.api")
    src = tmp_path / "typo.py"
    src.write_text(
        "from sessiontree import Session\n"
        "def f(s: Session) -> None:\n"
        "    s.compact(context_windw=1000)\n"
        "    s.navigate_tree('x', sumarize=True)\n"
    )
    out, _err, rc = mypy.run([str(src), "--no-incremental", "--ignore-missing-imports"])
    assert rc == 1, out
    assert 'Unexpected keyword argument "context_windw"' in out
    assert 'Unexpected keyword argument "sumarize"' in out
