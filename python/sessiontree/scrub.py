"""Secret scrubbing that keeps a session a valid, resumable session (issue 20).

Every JSON string of every line (keys too) is searched by the rules of the Rust core
(``rust/src/scrub``: 37 kinds, listed in :data:`KINDS` and ``docs/scrub.md``); each secret
becomes ``[REDACTED:<kind>:<hash6>]`` (``hash6``: the first 6 hex digits of the SHA-256 of the
value, so equal secrets give equal placeholders). Ids, ``parentId``, ``timestamp``, ``type``,
``firstKeptEntryId``, ``fromId``, ``targetId`` (top level), every ``id`` and ``toolCallId``
below it, the entry count and order are never changed, so the output opens in Pi and in
sessiontree with the same tree and leaf. Replaced strings are written as ``JSON.stringify``
writes them; other bytes are kept.

Provider replay fields (``thinkingSignature``, ``textSignature``, ``thoughtSignature``) follow
``replay``: ``"keep"`` (default: left as they are and not searched; changing one breaks a
provider's replay) or ``"drop"`` (the field is removed). The report states the policy.

The file is streamed in blocks through the core: memory is bounded by the longest line.
Outputs are written by :func:`sessiontree.writer.atomic_write` (a temp file, fsync, rename):
never a partial file. A report never holds a value: kind, where, offsets, hash.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from .entries import SCRUB_KINDS, ScrubFinding, new_scrubber
from .errors import SessionArgumentError
from .writer import SessionWriter, atomic_write

__all__ = ["KINDS", "REPLAY_POLICIES", "ScrubFinding", "ScrubReport", "scrub_bytes", "scrub_file"]

#: The kinds the rules detect, in the rule table's order.
KINDS: tuple[str, ...] = SCRUB_KINDS
#: ``keep`` (default) or ``drop``: what happens to provider replay fields.
REPLAY_POLICIES = ("keep", "drop")
#: Bytes read per block.
BLOCK = 8 << 20


@dataclass
class ScrubReport:
    """What a scrub found and did.

    ``source``/``output``: paths (``output`` None when nothing was written: ``check``, or in
    memory); ``written``; ``replay``: the policy; ``replay_fields``: how many replay fields were
    kept (``keep``) or dropped (``drop``); ``header``: whether the header's ``cwd`` and
    ``parentSession`` were searched; ``lines_changed``; ``found``: secrets replaced (or, with
    ``check``, that would be); ``bytes_in``; ``findings`` (empty when not recorded)."""

    source: str | None
    output: str | None
    written: bool
    replay: str
    header: bool
    found: int = 0
    lines_changed: int = 0
    replay_fields: int = 0
    bytes_in: int = 0
    findings: list[ScrubFinding] = field(default_factory=list)

    @property
    def kinds(self) -> dict[str, int]:
        """Secrets per kind (from the findings)."""
        out: dict[str, int] = {}
        for f in self.findings:
            out[f.kind] = out.get(f.kind, 0) + 1
        return out

    def to_json(self) -> dict:
        """The report as ``sessiontree scrub --report`` writes it (no values)."""
        return {
            "source": self.source,
            "output": self.output,
            "written": self.written,
            "replayPolicy": self.replay,
            "replayFields": self.replay_fields,
            "header": self.header,
            "found": self.found,
            "linesChanged": self.lines_changed,
            "bytes": self.bytes_in,
            "kinds": self.kinds,
            "findings": [f.to_json() for f in self.findings],
        }


def _scrubber(header: bool, replay: str, record: bool) -> Any:
    if replay not in REPLAY_POLICIES:
        raise SessionArgumentError(f"replay must be one of {', '.join(REPLAY_POLICIES)}, not {replay!r}")
    return new_scrubber(header, replay, record)


def _stream(blocks: Iterable[bytes], sc: Any) -> Iterator[bytes]:
    for block in blocks:
        out = sc.feed(block)
        if out:
            yield out
    tail = sc.finish()
    if tail:
        yield tail


def _fill(report: ScrubReport, sc: Any) -> ScrubReport:
    report.bytes_in, report.lines_changed, report.found, report.replay_fields = sc.stats()
    report.findings.extend(sc.take_findings())  # ScrubFinding, made by the core
    return report


def scrub_bytes(data: bytes, *, header: bool = False, replay: str = "keep") -> tuple[bytes, ScrubReport]:
    """Scrub a whole session held in memory: ``(scrubbed bytes, report)``.

    Raises:
        SessionArgumentError: ``replay`` is not ``keep`` or ``drop``.
    """
    sc = _scrubber(header, replay, True)
    out = b"".join(_stream([bytes(data)], sc))
    return out, _fill(ScrubReport(None, None, False, replay, bool(header)), sc)


def _blocks(fh: Any) -> Iterator[bytes]:
    while True:
        b = fh.read(BLOCK)
        if not b:
            return
        yield b


def _open_source(src: Path) -> Any:
    """Open ``src`` for reading without blocking on a FIFO, and refuse anything that is not a
    regular file (a FIFO would hang the reader, a device never end)."""
    fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SessionArgumentError(f"{src}: not a regular file (nothing was read or written)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_output(out: Path, source_st: os.stat_result | None) -> None:
    """Refuse an output that is a symlink, not a regular file, or the source itself."""
    try:
        st = os.lstat(out)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise SessionArgumentError(f"{out}: the output is a symbolic link (give a new path; nothing was written)")
    if not stat.S_ISREG(st.st_mode):
        raise SessionArgumentError(f"{out}: the output exists and is not a regular file (nothing was written)")
    if source_st is not None and (st.st_dev, st.st_ino) == (source_st.st_dev, source_st.st_ino):
        raise SessionArgumentError(
            f"{out}: the output is the input (use in_place / --in-place to rewrite it; nothing was written)"
        )


def scrub_file(
    source: str | os.PathLike,
    out: str | os.PathLike | None = None,
    *,
    in_place: bool = False,
    check: bool = False,
    header: bool = False,
    replay: str = "keep",
    record: bool = True,
    lock_timeout: float | None = None,
) -> ScrubReport:
    """Scrub the session file ``source`` into ``out``, or rewrite it (``in_place``), or only
    look (``check``: nothing is written; ``report.found`` says whether anything would change).

    ``in_place`` holds the file's writer lock (:class:`sessiontree.writer.SessionWriter`) while
    it reads and replaces the file atomically, keeping its mode (and owner where permitted); a
    symbolic link's target is rewritten (the link stays). ``out`` gets the source's mode.

    Raises:
        SessionArgumentError: not exactly one of ``out``, ``in_place``, ``check``; ``out`` is the
            source, a symbolic link, or exists and is not a regular file; ``replay`` unknown.
        SessionLockedError: ``in_place`` and another writer holds the lock.
        OSError: the source cannot be read or the output written (no partial output is left).
    """
    modes = sum([out is not None, bool(in_place), bool(check)])
    if modes != 1:
        raise SessionArgumentError("give exactly one of out, in_place or check")
    sc = _scrubber(header, replay, record)
    src = Path(source)
    report = ScrubReport(str(src), None, False, replay, bool(header))
    if check:
        with _open_source(src) as fh:
            for _ in _stream(_blocks(fh), sc):
                pass
        return _fill(report, sc)
    if in_place:
        target = Path(os.path.realpath(src))
        writer = SessionWriter(target, lock_timeout)
        writer.acquire()
        try:
            with _open_source(target) as fh:
                done = rewrite_open_file(fh, target, os.fstat(fh.fileno()), header=header, replay=replay, record=record)
        finally:
            writer.close()
        done.source = done.output = str(src)
        return done
    assert out is not None
    dest = Path(out)
    with _open_source(src) as fh:
        st = os.fstat(fh.fileno())
        _check_output(dest, st)
        atomic_write(dest, _stream(_blocks(fh), sc), like=st, source=st)
    report.output, report.written = str(dest), True
    return _fill(report, sc)


def rewrite_open_file(
    fh: Any, target: Path, st: os.stat_result, *, header: bool, replay: str, record: bool = True
) -> ScrubReport:
    """Rewrite ``target`` (open as ``fh``, its ``fstat`` ``st``) scrubbed, atomically, keeping
    its mode and owner. The caller holds the writer lock (:func:`scrub_file`, ``Session.scrub``)."""
    if not stat.S_ISREG(st.st_mode):
        raise SessionArgumentError(f"{target}: not a regular file")
    sc = _scrubber(header, replay, record)
    atomic_write(target, _stream(_blocks(fh), sc), like=st)
    return _fill(ScrubReport(str(target), str(target), True, replay, bool(header)), sc)


def scrubbed_copy(source: str | os.PathLike, *, header: bool = False, replay: str = "keep") -> tuple[Path, Any]:
    """A scrubbed copy of ``source`` in a new private temporary directory (mode 0700, the file
    0600): ``(path, the TemporaryDirectory)``; the caller removes it with ``cleanup()``. Used by
    ``export_html(scrub=True)``."""
    tmp = tempfile.TemporaryDirectory(prefix="sessiontree-scrub-")
    dest = Path(tmp.name) / Path(source).name
    try:
        scrub_file(source, dest, header=header, replay=replay, record=False)
        os.chmod(dest, 0o600)
    except BaseException:
        tmp.cleanup()
        raise
    return dest, tmp
