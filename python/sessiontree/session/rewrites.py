"""Whole-file work: migrating a legacy file, scrubbing, the HTML page, and clones.

Each rewrite holds the writer lock, checks the path still names the file this session
indexed, writes through :mod:`sessiontree.writer` (atomically, mode kept, never through a
symlink), then re-indexes the file with the same leaf.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, TYPE_CHECKING, Iterator, cast

from .. import _core
from ..entries import parse_json_line
from ..errors import SessionArgumentError, SessionFileChangedError
from ..migrate import CURRENT_SESSION_VERSION, header_line_at_version, migrated_lines
from ..paths import inside, iso_now, new_session_id, session_file_name
from ..writer import open_own_file, rewrite_lines, write_copy
from .base import dumps_entry
from .base import SessionBase

if TYPE_CHECKING:
    from ..otel.trace import OtelReport
    from ..scrub import ScrubReport
    from . import Session


def _is_header_line(line: bytes) -> bool:
    try:
        v = parse_json_line(line.rstrip(b"\r"))
    except Exception:
        return False
    return isinstance(v, dict) and v.get("type") == "session" and isinstance(v.get("id"), str)


class Rewrites(SessionBase):
    """``migrate``, ``scrub``, ``export_html``, ``to_otlp`` and ``create_branched_session`` (Pi's clone)."""

    def create_branched_session(self, leaf_id: str) -> "Session":
        """Clone: a new session holding only the path root → ``leaf_id`` (Pi ``createBranchedSession``).

        Its header names this file as ``parentSession``.

        Label entries on the path are dropped and the labels of path entries are re-created
        at the end (in Pi's label order). An entry whose parent was a dropped label is
        re-attached to that label's parent, so no entry is left dangling (Pi issue 5669).
        A legacy source is migrated first. This session is left unchanged; the clone is
        written atomically into ``session_dir`` (in memory for in-memory sessions).

        Raises:
            EntryNotFoundError: no entry has this id.
            SessionCycleError: the path loops.
        """
        cls = cast("type[Session]", type(self))  # the assembled class (this mixin is one of its parts)
        path = self._walk(self._index_of(leaf_id))
        ids, parent_ids, _, types, _, _, _ = self._core.table(path)
        label_ids: dict[str | None, str | None] = {}
        kept: list[int] = []  # positions in path
        for k in range(len(path)):
            if types[k] == "label":
                # a dropped label's children re-attach to the label's own (effective) parent
                pid = parent_ids[k]
                label_ids[ids[k]] = label_ids.get(pid, pid) if pid in label_ids else pid
            else:
                kept.append(k)
        kept_ids = {ids[k] for k in kept}
        used = set(kept_ids)
        lines: list[bytes] = []
        for k in kept:
            i, pid = path[k], parent_ids[k]
            if pid in label_ids or self._core.needs_migration:
                raw = self._load_raw(i)
                if pid in label_ids:
                    raw = dict(raw)
                    raw["parentId"] = label_ids[pid]
                lines.append(dumps_entry(raw) + b"\n")
            else:
                lines.append(self._core.line(i) + b"\n")
        parent = ids[kept[-1]] if kept else None
        for target, e in self._core.labels():
            if target is not None and target in kept_ids:
                nid = self._core.new_id()  # unused in this file, so in the new one
                while nid in used:
                    nid = self._core.new_id()
                used.add(nid)
                lab = {
                    "type": "label",
                    "id": nid,
                    "parentId": parent,
                    "timestamp": iso_now(),
                    "targetId": target,
                    "label": self._load_raw(e).get("label"),
                }
                lines.append(dumps_entry(lab) + b"\n")
                parent = nid
        sid = new_session_id()
        ts = iso_now()
        header: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": sid,
            "timestamp": ts,
            "cwd": self.cwd,
        }
        if self._path is not None:
            header["parentSession"] = os.path.abspath(self._path)  # absolute, as Pi writes it
        head = dumps_entry(header) + b"\n"
        if self._path is None:
            core = _core.Index.in_memory()
            core.append(0, head + b"".join(lines))
            return cls(core, path=None, session_dir=None, header=header, header_on_disk=True)
        sdir = self._session_dir or self._path.parent
        sdir.mkdir(parents=True, exist_ok=True)
        new_path = inside(sdir, session_file_name(ts, sid))
        write_copy(new_path, [head, *lines], source=self._path)  # no wider than the source
        return cls.open(new_path, session_dir=sdir, durability=self._durability)

    def export_html(
        self,
        path: str | os.PathLike[str],
        *,
        scrub: bool = False,
        replay: str = "keep",
        header: bool = False,
        progress: bool = False,
    ) -> Path:
        """Write a self-contained HTML view of this session to ``path``; returns it as a Path.

        The page holds the tree, the active path, messages, search and the original JSONL.
        Streams from the index; see :func:`sessiontree.html.export_html`. Written by
        :func:`atomic_writer`: never over this session's file, a FIFO or a device, nor through
        a symbolic link; never more readable than the session file or the page it replaces.

        With ``scrub``, the view is made from a scrubbed copy (:meth:`scrub`; ``replay`` and
        ``header`` as there) in a private temporary directory, removed afterwards: no secret the
        rules know reaches the page (:func:`sessiontree.scrub.export_html_scrubbed`).

        ``progress``: a progress bar on stderr while the page is written (tqdm, when installed).

        Raises:
            OutputPathError: ``path`` is this session's file, a symbolic link, or not a
                regular file (nothing written).
            SessionFileChangedError: the file shrank or was replaced under the index.
            SessionArgumentError: ``scrub`` on a session with no file; ``header`` without ``scrub``.
            OSError: ``path`` cannot be written.
        """
        from ..html import export_html

        if not scrub:
            if header:
                raise SessionArgumentError("export_html: header=True needs scrub=True")
            return export_html(cast("Session", self), path, progress=progress)
        from ..scrub import export_html_scrubbed

        return export_html_scrubbed(self, path, header=header, replay=replay, progress=progress)

    def to_otlp(self, path: str | os.PathLike[str], *, content: str = "none") -> "OtelReport":
        """Write this session as an OpenTelemetry GenAI trace in OTLP/JSON to ``path``, atomically.

        One ``ExportTraceServiceRequest`` per line; returns its :class:`sessiontree.otel.OtelReport` (spans, requests, problems). ``content``: ``none``,
        ``scrubbed`` or ``full``. See :mod:`sessiontree.otel` (the mapping) and ``docs/otel.md``.

        Raises:
            SessionArgumentError: ``content`` is not one of the three.
            OutputPathError: ``path`` is this session's file, a symbolic link, or not a regular file.
            OSError: ``path`` cannot be written.
        """
        from ..otel.trace import to_otlp

        return to_otlp(cast("Session", self), path, content=content)

    def scrub(
        self,
        out: str | os.PathLike[str] | None = None,
        *,
        in_place: bool = False,
        check: bool = False,
        header: bool = False,
        replay: str = "keep",
    ) -> "ScrubReport":
        """Scrub secrets from this session's file (see :mod:`sessiontree.scrub`).

        Into ``out``, rewriting the file (``in_place``), or only finding them (``check``).
        Returns the :class:`~sessiontree.scrub.ScrubReport` (kinds, JSON pointers, offsets,
        hashes: never a value). ``header`` also searches the header's ``cwd`` and
        ``parentSession``; ``replay`` (``keep``/``drop``) is the policy for provider replay
        fields.

        ``in_place`` takes this session's writer lock, rewrites the file atomically (mode and
        owner kept; a symlink's target rewritten), then re-indexes it with the same leaf, and
        closes the writer (as :meth:`migrate`).

        Raises:
            SessionArgumentError: not exactly one of ``out``/``in_place``/``check``; ``out`` is
                this file, a symlink or not a regular file; an in-memory session.
            SessionLockedError: ``in_place`` and another writer holds the lock.
            SessionFileChangedError: ``in_place`` and the file was replaced since it was opened.
            OSError: reading or writing failed (no partial output is left).
        """
        from .. import scrub as _scrub

        if self._path is None:
            raise SessionArgumentError("scrub needs a session file (in memory: sessiontree.scrub.scrub_bytes)")
        self.flush()
        if not in_place:
            return _scrub.scrub_file(self._path, out, check=check, header=header, replay=replay)
        if out is not None or check:
            raise SessionArgumentError("give exactly one of out, in_place or check")
        leaf_null = self._core.leaf_is_null()
        leaf_id = self._core.leaf_id()
        writer = self._get_writer()
        writer.acquire()
        try:
            self._core.refresh()
            target, fh, st = open_own_file(self._path, self._core.file_identity())
            with fh:
                report = _scrub.rewrite_open_file(fh, target, st, header=header, replay=replay)
            report.source = report.output = str(self._path)
        finally:
            self.close()
        self._reopen_keeping_leaf(leaf_null, leaf_id)
        return report

    def _reopen_keeping_leaf(self, leaf_null: bool, leaf_id: str | None) -> None:
        """Indexes the rewritten file afresh and puts the leaf back where it was (by id)."""
        self._core = self._view.index = _core.Index.open(str(self._path))  # old entries read it too
        if leaf_null:
            self._core.set_leaf(None)
        elif leaf_id is not None and self._core.index_of(leaf_id) is not None:
            self._core.set_leaf(self._core.index_of(leaf_id))

    def _entry_lines(self, with_header: dict[str, Any] | None = None) -> Iterator[bytes]:
        """Every entry as a line (migrated when the file is legacy), optionally after a header."""
        if with_header is not None:
            yield dumps_entry(with_header) + b"\n"
        migrate = self._core.needs_migration
        for i in range(len(self._core)):
            if migrate:
                yield dumps_entry(self._load_raw(i)) + b"\n"
            else:
                yield self._core.line(i) + b"\n"

    def migrate(self) -> bool:
        """Rewrite a legacy v1/v2 file as v3, atomically (Pi does this on open). Lines Pi
        would drop (malformed, blank) are kept verbatim, so nothing is lost. Returns whether
        the file was rewritten.

        The rewrite holds the writer lock, first checks that the path still names the file
        this session indexed (same device and inode, not shorter), keeps the file's mode (and
        owner where permitted), rewrites a symbolic link's target (the link stays), and
        removes temp copies an earlier rewrite of this file left when it was killed.

        Raises:
            SessionFileChangedError: the file was replaced (renamed over), removed or
                truncated since it was opened: nothing is written.
            OSError: the file could not be replaced (it is left as it was).
        """
        if not self._core.needs_migration or self._path is None:
            return False
        self.flush()
        leaf_null = self._core.leaf_is_null()
        leaf_id = self._core.leaf_id()
        writer = self._get_writer()
        locked_at = time.time()
        writer.acquire()  # no other sessiontree writer while the file is replaced
        try:
            # the path still names our file (else SessionFileChangedError); lines another
            # program appended meanwhile are indexed, so they are migrated too
            self._core.refresh()
            target, fh, st = open_own_file(self._path, self._core.file_identity())
            with fh:
                data = fh.read()
            if len(data) < self._core.end:
                raise SessionFileChangedError(
                    f"{self._path} shrank since it was indexed: open it again (nothing was rewritten)"
                )
            replacements = migrated_lines(self._core, self._load_raw)
            header = header_line_at_version(self._core.header_line() or b"")
            rewrite_lines(
                target,
                data,
                replacements,
                header if header is not None else dumps_entry(self._header),
                _is_header_line,
                like=st,
                locked_at=locked_at,
            )
        finally:
            self.close()
        self._reopen_keeping_leaf(leaf_null, leaf_id)
        return True
