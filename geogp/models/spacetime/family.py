"""The space-time family (:class:`~geogp.models.spacetime.SpaceTimeRegressor`): one model for a
whole image stack on a regular raster, fitted jointly over the dates (``fits_series``); the
front end keeps one :class:`~geogp.models.spacetime.SpaceTimeDate` per date."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from geogp.core.grid_checks import spacing
from geogp.exceptions import InputError
from geogp.families.generic import Family
from geogp.models.base import Prediction
from geogp.models.spacetime.codec import load_series, save_series
from geogp.models.spacetime.regressor import (
    SpaceTimeDate,
    SpaceTimeForecast,
    SpaceTimeRegressor,
    cell_indices,
)
from geogp.persist.checks import clean, init_names
from geogp.persist.semantics import check_series_grid
from geogp.placement.spacetime import SpaceTimePlacement

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["SpaceTimeFamily", "FAMILY"]


def _regressor(est: SpaceTimeRegressor | SpaceTimeDate) -> SpaceTimeRegressor:
    """The joint model: ``make`` gives it, a fitted stack keeps it in each date."""
    return est.model if isinstance(est, SpaceTimeDate) else est


class SpaceTimeFamily(Family[SpaceTimeDate]):
    """The family of :class:`~geogp.models.spacetime.SpaceTimeRegressor`."""

    name = "spacetime"
    model_class = SpaceTimeRegressor
    fits_series = single_range = savable = can_sample = can_place = places_in_time = True
    placement_type = SpaceTimePlacement
    placement_strategy = "reduction"  # total variance reduction at the date, as the lattice's
    default_maxiter = None

    def check_memory(self, est: SpaceTimeRegressor | SpaceTimeDate, raster_shape: tuple
                     ) -> None:
        """Refuse a stack (dates, n_y, n_x) over the estimator's limit, before any work."""
        _regressor(est).check_memory(tuple(raster_shape))

    def fit_series(self, est: SpaceTimeRegressor | SpaceTimeDate, axes: list,
                   values: ArrayLike, times: np.ndarray, regular: bool) -> list[SpaceTimeDate]:
        """Fit the stack ``values`` (T, N_y, N_x) at ``times`` (T,, days) on the grid ``axes``
        (model units); one :class:`SpaceTimeDate` per date."""
        if not regular:
            raise InputError("model='spacetime' needs a regular raster (equal steps along "
                             "each axis); this one is irregular.")
        v = np.asarray(values, dtype=np.float64)
        if np.isinf(v).any():
            raise InputError("the stack contains infinite values; replace them by NaN "
                             "(missing) or finite numbers.")
        y_step, x_step = (abs(spacing(np.asarray(a, dtype=np.float64))) for a in axes)
        model = _regressor(est).fit(v, times, (y_step, x_step))
        model.axes_ = [np.asarray(a, dtype=np.float64) for a in axes]
        return [SpaceTimeDate(model, k) for k in range(v.shape[0])]

    def fit_grid(self, est: Any, axes: list, values: ArrayLike, regular: bool,
                 covariates: np.ndarray | None = None) -> Any:
        raise InputError("model='spacetime' fits a stack of dates (a time dimension with at "
                         "least two dates); for one image use model='lattice'.")

    def fit_points(self, est: Any, X: np.ndarray, y: np.ndarray,
                   target_axes: list[np.ndarray] | None = None,
                   units: str = "coordinate units") -> Any:
        raise InputError("model='spacetime' fits raster stacks only; grid the points first.")

    def predict_at(self, est: SpaceTimeDate, X: np.ndarray, outside: str = "raise") -> Prediction:
        """The posterior at the fitted stack's own cells (the generic ``predict_rows`` comes
        here with a block's cells)."""
        model = est.model
        iy = cell_indices(model.axes_[0], X[:, 0], outside)
        ix = cell_indices(model.axes_[1], X[:, 1], outside)
        ok = (iy >= 0) & (ix >= 0)

        def at(field: np.ndarray) -> np.ndarray:
            return np.where(ok, field[est.index][iy, ix], np.nan)

        latent, noise = at(model.sd_latent_), model.noise_sd_[iy, ix]
        return Prediction(at(model.mean_), latent**2, latent**2 + np.where(ok, noise, np.nan)**2)

    def forecast(self, est: SpaceTimeRegressor | SpaceTimeDate, time: float
                 ) -> SpaceTimeForecast:
        """The joint model's posterior at ``time`` (days): :meth:`SpaceTimeRegressor.forecast`."""
        return _regressor(est).forecast(time)

    def placement(self, est: SpaceTimeRegressor | SpaceTimeDate | SpaceTimeForecast
                  ) -> SpaceTimePlacement:
        """Placement at a forecast's date, or at a fitted date (its posterior there)."""
        if isinstance(est, SpaceTimeRegressor):
            raise InputError("placement on a space-time model is at one date: pass "
                             "model.forecast(t) (t in days on the fitted dates' scale), or use "
                             "GeoRegressor.suggest_sites(time=...).")
        if isinstance(est, SpaceTimeDate):
            est = est.model.forecast(float(est.model.times_[est.index]))
        return SpaceTimePlacement(est)

    def predict_dates(self, est: SpaceTimeDate, axes: list, times: np.ndarray) -> Prediction:
        """Moments at dates ``times`` (days) on the fitted cells ``axes``: the joint model's
        posterior with those dates added (:meth:`SpaceTimeRegressor.predict_dates`)."""
        model = est.model
        iy = cell_indices(model.axes_[0], np.asarray(axes[0], dtype=np.float64), "raise")
        ix = cell_indices(model.axes_[1], np.asarray(axes[1], dtype=np.float64), "raise")
        mean, latent, observed = (a[:, iy][:, :, ix] for a in model.predict_dates(times))
        return Prediction(mean, latent**2, observed**2)

    def sample_slices(self, estimators: list[SpaceTimeDate], axes: list, n: int,
                      seed: int | np.random.SeedSequence | None = None,
                      observed: bool = False) -> np.ndarray:
        """(n, dates, n_y, n_x) joint samples of the stack on the fitted cells ``axes``
        (:meth:`SpaceTimeRegressor.sample`: one draw over every date, not one per date)."""
        model = estimators[0].model
        iy = cell_indices(model.axes_[0], np.asarray(axes[0], dtype=np.float64), "raise")
        ix = cell_indices(model.axes_[1], np.asarray(axes[1], dtype=np.float64), "raise")
        draws = model.sample(n, seed=seed, observed=observed)
        dates = np.array([est.index for est in estimators])
        if (np.array_equal(dates, np.arange(draws.shape[1]))
                and np.array_equal(iy, np.arange(draws.shape[2]))
                and np.array_equal(ix, np.arange(draws.shape[3]))):
            return draws  # the whole fitted stack: no copy
        return draws[np.ix_(np.arange(n), dates, iy, ix)]

    def sample_grid(self, est: SpaceTimeDate, axes: list, n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        """(n, n_y, n_x) samples of one date: its slice of the joint draw."""
        return self.sample_slices([est], axes, n, seed, observed)[:, 0]

    def hyperparameters(self, est: SpaceTimeDate) -> dict:
        model = est.model
        p, unit, scale = model.params_, model.unit_, model.scale_
        ell = math.exp(p["log_range"]) * unit
        return {"lengthscale": np.array([[ell, ell]]),
                "signal_sd": math.exp(p["log_sd"]) * scale,
                "noise_sd": math.exp(p["log_noise"]) * scale,
                "range_persistent": math.exp(p["log_range_mean"]) * unit,
                "sd_persistent": math.exp(p["log_sd_mean"]) * scale,
                "time_scale_days": math.exp(p["log_tau"]),
                "sd_offset": math.exp(p["log_sd_offset"]) * scale,
                "time_scale_offset_days": math.exp(p["log_tau_offset"]),
                "interval_scale": float(model.interval_scale_),
                "large_scales_block_cells": int(model.block_)}

    def series_words(self, est: SpaceTimeDate, length: Callable[[float], str]) -> str:
        h = self.hyperparameters(est)
        t, ny, nx = est.model.shape_
        return (f"anomalies: range ρ = {length(float(h['lengthscale'][0, 0]))}, sd "
                f"{h['signal_sd']:.4g}, time scale {h['time_scale_days']:.3g} days; "
                f"persistent field: range {length(h['range_persistent'])}, sd "
                f"{h['sd_persistent']:.4g}; dates' offsets: sd {h['sd_offset']:.4g}, time "
                f"scale {h['time_scale_offset_days']:.3g} days; noise sd {h['noise_sd']:.4g}; "
                f"{_widened(h['interval_scale'])}{_large(est.model)}a space-time lattice of "
                f"{ny} × {nx} cells × {t} dates")

    def slices_to_arrays(self, estimators: list, arrays: dict) -> list[dict]:
        init = clean({n: getattr(estimators[0].model, n) for n in init_names(SpaceTimeRegressor)})
        return save_series(estimators, arrays, init)

    def slices_from_arrays(self, slices: list[dict], arrays: Any) -> list:
        return load_series(slices, arrays, set(init_names(SpaceTimeRegressor)))

    def check_grid(self, est: SpaceTimeDate, axes: list[np.ndarray], where: str) -> None:
        check_series_grid(est.model.axes_, axes[0], axes[1], where)

    def unknowns(self, est: SpaceTimeDate, n_features: int | str | None) -> str:
        t, ny, nx = est.model.shape_
        return f", a space-time lattice of {ny} × {nx} cells × {t} dates"


def _large(model: SpaceTimeRegressor) -> str:
    k = model.block_
    return "" if not k else f"large scales from {k} × {k}-cell block means; "


def _widened(factor: float) -> str:
    return ("" if factor == 1.0 else
            f"intervals widened ×{factor:.3g} (gap-shaped folds); ")


FAMILY = SpaceTimeFamily()
