"""Predictions of a fitted :class:`~geogp.models.afs.AFSRegressor`, in standardised units.

Never an (N* × M) feature matrix above 2,048 points: the mean and the variance are trig
polynomials evaluated by NUFFT at points or by separable transforms on grids
(:mod:`geogp.features.trig`); the matrix-free posterior goes through
:func:`geogp.models.collapsed_iterative.predict_moments`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geogp.core.trend import basis, basis_grid
from geogp.features import trig
from geogp.features.fourier import FourierFeatures
from geogp.models.afs.trend import trend_variance_grid, trend_variance_points
from geogp.models.collapsed_iterative import IterativePosterior, predict_moments, variance_bins

if TYPE_CHECKING:  # annotations only
    from geogp.models.afs.regressor import AFSRegressor

__all__ = ["at_points", "on_grid", "quadratic_form_bins"]

DENSE_PREDICT_MAX = 2048  # below this many points, predict with explicit features


def quadratic_form_bins(ff: FourierFeatures, quad: np.ndarray) -> np.ndarray:
    """Quadratic-form bins of φᵀQφ: Q dense (M, M), or its diagonal (M,) (O(M) instead of O(M²))."""
    if quad.ndim == 1:
        return trig.diagonal_quadratic_form_coefficients(ff, quad)
    return trig.quadratic_form_coefficients(ff, quad)


def _variance_bins(model):
    """Quadratic-form bins of the matrix-free posterior's variance, computed once per posterior."""
    derived = model.derived()
    if derived.variance_bins is None:
        derived.variance_bins = variance_bins(model.features_, model.posterior_)
    return derived.variance_bins


def at_points(model: AFSRegressor, Xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, latent variance) at standardised points Xs (N*, D) inside the window; the
    variance includes the trend's (:mod:`geogp.models.afs.trend`)."""
    ff, post = model.features_, model.posterior_
    Phi = None
    if isinstance(post, IterativePosterior):
        def evaluate(coef, kind):
            return trig.evaluate_points(ff, Xs, coef, kind)

        mean, var = predict_moments(ff, post, evaluate, _variance_bins(model))
    elif Xs.shape[0] <= DENSE_PREDICT_MAX:
        Phi = ff(Xs)
        mean = Phi @ post.weights
        var = post.kvar0 + (Phi**2 @ post.quad if post.quad.ndim == 1
                             else np.einsum("nm,mk,nk->n", Phi, post.quad, Phi))
    else:
        mean = trig.evaluate_points(ff, Xs, trig.linear_coefficients(ff, post.weights), "linear")
        bins = quadratic_form_bins(ff, post.quad)
        var = post.kvar0 + trig.evaluate_points(ff, Xs, bins, "quadratic")
    if model.beta_ is not None:
        mean = mean + basis(Xs, model.powers_) @ model.beta_
        var = var + trend_variance_points(model, Xs, Phi)
    return mean, np.maximum(var, 0.0)


def on_grid(model: AFSRegressor, saxes: list,
            outside: str = "raise") -> tuple[np.ndarray, np.ndarray]:
    """(mean, latent variance, the trend's included) on the tensor grid of standardised axes,
    NaN outside the window (or raise there with ``outside='raise'``)."""
    ff, post = model.features_, model.posterior_
    half = ff.width / 2 * (1 + 1e-12)
    inside_axes = [np.abs(a - c) <= h for a, c, h in zip(saxes, ff.center, half, strict=True)]
    if outside == "raise" and not all(m.all() for m in inside_axes):
        ff.check_inside(np.array([[a.min() for a in saxes], [a.max() for a in saxes]]), "raise",
                        model.scaler_)
    if isinstance(post, IterativePosterior):
        def evaluate(coef, kind):
            return trig.evaluate_grid(ff, saxes, coef, kind)

        mean, var = predict_moments(ff, post, evaluate, _variance_bins(model))
    else:
        mean = trig.evaluate_grid(ff, saxes, trig.linear_coefficients(ff, post.weights), "linear")
        bins = quadratic_form_bins(ff, post.quad)
        var = post.kvar0 + trig.evaluate_grid(ff, saxes, bins, "quadratic")
    var = np.maximum(var, 0.0)
    if model.beta_ is not None:
        for j, b in enumerate(model.beta_):
            mean = mean + b * basis_grid(saxes, model.powers_, j)
        var = var + trend_variance_grid(model, saxes)
    inside = inside_axes[0]
    for m in inside_axes[1:]:
        inside = np.multiply.outer(inside, m)
    return np.where(inside, mean, np.nan), np.where(inside, var, np.nan)
