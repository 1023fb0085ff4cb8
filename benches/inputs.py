"""Generated benchmark inputs and the baselines we compare against.

Shared by the pytest-benchmark files here, ``benches/report.py`` and
``tests/perf/test_perf_ratios.py``. Nothing here is committed output: files are generated with
``tests/tools/gen_session.py`` into a cache folder on first use.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import orjson

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "tests" / "tools" / "gen_session.py"

MAX_MB = int(os.environ.get("SESSIONTREE_BENCH_MAX_MB", "50"))
SIZES = sorted({s for s in (1, 10, 100, 1024) if s <= MAX_MB} | ({MAX_MB} if MAX_MB > 1 else set()))
# the "small" session whose active path the big ones share
TAIL_MB = 10 if MAX_MB >= 40 else 2

# ==== files =====================================================================


def bench_dir() -> Path:
    d = Path(os.environ.get("SESSIONTREE_BENCH_DIR", Path(tempfile.gettempdir()) / "sessiontree-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _gen_module():
    spec = importlib.util.spec_from_file_location("_gen_session", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _generate(out: Path, *args: str) -> Path:
    if out.exists():
        return out
    tmp = out.with_name(out.name + ".tmp")
    subprocess.run([sys.executable, str(GEN), *args, "--out", str(tmp)], check=True, stderr=subprocess.DEVNULL)
    tmp.replace(out)
    return out


def session_file(mb: float, seed: int = 1) -> Path:
    """A generated session of about ``mb`` MiB (cached)."""
    return _generate(bench_dir() / f"gen-{mb:g}mb-seed{seed}.jsonl", "--megabytes", str(mb), "--seed", str(seed))


_ID_KEYS = (b'"id":"', b'"parentId":"', b'"targetId":"', b'"firstKeptEntryId":"', b'"fromId":"')


def session_with_tail(mb: float, tail_mb: float = TAIL_MB) -> Path:
    """A session of about ``mb`` MiB whose active path is exactly that of ``session_file(tail_mb)``:
    the small session's entries come last (so its leaf is the leaf), after ``mb - tail_mb``
    MiB of another conversation in a separate root whose ids are renamed so none collide."""
    if mb <= tail_mb:
        return session_file(tail_mb)
    out = bench_dir() / f"tail-{mb:g}mb-of-{tail_mb:g}mb.jsonl"
    if out.exists():
        return out
    filler = session_file(mb - tail_mb, seed=2)
    tail = session_file(tail_mb)
    tmp = out.with_name(out.name + ".tmp")
    with open(tail, "rb") as t, open(filler, "rb") as f, open(tmp, "wb") as o:
        o.write(t.readline())  # the small session's header
        f.readline()  # the filler's header is dropped
        while True:
            block = f.read(16 << 20)
            if not block:
                break
            block += f.readline()
            for k in _ID_KEYS:
                block = block.replace(k, k + b"f-")
            o.write(block)
        while True:
            block = t.read(16 << 20)
            if not block:
                break
            o.write(block)
    tmp.replace(out)
    return out


#: Entries of the fixed tail appended after the compaction (message entries of a small session).
MAIN_JOB_TAIL_ENTRIES = 280


def _main_job_tail() -> list:
    """The fixed tail: the first MAIN_JOB_TAIL_ENTRIES message entries on the active branch of
    a small generated session (seed 77), as message dicts, in order."""
    from sessiontree import Session

    small = Session.open(session_file(1, seed=77))
    messages = [e["message"] for e in small.get_branch() if e.type == "message"]
    return messages[:MAIN_JOB_TAIL_ENTRIES]


def compacted_with_tail(mb: float, odd: str | None = None) -> Path:
    """The main job's input: a generated session of about ``mb`` MiB of history, then one
    compaction that keeps nothing before it (its ``firstKeptEntryId`` is its own id) and the
    fixed tail (:func:`_main_job_tail`). The context, the cut search and the summarized span
    are the same at every size; only the history before the compaction grows. Cached.

    ``odd`` gives the compaction a ``firstKeptEntryId`` Pi never writes (files get edited), with
    the same context (Pi keeps nothing before the compaction then either): ``"off_path"`` names
    an entry that is not on the path before it (a side entry branched off the first one),
    ``"missing"`` names no entry."""
    from sessiontree import Session

    suffix = f"-{odd}" if odd else ""
    out = bench_dir() / f"main-job-{mb:g}mb{suffix}.jsonl"
    if out.exists():
        return out
    tmp = out.with_name(out.name + ".tmp")
    history = session_file(mb)
    with open(history, "rb") as src, open(tmp, "wb") as dst:
        while block := src.read(16 << 20):
            dst.write(block)
    s = Session.open(tmp, durability="none")
    first_kept = None
    if odd == "off_path":
        leaf = s.leaf_id
        s.branch(s.get_branch()[0].id)
        first_kept = s.append_custom_entry("side", {"n": 1})
        s.branch(leaf)
    elif odd is not None and odd != "missing":
        raise ValueError(f"odd must be None, 'off_path' or 'missing', not {odd!r}")
    if odd == "missing":
        # (append_compaction refuses an id that names no entry: the line is written as an
        # editor would leave it)
        leaf = s.leaf_id
        s.close()
        line = {
            "type": "compaction",
            "id": "0dd0c0de",
            "parentId": leaf,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "summary": "The earlier history, summarized.",
            "firstKeptEntryId": "no-such-entry",
            "tokensBefore": 150000,
        }
        with open(tmp, "ab") as f:
            f.write(orjson.dumps(line) + b"\n")
        s = Session.open(tmp, durability="none")
    else:
        s.append_compaction("The earlier history, summarized.", first_kept, 150000)
    for message in _main_job_tail():
        s.append_message(message)
    s.close()
    tmp.replace(out)
    return out


def sessions_dir(count: int, entries: int) -> Path:
    """A folder of ``count`` generated sessions of ``entries`` entries each (cached)."""
    d = bench_dir() / f"dir-{count}x{entries}"
    done = d / ".done"
    if done.exists():
        return d
    d.mkdir(exist_ok=True)
    gen = _gen_module()
    for i in range(count):
        ts = f"2026-01-{1 + i % 28:02d}T{i % 24:02d}-00-00-000Z"
        gen.main(["--entries", str(entries), "--seed", str(100 + i), "--out", str(d / f"{ts}_sess{i:05d}.jsonl")])
    done.touch()
    return d


# ==== baselines ====================================================================


def orjson_loader(path: Path) -> dict:
    """The naive loader we compare against: orjson.loads every line, a dict by id."""
    by_id = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                entry = orjson.loads(line)
                by_id[entry.get("id")] = entry
    return by_id


def orjson_loader_gc_off(path: Path) -> dict:
    gc.disable()
    try:
        return orjson_loader(path)
    finally:
        gc.enable()


def wc_l(path: Path) -> int:
    out = subprocess.run(["wc", "-l", str(path)], check=True, capture_output=True).stdout
    return int(out.split()[0])


def line_count(path: Path) -> int:
    """Counting newlines in 1 MiB reads (bytes.count is memchr-based): `wc -l` in-process."""
    n = 0
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while k := f.readinto(buf):
            n += view[:k].tobytes().count(b"\n") if k < len(buf) else buf.count(b"\n")
    return n


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Minimum wall time of ``repeat`` calls (the least disturbed run on a shared machine)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def best_pair(
    a: Callable[[], object], b: Callable[[], object], rounds: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float]:
    """Minimum times of ``a`` and ``b``, run alternately so both see the same machine.

    ``clock`` is wall time by default (the benchmark figures); the CI ratio tests pass
    ``time.process_time`` (CPU seconds of the process, all its threads), which other jobs on a
    shared machine do not inflate."""
    ta = tb = float("inf")
    for _ in range(rounds):
        t = clock()
        a()
        ta = min(ta, clock() - t)
        t = clock()
        b()
        tb = min(tb, clock() - t)
    return ta, tb


_RSS = re.compile(rb"^RssAnon:\s+(\d+) kB", re.M)


def rss_anon_kib() -> int:
    with open("/proc/self/status", "rb") as f:
        m = _RSS.search(f.read())
    return int(m.group(1)) if m else 0


# ==== shapes that would expose quadratic work =====================================


def _write(path: Path, lines: list[dict]) -> Path:
    """A v3 session file with these entry lines."""
    head = {"type": "session", "version": 3, "id": "perf", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in [head, *lines]) + b"\n")
    return path


def _ts(i: int) -> str:
    return f"2026-01-01T{i // 3600000 % 24:02d}:{i // 60000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}Z"


def siblings(path: Path, n: int) -> Path:
    """One root with ``n`` children (timestamps out of order, so sorting is real work)."""
    root = {"type": "custom", "customType": "x", "id": "root", "parentId": None, "timestamp": _ts(0)}
    # timestamps out of order, so the children really get sorted
    kids = [
        {"type": "custom", "customType": "x", "id": f"k{i}", "parentId": "root", "timestamp": _ts((i * 7919) % n)}
        for i in range(n)
    ]
    return _write(path, [root, *kids])


def chain(path: Path, n: int) -> Path:
    """A chain ``n`` entries deep."""
    return _write(
        path,
        [
            {
                "type": "custom",
                "customType": "x",
                "id": f"c{i}",
                "parentId": f"c{i - 1}" if i else None,
                "timestamp": _ts(i),
            }
            for i in range(n)
        ],
    )


def labels(path: Path, n: int) -> Path:
    """A chain of ``n`` entries, each labelled by a label entry (targets half-way back)."""
    root = {"type": "custom", "customType": "x", "id": "root", "parentId": None, "timestamp": _ts(0)}
    out = [root]
    for i in range(n):
        out.append({"type": "custom", "customType": "x", "id": f"e{i}", "parentId": out[-1]["id"], "timestamp": _ts(i)})
        out.append(
            {
                "type": "label",
                "id": f"l{i}",
                "parentId": f"e{i}",
                "targetId": f"e{i // 2}",
                "label": f"mark {i}",
                "timestamp": _ts(i),
            }
        )
    return _write(path, out)


# ==== appending ===================================================================

#: The message every append benchmark appends (a typical user turn, ~330-byte line).
APPEND_MESSAGE = {
    "role": "user",
    "content": [{"type": "text", "text": "please refactor the parser " * 8}],
    "timestamp": 1769904000000,
}
#: The same line as a plain dict, for the orjson baseline.
APPEND_ENTRY = {
    "type": "message",
    "id": "0123abcd",
    "parentId": "89abcdef",
    "timestamp": "2026-02-01T00:00:00.000Z",
    "message": APPEND_MESSAGE,
}
#: Our durability modes and the baseline each is compared with.
APPEND_MODES = (("none", "buffered"), ("flush", "flush"), ("fsync", "fsync"))


def append_pair(folder: Path, durability: str, n: int):
    """Two callables appending ``n`` entries each: ``Session.append_message`` with
    ``durability``, and the baseline (``orjson.dumps`` + ``write`` on a buffered file; also
    ``flush()`` for "flush", and ``os.fsync`` for "fsync"). Returns ``(ours, baseline, close)``."""
    from sessiontree import Session

    base_mode = dict(APPEND_MODES)[durability]
    s = Session.create("/bench", session_dir=folder, durability=durability)
    s.append_message(APPEND_MESSAGE)  # the lock and header are taken before timing
    fh = open(folder / f"baseline-{durability}.jsonl", "ab")
    dumps, write, flush, fileno = orjson.dumps, fh.write, fh.flush, fh.fileno()
    msg, entry = APPEND_MESSAGE, APPEND_ENTRY

    def ours() -> None:
        append = s.append_message
        for _ in range(n):
            append(msg)

    def baseline() -> None:
        for _ in range(n):
            write(dumps(entry) + b"\n")
            if base_mode != "buffered":
                flush()
                if base_mode == "fsync":
                    os.fsync(fileno)

    def close() -> None:
        s.close()
        fh.close()

    return ours, baseline, close
