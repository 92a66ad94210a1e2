"""Approximate-Fourier-series (AFS) features: frequency lattices, masks and φ(x) (docs/afs.md).

A :class:`FourierFeatures` object is a fixed set of M real features

    φ_m(x) = ∏_d √2 · {cos | sin}(2π z_{m,d} (x_d − c_d))

on a window of width W_d centred at c_d. Frequencies lie on the **odd lattice**
z = (k + ½)/W_d (default, docs/afs.md (lattices)) or the **full lattice** z = k/(2W_d) (where z = 0
gives the constant row 1). Rows are kept inside the ellipsoid Σ_d (z_d/F_d)² ≤ 1, F_d = K_d/W_d,
built dimension by dimension (Khatri–Rao, docs/afs.md (features and mask)); F_d = K_d/(2W_d) on the
full lattice, whose highest frequency is (K_d − 1)/(2W_d).

The prior precision is diagonal: λ_m = (K_uu⁻¹)_mm = S(|z_m|)/∏_d T_d with T_d = W_d (odd) or
2W_d (full), where S is the kernel's spectral density. Only λ depends on the hyperparameters,
so the statistics ΦΦᵀ and Φy are computed once (docs/bound.md).

Every frequency is stored as an integer or half-integer *numerator* n = z·T_d, so that sums and
differences of frequencies fall on integer bins of the period T_d; :mod:`geogp.features.trig`
uses this to get ΦΦᵀ, Φy and grid predictions from FFTs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np

from geogp.exceptions import InputError, MemoryEstimateError, OutsideWindowError
from geogp.features import fourier_statistics as fs
from geogp.features.data import Grid, Points
from geogp.features.trig import CONST, COS, SIN

if TYPE_CHECKING:  # annotations only
    import jax
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel
    from geogp.features.fourier_statistics import SufficientStats
    from geogp.models.base import Standardizer

__all__ = ["FourierFeatures", "lattice_rows", "window", "DEFAULT_WIDTH_FACTOR"]

# W_d = W_xd / 0.95 (docs/afs.md (window), thesis C.1.6): the narrowest window AFSRegressor
# uses; it widens it for lengthscales that are not ≪ W_x (geogp.models.afs.diagnostics)
DEFAULT_WIDTH_FACTOR = 1 / 0.95


def window(lo: ArrayLike, hi: ArrayLike, window_factor: float,
           margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(centre, width) of the AFS window over the data box [lo, hi] (docs/afs.md, window):
    width = extent · window_factor + 2 · margin · extent per dimension.

    The window must cover the data: ``window_factor`` ≥ 1, and ``margin`` (which may be
    negative only as far as ``window_factor`` leaves room) keeps the width ≥ the extent.
    """
    for name, value in (("window_factor", window_factor), ("margin", margin)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) \
                or not np.isfinite(value):
            raise InputError(f"{name} must be a finite number; got {value!r:.40}.")
    if window_factor < 1:
        raise InputError(f"window_factor must be ≥ 1 (window covers the data); got "
                         f"{window_factor}.")
    if window_factor + 2 * margin < 1:
        raise InputError(f"margin={margin} would shrink the window below the data's extent "
                         f"(window_factor + 2·margin = {window_factor + 2 * margin:.3g} < 1); "
                         "use margin ≥ 0 to widen the window.")
    extent = hi - lo
    return (lo + hi) / 2, extent * window_factor + 2 * margin * extent


def lattice_rows(n_freq: int, lattice: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension rows: (numerators n = z·T, kinds), one entry per real 1-D feature.

    Odd lattice: for k = 0..K−1, rows (cos, k+½) and (sin, k+½): 2K rows.
    Full lattice: the constant row (z = 0), then (cos, k), (sin, k) for k = 1..K−1: 2K − 1 rows.
    """
    if lattice == "odd":
        k = np.arange(n_freq) + 0.5
        num = np.repeat(k, 2)
        kind = np.tile([COS, SIN], n_freq)
    elif lattice == "full":
        k = np.arange(1, n_freq, dtype=np.float64)
        num = np.concatenate([[0.0], np.repeat(k, 2)])
        kind = np.concatenate([[CONST], np.tile([COS, SIN], n_freq - 1)]).astype(int)
    else:
        raise InputError(f"lattice must be 'odd' or 'full'; got {lattice!r}.")
    return num, kind.astype(np.int8)


def _khatri_rao_rows(n_freq, lattice: str) -> np.ndarray:
    """Per-dimension row indices (M, D) of the masked Khatri–Rao product (docs/afs.md, features and
    mask).

    Rows are built one dimension at a time; after adding dimension d, rows whose partial sum
    Σ_{d'≤d} (z_{d'}/F_{d'})² already exceeds 1 are dropped. Partial sums are monotone, so this
    equals masking the full cube, with the same rows in the same order.
    """
    idx = np.zeros((1, 0), dtype=np.int64)
    partial = np.zeros(1)
    for K in n_freq:
        num, _ = lattice_rows(K, lattice)
        # z/F = num/K with F = K/T the highest frequency represented: F = K/W on the odd
        # lattice (z = (k+½)/W), K/(2W) on the full lattice (z = k/(2W))
        ratio2 = (num / K) ** 2
        R = num.size
        new_partial = (partial[:, None] + ratio2[None, :]).ravel()
        new_idx = np.concatenate(
            [np.repeat(idx, R, axis=0), np.tile(np.arange(R), idx.shape[0])[:, None]], axis=1
        )
        keep = new_partial <= 1.0 + 1e-12
        idx, partial = new_idx[keep], new_partial[keep]
    return idx


@dataclass(frozen=True, eq=False)
class FourierFeatures:
    """A fixed AFS feature set on a window.

    Attributes:
        center: (D,) window centre c.
        width: (D,) window width W (predictions are valid inside c ± W/2).
        n_freq: (D,) positive frequencies per dimension K_d.
        lattice: ``"odd"`` or ``"full"``.
        rows: (M, D) per-dimension row index of each feature (into :func:`lattice_rows`).
        numerators: (M, D) z_{m,d}·T_d; kinds: (M, D) COS/SIN/CONST.
    """

    center: np.ndarray
    width: np.ndarray
    n_freq: tuple
    lattice: str
    rows: np.ndarray
    numerators: np.ndarray
    kinds: np.ndarray

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, center: ArrayLike, width: ArrayLike, n_freq: int | Sequence[int],
              lattice: str = "odd", mask: bool = True,
              max_bytes: float = 4 * 2**30) -> FourierFeatures:
        """Features on window (center, width) with K_d = n_freq[d] frequencies per dimension.

        Args:
            center, width: (D,) window centre and width W_d (> 0).
            n_freq: int or (D,) K_d ≥ 1.
            lattice: ``"odd"`` (default, docs/afs.md (lattices)) or ``"full"``.
            mask: keep the ellipsoid Σ(z_d/F_d)² ≤ 1 (default); False keeps the full cube.
            max_bytes: refuse feature sets whose dense M×M statistics would exceed this.
        """
        center = np.atleast_1d(np.asarray(center, dtype=np.float64))
        width = np.atleast_1d(np.asarray(width, dtype=np.float64))
        D = center.size
        n_freq = tuple(int(k) for k in np.broadcast_to(np.asarray(n_freq), (D,)))
        if width.shape != (D,) or np.any(~np.isfinite(width)) or np.any(width <= 0):
            raise InputError(f"window width must be (D,) finite and > 0; got {width}.")
        if min(n_freq) < 1:
            raise InputError(f"n_freq must be ≥ 1 per dimension; got {n_freq}.")
        if mask:
            rows = _khatri_rao_rows(n_freq, lattice)
        else:
            grids = np.meshgrid(*[np.arange(lattice_rows(K, lattice)[0].size) for K in n_freq],
                                indexing="ij")
            rows = np.stack([g.ravel() for g in grids], axis=1)
        M = rows.shape[0]
        needed = 8.0 * M * M
        if needed > max_bytes:
            raise MemoryEstimateError(
                f"{M} Fourier features (dense {M}×{M} statistics)", needed, max_bytes,
                "Reduce n_features, or raise max_bytes if the machine has the memory.",
            )
        num = np.empty(rows.shape)
        kinds = np.empty(rows.shape, dtype=np.int8)
        for d, K in enumerate(n_freq):
            nd, kd = lattice_rows(K, lattice)
            num[:, d], kinds[:, d] = nd[rows[:, d]], kd[rows[:, d]]
        return cls(center, width, n_freq, lattice, rows, num, kinds)

    @classmethod
    def for_budget(cls, center: ArrayLike, width: ArrayLike, n_features: int, lattice: str = "odd",
                   mask: bool = True,
                   **kw: Any) -> FourierFeatures:
        """Features with about ``n_features`` rows (at most), common bandwidth F_d = F.

        Searches the largest common F (cycles per unit) such that K_d = max(1, round(F·W_d))
        gives M ≤ n_features (docs/afs.md (sizing)); the realised M is ``n_features`` attribute.
        """
        width = np.atleast_1d(np.asarray(width, dtype=np.float64))
        if np.any(~np.isfinite(width)) or np.any(width <= 0):
            raise InputError(f"window width must be finite and > 0; got {width}.")
        if n_features < 2 ** width.size:
            raise InputError(f"n_features must be ≥ {2 ** width.size}; got {n_features}.")

        def count(F):
            K = np.maximum(1, np.round(F * width)).astype(int)
            return _khatri_rao_rows(K, lattice).shape[0] if mask else int(
                np.prod([lattice_rows(k, lattice)[0].size for k in K])), K

        lo, hi = 0.0, 1.0
        for _ in range(1100):  # F doubles up to the float range: the search always ends
            if count(hi)[0] > n_features or not np.isfinite(hi * 2):
                break
            lo, hi = hi, hi * 2
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if count(mid)[0] <= n_features else (lo, mid)
        return cls.build(np.asarray(center), width, count(lo)[1], lattice, mask, **kw)

    # ------------------------------------------------------------------ properties
    @property
    def n_features(self) -> int:
        return int(self.rows.shape[0])

    @property
    def n_dims(self) -> int:
        return int(self.center.size)

    @property
    def period(self) -> np.ndarray:
        """(D,) T_d: W_d on the odd lattice, 2W_d on the full lattice."""
        return self.width if self.lattice == "odd" else 2 * self.width

    @property
    def frequencies(self) -> np.ndarray:
        """(M, D) |z_m| in cycles per input unit."""
        return self.numerators / self.period

    @property
    def log_norm(self) -> float:
        """log ∏_d T_d, the constant in λ = S(z)/∏T_d (docs/afs.md, lattices)."""
        return float(np.sum(np.log(self.period)))

    def log_lambda(self, kernel: Kernel) -> jax.Array:
        """log λ_m = log S(|z_m|) − log ∏T_d, shape (M,). Never forms K_uu (docs/bound.md)."""
        return kernel.log_spectral_density(jnp.asarray(self.frequencies)) - self.log_norm

    def describe(self) -> str:
        return (f"{self.n_features} {self.lattice}-lattice Fourier features, "
                f"K = {list(self.n_freq)}, "
                f"window {np.round(self.width, 6).tolist()} centred at "
                f"{np.round(self.center, 6).tolist()}")

    # ------------------------------------------------------------------ evaluation
    def check_inside(self, X: np.ndarray, outside: str = "raise",
                     scaler: Standardizer | None = None) -> np.ndarray:
        """Boolean (N,) mask of points inside the window; raises if any is outside and
        outside='raise'. With the model's ``scaler`` (x_mean, x_scale) the message gives the
        window and the first point outside in the caller's input units."""
        half = self.width / 2
        inside = np.all(np.abs(X - self.center) <= half * (1 + 1e-12), axis=1)
        if outside == "raise" and not inside.all():
            n_out = int((~inside).sum())
            lo, hi, first = self.center - half, self.center + half, X[np.argmin(inside)]
            units = "standardised units"
            if scaler is not None:
                m, s = np.asarray(scaler.x_mean), np.asarray(scaler.x_scale)
                lo, hi, first, units = lo * s + m, hi * s + m, first * s + m, "input units"
            bounds = ", ".join(f"[{a:.6g}, {b:.6g}]" for a, b in zip(lo, hi, strict=True))
            raise OutsideWindowError(
                f"{n_out} prediction point(s) lie outside the feature window where the Fourier "
                f"features are valid ({units}, per dimension: {bounds}; first point outside: "
                f"{[float(f'{v:.6g}') for v in first]}; docs/afs.md, window). Widen the window "
                "(window_factor/margin) when fitting, or pass outside='nan'."
            )
        return inside

    def per_dim_blocks(self, X: ArrayLike) -> list:
        """Per-dimension 1-D feature values: list of (N, R_d) arrays (jax or numpy in → same)."""
        xp = jnp if not isinstance(X, np.ndarray) else np
        blocks = []
        for d, K in enumerate(self.n_freq):
            num, kind = lattice_rows(K, self.lattice)
            ang = 2 * np.pi * (X[:, d:d + 1] - self.center[d]) * (num / self.period[d])[None, :]
            vals = xp.where(kind[None, :] == COS, np.sqrt(2) * xp.cos(ang),
                            xp.where(kind[None, :] == SIN, np.sqrt(2) * xp.sin(ang), 1.0))
            blocks.append(vals)
        return blocks

    def __call__(self, X):
        """Feature matrix Φᵀ of shape (N, M) at X (N, D). Cost O(N M D)."""
        blocks = self.per_dim_blocks(X)
        out = blocks[0][:, self.rows[:, 0]]
        for d in range(1, self.n_dims):
            out = out * blocks[d][:, self.rows[:, d]]
        return out

    # ------------------------------------------------------------------ statistics
    def statistics(self, data: Points | Grid, *, method: str = "nufft",
                   powers: np.ndarray | None = None, gram: str = "dense",
                   diagonal: bool = False, chunk_bytes: float | None = None,
                   dense_block: int | None = None,
                   weights: ArrayLike | None = None) -> SufficientStats:
        """The sufficient statistics of ``data`` for these features, read once (docs/afs.md).

        Args:
            data: :class:`~geogp.features.data.Points` or :class:`~geogp.features.data.Grid`,
                in model (standardised) units; numpy or dask, read chunk by chunk.
            method: points only: ``"nufft"`` (default), ``"direct"`` (the same frequency bins
                summed exactly, the reference) or ``"dense"`` (explicit feature matrices,
                O(N M²)).
            powers: monomial exponents (p, D) of a trend (:mod:`geogp.core.trend`), or None.
            gram: ``"dense"`` (an M × M array) or ``"operator"`` (matrix-free, large M).
            diagonal: grids only: G = N·I by Lemma 3.1 (a complete raster; checked).
            chunk_bytes, dense_block: memory per chunk, and the dense low-frequency block of
                a matrix-free G (defaults of :mod:`geogp.features.fourier_statistics`).
            weights: per-observation weights w > 0 (the shape of ``data``'s values), the
                noise variance σ²/w_i at each; None: ones.

        Returns:
            :class:`~geogp.features.fourier_statistics.SufficientStats`; every route gives the
            same numbers for the same observed cells.
        """
        chunk = fs.DEFAULT_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        block = fs.DEFAULT_DENSE_BLOCK if dense_block is None else dense_block
        if isinstance(data, Grid):
            return fs.grid_stats(self, list(data.axes), data.values, diagonal=diagonal,
                                 chunk_bytes=chunk, powers=powers, gram=gram, dense_block=block,
                                 weights=weights)
        if not isinstance(data, Points):
            raise InputError(f"data must be geogp.features.data.Points or Grid; got "
                             f"{type(data).__name__}.")
        if diagonal:
            raise InputError("diagonal=True (Lemma 3.1) needs a complete Grid, not Points.")
        if method == "dense":
            if gram != "dense":
                raise InputError("method='dense' assembles G densely; use gram='dense'.")
            return fs.dense_stats(self, data.X, data.y, chunk, powers=powers, weights=weights)
        if method not in ("nufft", "direct"):
            raise InputError(f"method must be 'nufft', 'direct' or 'dense'; got {method!r}.")
        return fs.points_stats(self, data.X, data.y, method, chunk, powers=powers, gram=gram,
                               dense_block=block, weights=weights)
