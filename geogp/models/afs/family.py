"""The AFS family (approximate Fourier series, :class:`~geogp.models.afs.AFSRegressor`).

Regular rasters take its grid path (statistics by separable transforms, O(M) per step on
complete grids); irregular coordinates and scattered points its point path. Its window is
widened to cover the prediction grid; samples are drawn by one grid transform each; its
evidence is the collapsed variational bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from geogp.families.generic import Family, kernel_facts, observed_cells
from geogp.models.afs import AFSRegressor
from geogp.models.afs.codec import load_afs, save_afs
from geogp.models.afs.policy import ITERATIVE_ABOVE
from geogp.models.base import Prediction
from geogp.persist.semantics import check_window
from geogp.placement.feature_models import AFSPlacement, condition_afs

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["AFSFamily", "FAMILY", "DEFAULT_KERNEL", "DEFAULT_FEATURES", "DEFAULT_MEAN"]

# the front end's defaults, chosen by cross-validation on a real satellite raster
# (benchmarks/heaton_cv.py, issue #9): among the kernels and trends at M = 2,000 this one had
# the best block-fold CRPS and was within 1% of the best random-fold RMSE
DEFAULT_KERNEL, DEFAULT_FEATURES, DEFAULT_MEAN = "matern12", "auto", "linear"


class AFSFamily(Family[AFSRegressor]):
    """The family of :class:`~geogp.models.afs.AFSRegressor`."""

    name = "afs"
    model_class = AFSRegressor
    placement_type = AFSPlacement
    savable = can_sample = takes_kernel = shares_hyperparameters = True
    can_place = can_condition = takes_features = fits_robust = True
    max_placement_features = ITERATIVE_ABOVE  # above, the matrix-free posterior
    default_maxiter = 300
    setup_phase = "statistics + compile"
    default_kernel = DEFAULT_KERNEL
    defaults: ClassVar[dict] = {"n_features": DEFAULT_FEATURES, "mean": DEFAULT_MEAN}

    def widen(self, est: AFSRegressor, lo: np.ndarray, hi: np.ndarray, t_lo: np.ndarray,
              t_hi: np.ndarray,
              scale: np.ndarray) -> None:
        """Window width = extent·window_factor + 2·margin·extent, centred on the data's box."""
        extent = np.maximum(hi - lo, 1e-300)
        half = np.maximum((lo + hi) / 2 - t_lo, t_hi - (lo + hi) / 2)
        need = (2 * half * (1 + 1e-9) - extent * est.window_factor) / (2 * extent)
        est.margin = float(max(est.margin, need.max(), 0.0))

    def fit_grid(self, est: AFSRegressor, axes: list, values: ArrayLike, regular: bool,
                 covariates: np.ndarray | None = None) -> Any:
        """Regular rasters: the grid path; irregular ones: the observed cells as points."""
        self.refuse_covariates(covariates)
        if regular:
            return est.fit_grid(axes, values)
        v, obs, X = observed_cells(axes, values)
        return self.fit_points(est, X, v[obs], axes)

    def predict_at(self, est: AFSRegressor, X: np.ndarray, outside: str = "raise") -> Prediction:
        return est.predict(X, outside=outside)

    def predict_rows(self, est: AFSRegressor, rows: np.ndarray, cols: np.ndarray,
                     outside: str = "raise") -> Prediction:
        return est.predict_grid([rows, cols], outside=outside)

    def sample_grid(self, est: AFSRegressor, axes: list, n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        return est.sample_grid(axes, n, seed=seed, observed=observed)

    def hyperparameters(self, est: AFSRegressor) -> dict:
        return kernel_facts(est, n_features=True)

    def evidence(self, est: AFSRegressor) -> float:
        return est.bound()

    def to_arrays(self, est: AFSRegressor, prefix: str, arrays: dict) -> dict:
        return save_afs(est, prefix, arrays)

    def from_arrays(self, meta: dict, prefix: str, arrays: Any) -> AFSRegressor:
        return load_afs(meta, prefix, arrays)

    def check_grid(self, est: AFSRegressor, axes: list[np.ndarray], where: str) -> None:
        check_window(est, axes[0], axes[1], where)

    def condition(self, est: AFSRegressor, X: ArrayLike, y: ArrayLike | None = None) -> Any:
        return condition_afs(est, X, y)


FAMILY = AFSFamily()
