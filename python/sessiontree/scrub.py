"""Secret scrubbing that keeps a session a valid, resumable session.

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

Data safety (``docs/scrub.md``): a rewrite in place copies, scrubbed, whatever another writer
that takes no lock (Pi) appended while it ran, before and after its rename, and waits for every
other process that holds the file (or, after the rename, the old file) open for writing to
close it (:func:`_open_writers`); a file with other hard links is not rewritten in place; the
session, the output and the report are three different files (:func:`check_distinct_files`).
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from .entries import SCRUB_KINDS, ScrubFinding, new_scrubber
from .errors import SessionArgumentError, SessionFileChangedError
from .writer import AtomicWriter, SessionWriter, atomic_write, check_target, remove_stale_temp_files

__all__ = [
    "KINDS",
    "REPLAY_POLICIES",
    "ScrubFinding",
    "ScrubReport",
    "check_distinct_files",
    "scrub_bytes",
    "scrub_file",
]

#: The kinds the rules detect, in the rule table's order.
KINDS: tuple[str, ...] = SCRUB_KINDS
#: ``keep`` (default) or ``drop``: what happens to provider replay fields.
REPLAY_POLICIES = ("keep", "drop")
#: Bytes read per block.
BLOCK = 8 << 20
#: A rewrite in place copies what another writer appended meanwhile, and checks again, at
#: most this many times before it gives up (the file kept growing; nothing is changed).
TAIL_ROUNDS = 200
#: Seconds a rewrite in place waits after its rename before it looks at the old file a last
#: time (an append that opened it before the rename and was descheduled before its write).
LATE_APPEND_WAIT = 0.05
#: Seconds a rewrite in place waits, before its rename, for another process to close the file it
#: holds open for writing; then the rewrite is refused (nothing is changed).
WRITER_WAIT = 2.0
#: Seconds a rewrite in place waits, after its rename, for another process that opened the old
#: file for writing before the rename to close it (its late bytes are then copied); then it
#: raises :class:`~sessiontree.errors.SessionFileChangedError` naming the process.
LATE_WRITER_WAIT = 30.0
#: Seconds since its last change after which a rewrite in place removes a temp copy of the file
#: that a killed rewrite left.
STALE_TEMP_AGE = 60.0


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

    def to_json(self) -> dict[str, Any]:
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


def _counted(blocks: Iterator[bytes], progress: Callable[[int], None] | None) -> Iterator[bytes]:
    """``blocks``, calling ``progress`` with the size of each."""
    for b in blocks:
        if progress is not None:
            progress(len(b))
        yield b


def _identity(path: str | os.PathLike[str]) -> tuple[str, tuple[int, int] | None]:
    """(resolved path, (device, inode) of what it names, None when nothing is there)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(path)
    except OSError:
        return real, None
    return real, (st.st_dev, st.st_ino)


def check_distinct_files(files: dict[str, str | os.PathLike[str] | None]) -> None:
    """Refuse, before anything is written, two roles (``{"input": ..., "output": ...,
    "report": ...}``; None or ``-`` for none) that name the same file: the same resolved path
    (symbolic links followed) or the same device and inode (a hard link). Every role after the
    first is an output: one that :func:`sessiontree.session.atomic_write` would refuse (a
    symbolic link, a FIFO, a device, a directory) is refused here already.

    Raises:
        SessionArgumentError: two of them are the same file (one line, naming both roles).
        OutputPathError: an output that is never written (nothing was written).
    """
    seen: list[tuple[str, str, tuple[int, int] | None]] = []
    for k, (role, path) in enumerate(files.items()):
        if path is None or str(path) == "-":
            continue
        real, ident = _identity(path)
        if k:
            check_target(Path(path), None)
        for other, oreal, oident in seen:
            if real == oreal or (ident is not None and ident == oident):
                raise SessionArgumentError(
                    f"{path}: the {role} is the {other} (the input, the output and the report must be "
                    "three different files; nothing was written)"
                )
        seen.append((role, real, ident))


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


def _check_output(out: Path, source_st: os.stat_result | None, dir_fd: int | None = None) -> None:
    """Refuse an output that is a symlink, not a regular file, or the source itself."""
    try:
        st = os.stat(out, dir_fd=dir_fd, follow_symlinks=False)
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
    source: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    in_place: bool = False,
    check: bool = False,
    header: bool = False,
    replay: str = "keep",
    record: bool = True,
    lock_timeout: float | None = None,
    dir_fd: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> ScrubReport:
    """Scrub the session file ``source`` into ``out``, or rewrite it (``in_place``), or only
    look (``check``: nothing is written; ``report.found`` says whether anything would change).

    ``in_place`` holds the file's writer lock (:class:`sessiontree.writer.SessionWriter`) while
    it reads and replaces the file atomically, keeping its mode (and owner where permitted); a
    symbolic link's target is rewritten (the link stays). Lines another writer that takes no
    lock (Pi) appends meanwhile are copied too, scrubbed (see :func:`rewrite_open_file`).
    ``out`` gets the source's mode. ``dir_fd``: ``out`` is a name in that open directory (as
    ``os`` functions take it). ``progress``: called with the bytes of each block read.

    Raises:
        SessionArgumentError: not exactly one of ``out``, ``in_place``, ``check``; ``out`` is the
            source, a symbolic link, or exists and is not a regular file; ``replay`` unknown;
            ``in_place`` on a file with other hard links.
        SessionLockedError: ``in_place`` and another writer holds the lock.
        SessionFileChangedError: ``in_place`` and the file kept growing, shrank or was replaced
            while it was rewritten (it is left as it was).
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
            for _ in _stream(_counted(_blocks(fh), progress), sc):
                pass
        return _fill(report, sc)
    if in_place:
        target = Path(os.path.realpath(src))
        writer = SessionWriter(target, lock_timeout)
        writer.acquire()
        try:
            with _open_source(target) as fh:
                done = rewrite_open_file(
                    fh,
                    target,
                    os.fstat(fh.fileno()),
                    header=header,
                    replay=replay,
                    record=record,
                    progress=progress,
                )
        finally:
            writer.close()
        done.source = done.output = str(src)
        return done
    assert out is not None
    dest = Path(out)
    with _open_source(src) as fh:
        st = os.fstat(fh.fileno())
        _check_output(dest, st, dir_fd)
        atomic_write(dest, _stream(_counted(_blocks(fh), progress), sc), like=st, source=st, dir_fd=dir_fd)
    report.output, report.written = str(dest), True
    return _fill(report, sc)


def _feed(fh: Any, sc: Any, out: Any, progress: Callable[[int], None] | None) -> None:
    """Scrub what ``fh`` holds up to its end into ``out`` (a partial last line stays in ``sc``)."""
    for block in _counted(_blocks(fh), progress):
        done = sc.feed(block)
        if done:
            out.write(done)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_ours(target: Path, flags: int, state: dict[str, Any], lost: int) -> int:
    """``target`` opened with ``flags``, when it is still the file we wrote (``state["cur"][0]``:
    its device and inode, shared by the nested placements of :func:`_reinsert`)."""
    fd = os.open(target, flags | _NOFOLLOW)
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != state["cur"][0]:
        os.close(fd)
        raise SessionFileChangedError(
            f"{target} was replaced right after it was rewritten; {lost} bytes appended "
            "to the old file meanwhile were not copied"
        )
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _carry_late(fh: Any, target: Path, state: dict[str, Any], sc: Any, depth: int = 3) -> None:
    """After the rename: bytes another writer appended to the old file (``fh``) after the last
    check (an append that opened the file before the rename) are scrubbed and put into the new
    file at ``state["at"]``: right after what was copied before, and before anything appended to
    the new file since the rename. The late append began first (it opened the file before the
    rename; Pi's next append opens it after its previous one is written), so that is the
    order the file would have had. When something was appended since, the new file is
    rewritten once more (atomically, under the same lock) with the late bytes in their place;
    that rewrite places its own late appends the same way, ``depth`` times at most (then they
    are appended: nothing is lost, the order may differ). ``sc`` None: copied as they are
    (appends made after the scrub are not scrubbed)."""
    rest = fh.read()
    if not rest:
        return
    data = rest if sc is None else (sc.feed(rest) or b"") + (sc.finish() or b"")  # finish: the last line
    at = state["at"]
    fd = _open_ours(target, os.O_RDWR | os.O_APPEND, state, len(rest))
    try:
        untouched = os.fstat(fd).st_size == at
        # appended and fsynced first in any case: the late bytes are then in a file with a name
        # (the old one has none), so a crash during the reordering below loses nothing
        _write_all(fd, data)
        os.fsync(fd)
        if untouched and os.pread(fd, len(data), at) == data:  # nobody appended between look and write
            state["at"] = at + len(data)
            return
        if depth <= 0:
            return
    finally:
        os.close(fd)
    _reinsert(target, state, data, depth)


def _reinsert(target: Path, state: dict[str, Any], data: bytes, depth: int) -> None:
    """Rewrite ``target`` with ``data`` at ``state["at"]`` and not where :func:`_carry_late`
    appended it (after other writers' appends), copying what they append meanwhile until the
    size holds still. If it keeps growing the file is left as it is (nothing lost; the late
    bytes stay after the appends). Appends that opened the file before this rename and write
    after it are placed by :func:`_carry_late` (``depth - 1``), right after the rename and
    :data:`LATE_APPEND_WAIT` later."""
    at = state["at"]
    fd = _open_ours(target, os.O_RDONLY, state, len(data))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        moved: list[os.stat_result] = []

        def settle(out: Any) -> None:
            if _wait_writers((st.st_dev, st.st_ino), WRITER_WAIT):
                raise _KeepsGrowing  # held open by another writer: left as it is
            for _ in range(TAIL_ROUNDS):
                more = fh.read()
                if more:
                    out.write(more)
                out.flush()
                os.fsync(out.fileno())
                if os.fstat(fh.fileno()).st_size == fh.tell():
                    moved.append(os.fstat(out.fileno()))
                    return
            raise _KeepsGrowing

        inner: dict[str, Any] = {"cur": state["cur"]}

        def late() -> None:
            if "at" not in inner:  # right after the rename: this is now the file we wrote
                state["cur"][0] = (moved[0].st_dev, moved[0].st_ino)
                inner["at"] = moved[0].st_size
            _carry_late(fh, target, inner, None, depth - 1)

        try:
            with AtomicWriter(target, like=st, settle=settle, renamed=late) as out:
                left = at
                while left:
                    block = fh.read(min(BLOCK, left))
                    if not block:
                        break
                    out.write(block)
                    left -= len(block)
                out.write(data)
                rest = fh.read()
                k = rest.find(data)
                while k > 0 and rest[k - 1 : k] != b"\n":
                    k = rest.find(data, k + 1)
                if k >= 0:
                    rest = rest[:k] + rest[k + len(data) :]
                out.write(rest)
        except _KeepsGrowing:
            return
        state["at"] = at + len(data)
        time.sleep(LATE_APPEND_WAIT)
        _wait_writers((st.st_dev, st.st_ino), LATE_WRITER_WAIT)
        late()


class _KeepsGrowing(SessionFileChangedError):
    """A reinsertion's copy kept growing: the file is left as it is (caught in :func:`_reinsert`)."""


def _writes(pid: int, fd: str) -> bool:
    """Whether descriptor ``fd`` of process ``pid`` is open for writing (``/proc/PID/fdinfo``);
    True when that cannot be read (assume the worst)."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as fh:
            for line in fh:
                if line.startswith(b"flags:"):
                    return int(line.split()[1], 8) & 3 != os.O_RDONLY
    except FileNotFoundError:
        return False  # closed meanwhile
    except (OSError, ValueError, IndexError):
        return True  # unreadable or malformed: assume a writer
    return True  # no flags line: assume a writer


def _same_file(path: str, ident: tuple[int, int]) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def _open_writers(ident: tuple[int, int]) -> list[tuple[int, int]] | None:
    """``(pid, fd)`` of each descriptor another process holds open for writing on the file
    ``ident`` (device, inode), as ``/proc`` shows them (the processes this user may inspect: its
    own); None where there is no ``/proc`` (not Linux). This process is left out: its own
    writers take the writer lock."""
    me = os.getpid()
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return None
    found: list[tuple[int, int]] = []
    for pid in pids:
        if pid == me:
            continue
        base = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(base)
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            if _same_file(f"{base}/{fd}", ident) and _writes(pid, fd):
                found.append((pid, int(fd)))
    return found


def _wait_writers(ident: tuple[int, int], wait: float) -> list[tuple[int, int]]:
    """Wait up to ``wait`` seconds until no other process holds the file ``ident`` open for
    writing (:func:`_open_writers`, looked at again once those it found are closed). Returns the
    writers still there at the end ([] when none; [] too where there is no ``/proc``)."""
    deadline = time.monotonic() + wait
    while True:
        held = _open_writers(ident)
        if not held:
            return []
        while held and time.monotonic() < deadline:
            time.sleep(0.002)
            held = [(p, f) for p, f in held if _same_file(f"/proc/{p}/fd/{f}", ident)]
        if held:
            return held


def _held_by(held: list[tuple[int, int]]) -> str:
    return ", ".join(sorted({f"process {p}" for p, _ in held}))


def rewrite_open_file(
    fh: Any,
    target: Path,
    st: os.stat_result,
    *,
    header: bool,
    replay: str,
    record: bool = True,
    progress: Callable[[int], None] | None = None,
) -> ScrubReport:
    """Rewrite ``target`` (open as ``fh``, its ``fstat`` ``st``) scrubbed, atomically, keeping
    its mode and owner. The caller holds the writer lock (:func:`scrub_file`, ``Session.scrub``).

    Another writer that takes no lock (Pi appends with ``O_APPEND`` and no lock) may append
    while this runs. After the scrubbed copy is written and fsynced, the file's size is
    checked: what was appended is scrubbed and copied too, until the size stays the same
    (after an fsync of the copy), right before the copy is renamed over ``target``. Bytes
    appended to the old file after that check (an append already under way at the rename) are
    copied to the new file right after the rename, and once more :data:`LATE_APPEND_WAIT`
    seconds later. Another process that holds the file open for writing (an append stalled
    between its open and its write) is waited for before the rename (:data:`WRITER_WAIT`), and
    one that opened the old file before the rename is waited for after it
    (:data:`LATE_WRITER_WAIT`), its bytes then copied (:func:`_open_writers`: what ``/proc``
    shows). Memory stays bounded by the longest line.

    Raises:
        SessionArgumentError: not a regular file; the file has other hard links (a rewrite
            would leave the secrets readable under the other names).
        SessionFileChangedError: the file kept growing for :data:`TAIL_ROUNDS` checks, shrank,
            was replaced meanwhile, or another process held it open for writing through
            :data:`WRITER_WAIT` (nothing is changed); or, after the rename, another process
            still held the old file open for writing after :data:`LATE_WRITER_WAIT` (the file is
            rewritten; what that process writes to the old file from then on is not in it).
        OutputPathError, OSError: as :func:`sessiontree.session.atomic_write`.
    """
    if not stat.S_ISREG(st.st_mode):
        raise SessionArgumentError(f"{target}: not a regular file")
    if st.st_nlink > 1:
        raise SessionArgumentError(
            f"{target}: the file has {st.st_nlink - 1} other hard link(s); a rewrite in place would leave "
            "the secrets readable under the other names (scrub into a new file with -o; nothing was changed)"
        )
    sc = _scrubber(header, replay, record)
    # the temp copies a rewrite killed mid-way left (we hold the lock; a copy written in the last
    # minute is left alone: a rewrite that lost the lock to a rename may still be writing it)
    remove_stale_temp_files(target, time.time() - STALE_TEMP_AGE)
    written: list[os.stat_result] = []

    ident = (st.st_dev, st.st_ino)

    def settle(out: Any) -> None:
        # another process holding the file open for writing would write into the old file after
        # the rename, where no name reaches it: wait until it closes it, or refuse
        held = _wait_writers(ident, WRITER_WAIT)
        if held:
            raise SessionFileChangedError(
                f"{target} is held open for writing by {_held_by(held)} (waited {WRITER_WAIT:g} s): what it "
                "writes after a rewrite would be lost; nothing was changed, try again when it is closed"
            )
        # the copy is fsynced: copy what was appended meanwhile until the size holds still
        rounds = 0
        while True:
            _feed(fh, sc, out, progress)
            read = fh.tell()
            now = os.fstat(fh.fileno()).st_size
            if now < read:
                raise SessionFileChangedError(f"{target} shrank while it was scrubbed (nothing was changed)")
            if now == read:
                last = sc.finish()  # a last line without its newline (yet)
                if last:
                    out.write(last)
                out.flush()
                os.fsync(out.fileno())
                if os.fstat(fh.fileno()).st_size == read:
                    break
            rounds += 1
            if rounds >= TAIL_ROUNDS:
                raise SessionFileChangedError(
                    f"{target} kept growing while it was scrubbed ({rounds} checks; nothing was changed): "
                    "try again when the writer is idle"
                )
        try:
            now_st = os.stat(target)
        except FileNotFoundError:
            now_st = None
        if now_st is None or (now_st.st_dev, now_st.st_ino) != (st.st_dev, st.st_ino):
            raise SessionFileChangedError(f"{target} was replaced while it was scrubbed (nothing was changed)")
        written.append(os.fstat(out.fileno()))

    # where late bytes of the old file go in the new one (right after what was copied), and
    # which file that is
    state: dict[str, Any] = {}

    def renamed() -> None:
        state["cur"] = [(written[0].st_dev, written[0].st_ino)]
        state["at"] = written[0].st_size
        _carry_late(fh, target, state, sc)

    with AtomicWriter(target, like=st, settle=settle, renamed=renamed) as out:
        _feed(fh, sc, out, progress)
    # an append that opened the old file before the rename may land a little later: wait until
    # every process that holds the old file open for writing has closed it, then copy what it wrote
    time.sleep(LATE_APPEND_WAIT)
    held = _wait_writers(ident, LATE_WRITER_WAIT)
    _carry_late(fh, target, state, sc)
    if held:
        raise SessionFileChangedError(
            f"{target} was rewritten, but {_held_by(held)} still holds the old file open for writing after "
            f"{LATE_WRITER_WAIT:g} s: what it writes there from now on is not in the file"
        )
    return _fill(ScrubReport(str(target), str(target), True, replay, bool(header)), sc)


def export_html_scrubbed(
    session: Any, path: str | os.PathLike[str], *, header: bool = False, replay: str = "keep", progress: bool = False
) -> Path:
    """``Session.export_html(path, scrub=True)``: the HTML view of a scrubbed copy of
    ``session``'s file (:func:`scrubbed_copy`, removed afterwards), showing the session's leaf.
    ``path`` is checked against the session's own file, before anything is read and again
    before the rename, as a plain export is: never over it (or a hard link to it), a symbolic
    link, a FIFO or a device; never more readable than it.

    Raises:
        OutputPathError: ``path`` is the session's file, a symbolic link, or not a regular file.
        SessionArgumentError: the session has no file.
    """
    from .html import export_html

    if session.path is None:
        raise SessionArgumentError("export_html(scrub=True) needs a session file")
    st = os.stat(session.path)
    check_target(Path(path), (st.st_dev, st.st_ino))  # before anything is read
    session.flush()
    copy, tmp = scrubbed_copy(session.path, header=header, replay=replay)
    try:
        clean = type(session).open(copy)  # the session's class: this module never imports the facade
        try:
            leaf = session.leaf_id
            if clean.entry_count() and leaf is not None and clean.leaf_id != leaf:
                clean.branch(leaf)  # the view shows our leaf
            return export_html(clean, path, source=st, progress=progress)
        finally:
            clean.close()
    finally:
        tmp.cleanup()


def scrubbed_copy(source: str | os.PathLike[str], *, header: bool = False, replay: str = "keep") -> tuple[Path, Any]:
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
