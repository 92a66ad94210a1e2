"""Rasters oversampled by nearest-neighbour resampling: their values repeat in k × k blocks.

gdalwarp's default resampling and many data portals deliver a product on a grid finer than its
own: each native cell becomes a block of identical cells. A model fitted on such a grid sees
neighbours that agree exactly, learns a noise of nearly zero and intervals that are too narrow.
:func:`find_blocks` detects the blocks, :func:`coarsen` gives the raster at its information's
resolution (one cell per block, at the block's centre), and :func:`snap` maps coordinates of
the user's grid to the centre of the block they fall in, so that a model fitted on the blocks
predicts every cell of a block as the block it is a copy of.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from geogp.frontend.adapters import GridData

__all__ = ["Blocks", "find_blocks", "coarsen", "block_axis", "block_index", "block_mask",
           "snap", "MAX_FACTOR"]

MAX_FACTOR = 16  # the largest block side looked for
# a factor is accepted only with enough evidence: this many pairs of finite neighbours inside
# blocks along the axis, and this share of the pairs across block edges that differ
MIN_PAIRS = 200
MIN_EDGE_CHANGE = 0.1


@dataclass(frozen=True)
class Blocks:
    """Values that repeat in blocks of ``factor`` = (k_y, k_x) cells; the block edges fall
    before rows and columns ``phase`` = (p_y, p_x) + multiples of k (0 ≤ p < k; p > 0: the
    first block is cut by the raster's edge, as the last may be)."""

    factor: tuple[int, int]
    phase: tuple[int, int]

    def describe(self, shape: tuple[int, int]) -> str:
        """'values repeat in 3 × 3 blocks: ... (300 × 500 blocks)' for a raster of ``shape``."""
        n = tuple(len(block_index(s, k, p)[1]) for s, k, p in zip(shape, self.factor,
                                                                   self.phase, strict=True))
        return (f"values repeat in {self.factor[0]} × {self.factor[1]}-cell blocks "
                f"(nearest-neighbour resampling): fitted at the blocks' resolution "
                f"({n[0]} × {n[1]}), predicted on the raster's {shape[0]} × {shape[1]} cells")


def block_index(n: int, k: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(block of each of the n cells along an axis, the first cell of each block) for blocks
    of k cells whose edges fall before cell p + j k."""
    shift = (k - p) % k
    of_cell = (np.arange(n) + shift) // k
    return of_cell, np.unique(of_cell)


def _axis_factor(values: np.ndarray, axis: int) -> tuple[int, int]:
    """(k, p) of the largest block side k ≥ 2 (and its phase p) along ``axis`` (1: y, 2: x) of
    values (S, N_y, N_x) for which every pair of finite neighbours inside a block is equal and
    enough pairs across block edges differ; (1, 0) when there is none."""
    n = values.shape[axis]
    a = np.moveaxis(values, axis, 1)  # (S, n, other)
    left, right = a[:, :-1], a[:, 1:]
    both = np.isfinite(left) & np.isfinite(right)
    pairs = both.sum(axis=(0, 2))  # finite pairs across each of the n − 1 transitions
    differ = (both & (left != right)).sum(axis=(0, 2))
    for k in range(min(MAX_FACTOR, n // 2), 1, -1):
        for p in range(k):
            edge = (np.arange(1, n) % k) == p  # the transition into cell t starts a block
            inside = ~edge
            if differ[inside].any() or pairs[inside].sum() < MIN_PAIRS:
                continue
            if differ[edge].sum() >= MIN_EDGE_CHANGE * max(pairs[edge].sum(), 1):
                return k, p
    return 1, 0


def find_blocks(values: np.ndarray) -> Blocks | None:
    """The blocks of a raster's values (S, N_y, N_x) (NaN = missing), or None when its cells
    are its own (no axis repeats). Exact equality: resampling copies values bit for bit."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 3:
        raise ValueError(f"find_blocks needs values (S, N_y, N_x); got shape {v.shape}.")
    ky, py = _axis_factor(v, 1)
    kx, px = _axis_factor(v, 2)
    if ky == kx == 1:
        return None
    return Blocks((ky, kx), (py, px))


def block_axis(axis: np.ndarray, k: int, p: int) -> np.ndarray:
    """Centres of the blocks along a regular axis (its cell centres): a block cut by the
    raster's edge keeps the centre of its whole extent, as the native cell had."""
    axis = np.asarray(axis, dtype=np.float64)
    if k == 1:
        return axis
    step = (axis[-1] - axis[0]) / (axis.size - 1)
    _, first = block_index(axis.size, k, p)
    shift = (k - p) % k
    return axis[0] + step * (first * k - shift + (k - 1) / 2)


def coarsen(g: GridData, blocks: Blocks) -> GridData:
    """The raster ``g`` (regular, numpy-backed) at its blocks' resolution: one cell per block,
    at the block's centre, holding the block's value (NaN where the block has none)."""
    v = np.asarray(g.values, dtype=np.float64)
    (ky, kx), (py, px) = blocks.factor, blocks.phase
    iy, by = block_index(v.shape[1], ky, py)
    ix, bx = block_index(v.shape[2], kx, px)
    out = np.full((v.shape[0], by.size, bx.size), np.nan)
    # fmax ignores NaN: the block's value wherever any of its cells has it
    np.fmax.at(out, (slice(None), iy[:, None], ix[None, :]), v)
    y, x = block_axis(g.y, ky, py), block_axis(g.x, kx, px)
    axes = [block_axis(g.axes[0], ky, py), block_axis(g.axes[1], kx, px)]
    return dataclasses.replace(g, values=out, y=y, x=x, axes=axes,
                               coords={k: c for k, c in g.coords.items()
                                       if k not in (g.spec.y_dim, g.spec.x_dim)})


def snap(coords: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Each coordinate moved to the centre of the block it falls in (``centres``: a regular
    axis of block centres); coordinates beyond the outer blocks are kept as they are."""
    coords = np.asarray(coords, dtype=np.float64)
    if centres.size < 2:
        return coords
    step = (centres[-1] - centres[0]) / (centres.size - 1)
    j = np.rint((coords - centres[0]) / step)
    inside = (j >= 0) & (j < centres.size)
    return np.where(inside, centres[np.clip(j, 0, centres.size - 1).astype(np.int64)], coords)


def block_mask(mask: np.ndarray, blocks: Blocks) -> np.ndarray:
    """A boolean (N_y, N_x) mask of the raster as one per block: True where any of the
    block's cells is True."""
    mask = np.asarray(mask, dtype=bool)
    iy, by = block_index(mask.shape[0], blocks.factor[0], blocks.phase[0])
    ix, bx = block_index(mask.shape[1], blocks.factor[1], blocks.phase[1])
    out = np.zeros((by.size, bx.size), dtype=bool)
    np.logical_or.at(out, (iy[:, None], ix[None, :]), mask)
    return out
