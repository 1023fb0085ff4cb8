"""A local Ray cluster for a test module: the one ``ray.init`` the Ray tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def local_ray(num_cpus: int) -> Iterator[Any]:
    """A local Ray cluster of ``num_cpus`` CPUs for the block, shut down after; yields ``ray``.

    No dashboard, no worker logs on the driver, Ray's logging left alone. A cluster this
    process already runs is shut down first (one ``ray.init`` per module)."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()
