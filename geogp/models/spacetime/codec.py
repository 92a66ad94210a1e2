"""Model files of the space-time model (:mod:`geogp.persist`'s format): the joint model is
stored once, under ``series/``, and each date's slice holds only its index.

The file keeps the standardised stack itself (forecasts and other dates are the fitted θ's
posterior with those dates added, which needs the data) and the fitted moments (prediction
on the fitted dates reads them, with no solve): the mean and latent sd of every date, and the
2-D sd of a new observation's noise."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from geogp.core.optimize import FitReport
from geogp.exceptions import ReadError
from geogp.linalg.solvers import Solver
from geogp.models.spacetime.gmrf import PARAMS
from geogp.models.spacetime.large import spans
from geogp.models.spacetime.regressor import SpaceTimeDate, SpaceTimeRegressor
from geogp.persist.checks import Arrays, clean, estimator_from_init, init_names, require

__all__ = ["save_series", "load_series"]

PRE = "series/"
_MOMENTS = ("mean", "sd_latent")


def save_series(dates: list[SpaceTimeDate], arrays: dict, init: dict) -> list[dict]:
    """Add the joint model's arrays to ``arrays``; return the slices' metadata (the first
    carries the model's, the others their date's index)."""
    head = _save_model(dates[0].model, arrays, PRE, init)
    return [{"index": d.index, **(head if k == 0 else {})} for k, d in enumerate(dates)]


def _save_model(model: SpaceTimeRegressor, arrays: dict, pre: str, init: dict) -> dict:
    """Add ``model``'s arrays to ``arrays`` under ``pre``; return its metadata (the large
    scales' model nested under ``coarse``, its arrays under ``pre`` + ``coarse/``)."""
    arrays.update({f"{pre}values": model.values_, f"{pre}times": model.times_})
    if hasattr(model, "axes_"):  # the coarse model has no grid of its own
        arrays.update({f"{pre}axis_y": model.axes_[0], f"{pre}axis_x": model.axes_[1]})
    arrays.update({f"{pre}{k}": getattr(model, f"{k}_") for k in _MOMENTS})
    arrays[f"{pre}noise_sd"] = model.noise_sd_
    rep = model.fit_report_
    if rep is not None:
        arrays[f"{pre}history"] = np.asarray(rep.history, dtype=np.float64)
    coarse = model.coarse_
    return {
        "init": init, "params": {k: float(v) for k, v in model.params_.items()},
        "unit": float(model.unit_), "h": [float(v) for v in model.h_],
        "loc": float(model.loc_), "scale": float(model.scale_),
        "interval_scale": float(model.interval_scale_),
        "tile": int(model.tile_), "halo": int(model.halo_), "fit_size": int(model.fit_size_),
        "block": int(model.block_),
        "coarse": None if coarse is None else _save_model(
            coarse, arrays, f"{pre}coarse/",
            clean({n: getattr(coarse, n) for n in init_names(SpaceTimeRegressor)})),
        "report": None if rep is None else {
            "objective": rep.objective, "n_iter": rep.n_iter, "n_eval": rep.n_eval,
            "converged": rep.converged, "message": rep.message, "time_s": rep.time_s},
    }


def _count(meta: dict, key: str, low: int, where: str) -> int:
    v = require(meta, key, "int", where)
    if v < low:
        raise ReadError(f"model file {where}: {key!r} must be ≥ {low}; got {v}.")
    return v


def load_series(slices: list[dict], z: Arrays,
                accepted_init: Collection[str]) -> list[SpaceTimeDate]:
    """Rebuild the fitted joint model and its dates from ``slices`` and the arrays."""
    model = _load_model(slices[0], z, PRE, accepted_init, "slice s0")
    t = model.shape_[0]
    indices = [require(m, "index", "int", f"slice s{k}") for k, m in enumerate(slices)]
    if indices != list(range(t)):
        raise ReadError(f"model file: the slices must be the stack's {t} dates in order; got "
                        f"indices {indices!r:.60}.")
    return [SpaceTimeDate(model, k) for k in indices]


def _load_model(head: dict, z: Arrays, pre: str, accepted_init: Collection[str],
                where: str) -> SpaceTimeRegressor:
    """One model from its metadata ``head`` and its arrays under ``pre`` (:func:`_save_model`)."""
    model = estimator_from_init(SpaceTimeRegressor, head, where, accepted_init)
    params = require(head, "params", "dict", where)
    if set(params) != set(PARAMS) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in params.values()):
        raise ReadError(f"model file {where}: malformed space-time parameters "
                        f"{params!r:.80}.")
    model.params_ = {k: float(v) for k, v in params.items()}
    values = z.get(f"{pre}values", ndim=3, finite=False)
    t, ny, nx = model.shape_ = values.shape
    if t < 2 or ny < 1 or nx < 1:
        raise ReadError(f"model file {where}: a stack of at least two dates; got shape "
                        f"{values.shape}.")
    model.values_ = values
    model.times_ = z.get(f"{pre}times", shape=(t,))
    if not np.all(np.diff(model.times_) > 0):
        raise ReadError(f"model file {where}: the dates must be strictly increasing.")
    if f"{pre}axis_y" in z or pre == PRE:
        model.axes_ = [z.get(f"{pre}axis_y", shape=(ny,)), z.get(f"{pre}axis_x", shape=(nx,))]
    for k in _MOMENTS:
        setattr(model, f"{k}_", z.get(f"{pre}{k}", shape=(t, ny, nx), finite=False))
    if f"{pre}noise_sd" in z:
        model.noise_sd_ = z.get(f"{pre}noise_sd", shape=(ny, nx), positive=True)
    else:  # files before 2026-11-29 kept the whole stack of a new observation's sd
        observed = z.get(f"{pre}sd_observed", shape=(t, ny, nx), finite=False)
        model.noise_sd_ = np.sqrt(np.maximum(observed[0] ** 2 - model.sd_latent_[0] ** 2, 0.0))
    model.unit_ = require(head, "unit", "float", where, positive=True)
    h = require(head, "h", "list", where)
    if len(h) != 2 or not all(isinstance(v, (int, float)) and v > 0 for v in h):
        raise ReadError(f"model file {where}: 'h' must be two positive numbers; got {h!r:.40}.")
    model.h_ = (float(h[0]), float(h[1]))
    model.loc_ = require(head, "loc", "float", where)
    model.scale_ = require(head, "scale", "float", where, positive=True)
    model.interval_scale_ = (require(head, "interval_scale", "float", where, positive=True)
                             if "interval_scale" in head else 1.0)  # files before calibration
    model.tile_, model.halo_ = _count(head, "tile", 4, where), _count(head, "halo", 0, where)
    model.fit_size_ = _count(head, "fit_size", 4, where)
    # files before 2026-11-30 had no large scales
    model.block_ = _count(head, "block", 0, where) if "block" in head else 0
    coarse = require(head, "coarse", "dict", where, nullable=True) if "coarse" in head else None
    if (coarse is None) != (model.block_ == 0) or model.block_ == 1:
        raise ReadError(f"model file {where}: 'block' and 'coarse' disagree.")
    model.coarse_ = None if coarse is None else _load_model(
        coarse, z, f"{pre}coarse/", accepted_init, f"{where} (large scales)")
    if model.coarse_ is not None:
        grid = (t, len(spans(ny, model.block_)), len(spans(nx, model.block_)))
        if (model.coarse_.shape_ != grid or model.coarse_.block_
                or not np.array_equal(model.coarse_.times_, model.times_)):
            raise ReadError(f"model file {where}: the large scales' model is not the "
                            f"{grid[1]} × {grid[2]} blocks of this stack's {t} dates.")
    rep = require(head, "report", "dict", where, nullable=True)
    model.fit_report_ = None
    if rep is not None:
        try:
            model.fit_report_ = FitReport(**rep, history=z.get(f"{pre}history",
                                                               finite=False).tolist())
        except TypeError as err:
            raise ReadError(f"model file {where}: malformed fit report ({err}).") from None
    model.solver_ = Solver("cholmod", ordering=model.ordering)
    return model
