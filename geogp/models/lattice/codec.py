"""Saving and loading lattice (SPDE/GMRF) estimators inside a geogp model file.

A fitted :class:`~geogp.models.lattice.LatticeRegressor` predicts from five numbers per
lattice cell (posterior mean, variance, and the covariances with three neighbours and one
cross pair, all in standardised units), its geometry (with the cell axes of a nearly regular
raster) and its standardiser; these are what is
stored, so loading needs no factorisation and reproduces predictions bit for bit. The
hyperparameters and the fit report are kept for
:meth:`~geogp.frontend.api.GeoRegressor.hyperparameters`.
Every array is checked on loading (:class:`~geogp.persist.checks.Arrays`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from geogp.exceptions import ReadError
from geogp.models.lattice import ALPHAS, LatticeRegressor
from geogp.models.lattice.gmrf import HOLE_MAX, PARAM_HOLE
from geogp.models.lattice.state import Moments
from geogp.models.lattice.varying import VARYING_PARAMS, VaryingBasis
from geogp.persist.checks import Arrays, estimator_from_init, require, scaler_and_report

__all__ = ["save_lattice", "load_lattice"]

_PARAMS = ("log_range", "log_sd", "log_noise", "log_range_large", "log_sd_large", "log_ratio",
           "log_range_mid", "log_sd_mid", PARAM_HOLE)


def save_lattice(est: Any, pre: str, arrays: dict, init: dict) -> dict:
    """Add the estimator's arrays under ``pre`` to ``arrays``; return its metadata."""
    sc, rep = est.scaler_, est.report_
    arrays.update({
        f"{pre}lattice/mean": est.posterior_.mean, f"{pre}lattice/var": est.posterior_.var,
        f"{pre}lattice/cov": est.posterior_.cov, f"{pre}lattice/freq": est.freq_,
        f"{pre}lattice/beta": np.asarray(est.beta_, dtype=np.float64),
        f"{pre}lattice/large_coef": np.asarray(est.large_coef_, dtype=np.float64),
        f"{pre}scaler/x_mean": sc.x_mean, f"{pre}scaler/x_scale": sc.x_scale,
        f"{pre}report/history": np.asarray(rep.history, dtype=np.float64),
    })
    if est.powers_ is not None:
        arrays[f"{pre}lattice/powers"] = np.asarray(est.powers_)
    if getattr(est, "cell_axes_", None) is not None:  # a nearly regular raster's cell centres
        arrays[f"{pre}lattice/axis_y"], arrays[f"{pre}lattice/axis_x"] = est.cell_axes_
    if getattr(est, "obs_weight_", None) is not None:  # what a robust fit distrusted
        arrays[f"{pre}lattice/obs_weight"] = np.asarray(est.obs_weight_, dtype=np.float64)
    basis = getattr(est, "varying_basis_", None)
    varying = {}
    if basis is not None:  # the varying range and sd: their basis and coefficients
        for k in VARYING_PARAMS:
            arrays[f"{pre}lattice/{k}"] = np.asarray(est.params_[k], dtype=np.float64)
        varying = {"varying_raster": list(basis.raster_shape),
                   "varying_intervals": [list(v) for v in basis.intervals]}
    return {
        "init": init, **varying,
        "params": {k: float(v) for k, v in est.params_.items() if k not in VARYING_PARAMS},
        "shape": [int(v) for v in est.shape_], "h": [float(v) for v in est.h_],
        "origin": [float(v) for v in est.origin_], "step": [float(v) for v in est.step_],
        "unit": float(est.unit_), "alpha": int(est.alpha_), "n_obs": int(est.n_obs_),
        "fit_tiles": int(est.fit_tiles_),
        # NaN (a posterior on tiles has no whole-raster likelihood) is stored as null
        "log_likelihood": (float(est.log_likelihood_) if np.isfinite(est.log_likelihood_)
                           else None),
        "posterior_tiles": int(getattr(est, "posterior_tiles_", 1)),
        # mid_scale="auto" dropped the level: the first fit's (local, mid) ranges, for summary()
        "mid_dropped_ranges": (None if getattr(est, "mid_dropped_ranges_", None) is None
                               else [float(v) for v in est.mid_dropped_ranges_]),
        "y_mean": float(sc.y_mean), "y_scale": float(sc.y_scale),
        "report": {"objective": rep.objective, "n_iter": rep.n_iter, "n_eval": rep.n_eval,
                   "converged": rep.converged, "message": rep.message, "time_s": rep.time_s},
    }


def _floats(meta: dict, key: str, n: int, where: str, positive: bool = False) -> tuple:
    v = require(meta, key, "list", where)
    if len(v) != n or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                              and np.isfinite(x) and (x > 0 or not positive) for x in v):
        raise ReadError(f"model file {where}: {key!r} must be {n} finite"
                        f"{' positive' if positive else ''} numbers; got {v!r:.60}.")
    return tuple(float(x) for x in v)


def _varying_basis(meta: dict, where: str) -> VaryingBasis | None:
    """The varying range and sd's basis from the metadata (None: a stationary model)."""
    if "varying_intervals" not in meta:
        return None
    raster = _floats(meta, "varying_raster", 2, where, positive=True)
    levels = require(meta, "varying_intervals", "list", where)
    if not (levels and all(isinstance(v, list) and len(v) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v)
            for v in levels) and all(v == int(v) for v in raster)):
        raise ReadError(f"model file {where}: malformed varying basis {levels!r:.60}.")
    return VaryingBasis((int(raster[0]), int(raster[1])), tuple(tuple(v) for v in levels))


def load_lattice(meta: dict, pre: str, z: Arrays, accepted_init: Collection[str]
                 ) -> LatticeRegressor:
    """Rebuild a fitted LatticeRegressor from the metadata and arrays of one slice."""
    where = f"slice {pre[:-1]}"
    est = estimator_from_init(LatticeRegressor, meta, where, accepted_init)
    shape = _floats(meta, "shape", 2, where, positive=True)
    if not all(v == int(v) for v in shape):
        raise ReadError(f"model file {where}: the lattice shape must be integers.")
    ny, nx = est.shape_ = (int(shape[0]), int(shape[1]))
    n = ny * nx
    est.h_ = _floats(meta, "h", 2, where, positive=True)
    est.origin_ = _floats(meta, "origin", 2, where)
    est.step_ = _floats(meta, "step", 2, where)
    if not all(s != 0 for s in est.step_):
        raise ReadError(f"model file {where}: the lattice step must be nonzero.")
    est.unit_ = require(meta, "unit", "float", where, positive=True)
    est.cell_axes_ = None  # a regular raster's cells are at origin + i·step
    if f"{pre}lattice/axis_y" in z or f"{pre}lattice/axis_x" in z:
        est.cell_axes_ = tuple(z.get(f"{pre}lattice/axis_{k}", shape=(n,))
                               for k, n in zip("yx", est.shape_, strict=True))
        if not all(np.all(np.diff(a) > 0) or np.all(np.diff(a) < 0) for a in est.cell_axes_):
            raise ReadError(f"model file {where}: the lattice's cell axes must be strictly "
                            "monotonic.")
    params = require(meta, "params", "dict", where)
    if not set(_PARAMS[:3]) <= set(params) or not set(params) <= set(_PARAMS) or not all(
            isinstance(v, (int, float)) and np.isfinite(v) for v in params.values()):
        raise ReadError(f"model file {where}: malformed lattice parameters {params!r:.80}.")
    est.params_ = {k: float(v) for k, v in params.items()}
    est.varying_basis_ = _varying_basis(meta, where)
    if est.varying_basis_ is not None:
        for k in VARYING_PARAMS:
            est.params_[k] = z.get(f"{pre}lattice/{k}", shape=(est.varying_basis_.n_coef,))
    # the operator's α: files written before alpha="auto" existed store only the option
    est.alpha_ = meta.get("alpha", est.alpha)
    if est.alpha_ not in ALPHAS:
        raise ReadError(f"model file {where}: the lattice's alpha must be one of {ALPHAS}; "
                        f"got {est.alpha_!r:.40}.")
    est.hole_ = PARAM_HOLE in est.params_  # the oscillating operator: its parameter says so
    if est.hole_ and (est.alpha_ != 2 or not 0.0 <= est.params_[PARAM_HOLE] <= HOLE_MAX):
        raise ReadError(f"model file {where}: the oscillating operator needs alpha=2 and a "
                        f"hole parameter in [0, {HOLE_MAX}]; got alpha={est.alpha_!r:.40}, "
                        f"hole={est.params_[PARAM_HOLE]!r:.40}.")
    # mid_scale="auto" may have dropped the level during the fit: the parameters say so
    est.mid_dropped_ = est.mid_factor() is not None and "log_range_mid" not in est.params_
    est.mid_dropped_ranges_ = None  # files written before they were kept have no key
    if est.mid_dropped_ and meta.get("mid_dropped_ranges") is not None:
        est.mid_dropped_ranges_ = _floats(meta, "mid_dropped_ranges", 2, where, positive=True)
    moments = {"mean": z.get(f"{pre}lattice/mean", shape=(n,)),
               "var": z.get(f"{pre}lattice/var", shape=(n,), positive=True),
               "cov": z.get(f"{pre}lattice/cov", shape=(4, n))}
    est.freq_ = z.get(f"{pre}lattice/freq", ndim=2)
    est.beta_ = z.get(f"{pre}lattice/beta", ndim=1)
    est.large_coef_ = z.get(f"{pre}lattice/large_coef", ndim=1)
    est.powers_ = (z.get(f"{pre}lattice/powers", ndim=2, kind="iu")
                   if f"{pre}lattice/powers" in z else None)
    est.n_obs_ = require(meta, "n_obs", "int", where, positive=True)
    est.fit_tiles_ = require(meta, "fit_tiles", "int", where, positive=True)
    est.posterior_tiles_ = (require(meta, "posterior_tiles", "int", where, positive=True)
                            if "posterior_tiles" in meta else 1)
    if meta.get("log_likelihood", 0.0) is None and est.posterior_tiles_ > 1:
        est.log_likelihood_ = float("nan")
    else:
        est.log_likelihood_ = require(meta, "log_likelihood", "float", where)
    est.obs_weight_ = None  # a plain fit, or a robust one written before weights were kept
    if f"{pre}lattice/obs_weight" in z:
        m = int(est.margin)
        weight = z.get(f"{pre}lattice/obs_weight", shape=(ny - 2 * m, nx - 2 * m), finite=False)
        seen = np.isfinite(weight)
        if not (est.robust and np.all((weight[seen] >= 0.0) & (weight[seen] <= 1.0))):
            raise ReadError(f"model file {where}: observation weights belong to a robust fit "
                            "and lie in [0, 1] (NaN where nothing was observed).")
        est.obs_weight_ = weight
    est.posterior_ = Moments(**moments, n_tiles=est.posterior_tiles_)  # predicts only
    est.scaler_, est.report_ = scaler_and_report(meta, pre, z, 2, where)
    return est
