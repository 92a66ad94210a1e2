"""Shared pieces of the estimators: the front end's contract, predictions and
standardisation (docs/model.md, docs/architecture.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from geogp.exceptions import InputError, NotFittedError

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.kernels import Kernel

__all__ = ["Estimator", "Prediction", "Standardizer", "check_fitted", "check_columns"]


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


@runtime_checkable
class Estimator(Protocol):
    """What the geodata front end needs from a model family: one object per family
    (:mod:`geogp.families`, looked up by name in its registry) that builds, fits, predicts,
    samples, describes, scores, saves and loads that family's numerical models.

    The numerical models (``AFSRegressor``, ``LatticeRegressor``, ...) speak numpy in model
    coordinates; a family adapts one of them to the front end, so that the front end,
    persistence, cross-validation and placement never switch on the model's kind. Every
    method takes the model object ``est`` it works on (``make``/``from_arrays`` return one).
    Grids are tensor grids given by ``axes`` (y coordinates, x coordinates), model units.

    Attributes:
        name: the model's name (``GeoRegressor(model=...)``, ``model_``, model files).
        savable: whether :meth:`to_arrays` can store a fitted model.
        can_sample: whether :meth:`sample_grid` draws posterior samples.
        takes_covariates: whether :meth:`fit_grid` accepts covariate rasters.
        takes_kernel: whether the model takes ``kernel=`` and ``n_features=``
            (the Fourier-feature options).
        shares_hyperparameters: whether slices can share the first slice's hyperparameters.
        maps_lengthscale: whether the model's lengthscale varies in space (a map of it).
        single_range: whether the lengthscale is one isotropic range (reported as ρ).
        estimates_cost: whether the model estimates a fit's tiles, memory and time up front.
        default_maxiter: optimiser iterations of a progress bar (None: no training bar).
        placement_strategy: the default strategy of ``geogp place`` for this model.
        setup_phase: the name of the progress bar's phase before the optimiser.
    """

    name: str
    savable: bool
    can_sample: bool
    takes_covariates: bool
    takes_kernel: bool
    shares_hyperparameters: bool
    maps_lengthscale: bool
    single_range: bool
    estimates_cost: bool
    default_maxiter: int | None
    placement_strategy: str
    setup_phase: str

    def option_names(self) -> set:
        """Keyword arguments the family's model accepts."""

    def make(self, options: dict | None = None, *, kernel: str | Kernel | None = None,
             n_features: int | str | None = None,
             progress: Callable[[int, float], object] | None = None) -> Any:
        """An unfitted model with the front end's defaults; unknown options raise."""

    def memory_estimate(self, est: Any, raster_shape: tuple) -> float:
        """Estimated peak bytes of fitting a raster of ``raster_shape`` cells (NaN: unknown)."""

    def check_memory(self, est: Any, raster_shape: tuple) -> None:
        """Refuse (``MemoryEstimateError``) before allocating a raster the model's memory
        limit cannot hold, and settings the model refuses (``InputError``)."""

    def announce_cost(self, est: Any, raster_shape: tuple) -> None:
        """Before a raster fit with progress bars (``estimates_cost``): say on stderr what
        the fit will cost (tiles, memory, time)."""

    def fit_grid(self, est: Any, axes: list, values: ArrayLike, regular: bool,
                 covariates: np.ndarray | None = None) -> Any:
        """Fit on one raster slice ``values`` (N_y, N_x), NaN = missing; ``covariates``
        (k, N_y, N_x) or None. The model's window covers the whole raster. Returns ``est``."""

    def fit_points(self, est: Any, X: np.ndarray, y: np.ndarray,
                   target_axes: list[np.ndarray] | None = None,
                   units: str = "coordinate units") -> Any:
        """Fit on scattered points X (N, 2), y (N,); the window covers ``target_axes``."""

    def predict_grid(self, est: Any, axes: list, outside: str = "raise", block_cells: int = 2**20,
                     on_block: Callable[[int], Any] | None = None) -> Prediction:
        """Predictive moments (N_y, N_x) on the grid, in blocks of rows."""

    def predict_points(self, est: Any, X: np.ndarray, outside: str = "raise") -> Prediction:
        """Predictive moments (N*,) at the points X (N*, 2)."""

    def sample_grid(self, est: Any, axes: list, n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        """``n`` posterior samples (n, N_y, N_x) on the grid, in data units."""

    def describe(self, est: Any) -> dict:
        """The summary facts: ``lengthscale`` ((P, 2) or None), ``signal_sd``, ``noise_sd``,
        ``n_features``, ``n_iter``, ``converged``, ``objective``, ``unknowns`` (words), and
        family-specific entries (the lattice model's mid- and large-scale parts)."""

    def evidence(self, est: Any) -> float:
        """Log evidence (bound or likelihood) of the fit, in nats, on standardised values."""

    def to_arrays(self, est: Any, prefix: str, arrays: dict) -> dict:
        """Store a fitted model's arrays in ``arrays`` (keys under ``prefix``); returns its
        JSON metadata."""

    def from_arrays(self, meta: dict, prefix: str, arrays: Any) -> Any:
        """Rebuild a fitted model from :meth:`to_arrays`'s metadata and (checked) arrays."""

    def check_grid(self, est: Any, axes: Sequence[np.ndarray], where: str) -> None:
        """Refuse a loaded model whose geometry does not match the grid it was fitted on."""


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
        big = 1e150
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
