"""The space-time model's large scales: a coarse joint model of the stack's block means, whose
posterior the cells' model takes as its prior mean (docs/spacetime.md, "Large scales").

A tile of the cells' model sees its window and a halo of a few cells. Deep in a large cloud
nothing of the date's own data is in reach, so the date's anomaly at scales beyond a tile
comes from the dates around it alone. In the coarse model a block of k × k cells is one
coarse cell, so its tiles reach k times further, and it carries those scales in from wherever
the date was observed (on a raster of many blocks the coarse model is tiled too, each tile
with a halo of blocks). Its mean is interpolated bilinearly to the cells and subtracted
before the cells' posterior; its latent sd adds to theirs in quadrature (the two treated as
independent).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp

__all__ = ["MIN_BLOCK_FRACTION", "block_mean", "block_means", "block_step", "spans",
           "interpolation_weights", "Upsampler", "add_deviations"]

# a block's mean is a coarse observation when at least this share of its cells is observed
MIN_BLOCK_FRACTION = 0.25


def spans(n: int, k: int) -> list[tuple[int, int]]:
    """The blocks (start, stop) of about ``k`` cells along an axis of ``n``: round(n / k) of
    them, their sizes within one cell (no sliver of a block at the far edge, whose mean would
    be far noisier than the others')."""
    edges = np.round(np.linspace(0, n, max(1, round(n / k)) + 1)).astype(int)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))


def block_step(n: int, k: int) -> float:
    """The coarse grid's step along an axis of ``n`` cells, in cells (its blocks' mean size)."""
    return n / len(spans(n, k))


def block_means(values: np.ndarray, k: int) -> np.ndarray:
    """(T, c_y, c_x) the means of the observed values of ``values`` (T, n_y, n_x) in blocks of
    about ``k`` × ``k`` cells (:func:`spans`), date by date; NaN where fewer than
    :data:`MIN_BLOCK_FRACTION` of a block's cells are observed."""
    t = values.shape[0]
    rows, cols = spans(values.shape[1], k), spans(values.shape[2], k)
    out = np.full((t, len(rows), len(cols)), np.nan)
    for i, (y0, y1) in enumerate(rows):
        for j, (x0, x1) in enumerate(cols):
            out[:, i, j] = block_mean(values[:, y0:y1, x0:x1])
    return out


def block_mean(block: np.ndarray) -> np.ndarray:
    """(T,) one block's mean (T, b_y, b_x) at each date: NaN where fewer than
    :data:`MIN_BLOCK_FRACTION` of its cells are observed."""
    flat = block.reshape(block.shape[0], -1)
    out = np.full(block.shape[0], np.nan)
    enough = np.isfinite(flat).sum(axis=1) >= max(1, MIN_BLOCK_FRACTION * flat.shape[1])
    with warnings.catch_warnings():  # all-missing dates: NaN, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        out[enough] = np.nanmean(flat[enough], axis=1)
    return out


def interpolation_weights(n: int, k: int) -> np.ndarray:
    """(n, c) linear interpolation from the blocks' centres (:func:`spans`) to the cells of an
    axis of ``n`` cells, constant beyond the outer centres (each row sums to 1)."""
    centres = np.array([(a + b - 1) / 2.0 for a, b in spans(n, k)])
    eye = np.eye(centres.size)
    return np.stack([np.interp(np.arange(n), centres, eye[i]) for i in range(centres.size)],
                    axis=1)


class Upsampler:
    """Bilinear interpolation from the coarse grid of ``k`` × ``k`` blocks to the cells of a
    (n_y, n_x) raster: ``up(plane)`` for one date (W_y P W_xᵀ), ``matrix()`` the sparse
    (n_y n_x, c_y c_x) operator U = W_y ⊗ W_x (row-major cells)."""

    def __init__(self, shape: tuple[int, int], k: int) -> None:
        self.wy, self.wx = interpolation_weights(shape[0], k), interpolation_weights(shape[1], k)

    def up(self, plane: np.ndarray, rows: slice = slice(None), cols: slice = slice(None)
           ) -> np.ndarray:
        """The coarse ``plane`` (c_y, c_x) at the cells (n_y, n_x), or at ``rows`` × ``cols``
        of them."""
        return self.wy[rows] @ plane @ self.wx[cols].T

    def matrix(self) -> sp.csr_matrix:
        """U (n_y n_x, c_y c_x), at most four non-zeros a row."""
        return sp.kron(sp.csr_matrix(self.wy), sp.csr_matrix(self.wx), format="csr")


def add_deviations(out: np.ndarray, deviations: np.ndarray, sd: np.ndarray, up: Upsampler,
                   factor: float) -> None:
    """Add ``factor`` times the coarse model's posterior deviations (n, T, c_y, c_x) at the
    cells to ``out`` (n, T, n_y, n_x), in place, with the variance the sd map states,
    (W_y sd W_xᵀ)².

    Interpolated as they are, draws vary less between the blocks' centres than the
    interpolated sd says (neighbouring blocks' errors are not fully correlated). So the
    standardised draws z = deviation / sd are interpolated and divided by the sd of their
    interpolation, Σ w_i w_j r_ij with r the correlation of neighbouring blocks' z (pooled
    over the draws, dates and blocks, one per direction), then multiplied by the sd map."""
    z = deviations / np.where(sd > 0, sd, 1.0)[None]
    flat = z.reshape(-1, *z.shape[2:])

    def corr(a: np.ndarray, b: np.ndarray) -> float:
        norm = math.sqrt(float(np.mean(a * a)) * float(np.mean(b * b))) if a.size else 0.0
        return float(np.clip(np.mean(a * b) / norm, -1.0, 1.0)) if norm > 0 else 0.0

    r_y, r_x = corr(flat[:, 1:], flat[:, :-1]), corr(flat[:, :, 1:], flat[:, :, :-1])
    # the two diagonals' pairs, each half of the diagonal terms
    r_d = (corr(flat[:, 1:, 1:], flat[:, :-1, :-1]) + corr(flat[:, 1:, :-1], flat[:, :-1, 1:])) / 2
    # the variance of Σ_ij w_i w_j r_ij z along rows and columns: each axis has at most two
    # non-zero weights a row (a, 1 − a), so var = (a² + b² + 2ab r) per axis; the diagonal
    # pairs take r_d
    def axis_terms(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (w**2).sum(axis=1), (w.sum(axis=1) ** 2 - (w**2).sum(axis=1)) / 2.0

    sy, cy = axis_terms(up.wy)
    sx, cx = axis_terms(up.wx)
    var = (np.outer(sy, sx) + 2 * r_y * np.outer(cy, sx) + 2 * r_x * np.outer(sy, cx)
           + 4 * r_d * np.outer(cy, cx))
    norm = np.sqrt(np.maximum(var, 1e-12)) / factor
    for t in range(deviations.shape[1]):
        scale = up.up(sd[t]) / norm
        for d in range(deviations.shape[0]):
            out[d, t] += up.up(z[d, t]) * scale
