"""The lattice family (:class:`~geogp.models.lattice.LatticeRegressor`): an SPDE/GMRF on the
cells of a regular raster (sparse Cholesky) plus large-scale Fourier features. Rasters only,
with covariates; its memory is estimated before the fit (``model="auto"`` falls back to AFS
where it does not fit); samples by its sparse sampler; its evidence is the REML likelihood."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from geogp.core.formatting import duration_range, number
from geogp.exceptions import GeogpError, InputError
from geogp.families.generic import Family
from geogp.models.base import Prediction
from geogp.models.lattice import LatticeRegressor
from geogp.models.lattice.codec import load_lattice, save_lattice
from geogp.models.lattice.settings import check_settings
from geogp.models.lattice.workers import dask_client, local_workers
from geogp.persist.checks import clean, init_names
from geogp.persist.semantics import check_lattice_grid
from geogp.placement.lattice_setup import LatticePlacement, condition_lattice

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel

__all__ = ["LatticeFamily", "NonstationaryFamily", "FAMILY", "NONSTATIONARY", "DEFAULT_ALPHA",
           "DEFAULT_LARGE_SCALE", "DEFAULT_MID_SCALE", "DEFAULT_VARYING", "DEFAULT_HOLE_EFFECT"]

DEFAULT_LARGE_SCALE = "auto"  # from the front end: 64 large-scale features
# and the mid-scale level on rasters with ≥ 128 cells a side (LatticeRegressor(mid_scale="auto"))
DEFAULT_MID_SCALE = "auto"
# ν = 1, or ν = 2 where the ν = 1 fit runs to its intrinsic limit (LatticeRegressor(alpha="auto"))
DEFAULT_ALPHA = "auto"
# Matérn, or the oscillating covariance where a smooth field is periodic
# (LatticeRegressor(hole_effect="auto"))
DEFAULT_HOLE_EFFECT = "auto"
# one range and sd, or ones that vary where the leave-one-out residuals say so
# (LatticeRegressor(varying="auto"))
DEFAULT_VARYING = "auto"


class LatticeFamily(Family[LatticeRegressor]):
    """The family of :class:`~geogp.models.lattice.LatticeRegressor`."""

    name = "lattice"
    model_class = LatticeRegressor
    placement_type = LatticePlacement
    savable = can_sample = takes_covariates = single_range = estimates_cost = True
    can_place = can_condition = posterior_on_tiles = fits_robust = maps_local_scales = True
    default_maxiter = 100
    placement_strategy = "reduction"  # total variance reduction (geogp.placement.lattice)
    defaults: ClassVar[dict] = {"large_scale": DEFAULT_LARGE_SCALE, "mid_scale": DEFAULT_MID_SCALE,
                                "alpha": DEFAULT_ALPHA, "varying": DEFAULT_VARYING,
                                "hole_effect": DEFAULT_HOLE_EFFECT}

    def make(self, options: dict | None = None, *, kernel: str | Kernel | None = None,
             n_features: int | str | None = None,
             progress: Callable[[int, float], object] | None = None) -> Any:
        est = super().make(options, kernel=kernel, n_features=n_features, progress=progress)
        tile = getattr(progress, "tile", None)  # the front end's bars also count the tiles
        if tile is not None:
            est.tile_progress = tile
        return est

    def memory_estimate(self, est: LatticeRegressor, raster_shape: tuple) -> float:
        return est.memory_estimate(raster_shape)

    def check_memory(self, est: LatticeRegressor, raster_shape: tuple) -> None:
        check_settings(est)
        est.check_memory(raster_shape)

    def announce_cost(self, est: LatticeRegressor, raster_shape: tuple) -> None:
        """Before a lattice fit with progress bars: its tiles, memory and time estimates."""
        try:
            with dask_client(est.scheduler) as client:
                workers = len(client.scheduler_info()["workers"]) if client is not None else 1
            local = local_workers(est.scheduler)
            cost = est.cost_estimate(raster_shape, workers)
        except (GeogpError, ValueError):  # bad settings: the fit itself says what is wrong
            return
        held_back = cost["tiles"] > 1 and local and not cost["local_workers"]
        if held_back:  # the workers' tiles together would pass the limit: this process runs them
            client, workers = None, 1
            cost = est.cost_estimate(raster_shape, workers)
        where = f" on {workers} dask workers" if client is not None else ""
        tiles = ("the whole lattice" if cost["tiles"] == 1 else f"{cost['tiles']} tiles{where}")
        hint = ""
        if held_back:
            hint = (f"; in this process, as no tiles that {local} dask workers could hold at "
                    "once fit the limit (raise --max-memory to use them)")
        elif cost["tiles"] > 1 and client is None:
            hint = ("; this process uses two cores for them, a dask cluster more "
                    "(geogp fit --workers N, or a distributed.Client), and larger tiles "
                    "(--max-memory) waste less on halos")
        when = duration_range(float(cost["seconds"]), most=cost.get("seconds_most"))
        ny, nx = raster_shape
        print(f"lattice model on {ny} × {nx} cells: posterior on {tiles}; estimated "
              f"peak memory {cost['bytes'] / 2**30:.1f} GiB (limit {est.max_bytes / 2**30:.1f} "
              f"GiB), roughly {when} (the 2-core reference rate, then this machine's load)"
              f"{hint}",
              file=sys.stderr, flush=True)

    def fit_grid(self, est: LatticeRegressor, axes: list, values: ArrayLike, regular: bool,
                 covariates: np.ndarray | None = None) -> Any:
        """SPDE/GMRF on the raster's own cells (regular rasters only: the model refuses others)."""
        return est.fit_grid(axes, values, covariates)

    def fit_points(self, est: LatticeRegressor, X: np.ndarray, y: np.ndarray,
                   target_axes: list[np.ndarray] | None = None,
                   units: str = "coordinate units") -> Any:
        raise InputError("model='lattice' fits rasters only (its field lives on the raster's "
                         "cells); grid the points first or use model='afs'.")

    def predict_rows(self, est: LatticeRegressor, rows: np.ndarray, cols: np.ndarray,
                     outside: str = "raise") -> Prediction:
        return est.predict_grid([rows, cols], outside=outside)

    def sample_grid(self, est: LatticeRegressor, axes: list, n: int,
                    seed: int | np.random.SeedSequence | None = None,
                    observed: bool = False) -> np.ndarray:
        Y, X = np.meshgrid(axes[0], axes[1], indexing="ij")
        pts = np.stack([Y.ravel(), X.ravel()], axis=1)
        return est.sample(pts, n, seed=seed, observed=observed).reshape(n, *Y.shape)

    def local_scales(self, est: LatticeRegressor,
                     points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return est.local_scales_at(points)

    def fit_reason(self, est: LatticeRegressor) -> str | None:
        return getattr(est, "varying_reason_", None)

    def hyperparameters(self, est: LatticeRegressor) -> dict:
        return est.describe()

    def unknowns(self, est: LatticeRegressor, n_features: int | str | None) -> str:
        if not isinstance(n_features, (int, np.integer)):
            return ""
        cells = int(est.shape_[0]) * int(est.shape_[1])
        large = int(n_features) - cells
        smooth = ("oscillating, α = 2" if getattr(est, "hole_", False) else
                  {1: "ν = 0", 2: "Matérn ν = 1", 3: "Matérn ν = 2"}[int(est.alpha_)])
        return (f", a lattice of {number(cells)} cells (raster and margin, {smooth})"
                + (f" + {large} large-scale Fourier features" if large else ""))

    def evidence(self, est: LatticeRegressor) -> float:
        """REML log likelihood, the trend integrated; a posterior on tiles has none."""
        value = est.log_likelihood_
        if not np.isfinite(value):
            raise InputError(
                "score() needs the whole raster's likelihood, which a lattice model "
                f"whose posterior was computed on {est.posterior_tiles_} tiles does not "
                "have; refit with posterior_tile=None to compare fits.")
        return value

    def to_arrays(self, est: LatticeRegressor, prefix: str, arrays: dict) -> dict:
        init = clean({n: getattr(est, n) for n in init_names(LatticeRegressor)})
        return save_lattice(est, prefix, arrays, init)

    def from_arrays(self, meta: dict, prefix: str, arrays: Any) -> LatticeRegressor:
        return load_lattice(meta, prefix, arrays, set(init_names(LatticeRegressor)))

    def check_grid(self, est: LatticeRegressor, axes: list[np.ndarray], where: str) -> None:
        check_lattice_grid(est, axes[0], axes[1], where)

    def posterior_tiles(self, est: LatticeRegressor, raster_shape: tuple) -> int:
        return int(est.cost_estimate(raster_shape)["tiles"])

    def condition(self, est: LatticeRegressor, X: ArrayLike, y: ArrayLike | None = None) -> Any:
        return condition_lattice(est, X, y)


class NonstationaryFamily(LatticeFamily):
    """``model="nonstationary"`` (alias ``"wavelet"``): the lattice model whose range and sd
    always vary in space, log ρ(s) and log s(s) on a multiresolution basis
    (``varying=True``, :mod:`geogp.models.lattice.varying`). A fitted one is a
    :class:`~geogp.models.lattice.LatticeRegressor` like any other, so the lattice family
    predicts, saves and places it; this family only builds it."""

    name = "nonstationary"
    defaults: ClassVar[dict] = {**LatticeFamily.defaults, "varying": True}

    def make(self, options: dict | None = None, *, kernel: str | Kernel | None = None,
             n_features: int | str | None = None,
             progress: Callable[[int, float], object] | None = None) -> Any:
        varying = (options or {}).get("varying", True)
        # the model's one difference from model='lattice' (True, or a number of levels)
        if not varying or (isinstance(varying, str) and varying == "auto"):  # 0 is False too
            raise InputError(f"model={self.name!r} always lets the range and sd vary "
                             f"(varying=True); for varying={varying!r} use model='lattice'.")
        return super().make(options, kernel=kernel, n_features=n_features, progress=progress)


FAMILY = LatticeFamily()
NONSTATIONARY = NonstationaryFamily()
