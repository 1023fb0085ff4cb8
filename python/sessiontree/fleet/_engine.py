"""Engines: run a per-batch function over items and gather what it returns.

``local``: in this process (one worker), or in the process's long-lived pool
(:func:`worker_pool`: forkserver start, safe in a process that runs threads, with the package
imported once in the fork server (not pyarrow: see :data:`PRELOAD`); kept for the next job), items sent in batches of
about equal bytes (:func:`byte_chunks`); with ``workers=None``, the CPU count from
:data:`AUTO_POOL_MIN_BYTES` of work up, counted in bytes by :func:`work_bytes`, inline below.
``ray``: Ray tasks over bundles of items (:func:`ray_bundles`: by bytes, small files
together), a bundle of local files on this process's node, on an existing cluster
(``address``) or one started here (``ray.init``). Results come back in item order from both,
so both write the same Parquet. ``docs/fleet.md`` ("The engine interface") documents the
interface for other jobs over a store.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Sequence

from ._sources import Item

ENGINES = ("local", "ray")
#: With ``workers=None``, the local engine runs in this process below this much work, counted
#: in bytes (:func:`work_bytes`). In one process the core already reads and scans each file
#: on every core, so a pool only spreads the rows' serial Python part, and starting one
#: (forkserver, the imports in each worker) costs about a second on a busy 2-core machine:
#: there, 50 x 20 MiB ran 6.3-7.9 s in one process and 8.4-8.7 s with 2 workers, 1,000 x 50 KB
#: 1.2-1.6 s against 2.0-2.2 s (docs/benchmarks.md, Fleet).
AUTO_POOL_MIN_BYTES = 4 << 30
#: What one session costs besides its bytes (opening it, the row's serial Python part), in
#: bytes of work: 2,000 small sessions reach :data:`AUTO_POOL_MIN_BYTES`, as 4 GiB of files do.
SESSION_COST_BYTES = 2 << 20
#: The size assumed for an object in storage (not stat-ed before it is read).
OBJECT_BYTES_GUESS = 1 << 20


def _chunks(seq: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [seq[k : k + size] for k in range(0, len(seq), size)]


def item_bytes(item: Item) -> int:
    """The size of an item's file (0 when it cannot be stat-ed: its row is an error row);
    an object in storage counts :data:`OBJECT_BYTES_GUESS`."""
    if item.fs is not None:
        return OBJECT_BYTES_GUESS
    try:
        return max(0, os.stat(item.path).st_size)
    except (OSError, ValueError):
        return 0


def work_bytes(sizes: Sequence[int]) -> int:
    """The work of a job in bytes: the sessions' bytes plus :data:`SESSION_COST_BYTES` each."""
    return sum(sizes) + SESSION_COST_BYTES * len(sizes)


def byte_chunks(items: Sequence[Any], sizes: Sequence[int], parts: int, cap: int = 256 << 20) -> list[Sequence[Any]]:
    """``items`` in order, cut into runs of about ``1/parts`` of the work each
    (:func:`work_bytes`; fewer runs when one item is larger than a share), none over ``cap``
    bytes of work unless it is a single item (a session counts its bytes plus
    :data:`SESSION_COST_BYTES`). Splitting by bytes, not by count, keeps one 500 MB session from
    sharing a batch with a hundred others while a worker idles."""
    total = work_bytes(sizes)
    target = max(1, min(cap, -(-total // max(1, parts))))
    out: list[Sequence[Any]] = []
    start, acc = 0, 0
    for k, size in enumerate(sizes):
        cost = size + SESSION_COST_BYTES
        if k > start and acc + cost > target:
            out.append(items[start:k])
            start, acc = k, 0
        acc += cost
    if start < len(items):
        out.append(items[start:])
    return out


#: the one progress bar (tqdm on stderr, or a no-op): :mod:`sessiontree._progress`
from .._progress import Bar as _Bar, progress_bar as _progress_bar  # noqa: E402, F401 (_Bar re-exported)


#: Modules every pool worker has imported before its first task (the fork server imports them
#: once; each worker is a fork of it): the per-file functions. Not pyarrow (and the numpy it
#: imports: ~0.17 s of CPU): ``stats`` workers send plain columns back and never need it; a job
#: whose workers build Arrow tables (the entry table) imports it in each worker on first use.
PRELOAD = ("sessiontree.fleet", "sessiontree.fleet._rows")
#: Batches per worker of a local pool job: enough that a slow batch does not hold the job,
#: few enough that each batch is many files (its fixed cost, a task's round trip and pickled
#: result, is paid per batch).
BATCHES_PER_WORKER = 4

#: The long-lived pools of this process, by (worker count, working folder) (see
#: :func:`worker_pool`: a worker resolves relative paths against the folder it started in).
_POOLS: dict[tuple[int, str], Any] = {}
#: the readiness tasks of each pool in :data:`_POOLS` (by ``id``; see :func:`start_pool`)
_UP: dict[int, list[Any]] = {}

#: Timed phases of the last :func:`run_local` / :func:`run_ray` of this process (seconds):
#: ``engine``, ``workers``, ``tasks``, ``pool_start`` (starting the pool, 0 when reused),
#: ``busy`` (the sum over tasks of each task's own time in its worker: the parallel work),
#: ``cpu`` (the CPU seconds of those tasks, scan threads included), ``wall`` (from the first
#: submit to the last result); after :func:`sessiontree.fleet.stats_columns`, also ``saved``
#: (rows read from the index cache in the calling process) and ``dispatched`` (files sent to the
#: engine: 0 and ``workers`` 0 when every row was saved). Read by ``benches/fleet_scaling.py``.
LAST_RUN: dict[str, Any] = {}


def _worker_init(threads: int) -> None:
    """A pool worker's start: the core's scan threads capped at ``threads`` (the pool already
    runs one process per core: a worker's scan on every core would only contend), and the
    per-file modules imported (a no-op when the fork server preloaded them)."""
    os.environ["RAYON_NUM_THREADS"] = str(max(1, threads))
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # pragma: no cover - a module of an optional extra
            pass


def _ready() -> int:
    """A no-op task: returns the worker's pid (the pool is up when every worker answered)."""
    return os.getpid()


def worker_pool(workers: int) -> Any:
    """The process's long-lived pool of ``workers`` processes (made on first use, kept for the
    next job, shut down at exit): forkserver start (safe in a process that runs threads) with
    :data:`PRELOAD` imported once in the fork server, so each worker starts as a fork with the
    package loaded; each worker's core scans on ``cpu_count // workers`` threads.
    A broken pool (a worker killed) is replaced on the next call, and so is one started in
    another working folder (relative paths must name the same files)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    key = (workers, os.getcwd())
    pool = _POOLS.get(key)
    if pool is not None and not getattr(pool, "_broken", False):
        return pool
    for old_key in [k for k in _POOLS if k[0] == workers]:
        old = _POOLS.pop(old_key)
        _UP.pop(id(old), None)
        old.shutdown(wait=False, cancel_futures=True)
    ctx = multiprocessing.get_context("forkserver")
    # only takes effect when this process's fork server is not running yet
    ctx.set_forkserver_preload(list(PRELOAD))
    threads = max(1, (os.cpu_count() or 1) // max(1, workers))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init, initargs=(threads,))
    if not _POOLS:
        import atexit

        atexit.register(shutdown_pools)  # before the interpreter tears its modules down
    _POOLS[key] = pool
    return pool


def start_pool(workers: int, wait: bool = True) -> float:
    """Start (or reuse) the pool of ``workers`` processes; with ``wait``, until every worker is
    up. Returns the seconds this call took (about 0 for a pool already running, or without
    ``wait``: the start then goes on in a thread). A job calls it with ``wait=False`` before
    listing its source, so the fork server's imports overlap the caller's listing and
    imports (two cores: both at once)."""
    import time

    t = time.perf_counter()
    if not wait:
        threading.Thread(target=start_pool, args=(workers, True), daemon=True, name="sessiontree-pool-start").start()
        return time.perf_counter() - t
    with _START_LOCK:
        pool = worker_pool(workers)
        up = _UP.get(id(pool))
        if up is None:
            # (the first submit starts the fork server and waits for its imports)
            up = _UP[id(pool)] = [pool.submit(_ready) for _ in range(workers)]
    if all(f.done() for f in up):
        for f in up:
            f.result()  # (a worker that failed to start raises here)
        return 0.0
    for f in up:
        f.result()
    return time.perf_counter() - t


#: one pool start at a time (a background start and the job's own call)
_START_LOCK = threading.Lock()


def shutdown_pools() -> None:
    """Stop this process's long-lived pools (they stop at exit anyway)."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        _UP.pop(id(pool), None)
        pool.shutdown(wait=True, cancel_futures=True)


def timed_call(fn: Callable[[Any, Any], list[Any]], part: Sequence[Any], opts: Any) -> tuple[list[Any], float, float]:
    """``(fn(part, opts), seconds it took, CPU seconds of the process meanwhile)``: what a pool
    or Ray task runs (the CPU time counts the core's scan threads too)."""
    import time

    t, c = time.perf_counter(), time.process_time()
    out = fn(part, opts)
    return out, time.perf_counter() - t, time.process_time() - c


def run_local(
    fn: Callable[[Any, Any], list[Any]],
    items: Sequence[Any],
    opts: Any,
    *,
    workers: int | None = None,
    chunk: int = 0,
    progress: bool | Callable[[int], None] = False,
    sizes: Sequence[int] | None = None,
    auto_min_bytes: int = AUTO_POOL_MIN_BYTES,
    on_rows: Callable[[list[Any]], None] | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> list[Any]:
    """``fn(batch_of_items, opts)`` over batches of ``items``; the lists it returns
    concatenated in item order.

    ``while_waiting``: called once the batches are handed to the pool's workers, before this
    process waits for them (never when the work runs in this process), so that it can prepare
    what comes next meanwhile (e.g. start importing pyarrow in a thread); it must return soon.

    ``on_rows``: called with each batch's list as soon as it and every batch before it have
    finished (in item order), so a caller can print rows while later sessions still run; in
    this process each item is then a batch of its own.

    ``items``: :class:`~sessiontree.fleet.Item` (their sizes stat-ed here) or anything
    picklable with ``sizes`` given (bytes of work per item). ``progress``: a bar on stderr
    when true, or a callable given the number of items each finished batch held.
    ``workers`` (None: the CPU count from ``auto_min_bytes`` of work up, else 1): with
    1 (or fewer than 2 items), in this process, batches of at most 128 MiB; else in the
    long-lived pool (:func:`worker_pool`), in :data:`BATCHES_PER_WORKER` batches per worker of
    about equal bytes (:func:`byte_chunks`; ``chunk``: that many items per batch instead).
    ``fn`` must be a module-level function (it is pickled to the workers), and so must what it
    returns. The timed phases go to :data:`LAST_RUN`."""
    import time

    sizes = [item_bytes(it) for it in items] if sizes is None else list(sizes)
    if workers is None:
        # starting a pool (forkserver, imports in each worker) costs about a second on a busy
        # 2-core machine: worth it only for work large enough to amortize it, in bytes
        workers = (os.cpu_count() or 1) if work_bytes(sizes) >= auto_min_bytes else 1
    tick = progress if callable(progress) else _progress_bar(len(items), bool(progress))
    t0 = time.perf_counter()
    if workers <= 1 or len(items) < 2:
        out: list[Any] = []
        busy = cpu = 0.0
        parts = byte_chunks(items, sizes, 1, cap=128 << 20) if on_rows is None else [[it] for it in items]
        for part in parts:
            rows, took, used = timed_call(fn, part, opts)
            out.extend(rows)
            if on_rows is not None:
                on_rows(rows)
            busy += took
            cpu += used
            tick(len(part))
        LAST_RUN.clear()
        LAST_RUN.update(
            engine="local",
            workers=1,
            tasks=len(parts),
            pool_start=0.0,
            busy=busy,
            cpu=cpu,
            wall=time.perf_counter() - t0,
        )
        return out
    started = start_pool(workers)
    pool = worker_pool(workers)
    # batches of about equal bytes, several per worker (a slow one does not hold the job)
    parts = _chunks(items, chunk) if chunk else byte_chunks(items, sizes, workers * BATCHES_PER_WORKER)
    t1 = time.perf_counter()
    futures = [pool.submit(timed_call, fn, part, opts) for part in parts]
    if while_waiting is not None:
        while_waiting()
    out = []
    busy = cpu = 0.0
    try:
        for part, fut in zip(parts, futures):
            rows, took, used = fut.result()
            out.extend(rows)
            if on_rows is not None:
                on_rows(rows)
            busy += took
            cpu += used
            tick(len(part))
    except BaseException:
        for fut in futures:
            fut.cancel()
        if getattr(pool, "_broken", False):
            _UP.pop(id(_POOLS.pop((workers, os.getcwd()), None)), None)
        raise
    LAST_RUN.clear()
    LAST_RUN.update(
        engine="local",
        workers=workers,
        tasks=len(parts),
        pool_start=started,
        busy=busy,
        cpu=cpu,
        wall=time.perf_counter() - t1,
    )
    return out


def ray_init(address: str | None, num_cpus: int | None) -> Any:
    """``ray`` connected to ``address`` (None: the cluster in ``$RAY_ADDRESS`` or a new local
    one with ``num_cpus``). An existing connection is reused."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "engine='ray' needs Ray: pip install 'sessiontree[fleet]' (from a source checkout: pip install '.[fleet]')"
        ) from exc
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        ray.init(**kwargs)
    return ray


#: A Ray bundle holds at least this much work, in bytes (:func:`work_bytes`): a task's fixed
#: cost (submit, schedule, the pickled result back; ~1-3 ms on a local cluster) stays under
#: 10% of its work, whatever the files' sizes (16 small sessions, or one 10 MB file).
RAY_MIN_BUNDLE_BYTES = 32 << 20
#: ... and at most this much (a large file is a bundle of its own).
RAY_MAX_BUNDLE_BYTES = 256 << 20

_RAY_TASK: Any = None


def ray_bundles(
    items: Sequence[Any], sizes: Sequence[int], cpus: int, batch_size: int | None = None
) -> list[Sequence[Any]]:
    """``items`` in order, cut into Ray bundles: about four per CPU of the cluster, each of
    :data:`RAY_MIN_BUNDLE_BYTES` to :data:`RAY_MAX_BUNDLE_BYTES` of work (:func:`work_bytes`;
    a larger single item alone), at most ``batch_size`` items each when given."""
    total = work_bytes(sizes)
    target = min(RAY_MAX_BUNDLE_BYTES, max(RAY_MIN_BUNDLE_BYTES, -(-total // max(1, cpus * 4))))
    parts = byte_chunks(items, sizes, max(1, -(-total // target)), cap=target)
    if batch_size:
        parts = [p[k : k + batch_size] for p in parts for k in range(0, len(p), batch_size)]
    return parts


def _ray_task(ray: Any) -> Any:
    global _RAY_TASK
    if _RAY_TASK is None:
        _RAY_TASK = ray.remote(num_cpus=1)(timed_call)
    return _RAY_TASK


def run_ray(
    fn: Callable[[Sequence[Item], Any], list[Any]],
    items: Sequence[Item],
    opts: Any,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    batch_size: int | None = None,
    concurrency: int | None = None,
    progress: Any = False,
    while_waiting: Callable[[], None] | None = None,
) -> list[Any]:
    """``fn(bundle_of_items, opts)`` as Ray tasks (one CPU each) over bundles of ``items``
    (:func:`ray_bundles`: by bytes, small files together); the lists it returns concatenated
    in item order. A bundle of local files runs on this process's node (where the files are:
    each file is read once, there); a bundle of objects in storage runs anywhere. At most
    ``concurrency`` tasks in flight when given. ``fn`` and what it returns are pickled. The
    timed phases go to :data:`LAST_RUN`. ``while_waiting``: as :func:`run_local`'s, called
    once the first tasks are submitted."""
    import time

    ray = ray_init(address, num_cpus)
    if not items:
        return []
    t0 = time.perf_counter()
    sizes = [item_bytes(it) for it in items]
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    parts = ray_bundles(items, sizes, cpus, batch_size)
    task = _ray_task(ray)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    opts_ref = ray.put(opts)
    tick = progress if callable(progress) else _progress_bar(len(items), bool(progress))
    results: list[Any] = [None] * len(parts)
    where: dict[Any, int] = {}
    limit = concurrency or len(parts)
    nxt = 0
    busy = cpu_s = 0.0
    while nxt < len(parts) or where:
        while nxt < len(parts) and len(where) < limit:
            part = list(parts[nxt])
            local = all(getattr(it, "fs", None) is None for it in part)
            ref = task.options(scheduling_strategy=here if local else "DEFAULT").remote(fn, part, opts_ref)
            where[ref] = nxt
            nxt += 1
        if while_waiting is not None:
            while_waiting()
            while_waiting = None
        done, _ = ray.wait(list(where), num_returns=1)
        for ref in done:
            k = where.pop(ref)
            rows, took, used = ray.get(ref)
            results[k] = rows
            busy += took
            cpu_s += used
            tick(len(parts[k]))
    LAST_RUN.clear()
    LAST_RUN.update(
        engine="ray",
        workers=cpus,
        tasks=len(parts),
        pool_start=0.0,
        busy=busy,
        cpu=cpu_s,
        wall=time.perf_counter() - t0,
    )
    return [row for part in results for row in part]


def each_row(f: Callable[[Any], None], rows: list[Any]) -> None:
    """``f(row)`` for each row of a batch: with ``functools.partial(each_row, f)`` as the
    ``on_rows`` of :func:`run` / :func:`run_local`, a per-row callback."""
    for row in rows:
        f(row)


def run(
    fn: Callable[..., Any],
    items: Sequence[Item],
    opts: Any,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool | Callable[[int], None] = False,
    on_rows: Callable[[list[Any]], None] | None = None,
    while_waiting: Callable[[], None] | None = None,
) -> list[Any]:
    """``fn`` over batches of ``items`` on ``engine`` (:func:`run_local` or :func:`run_ray`);
    ``while_waiting``: as theirs;
    ``progress``: a bar when true, or a callable given the number of items each finished
    batch held (Ray shows a bar for a callable). ``on_rows``: as :func:`run_local`'s (each
    batch's rows in item order as soon as they and those before are done); under Ray, once
    with every row when the job ends."""
    if engine == "local":
        return run_local(
            fn, items, opts, workers=workers, progress=progress, on_rows=on_rows, while_waiting=while_waiting
        )
    if engine == "ray":
        rows = run_ray(
            fn,
            items,
            opts,
            address=address,
            num_cpus=num_cpus,
            concurrency=workers,
            progress=bool(progress),
            while_waiting=while_waiting,
        )
        if on_rows is not None:
            on_rows(rows)
        return rows
    raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
