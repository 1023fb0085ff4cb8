"""Claude Code transcripts and Codex rollouts to Pi session trees and back, losslessly.

The conversion runs in the Rust core (``rust/src/convert``), streaming the source line by line
with the GIL released; no Python object is made per line. :func:`detect` names a file's format
from the content of its first lines (never its name); :func:`to_pi` and :func:`from_pi` write
files and return a :class:`ConvertResult`. ``docs/convert.md`` holds the mapping tables.

Every Pi entry made from a source line carries the line in one side field, the same for every
source (Pi ignores it)::

    "source": {"format": "claude-code", "id": "<uuid>", "n": 12, "line": {...the line...}}

so ``to_pi`` then ``from_pi`` gives back every source line, byte for byte, in order (sidechain
and subagent sessions included). Entries made in Pi travel the other way in a ``piEntry`` field
of the target's lines.

Outputs are written as :func:`sessiontree.writer.atomic_write` writes: a temp file created
``O_EXCL | O_NOFOLLOW`` beside the target, fsync, rename; never through a symbolic link, over a
FIFO or device, or over a file being read, and never more readable than the source. All files
of one conversion appear together or not at all.

    >>> import sessiontree.convert as convert
    >>> r = convert.to_pi("transcript.jsonl", "session.jsonl")  # doctest: +SKIP
    >>> r.files, r.problems  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal

from .errors import ConvertError, SessionArgumentError, UnrecognisedFormatError
from .session import convert_bytes, convert_detect, convert_detect_bytes, convert_file

from .paths import SourceArg

if TYPE_CHECKING:  # pragma: no cover
    from .session import Session

__all__ = [
    "FORMATS",
    "ConvertAllResult",
    "ConvertAllRow",
    "ConvertError",
    "ConvertProblem",
    "ConvertResult",
    "UnrecognisedFormatError",
    "convert_all",
    "detect",
    "detect_bytes",
    "from_pi",
    "open_as_pi",
    "to_pi",
    "to_pi_bytes",
]

#: The formats converted.
FORMATS: tuple[str, ...] = ("claude-code", "codex", "pi")

Format = Literal["claude-code", "codex", "pi"]


@dataclass(frozen=True)
class ConvertProblem:
    """A source line not carried as intended (it is still carried, see the module doc):
    ``file``; ``line`` (1-based; 0: the file as a whole); ``kind`` (``malformed_json``,
    ``torn_last_line``, ``duplicate_id``, ``orphan``, ``parent_cycle``, ``boundary_cycle``...);
    ``message``."""

    file: str
    line: int
    kind: str
    message: str


@dataclass(frozen=True)
class ConvertResult:
    """What one conversion wrote.

    ``source_format``/``target_format``; ``lines``: source lines read (every file);
    ``written``: entries (to Pi) or entries converted (from Pi); ``messages``, ``compactions``,
    ``custom``: entries made of each kind (to Pi); ``files``: every file written, the main one
    first (sidechain and subagent sessions after it); ``problems``; ``not_carried``: what the
    target cannot hold (Codex: the entries off the active branch, by id)."""

    source_format: str
    target_format: str
    lines: int
    written: int
    messages: int
    compactions: int
    custom: int
    files: tuple[str, ...]
    problems: tuple[ConvertProblem, ...] = field(default=())
    not_carried: tuple[str, ...] = field(default=())

    @property
    def output(self) -> str:
        """The main file written."""
        return self.files[0]


def _result(d: dict[str, Any]) -> ConvertResult:
    return ConvertResult(
        source_format=d["source_format"],
        target_format=d["target_format"],
        lines=d["lines"],
        written=d["written"],
        messages=d["messages"],
        compactions=d["compactions"],
        custom=d["custom"],
        files=tuple(d["files"]),
        problems=tuple(ConvertProblem(*p) for p in d["problems"]),
        not_carried=tuple(d["not_carried"]),
    )


def _check(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise SessionArgumentError(f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}")
    return value


def detect(path: str | os.PathLike[str]) -> str:
    """The format of ``path``: ``"claude-code"``, ``"codex"`` or ``"pi"``, from the content of its
    first lines (at most 16 lines, 16 MiB); the name is never looked at.

    Raises:
        UnrecognisedFormatError: no line decides (empty, another format, not JSON).
        OSError: the file cannot be read.
    """
    return convert_detect(os.fspath(path))


def detect_bytes(data: bytes, *, name: str = "<bytes>") -> str:
    """:func:`detect` over a file's bytes held in memory (``name`` names them in errors).

    Raises:
        UnrecognisedFormatError: no line decides.
    """
    return convert_detect_bytes(bytes(data), name)


def to_pi_bytes(data: bytes, *, name: str = "<bytes>", source_format: str = "auto") -> tuple[bytes, ConvertResult]:
    """Convert a Claude Code transcript or a Codex rollout held in memory to a Pi session in
    memory, in the core (no temporary file, no Python object per line): ``(pi_bytes, result)``.

    ``pi_bytes`` is the main session (open it with :meth:`sessiontree.Session.from_bytes`);
    Claude Code sidechains are named in ``result.files`` (after ``name``) but not returned,
    and subagent files beside a transcript are not looked for (:func:`to_pi` on the file
    converts those). A Pi session comes back unchanged. Memory: the source and the output.

    Raises:
        UnrecognisedFormatError: the bytes are none of the formats.
        SessionArgumentError: an unknown ``source_format``.
    """
    _check("source_format", source_format, ("auto", *FORMATS))
    pi, d = convert_bytes(bytes(data), name, source_format)
    return pi, _result(d)


def open_as_pi(path: str | os.PathLike[str]) -> tuple[Session, ConvertResult]:
    """A read-only Pi session over a Claude Code transcript or a Codex rollout, converted in
    memory in the core (:func:`to_pi_bytes`, then :meth:`Session.from_bytes`; no temporary
    file, nothing written), and the conversion's result (``source_format`` names the format).
    A Pi session is opened from its bytes as it is. Sidechains and subagent files are not
    part of the session (convert the file with :func:`to_pi` to have them). Memory: the file
    and its Pi form.

    Raises:
        UnrecognisedFormatError: the file is none of the formats (or not a regular file).
        OSError: it cannot be read.
        SessionFormatError: the converted bytes do not open (a Pi file that is not valid).
    """
    import stat

    from .session import Session

    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnrecognisedFormatError(f"{name}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read()
    finally:
        os.close(fd)
    pi, result = to_pi_bytes(data, name=name)
    del data
    return Session.from_bytes(pi, name=name), result


def to_pi(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    source_format: str = "auto",
    shown: str | os.PathLike[str] | None = None,
) -> ConvertResult:
    """Convert a Claude Code transcript or a Codex rollout (``source_format``: ``"auto"``,
    ``"claude-code"``, ``"codex"``, or ``"pi"`` for a copy) to a Pi session at ``out``.

    Claude Code sidechains and subagent files (``<src stem>/subagents/*.jsonl``) become Pi
    sessions of their own beside ``out`` (``<out stem>.sidechain-<key>.jsonl``,
    ``<out stem>.subagent-<name>.jsonl``) whose header's ``parentSession`` names ``out``.
    Cost: two streaming passes over each source; memory: a few ids per line. ``shown``: the
    path the sidechain and subagent headers' ``parentSession`` give the main output (default
    ``out``; for a caller that writes through another path to the same file).

    Raises:
        UnrecognisedFormatError: the source is none of the formats.
        OutputPathError: an output is a symbolic link, not a regular file, or a source.
        SessionArgumentError: an unknown ``source_format``.
        OSError: reading or writing failed (nothing is written).
    """
    _check("source_format", source_format, ("auto", *FORMATS))
    return _result(
        convert_file(os.fspath(src), os.fspath(out), source_format, "pi", None if shown is None else os.fspath(shown))
    )


def from_pi(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    to: str = "claude-code",
) -> ConvertResult:
    """Convert the Pi session ``src`` to a Claude Code transcript or a Codex rollout at ``out``.

    Entries converted from that format give back their source lines as they were; the rest
    are written in the target's shape. Claude Code holds the whole tree (a session converted
    from Claude Code gets its sidechain sessions merged back and its subagent sessions written
    to ``<out stem>/subagents/``); Codex holds one chain, so the active branch is written and
    the entries off it are named in ``not_carried``.

    Raises:
        UnrecognisedFormatError: ``src`` is not a Pi session.
        OutputPathError: an output is a symbolic link, not a regular file, or a source.
        SessionArgumentError: an unknown ``to``.
        OSError: reading or writing failed (nothing is written).
    """
    _check("to", to, ("claude-code", "codex", "pi"))
    return _result(convert_file(os.fspath(src), os.fspath(out), "pi", to))


@dataclass(frozen=True)
class ConvertAllRow:
    """One session of a store converted by :func:`convert_all`.

    ``path`` (the source), ``output`` (the main Pi file, None when it failed),
    ``source_format`` (None when not recognised), ``files`` (every file written: the main one,
    then sidechain and subagent sessions), ``lines``, ``written``, ``messages``,
    ``compactions``; ``problems`` (count) and ``problem_kinds`` (count per kind) and
    ``problem_list`` (the first 20, as :class:`ConvertProblem`); ``not_carried`` (count);
    ``error_kind`` (``unrecognised``, ``not_found``, ``not_a_file`` for a directory or FIFO,
    ``refused_output`` (also an object key no output can be made of), ``io``, ``error``) and
    ``error``: None when written."""

    path: str
    output: str | None
    source_format: str | None
    files: tuple[str, ...]
    lines: int
    written: int
    messages: int
    compactions: int
    problems: int
    problem_kinds: dict[str, int]
    problem_list: tuple[ConvertProblem, ...]
    not_carried: int
    error_kind: str | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-able dict (``problem_list`` as dicts)."""
        return {
            "path": self.path,
            "output": self.output,
            "source_format": self.source_format,
            "files": list(self.files),
            "lines": self.lines,
            "written": self.written,
            "messages": self.messages,
            "compactions": self.compactions,
            "problems": self.problems,
            "problem_kinds": dict(self.problem_kinds),
            "problem_list": [
                {"file": p.file, "line": p.line, "kind": p.kind, "message": p.message} for p in self.problem_list
            ],
            "not_carried": self.not_carried,
            "error_kind": self.error_kind,
            "error": self.error,
        }


@dataclass(frozen=True)
class ConvertAllResult:
    """What :func:`convert_all` did: ``rows`` (one per session, in path order) and the totals:
    ``sessions``, ``converted``, ``failed``, ``by_format`` (sessions converted per source
    format), ``files`` (files written, sidechain and subagent sessions included), ``lines``,
    ``problems`` (recorded problems over every session; none is a failure)."""

    rows: tuple[ConvertAllRow, ...]

    @property
    def sessions(self) -> int:
        return len(self.rows)

    @property
    def converted(self) -> int:
        return sum(r.error is None for r in self.rows)

    @property
    def failed(self) -> int:
        return sum(r.error is not None for r in self.rows)

    @property
    def by_format(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            if r.error is None and r.source_format is not None:
                out[r.source_format] = out.get(r.source_format, 0) + 1
        return dict(sorted(out.items()))

    @property
    def files(self) -> int:
        return sum(len(r.files) for r in self.rows)

    @property
    def lines(self) -> int:
        return sum(r.lines for r in self.rows)

    @property
    def problems(self) -> int:
        return sum(r.problems for r in self.rows)

    def summary(self) -> dict[str, Any]:
        """The totals as a JSON-able dict (no rows)."""
        errors: dict[str, int] = {}
        for r in self.rows:
            if r.error_kind is not None:
                errors[r.error_kind] = errors.get(r.error_kind, 0) + 1
        return {
            "sessions": self.sessions,
            "converted": self.converted,
            "failed": self.failed,
            "by_format": self.by_format,
            "errors": dict(sorted(errors.items())),
            "files": self.files,
            "lines": self.lines,
            "problems": self.problems,
        }


def _row(d: dict[str, Any]) -> ConvertAllRow:
    return ConvertAllRow(
        path=d["path"],
        output=d["output"],
        source_format=d["source_format"],
        files=tuple(d["files"]),
        lines=d["lines"],
        written=d["written"],
        messages=d["messages"],
        compactions=d["compactions"],
        problems=d["problems"],
        problem_kinds=dict(d["problem_kinds"]),
        problem_list=tuple(ConvertProblem(**p) for p in d["problem_list"]),
        not_carried=d["not_carried"],
        error_kind=d["error_kind"],
        error=d["error"],
    )


def convert_all(
    source: SourceArg,
    out_dir: str | os.PathLike[str],
    *,
    source_format: str = "auto",
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool | Callable[[int], None] = False,
    on_row: Callable[[ConvertAllRow], None] | None = None,
) -> ConvertAllResult:
    """Convert every session of a store to Pi sessions below ``out_dir``, on the fleet's
    engines (:mod:`sessiontree.fleet`; needs the ``fleet`` extra for ``engine="ray"``).

    ``source``: a directory (Claude Code's ``~/.claude/projects``, Codex's ``~/.codex/sessions``
    with its ``YYYY/MM/DD`` folders, a Pi store, or any mix: each ``*.jsonl`` file's format is
    detected from its content), a glob, objects in storage (``s3://bucket/prefix``, as
    :func:`sessiontree.fleet.session_stats` takes them), or a list of them. Each output keeps
    its file's path below the source directory; Claude Code sidechain and subagent sessions are
    written beside it (``<session>/subagents/*.jsonl`` converts with its session, not on its
    own). An object is read into memory and converted there; its outputs go below ``out_dir``
    at its key (bucket included), each segment made a plain name one to one (``..``, ``.``,
    empty and over-long segments escaped: never outside ``out_dir``, never two objects to one
    output), mode 0600; a subagent object converts on its own.

    A file that cannot be converted (not recognised, unreadable, a refused output) is a row
    with ``error``, never the job's failure; damaged lines are recorded problems (as
    :func:`to_pi`). Outputs are written atomically, never through a symbolic link inside
    ``out_dir`` (each folder below it is opened with ``O_NOFOLLOW``), never over a source,
    never more readable than their source; an ``out_dir`` inside the source is not read.

    Args:
        source_format: ``"auto"`` (detected per file) or a format every file is read as.
        engine: ``"local"`` (a process pool here; in this process for small stores) or
            ``"ray"`` (Ray tasks over bundles of files; ``address`` of a running cluster, else
            ``ray.init`` with ``num_cpus``; ``out_dir`` must be shared with the workers);
            ``workers``: processes, or Ray tasks in flight.
        progress: True for a progress bar on stderr (tqdm; Ray's bars under Ray), or a
            callable ``f(n)`` told the sessions done after each batch.
        on_row: called with each row (the same objects, in the same order, as the result's
            ``rows``) as soon as its session and those before it are done (local engine; under
            Ray when the job ends).

    Raises:
        SessionArgumentError: ``out_dir`` is a source folder or holds one, or an unknown
            ``source_format`` (nothing written).
        ValueError: an unknown engine, or an empty source list.
    """
    from .fleet import convert_sessions

    made: dict[int, tuple[ConvertAllRow, dict[str, Any]]] = {}  # rows handed to on_row, by their dict
    rows = convert_sessions(
        source,
        out_dir,
        source_format=source_format,
        engine=engine,
        workers=workers,
        address=address,
        num_cpus=num_cpus,
        progress=progress,
        on_row=None if on_row is None else (lambda d: on_row(made.setdefault(id(d), (_row(d), d))[0])),
    )
    return ConvertAllResult(tuple(made[id(r)][0] if id(r) in made else _row(r) for r in rows))
