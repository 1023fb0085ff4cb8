"""Bulk compaction: every session of a store that needs it, compacted once, with a bounded
number of concurrent summary calls, resumable after a kill.

Per session (``compact_one``): open it; under the writer lock (held from the check to the
append, so two runs can never both compact one file), index what others appended, then skip
it when the leaf is already a ``compaction`` or the context is not over the threshold (Pi's
``shouldCompact``); otherwise compact it through the public :meth:`Session.compact` path
(``reason="threshold"``) and record the summary's usage and cost. Every finished session
appends one JSON line to the outcomes file (flushed and fsynced), so a rerun with the same
``outcomes`` skips what is done; a session killed between its append and its outcome line is
found compacted at its leaf on the rerun and skipped: none gets two.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Iterable

from ..index_cache import IndexCache

from ..errors import SessionError, SessionFormatError, SessionLockedError, SessionTreeError
from ..session import Session
from ..settings import CompactionSettings
from ._rows import Options, _num, context_estimate
from ._sources import SourceArg, resolve_source
from ..summarizers.base import Summarizer

#: Outcomes after which a rerun with the same outcomes file does not look at the session
#: again: only a finished compaction. Everything else (under the threshold, nothing to compact,
#: not a session...) depends on the file and the run's settings, so a rerun decides again.
FINAL = ("compacted",)

OUTCOME_FIELDS = (
    "path",
    "path_bytes",
    "session_id",
    "outcome",
    "detail",
    "context_tokens",
    "tokens_before",
    "estimated_tokens_after",
    "compaction_entry_id",
    "first_kept_entry_id",
    "summarizer",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "total_tokens",
    "cost",
    "started",
    "finished",
)


def outcomes_schema() -> Any:
    """Arrow schema of the outcomes table (one row per session handled).

    ``outcome``: ``compacted`` (one compaction appended: the row is the cost-ledger row of its
    summary: ``input_tokens`` … ``total_tokens`` and ``cost`` in dollars, null when the
    summarizer's price is unknown), ``already_compacted`` (the leaf is a compaction),
    ``under_threshold`` (``context_tokens`` ≤ window − reserve), ``nothing_to_compact``
    (Pi's "session too small"), ``locked`` (another writer holds the file), ``not_a_session``,
    ``not_a_file``, ``empty`` (an empty file: nothing to compact, nothing written), ``interrupted``
    (the run was stopped before this session's summary was asked for), ``summarizer_error`` or
    ``error`` (``detail`` says what). Times are UTC ms. ``path`` is text and ``path_bytes`` the
    name's exact bytes, as in :func:`sessiontree.fleet.stats_schema` (in the JSON-lines file,
    ``path_bytes`` is their hex).

    The table's schema metadata ``sessiontree.skipped`` is a JSON object: how many sessions of
    the source this run skipped, by the outcome an earlier run recorded (only ``compacted``).
    """
    import pyarrow as pa

    s, f64, i64 = pa.string(), pa.float64(), pa.int64()
    ts = pa.timestamp("ms", tz="UTC")
    types = {
        "path_bytes": pa.binary(),
        "context_tokens": f64,
        "tokens_before": f64,
        "estimated_tokens_after": f64,
        "input_tokens": i64,
        "output_tokens": i64,
        "cache_read_tokens": i64,
        "cache_write_tokens": i64,
        "total_tokens": i64,
        "cost": f64,
        "started": ts,
        "finished": ts,
    }
    return pa.schema([(name, types.get(name, s)) for name in OUTCOME_FIELDS])


class CompactOptions:
    """What :func:`compact_one` needs besides the path (picklable)."""

    def __init__(
        self,
        context_window: int,
        settings: CompactionSettings | None = None,
        lock_timeout: float | None = None,
        max_tokens: int | None = None,
        custom_instructions: str | None = None,
        index_cache: IndexCache = None,
    ):
        self.context_window = int(context_window)
        self.settings = settings or CompactionSettings()
        self.lock_timeout = lock_timeout
        self.max_tokens = max_tokens
        self.custom_instructions = custom_instructions
        self.index_cache = index_cache


class Interrupted(SessionTreeError):
    """The run was interrupted (SIGINT/SIGTERM) before this summary request was sent."""


def _is_offline(summarizer: Any) -> bool:
    from ..summarizers import OfflineSummarizer

    if isinstance(summarizer, BoundedSummarizer):
        summarizer = summarizer._inner
    return summarizer is None or isinstance(summarizer, OfflineSummarizer)


class BoundedSummarizer:
    """``summarizer`` with at most ``limit`` :meth:`summarize` calls in flight across every
    thread and event loop of the process (a compaction with a split turn makes two calls at
    once: the bound is on calls, not sessions). Waiting never blocks an event loop."""

    def __init__(self, summarizer: Any, limit: int, stop: threading.Event | None = None):
        self._inner = summarizer
        self.limit = max(1, int(limit))
        self._sem = threading.BoundedSemaphore(self.limit)
        self.name = getattr(summarizer, "name", type(summarizer).__name__)
        #: set when the run is interrupted: calls not yet sent are refused (:class:`Interrupted`)
        self.stop = stop

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def summarize(self, request: Any) -> Any:
        import asyncio

        delay = 0.002
        while not self._sem.acquire(blocking=False):
            if self.stop is not None and self.stop.is_set():
                raise Interrupted("interrupted before the summary request was sent")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            if self.stop is not None and self.stop.is_set():
                raise Interrupted("interrupted before the summary request was sent")
            return await self._inner.summarize(request)
        finally:
            self._sem.release()

    def __getstate__(self) -> dict[str, Any]:  # a semaphore does not pickle: each process gets its own
        return {"inner": self._inner, "limit": self.limit}

    def __setstate__(self, state: dict[str, Any]) -> None:
        BoundedSummarizer.__init__(self, state["inner"], state["limit"])


def compact_one(
    path: str, summarizer: Any, opts: CompactOptions, stop: threading.Event | None = None
) -> dict[str, Any]:
    """Handle one session file; returns its outcome row (never raises for a bad file).

    ``stop`` (set on SIGINT/SIGTERM): checked before the lock and again before the summary is
    asked for; a session stopped there is ``interrupted`` and its file untouched. A summary
    request already sent is finished and its compaction appended (its cost is recorded)."""
    from ..orchestration import AlreadyCompactedError, NothingToCompactError
    from ..summarizers import SummarizerError

    row: dict[str, Any] = {"path": path, "started": time.time() * 1000}

    def done(outcome: str, detail: str | None = None) -> dict[str, Any]:
        row["outcome"] = outcome
        row["detail"] = detail
        row["finished"] = time.time() * 1000
        return row

    if not os.path.isfile(path):
        return done(
            "not_a_file" if os.path.exists(path) else "error",
            f"{path}: not a regular file" if os.path.exists(path) else f"{path}: no such file",
        )
    if stop is not None and stop.is_set():
        return done("interrupted", "the run was interrupted before this session")
    try:
        s = Session.open(path, lock_timeout=opts.lock_timeout, index_cache=getattr(opts, "index_cache", None))
    except SessionFormatError as exc:
        return done("not_a_session", str(exc))
    except (OSError, SessionError) as exc:
        return done("error", str(exc))
    try:
        if s.file_header is None:  # Pi would write a new header (random id, "now") into it
            return done("empty", f"{path}: empty file (no session header): nothing written")
        row["session_id"] = s.session_id if isinstance(s.session_id, str) else None
        sopts = Options(opts.context_window, opts.settings, index_cache=getattr(opts, "index_cache", None))

        def not_needed() -> dict[str, Any] | None:
            """The outcome row when this session needs no compaction now, else None."""
            leaf = s.leaf_entry
            if leaf is not None and leaf.type == "compaction":
                return done("already_compacted")
            tokens, should, err = context_estimate(s, sopts)
            row["context_tokens"] = _num(tokens)
            if err is not None:
                return done("error", err)
            return None if should else done("under_threshold")

        # cheap answers first, without the lock
        if (outcome := not_needed()) is not None:
            return outcome
        # the writer lock from here to the append: index what others appended, decide again
        s.lock()
        if (outcome := not_needed()) is not None:
            return outcome
        if stop is not None and stop.is_set():
            return done("interrupted", "the run was interrupted before this session's summary was asked for")
        # the output-budget rules (window - 4096 - input) are a model's: the offline summarizer
        # has no window and no output limit, so it is never held to the conversation model's
        offline = _is_offline(summarizer)
        result = s.compact(
            summarizer,
            settings=opts.settings,
            reason="threshold",
            custom_instructions=opts.custom_instructions,
            context_window=None if offline else opts.context_window,
            max_tokens=None if offline else opts.max_tokens,
        )
        s.flush()
        row["tokens_before"] = _num(result.tokens_before)
        row["estimated_tokens_after"] = _num(result.estimated_tokens_after)
        row["compaction_entry_id"] = result.entry.id
        row["first_kept_entry_id"] = result.first_kept_entry_id
        row["summarizer"] = getattr(summarizer, "name", None) or type(summarizer).__name__
        if isinstance(summarizer, BoundedSummarizer):
            summarizer = summarizer._inner
        raw = result.entry.raw if isinstance(result.entry.raw, dict) else {}
        model = raw.get("model") if isinstance(raw.get("model"), str) else getattr(summarizer, "model", None)
        row["model"] = model if isinstance(model, str) else None
        u = result.usage
        if u is not None:
            row.update(
                input_tokens=u.input,
                output_tokens=u.output,
                cache_read_tokens=u.cache_read,
                cache_write_tokens=u.cache_write,
                total_tokens=u.total_tokens,
                cost=_num((u.cost or {}).get("total")) if u.cost else None,
            )
        return done("compacted")
    except AlreadyCompactedError as exc:
        return done("already_compacted", str(exc))
    except NothingToCompactError as exc:
        return done("nothing_to_compact", str(exc))
    except SessionLockedError as exc:
        return done("locked", str(exc))
    except Interrupted as exc:
        return done("interrupted", str(exc))
    except SummarizerError as exc:
        if stop is not None and stop.is_set() and isinstance(exc.__cause__, Interrupted):
            return done("interrupted", str(exc.__cause__))
        return done("summarizer_error", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # never fail the whole run for one session
        if stop is not None and stop.is_set() and isinstance(exc.__cause__, Interrupted):
            return done("interrupted", str(exc.__cause__))
        return done("error", f"{type(exc).__name__}: {exc}")
    finally:
        try:
            s.close()
        except Exception:
            pass


class _Ledger:
    """The outcomes file: one JSON object per line, appended, flushed and fsynced per row."""

    def __init__(self, path: str | os.PathLike[str] | None):
        self.path = os.fspath(path) if path is not None else None
        self.lock = threading.Lock()
        self.previous: list[dict[str, Any]] = []
        self.fh = None
        if self.path is None:
            return
        if os.path.exists(self.path):
            with open(self.path, "rb") as fh:
                data = fh.read()
            for line in data.split(b"\n"):
                try:
                    v = json.loads(line)
                except ValueError:
                    continue  # a torn last line from a killed run
                if isinstance(v, dict) and isinstance(v.get("path"), str):
                    self.previous.append(v)
            if data and not data.endswith(b"\n"):
                with open(self.path, "ab") as fh:  # never glue a row to a torn one
                    fh.write(b"\n")
        self.fh = open(self.path, "ab")

    def done(self) -> dict[bytes, str]:
        """``{path bytes: outcome}`` of the sessions an earlier run finished (:data:`FINAL`),
        matched by the name's exact bytes (``path_bytes``; rows written before it existed: the
        ``path`` text)."""
        out: dict[bytes, str] = {}
        for r in self.previous:
            if r.get("outcome") not in FINAL:
                continue
            key = None
            if isinstance(r.get("path_bytes"), str):
                try:
                    key = bytes.fromhex(r["path_bytes"])
                except ValueError:
                    key = None
            out[key if key is not None else os.fsencode(r["path"])] = r["outcome"]
        return out

    def write(self, row: dict[str, Any]) -> None:
        if self.fh is None:
            return
        from . import arrow_text, path_text

        rec = {k: arrow_text(row.get(k)) for k in OUTCOME_FIELDS}
        rec["path"] = path_text(row["path"])
        rec["path_bytes"] = os.fsencode(row["path"]).hex()
        line = json.dumps(rec, ensure_ascii=False).encode() + b"\n"
        with self.lock:
            self.fh.write(line)
            self.fh.flush()
            os.fsync(self.fh.fileno())

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def _table(rows: Iterable[dict[str, Any]], skipped: dict[str, int] | None = None) -> Any:
    import pyarrow as pa

    from . import arrow_text, path_text

    schema = outcomes_schema()
    rows = list(rows)
    cols = {}
    for f in schema:
        vals: list[Any]
        if f.name == "path_bytes":
            vals = [os.fsencode(r["path"]) for r in rows]
        elif f.name == "path":
            vals = [path_text(r["path"]) for r in rows]
        else:
            vals = [r.get(f.name) for r in rows]
        if pa.types.is_timestamp(f.type):
            vals = [None if v is None else int(v) for v in vals]  # our own clock readings
        elif pa.types.is_string(f.type):
            vals = [arrow_text(v) for v in vals]
        cols[f.name] = pa.array(vals, f.type)
    meta = {b"sessiontree.skipped": json.dumps(skipped or {}, sort_keys=True).encode()}
    return pa.table(cols, schema=schema.with_metadata(meta))


def _run_local(
    paths: list[str],
    summarizer: Any,
    opts: CompactOptions,
    concurrency: int,
    ledger: _Ledger,
    progress: Callable[[int], None],
    stop: threading.Event,
) -> list[dict[str, Any]]:
    """Threads over ``paths``, a few sessions queued at a time. When ``stop`` is set (the CLI's
    SIGINT/SIGTERM handler) or a ``KeyboardInterrupt`` arrives: nothing new is started or sent,
    the sessions in flight finish (a summary already asked for is appended and recorded with
    its cost), every row is written, then :class:`RunInterrupted` is raised with the rows."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    out: list[dict[str, Any]] = []
    bounded = BoundedSummarizer(summarizer, concurrency, stop)
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    pending: set[Any] = set()
    it = iter(paths)
    limit = max(1, concurrency) * 2  # queued at once: never every session of the store

    def record(fut: Any) -> None:
        row = fut.result()
        ledger.write(row)
        out.append(row)
        progress(1)

    try:
        while True:
            try:
                while not stop.is_set() and len(pending) < limit:
                    nxt = next(it, None)
                    if nxt is None:
                        break
                    pending.add(pool.submit(compact_one, nxt, bounded, opts, stop))
                if not pending:
                    break
                finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in finished:
                    record(fut)
                if stop.is_set():
                    break
            except KeyboardInterrupt:
                stop.set()
                break
        # stopped (or done): what is in flight finishes or stops before sending; record it,
        # through further signals too
        for fut in pending:
            fut.cancel()
        while pending:
            try:
                finished, pending = wait(pending, timeout=0.2)
                for fut in finished:
                    if not fut.cancelled():
                        record(fut)
            except KeyboardInterrupt:
                continue
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if stop.is_set():
        raise RunInterrupted(out)
    return out


class RunInterrupted(SessionTreeError, KeyboardInterrupt):
    """A run stopped by SIGINT/SIGTERM after recording what was in flight; ``rows`` are the
    outcome rows of this run (also in the outcomes file), ``table`` their table once built.

    In the package's one error tree (a :class:`SessionTreeError`) and also a
    ``KeyboardInterrupt``, so ``except KeyboardInterrupt`` around a run catches it as it
    catches a Ctrl-C."""

    def __init__(self, rows: list[dict[str, Any]]):
        super().__init__("interrupted")
        self.rows = rows
        self.table: Any = None


def _run_ray(
    paths: list[str],
    summarizer: Any,
    opts: CompactOptions,
    concurrency: int,
    ledger: _Ledger,
    address: str | None,
    num_cpus: int | None,
    progress: Callable[[int], None],
    stop: threading.Event,
) -> list[dict[str, Any]]:
    from ._engine import ray_init

    ray = ray_init(address, num_cpus)
    from ray.util import ActorPool

    @ray.remote(num_cpus=0)
    class Compactor:
        """One summary call at a time per actor: ``concurrency`` actors bound the LLM calls."""

        def __init__(self, summarizer: Any, opts: CompactOptions):
            self.summarizer = BoundedSummarizer(summarizer, 1)
            self.opts = opts

        def run(self, path: str) -> dict[str, Any]:
            return compact_one(path, self.summarizer, self.opts)

    # ray.remote(...) makes an actor class; ray's typing gives the decorated class back unchanged
    actors = [Compactor.remote(summarizer, opts) for _ in range(max(1, concurrency))]  # type: ignore[attr-defined]
    pool = ActorPool(actors)
    out: list[dict[str, Any]] = []

    def call(a: Any, p: str) -> Any:
        return a.run.remote(p)

    it = iter(paths)
    try:
        # one session per actor at a time, the next submitted only as one finishes: when
        # stopped nothing is queued, and what is in flight is waited for and recorded
        for _ in range(len(actors)):
            nxt = next(it, None)
            if nxt is None:
                break
            pool.submit(call, nxt)
        while pool.has_next():  # type: ignore[no-untyped-call]
            try:
                row = pool.get_next_unordered(timeout=0.2)
            except TimeoutError:
                continue
            except KeyboardInterrupt:
                stop.set()
                continue
            ledger.write(row)
            out.append(row)
            progress(1)
            if not stop.is_set():
                nxt = next(it, None)
                if nxt is not None:
                    pool.submit(call, nxt)
    finally:
        for a in actors:
            ray.kill(a)
    if stop.is_set():
        raise RunInterrupted(out)
    return out


def compact_sessions(
    source: SourceArg,
    summarizer: Summarizer | None,
    *,
    context_window: int,
    concurrency: int = 4,
    settings: CompactionSettings | None = None,
    outcomes: str | os.PathLike[str] | None = None,
    engine: str = "local",
    address: str | None = None,
    num_cpus: int | None = None,
    lock_timeout: float | None = None,
    max_tokens: int | None = None,
    custom_instructions: str | None = None,
    parquet: str | os.PathLike[str] | None = None,
    progress: bool | Callable[[int], None] = False,
    stop: threading.Event | None = None,
    index_cache: IndexCache = None,
) -> Any:
    """Compact every session of ``source`` whose context is over Pi's threshold.

    Args:
        source: local sessions (directory, glob, path list: compaction appends to files, so
            object-store URLs are refused with ValueError).
        summarizer: a summarizer (:mod:`sessiontree.summarizers`; ``None``: the offline one).
            Under ``engine="ray"`` it is pickled to each actor.
        context_window: the conversation model's window (tokens); a session is compacted when
            its projected context tokens > ``context_window - settings.reserve_tokens``.
        concurrency: at most this many summary calls in flight at once (locally: as many
            threads, sharing one bound on calls; under ``engine="ray"``: an actor pool of this
            size, one call at a time per actor).
        outcomes: a JSON-lines file of outcome rows, appended as sessions finish; a rerun with
            the same file skips the sessions an earlier run compacted (only ``compacted`` is
            final: a session under the threshold, locked or failed is considered again, under
            the rerun's settings), and says how many in the table's ``sessiontree.skipped``
            metadata. Without it, nothing is skipped by memory, though sessions compacted at
            their leaf are found so (``already_compacted``) all the same.
        lock_timeout: seconds to wait for another writer's lock (None: record ``locked``).
        parquet: also write this run's outcomes table there.
        progress: a progress bar on stderr (``True``), or a callable given each finished row.
        stop: an event that stops the run when set (the CLI sets it on SIGINT/SIGTERM); a
            ``KeyboardInterrupt`` does the same. Stopped, nothing new is sent, the sessions
            in flight finish, every appended compaction is recorded with its cost (outcomes
            file and ``parquet``), and :class:`RunInterrupted` is raised (``rows`` and
            ``table`` on it); sessions not reached are ``interrupted`` or not in the table.
        index_cache: where sessions' saved indexes are read and written
            (:mod:`sessiontree.index_cache`; None: the caller's ``$SESSIONTREE_INDEX_CACHE`` when
            set, else each worker's default folder, on its machine).

    Returns the outcomes of this run as a ``pyarrow.Table`` (:func:`outcomes_schema`, one row
    per session handled now, in path order); rows of ``compacted`` sessions are the cost
    ledger (one row per appended summary, with its usage and cost).
    """
    from .._progress import progress_bar as _progress_bar

    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray', not {engine!r}")
    items = resolve_source(source)
    if any(it.fs is not None for it in items):
        raise ValueError("compact_sessions appends to session files: give local paths, not object URLs")
    if summarizer is None:
        from ..summarizers import OfflineSummarizer

        summarizer = OfflineSummarizer()
    from ..index_cache import for_workers

    opts = CompactOptions(
        context_window, settings, lock_timeout, max_tokens, custom_instructions, for_workers(index_cache)
    )
    ledger = _Ledger(outcomes)
    skipped: dict[str, int] = {}
    try:
        done = ledger.done()
        paths = []
        for it in items:
            why = done.get(os.fsencode(it.path))
            if why is None:
                paths.append(it.path)
            else:
                skipped[why] = skipped.get(why, 0) + 1
        stop = stop if stop is not None else threading.Event()
        bar = progress if callable(progress) else _progress_bar(len(paths), bool(progress), "sessions")
        try:
            if engine == "local":
                rows = _run_local(paths, summarizer, opts, concurrency, ledger, bar, stop)
            else:
                rows = _run_ray(paths, summarizer, opts, concurrency, ledger, address, num_cpus, bar, stop)
        except RunInterrupted as exc:
            exc.rows.sort(key=lambda r: r["path"])
            exc.table = _table(exc.rows, skipped)
            if parquet is not None:
                from . import write_parquet

                write_parquet(exc.table, parquet)
            raise
        finally:
            close = getattr(bar, "close", None)
            if close is not None:
                close()
    finally:
        ledger.close()
    rows.sort(key=lambda r: r["path"])
    table = _table(rows, skipped)
    if parquet is not None:
        from . import write_parquet

        write_parquet(table, parquet)
    return table
