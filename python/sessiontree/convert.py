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
from typing import Any, Literal

from .errors import ConvertError, SessionArgumentError, UnrecognisedFormatError
from .session import convert_detect, convert_file

__all__ = [
    "FORMATS",
    "ConvertError",
    "ConvertProblem",
    "ConvertResult",
    "UnrecognisedFormatError",
    "detect",
    "from_pi",
    "to_pi",
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


def to_pi(
    src: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    source_format: str = "auto",
) -> ConvertResult:
    """Convert a Claude Code transcript or a Codex rollout (``source_format``: ``"auto"``,
    ``"claude-code"``, ``"codex"``, or ``"pi"`` for a copy) to a Pi session at ``out``.

    Claude Code sidechains and subagent files (``<src stem>/subagents/*.jsonl``) become Pi
    sessions of their own beside ``out`` (``<out stem>.sidechain-<key>.jsonl``,
    ``<out stem>.subagent-<name>.jsonl``) whose header's ``parentSession`` names ``out``.
    Cost: two streaming passes over each source; memory: a few ids per line.

    Raises:
        UnrecognisedFormatError: the source is none of the formats.
        OutputPathError: an output is a symbolic link, not a regular file, or a source.
        SessionArgumentError: an unknown ``source_format``.
        OSError: reading or writing failed (nothing is written).
    """
    _check("source_format", source_format, ("auto", *FORMATS))
    return _result(convert_file(os.fspath(src), os.fspath(out), source_format, "pi"))


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
