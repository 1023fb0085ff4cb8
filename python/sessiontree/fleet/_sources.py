"""Resolving a fleet source into session items.

A source is a directory (Pi's layout ``<root>/--<cwd>--/<timestamp>_<id>.jsonl``, or any
tree of ``.jsonl`` files), a glob, a list of paths, or a filesystem URL (``s3://bucket/prefix``,
``gs://…``, ``file://…``) read through ``pyarrow.fs`` (or an fsspec filesystem passed as
``filesystem``). Listing never follows symlinked directories (no loop can make it spin) and
keeps every name ending in ``.jsonl``, whatever it is (a directory, a FIFO, a dangling or
looping symlink): the per-file function turns each into a row with its problem.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..errors import SessionTreeError
from .._local_sources import is_url, local_paths  # the local half: a light module of its own
from ..paths import ArrowFileSystem, FileSystemArg, FsspecFileSystem, SourceArg

__all__ = [
    "is_url",
    "Item",
    "ObjectStat",
    "object_stats",
    "resolve_source",
    "SourceError",
    "SourceArg",
    "FileSystemArg",
    "ArrowFileSystem",
    "FsspecFileSystem",
]


class SourceError(SessionTreeError, OSError):
    """A source could not be listed (a refused endpoint, access denied, no such bucket, a
    local path that does not exist): ``str(err)`` is ``cannot read SOURCE: why``. A read
    failure, never reported as a write failure."""


@dataclass(frozen=True)
class Item:
    """One session to read: ``path`` as shown in the output (a local path, or ``scheme://…``
    for an object); ``key`` the path inside ``fs`` (None: a local file read with
    :meth:`Session.open`); ``fs`` a ``pyarrow.fs.FileSystem`` or fsspec filesystem (picklable,
    so Ray tasks can read the object themselves)."""

    path: str
    key: str | None = None
    fs: FileSystemArg | None = None


def _scheme_prefix(url: str) -> str:
    head = url.split("://", 1)[0]
    return f"{head}://"


def _resolve_url(url: str, filesystem: Any) -> list[Item]:
    """Objects under ``url`` (a prefix or one object) through pyarrow.fs or fsspec."""
    return [it for it, _ in _resolve_url_infos(url, filesystem)]


def _resolve_url_infos(url: str, filesystem: Any) -> list[tuple[Item, Any]]:
    """:func:`_resolve_url`, each item with what the listing said of it (a pyarrow
    ``FileInfo``, an fsspec info dict, or None when the object was named by its exact key and
    not listed)."""
    base = url.split("?", 1)[0]
    if filesystem is None:
        from pyarrow import fs as pafs

        filesystem, root = pafs.FileSystem.from_uri(url)
    else:
        root = base.split("://", 1)[1] if "://" in base else base
    prefix = _scheme_prefix(base)
    if _is_fsspec(filesystem):
        if filesystem.isdir(root):
            found = filesystem.find(root, detail=True)
            keys = sorted(k for k in found if k.endswith(".jsonl"))
            infos = [found[k] for k in keys]
        else:
            keys, infos = [root], [None]
        return [
            (Item(prefix + k.lstrip("/") if not k.startswith(prefix) else k, k, filesystem), i)
            for k, i in zip(keys, infos)
        ]
    from pyarrow import fs as pafs

    if any(seg in ("", ".", "..") for seg in root.split("/")[1:-1]) or root.endswith(("/.", "/..")):
        return [
            (Item(prefix + root, root, filesystem), None)
        ]  # one object by its exact key (pyarrow would normalise it)
    info = filesystem.get_file_info(root)
    if info.type == pafs.FileType.Directory:
        sel = pafs.FileSelector(root.rstrip("/"), recursive=True)
        listed = sorted(
            (i.path, i)
            for i in filesystem.get_file_info(sel)
            if i.path.endswith(".jsonl") and i.type != pafs.FileType.Directory
        )
        return [(Item(prefix + k, k, filesystem), i) for k, i in listed]
    return [(Item(prefix + root, root, filesystem), info if info.type == pafs.FileType.File else None)]


@dataclass(frozen=True)
class ObjectStat:
    """What a listing says of an object: ``size`` in bytes, ``mtime_ns`` (ns since the
    epoch; S3 gives whole seconds), ``etag`` (None when the listing has none: pyarrow's)."""

    size: int
    mtime_ns: int
    etag: str | None = None


def info_stat(info: Any) -> ObjectStat | None:
    """An :class:`ObjectStat` from a pyarrow ``FileInfo`` or an fsspec info dict (None when
    it names no file, or lacks a size)."""
    if info is None:
        return None
    if isinstance(info, dict):
        size = info.get("size")
        if not isinstance(size, int) or info.get("type") == "directory":
            return None
        t: Any = info.get("LastModified", info.get("mtime", info.get("last_modified")))
        if t is not None and hasattr(t, "timestamp"):
            mt = int(t.timestamp() * 1e9)
        elif isinstance(t, (int, float)):
            mt = int(t * 1e9)
        else:
            mt = 0
        etag = info.get("ETag", info.get("etag"))
        return ObjectStat(size, mt, str(etag) if etag is not None else None)
    size = getattr(info, "size", None)
    if size is None:
        return None
    return ObjectStat(int(size), int(getattr(info, "mtime_ns", None) or 0), None)


def object_stats(url: str, *, filesystem: Any = None) -> list[tuple[Item, ObjectStat | None]]:
    """The objects of ``url`` (as :func:`resolve_source` lists them), each with its
    :class:`ObjectStat` from the listing (None for an object named by its exact key that is not
    there, or not listed). Raises :class:`SourceError` as :func:`resolve_source`."""
    try:
        return [(it, info_stat(i)) for it, i in _resolve_url_infos(url, filesystem)]
    except SourceError:
        raise
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {_shown(url)}: {exc}") from exc
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("botocore", "s3fs", "gcsfs", "adlfs", "aiohttp", "fsspec"):
            raise SourceError(f"cannot read {_shown(url)}: {type(exc).__name__}: {exc}") from exc
        raise


def _listed(url: str, filesystem: Any) -> list[Item]:
    """:func:`_resolve_url`, its failures (pyarrow's ``OSError``/``ArrowInvalid``, fsspec's
    ``OSError``, botocore's errors) as :class:`SourceError`."""
    try:
        return _resolve_url(url, filesystem)
    except SourceError:
        raise
    except (OSError, ValueError) as exc:
        raise SourceError(f"cannot read {_shown(url)}: {exc}") from exc
    except Exception as exc:  # an fsspec backend's own errors (botocore's ClientError...)
        if type(exc).__module__.split(".")[0] in ("botocore", "s3fs", "gcsfs", "adlfs", "aiohttp", "fsspec"):
            raise SourceError(f"cannot read {_shown(url)}: {type(exc).__name__}: {exc}") from exc
        raise


def _shown(url: str) -> str:
    """A URL for a message, without its query (it may hold credentials)."""
    return url.split("?", 1)[0]


def _is_fsspec(filesystem: Any) -> bool:
    return hasattr(filesystem, "cat_file") and not hasattr(filesystem, "open_input_file")


def resolve_source(source: SourceArg, *, filesystem: FileSystemArg | None = None) -> list[Item]:
    """The items of ``source``, sorted by path (so every engine writes rows in one order).

    ``source``: a directory path, a glob (``*``, ``?``, ``[`` in it; ``**`` recurses), a path
    to one file, a URL (``s3://bucket/prefix``), or a list/tuple of any of these.
    ``filesystem``: a ``pyarrow.fs.FileSystem`` or fsspec filesystem to read URLs and keys
    with (default: ``pyarrow.fs.FileSystem.from_uri``). Raises ValueError for an empty
    source list; a directory with no sessions gives no items.
    """
    if isinstance(source, (str, os.PathLike)):
        sources: Sequence[Any] = [source]
    elif isinstance(source, Iterable):
        sources = list(source)
    else:
        raise TypeError(f"source must be a path, glob, URL or a list of them, not {type(source).__name__}")
    items: dict[str, Item] = {}
    for src in sources:
        text = os.fspath(src)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if is_url(text) and not text.startswith("file://"):
            for it in _listed(text, filesystem):
                items.setdefault(it.path, it)
            continue
        if text.startswith("file://"):
            text = text[len("file://") :]
        if filesystem is not None:
            for it in _listed(text, filesystem):
                items.setdefault(it.path, it)
            continue
        for p in local_paths(text):
            items.setdefault(p, Item(p))
    return [items[k] for k in sorted(items)]
