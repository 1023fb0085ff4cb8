"""Local copies of objects in storage, for the jobs that need a file (search).

Search reads a session through byte offsets (the saved index, the search index's documents, a
hit's snippet), so an object is searched through a copy on this machine: one file per object in
``<cache folder>/objects/<16 hex digits>/`` (the hash of the source URL as given, endpoint and
all), named by a hash of the object's key (a key is never a file name here: keys are
hostile), with a sidecar ``<name>.json`` recording what was copied: the object's URL, size,
mtime and ETag. Before each use every copy is checked against the listing:

* the same size, mtime and ETag (when the listing has one) as copied: the copy is used, unless
  it is *racy*: copied, or last checked, within :data:`RACY_NS` after the object's mtime (S3
  keeps whole seconds, so a replacement in that second could keep the stamp). A racy copy's
  ETag is asked again (a HEAD); the same: used (and checked now), else copied again;
* grown, with the copy's first and last 4 KiB before its end unchanged (an append, as the
  search index judges a local file): only the new bytes fetched and appended to the copy in
  place (so the index indexes only them);
* anything else (changed, replaced, new): copied again (to a new file, O_EXCL, 0600, renamed
  over the old by :func:`sessiontree.writer.atomic_write`, so a reader of the old copy keeps its bytes and the search index sees a
  replaced file and indexes it again);
* a copy whose object is no longer listed is removed (so its hits can never come back).

Folders are created 0700 and refused (no copies, no search) when they are symlinks, another
user's, or writable by others. ``index_cache=False``: copies in a temporary folder for the call.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..writer import atomic_write
from ._sources import Item, ObjectStat, SourceError, _is_fsspec, _shown

__all__ = ["Remote", "copies_of", "RACY_NS"]

#: A copy made (or checked) less than this long after the object's mtime is checked again by
#: ETag before use (the object's mtime has whole seconds).
RACY_NS = 2_000_000_000
#: Bytes per read while copying an object.
CHUNK = 4 << 20


@dataclass(frozen=True)
class Remote:
    """One object of a source: ``item`` (its URL and key, and the filesystem to read it with),
    ``stat`` what the listing said (None: not listed, e.g. named by its exact key), ``source``
    the source URL as given (its copies' folder)."""

    item: Item
    stat: ObjectStat | None
    source: str


def _h(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def store_folder(root: str, source: str) -> str:
    """The copies' folder of ``source`` under the cache folder ``root``."""
    return os.path.join(root, "objects", _h(source))


def _own_folder(d: str) -> bool:
    """Creates ``d`` (0700, parents too) and says whether it is a real folder of ours that
    others cannot write."""
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st = os.lstat(d)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _read_side(path: str) -> dict[str, Any] | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            doc = json.loads(f.read(1 << 16))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _write_atomic(path: str, chunks: Any) -> None:
    """Writes ``chunks`` (an iterable of bytes) to ``path`` through
    :func:`sessiontree.writer.atomic_write`: a new temp file (``O_EXCL | O_NOFOLLOW``, 0600)
    beside it, renamed over it; never through a symbolic link at ``path``. Mode 0600 whatever
    the umask; no fsync (a copy is checked against its sidecar before each use and copied
    again when lost)."""
    atomic_write(path, chunks, mode=0o600, fsync=False)


def _head(r: Remote) -> tuple[str | None, int | None, int | None]:
    """(ETag, size, mtime ns) of the object now; Nones where the store does not say."""
    fs: Any = r.item.fs  # pyarrow's or fsspec's: told apart by what it has
    key: Any = r.item.key
    if _is_fsspec(fs):
        from ._sources import info_stat

        st = info_stat(fs.info(key))
        return (st.etag, st.size, st.mtime_ns) if st else (None, None, None)
    with fs.open_input_file(key) as f:
        meta = f.metadata()
        size = f.size()
    return _meta_etag(meta), size, _meta_mtime(meta)


def _meta_etag(meta: Any) -> str | None:
    v = meta.get("ETag") or meta.get(b"ETag") if isinstance(meta, dict) else None
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return v


def _meta_mtime(meta: Any) -> int | None:
    v = meta.get("Last-Modified") if isinstance(meta, dict) else None
    if isinstance(v, bytes):
        v = v.decode("ascii", "replace")
    if not v:
        return None
    import datetime as _dt

    try:
        t = _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp()) * 1_000_000_000


def _fetch(r: Remote, path: str) -> dict[str, Any]:
    """Copies the object to ``path``; returns the sidecar (what was copied)."""
    fs: Any = r.item.fs  # pyarrow's or fsspec's: told apart by what it has
    key: Any = r.item.key
    size = 0
    etag = mtime = None
    if _is_fsspec(fs):
        f = fs.open(key, "rb")
    else:
        f = fs.open_input_stream(key)
        meta = f.metadata()
        etag, mtime = _meta_etag(meta), _meta_mtime(meta)
    with f:

        def chunks() -> Any:
            nonlocal size
            while True:
                b = f.read(CHUNK)
                if not b:
                    return
                size += len(b)
                yield b

        _write_atomic(path, chunks())
    if _is_fsspec(fs) or etag is None:
        etag = r.stat.etag if r.stat else etag
    if mtime is None and r.stat is not None:
        mtime = r.stat.mtime_ns
    return {"url": r.item.path, "size": size, "mtime_ns": mtime or 0, "etag": etag, "checked_ns": time.time_ns()}


#: Bytes compared at each end of a copy before only an object's new bytes are fetched.
FP_BLOCK = 4096


def _grow(r: Remote, side: dict[str, Any], copy: str) -> dict[str, Any] | None:
    """When the object grew and its first and last :data:`FP_BLOCK` bytes before the copy's end
    are the copy's (an append, as the search index judges a local file), fetches only the new
    bytes and appends them to the copy in place (so the index indexes only them); returns the
    new sidecar. None (copy the whole object) otherwise, or for an fsspec filesystem. The copy
    is locked (``flock``) while it grows, and its size checked again under the lock, so two
    processes never append the same bytes twice."""
    import fcntl

    st = r.stat
    fs: Any = r.item.fs  # pyarrow's or fsspec's (fsspec: no in-place growth, None below)
    key: Any = r.item.key
    old = side.get("size")
    if st is None or _is_fsspec(fs) or not isinstance(old, int) or old <= 0 or st.size <= old:
        return None
    fd = os.open(copy, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size != old:
            return None
        with fs.open_input_file(key) as f:
            meta = f.metadata()
            size = f.size()
            if size <= old:
                return None
            for at in sorted({0, max(0, old - FP_BLOCK)}):
                n = min(FP_BLOCK, old - at)
                if f.read_at(n, at) != os.pread(fd, n, at):
                    return None
            at = old
            while at < size:
                b = f.read_at(min(CHUNK, size - at), at)
                if not b:
                    return None
                os.write(fd, b)
                at += len(b)
        return {
            "url": r.item.path,
            "size": size,
            "mtime_ns": _meta_mtime(meta) or st.mtime_ns,
            "etag": _meta_etag(meta),
            "checked_ns": time.time_ns(),
        }
    finally:
        os.close(fd)  # (releases the lock)


def _usable(r: Remote, side: dict[str, Any] | None, copy: str) -> bool:
    """Whether the copy (with its sidecar ``side``) is the object the listing names."""
    st = r.stat
    if side is None or st is None or side.get("url") != r.item.path:
        return False
    try:
        if os.stat(copy).st_size != side.get("size"):
            return False
    except OSError:
        return False
    if (side.get("size"), side.get("mtime_ns")) != (st.size, st.mtime_ns):
        return False
    if st.etag is not None and side.get("etag") not in (None, st.etag):
        return False
    return True


def copies_of(remotes: Sequence[Remote], root: str) -> dict[str, str]:
    """Brings the copies of ``remotes`` under the cache folder ``root`` up to date (see the
    module docs); returns {copy path: object URL} for the objects copied (an object deleted
    since the listing has none: it is not searched). Copies of objects no longer listed by a
    source named here are removed. Raises :class:`SourceError` for an object that cannot be
    read (access denied, a refused connection) and for a copies' folder that is refused."""
    out: dict[str, str] = {}
    by_source: dict[str, list[Remote]] = {}
    for r in remotes:
        by_source.setdefault(r.source, []).append(r)
    for source, rs in by_source.items():
        d = store_folder(root, source)
        if not _own_folder(d):
            raise SourceError(
                f"cannot keep copies of {_shown(source)} in {d}: not a folder of ours that only we can write"
            )
        keep: set[str] = set()
        for r in rs:
            name = _h(r.item.key or r.item.path)
            copy, side_path = os.path.join(d, name + ".jsonl"), os.path.join(d, name + ".json")
            keep.update((name + ".jsonl", name + ".json"))
            side = _read_side(side_path)
            try:
                if _usable(r, side, copy):
                    assert side is not None and r.stat is not None
                    if side.get("checked_ns", 0) < r.stat.mtime_ns + RACY_NS:
                        etag, size, mtime = _head(r)
                        if etag is None or etag != side.get("etag") or size != side.get("size"):
                            side = None
                        else:
                            side["checked_ns"] = time.time_ns()
                            _write_atomic(side_path, [json.dumps(side).encode()])
                    if side is not None:
                        out[copy] = r.item.path
                        continue
                if r.stat is None and r.item.fs is not None and side is not None:
                    # named by its exact key (not listed): ask for its stamp
                    etag, size, mtime = _head(r)
                    if etag is not None and etag == side.get("etag") and size == side.get("size"):
                        out[copy] = r.item.path
                        continue
                grown = _grow(r, side, copy) if side is not None else None
                side = grown if grown is not None else _fetch(r, copy)
                _write_atomic(side_path, [json.dumps(side).encode()])
                out[copy] = r.item.path
            except FileNotFoundError:  # deleted since the listing: never searched
                _remove(d, name)
            except SourceError:
                raise
            except (OSError, ValueError) as exc:  # unreadable: an error, never fewer hits in silence
                raise SourceError(f"cannot read {r.item.path}: {exc}") from exc
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n not in keep and (n.endswith((".jsonl", ".json", ".tmp"))):
                if n.endswith(".tmp") and _young(os.path.join(d, n)):
                    continue  # another process's copy under way
                try:
                    os.unlink(os.path.join(d, n))
                except OSError:
                    pass
    return out


def _young(path: str) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime < 3600
    except OSError:
        return False


def _remove(d: str, name: str) -> None:
    for ext in (".jsonl", ".json"):
        try:
            os.unlink(os.path.join(d, name + ext))
        except OSError:
            pass


def shown(url: str) -> str:
    """A source URL without its query (it may hold credentials)."""
    return _shown(url)
