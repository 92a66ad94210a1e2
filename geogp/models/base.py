"""Shared pieces of the estimators: predictions and standardisation (docs/model.md); the
front end's contract with a model is :class:`geogp.families.generic.Family`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from geogp.exceptions import InputError, NotFittedError

if TYPE_CHECKING:  # annotations only

    pass

# values and coordinates beyond this magnitude overflow float64 once squared (variances)
SAFE_MAGNITUDE = 1e150

__all__ = ["SAFE_MAGNITUDE", "Prediction", "Standardizer", "check_fitted", "check_columns"]


def check_fitted(model: object, attribute: str) -> None:
    """Raise :class:`~geogp.exceptions.NotFittedError` unless ``model`` has ``attribute``
    (set by its ``fit``)."""
    if not hasattr(model, attribute):
        raise NotFittedError(f"this {type(model).__name__} is not fitted yet; call fit(...) "
                             "before predicting, saving or placing sensors with it.")


def check_columns(X: np.ndarray, n_dims: int, what: str = "X (prediction points)") -> None:
    """Refuse prediction points whose number of columns differs from the training inputs'."""
    if X.shape[1] != n_dims:
        raise InputError(f"{what} has {X.shape[1]} column(s) but the model was fitted on "
                         f"{n_dims}-dimensional inputs; pass one column per input dimension.")


class Prediction(NamedTuple):
    """Predictive moments at N* points, on the original scale of the data.

    Attributes:
        mean: (N*,) predictive mean of f (= of y).
        var_latent: (N*,) variance of the latent f(x*).
        var_observed: (N*,) variance of a new noisy observation y* = f(x*) + noise.
    """

    mean: np.ndarray
    var_latent: np.ndarray
    var_observed: np.ndarray

    @property
    def std_latent(self) -> np.ndarray:
        return np.sqrt(np.maximum(self.var_latent, 0.0))

    @property
    def std_observed(self) -> np.ndarray:
        return np.sqrt(np.maximum(self.var_observed, 0.0))


@dataclass(frozen=True)
class Standardizer:
    """z-scores inputs per dimension and outputs with training statistics (docs/model.md).

    x̃_d = (x_d − x_mean_d)/x_scale_d, ỹ = (y − y_mean)/y_scale. Lengthscales learnt in
    standardised units are reported as ℓ_d·x_scale_d; signal and noise sd as ·y_scale.
    """

    x_mean: np.ndarray
    x_scale: np.ndarray
    y_mean: float
    y_scale: float

    def __post_init__(self):
        # variances are reported on the data's scale (× y_scale²): keep them finite in float64
        big = SAFE_MAGNITUDE
        if not (np.isfinite(self.y_mean) and np.isfinite(self.y_scale)
                and abs(self.y_mean) < big and self.y_scale < big):
            raise InputError(
                "the values are too large in magnitude for float64 arithmetic (mean "
                f"{self.y_mean:.3g}, sd {self.y_scale:.3g}; variances would overflow); "
                "rescale them (e.g. divide by a power of ten) and scale the predictions back.")
        xm, xs = np.asarray(self.x_mean), np.asarray(self.x_scale)
        if not (np.all(np.isfinite(xm)) and np.all(np.isfinite(xs)) and np.all(np.abs(xm) < big)
                and np.all(xs < big)):
            raise InputError("the coordinates are too large in magnitude for float64 arithmetic; "
                             "express them in other units (e.g. km instead of m).")

    @classmethod
    def from_data(cls, X: np.ndarray, y: np.ndarray) -> Standardizer:
        """Statistics of X (N, D) and y (N,); refuses constant targets or a degenerate input
        axis."""
        with np.errstate(over="ignore", invalid="ignore"):
            x_scale = X.std(axis=0)
            y_scale = float(y.std())
        if not y_scale > 0 and np.ptp(y) > 0:  # they differ, but their variance underflows
            raise InputError(
                f"the values are too small in magnitude for float64 arithmetic (they span "
                f"{float(np.min(y)):.3g} to {float(np.max(y)):.3g}; their variance underflows); "
                "rescale them (e.g. multiply by a power of ten) and scale the predictions back.")
        if not y_scale > 0:
            raise InputError(
                f"the targets are constant (all equal to {float(y[0])!r}); there is nothing to "
                "model. A Gaussian process needs varying observations."
            )
        if np.any(x_scale <= 0):
            bad = np.flatnonzero(x_scale <= 0).tolist()
            raise InputError(
                f"input dimension(s) {bad} have a single value across all points; drop them or "
                "provide points spread along every axis."
            )
        with np.errstate(over="ignore", invalid="ignore"):
            return cls(X.mean(axis=0), x_scale, float(y.mean()), y_scale)

    @classmethod
    def identity(cls, n_dims: int) -> Standardizer:
        return cls(np.zeros(n_dims), np.ones(n_dims), 0.0, 1.0)

    def x(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_mean) / self.x_scale

    def y(self, y: np.ndarray) -> np.ndarray:
        return (y - self.y_mean) / self.y_scale

    def unscale(self, mean: np.ndarray, var_latent: np.ndarray, noise: float) -> Prediction:
        """Map standardised predictive moments back to the data's scale."""
        s2 = self.y_scale**2
        mean = self.y_mean + self.y_scale * np.asarray(mean)
        var_f = s2 * np.asarray(var_latent)
        return Prediction(mean, var_f, var_f + s2 * float(noise))
