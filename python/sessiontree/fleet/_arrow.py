"""Arrow columns from buffers (``pa.Array.from_buffers`` over ``pa.py_buffer``), never through
``pa.array()`` on Python lists: that path imports pandas (0.5-0.8 s, more than a store of
1,000 small sessions takes to read) and builds the column value by value. The core's columns
(:meth:`sessiontree.Session.fleet_columns`) come as Arrow-layout buffers and are wrapped
without a copy; the few Python lists (one value per session) are packed with ``array``.
"""

from __future__ import annotations

from array import array
from typing import Any, Sequence

__all__ = ["validity", "from_list", "from_core", "repeated", "import_in_background", "wait_for_import"]

#: The thread importing pyarrow started by :func:`import_in_background` (None: none started),
#: and the CPU seconds it took (``time.thread_time``; -1.0 until it has finished).
_IMPORTER: Any = None
IMPORT_CPU = [-1.0]


def import_in_background() -> None:
    """Start importing ``pyarrow`` and ``pyarrow.parquet`` (and the numpy pyarrow imports when
    installed: ~0.13-0.2 s of CPU) in a thread, so that a job whose work runs in other
    processes (a pool, Ray) has them loaded by the time it builds the table: the import
    overlaps the workers' run instead of following it. Once per process; a no-op when pyarrow
    is already loaded. :func:`wait_for_import` joins the thread (the table's first use of
    pyarrow calls it). An ImportError is left for that use to raise."""
    global _IMPORTER
    import sys
    import threading

    if _IMPORTER is not None or "pyarrow.parquet" in sys.modules:
        return

    def run() -> None:
        import time

        c = time.thread_time()
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # noqa: F401
        except ImportError:  # raised again, with the install hint, where pyarrow is used
            pass
        finally:
            IMPORT_CPU[0] = time.thread_time() - c

    # not a daemon: the interpreter's exit waits for the import rather than freezing it halfway
    _IMPORTER = threading.Thread(target=run, name="sessiontree-pyarrow-import")
    _IMPORTER.start()


def wait_for_import() -> None:
    """Wait for :func:`import_in_background`'s thread, when one was started."""
    if _IMPORTER is not None:
        _IMPORTER.join()


def validity(ok: Sequence[bool]) -> tuple[bytes | None, int]:
    """(Arrow validity bitmap or None when every value is valid, null count)."""
    nulls = len(ok) - sum(1 for v in ok if v)
    if nulls == 0:
        return None, 0
    bits = bytearray((len(ok) + 7) // 8)
    for i, v in enumerate(ok):
        if v:
            bits[i >> 3] |= 1 << (i & 7)
    return bytes(bits), nulls


def _buf(pa: Any, b: Any) -> Any:
    return None if b is None else pa.py_buffer(b)


def from_list(pa: Any, typ: Any, values: Sequence[Any]) -> Any:
    """An array of ``typ`` (int64, float64, bool, string, binary, timestamp) from Python
    values (None: null). Strings must be valid UTF-8 (:func:`sessiontree.fleet.arrow_text`)."""
    n = len(values)
    valid, nulls = validity([v is not None for v in values])
    if pa.types.is_string(typ) or pa.types.is_binary(typ):
        parts = [b"" if v is None else (v.encode("utf-8") if isinstance(v, str) else bytes(v)) for v in values]
        offsets = array("i", [0])
        total = 0
        for p in parts:
            total += len(p)
            offsets.append(total)
        return pa.Array.from_buffers(
            typ, n, [_buf(pa, valid), pa.py_buffer(offsets), pa.py_buffer(b"".join(parts))], null_count=nulls
        )
    if pa.types.is_boolean(typ):
        bits, _ = validity([bool(v) for v in values])
        data = bits if bits is not None else (b"\xff" * ((n + 7) // 8))
        return pa.Array.from_buffers(typ, n, [_buf(pa, valid), pa.py_buffer(data)], null_count=nulls)
    nums: array[Any]
    if pa.types.is_floating(typ):
        nums = array("d", [0.0 if v is None else float(v) for v in values])
    else:  # int64, timestamp[ms]
        nums = array("q", [0 if v is None else int(v) for v in values])
    return pa.Array.from_buffers(typ, n, [_buf(pa, valid), pa.py_buffer(nums)], null_count=nulls)


def from_core(pa: Any, typ: Any, n: int, col: tuple[Any, ...]) -> Any:
    """An array over one of the core's column buffers ``(values or offsets, data, validity,
    null count)`` (see :meth:`sessiontree.Session.fleet_columns`), without copying."""
    values, data, valid, nulls = col
    if pa.types.is_string(typ) or pa.types.is_binary(typ):
        bufs = [_buf(pa, valid), pa.py_buffer(values), pa.py_buffer(data)]
    else:
        bufs = [_buf(pa, valid), pa.py_buffer(values)]
    return pa.Array.from_buffers(typ, n, bufs, null_count=nulls)


def repeated(pa: Any, typ: Any, value: Any, n: int) -> Any:
    """``value`` (str, bytes or None) ``n`` times, as a string or binary array."""
    if value is None:
        return pa.Array.from_buffers(
            typ,
            n,
            [pa.py_buffer(bytes((n + 7) // 8)), pa.py_buffer(bytes(4 * (n + 1))), pa.py_buffer(b"")],
            null_count=n,
        )
    b = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    offsets = array("i", range(0, (n + 1) * len(b), len(b))) if b else array("i", bytes(4 * (n + 1)))
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(b * n)], null_count=0)
