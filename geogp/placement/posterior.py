"""Whitened AFS posterior with rank-one updates instead of refits (docs/bound.md,
docs/placement.md).

With ψ = λ^{1/2} ⊙ φ and A = I + σ⁻² Σ_n ψ_nψ_nᵀ, measuring at x_a adds σ⁻²ψ_aψ_aᵀ to A, so
A⁻¹ is updated by Sherman–Morrison in O(M²) (:func:`rank1`). :class:`FeaturePosterior` holds
that state (:func:`geogp.placement.observe.add_observations` uses it to add data to a fitted
model without refitting), and :func:`check_afs` / :func:`afs_psi` are the model checks and
feature evaluations shared with the placement problems.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla

from geogp.exceptions import InputError
from geogp.models.collapsed import Posterior

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike


def rank1(Mat: np.ndarray, x: np.ndarray, y: np.ndarray, alpha: float) -> None:
    """Mat ← Mat + α x yᵀ in place (BLAS dger on the Fortran view; no M×M temporary)."""
    if Mat.flags.c_contiguous and Mat.dtype == np.float64:
        out = sla.blas.dger(alpha, y, x, a=Mat.T, overwrite_a=1)
        if np.shares_memory(out, Mat):
            return
    Mat += alpha * np.outer(x, y)


class FeaturePosterior:
    """Whitened AFS posterior, updated by rank-one steps instead of refits (docs/bound.md,
    docs/placement.md).

    With ψ = λ^{1/2} ⊙ φ, A = I + σ⁻² Σ_n ψ_nψ_nᵀ and t = σ⁻² Σ_n ψ_n y_n:
    mean(x) = ψᵀA⁻¹t and var_f(x) = k(0) − ‖ψ‖² + ψᵀA⁻¹ψ (standardised units; the residual
    after any mean function).

    Attributes:
        sqrt_lam: (M,) λ^{1/2}. Ainv: (M, M) A⁻¹, updated in place. t: (M,). noise: σ².
        kvar0: k(0). A (property): the precision, formed on demand as A₀ + σ⁻² Σ_added ψψᵀ.
    """

    def __init__(self, sqrt_lam: np.ndarray, A: np.ndarray | Callable[[], np.ndarray],
                 Ainv: np.ndarray, t: np.ndarray,
                 noise: float, kvar0: float) -> None:
        self.sqrt_lam = np.asarray(sqrt_lam, dtype=np.float64)
        self._A0 = A  # an array, or a callable giving it (formed only when needed)
        self._added: list[np.ndarray] = []
        self.Ainv = np.array(Ainv, dtype=np.float64)
        self.t = np.array(t, dtype=np.float64)
        self.noise = float(noise)
        self.kvar0 = float(kvar0)

    @classmethod
    def from_model(cls, model: Any) -> FeaturePosterior:
        """The posterior of a fitted :class:`~geogp.models.afs.AFSRegressor`. Cost O(M³)."""
        post = model.posterior_
        sl = np.asarray(post.sqrt_lam, dtype=np.float64)
        chol = np.asarray(post.chol, dtype=np.float64)
        A: np.ndarray | Callable[[], np.ndarray]
        if chol.ndim == 1:  # diagonal statistics: chol holds sqrt(diag A)
            A, Ainv = np.diag(chol**2), np.diag(1.0 / chol**2)
        else:
            A = lambda: chol @ chol.T  # noqa: E731  (O(M³): only for A itself, rarely needed)
            Ainv = inverse_from_cholesky(chol)
        stats = model.detrended_stats()
        t = sl * np.asarray(stats.r, dtype=np.float64) / post.noise  # t = σ⁻² Λ½ r
        return cls(sl, A, Ainv, t, post.noise, post.kvar0)

    def add(self, psi: np.ndarray, y: float | None = None) -> tuple[np.ndarray, float]:
        """Absorb one observation with features ψ (M,) and optional value y. Cost O(M²).

        Returns (w, d) with w = A⁻¹ψ and d = σ² + ψᵀw, taken before the update.
        """
        psi = np.asarray(psi, dtype=np.float64)
        w = self.Ainv @ psi
        d = self.noise + psi @ w
        rank1(self.Ainv, w, w, -1.0 / d)  # A⁻¹ ← A⁻¹ − wwᵀ/d
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

    def mean(self, Psi: np.ndarray) -> np.ndarray:
        """Posterior mean ψᵀA⁻¹t at rows of Psi (N, M). Cost O(NM + M²)."""
        return np.asarray(Psi) @ (self.Ainv @ self.t)

    def var_latent(self, Psi: np.ndarray) -> np.ndarray:
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


def inverse_from_cholesky(L: np.ndarray) -> np.ndarray:
    """A⁻¹ from the lower Cholesky factor L of A. Cost O(M³)."""
    L = np.asarray(L, dtype=np.float64)
    inv = sla.cho_solve((L, True), np.eye(L.shape[0]))
    return 0.5 * (inv + inv.T)


def check_afs(model: Any) -> None:
    if not hasattr(model, "features_") or not hasattr(model, "posterior_"):
        raise InputError(f"expected a fitted AFSRegressor (or ExactGP); got {type(model).__name__}"
                         " without fitted state. Call fit() or fit_grid() first; the wavelet "
                         "model is not supported for placement yet.")
    if getattr(getattr(model, "stats_", None), "matrix_free", False):
        raise InputError("sensor placement needs the dense M × M posterior; this model was fitted "
                         "with the matrix-free solver (solver='iterative', large M). Refit with "
                         "solver='dense' and n_features ≤ 4096 for placement.")


def afs_psi(model: Any, X: ArrayLike, what: str) -> np.ndarray:
    """ψ (N, M) at X in the model's input units; raises for points outside the window."""
    Xs = model.scaler_.x(X)
    try:
        model.features_.check_inside(Xs, "raise")
    except InputError as err:
        raise type(err)(f"{what}: {err}") from None
    return np.asarray(model.features_(Xs)) * np.asarray(model.posterior_.sqrt_lam)
