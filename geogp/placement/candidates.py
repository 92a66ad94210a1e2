"""Candidate and target locations for sensor placement (docs/placement.md).

:class:`Candidates` holds locations in the model's input coordinates, either scattered points
or cells of a regular tensor grid (then the grid's axes and the cells' flat indices are kept,
so that the operators of :mod:`geogp.placement.operators` can use separable products). The
helpers below turn user input into candidates and evaluate the per-candidate constraints of
:func:`~geogp.placement.suggest_sites` (exclusion masks, minimum distance and its default,
existing sensors that sit on a candidate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.spatial import cKDTree

from geogp.core.validation import as_points
from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

MIN_DISTANCE_FRACTION = 0.25  # default minimum distance: this fraction of the shortest ℓ,
MIN_DISTANCE_PACKING = 0.5  # at most this fraction of an even spread's spacing (packing_distance)


@dataclass(frozen=True, eq=False)
class Candidates:
    """Locations in the model's input coordinates: scattered points or cells of a grid.

    Attributes:
        coords: (N, D) coordinates, in the units and column order of the model's inputs.
        axes: for cells of a regular tensor grid, the D axis vectors; else None.
        flat: (N,) C-order flat indices of the cells into that grid; else None.
    """

    coords: np.ndarray
    axes: tuple | None = None
    flat: np.ndarray | None = None

    @classmethod
    def points(cls, X: ArrayLike) -> Candidates:
        """Scattered locations X (N, D)."""
        return cls(as_points(X, "candidate locations"))

    @classmethod
    def grid(cls, axes: Sequence[ArrayLike], mask: ArrayLike | None = None) -> Candidates:
        """Cells of the tensor grid ``axes`` (D vectors), optionally only where ``mask`` is True.

        Args:
            axes: D coordinate vectors (N_d,), in the model's column order.
            mask: None (every cell) or a boolean array of shape (N_1, ..., N_D).
        """
        vecs = tuple(np.asarray(a, dtype=np.float64).ravel() for a in axes)
        shape = tuple(a.size for a in vecs)
        if not vecs or min(shape) == 0:
            raise InputError(f"grid axes must be non-empty vectors; got lengths {list(shape)}.")
        if not all(np.all(np.isfinite(a)) for a in vecs):
            raise InputError("grid axes contain NaN/inf coordinates; they must be finite.")
        if mask is None:
            flat = np.arange(int(np.prod(shape)))
        else:
            keep = np.asarray(mask)
            if keep.shape != shape:
                raise InputError(f"mask has shape {keep.shape} but the grid axes give {shape}; "
                                 "they must match (same dimension order).")
            flat = np.flatnonzero(keep.astype(bool).ravel())
        if flat.size == 0:
            raise InputError("the candidate mask selects no cell; nothing to choose from.")
        idx = np.unravel_index(flat, shape)
        coords = np.stack([a[i] for a, i in zip(vecs, idx, strict=True)], axis=1)
        return cls(coords, vecs, flat)

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    @property
    def n_dims(self) -> int:
        return int(self.coords.shape[1])

    def thin(self, max_n: int, seed: int = 0) -> tuple[Candidates, bool]:
        """At most ``max_n`` locations, spread over the whole set; seeded and reproducible.

        Grid cells are stratified with jitter: the index space is cut into blocks of
        s × ... × s cells (s the smallest block size that gives at most ``max_n`` non-empty
        blocks) and one cell is drawn at random in each block. Every part of the grid is
        represented, but the kept cells share no stride (a regular stride would alias with the
        grid and, through the placement criterion, pull sites onto its lattice). Scattered
        points: a uniform random subset. Returns (locations as scattered points, whether any
        were dropped).
        """
        n = len(self)
        max_n = int(max_n)
        if max_n < 1:
            raise InputError(f"the number of locations to keep must be ≥ 1; got {max_n}.")
        if n <= max_n:
            return Candidates(self.coords), False
        rng = np.random.default_rng(seed)
        if self.axes is None or self.flat is None:  # scattered points
            keep = np.sort(rng.choice(n, size=max_n, replace=False))
            return Candidates(self.coords[keep]), True
        shape = tuple(a.size for a in self.axes)
        idx = np.unravel_index(self.flat, shape)
        step = max(1, math.floor((n / max_n) ** (1 / len(shape))))
        while True:
            blocks = tuple(-(-s // step) for s in shape)
            key = np.ravel_multi_index(tuple(i // step for i in idx), blocks)
            if np.unique(key).size <= max_n:
                break
            step += 1
        perm = rng.permutation(n)
        _, first = np.unique(key[perm], return_index=True)  # one random cell per block
        keep = np.sort(perm[first])
        return Candidates(self.coords[keep]), True


def packing_distance(coords: np.ndarray, n_sites: int) -> float:
    """Half the spacing of ``n_sites`` spread evenly over the candidates: ½ h (N / n)^{1/D}
    for N candidates in D dimensions with median nearest-neighbour distance h (the cell size
    of grid candidates). The default minimum distance never exceeds it: on a smooth field
    (a long range) ¼ of the range alone kept every site but the first out of a small gap."""
    coords = np.asarray(coords, dtype=np.float64)
    count, dims = coords.shape[0], coords.shape[1]
    if count < 2 or n_sites < 1:
        return math.inf
    sample = coords[:: max(1, count // 4096)]
    dist, _ = cKDTree(coords).query(sample, k=2)
    spacing = float(np.median(dist[:, 1]))
    return MIN_DISTANCE_PACKING * spacing * (count / n_sites) ** (1.0 / dims)


def auto_min_distance(model: Any) -> float:
    """Default minimum distance between sites: ¼ of the shortest learnt lengthscale.

    The lengthscales of every part of the kernel, per input dimension, in the model's input
    units (ℓ_d times the standardiser's scale). Two sites closer than ℓ/4 measure almost the
    same thing (correlation ≥ e^{−1/4} ≈ 0.78 under a Matérn-1/2 kernel, ≥ 0.97 under the
    squared exponential), so a greedy criterion gains little from the second one.
    """
    scale = np.asarray(model.scaler_.x_scale, dtype=np.float64)
    stack, ells = [model.kernel_], []
    while stack:
        k = stack.pop()
        if hasattr(k, "parts"):
            stack.extend(k.parts)
        elif hasattr(k, "lengthscale"):
            ells.append(np.broadcast_to(np.asarray(k.lengthscale, dtype=np.float64),
                                        scale.shape) * scale)
    if not ells:
        return 0.0
    return MIN_DISTANCE_FRACTION * float(min(e.min() for e in ells))


def as_candidates(obj: Candidates | ArrayLike | pd.DataFrame, name: str) -> Candidates:
    if isinstance(obj, Candidates):
        return obj
    if isinstance(obj, pd.DataFrame):
        obj = obj.to_numpy()
    try:
        return Candidates.points(obj)
    except InputError as err:
        raise InputError(f"{name}: {err}") from None


def exclusion_mask(exclude: ArrayLike | None, cands: Candidates) -> np.ndarray:
    n = len(cands)
    if exclude is None:
        return np.zeros(n, dtype=bool)
    ex = np.asarray(exclude)
    if ex.dtype != bool:
        if not np.issubdtype(ex.dtype, np.number):
            raise InputError(f"exclude must be a boolean mask; got dtype {ex.dtype}.")
        ex = np.nan_to_num(ex.astype(np.float64), nan=0.0) != 0
    if cands.axes is not None and ex.shape == tuple(a.size for a in cands.axes):
        return ex.ravel()[cands.flat]
    if ex.shape != (n,):
        raise InputError(f"exclude must have one value per candidate ({n})"
                         + (f" or the grid's shape {tuple(a.size for a in cands.axes)}"
                            if cands.axes is not None else "") + f"; got shape {ex.shape}.")
    return ex


def grid_axes(locs: Candidates) -> tuple:
    """The axis vectors of grid candidates; scattered points have none."""
    if locs.axes is None:
        raise InputError("these candidates are scattered points; this route needs the cells "
                         "of a grid (Candidates.grid).")
    return locs.axes


def at_candidates(points: ArrayLike, coords: np.ndarray) -> list:
    """Candidates that coincide with one of ``points`` (to 1e-12 relative)."""
    tol = 1e-12 * (1.0 + np.abs(coords).max())
    hits = set()
    for pt in np.atleast_2d(np.asarray(points, dtype=np.float64)):
        hits.update(np.flatnonzero(np.all(np.abs(coords - pt) <= tol, axis=1)).tolist())
    return sorted(hits)


def near_mask(coords: np.ndarray, point: np.ndarray, min_distance: float) -> np.ndarray:
    return np.sum((coords - point) ** 2, axis=1) < min_distance**2


def nearest_cells(x: np.ndarray, y: np.ndarray, axis_y: np.ndarray, axis_x: np.ndarray,
                  what: str) -> tuple[np.ndarray, np.ndarray]:
    """(rows, columns) of the raster cells nearest to the points (x, y), for a raster with
    cell-centre axes ``axis_y`` and ``axis_x``; refuses a point beyond the cells ("{what}
    lies outside the raster ...")."""
    out = []
    for coords, axis, name in ((y, axis_y, "y"), (x, axis_x, "x")):
        step = abs(float(axis[1] - axis[0])) if axis.size > 1 else 1.0
        idx = np.abs(coords[:, None] - axis[None, :]).argmin(axis=1)
        if np.any(np.abs(coords - axis[idx]) > 0.5 * step * (1 + 1e-9)):
            raise InputError(f"{what} lies outside the raster ({name} beyond its cells).")
        out.append(idx)
    return out[0], out[1]
