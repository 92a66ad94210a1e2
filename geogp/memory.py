"""Memory estimates checked before large allocations.

Requests whose size the user chooses (the number of samples, the prediction grid, the point
grid of ``--resolution``, the cross-validation folds, the arrays a model file declares) are
estimated from their shapes *before* anything is allocated, and refused with
:class:`~geogp.exceptions.MemoryEstimateError`, whose message states the estimate and the
limit, instead of ending minutes later in a ``MemoryError``.

The default limit is 80 % of the machine's physical memory; the environment variable
``GEOGP_MAX_MEMORY`` (in GiB) replaces it, and the functions that check take a ``limit``.
"""

from __future__ import annotations

import os

from geogp.exceptions import InputError, MemoryEstimateError

__all__ = ["memory_limit", "check_memory"]

_FALLBACK = 16 * 2**30  # when the platform does not say how much memory it has


def _physical_memory() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float(_FALLBACK / 0.8)


def memory_limit() -> float:
    """The default memory limit in bytes: ``GEOGP_MAX_MEMORY`` GiB, else 80 % of the RAM."""
    env = os.environ.get("GEOGP_MAX_MEMORY")
    if env:
        try:
            value = float(env)
        except ValueError:
            value = float("nan")
        if not value > 0 or value == float("inf"):
            raise InputError(f"GEOGP_MAX_MEMORY must be a positive number of GiB; got {env!r}.")
        return value * 2**30
    return 0.8 * _physical_memory()


def check_memory(needed_bytes: float, what: str, limit: float | None = None,
                 hint: str = "") -> float:
    """Refuse (:class:`MemoryEstimateError`) when ``needed_bytes`` exceeds the limit.

    Args:
        needed_bytes: the estimate, computed from shapes only (nothing allocated yet).
        what: what would need it, for the message ("1000000 samples of 2000 cells").
        limit: bytes allowed (default :func:`memory_limit`).
        hint: how to lower the estimate.

    Returns:
        ``needed_bytes`` as a float.
    """
    limit = memory_limit() if limit is None else float(limit)
    needed = float(needed_bytes)
    if needed > limit:
        raise MemoryEstimateError(what, needed, limit, hint)
    return needed
