"""Multiresolution (wavelet) features: basis layout and sparse Φ (docs/wavelets.md).

Per input dimension the basis is (docs/wavelets.md (basis), thesis eq. 4.22, truncated at ``j_max``)

    v(2^ι x − t)            for every shift t whose support meets the window,
    w(2^j x − t)            for ι ≤ j ≤ j_max and every such shift t,

with the support of v(2^j x − t) and w(2^j x − t) equal to [2^{-j}t, 2^{-j}(t + 2p − 1)]. The shifts
of level j are t ∈ {⌊2^j x_lo⌋ − 2p + 2, …, ⌊2^j x_hi⌋}: the range of docs/wavelets.md (basis), plus
(when 2^j x_hi is an integer) the one shift whose support starts at x_hi, which the half-open Haar
functions need to cover x_hi itself. The functions are *unit amplitude*; the model rescales λ
for the L²-normalised convention. In D dimensions the basis is the tensor product of the
per-dimension bases (docs/wavelets.md, basis), with flat index m = Σ_d m_d·∏_{d'>d} M_{d'}
(C order), so Φ is the Khatri–Rao product of the per-dimension blocks.

Every point meets at most (2p − 1) shifts per level and function type, so a column of Φ has at
most K = [(2p − 1)(j_max − ι + 2)]^D nonzeros (docs/wavelets.md, sparsity and bound).

Example:
    >>> import numpy as np
    >>> basis = make_basis("haar", iota=-1, j_max=1, window=[[0.0, 1.0]])
    >>> Phi = basis.feature_matrix(np.array([[0.1], [0.6]]))
    >>> Phi.shape, Phi.nnz  # 1 scaling + 3 wavelet levels, one shift each per point
    ((7, 2), 8)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError, OutsideWindowError
from geogp.features.data import Grid, Points
from geogp.features.wavelet_basis import WaveletTable, wavelet_table
from geogp.features.wavelet_grid import grid_wavelet_statistics
from geogp.features.wavelet_statistics import CHUNK_ENTRIES, WaveletStatistics, wavelet_statistics

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = [
    "WaveletBasis1D",
    "WaveletBasis",
    "make_basis",
]


@dataclass(frozen=True, eq=False)
class WaveletBasis1D:
    """The 1-D basis of one input dimension.

    Attributes:
        table: the tabulated mother functions.
        iota: canonical scale ι.
        j_max: finest wavelet level.
        lo, hi: the window [lo, hi] in (standardised) input units.
        kind: (M_d,) 0 for a scaling function, 1 for a wavelet.
        level: (M_d,) scale j of each function (ι for the scaling functions).
        shift: (M_d,) shift t of each function.
        blocks: one ``(kind, level, t_min, offset)`` per function type and level, in index order.
    """

    table: WaveletTable
    iota: int
    j_max: int
    lo: float
    hi: float
    kind: np.ndarray = field(repr=False)
    level: np.ndarray = field(repr=False)
    shift: np.ndarray = field(repr=False)
    blocks: tuple = field(repr=False)

    @property
    def size(self) -> int:
        """Number M_d of functions in this dimension."""
        return int(self.kind.size)

    @property
    def max_local(self) -> int:
        """Most functions nonzero at one point: (2p − 1)(j_max − ι + 2)."""
        return self.table.support * len(self.blocks)

    @classmethod
    def build(cls, table: WaveletTable, iota: int, j_max: int, lo: float,
              hi: float) -> WaveletBasis1D:
        """Lay out the scaling block at ι and the wavelet blocks ι … j_max. Cost O(M_d)."""
        kinds, levels, shifts, blocks, offset = [], [], [], [], 0
        for kind, j in [(0, iota)] + [(1, j) for j in range(iota, j_max + 1)]:
            t_min = math.floor(math.ldexp(lo, j)) - table.support + 1
            t_max = math.floor(math.ldexp(hi, j))
            count = t_max - t_min + 1
            blocks.append((kind, j, t_min, offset))
            kinds.append(np.full(count, kind, dtype=np.int64))
            levels.append(np.full(count, j, dtype=np.int64))
            shifts.append(np.arange(t_min, t_max + 1, dtype=np.int64))
            offset += count
        return cls(table, iota, j_max, float(lo), float(hi), np.concatenate(kinds),
                   np.concatenate(levels), np.concatenate(shifts), tuple(blocks))

    def local_features(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Indices and values of the functions that can be nonzero at each point.

        Args:
            x: (N,) points inside [lo, hi].

        Returns:
            ``(rows, vals)``, each (N, max_local): the function indices (distinct within a
            row) and their values; some values may be exactly 0.

        Cost: O(N·max_local).
        """
        x = np.asarray(x, dtype=np.float64)
        k = np.arange(self.table.support)
        rows, vals = [], []
        for kind, j, t_min, offset in self.blocks:
            y = np.ldexp(x, j)  # exact: 2^j x
            fl = np.floor(y)
            t = fl[:, None] - k[None, :]  # shifts t = ⌊y⌋ − k, whose support [t, t+2p−1) holds y
            u = (y - fl)[:, None] + k[None, :]  # y − t
            f = self.table.scaling(u) if kind == 0 else self.table.wavelet(u)
            rows.append(offset + (t - t_min).astype(np.int64))
            vals.append(f)
        return np.concatenate(rows, axis=1), np.concatenate(vals, axis=1)


@dataclass(frozen=True, eq=False)
class WaveletBasis:
    """Tensor-product wavelet basis over D ≤ 3 input dimensions (docs/wavelets.md (basis,
    coefficients)).

    Attributes:
        dims: one :class:`WaveletBasis1D` per input dimension.
    """

    dims: tuple

    @property
    def n_dims(self) -> int:
        return len(self.dims)

    @property
    def sizes(self) -> tuple:
        """(M_1, …, M_D)."""
        return tuple(b.size for b in self.dims)

    @property
    def n_features(self) -> int:
        """M = ∏_d M_d."""
        return int(np.prod(self.sizes))

    @property
    def max_local(self) -> int:
        """K: most nonzeros in one column of Φ."""
        return int(np.prod([b.max_local for b in self.dims]))

    @property
    def window(self) -> np.ndarray:
        """(D, 2) window [lo_d, hi_d] per dimension."""
        return np.array([[b.lo, b.hi] for b in self.dims])

    def unravel(self, m: np.ndarray) -> np.ndarray:
        """Per-dimension indices (D, len(m)) of flat feature indices m."""
        return np.stack(np.unravel_index(np.asarray(m, dtype=np.int64), self.sizes))

    def check_inside(self, X: np.ndarray, what: str = "X") -> None:
        """Raise :class:`OutsideWindowError` unless every point of X (N, D) lies in the window."""
        if X.ndim != 2 or X.shape[1] != self.n_dims:
            raise InputError(
                f"{what} must have shape (N, {self.n_dims}) for this {self.n_dims}-D basis; "
                f"got shape {X.shape}."
            )
        win = self.window
        out = (X < win[:, 0]) | (X > win[:, 1])
        if out.any():
            n, d = np.argwhere(out)[0]
            raise OutsideWindowError(
                f"{int(out.any(axis=1).sum())} point(s) of {what} lie outside the wavelet window "
                f"(first: point {n}, dimension {d}, value {X[n, d]:.6g} not in "
                f"[{win[d, 0]:.6g}, {win[d, 1]:.6g}], standardised units). The finite prior is "
                "zero beyond the window: widen it (the model's `margin`) and refit."
            )

    def local_features(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Khatri–Rao combination of the per-dimension local features.

        Args:
            X: (N, D) points inside the window.

        Returns:
            ``(rows, vals)``: rows (N, K) flat feature indices (distinct within a row) and
            vals (N, K) values ∏_d φ_{m_d}(x_d); some values may be exactly 0.

        Cost: O(N·K) time and memory.
        """
        self.check_inside(X)
        n = X.shape[0]
        rows = np.zeros((n, 1), dtype=np.int64)
        vals = np.ones((n, 1))
        for d, b in enumerate(self.dims):
            r, v = b.local_features(X[:, d])
            k = rows.shape[1] * r.shape[1]  # explicit: reshape(0, -1) is ambiguous
            rows = (rows[:, :, None] * b.size + r[:, None, :]).reshape(n, k)
            vals = (vals[:, :, None] * v[:, None, :]).reshape(n, k)
        return rows, vals

    def chunk_size(self, n: int, chunk_size: int | None = None) -> int:
        """Points per chunk so that a chunk of Φ holds about 2^21 nonzeros (or ``chunk_size``)."""
        if chunk_size is None:
            chunk_size = max(1, CHUNK_ENTRIES // self.max_local)
        if int(chunk_size) < 1:
            raise InputError(f"chunk_size must be a positive integer; got {chunk_size!r}.")
        return min(int(chunk_size), max(n, 1))

    def feature_matrix(self, X: np.ndarray) -> sp.csc_matrix:
        """Sparse Φ (M, N) with Φ[m, n] = φ_m(x_n); explicit zeros removed.

        Args:
            X: (N, D) points inside the window (standardised units).

        Returns:
            ``scipy.sparse.csc_matrix`` of shape (M, N) with sorted indices.

        Cost: O(N·K) time and memory.
        """
        X = np.asarray(X, dtype=np.float64)
        rows, vals = self.local_features(X)
        return _columns_to_csc(rows, vals, self.n_features)


    def statistics(self, data: Points | Grid, *, chunk_size: int | None = None,
                   max_bytes: float = 4 * 2**30) -> WaveletStatistics:
        """The sufficient statistics of ``data`` for this basis, read once (docs/wavelets.md).

        Args:
            data: :class:`~geogp.features.data.Points` (any D) or a 2-D
                :class:`~geogp.features.data.Grid` (NaN = missing), in the basis's
                (standardised) units.
            chunk_size: points per chunk (points only; default: about 2^21 nonzeros of Φ).
            max_bytes: grids only: refuse before allocating G's entries above this.

        Returns:
            :class:`WaveletStatistics`. A grid's statistics equal those of its observed cells
            as points (:func:`wavelet_statistics`); the grid route uses the separable basis
            (:mod:`geogp.features.wavelet_grid`).
        """
        if isinstance(data, Grid):
            return grid_wavelet_statistics(self, data.axes, data.values, max_bytes)
        if not isinstance(data, Points):
            raise InputError(f"data must be geogp.features.data.Points or Grid; got "
                             f"{type(data).__name__}.")
        return wavelet_statistics(self, data.X, data.y, chunk_size)


def _columns_to_csc(rows: np.ndarray, vals: np.ndarray, n_rows: int) -> sp.csc_matrix:
    """CSC matrix whose column n holds vals[n] at rows[n] (distinct), dropping exact zeros."""
    n, _k = rows.shape
    keep = vals != 0.0
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    mat = sp.csc_matrix((vals[keep], rows[keep], indptr), shape=(n_rows, n))
    mat.sort_indices()
    return mat


def make_basis(family: str, iota: int, j_max: int, window: ArrayLike,
               level: int = 12) -> WaveletBasis:
    """Build the tensor-product wavelet basis on a window.

    Args:
        family: ``"haar"`` or ``"db1"`` … ``"db8"``.
        iota: canonical scale ι (coarsest level; support width (2p − 1)·2^{-ι}).
        j_max: finest wavelet level, ≥ ι.
        window: (D, 2) array of [lo, hi] per dimension, lo < hi, D ≤ 3.
        level: cascade level of the tabulated functions (docs/wavelets.md, basis).

    Returns:
        A :class:`WaveletBasis`.

    Cost: O(Σ_d M_d) with M_d ≈ Σ_j (2^j (hi − lo) + 2p − 1).
    """
    if int(iota) != iota or int(j_max) != j_max:
        raise InputError(f"iota and j_max must be integers; got iota={iota!r}, j_max={j_max!r}.")
    iota, j_max = int(iota), int(j_max)
    if j_max < iota:
        raise InputError(
            f"j_max ({j_max}) must be ≥ iota ({iota}): the wavelet levels run from ι to j_max."
        )
    if j_max - iota > 20:
        raise InputError(f"j_max − iota = {j_max - iota} levels is too many; use at most 20.")
    win = np.asarray(window, dtype=np.float64)
    if win.ndim != 2 or win.shape[1] != 2 or not 1 <= win.shape[0] <= 3:
        raise InputError(f"window must have shape (D, 2) with D ≤ 3; got shape {win.shape}.")
    if not np.all(np.isfinite(win)) or np.any(win[:, 1] <= win[:, 0]):
        raise InputError(f"window rows must be finite [lo, hi] with lo < hi; got {win.tolist()}.")
    table = wavelet_table(family, level)
    dims = tuple(WaveletBasis1D.build(table, iota, j_max, lo, hi) for lo, hi in win)
    return WaveletBasis(dims)
