"""Whitened AFS posterior with rank-one updates instead of refits (docs/bound.md, docs/placement.md).

With ψ = λ^{1/2} ⊙ φ and A = I + σ⁻² Σ_n ψ_nψ_nᵀ, measuring at x_a adds σ⁻²ψ_aψ_aᵀ to A, so
A⁻¹ is updated by Sherman–Morrison in O(M²) (:func:`_rank1`). :class:`FeaturePosterior` holds
that state, :func:`add_observations` uses it to add data to a fitted model without refitting,
and :func:`_check_afs` / :func:`_afs_psi` are the model checks and feature evaluations shared
with the placement problems.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from geogp._validation import as_points
from geogp.exceptions import InputError
from geogp.models.collapsed import Posterior


def _rank1(Mat, x, y, alpha: float) -> None:
    """Mat ← Mat + α x yᵀ in place (BLAS dger on the Fortran view; no M×M temporary)."""
    if Mat.flags.c_contiguous and Mat.dtype == np.float64:
        out = sla.blas.dger(alpha, y, x, a=Mat.T, overwrite_a=1)
        if np.shares_memory(out, Mat):
            return
    Mat += alpha * np.outer(x, y)


class FeaturePosterior:
    """Whitened AFS posterior, updated by rank-one steps instead of refits (docs/bound.md, docs/placement.md).

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
    if getattr(getattr(model, "stats_", None), "matrix_free", False):
        raise InputError("sensor placement needs the dense M × M posterior; this model was fitted "
                         "with the matrix-free solver (solver='iterative', large M). Refit with "
                         "solver='dense' and n_features ≤ 4096 for placement.")


def _afs_psi(model, X, what: str) -> np.ndarray:
    """ψ (N, M) at X in the model's input units; raises for points outside the window."""
    Xs = model.scaler_.x(X)
    try:
        model.features_.check_inside(Xs, "raise")
    except InputError as err:
        raise type(err)(f"{what}: {err}") from None
    return np.asarray(model.features_(Xs)) * np.asarray(model.posterior_.sqrt_lam)


def add_observations(model, X, y=None):
    """A copy of a fitted AFS model with observations added, without refitting (a lattice
    model: :func:`geogp.placement.lattice.add_lattice_observations`).

    Hyperparameters, features, standardisation and mean function are kept; the posterior is
    updated by one rank-one step per point (docs/placement.md) and the statistics by the points'
    φφᵀ and φy. Without ``y`` the values are imputed by the predictive mean: only the
    covariance changes (the mean stays the same).

    Args:
        model: fitted :class:`~geogp.models.afs.AFSRegressor`.
        X: (N, D) locations in the model's input units. y: (N,) values or None.

    Returns:
        A shallow copy with updated ``posterior_`` and ``stats_``. Cost O(M³ + N M²).
    """
    import copy

    from geogp.features.data import Points
    from geogp.features.fourier_statistics import SufficientStats

    from geogp.placement.lattice import add_lattice_observations, is_lattice

    if is_lattice(model):  # its GMRF posterior, exact updates
        return add_lattice_observations(model, X, y)
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
    out.stats_ = stats + model.features_.statistics(
        Points(sc.x(X), ys), method="dense", powers=getattr(model, "powers_", None))
    out.posterior_ = fp.posterior()
    return out
