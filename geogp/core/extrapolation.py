"""Warn when predictions lie far outside the data (issue #32, item 3).

Far from every observation a model's mean is its extrapolated trend, whatever the kernel says;
``std`` then carries the trend's uncertainty (universal kriging) but the numbers are still
guesses. :func:`record_data_box` keeps the data's bounding box (model coordinates) on the
estimator at fit time; :func:`warn_if_far` warns, with the distance, when prediction locations
lie farther from that box than the box's own extent (its longer side).
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from geogp.exceptions import ExtrapolationWarning

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["record_data_box", "warn_if_far", "distance_to_box"]

KM_PER_DEGREE = math.pi * 6371.0088 / 180.0  # as geogp.frontend.adapters (numpy-only module here)


def record_data_box(est: Any, X: np.ndarray, units: str = "coordinate units") -> None:
    """Keep the bounding box (2, D) of the data X (N, D) and the coordinates' units on ``est``."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 2 and X.shape[0]:
        est.data_box_ = np.stack([X.min(axis=0), X.max(axis=0)])
        est.data_units_ = str(units)


def distance_to_box(box: np.ndarray, axes: list | None = None,
                    points: ArrayLike | None = None) -> float:
    """Largest Euclidean distance to the box (2, D) from the tensor grid ``axes`` (D vectors:
    its farthest node is a corner, so the axes are taken one by one) or from ``points`` (N, D)."""
    lo, hi = box
    if points is not None:
        P = np.asarray(points, dtype=np.float64)
        P = P[np.isfinite(P).all(axis=1)]
        gap = np.maximum(np.maximum(lo - P, P - hi), 0.0)
        return float(np.sqrt(np.max(np.sum(gap**2, axis=1), initial=0.0)))
    far = [np.max(np.maximum(np.maximum(lo[d] - a, a - hi[d]), 0.0), initial=0.0)
           for d, a in enumerate(_finite(a) for a in axes)]
    return float(np.sqrt(np.sum(np.square(far))))


def _finite(a) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64).ravel()
    return a[np.isfinite(a)]


def _length(value: float, units: str) -> str:
    if units == "degrees of latitude":
        return f"{value:.4g}° (≈ {value * KM_PER_DEGREE:,.0f} km)"
    if units in ("metre", "metres", "meter", "meters", "m") and value >= 1000:
        return f"{value / 1000:,.4g} km"
    return f"{value:,.4g} {units}"


def warn_if_far(est: Any, axes: list | None = None, points: ArrayLike | None = None,
                stacklevel: int = 3) -> None:
    """Warn (:class:`ExtrapolationWarning`) when the prediction locations (the tensor grid
    ``axes``, or ``points`` (N, D)) lie farther from the data's box than its extent (longer
    side), naming the distance. Silent for estimators without a recorded box."""
    box = getattr(est, "data_box_", None)
    if box is None:
        return
    if (points is not None and np.size(points) == 0) or (axes is not None and any(
            np.size(a) == 0 for a in axes)):
        return
    extent = float(np.max(box[1] - box[0]))
    dist = distance_to_box(box, axes, points)
    if dist <= extent or dist == 0.0:
        return
    units = getattr(est, "data_units_", "coordinate units")
    warnings.warn(
        f"prediction locations lie up to {_length(dist, units)} outside the data, which span "
        f"{_length(extent, units)}: there the mean is the trend extrapolated "
        f"{dist / max(extent, 1e-300):.3g} times the data's extent, and std grows with the "
        "trend's uncertainty. Check that the prediction grid (like=, --like) is the intended "
        "one.", ExtrapolationWarning, stacklevel=stacklevel)
