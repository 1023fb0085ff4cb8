"""Engines: run a per-file function over items and gather rows.

``local``: a process pool on this machine (``workers`` processes, forkserver start: safe in a
process that runs threads), items sent in chunks; with one worker or few items, inline (with
``workers=None``: the CPU count from :data:`AUTO_POOL_MIN` sessions up, inline below).
``ray``: Ray Data over the same function (``ray.data.from_items`` → ``map_batches``), on an
existing cluster (``address``) or one started here (``ray.init``). Rows come back in item
order from both, so both write the same Parquet.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

from ._sources import Item

ENGINES = ("local", "ray")
#: With ``workers=None``, the local engine runs in this process below this many sessions.
AUTO_POOL_MIN = 2000


def _chunks(seq: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [seq[k : k + size] for k in range(0, len(seq), size)]


class _Bar:
    """A ``tqdm`` progress bar on stderr: ``bar(n)`` advances it by ``n`` items; ``close()``."""

    def __init__(self, total: int, unit: str):
        from tqdm import tqdm  # type: ignore[import-untyped]

        self._bar = tqdm(total=total, unit=f" {unit}", file=sys.stderr, dynamic_ncols=True, leave=True)

    def __call__(self, n: int) -> None:
        self._bar.update(n)
        if self._bar.n >= (self._bar.total or 0):
            self.close()

    def close(self) -> None:
        self._bar.close()


def _progress_bar(total: int, enabled: bool, unit: str = "sessions") -> Callable[[int], None]:
    """A progress bar of ``total`` items when ``enabled`` (tqdm, on stderr), else a no-op.
    Without tqdm installed (it comes with the ``fleet`` extra), no bar."""
    if not enabled or total == 0:
        return lambda n: None
    try:
        return _Bar(total, unit)
    except ImportError:  # pragma: no cover - the fleet extra brings tqdm
        return lambda n: None


def run_local(
    fn: Callable[[Sequence[Item], Any], list],
    items: Sequence[Item],
    opts: Any,
    *,
    workers: int | None = None,
    chunk: int = 0,
    progress: bool = False,
) -> list:
    """``fn(chunk_of_items, opts)`` over chunks in a process pool; results in item order,
    concatenated."""
    if workers is None:
        # starting a pool (forkserver, imports in each worker) costs about a second on a busy
        # 2-core machine: worth it only for stores large enough to amortize it
        workers = (os.cpu_count() or 1) if len(items) >= AUTO_POOL_MIN else 1
    tick = progress if callable(progress) else _progress_bar(len(items), bool(progress))
    if workers <= 1 or len(items) <= 8:
        out: list = []
        for part in _chunks(items, 64):
            out.extend(fn(part, opts))
            tick(len(part))
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    size = chunk or max(1, min(256, len(items) // (workers * 8) or 1))
    parts = _chunks(items, size)
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
        kwargs: dict = {"ignore_reinit_error": True, "log_to_driver": False, "include_dashboard": False}
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        ray.init(**kwargs)
    return ray


def _ray_batch(fn: Callable, opts: Any) -> Callable:
    def apply(batch: Any) -> Any:
        import pickle

        import pyarrow as pa

        items = [pickle.loads(b) for b in batch.column("item").to_pylist()]
        rows = fn(items, opts)
        return pa.table({"row": pa.array([pickle.dumps(r) for r in rows], pa.large_binary())})

    return apply


def run_ray(
    fn: Callable[[Sequence[Item], Any], list],
    items: Sequence[Item],
    opts: Any,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    batch_size: int = 64,
    concurrency: int | None = None,
    progress: bool = False,
) -> list:
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
    kwargs: dict = {"batch_size": batch_size, "batch_format": "pyarrow"}
    if concurrency:
        kwargs["concurrency"] = concurrency
    out_ds = ds.map_batches(_ray_batch(fn, opts), **kwargs)
    out: list = []
    for batch in out_ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        out.extend(pickle.loads(b) for b in batch.column("row").to_pylist())
    return out


def run(
    fn: Callable,
    items: Sequence[Item],
    opts: Any,
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool = False,
) -> list:
    if engine == "local":
        return run_local(fn, items, opts, workers=workers, progress=progress)
    if engine == "ray":
        return run_ray(fn, items, opts, address=address, num_cpus=num_cpus, concurrency=workers, progress=progress)
    raise ValueError(f"engine must be one of {ENGINES}, not {engine!r}")
