"""The trend's uncertainty in an AFS model's predictions and samples (universal kriging).

The model is y = Hβ + Φᵀu + ε with u ~ N(0, Λ), so the data covariance is C = ΦᵀΛΦ + σ²I.
β is learnt with θ, and at fixed θ its optimum is the generalised least-squares estimate
β̂ = Ψ⁻¹HᵀC⁻¹y, Ψ = HᵀC⁻¹H: the posterior mean of β under a flat prior, whose covariance is
Ψ⁻¹. Predictions that treat β̂ as known miss that covariance: far from the data, where the
extrapolated trend dominates the mean, their ``std`` would stay at the prior's. The universal-
kriging variance adds

    uᵀ Ψ⁻¹ u,    u(x) = h(x) − HᵀC⁻¹k(x) = h(x) − W_Hᵀ φ(x),    W_H = σ⁻² Λ^{½} A⁻¹ Λ^{½} F,

with A = I + σ⁻² Λ^{½} G Λ^{½} and F = ΦH (M, p): W_H holds the posterior weights of each
column of H (as ``posterior.weights`` those of y), and Ψ = σ⁻² (HᵀH − Fᵀ W_H). Samples draw
β = β̂ + δ, δ ~ N(0, Ψ⁻¹), and shift the feature weights by −W_H δ (the posterior of u given
β), which adds the same uᵀΨ⁻¹u to their variance. Everything is in standardised units and
computed once per posterior from the saved statistics (so it holds for loaded models too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla

from geogp.core.trend import basis, basis_grid
from geogp.exceptions import InputError
from geogp.features import trig
from geogp.features.afs_dft import log_lambda
from geogp.models.collapsed_iterative import IterativeOptions, IterativePosterior, posterior_solve

if TYPE_CHECKING:  # annotations only
    from geogp.models.afs.regressor import AFSRegressor

__all__ = ["trend_parts", "trend_variance_points", "trend_variance_grid", "trend_draws"]


def trend_parts(model: AFSRegressor) -> tuple[np.ndarray, np.ndarray] | None:
    """(W_H (M, p), Ψ⁻¹ (p, p)) of a fitted AFS model with a mean function, else None.
    Computed once per posterior (:meth:`~geogp.models.afs.AFSRegressor.derived`)."""
    if getattr(model, "beta_", None) is None or getattr(model.stats_, "F", None) is None:
        return None
    derived = model.derived()
    if derived.trend_parts is not None:
        return derived.trend_parts
    post, st = model.posterior_, model.stats_
    F, HH = np.asarray(st.F, dtype=np.float64), np.asarray(st.HH, dtype=np.float64)
    noise = float(post.noise)
    # values of a damaged model file overflow here: Ψ is checked, and refused, just below
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(post, IterativePosterior):
            ll = np.asarray(log_lambda(model.features_, model.kernel_))
            d = np.exp(0.5 * ll)
            options = IterativeOptions(tol=float(model.cg_tol) / 100)
            W = d[:, None] * posterior_solve(ll, noise, st.G, d[:, None] * F / noise, options)
        elif post.chol.ndim == 1:  # diagonal A: chol holds √diag(A)
            W = (post.sqrt_lam**2 / (post.chol**2 * noise))[:, None] * F
        else:
            sl = post.sqrt_lam[:, None]
            W = sl * sla.cho_solve((post.chol, True), sl * F) / noise
        psi = (HH - F.T @ W) / noise
    derived.trend_parts = (W, _spd_inverse(0.5 * (psi + psi.T)))
    return derived.trend_parts


def _spd_inverse(psi: np.ndarray) -> np.ndarray:
    """Ψ⁻¹ by eigendecomposition, with eigenvalues below rounding clipped (never negative)."""
    if not np.all(np.isfinite(psi)):
        raise InputError("the model's trend statistics are not finite (a damaged model file, "
                         "or a fit that failed): its trend variance cannot be computed. Refit.")
    vals, vecs = np.linalg.eigh(psi)
    floor = max(vals.max(), 0.0) * 1e-13 * psi.shape[0]
    inv = np.where(vals > floor, 1.0 / np.maximum(vals, floor), 0.0)
    return (vecs * inv) @ vecs.T


def _quadratic(u: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """uᵀ cov u over the last axis of u (…, p)."""
    return np.maximum(np.einsum("...j,jk,...k->...", u, cov, u), 0.0)


def trend_variance_points(model: AFSRegressor, Xs: np.ndarray,
                          Phi: np.ndarray | None = None) -> np.ndarray:
    """uᵀΨ⁻¹u at standardised points Xs (N*, D) (zeros without a mean function). ``Phi``: the
    features at Xs when the caller has them."""
    parts = trend_parts(model)
    if parts is None:
        return np.zeros(Xs.shape[0])
    W, cov = parts
    ff = model.features_
    if Phi is not None:
        fw = Phi @ W
    else:
        fw = np.stack([trig.evaluate_points(ff, Xs, trig.linear_coefficients(ff, W[:, j]),
                                            "linear") for j in range(W.shape[1])], axis=-1)
    return _quadratic(basis(Xs, model.powers_) - fw, cov)


def _u_grid(model, saxes: list, W: np.ndarray) -> np.ndarray:
    """u on the tensor grid of standardised axes: (N_1, …, N_D, p)."""
    ff = model.features_
    return np.stack([basis_grid(saxes, model.powers_, j) - trig.evaluate_grid(
        ff, saxes, trig.linear_coefficients(ff, W[:, j]), "linear")
        for j in range(W.shape[1])], axis=-1)


def trend_variance_grid(model: AFSRegressor, saxes: list) -> np.ndarray | float:
    """uᵀΨ⁻¹u on the tensor grid of standardised axes (0.0 without a mean function)."""
    parts = trend_parts(model)
    if parts is None:
        return 0.0
    W, cov = parts
    return _quadratic(_u_grid(model, saxes, W), cov)


def trend_draws(model: AFSRegressor, U: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """Posterior draws of (u, β) from draws ``U`` (M, n) of u at β = β̂: (U − W_H δ, β̂ + δ)
    with δ (p, n) ~ N(0, Ψ⁻¹); (U, β̂ as a column) without trend uncertainty to add."""
    parts = trend_parts(model)
    if parts is None:
        beta = model.beta_
        return U, None if beta is None else np.asarray(beta)[:, None]
    W, cov = parts
    vals, vecs = np.linalg.eigh(cov)
    delta = (vecs * np.sqrt(np.maximum(vals, 0.0))) @ rng.standard_normal((cov.shape[0],
                                                                             U.shape[1]))
    return U - W @ delta, np.asarray(model.beta_)[:, None] + delta
