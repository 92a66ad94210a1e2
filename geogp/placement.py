"""Active sensor placement: suggest where to measure next (SPEC.md §7).

Given a fitted model (hyperparameters fixed), candidate locations V_c and target locations T,
:func:`suggest_sites` picks k sites one at a time (greedy). Covariances of a conjugate Gaussian
model do not depend on the observed values, so no value is needed for a suggested site and a
batch of q suggestions is exactly q greedy steps.

Everything happens in whitened feature space (SPEC.md §3). With ψ = λ^{1/2} ⊙ φ and
A = I + σ⁻² Σ_n ψ_n ψ_nᵀ over the data, the latent posterior covariance is

    C(x, x') = k(x, x') − ψ(x)ᵀψ(x') + ψ(x)ᵀ A⁻¹ ψ(x'),

and measuring at x_a adds σ⁻²ψ_aψ_aᵀ to A. With w = A⁻¹ψ_a and d = σ² + ψ_aᵀw, one step is

    A⁻¹ ← A⁻¹ − w wᵀ/d                           (Sherman–Morrison, O(M²))
    C   ← C − g gᵀ/d,     g(x) = ψ(x)ᵀ w          (SPEC.md §7, s_a = d)

which reproduces the collapsed posterior recomputed with the site added (tests check it to
1e-10). Candidates are scored in batches from maintained vectors: h_c = ψ_cᵀA⁻¹ψ_c, the
target diagonal C_T,ii and, for the thesis criterion, X = Ψ_Tᵀ A⁻¹ Ψ_c (|T| × |V_c|).

Strategies (standardised units; σ² the noise variance):

==========  ============================================================  =====================
strategy    score of candidate a                                           per step
==========  ============================================================  =====================
variance    var_y(a) = C_aa + σ² (max predictive variance / entropy)        O(M² + |V_c| e)
mi          thesis (§4.4.2.2): ½ log|C_T + σ²I| − ½ log|C_T^{(a)} + σ²I|    O(M² + |V_c|(e + |T|))
            marginal (default): −½ Σ_i log(1 − g_i²/(d (C_ii + σ²)))
            joint: −½ log(1 − gᵀ(C_T + σ²I)⁻¹g/d), Y = (C_T + σ²I)⁻¹X kept
krause      Krause et al. (2008): H(y_a | A) − H(y_a | V∖(A ∪ a))           O(M² + |V_c| e), or
                                                                            O(M² + b M²) lazy
==========  ============================================================  =====================

(e is the cost of evaluating one linear form ψᵀw at all candidates: a dense product for small
problems, separable products of 1-D features on grids, a planned type-2 NUFFT at scattered
points; b is the number of lazy re-evaluations.) The joint criterion keeps Y = (C_T + σ²I)⁻¹X
by the rank-one identity Y ← Y + p (Yᵀu − v)ᵀ/e, p = (C_T + σ²I)⁻¹u, e = d − uᵀp, so it costs
O(|T||V_c|) per step too; it needs C_T + σ²I positive definite, which AFS does not guarantee
(k − k̂ need not be PSD), hence the marginal default.

Krause's mutual information uses the model's finite-rank covariance ψᵀA⁻¹ψ (the AFS implied
kernel conditioned on the data) and the feature-space form of its "rest of V" term:
with E = A + σ⁻² Σ_{c ∈ V∖A} ψ_cψ_cᵀ and q_a = ψ_aᵀE⁻¹ψ_a, σ²_{a|Ā} = σ⁴/(σ² − q_a), and
selecting a downdates E by σ⁻²ψ_aψ_aᵀ. The gain is submodular, so lazy greedy (a heap of
stale upper bounds, SPEC.md §7) returns the plain greedy picks.

The exact GP (:class:`geogp.models.exact.ExactGP`) enters the same machinery through
explicit features of its posterior covariance on V_c ∪ T (an eigendecomposition, O(|V_c ∪ T|³)),
for small candidate sets. The wavelet model is not supported yet.

Example:
    >>> import numpy as np, geogp
    >>> from geogp.models.afs import AFSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 10, (60, 2)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    >>> model = AFSRegressor(n_features=100, margin=0.2, maxiter=30).fit(X, y)
    >>> grid = Candidates.grid([np.linspace(0, 10, 21), np.linspace(0, 10, 21)])
    >>> sites = suggest_sites(model, grid, 3, strategy="variance")
    >>> list(sites.columns[:4])
    ['order', 'index', 'x', 'y']
"""

from __future__ import annotations

import contextlib
import heapq
import json
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import pandas as pd
import scipy.linalg as sla

from geogp._validation import as_points
from geogp.exceptions import InputError, NotPositiveDefiniteError, OutputExistsError
from geogp.features import trig
from geogp.features.fourier import lattice_rows
from geogp.models.collapsed import Posterior

__all__ = [
    "STRATEGIES",
    "CRITERIA",
    "Candidates",
    "FeaturePosterior",
    "add_observations",
    "suggest_sites",
    "to_geojson",
    "write_geojson",
    "write_csv",
    "plot_sites",
]

STRATEGIES = ("variance", "mi", "krause")
CRITERIA = ("marginal", "joint")

def _rank1(Mat, x, y, alpha: float) -> None:
    """Mat ← Mat + α x yᵀ in place (BLAS dger on the Fortran view; no M×M temporary)."""
    if Mat.flags.c_contiguous and Mat.dtype == np.float64:
        out = sla.blas.dger(alpha, y, x, a=Mat.T, overwrite_a=1)
        if np.shares_memory(out, Mat):
            return
    Mat += alpha * np.outer(x, y)


_DENSE_LIMIT = 2**23  # |V_c|·M below this: candidate features kept as one dense matrix (64 MB)
_BLOCK = 2**24  # elements per block of batched evaluations (128 MB)
_Z_MAX = 1.0 - 1e-15  # squared correlations are < 1; clip rounding overshoot before log1p


# =========================================================================== locations
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
    def points(cls, X) -> Candidates:
        """Scattered locations X (N, D)."""
        return cls(as_points(X, "candidate locations"))

    @classmethod
    def grid(cls, axes, mask=None) -> Candidates:
        """Cells of the tensor grid ``axes`` (D vectors), optionally only where ``mask`` is True.

        Args:
            axes: D coordinate vectors (N_d,), in the model's column order.
            mask: None (every cell) or a boolean array of shape (N_1, ..., N_D).
        """
        axes = tuple(np.asarray(a, dtype=np.float64).ravel() for a in axes)
        shape = tuple(a.size for a in axes)
        if not axes or min(shape) == 0:
            raise InputError(f"grid axes must be non-empty vectors; got lengths {list(shape)}.")
        if not all(np.all(np.isfinite(a)) for a in axes):
            raise InputError("grid axes contain NaN/inf coordinates; they must be finite.")
        if mask is None:
            flat = np.arange(int(np.prod(shape)))
        else:
            mask = np.asarray(mask)
            if mask.shape != shape:
                raise InputError(f"mask has shape {mask.shape} but the grid axes give {shape}; "
                                 "they must match (same dimension order).")
            flat = np.flatnonzero(mask.astype(bool).ravel())
        if flat.size == 0:
            raise InputError("the candidate mask selects no cell; nothing to choose from.")
        idx = np.unravel_index(flat, shape)
        coords = np.stack([a[i] for a, i in zip(axes, idx)], axis=1)
        return cls(coords, axes, flat)

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    @property
    def n_dims(self) -> int:
        return int(self.coords.shape[1])

    def thin(self, max_n: int, seed: int = 0) -> tuple[Candidates, bool]:
        """At most ``max_n`` locations: a regular stride on grids, else a seeded random subset.

        Returns (locations, whether any were dropped). The result is always scattered points.
        """
        n = len(self)
        if n <= max_n:
            return Candidates(self.coords), False
        keep = None
        if self.axes is not None:
            shape = tuple(a.size for a in self.axes)
            idx = np.unravel_index(self.flat, shape)
            step = int(math.ceil((n / max_n) ** (1 / len(shape))))
            while keep is None or keep.sum() > max_n:
                keep = np.all([i % step == step // 2 for i in idx], axis=0)
                step += 1
            keep = np.flatnonzero(keep)
        if keep is None or keep.size == 0:
            keep = np.sort(np.random.default_rng(seed).choice(n, size=max_n, replace=False))
        return Candidates(self.coords[keep]), True


def _as_candidates(obj, name: str) -> Candidates:
    if isinstance(obj, Candidates):
        return obj
    if isinstance(obj, pd.DataFrame):
        obj = obj.to_numpy()
    try:
        return Candidates.points(obj)
    except InputError as err:
        raise InputError(f"{name}: {err}") from None


# =========================================================================== feature posterior
class FeaturePosterior:
    """Whitened AFS posterior, updated by rank-one steps instead of refits (SPEC.md §3, §7).

    With ψ = λ^{1/2} ⊙ φ, A = I + σ⁻² Σ_n ψ_nψ_nᵀ and t = σ⁻² Σ_n ψ_n y_n:
    mean(x) = ψᵀA⁻¹t and var_f(x) = k(0) − ‖ψ‖² + ψᵀA⁻¹ψ (standardised units; the residual
    after any mean function).

    Attributes:
        sqrt_lam: (M,) λ^{1/2}. Ainv: (M, M) A⁻¹, updated in place. t: (M,). noise: σ².
        kvar0: k(0). A (property): the precision, formed on demand as A₀ + σ⁻² Σ_added ψψᵀ.
    """

    def __init__(self, sqrt_lam, A, Ainv, t, noise: float, kvar0: float):
        self.sqrt_lam = np.asarray(sqrt_lam, dtype=np.float64)
        self._A0 = A  # an array, or a callable giving it (formed only when needed)
        self._added = []
        self.Ainv = np.array(Ainv, dtype=np.float64)
        self.t = np.array(t, dtype=np.float64)
        self.noise = float(noise)
        self.kvar0 = float(kvar0)

    @classmethod
    def from_model(cls, model) -> FeaturePosterior:
        """The posterior of a fitted :class:`~geogp.models.afs.AFSRegressor`. Cost O(M³)."""
        post = model.posterior_
        sl = np.asarray(post.sqrt_lam, dtype=np.float64)
        chol = np.asarray(post.chol, dtype=np.float64)
        if chol.ndim == 1:  # diagonal statistics: chol holds sqrt(diag A)
            A, Ainv = np.diag(chol**2), np.diag(1.0 / chol**2)
        else:
            A = lambda: chol @ chol.T  # noqa: E731  (O(M³): only for A itself, rarely needed)
            Ainv = _inverse_from_cholesky(chol)
        resid = getattr(model, "_residual_stats", None)
        stats = resid() if callable(resid) else model.stats_
        t = sl * np.asarray(stats.r, dtype=np.float64) / post.noise  # t = σ⁻² Λ½ r
        return cls(sl, A, Ainv, t, post.noise, post.kvar0)

    def add(self, psi, y=None) -> tuple[np.ndarray, float]:
        """Absorb one observation with features ψ (M,) and optional value y. Cost O(M²).

        Returns (w, d) with w = A⁻¹ψ and d = σ² + ψᵀw, taken before the update.
        """
        psi = np.asarray(psi, dtype=np.float64)
        w = self.Ainv @ psi
        d = self.noise + psi @ w
        _rank1(self.Ainv, w, w, -1.0 / d)  # A⁻¹ ← A⁻¹ − wwᵀ/d
        self._added.append(psi.copy())  # A ← A + σ⁻²ψψᵀ, applied when A is formed
        if y is not None:
            self.t += psi * (float(y) / self.noise)  # t ← t + σ⁻²ψy
        return w, d

    @property
    def A(self) -> np.ndarray:
        """A = A₀ + σ⁻² Σ ψψᵀ over the added points, (M, M). Cost O(M² k) (+ O(M³) once)."""
        A = np.array(self._A0() if callable(self._A0) else self._A0, dtype=np.float64)
        if self._added:
            P = np.asarray(self._added)
            A += P.T @ P / self.noise
        return A

    def mean(self, Psi) -> np.ndarray:
        """Posterior mean ψᵀA⁻¹t at rows of Psi (N, M). Cost O(NM + M²)."""
        return np.asarray(Psi) @ (self.Ainv @ self.t)

    def var_latent(self, Psi) -> np.ndarray:
        """Latent variance k(0) − ‖ψ‖² + ψᵀA⁻¹ψ at rows of Psi (N, M). Cost O(NM²)."""
        Psi = np.asarray(Psi)
        return self.kvar0 - np.sum(Psi**2, axis=1) + np.sum((Psi @ self.Ainv) * Psi, axis=1)

    def posterior(self) -> Posterior:
        """The :class:`~geogp.models.collapsed.Posterior` of the current state. Cost O(M³)."""
        sl = self.sqrt_lam
        quad = sl[:, None] * self.Ainv * sl[None, :]  # Q = Λ½A⁻¹Λ½ − Λ
        quad[np.diag_indices_from(quad)] -= sl**2
        quad = 0.5 * (quad + quad.T)
        weights = sl * (self.Ainv @ self.t)
        A = self.A
        chol = np.linalg.cholesky(0.5 * (A + A.T))
        return Posterior(sl, weights, quad, chol, self.noise, self.kvar0)


def _inverse_from_cholesky(L) -> np.ndarray:
    """A⁻¹ from the lower Cholesky factor L of A. Cost O(M³)."""
    L = np.asarray(L, dtype=np.float64)
    inv = sla.cho_solve((L, True), np.eye(L.shape[0]))
    return 0.5 * (inv + inv.T)


def _check_afs(model) -> None:
    if not hasattr(model, "features_") or not hasattr(model, "posterior_"):
        raise InputError(f"expected a fitted AFSRegressor (or ExactGP); got {type(model).__name__}"
                         " without fitted state. Call fit() or fit_grid() first; the wavelet "
                         "model is not supported for placement yet.")


def _afs_psi(model, X, what: str) -> np.ndarray:
    """ψ (N, M) at X in the model's input units; raises for points outside the window."""
    Xs = model.scaler_.x(X)
    try:
        model.features_.check_inside(Xs, "raise")
    except InputError as err:
        raise type(err)(f"{what}: {err}") from None
    return np.asarray(model.features_(Xs)) * np.asarray(model.posterior_.sqrt_lam)


def add_observations(model, X, y=None):
    """A copy of a fitted AFS model with observations added, without refitting.

    Hyperparameters, features, standardisation and mean function are kept; the posterior is
    updated by one rank-one step per point (SPEC.md §7) and the statistics by the points'
    φφᵀ and φy. Without ``y`` the values are imputed by the predictive mean: only the
    covariance changes (the mean stays the same).

    Args:
        model: fitted :class:`~geogp.models.afs.AFSRegressor`.
        X: (N, D) locations in the model's input units. y: (N,) values or None.

    Returns:
        A shallow copy with updated ``posterior_`` and ``stats_``. Cost O(M³ + N M²).
    """
    import copy

    from geogp.stats import SufficientStats, dense_stats

    _check_afs(model)
    X = as_points(X, "X (new observations)")
    Psi = _afs_psi(model, X, "new observations")
    sc = model.scaler_
    fp = FeaturePosterior.from_model(model)
    trend = np.zeros(X.shape[0])
    if getattr(model, "beta_", None) is not None:
        from geogp.trend import basis

        trend = basis(sc.x(X), model.powers_) @ model.beta_
    if y is not None:
        y = np.asarray(y, dtype=np.float64).ravel()
        if y.shape != (X.shape[0],) or not np.all(np.isfinite(y)):
            raise InputError(f"y must hold {X.shape[0]} finite values; got shape {y.shape}.")
        ys = sc.y(y)
    else:
        ys = np.zeros(X.shape[0])  # predictive means (standardised), point by point below
    for n in range(X.shape[0]):
        if y is None:
            ys[n] = Psi[n] @ (fp.Ainv @ fp.t) + trend[n]
        fp.add(Psi[n], ys[n] - trend[n])
    stats = model.stats_
    if stats.diagonal:
        stats = SufficientStats(np.diag(np.asarray(stats.G)), stats.r, stats.yy, stats.n,
                                False, stats.F, stats.HH, stats.Hy)
    out = copy.copy(model)
    out.stats_ = stats + dense_stats(model.features_, sc.x(X), ys,
                                     powers=getattr(model, "powers_", None))
    out.posterior_ = fp.posterior()
    return out


# =========================================================================== candidate operators
class _DenseOps:
    """Candidate features kept as one matrix Ψ_c (N, M). Every product is a BLAS call."""

    def __init__(self, Psi):
        self.Psi = np.ascontiguousarray(Psi, dtype=np.float64)
        self.n = self.Psi.shape[0]

    def rows(self, idx) -> np.ndarray:
        return self.Psi[np.asarray(idx)]

    def apply(self, W) -> np.ndarray:
        """Ψ_c W: (N,) for W (M,), (N, B) for W (M, B)."""
        return self.Psi @ W

    def quad(self, B) -> np.ndarray:
        """diag(Ψ_c B Ψ_cᵀ), (N,). Cost O(N M²)."""
        out = np.empty(self.n)
        step = max(1, _BLOCK // max(1, B.shape[0]))
        for s in range(0, self.n, step):
            P = self.Psi[s:s + step]
            out[s:s + step] = np.sum((P @ B) * P, axis=1)
        return out

    def sq_norms(self) -> np.ndarray:
        return np.sum(self.Psi**2, axis=1)

    def gram(self) -> np.ndarray:
        return self.Psi.T @ self.Psi


class _FourierOps:
    """Shared parts of the AFS operators: ψ at chosen rows, ‖ψ‖² by separable sums."""

    def __init__(self, ff, sqrt_lam, Xs):
        self.ff, self.sl, self.Xs = ff, np.asarray(sqrt_lam, dtype=np.float64), Xs
        self.n = Xs.shape[0]
        shape = tuple(lattice_rows(k, ff.lattice)[0].size for k in ff.n_freq)  # R_d per axis
        self._lam_tensor = np.zeros(shape)
        np.add.at(self._lam_tensor, tuple(ff.rows.T), self.sl**2)  # λ at each feature's rows

    def rows(self, idx) -> np.ndarray:
        return np.asarray(self.ff(self.Xs[np.asarray(idx)])) * self.sl

    def _weights_tensor(self, W) -> np.ndarray:
        """(B, R_1, ..., R_D) tensor of λ½ ⊙ W placed at each feature's per-dimension rows."""
        T = np.zeros((W.shape[1],) + self._lam_tensor.shape)
        T[(slice(None),) + tuple(self.ff.rows.T)] = (self.sl[:, None] * W).T
        return T

    def sq_norms(self) -> np.ndarray:
        """‖ψ_c‖² = Σ_m λ_m ∏_d b_{d,r_md}(x_d)², chunked. Cost O(N Π_d R_d)."""
        out = np.empty(self.n)
        step = max(1, _BLOCK // self._lam_tensor.size)
        for s in range(0, self.n, step):
            blocks = [b**2 for b in self.ff.per_dim_blocks(self.Xs[s:s + step])]
            acc = np.tensordot(blocks[0], self._lam_tensor, axes=([1], [0]))  # (n, R_2, ...)
            for b in blocks[1:]:
                acc = np.einsum("nr...,nr->n...", acc, b)
            out[s:s + step] = acc
        return out


class _GridOps(_FourierOps):
    """Candidates on a regular grid: linear forms by separable products of 1-D features.

    Σ_m w_m ψ_m(x) = Σ_{r_1..r_D} T[r] ∏_d b_d[x_d, r_d] is contracted one axis at a time:
    O(Π R_d·N_1 + ... + N·R_D) per vector, no N×M matrix.
    """

    def __init__(self, ff, sqrt_lam, saxes, flat):
        shape = tuple(a.size for a in saxes)
        idx = np.unravel_index(flat, shape)
        super().__init__(ff, sqrt_lam, np.stack([a[i] for a, i in zip(saxes, idx)], axis=1))
        self.saxes, self.flat, self.shape = saxes, flat, shape
        self.blocks = []
        for d, a in enumerate(saxes):
            Xd = np.zeros((a.size, ff.n_dims))
            Xd[:, d] = a
            self.blocks.append(np.asarray(ff.per_dim_blocks(Xd)[d]))  # (N_d, R_d)

    def apply(self, W) -> np.ndarray:
        W = np.asarray(W, dtype=np.float64)
        vec = W.ndim == 1
        W = W[:, None] if vec else W
        out = np.empty((self.n, W.shape[1]))
        step = max(1, _BLOCK // int(np.prod(self.shape)))
        for s in range(0, W.shape[1], step):
            acc = self._weights_tensor(W[:, s:s + step])
            for b in self.blocks:
                acc = np.tensordot(acc, b, axes=([1], [1]))  # contract r_d, append n_d
            out[:, s:s + step] = acc.reshape(acc.shape[0], -1)[:, self.flat].T
        return out[:, 0] if vec else out

    def _grid_values(self, per_axis, tensor) -> np.ndarray:
        """Σ_r tensor[r_1, ..., r_D] ∏_d per_axis[d][x_d, r_d] at the candidate cells."""
        acc = tensor
        for b in per_axis:
            acc = np.tensordot(acc, b, axes=([0], [1]))  # contract r_d, append n_d
        return acc.ravel()[self.flat]

    def sq_norms(self) -> np.ndarray:
        """‖ψ_c‖² = Σ_m λ_m ∏_d b_d(x_d)² by separable products. Cost O(Π R_d N_1 + ... )."""
        return self._grid_values([b**2 for b in self.blocks], self._lam_tensor)

    def quad(self, B) -> np.ndarray:
        """diag(Ψ_c B Ψ_cᵀ) through products of 1-D feature pairs (D ≤ 2).

        φ_m φ_m' = ∏_d b_d[x_d, r_md] b_d[x_d, r_m'd]: with the unordered pairs p_d = {r_md, r_m'd}
        and T[p_1, p_2] = Σ B'_mm' (B' = Λ½BΛ½), h = Σ_p T[p] ∏_d P_d[x_d, p_d], where
        P_d[x, {r, r'}] = b_d[x, r] b_d[x, r']. Cost O(M² + U² N_1 + U N) with U = R(R+1)/2;
        three or more dimensions use the trigonometric bins of :mod:`geogp.features.trig`.
        """
        Bs = self.sl[:, None] * B * self.sl[None, :]
        if self.ff.n_dims > 2:
            coef = trig.quad_coefficients(self.ff, Bs)
            return trig.evaluate_grid(self.ff, list(self.saxes), coef, "quad").ravel()[self.flat]
        pairs, index = [], 0
        for d, b in enumerate(self.blocks):
            R = b.shape[1]
            iu = np.triu_indices(R)
            table = np.zeros((R, R), dtype=np.int64)
            table[iu] = np.arange(iu[0].size)
            table = np.maximum(table, table.T)  # unordered pair {r, r'} → column
            r = self.ff.rows[:, d]
            pair_d = table[r[:, None], r[None, :]]  # (M, M)
            index = index * iu[0].size + pair_d if d else pair_d
            pairs.append((b[:, iu[0]] * b[:, iu[1]], iu[0].size))  # P_d (N_d, U_d)
        sizes = tuple(u for _, u in pairs)
        T = np.bincount(index.ravel(), weights=Bs.ravel(), minlength=int(np.prod(sizes)))
        return self._grid_values([P for P, _ in pairs], T.reshape(sizes))

    def gram(self) -> np.ndarray:
        from geogp.stats import grid_stats

        values = np.full(self.shape, np.nan)
        values.ravel()[self.flat] = 0.0
        G = np.asarray(grid_stats(self.ff, list(self.saxes), values).G)
        return self.sl[:, None] * G * self.sl[None, :]


class _PointOps(_FourierOps):
    """Scattered candidates: one linear form by a planned type-2 NUFFT, batches by dense blocks."""

    def __init__(self, ff, sqrt_lam, Xs):
        super().__init__(ff, sqrt_lam, Xs)
        self._plan = None

    def _nufft(self, w) -> np.ndarray:
        import finufft

        ff = self.ff
        if self._plan is None:
            P = trig.bin_sizes(ff, "linear")
            u = (self.Xs - ff.center) / ff.period
            self._plan = finufft.Plan(2, P, eps=1e-14, isign=1, modeord=1)
            self._plan.setpts(*[np.ascontiguousarray(2 * np.pi * u[:, d])
                                for d in range(ff.n_dims)])
            # linear forms carry e^{iπ h·u} (h = 1 on the odd lattice): see geogp.features.trig
            self._phase = np.exp(2j * np.pi * (u @ trig._shift(ff)))
        coef = trig.linear_coefficients(ff, self.sl * w)
        return (self._plan.execute(np.ascontiguousarray(coef)) * self._phase).real

    def apply(self, W) -> np.ndarray:
        W = np.asarray(W, dtype=np.float64)
        if W.ndim == 1:
            return self._nufft(W)
        out = np.empty((self.n, W.shape[1]))
        SW = self.sl[:, None] * W
        step = max(1, _BLOCK // (8 * self.ff.n_features))
        for s in range(0, self.n, step):
            out[s:s + step] = np.asarray(self.ff(self.Xs[s:s + step])) @ SW
        return out

    def quad(self, B) -> np.ndarray:
        coef = trig.quad_coefficients(self.ff, self.sl[:, None] * B * self.sl[None, :])
        return trig.evaluate_points(self.ff, self.Xs, coef, "quad")

    def gram(self) -> np.ndarray:
        from geogp.stats import points_stats

        G = np.asarray(points_stats(self.ff, self.Xs, np.zeros(self.n), "nufft").G)
        return self.sl[:, None] * G * self.sl[None, :]


# =========================================================================== problems
@dataclass
class _Problem:
    """Everything the greedy loop needs, in standardised units.

    A_data: (M, M) precision of the whitened weights given the data only (no existing
    sensors: Krause's "rest of V" term excludes them); Ainv: (M, M) inverse precision given the
    data and the existing sensors; ops: candidate features;
    Psi_T: (T, M) target features; resid_c (N,), resid_T (T,): k(0) − ‖ψ‖², the part of the
    prior variance the features do not carry; resid_TT: callable giving K_TT − Ψ_TΨ_Tᵀ.
    """

    A_data: object  # (M, M) array, or a callable that forms it
    Ainv: np.ndarray
    noise: float
    ops: object
    Psi_T: np.ndarray
    resid_c: np.ndarray
    resid_T: np.ndarray
    resid_TT: object
    y_scale: float


def _afs_problem(model, cands: Candidates, targets: Candidates, existing, dense_limit) -> _Problem:
    ff, post, scaler = model.features_, model.posterior_, model.scaler_
    sl = np.asarray(post.sqrt_lam, dtype=np.float64)
    fp = FeaturePosterior.from_model(model)
    A_data = fp._A0  # data only (an array or a callable): Krause's E starts from it
    if existing is not None:
        for psi in _afs_psi(model, existing, "existing sensors"):
            fp.add(psi)  # existing sensors: same rank-one updates as suggested sites
    Xs_c = scaler.x(cands.coords)
    try:
        ff.check_inside(Xs_c, "raise")
    except InputError as err:
        raise type(err)(f"candidate locations: {err}") from None
    if len(cands) * ff.n_features <= dense_limit:
        ops = _DenseOps(np.asarray(ff(Xs_c)) * sl)
    elif cands.axes is not None:
        saxes = [(a - m) / s for a, m, s in zip(cands.axes, scaler.x_mean, scaler.x_scale)]
        ops = _GridOps(ff, sl, saxes, cands.flat)
    else:
        ops = _PointOps(ff, sl, Xs_c)
    Psi_T = _afs_psi(model, targets.coords, "target locations")
    kvar0 = float(post.kvar0)
    Xs_T = scaler.x(targets.coords)

    def resid_TT():
        return np.asarray(model.kernel_(Xs_T, Xs_T)) - Psi_T @ Psi_T.T

    return _Problem(A_data, fp.Ainv, fp.noise, ops, Psi_T, kvar0 - ops.sq_norms(),
                    kvar0 - np.sum(Psi_T**2, axis=1), resid_TT, float(scaler.y_scale))


_EXACT_MAX = 4000


def _exact_problem(model, cands: Candidates, targets: Candidates, existing) -> _Problem:
    """Exact GP: features of the posterior covariance on V_c ∪ T (∪ existing), C = ΨΨᵀ.

    The posterior given the data is factorised by an eigendecomposition; existing sensors are
    then absorbed by the same rank-one updates as for AFS. Cost O(|V_c ∪ T ∪ E|³).
    """
    n_e = 0 if existing is None else len(existing)
    n_u = len(cands) + len(targets) + n_e
    if n_u > _EXACT_MAX:
        raise InputError(f"the exact GP handles at most {_EXACT_MAX} candidate + target + existing "
                         f"locations (O(N³)); got {n_u}. Use an AFSRegressor, or fewer locations.")
    kern, noise, scaler = model.kernel_, float(model.noise_), model.scaler_
    Xd = np.asarray(model.X_train_)
    parts = [scaler.x(cands.coords), scaler.x(targets.coords)]
    if n_e:
        parts.append(scaler.x(existing))
    U = np.vstack(parts)
    L = np.linalg.cholesky(np.asarray(kern(Xd, Xd)) + noise * np.eye(Xd.shape[0]))
    V = sla.solve_triangular(L, np.asarray(kern(Xd, U)), lower=True)
    C = np.asarray(kern(U, U)) - V.T @ V  # C_UU = K_UU − K_UD (K_DD + σ²I)⁻¹ K_DU
    C = 0.5 * (C + C.T)
    e, Q = np.linalg.eigh(C)
    keep = e > 1e-12 * max(e.max(), 1e-300)
    Psi = Q[:, keep] * np.sqrt(e[keep])
    resid = np.diag(C) - np.sum(Psi**2, axis=1)
    nc, nt = len(cands), len(targets)
    r = Psi.shape[1]
    fp = FeaturePosterior(np.ones(r), np.eye(r), np.eye(r), np.zeros(r), noise, 0.0)
    for psi in Psi[nc + nt:]:
        fp.add(psi)

    def resid_TT():
        return C[nc:nc + nt, nc:nc + nt] - Psi[nc:nc + nt] @ Psi[nc:nc + nt].T

    return _Problem(np.eye(r), fp.Ainv, noise, _DenseOps(Psi[:nc]), Psi[nc:nc + nt],
                    resid[:nc], resid[nc:nc + nt], resid_TT, float(scaler.y_scale))


# =========================================================================== numba kernels
@numba.njit(parallel=True, cache=True)
def _marginal_pass(Xt, u, v, inv_d, inv_rho, inv_s, active, out):  # pragma: no cover (numba)
    """Xt (N, T) ← Xt − v uᵀ/d; out_c = −½ Σ_i log(1 − Xt_ci² / (ρ_i s_c)) for active c."""
    n, t = Xt.shape
    for c in numba.prange(n):
        if not active[c]:
            continue
        vc = v[c] * inv_d
        sc = inv_s[c]
        acc = 0.0
        for i in range(t):
            x = Xt[c, i] - vc * u[i]
            Xt[c, i] = x
            z = min(x * x * inv_rho[i] * sc, _Z_MAX)
            acc += math.log1p(-z)
        out[c] = -0.5 * acc


@numba.njit(parallel=True, cache=True)
def _joint_pass(Xt, Yt, u, v, inv_d, p, inv_e, yu, inv_s, active, out):  # pragma: no cover
    """Xt ← Xt − v uᵀ/d; Yt ← Yt + (Yt u − v) pᵀ/e; out_c = −½ log(1 − Σ_i Xt_ci Yt_ci / s_c)."""
    n, t = Xt.shape
    for c in numba.prange(n):
        if not active[c]:
            continue
        a = v[c] * inv_d
        b = (yu[c] - v[c]) * inv_e
        q = 0.0
        for i in range(t):
            x = Xt[c, i] - a * u[i]
            y = Yt[c, i] + b * p[i]
            Xt[c, i] = x
            Yt[c, i] = y
            q += x * y
        out[c] = -0.5 * math.log1p(-min(max(q * inv_s[c], 0.0), _Z_MAX))


# =========================================================================== greedy loop
class _Greedy:
    """State of one greedy run: the maintained matrices and vectors of SPEC.md §7."""

    def __init__(self, pb: _Problem, strategy: str, criterion: str, lazy: bool, lazy_batch: int,
                 taken=()):
        self.pb, self.strategy, self.criterion = pb, strategy, criterion
        self.lazy = lazy and strategy == "krause"
        self.lazy_batch = lazy_batch
        s2 = pb.noise
        self.Ainv = pb.Ainv.copy()
        Psi_T = pb.Psi_T
        W_T = self.Ainv @ Psi_T.T  # (M, T)
        self.cT = pb.resid_T + np.sum(Psi_T * W_T.T, axis=1)  # diag C_T
        self.h = pb.ops.quad(self.Ainv)  # h_c = ψ_cᵀA⁻¹ψ_c
        self.scores = np.full(pb.ops.n, -np.inf)
        if strategy == "mi":
            self.Xt = np.ascontiguousarray(pb.ops.apply(W_T))  # Xᵀ = Ψ_c A⁻¹ Ψ_T, (N, T)
            if criterion == "joint":
                R = pb.resid_TT() + Psi_T @ W_T + s2 * np.eye(Psi_T.shape[0])  # C_T + σ²I
                try:
                    cho = sla.cho_factor(0.5 * (R + R.T), lower=True)
                except np.linalg.LinAlgError as err:
                    raise NotPositiveDefiniteError(
                        "the joint criterion needs C_T + σ²I positive definite, and it is not "
                        "here: with AFS, k − k̂ (the features' residual) need not be positive "
                        "semi-definite (aliasing, SPEC.md §3). Use criterion='marginal' (the "
                        "default, SPEC.md §7), fewer/more spread targets, or more features."
                    ) from err
                self.Yt = np.ascontiguousarray(sla.cho_solve(cho, self.Xt.T).T)  # (R⁻¹X)ᵀ
        if strategy == "krause":
            # E = A_data + σ⁻² Σ_{c ∈ V∖A} ψ_cψ_cᵀ; existing sensors belong to A (not to V∖A)
            G = pb.ops.gram()
            if len(taken):
                P = pb.ops.rows(list(taken))
                G = G - P.T @ P
            A_data = pb.A_data() if callable(pb.A_data) else pb.A_data
            E = A_data + G / s2
            self.Einv = _inverse_from_cholesky(np.linalg.cholesky(0.5 * (E + E.T)))
            self.q = pb.ops.quad(self.Einv)  # q_c = ψ_cᵀE⁻¹ψ_c

    # ------------------------------------------------------------------ scores
    def score_all(self, active, u=None, v=None, d=None, p=None, e=None, yu=None) -> np.ndarray:
        """Scores of all active candidates (after the update of the last step, if given)."""
        s2, n = self.pb.noise, self.pb.ops.n
        if self.strategy == "variance":
            return self.pb.resid_c + self.h + s2
        if self.strategy == "krause":
            return self._krause_gain(self.h, self.q)
        inv_s = 1.0 / (s2 + self.h)
        T = self.Xt.shape[1]
        if u is None:  # first pass: no update
            u, v, d = np.zeros(T), np.zeros(n), 1.0
            p, e, yu = np.zeros(T), 1.0, np.zeros(n)
        if self.criterion == "marginal":
            inv_rho = 1.0 / (self.cT + s2)
            _marginal_pass(self.Xt, u, v, 1.0 / d, inv_rho, inv_s, active, self.scores)
        else:
            _joint_pass(self.Xt, self.Yt, u, v, 1.0 / d, p, 1.0 / e, yu, inv_s, active,
                        self.scores)
        return self.scores

    def _krause_gain(self, h, q) -> np.ndarray:
        """δ = ½ log(σ²_{a|A}/σ²_{a|Ā}) with σ²_{a|A} = σ² + h, σ²_{a|Ā} = σ⁴/(σ² − q)."""
        s2 = self.pb.noise
        rest = np.maximum(s2 - q, s2 * 1e-300)
        return 0.5 * (np.log1p(h / s2) + np.log(rest / s2))

    def fresh_gains(self, idx) -> np.ndarray:
        """Krause gains of candidates idx recomputed from the current A⁻¹, E⁻¹. Cost O(|idx| M²)."""
        P = self.pb.ops.rows(idx)
        h = np.sum((P @ self.Ainv) * P, axis=1)
        q = np.sum((P @ self.Einv) * P, axis=1)
        return self._krause_gain(h, q)

    # ------------------------------------------------------------------ update
    def add(self, a: int, active) -> dict:
        """Absorb candidate a: rank-one updates of every maintained quantity (SPEC.md §7)."""
        pb, s2 = self.pb, self.pb.noise
        psi = pb.ops.rows([a])[0]
        w = self.Ainv @ psi  # w = A⁻¹ψ_a
        d = s2 + psi @ w  # d = s_a = σ² + ψ_aᵀA⁻¹ψ_a
        u = pb.Psi_T @ w  # u = g = Ψ_Tᵀ A⁻¹ ψ_a
        info = {"var_latent": pb.resid_c[a] + d - s2, "cT_before": self.cT.copy(), "u": u, "d": d}
        _rank1(self.Ainv, w, w, -1.0 / d)
        self.cT -= u**2 / d  # C_T,ii ← C_T,ii − u_i²/d
        if self.lazy:
            z = self.Einv @ psi
            _rank1(self.Einv, z, z, 1.0 / (s2 - psi @ z))  # E⁻¹ ← E⁻¹ + zzᵀ/(σ² − q_a)
            return info
        v = pb.ops.apply(w)  # v_c = ψ_cᵀ A⁻¹ ψ_a
        self.h -= v**2 / d
        if self.strategy == "krause":
            z = self.Einv @ psi
            e = s2 - psi @ z
            wz = pb.ops.apply(z)
            _rank1(self.Einv, z, z, 1.0 / e)
            self.q += wz**2 / e
        elif self.strategy == "mi":
            self._pending = (u, v, d)
            if self.criterion == "joint":
                p = self.Yt[a].copy()  # p = (C_T + σ²I)⁻¹ u
                e = d - u @ p
                yu = self.Yt @ u
                self._pending = (u, v, d, p, e, yu)
        return info


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n (number of sites) must be a positive integer; got {n!r}.")
    return int(n)


def _check_vector(values, n: int, name: str, positive: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise InputError(f"{name} must be a scalar or have one value per candidate ({n}); "
                         f"got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)) or (positive and np.any(arr <= 0)):
        raise InputError(f"{name} must be finite{' and > 0' if positive else ''} for every "
                         "candidate.")
    return arr


def _exclusion(exclude, cands: Candidates) -> np.ndarray:
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


def _at_candidates(points, coords) -> list:
    """Candidates that coincide with one of ``points`` (to 1e-12 relative)."""
    tol = 1e-12 * (1.0 + np.abs(coords).max())
    hits = set()
    for pt in points:
        hits.update(np.flatnonzero(np.all(np.abs(coords - pt) <= tol, axis=1)).tolist())
    return sorted(hits)


def _near(coords, point, min_distance) -> np.ndarray:
    return np.sum((coords - point) ** 2, axis=1) < min_distance**2


def _default_names(d: int) -> tuple:
    return ("x", "y", "z")[:d] if d <= 3 else tuple(f"x{i}" for i in range(d))


def suggest_sites(model, candidates, n: int, *, strategy: str = "mi", criterion: str = "marginal",
                  targets=None, existing=None, exclude=None, min_distance: float = 0.0,
                  cost=None, budget: float | None = None, max_targets: int = 1000,
                  max_bytes: float = 2**28, lazy: bool | None = None, names=None, seed: int = 0,
                  dense_limit: int = _DENSE_LIMIT) -> pd.DataFrame:
    """Suggest the next ``n`` measurement sites by greedy selection (SPEC.md §7).

    Args:
        model: a fitted :class:`~geogp.models.afs.AFSRegressor` or
            :class:`~geogp.models.exact.ExactGP` (hyperparameters are kept fixed).
        candidates: :class:`Candidates` (e.g. ``Candidates.grid(axes, mask)``), or an (N, D)
            array / DataFrame of points, in the model's input units and column order.
        n: number of sites k (fewer are returned when the budget or the minimum distance
            leaves no feasible candidate).
        strategy: ``"mi"`` (thesis log-determinant criterion, default), ``"variance"`` or
            ``"krause"`` (mutual information with V = the candidates, lazy greedy).
        criterion: for ``"mi"``: ``"marginal"`` (default; sum of per-target terms) or
            ``"joint"`` (log-determinant over all targets).
        targets: where the predictions should improve, (N_T, D) points or :class:`Candidates`;
            default the candidates. Thinned to ``max_targets`` (and, for ``"mi"``, to at most
            ``max_bytes`` for the |T| × |V_c| matrix); the result's ``attrs`` say so.
        existing: (N_e, D) existing sensors, absorbed first by the same rank-one updates. For
            ``"krause"``, those that sit on a candidate are part of the selected set A (so a
            batch of q equals q calls that each pass the previous picks as existing).
        exclude: boolean mask, True = not allowed: one value per candidate, or the grid's
            shape for grid candidates.
        min_distance: minimum distance (input units) between chosen sites, and from existing
            sensors.
        cost: per-candidate cost (scalar or (N,)); candidates are ranked by score/cost.
        budget: total cost allowed (default unlimited; with no ``cost`` each site costs 1).
        max_targets, max_bytes: target thinning limits (see ``targets``).
        lazy: lazy-greedy evaluation for ``"krause"`` (same picks). Each lazy re-evaluation
            costs O(M²) while a full update of all gains costs one or two linear forms over the
            candidates, so the default (None) is lazy only for small, dense problems and plain
            updates on grids and large point sets.
        names: coordinate column names (default ``x``, ``y``, ``z``).
        seed: random thinning of scattered targets.
        dense_limit: |V_c|·M below which candidate features are stored densely.

    Returns:
        DataFrame, one row per site in selection order: ``order`` (1..k), ``index`` (row of
        the candidate), coordinates, ``score`` (variance of a new measurement in the data's
        units² for ``"variance"``, else nats), ``std_before`` (latent predictive std at the
        site before it is added, data units), ``std_reduction`` (mean over targets of the
        latent std reduction due to this site), ``mean_std_after`` (mean target std after
        it), and ``cost``/``cumulative_cost`` when costs or a budget are given. ``attrs`` holds
        strategy, criterion, n_targets, targets_thinned, n_candidates, stopped (why fewer).

    Raises:
        InputError: bad arguments (unknown strategy, n < 1 or above the number of allowed
            candidates, NaN coordinates, shapes, locations outside the model's window...).

    Cost: set-up O(M³) for A⁻¹ (and E⁻¹ for ``"krause"``), one quadratic form over the
    candidates, and for ``"mi"`` |T| linear forms (the |T| × |V_c| matrix X, O(|T|³) more for
    ``"joint"``); per step O(M² + |V_c|(e + |T|)) for ``"mi"``, O(M² + |V_c| e) for
    ``"variance"`` and plain ``"krause"``, O(M² + b M²) for lazy ``"krause"`` (e: one linear
    form over the candidates; b: re-evaluations). Memory O(M² + |T||V_c|).
    """
    n = _check_n(n)
    if strategy not in STRATEGIES:
        raise InputError(f"strategy must be one of {list(STRATEGIES)}; got {strategy!r}.")
    if criterion not in CRITERIA:
        raise InputError(f"criterion must be one of {list(CRITERIA)}; got {criterion!r}.")
    cands = _as_candidates(candidates, "candidates")
    exact = hasattr(model, "X_train_") and not hasattr(model, "features_")
    if not exact:
        _check_afs(model)
        n_dims = model.features_.n_dims
    else:
        n_dims = int(np.shape(model.X_train_)[1])
    if cands.n_dims != n_dims:
        raise InputError(f"candidates have {cands.n_dims} coordinate columns but the model was "
                         f"fitted on {n_dims}; use the model's input columns, in the same order.")
    N = len(cands)
    if existing is not None:
        existing = as_points(existing, "existing sensors")
        if existing.shape[1] != n_dims:
            raise InputError(f"existing sensors have {existing.shape[1]} columns; expected "
                             f"{n_dims}.")
    min_distance = float(min_distance)
    if not np.isfinite(min_distance) or min_distance < 0:
        raise InputError(f"min_distance must be finite and ≥ 0; got {min_distance!r}.")
    costs = None if cost is None else _check_vector(cost, N, "cost", positive=True)
    if budget is not None:
        budget = float(budget)
        if not np.isfinite(budget) or budget <= 0:
            raise InputError(f"budget must be finite and > 0; got {budget!r}.")
        if costs is None:
            costs = np.ones(N)
    active = ~_exclusion(exclude, cands)
    if existing is not None and min_distance > 0:
        for pt in existing:
            active &= ~_near(cands.coords, pt, min_distance)
    if n > int(active.sum()):
        raise InputError(f"n = {n} sites requested but only {int(active.sum())} of {N} candidates "
                         "are allowed (after exclusions and the distance to existing sensors); "
                         "ask for fewer sites or allow more candidates.")
    if costs is not None and budget is not None:
        active &= costs <= budget
    lazy_batch = 16
    # targets: default the candidates; thinned to the limits
    tgt = cands if targets is None else _as_candidates(targets, "targets")
    if tgt.n_dims != n_dims:
        raise InputError(f"targets have {tgt.n_dims} columns; expected {n_dims}.")
    limit = int(max_targets)
    if strategy == "mi":
        per = 8 * N * (2 if criterion == "joint" else 1)
        limit = min(limit, max(1, int(max_bytes // per)))
    tgt, thinned = tgt.thin(limit, seed)

    if exact:
        pb = _exact_problem(model, cands, tgt, existing)
    else:
        pb = _afs_problem(model, cands, tgt, existing, dense_limit)
    taken = _at_candidates(existing, cands.coords) if existing is not None else []
    if lazy is None:
        lazy = isinstance(pb.ops, _DenseOps)
    g = _Greedy(pb, strategy, criterion, bool(lazy), lazy_batch, taken)
    picks, stopped = _run(g, n, active, costs, budget, min_distance, cands.coords)

    ys = pb.y_scale
    names = tuple(names) if names is not None else _default_names(n_dims)
    if len(names) != n_dims:
        raise InputError(f"names must give {n_dims} column names; got {names!r}.")
    idx = np.array([p["index"] for p in picks], dtype=np.int64)
    data = {"order": np.arange(1, len(picks) + 1), "index": idx}
    for j, name in enumerate(names):
        data[name] = cands.coords[idx, j] if len(picks) else np.array([])
    score_scale = ys**2 if strategy == "variance" else 1.0
    data["score"] = np.array([p["score"] * score_scale for p in picks])
    data["std_before"] = np.array([math.sqrt(max(p["var_latent"], 0.0)) * ys for p in picks])
    data["std_reduction"] = np.array([p["std_reduction"] * ys for p in picks])
    data["mean_std_after"] = np.array([p["mean_std_after"] * ys for p in picks])
    if costs is not None:
        c = costs[idx] if len(picks) else np.array([])
        data["cost"] = c
        data["cumulative_cost"] = np.cumsum(c)
    df = pd.DataFrame(data)
    df.attrs.update({"strategy": strategy, "criterion": criterion if strategy == "mi" else None,
                     "n_candidates": N, "n_targets": len(tgt), "targets_thinned": thinned,
                     "stopped": stopped, "coord_names": list(names),
                     "model": "exact" if exact else "afs"})
    if stopped != "n":
        warnings.warn(f"only {len(picks)} of {n} sites could be placed ({stopped}).", stacklevel=2)
    return df


def _run(g: _Greedy, n: int, active, costs, budget, min_distance, coords):
    """The greedy loop; returns (records, why it stopped: 'n', 'budget' or 'no candidate left')."""
    active = active.copy()
    remaining = budget
    picks = []
    heap, stamp = None, None
    if g.lazy:
        gains = g.score_all(active)
        rank = gains / costs if costs is not None else gains
        heap = [(-float(rank[c]), int(c)) for c in np.flatnonzero(active)]
        heapq.heapify(heap)
        stamp = np.zeros(g.pb.ops.n, dtype=np.int64)
        fresh_gain = gains.copy()
    else:
        scores = g.score_all(active)
    for step in range(n):
        if g.lazy:
            a = _lazy_pop(g, heap, stamp, step, active, costs, fresh_gain)
            if a is None:
                break
            score = fresh_gain[a]
        else:
            rank = scores / costs if costs is not None else scores
            rank = np.where(active & np.isfinite(rank), rank, -np.inf)
            if not active.any() or not np.isfinite(rank.max()):
                break
            a = int(np.argmax(rank))  # ties: lowest index
            score = float(scores[a])
        info = g.add(a, active)
        before = np.sqrt(np.maximum(info["cT_before"], 0.0))
        after = np.sqrt(np.maximum(info["cT_before"] - info["u"] ** 2 / info["d"], 0.0))
        picks.append({"index": a, "score": float(score), "var_latent": float(info["var_latent"]),
                      "std_reduction": float(np.mean(before - after)),
                      "mean_std_after": float(np.mean(after))})
        active[a] = False
        if min_distance > 0:
            active &= ~_near(coords, coords[a], min_distance)
        if costs is not None and remaining is not None:
            remaining -= costs[a]
            active &= costs <= remaining + 1e-12 * max(1.0, abs(budget))
        if step + 1 < n and not g.lazy:
            scores = g.score_all(active, *getattr(g, "_pending", ()))
    if len(picks) == n:
        return picks, "n"
    if costs is not None and budget is not None:
        return picks, "budget exhausted"
    return picks, "no candidate left"


def _lazy_pop(g: _Greedy, heap, stamp, step, active, costs, fresh_gain):
    """Lazy greedy (Minoux; Krause et al. 2008): re-evaluate stale tops in batches until the top
    of the heap is fresh. Returns the chosen candidate or None."""
    while heap:
        neg, c = heap[0]
        if not active[c]:
            heapq.heappop(heap)
            continue
        if stamp[c] == step:
            heapq.heappop(heap)
            return c
        batch = []
        while heap and len(batch) < g.lazy_batch:
            neg, c = heap[0]
            if not active[c]:
                heapq.heappop(heap)
                continue
            if stamp[c] == step:
                break
            heapq.heappop(heap)
            batch.append(c)
        gains = g.fresh_gains(batch)
        for c, gain in zip(batch, gains):
            stamp[c] = step
            fresh_gain[c] = gain
            r = gain / costs[c] if costs is not None else gain
            heapq.heappush(heap, (-float(r), c))
    return None


# =========================================================================== outputs
@contextlib.contextmanager
def _atomic(path, overwrite: bool):
    """Yield a temporary path beside ``path``; moved into place with os.replace on success."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise OutputExistsError(f"{str(path)!r} already exists; pass overwrite=True "
                                "(CLI: --overwrite) to replace it.")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"cannot write {str(path)!r}: folder {str(parent)!r} does not exist.")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _crs_member(crs) -> dict | None:
    """GeoJSON (2008) "crs" member for an EPSG code, an "EPSG:n" string, or a rasterio CRS."""
    if crs is None:
        return None
    code = None
    if isinstance(crs, (int, np.integer)):
        code = int(crs)
    elif hasattr(crs, "to_epsg"):
        code = crs.to_epsg()
        if code is None:
            return {"type": "name", "properties": {"name": crs.to_string()}}
    elif isinstance(crs, str) and crs.upper().startswith("EPSG:"):
        code = int(crs.split(":")[1])
    else:
        return {"type": "name", "properties": {"name": str(crs)}}
    return {"type": "name", "properties": {"name": f"urn:ogc:def:crs:EPSG::{code}"}}


def _json_value(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not np.isfinite(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def to_geojson(sites: pd.DataFrame, *, x: str = "x", y: str = "y", crs=None) -> dict:
    """A GeoJSON FeatureCollection of Point features; the other columns become properties."""
    for col in (x, y):
        if col not in sites.columns:
            raise InputError(f"column {col!r} not found; the table has {list(sites.columns)}.")
    props = [c for c in sites.columns if c not in (x, y)]
    features = []
    for row in sites.to_dict("records"):  # per-column dtypes kept (iterrows upcasts to float)
        features.append({
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [float(row[x]), float(row[y])]},
            "properties": {c: _json_value(row[c]) for c in props},
        })
    out = {"type": "FeatureCollection", "features": features}
    member = _crs_member(crs)
    if member is not None:
        out["crs"] = member
    return out


def write_geojson(sites: pd.DataFrame, path, *, x: str = "x", y: str = "y", crs=None,
                  overwrite: bool = False) -> Path:
    """Write ``sites`` as GeoJSON (atomic: temp file + os.replace). Returns the path."""
    text = json.dumps(to_geojson(sites, x=x, y=y, crs=crs), indent=1)
    with _atomic(path, overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_csv(sites: pd.DataFrame, path, *, overwrite: bool = False) -> Path:
    """Write ``sites`` as CSV (atomic: temp file + os.replace). Returns the path."""
    with _atomic(path, overwrite) as tmp:
        sites.to_csv(tmp, index=False)
    return Path(path)


def plot_sites(sites: pd.DataFrame, std=None, x_coords=None, y_coords=None, *, ax=None,
               x: str = "x", y: str = "y", existing=None, title: str | None = None,
               annotate: bool = True, label: str = "predictive std"):
    """Suggested sites (numbered triangles) over a map of the predictive std.

    Args:
        sites: output of :func:`suggest_sites`.
        std: optional (N_y, N_x) std map with axis coordinates ``x_coords`` (N_x,) and
            ``y_coords`` (N_y,).
        existing: optional (N, 2) existing sensors (x, y), drawn as circles.
        label: colour-bar label.

    Returns:
        The matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5.5))
    if std is not None:
        std = np.asarray(std)
        if x_coords is None or y_coords is None:
            raise InputError("plot_sites needs x_coords and y_coords with a std map.")
        mesh = ax.pcolormesh(np.asarray(x_coords), np.asarray(y_coords), std, shading="auto",
                             cmap="viridis")
        ax.figure.colorbar(mesh, ax=ax, label=label)
    if existing is not None:
        e = np.asarray(existing)
        ax.scatter(e[:, 0], e[:, 1], s=14, facecolors="none", edgecolors="white",
                   label="existing")
    ax.scatter(sites[x], sites[y], marker="^", s=60, c="red", edgecolors="black",
               label="suggested", zorder=3)
    if annotate:
        for row in sites.to_dict("records"):
            ax.annotate(str(int(row["order"])), (row[x], row[y]), xytext=(4, 4),
                        textcoords="offset points", color="white", fontsize=8)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(loc="upper right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax
