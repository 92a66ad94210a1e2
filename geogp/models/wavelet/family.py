"""The wavelet-basis family, ``model="wavelet_basis"``
(:class:`~geogp.models.wavelet.WaveletRegressor`, the thesis's wavelet-basis covariance): a
multiresolution prior on a compactly supported wavelet basis. Regular rasters with observed
cells take its per-axis grid statistics, others its point path; its window is widened (a margin in
standardised units) to cover the prediction grid; its lengthscale varies in space (a map of
it); its evidence is the exact log marginal likelihood."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from geogp.families.generic import Family, observed_cells
from geogp.models.base import Prediction
from geogp.models.wavelet import WaveletRegressor
from geogp.models.wavelet.codec import load_wavelet, save_wavelet
from geogp.persist.checks import clean, init_names
from geogp.placement.wavelet import WaveletPlacement

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["WaveletFamily", "FAMILY"]


class WaveletFamily(Family[WaveletRegressor]):
    """The family of :class:`~geogp.models.wavelet.WaveletRegressor`."""

    name = "wavelet_basis"  # "wavelet" is the non-stationary lattice model's alias
    model_class = WaveletRegressor
    placement_type = WaveletPlacement
    savable = can_sample = maps_lengthscale = True
    can_place = True
    unknowns_word = "wavelet basis functions"

    def widen(self, est: WaveletRegressor, lo: np.ndarray, hi: np.ndarray, t_lo: np.ndarray,
              t_hi: np.ndarray,
              scale: np.ndarray) -> None:
        """Window = data box ± margin in standardised units (``scale`` = x standard deviations)."""
        need = np.maximum(lo - t_lo, t_hi - hi) / scale
        est.margin = float(max(est.margin, need.max() * (1 + 1e-9) + 1e-12, 0.0))

    def fit_grid(self, est: WaveletRegressor, axes: list, values: ArrayLike, regular: bool,
                 covariates: np.ndarray | None = None) -> Any:
        """Regular rasters with observed cells: per-axis statistics; others as points."""
        self.refuse_covariates(covariates)
        v, obs, X = observed_cells(axes, values)
        if regular and obs.any():
            self.cover_target(est, X, axes)
            return est.fit_grid(axes, v)
        return self.fit_points(est, X, v[obs], axes)

    def predict_rows(self, est: WaveletRegressor, rows: np.ndarray, cols: np.ndarray,
                     outside: str = "raise") -> Prediction:
        if est.posterior_.grid_ready():
            return est.predict_grid(rows, cols)  # separable, per axis (raises outside)
        return super().predict_rows(est, rows, cols, outside)

    def sample_grid(self, est: WaveletRegressor, axes: list, n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        return est.sample_grid(axes, n, seed=seed, observed=observed)

    def hyperparameters(self, est: WaveletRegressor) -> dict:
        """k(x, x) varies in space: the signal sd at the window's centre."""
        sc = est.scaler_
        centre = np.array([[0.5 * (b.lo + b.hi) for b in est.basis_.dims]])
        x0 = sc.x_mean + sc.x_scale * centre
        return {"signal_sd": float(np.sqrt(est.prior_variance(x0)[0])),
                "noise_sd": float(np.sqrt(float(est.params_["noise"])) * sc.y_scale),
                "n_features": int(est.n_features_)}

    def evidence(self, est: WaveletRegressor) -> float:
        return est.log_marginal_likelihood()

    def to_arrays(self, est: WaveletRegressor, prefix: str, arrays: dict) -> dict:
        init = clean({n: getattr(est, n) for n in init_names(WaveletRegressor)})
        return save_wavelet(est, prefix, arrays, init)

    def from_arrays(self, meta: dict, prefix: str, arrays: Any) -> WaveletRegressor:
        return load_wavelet(meta, prefix, arrays, set(init_names(WaveletRegressor)))


FAMILY = WaveletFamily()
