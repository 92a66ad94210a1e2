"""Wavelet statistics of a 2-D raster from per-axis evaluations (issue #14).

For a tensor-product basis φ_(a,b)(y, x) = φ_a(y) φ_b(x) on a regular grid with observation
weights W_ij (1 observed, 0 missing) and values Y_ij:

    r_(a,b)          = Σ_ij φ_a(y_i) W_ij Y_ij φ_b(x_j)        = (Φ_y (W∘Y) Φ_xᵀ)_ab
    G_(a,b),(c,d)    = Σ_ij φ_a(y_i) φ_c(y_i) W_ij φ_b(x_j) φ_d(x_j) = (P_y W P_xᵀ)_(ac),(bd)

with Φ_y (M_y × n_y) the 1-D functions at the row coordinates and P_y (pairs × n_y) the
products φ_a φ_c of the pairs (a, c) of row functions that overlap at some row (likewise for
columns). So G costs sparse–dense–sparse products over the pairs of each axis instead of a
pass over N points with K² = (K_y K_x)² products each, and every sparse matrix is assembled
once from COO. The pattern P = {(m, m′): some observed cell has φ_m φ_m′ ≠ 0} is the same
product with indicators. The result equals
:func:`geogp.features.wavelet_statistics.wavelet_statistics` of the observed cells as scattered
points (tested to 1e-10); the number of G entries, pairs_y × pairs_x, is checked against a memory
limit before anything of that size exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError, MemoryEstimateError
from geogp.features.wavelet_statistics import WaveletStatistics

if TYPE_CHECKING:  # annotations only: the basis module imports this one
    from numpy.typing import ArrayLike

    from geogp.features.wavelet import WaveletBasis

__all__ = ["grid_wavelet_statistics"]


def _axis_pairs(basis1d, coords: np.ndarray):
    """(Φ (M_d × n) CSR, pairs (a, c) with a ≥ c, P (pairs × n) CSR of φ_aφ_c, I (indicator))."""
    rows, vals = basis1d.local_features(coords)
    n, k = rows.shape
    m = basis1d.size
    keep = vals != 0.0
    pt = np.repeat(np.arange(n), k)
    phi = sp.csr_matrix((vals[keep], (rows[keep], pt[keep.ravel()])), shape=(m, n))
    a = np.repeat(rows[:, :, None], k, axis=2)  # (n, k, k)
    c = np.repeat(rows[:, None, :], k, axis=1)
    prod = vals[:, :, None] * vals[:, None, :]
    nonzero = (vals[:, :, None] != 0.0) & (vals[:, None, :] != 0.0) & (a >= c)
    idx_n = np.broadcast_to(np.arange(n)[:, None, None], a.shape)[nonzero]
    key = a[nonzero].astype(np.int64) * m + c[nonzero]
    pair_keys, inverse = np.unique(key, return_inverse=True)
    shape = (pair_keys.size, n)
    P = sp.csr_matrix((prod[nonzero], (inverse, idx_n)), shape=shape)
    ind = sp.csr_matrix((np.ones(inverse.size), (inverse, idx_n)), shape=shape)
    return phi, np.divmod(pair_keys, m), P, ind


def grid_wavelet_statistics(basis: WaveletBasis, axes: Sequence[ArrayLike], values: ArrayLike,
                            max_bytes: float = 4 * 2**30) -> WaveletStatistics:
    """The wavelet statistics of a 2-D raster (module docstring).

    Args:
        basis: a 2-D :class:`WaveletBasis` whose window holds the grid.
        axes: (y coordinates (n_y,), x coordinates (n_x,)) in the basis's (standardised) units.
        values: (n_y, n_x) standardised values, NaN = missing.
        max_bytes: refuse (:class:`MemoryEstimateError`) when G's entries would need more.

    Returns:
        :class:`WaveletStatistics`, equal to those of the observed cells as scattered points.

    Cost: O(n_y K_y² + n_x K_x²) for the pairs, O(pairs_y · n_y · n_x) for the products
    (blocked), O(nnz(G)) for the assembly.
    """
    if basis.n_dims != 2 or len(axes) != 2:
        raise InputError("grid wavelet statistics need a 2-D basis and two axes.")
    ay, ax = (np.asarray(a, dtype=np.float64).ravel() for a in axes)
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (ay.size, ax.size):
        raise InputError(f"values must have shape {(ay.size, ax.size)}; got {v.shape}.")
    obs = np.isfinite(v)
    if not obs.any():
        raise InputError("every cell is missing; nothing to fit.")
    Y, X = np.meshgrid(ay, ax, indexing="ij")
    basis.check_inside(np.stack([Y[obs], X[obs]], axis=1), "the observed cells")
    (phi_y, (ya, yc), Py, Iy), (phi_x, (xb, xd), Px, Ix) = (
        _axis_pairs(b, a) for b, a in zip(basis.dims, (ay, ax), strict=True))
    needed = 4 * 16.0 * ya.size * xb.size
    if needed > max_bytes:
        raise MemoryEstimateError(
            f"grid wavelet statistics ({ya.size} × {xb.size} overlapping pairs of row and "
            "column functions)", needed, max_bytes,
            "Lower j_max (the finest level) or raise max_bytes.")
    w = obs.astype(np.float64)
    wy = np.where(obs, v, 0.0)
    m_x = basis.dims[1].size
    r = np.asarray((phi_y @ sp.csr_matrix(wy) @ phi_x.T).todense()).ravel()
    # G on the pair grid, in blocks of row pairs; keep entries with an observed product
    rows, cols, data = [], [], []
    PxT, IxT = Px.T.tocsc(), Ix.T.tocsc()
    block = max(1, int(2**24 // max(xb.size, 1)))
    for s in range(0, ya.size, block):
        sl = slice(s, s + block)
        g = np.asarray((Py[sl] @ w) @ PxT)
        cnt = np.asarray((Iy[sl] @ w) @ IxT)
        i, j = np.nonzero(cnt > 0.5)
        a, c = ya[sl][i], yc[sl][i]
        b, d = xb[j], xd[j]
        data.append(g[i, j])
        # pair (a ≥ c) × pair (b ≥ d) gives G at ((a,b), (c,d)); with b < d also the entry
        # ((a,d), (c,b)) of the same value (φ_b φ_d is symmetric)
        rows.append(a * m_x + b)
        cols.append(c * m_x + d)
        off = (b != d) & (a != c)  # else ((a,d),(c,b)) is the same unordered pair
        data.append(g[i, j][off])
        rows.append(a[off] * m_x + d[off])
        cols.append(c[off] * m_x + b[off])
    data, rows, cols = (np.concatenate(t) for t in (data, rows, cols))
    # each unordered pair of features exactly once: the lower triangle of G
    lo_r, lo_c = np.maximum(rows, cols), np.minimum(rows, cols)
    M = basis.n_features
    active = np.unique(lo_r[lo_r == lo_c])  # features with an observed cell in their support
    pos = np.full(M, -1, dtype=np.int64)
    pos[active] = np.arange(active.size)
    ma = active.size
    # every entry of the pattern appears once (an observed product), so the CSC conversion
    # keeps exactly the pattern P, entries whose sum cancels included as explicit zeros
    gram = sp.coo_matrix((data, (pos[lo_r], pos[lo_c])), shape=(ma, ma)).tocsc()
    gram.sum_duplicates()
    gram.sort_indices()
    if gram.nnz != data.size:  # pragma: no cover - guards the pair bookkeeping
        raise RuntimeError("grid wavelet statistics: a pair of features was counted twice.")
    yo = v[obs]
    return WaveletStatistics(basis, active, gram, r[active], float(yo @ yo), int(obs.sum()))
