"""Posterior samples of an AFS model (conditional simulation), exact under its feature prior.

The AFS model is f(x) = φ(x)ᵀu (+ the trend h(x)ᵀβ, drawn from its posterior with u:
:func:`~geogp.models.afs.trend.trend_draws`), and the optimal q(u) of the collapsed bound is
Gaussian: mean w (``posterior.weights``) and covariance Λ^{1/2} A⁻¹ Λ^{1/2} with
A = I + Λ^{1/2} G Λ^{1/2}/σ² (docs/bound.md). A sample of the whole field is therefore one draw
u_s = w + Λ^{1/2} L⁻ᵀ ε (A = LLᵀ, ε ~ N(0, I)) and one feature transform φ(x)ᵀu_s: a separable
grid transform on rasters, NUFFT or a dense product at points.

Matrix-free fits (``solver="iterative"``) keep S centred draws Λ^{1/2} A⁻¹ b, b ~ N(0, A), from
the solves behind their predictive variance (:func:`~geogp.models.collapsed_iterative.
iterative_posterior`): those are posterior draws of u − w, so up to S samples cost no new solve.

The samples' variance is that of φᵀu + hᵀβ, i.e. :meth:`predict`'s latent variance minus the part of
the prior the features leave out, k(0) − φᵀΛφ (the truncation diagnostic; small unless the
fit warned about it).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg as sla

from geogp.core.trend import basis, basis_grid
from geogp.exceptions import InputError
from geogp.features import trig
from geogp.models.afs.trend import trend_draws
from geogp.models.collapsed_iterative import IterativePosterior

if TYPE_CHECKING:  # annotations only
    from geogp.models.afs.regressor import AFSRegressor
    from geogp.models.collapsed import Posterior

__all__ = ["draw_weights", "sample_points", "sample_grid"]


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n (number of samples) must be an integer ≥ 1; got {n!r}.")
    return int(n)


def draw_weights(post: Posterior | IterativePosterior, n: int,
                 rng: np.random.Generator) -> np.ndarray:
    """(M, n) posterior draws of u (standardised units). Cost O(M² n) (O(M n) diagonal)."""
    n = _check_n(n)
    if isinstance(post, IterativePosterior):
        s = post.sample_a.shape[1]
        if n > s:
            raise InputError(
                f"this matrix-free fit keeps {s} posterior draws (n_samples={s}); ask for at most "
                f"{s} samples, or refit with n_samples ≥ {n}.")
        return post.weights[:, None] + post.sample_a[:, :n]
    eps = rng.standard_normal((post.weights.size, n))
    if post.chol.ndim == 1:  # diagonal A
        centred = eps / post.chol[:, None]
    else:
        centred = sla.solve_triangular(post.chol, eps, lower=True, trans="T")
    return post.weights[:, None] + post.sqrt_lam[:, None] * centred


def _finish(model, f: np.ndarray, observed: bool, rng) -> np.ndarray:
    if observed:
        f = f + math.sqrt(model.noise_) * rng.standard_normal(f.shape)
    return model.scaler_.y_mean + model.scaler_.y_scale * f


def sample_points(model: AFSRegressor, Xs: np.ndarray, n: int, rng: np.random.Generator,
                  observed: bool = False) -> np.ndarray:
    """(n, N*) samples at standardised points Xs inside the window, data units."""
    ff = model.features_
    U, B = trend_draws(model, draw_weights(model.posterior_, n, rng), rng)
    if Xs.shape[0] * ff.n_features <= 2**24:
        f = (ff(Xs) @ U).T
    else:
        f = np.stack([trig.evaluate_points(ff, Xs, trig.linear_coefficients(ff, U[:, s]),
                                           "linear") for s in range(U.shape[1])])
    if B is not None:
        f = f + (basis(Xs, model.powers_) @ B).T
    return _finish(model, f, observed, rng)


def sample_grid(model: AFSRegressor, saxes: list, n: int, rng: np.random.Generator,
                observed: bool = False) -> np.ndarray:
    """(n, N_1, …, N_D) samples on the tensor grid of standardised axes (inside the window),
    data units. Cost: one separable grid transform per sample."""
    ff = model.features_
    U, B = trend_draws(model, draw_weights(model.posterior_, n, rng), rng)
    f = np.stack([trig.evaluate_grid(ff, saxes, trig.linear_coefficients(ff, U[:, s]), "linear")
                  for s in range(U.shape[1])])
    if B is not None:
        for j, b in enumerate(B):
            f = f + b[(slice(None),) + (None,) * len(saxes)] * basis_grid(saxes, model.powers_,
                                                                          j)[None]
    return _finish(model, f, observed, rng)
