"""A self-contained HTML view of a session: the tree, the active path, messages, search.

:func:`export_html` writes one HTML file that works from ``file://`` with no network (a
Content-Security-Policy forbids any: scripts and styles run only by hash, images only from
``blob:`` URLs the page makes from image blocks). It streams from the index, so a 1 GB session exports in time and memory
proportional to what it writes:

* **segments**: the session file's own bytes, cut at line ends (entries' line starts, from the
  index) into ~2 MiB pieces, each gzip-compressed and base64-encoded in an inert ``<script type="text/plain">`` block, written
  last-first (the leaf is usually near the end; the meta lists every piece's offset). The page
  decompresses a segment (``DecompressionStream``) only when it needs an entry in it (the message
  pane, search, the download of the original JSONL, which is the concatenation of all segments);
* **index chunks**: per entry, what a tree row shows and the page sums (id, kind, preview, a
  reference id, byte offset and length, timestamp, Pi's token estimate, provider usage), built by
  the Rust core from the raw lines in batches (``Session.html_digest``), never as Python dicts;
* **the tree** as the core orders it (Pi's ``getTree`` child order), as little-endian ``uint32``
  arrays.

The page is ``viewer.js`` and ``viewer.css`` (package data next to this file), and the search
matcher ``matcher.wasm`` (the CLI's query parser and matcher compiled to WebAssembly,
``rust/wasm/matcher.rs``; gzip, base64, about 50 KB of page) that the search box uses.
Session content is untrusted: it reaches the page only inside base64 or escaped JSON (``<``, ``>``, ``&``,
U+2028/9 as ``\\uXXXX``), and the script sets it as ``textContent`` only; markdown is not
rendered.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import sys
import zlib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import orjson

from ..errors import SessionFileChangedError

if TYPE_CHECKING:  # pragma: no cover
    from ..session import Session

__all__ = ["export_html", "json_for_script", "SEGMENT_BYTES", "INDEX_BATCH"]

#: Raw bytes of the session file per compressed segment (cut at the next line end).
SEGMENT_BYTES = 2 << 20
#: Entries per index chunk.
INDEX_BATCH = 32768
#: segments written per call when a progress bar is shown (the bar moves between calls)
SEGMENT_GROUP = 8
#: Characters of preview per tree row.
PREVIEW_CHARS = 80
#: gzip level of the tree data (1: fastest); segments and index chunks are compressed by the
#: core at the same level (``rust/src/export.rs`` ``GZIP_LEVEL``).
GZIP_LEVEL = 1


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


@functools.cache
def _matcher_block() -> bytes:
    """The ``<script type="text/plain" id="st-wasm">`` element holding ``matcher.wasm`` (gzip level 9,
    base64; made once per process: the same bytes in every page)."""
    wasm = resources.files(__package__).joinpath("matcher.wasm").read_bytes()
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b'<script type="text/plain" id="st-wasm">' + base64.b64encode(c.compress(wasm) + c.flush()) + b"</script>\n"


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _gz_b64(data: bytes) -> bytes:
    """gzip (level :data:`GZIP_LEVEL`) then base64: safe inside any HTML element."""
    c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    return base64.b64encode(c.compress(data) + c.flush())


def json_for_script(value: object) -> bytes:
    """JSON that cannot end or comment out the ``<script>`` element holding it: ``<``, ``>``,
    ``&`` and U+2028/U+2029 are written as ``\\uXXXX`` escapes (they occur only in strings)."""
    raw = orjson.dumps(value)
    return (
        raw.replace(b"<", b"\\u003c")
        .replace(b">", b"\\u003e")
        .replace(b"&", b"\\u0026")
        .replace("\u2028".encode(), b"\\u2028")
        .replace("\u2029".encode(), b"\\u2029")
    )


def _segment_bounds(fh: BinaryIO, end: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of the pieces the first ``end`` bytes are cut into: each ends at a
    line end (the last may not) and is about :data:`SEGMENT_BYTES` long; a longer line makes its
    piece longer (a line is never split). One forward read, linear in ``end``; nothing kept."""
    bounds: list[tuple[int, int]] = []
    start = pos = 0
    while pos < end:
        block = fh.read(min(SEGMENT_BYTES, end - pos))
        if not block:  # the file shrank under us
            raise SessionFileChangedError("the session file shrank while it was exported")
        cut = len(block) if pos + len(block) >= end else block.rfind(b"\n") + 1
        pos += len(block)
        if cut:
            stop = pos - len(block) + cut
            bounds.append((start, stop - start))
            start = stop
    if start < end:  # pragma: no cover - the last block always closes the last piece
        bounds.append((start, end - start))
    return bounds


def _u32(values: list[int]) -> bytes:
    from array import array

    a = array("I", values)
    if a.itemsize != 4:  # pragma: no cover - every platform we build for has 4-byte I
        a = array("L", values)
    if sys.byteorder != "little":  # pragma: no cover
        a.byteswap()
    return a.tobytes()


def export_html(
    session: "Session", path: str | os.PathLike[str], *, progress: bool = False, source: os.stat_result | None = None
) -> Path:
    """Write the HTML view of ``session`` to ``path`` and return the path written, through
    :func:`sessiontree.writer.atomic_writer` (a temp file ``O_EXCL`` beside it, fsync, rename):
    never over the session itself, a FIFO, a device or through a symbolic link, and never more
    readable than the session file or the page it replaces. ``source``: the ``os.stat`` of the
    file ``session`` was made from when that is not ``session.path`` (a scrubbed copy's
    original): the rules then hold against that file.

    Cost: the segment bounds come from the index (no read); the core then reads
    each entry's line once for the index chunks (digested, gzip-compressed with libdeflate and
    base64-encoded in batches on every core, written in order while later ones are worked on)
    and each segment's bytes once (compressed the same way, with the GIL released, written
    last-first while later ones are compressed; ``rust/src/export.rs``). Memory: a few index
    batches and a few segments in flight, plus the tree table (three integers per entry).

    ``progress``: progress bars on stderr (:func:`sessiontree._progress.progress_bar`), in
    the file's bytes: ``index`` for the index pass, then ``pages`` as the segments are written.

    Raises:
        OutputPathError: ``path`` is the session file (or a hard link to it), a symbolic link,
            or exists and is not a regular file (checked before the session is read; nothing
            is written).
        SessionFileChangedError: the file shrank or was replaced under the index (nothing is
            written; no temporary file is left).
        OSError: ``path`` cannot be written.
    """
    out = Path(path)
    session.flush()
    n = len(session)
    css = _asset("viewer.css")
    js = _asset("viewer.js")
    leaf_entry = session.leaf_entry
    leaf = None if leaf_entry is None else leaf_entry.index
    if leaf is None and not session.leaf_is_null and n:
        leaf = n - 1  # Pi: an unknown leaf id reads as the last entry
    # label entries replayed in the core's order; only string targets can name an entry (the
    # index resolves which entry holds the current label of each target)
    labels: dict[str, object] = {}
    for target, value in session.labels.items():
        if isinstance(target, str):
            labels[target] = value if isinstance(value, (str, int, float)) and value else None
    src_name = session.path.name if session.path is not None else f"{session.session_id}.jsonl"
    from ..writer import atomic_writer  # looked up per call (tests watch it)

    # the pieces of the file, known before anything is written (from the index: no read): the
    # page gets their offsets up front and the pieces last-first, so the leaf's messages (near
    # the end of the file, where Pi's leaf is) can be shown before the browser has parsed the rest
    st: os.stat_result | None = None
    mem: bytes | None = None
    if session.path is not None:
        st = os.stat(session.path)
        bounds = session.html_segment_bounds(SEGMENT_BYTES)
        end = session.indexed_bytes
    else:
        import io

        mem = session.to_bytes()
        end = len(mem)
        bounds = _segment_bounds(io.BytesIO(mem), end)
    csp = (
        "default-src 'none'; script-src 'wasm-unsafe-eval' "
        + _csp_hash(js)
        + "; style-src "
        + _csp_hash(css)
        + "; img-src blob:; base-uri 'none'; form-action 'none'"
    )
    # the page: never over the session (source), never wider than it (like); the target is
    # checked before the file is read, and again before the rename
    if source is not None:
        st = source
    with atomic_writer(out, like=st, source=st) as fh:
        meta = {
            "v": 1,
            "segments": [off for off, _ in bounds],
            "n": n,
            "leaf": leaf,
            "leafIsNull": session.leaf_is_null,
            "header": session.header,
            "name": session.session_name,
            "file": src_name,
            "labels": labels,
            "problems": len(session.problems),
        }
        w = fh.write
        w(
            b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
            b'<meta http-equiv="Content-Security-Policy" content="' + csp.encode() + b'">\n'
            b'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            b'<meta name="generator" content="sessiontree">\n<title>session</title>\n'
            b"<style>" + css.encode() + b"</style></head>\n<body>\n"
            b'<div id="st-app" class="loading">Loading the session\xe2\x80\xa6 '
            b"(this page needs JavaScript and a browser with DecompressionStream)</div>\n"
        )
        w(b'<script type="application/json" id="st-meta">' + json_for_script(meta) + b"</script>\n")
        roots, start, kids = session.tree_table()
        tree = _u32([len(roots), len(start), len(kids)]) + _u32(roots) + _u32(start) + _u32(kids)
        del roots, start, kids
        w(b'<script type="text/plain" id="st-treedata">' + _gz_b64(tree) + b"</script>\n")
        del tree
        # index chunks: digested and compressed by the core on every core, written in order
        fh.flush()
        from .._progress import close_bar, progress_bar

        # two passes over the file, a bar each in the file's bytes (one bar of twice the size
        # read as a file twice as big)
        index_bar = progress_bar(end, progress, "B", scale=True, desc="index")
        session.html_write_index(
            fh.fileno(), INDEX_BATCH, PREVIEW_CHARS, b'<script type="text/plain" class="st-ix">', b"</script>\n"
        )
        index_bar(end)
        bar = progress_bar(end, progress, "B", scale=True, desc="pages")
        w(_matcher_block())
        w(b"<script>" + js.encode() + b"</script>\n")
        # segments, last-first: read, compressed and written by the core with the GIL released
        # (a few in flight); a file that shrank under the index is a SessionFileChangedError
        heads = [
            b'<script type="text/plain" class="st-seg" id="g%d" data-o="%d">' % (k, o)
            for k, (o, _) in enumerate(bounds)
        ]
        fh.flush()
        order = list(range(len(bounds) - 1, -1, -1))
        # a group of segments per call (each call keeps a few in flight): the bar moves between
        group = SEGMENT_GROUP if progress else max(len(order), 1)
        try:
            for g0 in range(0, len(order), group):
                part = order[g0 : g0 + group]
                session.html_write_segments(fh.fileno(), bounds, part, heads, b"</script>\n", mem)
                bar(sum(bounds[k][1] for k in part))
        finally:
            close_bar(bar)
        if session.path is not None and os.stat(session.path).st_size < end:
            # a small file is read once into memory by the core: it still holds the bytes
            raise SessionFileChangedError("the session file shrank while it was exported")
        w(
            b'<script type="application/json" id="st-end">{"segments":%d,"bytes":%d}</script>\n'
            b"</body></html>\n" % (len(bounds), end)
        )
    return out
