"""Listing local sources: the light half of :mod:`sessiontree.fleet._sources`.

Its own module so that a command that reads only local files (``sessiontree search`` over a
folder) lists them without importing the ``fleet`` package (its columns, object-store copies
and engines). The rules are the fleet's (one home): a directory is walked for names ending in
``.jsonl`` without following symlinked directories, a glob expands (``**`` recurses), anything
else names one file.
"""

from __future__ import annotations

import os
import re

__all__ = ["is_url", "local_paths", "walk_local", "walk_local_cached"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")


def is_url(text: str) -> bool:
    """``scheme://…`` (two letters or more: a Windows drive letter is not a scheme)."""
    return _SCHEME.match(text) is not None


def walk_local(root: str, visited: list[str | None] | None = None) -> list[str]:
    """The paths under the directory ``root`` whose names end in ``.jsonl``, in walk order.

    Never follows symlinked directories (no loop can make it spin) and keeps every such name,
    whatever it is (a directory, a FIFO, a dangling or looping symlink): the reader turns each
    into its problem. A directory named like a session is a row, never descended into.
    ``visited``: when given, each directory listed is appended to it, and None for each one
    that could not be listed."""
    out: list[str] = []

    def unlisted(_exc: OSError) -> None:
        if visited is not None:
            visited.append(None)

    for dirpath, dirnames, filenames in os.walk(root, onerror=unlisted, followlinks=False):
        if visited is not None:
            visited.append(dirpath)
        for name in filenames:
            if name.endswith(".jsonl"):
                out.append(os.path.join(dirpath, name))
        for name in dirnames:
            if name.endswith(".jsonl"):  # a directory (or a symlink to one) named like a session
                out.append(os.path.join(dirpath, name))
        # never descend into directories named like sessions: they are rows, not folders
        dirnames[:] = [d for d in dirnames if not d.endswith(".jsonl")]
    return out


def local_paths(text: str) -> list[str]:
    """The paths one local source names: a glob's matches (``*``, ``?`` or ``[`` in it),
    a directory's sessions (:func:`walk_local`), else ``[text]`` (one file, or a name that is
    not one: its row says so). Unsorted."""
    if any(c in text for c in "*?["):
        import glob

        return glob.glob(text, recursive=True)
    if os.path.isdir(text) and not text.endswith(".jsonl"):
        return walk_local(text)
    return [text]


#: A directory changed this recently (ns) before a walk started is walked again next time: its
#: times may not move on a change made within the same clock tick. (Its ctime: a change of
#: its names moves it, and unlike the mtime no one can set it back.)
_SETTLED_NS = 1_000_000_000
#: The most roots whose walks are kept.
_KEEP_WALKS = 16
#: root -> (each directory listed with its (device, inode, mtime ns, ctime ns), the paths found)
_walks: dict[str, tuple[list[tuple[str, tuple[int, int, int, int]]], list[str]]] = {}


def _dir_stamp(d: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(d)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def walk_local_cached(root: str) -> list[str]:
    """:func:`walk_local`, reused while no directory it listed has changed.

    A walk's answer depends only on the names in the directories it listed (and which of
    them are directories), and adding, removing or renaming a name moves its directory's
    mtime: each listed directory is stat'ed (one call each, instead of a listing) and the walk
    is done again when any (device, inode, mtime, ctime) differs. A walk is not kept when a
    directory could not be listed (a permission may change without its parent's mtime) or had
    changed within a second of the walk's start (its mtime could then miss a change made in
    the same clock tick). Returns a new list."""
    import time

    kept = _walks.get(root)
    if kept is not None and all(_dir_stamp(d) == stamp for d, stamp in kept[0]):
        return list(kept[1])
    started = time.time_ns()
    visited: list[str | None] = []
    found = walk_local(root, visited)
    stamps = [(d, _dir_stamp(d)) for d in visited if d is not None]
    # kept only when every directory could be listed and had settled before the walk
    if len(stamps) == len(visited) and all(st is not None and st[3] < started - _SETTLED_NS for _, st in stamps):
        if len(_walks) >= _KEEP_WALKS:
            _walks.clear()
        _walks[root] = ([(d, st) for d, st in stamps if st is not None], found)
    else:
        _walks.pop(root, None)
    return list(found)
