"""Engines: run a per-file function over items and gather rows.

``local``: a process pool on this machine (``workers`` processes, forkserver start: safe in a
process that runs threads), items sent in batches of about equal bytes (:func:`byte_chunks`);
with one worker, inline (with ``workers=None``: the CPU count from
:data:`AUTO_POOL_MIN_BYTES` of work up, counted in bytes by :func:`work_bytes`, inline below).
``ray``: Ray Data over the same function (``ray.data.from_items`` → ``map_batches``), on an
existing cluster (``address``) or one started here (``ray.init``). Rows come back in item
order from both, so both write the same Parquet.
"""

from __future__ import annotations

import os
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


def run_local(
    fn: Callable[[Sequence[Item], Any], list[Any]],
    items: Sequence[Item],
    opts: Any,
    *,
    workers: int | None = None,
    chunk: int = 0,
    progress: bool = False,
) -> list[Any]:
    """``fn(chunk_of_items, opts)`` over chunks in a process pool; results in item order,
    concatenated."""
    sizes = [item_bytes(it) for it in items]
    if workers is None:
        # starting a pool (forkserver, imports in each worker) costs about a second on a busy
        # 2-core machine: worth it only for work large enough to amortize it, in bytes
        workers = (os.cpu_count() or 1) if work_bytes(sizes) >= AUTO_POOL_MIN_BYTES else 1
    tick = progress if callable(progress) else _progress_bar(len(items), bool(progress))
    if workers <= 1 or len(items) < 2:
        out: list[Any] = []
        for part in byte_chunks(items, sizes, 1, cap=128 << 20):
            out.extend(fn(part, opts))
            tick(len(part))
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # batches of about equal bytes, several per worker (a slow one does not hold the job)
    parts = _chunks(items, chunk) if chunk else byte_chunks(items, sizes, workers * 8)
    out = []
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        for part, rows in zip(parts, pool.map(fn, parts, [opts] * len(parts))):
            out.extend(rows)
            tick(len(part))
    return out


def ray_init(address: str | None, num_cpus: int | None) -> Any:
    """``ray`` connected to ``address`` (None: the cluster in ``$RAY_ADDRESS`` or a new local
    one with ``num_cpus``). An existing connection is reused."""
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "engine='ray' needs Ray Data: pip install 'sessiontree[fleet]' (from a source checkout: pip install '.[fleet]')"
        ) from exc
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        ray.init(**kwargs)
    return ray


def _ray_batch(fn: Callable[..., Any], opts: Any) -> Callable[..., Any]:
    def apply(batch: Any) -> Any:
        import pickle

        import pyarrow as pa

        items = [pickle.loads(b) for b in batch.column("item").to_pylist()]
        rows = fn(items, opts)
        return pa.table({"row": pa.array([pickle.dumps(r) for r in rows], pa.large_binary())})

    return apply


def run_ray(
    fn: Callable[[Sequence[Item], Any], list[Any]],
    items: Sequence[Item],
    opts: Any,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    batch_size: int = 64,
    concurrency: int | None = None,
    progress: bool = False,
) -> list[Any]:
    """``fn`` over ``items`` with Ray Data ``map_batches`` (rows in item order)."""
    import pickle

    ray = ray_init(address, num_cpus)
    if not items:
        return []
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = bool(progress)
    ctx.execution_options.preserve_order = True
    import pyarrow as pa

    table = pa.table({"item": pa.array([pickle.dumps(it) for it in items], pa.large_binary())})
    ds = ray.data.from_arrow(table).repartition(max(1, (len(items) + batch_size - 1) // batch_size))
    kwargs: dict[str, Any] = {"batch_size": batch_size, "batch_format": "pyarrow"}
    if concurrency:
        kwargs["concurrency"] = concurrency
    out_ds = ds.map_batches(_ray_batch(fn, opts), **kwargs)
    out: list[Any] = []
    for batch in out_ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        out.extend(pickle.loads(b) for b in batch.column("row").to_pylist())
    return out


def run(
    fn: Callable[..., Any],
    items: Sequence[Item],
    opts: Any,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool = False,
) -> list[Any]:
    if engine == "local":
        return run_local(fn, items, opts, workers=workers, progress=progress)
    if engine == "ray":
        return run_ray(fn, items, opts, address=address, num_cpus=num_cpus, concurrency=workers, progress=progress)
    raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
