"""Converting a whole store to Pi sessions: ``convert_sessions``, under ``convert-all``.

The engine of ``sessiontree convert-all`` and :func:`sessiontree.convert.convert_all` (which
imports this module when it runs, so this one calls the core's conversion through ``session/``,
as :mod:`sessiontree.convert` does, and never imports that module: no import circle).

Stores: Claude Code's ``~/.claude/projects/<cwd>/<session>.jsonl`` (with
``<session>/subagents/*.jsonl``, converted with their session), Codex's
``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``, Pi's own layout, or any mix: each file's format
is detected from its content. Each session is one unit of work on the fleet's engines
(:func:`sessiontree.fleet._engine.run`: local process pool or Ray), one row each.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import SessionArgumentError, SessionError
from ._scrub import _inside, _OutDirs, _relative
from ._sources import Item, SourceArg, resolve_source

#: the per-session problems a row lists (the rest are counted in ``problems``)
ROW_PROBLEMS = 20
#: the formats read (``sessiontree.convert.FORMATS``)
FORMATS = ("claude-code", "codex", "pi")


@dataclass(frozen=True)
class ConvertOptions:
    """What every worker needs: the output folder (real path), the source base the outputs'
    paths are taken below, and the source format (``auto`` or one of the formats)."""

    out_root: str
    base: str | None
    source_format: str


def _subagent_of_listed(path: str, listed: set[str]) -> bool:
    """Whether ``path`` is ``<dir>/<session>/subagents/<name>.jsonl`` of a ``<dir>/<session>.jsonl``
    that is listed too (the core converts it with that session, into a file beside it)."""
    p = Path(path)
    if p.parent.name != "subagents":
        return False
    session_dir = p.parent.parent
    return str(session_dir.parent / f"{session_dir.name}.jsonl") in listed


#: bytes of a key's segment kept as a file name as it is (a longer one is shortened, see
#: :func:`object_parts`); a file name holds at most 255
SEGMENT_BYTES = 200


def object_parts(key: str) -> list[str]:
    """The folders and file name below the output folder of the object ``key``: its segments
    (split at ``/``), each made a plain name, one to one (two keys never share an output):
    ``%`` is written ``%25``; an empty segment (``a//b``, a leading ``/``) ``%``; ``.`` and ``..``
    ``%2E`` and ``%2E%2E`` (so no part climbs out or stays in place); ``~`` ``%7E``; a segment
    over :data:`SEGMENT_BYTES` bytes of UTF-8 is cut there (whole characters) and ended with
    ``~`` and 16 hex digits of its hash (keeping ``.jsonl``: no other segment has a ``~``). In the
    file name, ``.sidechain-`` and ``.subagent-`` are written ``%2Esidechain-`` and
    ``%2Esubagent-``: the sessions written beside another object's output
    (``<stem>.sidechain-<group>.jsonl``) are never an object's own output. Never ``""``, ``.``,
    ``..`` or a ``/``."""
    import hashlib

    parts = []
    segs = key.split("/")
    for i, seg in enumerate(segs):
        seg = seg.replace("%", "%25").replace("\0", "%00").replace("~", "%7E")
        seg = {"": "%", ".": "%2E", "..": "%2E%2E"}.get(seg, seg)
        if i == len(segs) - 1:  # never the name of another object's sidechain or subagent session
            seg = seg.replace(".sidechain-", "%2Esidechain-").replace(".subagent-", "%2Esubagent-")
        raw = seg.encode("utf-8", "surrogateescape")
        if len(raw) > SEGMENT_BYTES:
            tail = ".jsonl" if i == len(segs) - 1 and seg.endswith(".jsonl") else ""
            digest = hashlib.blake2b(raw, digest_size=8).hexdigest()
            cut = raw[: SEGMENT_BYTES - 64].decode("utf-8", "ignore")  # whole characters
            seg = f"{cut}~{digest}{tail}"
        parts.append(seg)
    return parts


def _proc_dir(fd: int) -> str | None:
    """A path that names the open folder ``fd`` itself (``/proc/self/fd/N``): a path through it
    never follows a symbolic link planted in the output tree after the folder was opened."""
    p = f"/proc/self/fd/{fd}"
    return p if os.path.isdir(p) else None


def convert_one(item: Item, opts: ConvertOptions) -> dict[str, Any]:
    """One session of the store converted to Pi below ``opts.out_root``: its row (see
    :func:`convert_sessions`). Never raises for a session: a failure is the row's ``error``."""
    from ..errors import UnrecognisedFormatError
    from ..session import convert_detect, convert_file

    rel = object_parts(item.key or item.path) if item.fs is not None else _relative(item, opts.base).split("/")
    dest = Path(opts.out_root).joinpath(*rel)
    row: dict[str, Any] = {
        "path": item.path,
        "output": None,
        "source_format": None,
        "files": [],
        "lines": 0,
        "written": 0,
        "messages": 0,
        "compactions": 0,
        "problems": 0,
        "problem_kinds": {},
        "problem_list": [],
        "not_carried": 0,
        "error_kind": None,
        "error": None,
    }
    if item.fs is not None:
        return _convert_object(item, opts, rel, dest, row)
    dirs = None
    through: str | None = None

    def shown(text: str) -> str:
        """``text`` with the open folder's ``/proc/self/fd/N`` named as the user's output folder."""
        return text.replace(through, str(dest.parent)) if through else text

    try:
        st = os.stat(item.path)  # follows symlinks: a dangling one is FileNotFoundError below
        if not stat.S_ISREG(st.st_mode):  # named as the fleet's rows name it (``not_a_file``)
            what = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else None
            row.update(error_kind="not_a_file", error=f"{item.path}: {what or 'not a regular file'}")
            return row
        fmt = convert_detect(item.path) if opts.source_format == "auto" else opts.source_format
        row["source_format"] = fmt
        dirs = _OutDirs(Path(opts.out_root))
        dfd = dirs.open(rel[:-1])
        try:
            through = _proc_dir(dfd)
            target = os.path.join(through, rel[-1]) if through else str(dest)
            store = (opts.base, opts.out_root) if opts.base is not None else None
            r = convert_file(item.path, target, fmt, "pi", str(dest), store)
        finally:
            os.close(dfd)
        shown_dir = str(dest.parent)
        files = [
            os.path.join(shown_dir, f[len(through) + 1 :]) if through and f.startswith(through) else f
            for f in r["files"]
        ]
        _fill(row, r, files, str(dest))
    except UnrecognisedFormatError as exc:
        row.update(error_kind="unrecognised", error=str(exc))
    except FileNotFoundError as exc:
        row.update(error_kind="not_found", error=f"{exc.filename or item.path}: {exc.strerror or exc}")
    except OSError as exc:
        from ..errors import OutputPathError

        kind = "refused_output" if isinstance(exc, OutputPathError) else "io"
        where = f"{exc.filename}: " if exc.filename and exc.strerror else ""
        row.update(error_kind=kind, error=shown(f"{type(exc).__name__}: {where}{exc.strerror or exc}"))
    except SessionError as exc:
        row.update(error_kind="error", error=shown(f"{type(exc).__name__}: {exc}"))
    finally:
        if dirs is not None:
            dirs.close()
    return row


def _convert_object(
    item: Item, opts: ConvertOptions, rel: list[str], dest: Path, row: dict[str, Any]
) -> dict[str, Any]:
    """An object in storage (``s3://…``): read into memory (as ``stats`` reads one), converted
    in memory in the core, each session made (the main one, then Claude Code sidechains) written
    with :func:`sessiontree.writer.atomic_writer` (all temp files written, then renamed) in its folder below ``opts.out_root``, opened
    ``O_NOFOLLOW`` one component at a time from the key's parts without ``..``, ``.`` or empty
    ones (a hostile key never leaves the output folder), mode 0600 (an object has no mode to
    follow). Subagent objects are sessions of their own here (their transcript is not read
    beside them). Never raises for a session: a failure is the row's ``error``."""
    from ..errors import OutputPathError, SessionTreeError, UnrecognisedFormatError
    from ..session import convert_bytes_all
    from ..writer import atomic_writer
    from ._rows import _read_object

    dirs = None
    try:
        data, _, _ = _read_object(item, None)
        made, r = convert_bytes_all(data, str(dest), opts.source_format)
        del data
        row["source_format"] = r["source_format"]
        names = []
        for name, _pi in made:
            name = os.fspath(name)
            if os.path.dirname(name) != str(dest.parent) or os.path.basename(name) in ("", ".", ".."):
                raise OutputPathError(0, "a session made would be written outside its folder", name)
            names.append(os.path.basename(name))
        dirs = _OutDirs(Path(opts.out_root))
        dfd = dirs.open(rel[:-1])
        try:
            # every temp file written before the first rename: a failure writing any leaves none
            with contextlib.ExitStack() as stack:
                for name, (_, pi) in zip(names, made):
                    stack.enter_context(atomic_writer(name, dir_fd=dfd, mode=0o600)).write(pi)
        finally:
            os.close(dfd)
        _fill(row, r, [os.path.join(str(dest.parent), n) for n in names], str(dest))
    except UnrecognisedFormatError as exc:
        row.update(error_kind="unrecognised", error=str(exc))
    except (OSError, ValueError, SessionTreeError) as exc:
        kind = getattr(exc, "kind", None)  # an object the store would not hand over
        if not isinstance(kind, str):
            refused = isinstance(exc, (OutputPathError, ValueError))
            kind = "refused_output" if refused else "io" if isinstance(exc, OSError) else "error"
        where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename and exc.strerror else ""
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        row.update(error_kind=kind, error=f"{type(exc).__name__}: {where}{why}")
    finally:
        if dirs is not None:
            dirs.close()
    return row


def _fill(row: dict[str, Any], r: dict[str, Any], files: list[str], dest: str) -> None:
    """A converted session's row from the core's report ``r`` and the files written."""
    kinds: dict[str, int] = {}
    for _file, _line, kind, _message in r["problems"]:
        kinds[kind] = kinds.get(kind, 0) + 1
    row.update(
        output=files[0] if files else dest,
        files=files,
        lines=r["lines"],
        written=r["written"],
        messages=r["messages"],
        compactions=r["compactions"],
        problems=len(r["problems"]),
        problem_kinds=dict(sorted(kinds.items())),
        problem_list=[{"file": f, "line": n, "kind": k, "message": m} for f, n, k, m in r["problems"][:ROW_PROBLEMS]],
        not_carried=len(r["not_carried"]),
    )


def convert_rows(items: Sequence[Item], opts: ConvertOptions) -> list[dict[str, Any]]:
    """:func:`convert_one` over a batch (the engines' per-batch function)."""
    return [convert_one(it, opts) for it in items]


def convert_sessions(
    source: SourceArg,
    out_dir: str | os.PathLike[str],
    *,
    source_format: str = "auto",
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool | Callable[[int], None] = False,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Convert every session of ``source`` (a directory, glob or files, or objects in storage:
    ``s3://bucket/prefix``) to Pi sessions below ``out_dir``, keeping each file's path below
    the source directory (sidechain and subagent sessions beside their session's output; an
    object: at its key, see :func:`object_parts` and :func:`_convert_object`). One row per session, in path order:
    ``path``, ``output``, ``source_format``, ``files`` (every file written), ``lines``,
    ``written``, ``messages``, ``compactions``, ``problems`` (count), ``problem_kinds``
    (count per kind), ``problem_list`` (the first 20), ``not_carried``, ``error_kind``
    (``unrecognised``, ``not_found``, ``not_a_file`` for a directory or FIFO, ``refused_output``,
    ``io``, ``error``) and ``error``;
    a session that fails is its row, never the job's failure.

    Subagent files (``<session>/subagents/*.jsonl``) of a listed session are converted with it,
    not on their own. Nothing is written through a symbolic link inside ``out_dir``: every
    folder below it is opened relative to its parent with ``O_NOFOLLOW`` and the core writes
    through that open folder; each output is written atomically, never over a source, never
    more readable than its source. An ``out_dir`` inside the source is not read as a source.

    Args:
        engine: ``"local"`` or ``"ray"`` (as :func:`sessiontree.fleet.session_stats`; under Ray,
            ``out_dir`` must be on a filesystem the workers share).
        progress: True: a bar on stderr (local engine) or Ray's bars; a callable ``f(n)`` is
            called with the sessions done after each batch.
        on_row: called with each row, in path order, as soon as its session and those before
            it are done (local engine; under Ray when the job ends): the CLI prints them so.

    Raises:
        SessionArgumentError: ``out_dir`` is a source folder or holds one, or an unknown
            ``source_format`` (nothing written).
        ValueError: an unknown engine.
    """
    from . import _engine

    if source_format != "auto" and source_format not in FORMATS:
        raise SessionArgumentError(
            f"source_format must be one of 'auto', {', '.join(map(repr, FORMATS))}, not {source_format!r}"
        )
    if engine not in _engine.ENGINES:
        raise ValueError(f"engine must be one of {_engine.ENGINES}, not {engine!r}")
    root = Path(out_dir)
    out_real = os.path.realpath(root)
    srcs = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    for x in srcs:
        if isinstance(x, (str, os.PathLike)) and os.path.isdir(x) and _inside(os.fspath(x), out_real):
            raise SessionArgumentError(
                f"{out_dir}: the output folder is the source folder {x} or holds it (nothing was written)"
            )
    items = resolve_source(source)
    items = [it for it in items if it.fs is not None or not _inside(it.path, out_real)]
    listed = {it.path for it in items if it.fs is None}
    # a local subagent file converts with its session; an object is read on its own
    items = [it for it in items if it.fs is not None or not _subagent_of_listed(it.path, listed)]
    local = [os.path.abspath(it.path) for it in items if it.fs is None]
    if srcs and all(isinstance(x, (str, os.PathLike)) and os.path.isdir(x) for x in srcs):
        base: str | None = os.path.commonpath([os.path.abspath(x) for x in srcs])
    else:
        base = os.path.commonpath([os.path.dirname(p) for p in local]) if local else None
    root.mkdir(parents=True, exist_ok=True)
    opts = ConvertOptions(out_real, base, source_format)

    # items come sorted by path (resolve_source): rows are handed over in the result's order
    rows = _engine.run(
        convert_rows,
        items,
        opts,
        engine=engine,
        workers=workers,
        address=address,
        num_cpus=num_cpus,
        progress=progress,
        on_rows=None if on_row is None else functools.partial(_engine.each_row, on_row),
    )
    rows.sort(key=lambda r: r["path"])
    return rows


__all__ = ["convert_sessions", "convert_rows", "ConvertOptions"]
