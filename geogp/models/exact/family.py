"""The exact GP family (:class:`~geogp.models.exact.ExactGP`): small data only (O(N³)),
fitted on points (a raster's observed cells), predicted in chunks; its evidence is the exact
log marginal likelihood. It has no samples and no file format yet."""

from __future__ import annotations

from typing import Any

import numpy as np

from geogp.exceptions import InputError
from geogp.families.generic import Family, kernel_facts
from geogp.models.base import Prediction
from geogp.models.exact.regressor import ExactGP
from geogp.placement.feature_models import ExactPlacement

__all__ = ["ExactFamily", "FAMILY", "EXACT_MAX_POINTS"]

EXACT_MAX_POINTS = 5000
_CHUNK = 2048  # prediction points per call


class ExactFamily(Family[ExactGP]):
    """The family of :class:`~geogp.models.exact.ExactGP`."""

    name = "exact"
    model_class = ExactGP
    placement_type = ExactPlacement
    takes_kernel = can_place = True

    def fit_points(self, est: ExactGP, X: np.ndarray, y: np.ndarray,
                   target_axes: list[np.ndarray] | None = None,
                   units: str = "coordinate units") -> Any:
        if X.shape[0] > EXACT_MAX_POINTS:
            raise InputError(
                f"model='exact' costs O(N³) and is limited to {EXACT_MAX_POINTS} points; got "
                f"{X.shape[0]}. Use model='afs'."
            )
        return super().fit_points(est, X, y, target_axes, units)

    def predict_at(self, est: ExactGP, X: np.ndarray, outside: str = "raise") -> Prediction:
        parts = [est.predict(X[i:i + _CHUNK]) for i in range(0, X.shape[0], _CHUNK)]
        return Prediction(*(np.concatenate([getattr(p, f) for p in parts])
                            for f in Prediction._fields))

    def hyperparameters(self, est: ExactGP) -> dict:
        return kernel_facts(est, n_features=False)

    def evidence(self, est: ExactGP) -> float:
        return est.log_marginal_likelihood()


FAMILY = ExactFamily()
