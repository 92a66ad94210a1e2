"""Cross-validate a gap-filling method on a raster: hold out folds, refit, score by distance.

:func:`cross_validate` hides each fold's cells (see :mod:`geogp.core.folds`), fits on the
remaining observed cells, predicts the full grid and scores the hidden cells with the
Gaussian predictive scores of :mod:`geogp.core.metrics` (RMSE, MAE, CRPS, 95 % interval score and
coverage, NLPD), overall and by distance to the nearest training cell. Any geogp model
(``model=``, fit options as for :func:`geogp.fit`) or any other method (``method=`` a
callable) is scored on exactly the same cells by exactly the same code.

Example:
    >>> import numpy as np, xarray as xr, geogp
    >>> yy, xx = np.mgrid[0:30, 0:40].astype(float)
    >>> z = np.sin(xx / 6) + np.cos(yy / 5)
    >>> z[8:14, 10:20] = np.nan                       # a "cloud"
    >>> da = xr.DataArray(z, dims=("y", "x"),
    ...                   coords={"y": np.arange(30.0), "x": np.arange(40.0)}).rio.write_crs(32633)
    >>> cv = geogp.cross_validate(da, folds="gaps", n_folds=2, n_features=64, maxiter=15)
    >>> sorted(cv.scores().index)
    ['all', 'fold 1', 'fold 2']
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from geogp.core.folds import distance_to_observed, make_folds
from geogp.core.progress import bar
from geogp.crossval.result import CVResult
from geogp.crossval.stack import cross_validate_stack, stack_gap_folds
from geogp.exceptions import InputError
from geogp.frontend.adapters import find_spatial_dims, masked_values, select_variable
from geogp.frontend.api import fit

if TYPE_CHECKING:  # annotations only
    pass

__all__ = ["CVResult", "cross_validate"]


def _raster(data, var) -> xr.DataArray:
    da = select_variable(data, var) if isinstance(data, xr.Dataset) else data
    if not isinstance(da, xr.DataArray):
        raise InputError(f"cross_validate needs an xarray DataArray raster; got "
                         f"{type(data).__name__}.")
    if "band" in da.dims and da.sizes["band"] == 1:
        da = da.squeeze("band", drop=True)
    if da.ndim != 2:
        raise InputError(f"cross_validate needs a 2-D raster (y, x); got dims {list(da.dims)}. "
                         "Select one slice first (da.isel(time=0)).")
    y_dim, x_dim = find_spatial_dims(da)
    da = da.transpose(y_dim, x_dim)
    if not np.issubdtype(da.dtype, np.floating) and not np.issubdtype(da.dtype, np.integer):
        raise InputError(f"the raster must hold real numbers; got dtype {da.dtype}.")
    return da


def _masked(da: xr.DataArray) -> np.ndarray:
    """Values as float64 with nodata cells set to NaN."""
    return np.asarray(masked_values(da), dtype=np.float64)


def _check_folds(folds, observed) -> np.ndarray:
    arr = np.asarray(folds)
    if arr.dtype != bool or arr.ndim != 3 or arr.shape[1:] != observed.shape:
        raise InputError(f"custom folds must be a boolean array (n_folds, {observed.shape[0]}, "
                         f"{observed.shape[1]}); got dtype {arr.dtype}, shape {arr.shape}.")
    if np.any(arr & ~observed):
        raise InputError("custom folds hold out missing cells; a fold may only hold out "
                         "observed cells (nothing to score there).")
    if not arr.reshape(arr.shape[0], -1).any(axis=1).all():
        raise InputError("every custom fold must hold out at least one cell.")
    return arr


def _as_moments(out, shape) -> tuple:
    if isinstance(out, xr.Dataset):
        if "mean" not in out or "std" not in out:
            raise InputError("a method must return a Dataset with 'mean' and 'std' (of a new "
                             f"observation); got variables {list(out.data_vars)}.")
        y_dim, x_dim = find_spatial_dims(out["mean"])
        mean = out["mean"].transpose(..., y_dim, x_dim).values
        std = out["std"].transpose(..., y_dim, x_dim).values
    else:
        try:
            mean, std = out
        except (TypeError, ValueError):
            raise InputError("a method must return an xr.Dataset with mean/std or a (mean, "
                             f"std) pair of arrays; got {type(out).__name__}.") from None
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    if mean.shape != shape or std.shape != shape:
        raise InputError(f"a method must predict the whole grid {shape}; got mean "
                         f"{mean.shape}, std {std.shape}.")
    return mean, std


def _takes_two(fn) -> bool:
    """Whether ``fn`` accepts a second positional argument (the held-out mask)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def cross_validate(data: xr.DataArray | xr.Dataset, folds: str | np.ndarray = "gaps",
                   n_folds: int = 5, *, seed: int = 0, model: str = "auto",
                   method: Callable[..., Any] | None = None, var: str | None = None,
                   fold_options: dict | None = None, progress: bool = False,
                   label: str | None = None, **fit_options: Any) -> CVResult:
    """Cross-validate gap filling on a raster.

    Args:
        data: 2-D ``xr.DataArray`` (or a Dataset with ``var``); NaN/nodata = missing.
        folds: ``"gaps"`` (default: the raster's own gap shapes moved onto observed areas),
            ``"random"``, ``"blocks"``, or a boolean array (n_folds, ny, nx) of held-out cells.
        n_folds: number of folds (ignored for an array).
        seed: seed of the folds.
        model: geogp model (``"auto"``, the default of :func:`geogp.fit`, ``"lattice"``,
            ``"nonstationary"`` or its alias ``"wavelet"``, ``"afs"``, ``"wavelet_basis"``,
            ``"exact"``) fitted by :func:`geogp.fit`
            with ``fit_options`` (``kernel``, ``n_features``, ``mean``, ``maxiter``...).
        method: instead of a geogp model, a callable ``method(train) -> prediction``: ``train``
            is the raster with the held-out cells set to NaN; the prediction is an
            ``xr.Dataset`` with ``mean`` and ``std`` (of a new observation) on the whole grid,
            or a (mean, std) pair of (ny, nx) arrays. A callable with two parameters gets
            ``method(train, held)`` (held: the boolean mask of the cells that will be scored)
            and need only fill those cells (NaN elsewhere), e.g. a local kriging peer.
        fold_options: options of the fold maker (e.g. ``fraction=0.15`` for gap folds).
        progress: a progress bar over the folds (and the model's own bars).
        label: name of the method in reports (default from ``model`` / ``method``).

    Returns:
        :class:`CVResult`; ``.summary()``, ``.scores()``, ``.by_distance()``, ``.plot()``.

    A stack with a time dimension (an image series) is cross-validated as a series
    (:mod:`geogp.crossval.stack`): ``folds="gaps"`` moves another date's clouds onto each
    date's observed cells (``n_folds`` fits of the whole stack), the model is fitted on the
    stack (e.g. ``model="spacetime"``), and the result
    (:class:`~geogp.crossval.stack.StackCVResult`) also reports coverage by the time since
    the cell was last seen (``.by_time_since()``).
    """
    stacked = _series(data, var)
    if stacked is not None:
        return _cross_validate_series(stacked, folds, n_folds, seed, model, method,
                                      fold_options, progress, label, fit_options)
    da = _raster(data, var)
    values = _masked(da)
    if np.isinf(values).any():
        raise InputError("the raster holds ±inf; mark missing cells as NaN or nodata.")
    observed = np.isfinite(values)
    if isinstance(folds, str):
        kind = folds
        held_all = make_folds(observed, folds, n_folds, seed=seed, **(fold_options or {}))
    else:
        kind = "custom"
        held_all = _check_folds(folds, observed)
    method, label = _method(method, model, progress, label, fit_options, like=da)
    wants_mask = _takes_two(method)
    y_dim, x_dim = da.dims
    ys, xs = da[y_dim].values, da[x_dim].values
    frames, seconds = [], []
    with bar("cross-validation", len(held_all), progress, unit="fold") as pbar:
        for k, held in enumerate(held_all, start=1):
            train = da.where(~held)
            t0 = time.perf_counter()
            out = method(train, held) if wants_mask else method(train)
            mean, std = _as_moments(out, values.shape)
            seconds.append(time.perf_counter() - t0)
            dist = distance_to_observed(observed & ~held)
            r, c = np.nonzero(held)
            bad = ~(np.isfinite(mean[r, c]) & np.isfinite(std[r, c]) & (std[r, c] > 0))
            if bad.any():
                raise InputError(f"{label} returned a non-finite mean or a std ≤ 0 at "
                                 f"{int(bad.sum())} held-out cell(s) of fold {k}; every "
                                 "held-out cell must get a prediction.")
            frames.append(pd.DataFrame({
                "fold": k, "row": r, "col": c, y_dim: ys[r], x_dim: xs[c],
                "truth": values[r, c], "mean": mean[r, c], "std": std[r, c],
                "distance": dist[r, c]}))
            pbar.update(1)
    return CVResult(pd.concat(frames, ignore_index=True), held_all, seconds, kind, label,
                    units=da.attrs.get("units"))



def _method(method, model, progress, label, fit_options, **predict) -> tuple:
    """(method, label): ``method``, or a geogp ``model`` fitted with ``fit_options`` and
    predicted with ``predict``; custom methods take no fit options."""
    if method is None:
        def method(train):
            return fit(train, model, progress=progress, **fit_options).predict(**predict)

        label = label or f"geogp {model}" + "".join(f", {k}={v}" for k, v in fit_options.items())
    elif not callable(method):
        raise InputError(f"method must be callable; got {type(method).__name__}.")
    elif fit_options:
        raise InputError(f"fit options {sorted(fit_options)} apply to geogp models only, not to "
                         "a custom method.")
    return method, label or getattr(method, "__name__", "method")


def _series(data, var) -> xr.DataArray | None:
    """The stack (time, y, x) when ``data`` is an image series, else None."""
    da = select_variable(data, var) if isinstance(data, xr.Dataset) else data
    if not isinstance(da, xr.DataArray) or da.ndim != 3:
        return None
    y_dim, x_dim = find_spatial_dims(da)
    (t_dim,) = [d for d in da.dims if d not in (y_dim, x_dim)]
    coord = da[t_dim].values if t_dim in da.coords else None
    dated = coord is not None and np.issubdtype(coord.dtype, np.datetime64)
    if not (dated or str(t_dim).lower() == "time"):
        return None
    return da.transpose(t_dim, y_dim, x_dim)


def _cross_validate_series(da, folds, n_folds, seed, model, method, fold_options, progress,
                           label, fit_options):
    """:func:`cross_validate` of an image series (:mod:`geogp.crossval.stack`)."""
    values = _masked(da)
    if np.isinf(values).any():
        raise InputError("the stack holds ±inf; mark missing cells as NaN or nodata.")
    observed = np.isfinite(values)
    if isinstance(folds, str):
        if folds != "gaps":
            raise InputError(f"an image series is cross-validated with folds='gaps' (other "
                             f"dates' clouds) or a boolean array; got {folds!r}.")
        kind, held_all = "gaps", stack_gap_folds(observed, n_folds, seed=seed,
                                                 **(fold_options or {}))
    else:
        arr = np.asarray(folds)
        if arr.dtype != bool or arr.ndim != 4 or arr.shape[1:] != observed.shape:
            raise InputError(f"custom folds of a stack must be a boolean array (n_folds, "
                             f"{', '.join(map(str, observed.shape))}); got dtype {arr.dtype}, "
                             f"shape {arr.shape}.")
        if np.any(arr & ~observed):
            raise InputError("custom folds hold out missing cells; a fold may only hold out "
                             "observed cells.")
        kind, held_all = "custom", arr
    method, label = _method(method, model, progress, label, fit_options)
    return cross_validate_stack(da, values, held_all, method, label, kind, progress)
