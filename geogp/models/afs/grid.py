"""Regular rasters for the AFS estimator: axis checks and observed-cell standardisation.

:func:`grid_standardizer` reads the raster once (in row chunks, dask-aware) for the count, the
moments of the observed values and the per-axis observed-cell counts, from which the z-scores of
docs/model.md follow without materialising the (N, D) coordinates of the observed cells.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geogp.exceptions import AllMissingError, InputError, IrregularGridError
from geogp.models.base import Standardizer

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["grid_axes_info", "grid_moments", "grid_standardizer"]


def grid_axes_info(axes: Sequence[ArrayLike]) -> tuple[np.ndarray, np.ndarray]:
    """(first coordinate, spacing) per axis; raises unless each axis is regular and monotone."""
    x0, eta = [], []
    for d, axis in enumerate(axes):
        a = np.asarray(axis, dtype=np.float64)
        if a.ndim != 1 or a.size < 2:
            raise InputError(
                f"grid axis {d} must be a vector with ≥ 2 coordinates; got shape {a.shape}.")
        step = np.diff(a)
        if not np.all(np.isfinite(a)):
            raise IrregularGridError(f"grid axis {d} has NaN/inf coordinates.")
        if np.any(step == 0) or not (np.all(step > 0) or np.all(step < 0)):
            raise IrregularGridError(
                f"grid axis {d} is not strictly monotonic (duplicated or unsorted coordinates); "
                "sort the array along that axis (da.sortby) or drop duplicates."
            )
        if not np.allclose(step, step[0], rtol=1e-6, atol=0):
            raise IrregularGridError(
                f"grid axis {d} is not regularly spaced (spacing from {step.min():.6g} to "
                f"{step.max():.6g}); irregular coordinates are fitted as scattered points."
            )
        x0.append(a[0])
        eta.append(abs(step[0]))
    return np.array(x0), np.array(eta)


def grid_moments(axes: Sequence[ArrayLike],
                 values: ArrayLike) -> tuple[int, float, float, list[np.ndarray]]:
    """Count, Σy, Σy² of observed cells and per-axis observed-cell counts, chunked."""
    shape = values.shape
    ax_w = [np.zeros(s) for s in shape]
    n, s1, s2 = 0, 0.0, 0.0
    chunks = getattr(values, "chunks", None)
    if chunks is not None:
        b = np.cumsum((0, *chunks[0]))
        slices = [slice(int(p), int(q)) for p, q in itertools.pairwise(b)]
    else:
        step = max(1, int(2**24 // max(1, int(np.prod(shape[1:])))))
        slices = [slice(i, i + step) for i in range(0, shape[0], step)]
    for sl in slices:
        block = np.asarray(values[sl], dtype=np.float64)
        if np.isinf(block).any():
            raise InputError("the grid contains infinite values; replace them by NaN "
                             "(missing) or finite numbers.")
        obs = np.isfinite(block)
        yb = np.where(obs, block, 0.0)
        n += int(obs.sum())
        s1 += float(yb.sum())
        with np.errstate(over="ignore"):  # inf: too large for float64, refused by the caller
            s2 += float((yb * yb).sum())
        for d in range(len(shape)):
            other = tuple(i for i in range(len(shape)) if i != d)
            cnt = obs.sum(axis=other)
            if d == 0:
                ax_w[0][sl] += cnt
            else:
                ax_w[d] += cnt
    return n, s1, s2, ax_w


def grid_standardizer(axes: Sequence[ArrayLike],
                      values: ArrayLike) -> tuple[Standardizer, int, np.ndarray]:
    """(Standardizer of the observed cells, their number, per-axis spacing η) of a raster.

    Raises on irregular axes, shape mismatch, no observed cell or constant observed values.
    """
    _x0, eta = grid_axes_info(axes)
    shape = tuple(int(s) for s in values.shape)
    if len(axes) != len(shape):
        raise InputError(f"values have {len(shape)} dims but {len(axes)} axes were given.")
    n_obs, s1, s2, ax_w = grid_moments(axes, values)
    if n_obs == 0:
        raise AllMissingError("every grid cell is missing (NaN); nothing to fit.")
    with np.errstate(over="ignore", invalid="ignore"):  # inf → refused by Standardizer
        y_mean = np.float64(s1) / n_obs
        y_std = np.sqrt(max(np.float64(s2) / n_obs - y_mean**2, 0.0))
        if not np.isfinite(s2):
            y_std = np.inf
    if not y_std > 0:
        raise InputError("the observed cells all have the same value; there is nothing to model.")
    x_mean = np.array([np.sum(w * a) / n_obs for a, w in zip(axes, ax_w, strict=True)])
    x_std = np.array([np.sqrt(np.sum(w * (a - m) ** 2) / n_obs)
                      for a, w, m in zip(axes, ax_w, x_mean, strict=True)])
    x_std = np.where(x_std > 0, x_std, eta)
    return Standardizer(x_mean, x_std, float(y_mean), float(y_std)), n_obs, eta
