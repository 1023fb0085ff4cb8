"""``convert-all`` over objects in storage: a local S3-compatible server (moto in server mode) on
loopback holding Claude Code, Codex and Pi files. Each object converts as its local file does
(the same entries, the same sidechain sessions); outputs stay below DIR whatever the key (``..``,
absolute, empty segments, very long, ``%`` escapes), one output per object, mode 0600."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("moto.server")
pytest.importorskip("boto3")

from tests.convert._helpers import CC, CODEX, FIXTURES, cc_mains, codex_files  # noqa: E402
from tests.support.fleet_store import LoopbackS3, moto_credentials  # noqa: E402

from sessiontree import Session  # noqa: E402
from sessiontree import convert  # noqa: E402
from sessiontree.cli import main  # noqa: E402
from sessiontree.fleet._convert import SEGMENT_BYTES, object_parts  # noqa: E402

PI = FIXTURES / "pi-real" / "agentsview__pi_session.jsonl"


@pytest.fixture(scope="module")
def s3():
    # a bucket of its own: moto's state is one per process, so objects left in the shared
    # "fleet" bucket showed up in other modules' listings (CI: an extra gone/ok.jsonl)
    with moto_credentials():
        server = LoopbackS3(bucket="convert-s3")
        try:
            yield server
        finally:
            server.close()


def _put(server, key: str, body: bytes) -> None:
    import boto3

    c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{server.port}", region_name="us-east-1")
    c.put_object(Bucket=server.bucket, Key=key, Body=body)


def _inside(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_objects_convert_as_their_local_files_do(s3, tmp_path):
    srcs = {"store/cc/" + p.name: p for p in cc_mains()[:6]}
    srcs.update({"store/codex/" + p.name: p for p in codex_files()[:4]})
    srcs["store/pi/" + PI.name] = PI
    side = CC / "claude-code-log__sidechain_integrated.jsonl"  # has sidechain sessions
    srcs["store/cc/" + side.name] = side
    for key, p in srcs.items():
        _put(s3, key, p.read_bytes())
    out = tmp_path / "out"
    res = convert.convert_all(s3.uri("store"), out)
    assert res.failed == 0 and len(res.rows) == len(srcs)
    for row in res.rows:
        key = row.path.removeprefix(f"s3://{s3.bucket}/")
        src = srcs[key]
        want = "pi" if key.startswith("store/pi/") else "codex" if key.startswith("store/codex/") else "claude-code"
        assert row.source_format == want
        assert Path(row.output) == out / s3.bucket / key
        # the local file converted to a file of the same name: the same bytes, every session
        local = tmp_path / "local" / key
        local.parent.mkdir(parents=True, exist_ok=True)
        r = convert.to_pi(src, local)
        assert [Path(f).name for f in row.files] == [Path(f).name for f in r.files]
        for got, exp in zip(row.files, r.files):
            g, e = Path(got).read_bytes().split(b"\n", 1), Path(exp).read_bytes().split(b"\n", 1)
            assert g[1] == e[1], got  # the entries
            hg, he = json.loads(g[0]), json.loads(e[0])
            if "parentSession" in he:  # a sidechain: it names its main output, there and here
                assert hg.pop("parentSession") == row.output and he.pop("parentSession") == str(r.files[0])
            assert hg == he
            if want != "pi":  # (the Pi fixture has a malformed line of its own: copied as it is)
                assert Session.open(got).validate() == []
            assert stat.S_IMODE(os.stat(got).st_mode) == 0o600
    assert any(len(r.files) > 1 for r in res.rows)  # the sidechain sessions were written too


def test_hostile_keys_never_leave_dir_and_never_share_an_output(s3, tmp_path):
    body = PI.read_bytes()
    long_seg = "é" * 200 + ".jsonl"
    keys = [
        "h/../../../escape.jsonl",
        "h/..",
        "h/a/../b.jsonl",
        "h//c.jsonl",
        "h/./c.jsonl",
        "h/c.jsonl",
        "h/%2E%2E/d.jsonl",
        "h/%ff%fe.jsonl",
        "h/" + long_seg,
        "h/" + "x" * 300 + "/y.jsonl",
    ]
    for k in keys:
        _put(s3, k, body)
    out = tmp_path / "deep" / "out"
    res = convert.convert_all(s3.uri("h"), out)
    listed = [k for k in keys if k.endswith(".jsonl")]
    assert len(res.rows) == len(listed)
    assert res.failed == 0, [r.error for r in res.rows if r.error]
    outputs = [r.output for r in res.rows]
    assert len(set(outputs)) == len(outputs)  # one output per object
    real_out = os.path.realpath(out)
    for r in res.rows:
        assert os.path.realpath(r.output).startswith(real_out + os.sep)
        assert Path(r.output).read_bytes() == body
    assert sorted(map(str, _inside(tmp_path))) == sorted(outputs)  # nothing anywhere else
    for name in (p.name for p in _inside(out)):
        assert len(name.encode()) <= 255


def test_object_parts_are_plain_names_one_to_one():
    keys = ["a/../b", "a/%2E%2E/b", "a//b", "a/%/b", "/a/b", "a/./b", "a/%2E/b", "a/b", "a\0/b"]
    got = [tuple(object_parts(k)) for k in keys]
    assert len(set(got)) == len(keys)
    for parts in got:
        for p in parts:
            assert p not in ("", ".", "..") and "/" not in p and "\0" not in p
    long = "a" * 1000 + ".jsonl"
    (p,) = object_parts(long)
    assert len(p.encode()) <= SEGMENT_BYTES and p.endswith(".jsonl")
    assert object_parts(long) != object_parts("a" * 999 + "b.jsonl")


def test_a_symlink_planted_in_dir_is_not_written_through(s3, tmp_path):
    _put(s3, "sym/x/s.jsonl", PI.read_bytes())
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / s3.bucket / "sym").mkdir(parents=True)
    os.symlink(elsewhere, out / s3.bucket / "sym" / "x")
    res = convert.convert_all(s3.uri("sym"), out)
    (row,) = res.rows
    assert row.error_kind == "refused_output" and row.output is None
    assert list(elsewhere.iterdir()) == []


def test_unrecognised_and_missing_objects_are_rows(s3, tmp_path):
    _put(s3, "bad/junk.jsonl", b"not json at all\n")
    _put(s3, "bad/ok.jsonl", (CODEX / codex_files()[0].name).read_bytes())
    res = convert.convert_all(s3.uri("bad"), tmp_path / "out")
    rows = {r.path.rsplit("/", 1)[1]: r for r in res.rows}
    assert rows["junk.jsonl"].error_kind == "unrecognised" and rows["junk.jsonl"].output is None
    assert rows["ok.jsonl"].error_kind is None and rows["ok.jsonl"].source_format == "codex"
    assert not (tmp_path / "out" / s3.bucket / "bad" / "junk.jsonl").exists()


def test_the_cli_takes_an_s3_source(s3, tmp_path, capsys):
    _put(s3, "cli/" + cc_mains()[0].name, cc_mains()[0].read_bytes())
    assert main(["convert-all", s3.uri("cli"), "--out", str(tmp_path / "o"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["rows"]
    assert row["source_format"] == "claude-code" and row["error"] is None
    assert Path(row["output"]).is_file()


def test_copies_of_objects_are_0600_and_never_written_through_a_symlink(s3, tmp_path):
    """The search's checked copies go through ``writer.atomic_write`` (``mode=0o600``): private
    whatever the umask, and a symbolic link planted at a copy's name is never written through."""
    from sessiontree.fleet._copies import Remote, copies_of, store_folder
    from sessiontree.fleet._sources import SourceError, object_stats

    _put(s3, "copies/a.jsonl", PI.read_bytes())
    url = s3.uri("copies")
    remotes = [Remote(it, st, url) for it, st in object_stats(url)]
    root = tmp_path / "cache"
    old = os.umask(0)
    try:
        got = copies_of(remotes, str(root))
    finally:
        os.umask(old)
    (copy,) = got
    assert Path(copy).read_bytes() == PI.read_bytes()
    folder = Path(store_folder(str(root), url))
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o600}
    # the object changes; a link is planted where its copy goes: the outside file stays as it was
    victim = tmp_path / "victim.jsonl"
    victim.write_bytes(b"mine\n")
    os.unlink(copy)
    os.symlink(victim, copy)
    _put(s3, "copies/a.jsonl", PI.read_bytes()[:-40])  # replaced (not grown): copied whole again
    remotes = [Remote(it, st, url) for it, st in object_stats(url)]
    try:
        copies_of(remotes, str(root))
    except SourceError:
        pass  # refused: no copy this time
    assert victim.read_bytes() == b"mine\n"
    assert not Path(copy).exists() or Path(copy).is_symlink()


def test_stats_and_scrub_all_name_the_format_of_each_object(s3, tmp_path):
    """``stats`` and ``scrub-all`` read Claude Code and Codex objects directly; each row names
    the format (read from the content, never the key)."""
    from sessiontree.fleet import scrub_sessions, session_stats

    srcs = {"fmt/a.jsonl": cc_mains()[0], "fmt/b.jsonl": codex_files()[0], "fmt/c.jsonl": PI}
    for key, p in srcs.items():
        _put(s3, key, p.read_bytes())
    want = {"a.jsonl": "claude-code", "b.jsonl": "codex", "c.jsonl": "pi"}
    rows = session_stats(s3.uri("fmt"), workers=1).to_pylist()
    assert {r["path"].rsplit("/", 1)[1]: r["source_format"] for r in rows} == want
    assert all(r["error_kind"] is None for r in rows)
    rows = scrub_sessions(s3.uri("fmt"), tmp_path / "scrubbed")
    assert {r["path"].rsplit("/", 1)[1]: r["source_format"] for r in rows} == want
    assert all(r["error_kind"] is None for r in rows)


def test_an_object_that_is_not_there_is_a_row(s3, tmp_path):
    """An object named by its key that the store does not hand over (gone since the listing,
    never there): a ``not_found`` row, the job goes on."""
    _put(s3, "gone/ok.jsonl", PI.read_bytes())
    res = convert.convert_all([s3.uri("gone/nope.jsonl"), s3.uri("gone/ok.jsonl")], tmp_path / "out")
    rows = {r.path.rsplit("/", 1)[1]: r for r in res.rows}
    assert rows["nope.jsonl"].error_kind == "not_found" and rows["nope.jsonl"].output is None
    assert rows["ok.jsonl"].error_kind is None and Path(rows["ok.jsonl"].output).is_file()


def test_a_cut_name_or_a_sidechain_name_is_never_another_keys_output():
    """Hostile review: a key spelled as another key's shortened name (``<cut>~<hash>.jsonl``),
    or as the name of another object's sidechain session, once mapped to that same file."""
    long = "h/" + "a" * 300 + ".jsonl"
    cut = object_parts(long)[-1]
    assert object_parts("h/" + cut) != object_parts(long)
    for name in ("s.sidechain-root-1.jsonl", "s.subagent-agent-1.jsonl"):
        got = object_parts("h/" + name)[-1]
        assert ".sidechain-" not in got and ".subagent-" not in got, got
    assert object_parts("h/a~b.jsonl") != object_parts("h/a%7Eb.jsonl")


def test_an_object_named_as_another_objects_sidechain_keeps_its_own_output(s3, tmp_path):
    side = CC / "claude-code-log__sidechain_integrated.jsonl"
    local = convert.to_pi(side, tmp_path / "local" / "s.jsonl")
    assert len(local.files) > 1
    _put(s3, "clash/s.jsonl", side.read_bytes())
    body = PI.read_bytes()
    for f in local.files[1:]:
        _put(s3, "clash/" + Path(f).name, body)  # spelled as the session's sidechain output
    res = convert.convert_all(s3.uri("clash"), tmp_path / "out")
    assert res.failed == 0, [r.error for r in res.rows if r.error]
    files = [f for r in res.rows for f in r.files]
    assert len(set(files)) == len(files)  # no two objects share a file
    for r in res.rows:
        if not r.path.endswith("/s.jsonl"):
            assert Path(r.output).read_bytes() == body
        else:
            for f in r.files:
                assert Path(f).read_bytes() != body
