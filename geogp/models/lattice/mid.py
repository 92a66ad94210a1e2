"""The mid-scale level's coarse lattice (docs/lattice.md, the mid-scale level).

A lattice r times coarser than the raster's, with :data:`MID_MARGIN` extra nodes on every side,
whose field reaches the fine cells by bilinear interpolation Π (:func:`mid_lattice`,
:func:`mid_stencil`); :func:`mid_cross` is the pattern of the fine–coarse block of B that the
exact neighbour covariances need, and :func:`band` the coarse block's placeholder pattern.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["MID_MARGIN", "band", "mid_cross", "mid_lattice", "mid_stencil"]


# coarse-lattice nodes added beyond the fine lattice on every side (the mid-scale level's own
# margin against its boundary effect: 4 nodes = 4r fine cells)
MID_MARGIN = 4


def band(n: int, width: int) -> sp.csr_matrix:
    """n × n ones on the diagonals −width..width (a pattern placeholder)."""
    w = min(width, n - 1)
    return sp.diags([np.ones(n - abs(k)) for k in range(-w, w + 1)], list(range(-w, w + 1)),
                    format="csr")


def mid_lattice(shape: tuple[int, int], factor: int) -> tuple[tuple[int, int], sp.csr_matrix]:
    """The mid-scale level's coarse lattice and its bilinear map Π (n_fine × n_coarse).

    Coarse node (i, j) sits at fine cell ((i − m) r, (j − m) r), r = ``factor``,
    m = :data:`MID_MARGIN`; a fine cell is the bilinear blend of the 4 nodes around it, so
    the level's field at the fine cells is Π g_mid. Returns ((c_y, c_x), Π)."""
    coarse, nodes, weights = mid_stencil(shape, factor)
    n = shape[0] * shape[1]
    pi = sp.csr_matrix((weights.ravel(), (np.repeat(np.arange(n), 4), nodes.ravel())),
                       shape=(n, coarse[0] * coarse[1]))
    return coarse, pi


def mid_stencil(shape: tuple[int, int],
                factor: int) -> tuple[tuple[int, int], np.ndarray, np.ndarray]:
    """((c_y, c_x), nodes (n, 4), weights (n, 4)): the 4 coarse nodes around each fine cell
    (row-major) and their bilinear weights (rows of Π in :func:`mid_lattice`)."""
    r, m = int(factor), MID_MARGIN
    cy, cx = ((n - 1) // r + 2 + 2 * m for n in shape)
    iy, ty = np.arange(shape[0]) // r + m, (np.arange(shape[0]) % r) / r
    ix, tx = np.arange(shape[1]) // r + m, (np.arange(shape[1]) % r) / r
    fy, fx = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    nodes, weights = [], []
    for dy in (0, 1):
        for dx in (0, 1):
            wy = (ty if dy else 1.0 - ty)[fy].ravel()
            wx = (tx if dx else 1.0 - tx)[fx].ravel()
            nodes.append(((iy[fy] + dy) * cx + ix[fx] + dx).ravel())
            weights.append(wy * wx)
    return (cy, cx), np.stack(nodes, axis=1), np.stack(weights, axis=1)


def mid_cross(shape: tuple[int, int], factor: int, coarse: tuple[int, int]) -> sp.coo_matrix:
    """Pattern of the fine–coarse block: fine cell (y, x) with the coarse nodes of its own and
    its 8 neighbours' bilinear stencils (what the exact neighbour covariances need)."""
    r, m = int(factor), MID_MARGIN

    def span(n):  # per fine index: the coarse indices from the stencil of y−1 to that of y+1
        pos = np.arange(n)
        lo = np.maximum(pos - 1, 0) // r + m
        hi = np.minimum(pos + 1, n - 1) // r + m + 1
        return lo, hi

    (ly, hy), (lx, hx) = span(shape[0]), span(shape[1])
    rows, cols = [], []
    for oy in range(4):
        for ox in range(4):
            ok = ((ly + oy) <= hy)[:, None] & ((lx + ox) <= hx)[None, :]
            fy, fx = np.nonzero(ok)
            rows.append(fy * shape[1] + fx)
            cols.append((ly[fy] + oy) * coarse[1] + lx[fx] + ox)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return sp.coo_matrix((np.ones(rows.size), (rows, cols)),
                         shape=(shape[0] * shape[1], coarse[0] * coarse[1]))
