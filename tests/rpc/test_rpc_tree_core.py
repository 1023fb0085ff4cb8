"""RPC ``get_tree`` (nested) written by the core (``Session.tree_json``): byte for byte the text
of the Python builder it replaced (``ReadCommands._tree_text_py``, kept as the oracle) on every
corpus file, on lines that are not ``JSON.stringify``'s text, on a legacy file and on a
100,000-deep chain (no recursion on depth)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.goldens import CORPUS

from sessiontree import Session
from sessiontree.errors import SessionError
from sessiontree.rpc import RpcServer, encode

FILES = sorted(p for p in CORPUS.rglob("*.jsonl") if p.stat().st_size < 4 << 20)


def _both(s: Session) -> tuple[bytes, bytes]:
    server = RpcServer(s)
    try:
        return server._tree_text(), server._tree_text_py()
    finally:
        server.close()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_core_tree_text_equals_the_python_builder(path: Path):
    try:
        s = Session.open(path)
    except Exception:
        pytest.skip("not a session that opens")
    try:
        got, want = _both(s)
    except SessionError as exc:  # a tree Pi's walk refuses: the core refuses it the same way
        with pytest.raises(type(exc)):
            s.tree_json(encode)
        with pytest.raises(type(exc)):
            RpcServer(s)._tree_text_py()
        return
    assert got == want


def test_lines_not_in_stringify_form_and_labels(tmp_path: Path):
    head = '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}'
    body = [
        '{"type":"custom","customType":"x","data":{"n":[1,0.5,1e+21]},"id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z"}',
        '{"type": "custom", "customType": "x", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:02.000Z"}',
        '{"type":"custom","customType":"\\u00e9\\/","id":"c","parentId":"a","timestamp":"2026-01-01T00:00:03.000Z"}',
        '{"type":"custom","customType":"x","data":{"k":1,"k":2},"id":"e","parentId":"c","timestamp":"2026-01-01T00:00:05.000Z"}',
        '{"type":"custom","customType":"x","data":{"1":1,"a":2},"id":"f","parentId":"zz","timestamp":"2026-01-01T00:00:06.000Z"}',
        '{"type":"label","id":"l1","parentId":"f","timestamp":"2026-01-01T00:00:07.000Z","targetId":"c","label":"h\\u00e9"}',
        '{"type":"label","id":"l2","parentId":"l1","timestamp":"2026-01-01T00:00:08.000Z","targetId":"a","label":"top"}',
    ]
    p = tmp_path / "mixed.jsonl"
    p.write_text("\n".join([head, *body]) + "\n", encoding="utf-8")
    s = Session.open(p)
    got, want = _both(s)
    assert got == want
    doc = json.loads(got)
    assert doc["tree"][0]["label"] == "top" and doc["tree"][0]["labelTimestamp"] == "2026-01-01T00:00:08.000Z"
    assert doc["tree"][0]["children"][1]["entry"]["customType"] == "é/"


def test_legacy_file_is_written_from_migrated_values(tmp_path: Path):
    legacy = FILES
    opened = 0
    for path in legacy:
        try:
            s = Session.open(path)
            if not s._core.needs_migration:
                continue
            want = _both(s)[1]
        except SessionError:
            continue
        opened += 1
        assert s.tree_json(encode) == want[len(b'{"tree":') : want.rindex(b',"leafId":')]
    if not opened:
        pytest.skip("no legacy corpus file")


def test_deep_chain(tmp_path: Path):
    n = 100_000
    lines = ['{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}']
    parent = "null"
    for i in range(n):
        lines.append(
            f'{{"type":"custom","customType":"x","id":"e{i}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z"}}'
        )
        parent = f'"e{i}"'
    p = tmp_path / "deep.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = Session.open(p)
    got, want = _both(s)
    assert got == want
    assert got.count(b'"children":[') == n


def test_a_label_timestamp_that_is_null_is_sent_and_a_missing_one_left_out(tmp_path: Path):
    """Pi keeps the label entry's ``timestamp`` as it is (``labelTimestampsById.set(targetId,
    entry.timestamp)``) and ``getTree`` puts it on the node, so ``JSON.stringify`` writes a JSON
    ``null`` as ``"labelTimestamp":null`` and leaves an absent one out. Before, both were left
    out (the value was read with ``dict.get``, which makes ``null`` and absent one ``None``)."""
    head = '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}'
    body = [
        '{"type":"custom","customType":"x","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z"}',
        '{"type":"custom","customType":"x","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z"}',
        '{"type":"custom","customType":"x","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z"}',
        '{"type":"label","id":"l1","parentId":"c","timestamp":null,"targetId":"a","label":"null ts"}',
        '{"type":"label","id":"l2","parentId":"l1","targetId":"b","label":"no ts"}',
        '{"type":"label","id":"l3","parentId":"l2","timestamp":5,"targetId":"c","label":"number ts"}',
    ]
    p = tmp_path / "labels.jsonl"
    p.write_text("\n".join([head, *body]) + "\n", encoding="utf-8")
    s = Session.open(p, index_cache="off")
    server = RpcServer(s)
    try:
        got, want = server._tree_text(), server._tree_text_py()
        assert got == want == encode(server._tree_value())
        a = json.loads(got)["tree"][0]
        b = a["children"][0]
        c = b["children"][0]
        assert a["label"] == "null ts" and "labelTimestamp" in a and a["labelTimestamp"] is None
        assert b["label"] == "no ts" and "labelTimestamp" not in b
        assert c["label"] == "number ts" and c["labelTimestamp"] == 5
        server.handle({"type": "hello"})
        flat = server.handle({"type": "get_tree", "format": "flat"})["data"]["nodes"]
        by_id = {n["id"]: n for n in flat}
        assert "labelTimestamp" in by_id["a"] and by_id["a"]["labelTimestamp"] is None
        assert "labelTimestamp" not in by_id["b"] and by_id["c"]["labelTimestamp"] == 5
    finally:
        server.close()


@pytest.mark.parametrize("path", FILES[:40], ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_streamed_line_is_the_answer_line(path: Path):
    """What a transport writes for ``get_tree`` (streamed in pieces) is the JSON line of the
    answer ``handle`` gives, byte for byte as ``encode`` writes it."""
    try:
        s = Session.open(path)
    except Exception:
        pytest.skip("not a session that opens")
    server = RpcServer(s)
    try:
        want = encode(server.handle({"type": "get_tree", "id": 7}))
        got = server.handle_line(b'{"type":"get_tree","id":7}', text_ok=True)
        pieces: list[bytes] = []
        got.write_to(pieces.append)  # type: ignore[attr-defined]
        assert b"".join(pieces) == want
    finally:
        server.close()


def test_a_stream_that_fails_half_way_cuts_the_line_and_closes_the_writer():
    """A ``StreamedText`` whose data fails after its head was written leaves a cut line (no
    newline) and a broken writer: nothing more is written, so the client never reads a line
    mixing two answers."""
    import io

    from sessiontree.errors import SessionFileChangedError
    from sessiontree.rpc.protocol import StreamedText
    from sessiontree.rpc.transports import _LineWriter

    def produce(write):
        write(b'{"tree":[')
        raise SessionFileChangedError("changed under the answer")

    out = io.BytesIO()
    w = _LineWriter(out)
    w(StreamedText(1, "get_tree", produce))
    assert w.broken
    assert not out.getvalue().endswith(b"\n") and b'"data":{"tree":[' in out.getvalue()
    w({"type": "response", "command": "get_state", "success": True})
    assert b"get_state" not in out.getvalue()


def test_repeated_index_and_many_keys_are_rewritten_other_keys_copied(tmp_path: Path):
    """The scan's bit leaves keys and numbers to the read: a number JavaScript spells otherwise,
    a repeated key (top level, nested, in an array),
    an array-index key or a 33rd key makes the line rewritten; the same key in sibling or nested
    objects, or a key text inside a string value, still lets it be copied."""
    from sessiontree.session import dumps_entry

    ts = '"timestamp":"2026-01-01T00:00:0{}.000Z"'
    many = ",".join(f'"k{i}":{i}' for i in range(33))
    data = [
        ('{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}],"d":"\\"a\\":1"}', True),
        ('{"a":1,"b":2,"a":3}', False),
        ('{"x":[{"k":1,"k":2}]}', False),
        ('{"b":{"c":1},"b":{"c":2}}', False),
        ('{"x":1,"7":2}', False),
        ('{"n":1.50}', False),
        ("[1e21,-0]", False),
        ("{" + many + "}", False),
    ]
    head = '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}'
    body, parent = [], "null"
    for n, (d, _) in enumerate(data):
        body.append(f'{{"type":"custom","customType":"x","data":{d},"id":"e{n}","parentId":{parent},{ts.format(n)}}}')
        parent = f'"e{n}"'
    body.append('{"type":"custom","customType":"x","id":"t","id":"t","parentId":"e7",' + ts.format(9) + "}")
    p = tmp_path / "keys.jsonl"
    p.write_text("\n".join([head, *body]) + "\n", encoding="utf-8")
    s = Session.open(p)
    texts = s.entry_texts(range(len(s)))
    assert [t is not None for t in texts] == [ok for _, ok in data] + [False]
    assert texts[0] == dumps_entry(s.entry_at(0).raw)
    got, want = _both(s)
    assert got == want
    assert json.loads(got)["tree"][0]["entry"]["data"]["d"] == '"a":1'


def test_lines_this_process_appends_are_copied_like_scanned_ones(tmp_path: Path):
    """Lines written by our own appends carry the scan's "already ``JSON.stringify``'s text" bit
    (we wrote their text), so ``get_tree`` copies them as it copies the lines a reopen scans: the
    same bytes as the Python builder (the oracle the goldens check) and as after a reopen."""
    src = next(p for p in FILES if p.name == "bash_exec.jsonl")
    p = tmp_path / "own.jsonl"
    p.write_bytes(src.read_bytes())
    s = Session.open(p, index_cache=False)
    n0 = len(s)
    s.append_message({"role": "user", "content": 'caf\u00e9 \u2028 "q" \\ \x01', "timestamp": 1})
    s.append_custom_entry("x", {"n": [1, 0.5, 1e21], "k": {"a": None}})
    s.append_label_change(s.entry_at(0).id, "top")
    s.flush()
    texts = s.entry_texts(range(n0, len(s)))
    assert all(t is not None for t in texts) and len(texts) == 3
    got, want = _both(s)
    assert got == want
    again = Session.open(p, index_cache=False)
    assert again.entry_texts(range(n0, len(again))) == texts
    assert _both(again)[0] == got
    doc = json.loads(got)
    assert doc["tree"][0]["label"] == "top"


def _chain_file(path: Path, n: int) -> list[bytes]:
    lines = [json.dumps({"type": "session", "version": 3, "id": "s", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/"})]
    for i in range(n):
        parent = None if i == 0 else f"e{i - 1:05d}"
        entry = {"type": "message", "id": f"e{i:05d}", "parentId": parent, "timestamp": "2025-01-01T00:00:01.000Z"}
        entry["message"] = {"role": "user", "content": f"turn {i}", "timestamp": i}
        lines.append(json.dumps(entry, separators=(",", ":")))
    data = [ln.encode() + b"\n" for ln in lines]
    path.write_bytes(b"".join(data))
    return data


@pytest.mark.parametrize("change", ["shrink", "rewrite"])
def test_a_file_changed_under_the_streamed_tree_raises_and_stops(tmp_path: Path, change: str):
    """The lines are read batch by batch while the answer is sent, on a reader that does not hold
    the session: a file cut short, or rewritten in place with other lines, under it raises
    SessionFileChangedError (the transport then cuts the line), never a text mixing two files.
    Every line before the change is the old file's."""
    from sessiontree.errors import SessionFileChangedError

    p = tmp_path / "s.jsonl"
    data = _chain_file(p, 30_000)  # several batches of 4,096 entries
    s = Session.open(p, index_cache=False)
    pieces: list[bytes] = []

    def sink(piece: bytes) -> None:
        if not pieces:
            if change == "shrink":
                with open(p, "r+b") as f:
                    f.truncate(len(data[0]) + 10)
            else:  # the same size, every line moved by one byte
                body = b"".join(data)
                p.write_bytes(b" " + body[:-1])
        pieces.append(piece)

    with pytest.raises(SessionFileChangedError):
        s.write_tree_json(sink, encode, b"<", b">")
    text = b"".join(pieces)
    assert pieces and not text.endswith(b">"), "stopped before the end"
    assert b'"id":"e00000"' in text
    s.close()


def test_the_session_is_usable_from_another_thread_while_the_tree_streams(tmp_path: Path):
    """The lines are read with the GIL released and without holding the session: another thread
    reads and appends while the answer is sent; the answer is the tree of the call's start."""
    import threading

    p = tmp_path / "s.jsonl"
    _chain_file(p, 20_000)
    s = Session.open(p, index_cache=False)
    want = RpcServer(Session.open(p, index_cache=False))._tree_text()
    seen: list[int] = []

    def sink(piece: bytes) -> None:
        if len(seen) == 1:
            t = threading.Thread(target=s.append_message, args=({"role": "user", "content": "x"},))
            t.start()
            t.join()
        seen.append(len(piece))

    parts: list[bytes] = []

    def both(piece: bytes) -> None:
        sink(piece)
        parts.append(piece)

    s.write_tree_json(both, encode, b'{"tree":', b',"leafId":' + encode("e19999") + b"}")
    assert b"".join(parts) == want
    assert len(s) == 20_001
    s.close()


def test_a_sink_that_raises_stops_the_reads_and_the_error_is_raised(tmp_path: Path):
    """The sink's error ends the call (the reading thread stops; nothing hangs), and the session
    answers again afterwards with the whole text."""
    p = tmp_path / "s.jsonl"
    _chain_file(p, 30_000)
    s = Session.open(p, index_cache=False)
    calls = [0]

    def sink(piece: bytes) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise BrokenPipeError("client gone")

    with pytest.raises(BrokenPipeError):
        s.write_tree_json(sink, encode, b"", b"")
    assert calls[0] == 2
    assert s.tree_json(encode).startswith(b'[{"entry":{"type":"message","id":"e00000"')
    s.close()
