"""Observations added to a fitted model without refitting (docs/placement.md, the active loop).

:func:`add_observations` updates an AFS model's whitened posterior by rank-one steps
(:class:`~geogp.placement.posterior.FeaturePosterior`) and hands a lattice model to
:func:`geogp.placement.lattice.add_lattice_observations` (on tiles
:func:`geogp.placement.lattice_tiled.add_tiled_observations`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from geogp._validation import as_points, as_targets, check_same_length
from geogp.exceptions import InputError
from geogp.families import family_of
from geogp.features.data import Points
from geogp.features.fourier_statistics import SufficientStats
from geogp.models.base import SAFE_MAGNITUDE
from geogp.placement.posterior import FeaturePosterior, afs_psi, check_afs
from geogp.trend import basis

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["add_observations", "condition_afs", "check_new_observations"]


def add_observations(model: Any, X: ArrayLike, y: ArrayLike | None = None) -> Any:
    """A copy of a fitted model with observations added, without refitting: its family's
    :meth:`~geogp.families.generic.Family.condition` (AFS: :func:`condition_afs`; lattice:
    :func:`geogp.placement.lattice.add_lattice_observations`, or tile by tile). The model
    itself is unchanged.

    Args:
        model: a fitted model whose family can condition (``can_condition``).
        X: (N, D) locations in the model's input units. y: (N,) values or None (the
            predictive means: only the covariance changes).
    """
    fam = family_of(model)
    if not fam.can_condition:  # its condition() says why, in the family's words
        return fam.condition(model, X, y)
    X, y = check_new_observations(X, y, fam.placement(model).n_dims)
    return fam.condition(model, X, y)


def check_new_observations(X: ArrayLike, y: ArrayLike | None,
                           n_dims: int) -> tuple[np.ndarray, np.ndarray | None]:
    """New observations checked as a fit checks its data: X (N, n_dims) finite numbers, y
    (N,) finite numbers (or None) within float64's safe range (:class:`Standardizer`'s)."""
    X = as_points(X, "X (new observations)", max_dims=max(3, n_dims))
    if X.shape[1] != n_dims:
        raise InputError(f"X (new observations) must have {n_dims} columns, the model's input "
                         f"dimensions; got {X.shape[1]}.")
    if y is None:
        return X, None
    y = as_targets(y, "y (new observations)")
    check_same_length(X, y, "X (new observations)", "y (new observations)")
    if np.max(np.abs(y)) >= SAFE_MAGNITUDE:
        raise InputError(f"y (new observations) holds values up to {np.max(np.abs(y)):.3g}, "
                         "too large in magnitude for float64 arithmetic (variances would "
                         "overflow); the fit refuses such values too. Rescale them.")
    return X, y


def condition_afs(model: Any, X: ArrayLike, y: ArrayLike | None = None) -> Any:
    """A copy of a fitted AFS model with observations added, without refitting.

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
    check_afs(model)
    X = as_points(X, "X (new observations)")
    Psi = afs_psi(model, X, "new observations")
    sc = model.scaler_
    fp = FeaturePosterior.from_model(model)
    trend = np.zeros(X.shape[0])
    if getattr(model, "beta_", None) is not None:
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
