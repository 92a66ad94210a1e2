"""Sparse statistics of scattered data for a wavelet basis (docs/wavelets.md, sparsity and bound).

:func:`wavelet_statistics` reads the points once, chunk by chunk, into
:class:`WaveletStatistics` (G = ΦΦᵀ on its exact pattern, r = Φy, yᵀy, N); callers reach it
through :meth:`geogp.features.wavelet.WaveletBasis.statistics`, which sends rasters to
:mod:`geogp.features.wavelet_grid` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only: the basis module imports this one
    from numpy.typing import ArrayLike

    from geogp.features.wavelet import WaveletBasis

__all__ = ["CHUNK_ENTRIES", "WaveletStatistics", "wavelet_statistics"]

CHUNK_ENTRIES = 2**21  # nonzeros of Φ held at once by the chunked loops
_DENSE_M = 4096  # up to this many features, G is accumulated in a dense M × M array


@dataclass(frozen=True, eq=False)
class WaveletStatistics:
    """Precomputed sparse statistics of the data for the wavelet bound (docs/wavelets.md, sparsity
    and bound).

    Only the M_a *active* features (with data in their support) enter the bound; the others
    decouple and are kept for prediction only.

    Attributes:
        basis: the :class:`WaveletBasis`.
        active: (M_a,) flat indices of the active features, increasing.
        gram: (M_a, M_a) ``scipy.sparse.csc_matrix``, the lower triangle (with diagonal) of
            G = ΦΦᵀ restricted to the active features, stored on exactly the pattern
            P = {(m, m′): ∃n φ_m(x_n) φ_m′(x_n) ≠ 0} (entries of P whose sum cancels are kept
            as explicit zeros). Sorted indices (canonical CSC order).
        r: (M_a,) r = Φy.
        yy: yᵀy.
        n: number of observations N.
    """

    basis: WaveletBasis
    active: np.ndarray = field(repr=False)
    gram: sp.csc_matrix = field(repr=False)
    r: np.ndarray = field(repr=False)
    yy: float
    n: int

    @property
    def n_active(self) -> int:
        return int(self.active.size)

    @property
    def position(self) -> np.ndarray:
        """(M,) position of each feature in the active set, −1 for pruned features."""
        pos = np.full(self.basis.n_features, -1, dtype=np.int64)
        pos[self.active] = np.arange(self.active.size)
        return pos


def wavelet_statistics(basis: WaveletBasis, X: ArrayLike, y: ArrayLike,
                       chunk_size: int | None = None
                       ) -> WaveletStatistics:
    """Accumulate G = ΦΦᵀ (on its exact pattern), r = Φy, yᵀy and N over chunks of the data.

    Points in the same finest dyadic cell (⌊2^{j_max} x_d⌋ for every d) meet exactly the same
    K basis functions at every level, because dyadic cells nest. Such a group's columns of Φ
    form a dense K × n_g block Φ_g with shared rows, and its contribution Φ_g Φ_gᵀ is one dense
    matrix product (BLAS). Points in sparsely populated cells go through sparse products.

    Args:
        basis: the wavelet basis.
        X: (N, D) inputs inside the basis window (standardised units).
        y: (N,) targets (standardised).
        chunk_size: points per block; default keeps about 2^21 values of Φ in memory. The
            result does not depend on it beyond floating-point summation order.

    Returns:
        :class:`WaveletStatistics`.

    Cost: O(N·K²) flops (K = nonzeros per column of Φ, dense products for well-filled cells)
    and O(nnz(P) + chunk·K + cells·K²) memory.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise InputError(f"expected X (N, D) and y (N,); got shapes {X.shape} and {y.shape}.")
    basis.check_inside(X)
    n, m = X.shape[0], basis.n_features
    step = basis.chunk_size(n, chunk_size)
    acc = _Accumulator(m)
    # group the points by finest dyadic cell
    j_max = basis.dims[0].j_max
    cells = np.floor(np.ldexp(X, j_max)).astype(np.int64)
    cells -= cells.min(axis=0)
    cell_id = np.ravel_multi_index(tuple(cells.T), tuple(cells.max(axis=0) + 1))
    order = np.argsort(cell_id, kind="stable")
    bounds = np.flatnonzero(np.diff(cell_id[order])) + 1
    starts = np.concatenate([[0], bounds])
    sizes = np.diff(np.concatenate([starts, [n]]))
    # a cell with fewer points than this goes through sparse products (per-cell overhead)
    dense_min = 1 + 2500 // basis.max_local**2
    sparse_pts = [order[s:s + c] for s, c in zip(starts, sizes, strict=True) if c < dense_min]
    for s, c in zip(starts, sizes, strict=True):
        if c >= dense_min:
            for b in range(s, s + c, step):
                acc.add_dense_block(basis, X, y, order[b:min(b + step, s + c)])
    if sparse_pts:
        sparse_pts = np.concatenate(sparse_pts)
        for b in range(0, sparse_pts.size, step):
            acc.add_sparse_chunk(basis, X, y, sparse_pts[b:b + step])
    gram, count, r = acc.result()
    active = np.flatnonzero(count.diagonal() > 0)
    count = sp.tril(count[active][:, active]).tocsc()
    gram = sp.tril(gram[active][:, active]).tocsc()
    count.sort_indices()
    gram.sort_indices()
    # values of G placed on the pattern of `count` (G's own pattern may have lost cancelled sums)
    ma = active.size
    key_p = _csc_keys(count, ma)
    key_g = _csc_keys(gram, ma)
    vals = np.zeros(count.nnz)
    vals[np.searchsorted(key_p, key_g)] = gram.data
    g_on_p = sp.csc_matrix((vals, count.indices.copy(), count.indptr.copy()), shape=(ma, ma))
    return WaveletStatistics(basis, active, g_on_p, r[active], float(y @ y), int(n))


class _Accumulator:
    """Running sums of G, of the pattern counts Σ_n 1[φ_m(x_n)φ_m′(x_n) ≠ 0], and of r."""

    def __init__(self, m: int):
        self.m = m
        self.gram = sp.csr_matrix((m, m))
        self.count = sp.csr_matrix((m, m))  # positive on P: no cancellation
        self.r = np.zeros(m)
        self._triplets: list = []
        self._pending = 0
        # small bases: dense blocks are scattered straight into dense M × M sums
        self._dense = (np.zeros((m, m)), np.zeros((m, m), dtype=bool)) if m <= _DENSE_M else None

    def add_sparse_chunk(self, basis, X, y, idx):
        phi = basis.feature_matrix(X[idx])  # (M, n_c) CSC
        ones = phi.copy()
        ones.data[:] = 1.0
        self.gram = self.gram + (phi @ phi.T).tocsr()
        self.count = self.count + (ones @ ones.T).tocsr()
        self.r += phi @ y[idx]

    def add_dense_block(self, basis, X, y, idx):
        rows, vals = basis.local_features(X[idx])  # every row equal: one dyadic cell
        feat = rows[0]
        if not np.array_equal(rows[-1], feat):  # pragma: no cover - guards the cell grouping
            raise RuntimeError("points grouped in one dyadic cell meet different features.")
        self.r[feat] += vals.T @ y[idx]
        g = vals.T @ vals  # (K, K) dense block of ΦΦᵀ
        nonzero = vals != 0.0
        if nonzero.all():
            hit = None  # the whole K × K block is on P
        else:
            nz = nonzero.astype(np.float64)
            hit = (nz.T @ nz) > 0
        if self._dense is not None:
            block = np.ix_(feat, feat)
            self._dense[0][block] += g
            self._dense[1][block] |= True if hit is None else hit
            return
        lower = feat[:, None] >= feat[None, :]
        keep = lower if hit is None else lower & hit
        i, j = np.nonzero(keep)
        self._triplets.append((feat[i], feat[j], g[i, j]))
        self._pending += i.size
        if self._pending > CHUNK_ENTRIES:
            self._flush()

    def _flush(self):
        if not self._triplets:
            return
        ri, rj, v = (np.concatenate(t) for t in zip(*self._triplets, strict=True))
        shape = (self.m, self.m)
        lower = sp.coo_matrix((v, (ri, rj)), shape=shape).tocsr()  # sums duplicates
        ones = sp.coo_matrix((np.ones_like(v), (ri, rj)), shape=shape).tocsr()
        # the blocks hold the lower triangle only; symmetrise for the running sums
        self.gram = self.gram + lower + sp.tril(lower, -1).T.tocsr()
        self.count = self.count + ones + sp.tril(ones, -1).T.tocsr()
        self._triplets, self._pending = [], 0

    def result(self):
        self._flush()
        if self._dense is not None:
            g, hit = self._dense
            rows, cols = np.nonzero(hit)
            shape = (self.m, self.m)
            self.gram = self.gram + sp.csr_matrix((g[rows, cols], (rows, cols)), shape=shape)
            self.count = self.count + sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=shape)
        return self.gram, self.count, self.r


def _csc_keys(mat: sp.csc_matrix, n_rows: int) -> np.ndarray:
    """Linear keys col·n_rows + row of a canonical CSC matrix (increasing)."""
    cols = np.repeat(np.arange(mat.shape[1], dtype=np.int64), np.diff(mat.indptr))
    return cols * n_rows + mat.indices.astype(np.int64)
