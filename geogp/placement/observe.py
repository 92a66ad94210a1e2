"""Observations added to a fitted model without refitting (docs/placement.md, the active loop).

:func:`add_observations` updates an AFS model's whitened posterior by rank-one steps
(:class:`~geogp.placement.posterior.FeaturePosterior`) and hands a lattice model to
:func:`geogp.placement.lattice.add_lattice_observations` (on tiles
:func:`geogp.placement.lattice_tiled.add_tiled_observations`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from geogp.core.validation import as_points, as_targets, check_same_length
from geogp.exceptions import InputError
from geogp.families import family_of
from geogp.models.base import SAFE_MAGNITUDE

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["add_observations", "check_new_observations"]


def add_observations(model: Any, X: ArrayLike, y: ArrayLike | None = None) -> Any:
    """A copy of a fitted model with observations added, without refitting: its family's
    :meth:`~geogp.families.generic.Family.condition` (AFS:
    :func:`geogp.placement.feature_models.condition_afs`; lattice:
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
