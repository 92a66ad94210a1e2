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

__all__ = ["memory_limit", "check_memory", "predict_bytes", "sample_bytes", "check_prediction",
           "check_samples", "predicts_lazily", "rows_per_block", "LAZY_CELLS", "LAZY_BLOCK_CELLS"]

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


# doubles per target cell (and per slice) of what the caller asked for, above the model's own
# working memory, which the model estimates when fitted (traced peaks: benchmarks/README.md,
# design measurements)
PREDICT_DOUBLES = 20
QUANTILE_DOUBLES = 2
SAMPLE_DOUBLES = 4


# above this many cells (all slices together) a prediction is lazy by default
# (GeoRegressor.predict(lazy=None)): dask arrays computed block by block of at most
# LAZY_BLOCK_CELLS cells when read or written, instead of ~160 bytes a cell at once
LAZY_CELLS = 2**22
LAZY_BLOCK_CELLS = 2**18  # cells of one block (geogp.families.generic.lazy_block_rows)
LAZY_WINDOW_CELLS = 2**22  # cells of the windows a lazy prediction is written by, at most


def rows_per_block(n_columns: int, max_rows: int, max_cells: float) -> int:
    """Rows of a block (of a lazy prediction, or of a written window) ``n_columns`` wide:
    ``max_rows`` halved until the block has at most ``max_cells`` cells, or one row."""
    rows = max_rows
    while rows > 1 and rows * max(int(n_columns), 1) > max_cells:
        rows //= 2
    return rows


def predicts_lazily(ny: int, nx: int, n_slices: int = 1) -> bool:
    """Whether a prediction on ``ny`` × ``nx`` cells × ``n_slices`` is lazy by default."""
    return float(ny) * nx * n_slices > LAZY_CELLS


def predict_bytes(n_cells: float, n_slices: int = 1, n_quantiles: int = 0) -> float:
    """Estimated bytes of a prediction on ``n_cells`` target cells per slice."""
    return 8.0 * n_cells * n_slices * (PREDICT_DOUBLES + QUANTILE_DOUBLES * n_quantiles)


def sample_bytes(n_samples: int, n_cells: float, n_slices: int = 1) -> float:
    """Estimated bytes of ``n_samples`` posterior samples on ``n_cells`` cells per slice."""
    return 8.0 * n_cells * n_slices * SAMPLE_DOUBLES * float(n_samples)


def check_prediction(ny: int, nx: int, n_slices: int = 1, n_quantiles: int = 0,
                     limit: float | None = None, lazy: bool | None = None,
                     template: bool = False) -> float:
    """Refuse a prediction on a ``ny`` × ``nx`` grid that would not fit (:func:`check_memory`).
    A ``lazy`` one holds one window of every slice at a time (the GeoTIFF writer's
    :data:`LAZY_WINDOW_CELLS`); None: lazy as ``predict`` is by default
    (:func:`predicts_lazily`). ``template``: the grid is also built, a double a cell."""
    if lazy is None:
        lazy = predicts_lazily(ny, nx, n_slices)
    cells = float(ny) * nx
    needed = predict_bytes(min(cells, LAZY_WINDOW_CELLS) if lazy else cells, n_slices,
                           n_quantiles) + (8.0 * cells if template else 0.0)
    return check_memory(needed,
                        f"a prediction on {ny} × {nx} cells" + (
                            f" × {n_slices} slices" if n_slices > 1 else ""), limit,
                        "Predict on a coarser or smaller grid (like=, x=/y=), in pieces.")


def check_samples(n_samples: int, ny: int, nx: int, n_slices: int = 1,
                  limit: float | None = None) -> float:
    """Refuse ``n_samples`` samples of a ``ny`` × ``nx`` grid that would not fit."""
    return check_memory(sample_bytes(n_samples, float(ny) * nx, n_slices),
                        f"{n_samples} posterior samples of {ny} × {nx} cells" + (
                            f" × {n_slices} slices" if n_slices > 1 else ""), limit,
                        "Draw fewer samples at a time (several calls with other seeds), or "
                        "sample a smaller grid.")
