"""Fit a Gaussian process to a raster (or to scattered points) and predict rasters.

The geodata front end: :func:`fit` and :class:`GeoRegressor` take an ``xarray.DataArray`` with
two spatial dimensions (NaN or nodata = missing) or a table of points, translate it with
:mod:`geogp.frontend.adapters`, fit a model of one of the families of :mod:`geogp.families`, and
predict ``xarray.Dataset`` rasters with ``mean``, ``std`` (of a new observation, noise included),
``std_latent`` and optional ``quantiles``, carrying the input's coordinates, attributes and CRS.
``likelihood="poisson"``, ``"bernoulli"`` or ``"student_t"`` fits an SVGP instead
(:mod:`geogp.models.svgp.family`, docs/svgp.md).

Example:
    >>> import numpy as np, xarray as xr, geogp
    >>> y, x = np.arange(20.0), np.arange(30.0)
    >>> z = np.sin(x / 5)[None, :] + np.cos(y / 4)[:, None]
    >>> z[5:9, 10:15] = np.nan
    >>> da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}).rio.write_crs(32633)
    >>> model = geogp.fit(da, n_features=64, maxiter=20)
    >>> pred = model.predict(like=da)
    >>> sorted(pred.data_vars), pred["mean"].shape
    (['mean', 'std', 'std_latent'], (20, 30))
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from geogp.core.memory import LAZY_CELLS, check_prediction, predicts_lazily
from geogp.core.progress import FitProgress, SVGPProgress, bar
from geogp.exceptions import InputError
from geogp.families import (
    ALIASES,
    AUTO,
    GAUSSIAN,
    GRID_MODEL,
    MODELS,
    POINTS_MODEL,
    SVGP_FEATURES,
    family,
    resolve_model,
)
from geogp.frontend.adapters import (
    GridData,
    GridSpec,
    date_words,
    is_time_axis,
    series_times,
    to_grid_data,
)
from geogp.frontend.api_draws import DrawsMixin
from geogp.frontend.api_placement import PlacementMixin
from geogp.frontend.api_report import ReportMixin
from geogp.frontend.blocks import Blocks, block_axis, coarsen, find_blocks, snap
from geogp.frontend.outputs import (
    Target,
    check_quantiles,
    grid_target,
    prediction_dataset,
    target_from,
)
from geogp.frontend.points import to_point_data
from geogp.models.base import check_fitted
from geogp.persist import load_model, save_model

if TYPE_CHECKING:  # annotations only
    import os

    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel

__all__ = ["GeoRegressor", "fit"]


class GeoRegressor(ReportMixin, DrawsMixin, PlacementMixin):
    """Gaussian-process gap filling for rasters, with scikit-learn manners.

    Args:
        model: ``"auto"`` (default), ``"lattice"``, ``"nonstationary"`` (alias
            ``"wavelet"``: the lattice model with a range and sd that vary in space,
            ``varying=True``), ``"afs"``, ``"wavelet_basis"`` (the thesis's wavelet-basis
            covariance), ``"exact"`` (small data) or ``"spacetime"`` (a stack with a time
            dimension, fitted jointly over its dates: docs/spacetime.md). ``"auto"`` is
            ``"spacetime"`` for a stack of dates on a regular raster within its memory limit,
            ``"lattice"`` (an SPDE/GMRF on the raster's own cells plus 64 large-scale Fourier
            features: sharp near data, honest deep inside gaps)
            for regular 2-D rasters (on posterior tiles where the whole raster passes the
            memory limit), ``"exact"`` for up to 2,000 scattered points
            (:data:`geogp.families.EXACT_AUTO_POINTS`), and ``"afs"`` (approximate Fourier
            series) for more points, irregular rasters, rasters whose per-cell arrays alone
            pass the limit, or when AFS options (``kernel``, ``n_features``,
            ``share_hyperparameters``, AFS-only options) are given; the choice is in
            ``model_`` and ``model_reason_`` (:func:`geogp.families.resolve_model`).
        likelihood: ``"gaussian"`` (default: the models above), or ``"poisson"`` (counts),
            ``"bernoulli"`` (0/1 values), ``"student_t"`` (outliers): a stochastic variational
            GP on Fourier features (``model_`` ``"svgp"``, docs/svgp.md), fitted on the
            observed cells with a window over the whole raster (``model`` must be ``"auto"`` or
            ``"afs"``; others are refused). Its
            report lists the hyperparameters the model has (a Poisson or Bernoulli model has no
            noise term); its progress bars follow its phases.
        kernel: kernel name for ``afs``/``exact`` (default ``"matern12"``; also ``"se"``,
            ``"matern32"``, ``"matern52"``, sums ``"matern12+matern32"``).
        n_features: Fourier features M for ``afs`` (default ``"auto"``: N_obs/8 clipped to
            [2,000, 10,000]; above 4,096 the matrix-free solver runs. With a linear trend,
            ``mean="linear"``, by default: chosen by cross-validation, see ``benchmarks/``).
        share_hyperparameters: with an extra dimension (time...), learn the hyperparameters on
            the first slice and reuse them (no optimisation) for the others. They are shared in
            standardised units: each slice keeps its own mean and scale, and shares the
            lengthscales relative to its observed extent and the signal-to-noise ratio.
            Default False: every slice is fitted independently.
        crs: CRS override for inputs without one (EPSG code, WKT...).
        nodata: nodata value override (cells equal to it are missing).
        progress: show tqdm progress bars on stderr.
        options: further keyword arguments of the model (e.g. ``maxiter``, ``margin``,
            ``alias_tol``, ``lengthscale``, ``noise``; see
            :class:`~geogp.models.afs.AFSRegressor`).

    Attributes:
        model_: the model fitted (``model``, or what ``"auto"`` chose); model_reason_: why.
        estimators_: the fitted model per slice (list, one element without extra dimension);
            an AFS model's ``diagnostics_`` give its aliasing and truncation errors, and its
            ``window_widths_`` the windows it was fitted on (the window widens to the learnt
            lengthscales, ``alias_tol``).
        spec_: :class:`~geogp.frontend.adapters.GridSpec` (dimension names, CRS, longitude scaling).
        target_: the default prediction grid (the input raster, or ``grid=`` for points).
        blocks_: on a raster whose values repeat in blocks (nearest-neighbour resampling,
            :mod:`geogp.frontend.blocks`), their size and phase: the model is fitted on one
            cell per block and predicts each cell as its block; else None.
        extra_dim_, extra_coords_: the extra dimension and its coordinates (or None, {}).
        n_observed_: observed cells/points per slice. fit_time_s_: seconds per slice (a joint
            fit over a stack's dates, ``model="spacetime"``, shares its time equally).
        attrs_, name_: attributes and name of the input, copied to predictions.
    """

    blocks_: Blocks | None = None

    def __init__(self, model: str = "auto", *, likelihood: str = GAUSSIAN,
                 kernel: str | Kernel | None = None, n_features: int | str | None = None,
                 share_hyperparameters: bool = False, crs: Any = None,
                 nodata: float | None = None, progress: bool = False,
                 options: dict | None = None) -> None:
        self.model = model
        self.likelihood = likelihood
        self.kernel = kernel
        self.n_features = n_features
        self.share_hyperparameters = share_hyperparameters
        self.crs = crs
        self.nodata = nodata
        self.progress = progress
        self.options = options

    # ------------------------------------------------------------------ fitting
    def fit(self, data: xr.DataArray | xr.Dataset | pd.DataFrame, *, var: str | None = None,
            x: str = "x", y: str = "y", value: str = "value",
            grid: xr.DataArray | xr.Dataset | None = None,
            covariates: xr.DataArray | Sequence[xr.DataArray] | None = None) -> GeoRegressor:
        """Fit to a raster or to a table of points. Returns self.

        Args:
            data: ``xr.DataArray`` (or ``xr.Dataset`` with ``var``) with two spatial dimensions
                and at most one extra one; or a pandas/GeoPandas table of points.
            var: variable of a Dataset.
            x: the x (or longitude) column of a point table.
            y: the y (or latitude) column of a point table.
            value: the column of the measured values.
            grid: for points, the target raster (DataArray/Dataset) that ``predict()`` fills
                by default; the model's window is made to cover it.
            covariates: rasters on the same grid as ``data`` (a DataArray or a list of them,
                e.g. elevation) that enter the mean as regressors beside the trend (external
                drift / regression kriging), with a flat prior. Every covariate needs a value
                at every cell. Lattice model only (``model="auto"`` on a regular raster);
                ``covariate_coef_`` gives their coefficients.
        """
        gaussian = self.likelihood == GAUSSIAN  # else an SVGP on AFS features
        if not gaussian and self.model not in (AUTO, SVGP_FEATURES):
            raise InputError(f"likelihood={self.likelihood!r} is fitted by an SVGP on AFS "
                             f"features, not by model={self.model!r}; leave model='auto' (or "
                             f"{SVGP_FEATURES!r}), or use likelihood='gaussian'.")
        if gaussian and self.model not in (*MODELS, *ALIASES, AUTO):
            raise InputError(f"model must be one of {[AUTO, *MODELS]} or an alias "
                             f"{list(ALIASES)}; got {self.model!r}.")
        if (gaussian and self.share_hyperparameters and self.model != AUTO
                and not family(self.model).shares_hyperparameters):
            raise InputError("share_hyperparameters=True is supported for model='afs' only.")
        self.blocks_ = None
        if isinstance(data, (xr.DataArray, xr.Dataset)):
            if grid is not None:
                raise InputError("grid= is for point tables; a raster is its own grid.")
            g = to_grid_data(data, var=var, crs=self.crs, nodata=self.nodata)
            fine, self.blocks_ = grid_target(g), self._find_blocks(g, covariates)
            if self.blocks_ is not None:
                g = coarsen(g, self.blocks_)
            # a bad time axis is refused before "auto" picks a model (the joint model's own
            # fit refuses it too; a named per-date model does not need it)
            times = series_times(g) if self.model == AUTO else None
            n_dates = times.size if times is not None else (1 if is_time_axis(g) else None)
            self._resolve(g.values[0].shape, g.regular, spacing=g.spacing, n_dates=n_dates,
                          covariates=covariates is not None)
            cov = None if covariates is None else self._covariate_stack(covariates, g)
            self._fit_raster(g, cov)
            if self.blocks_ is not None:  # fitted on the blocks, predicted on the user's cells
                self.target_ = fine
                self.model_reason_ = (f"{self.model_reason_}; "
                                      f"{self.blocks_.describe((len(fine.y), len(fine.x)))}")
            return self
        if covariates is not None:
            raise InputError("covariates= needs a raster (the covariates live on its cells); "
                             "for point tables, sample them at the points yourself.")
        return self._fit_table(data, x=x, y=y, value=value, grid=grid)

    def _resolve(self, raster_shape, regular: bool, n_points: int | None = None,
                 spacing: tuple[float, float] | None = None, n_dates: int | None = None,
                 covariates: bool = False) -> None:
        """Set ``model_`` (what ``model="auto"`` stands for here) and ``model_reason_``."""
        if self.likelihood != GAUSSIAN:  # an SVGP, whatever the data
            self.model_, self.model_reason_ = "svgp", f"likelihood={self.likelihood!r}"
            return
        # options the model auto would pick lacks (the exact GP's for points, the lattice
        # model's for rasters) ask for AFS, as do AFS's own arguments
        other = family(GRID_MODEL if raster_shape is not None else POINTS_MODEL)
        named = sorted(set(self.options or {}) - other.option_names()) + [
            name for name, given in (("kernel", self.kernel), ("n_features", self.n_features),
                                     ("share_hyperparameters", self.share_hyperparameters))
            if given]
        afs_only = ", ".join(named)  # empty: none
        self.model_, self.model_reason_ = resolve_model(
            self.model, raster_shape=raster_shape, regular=regular, afs_only=afs_only,
            options=self.options, n_points=n_points, spacing=spacing, n_dates=n_dates,
            covariates=covariates)

    def _estimator(self, label: str, overrides: dict | None = None, bounds=None):
        """(estimator, its :class:`~geogp.core.progress.FitProgress` or
        :class:`~geogp.core.progress.SVGPProgress`, or None); the tracker's first bar opens at
        ``tracker.start()``. ``bounds``: the raster's box, which an SVGP's window covers."""
        opts = {**(self.options or {}), **(overrides or {})}
        fam = family(self.model_)
        if self.likelihood != GAUSSIAN:  # an SVGP: a bar per phase of its fit
            tracker = SVGPProgress(label, bool(self.progress))
            est = fam.make({"likelihood": self.likelihood, "bounds": bounds, **opts},
                           kernel=self.kernel, n_features=self.n_features, progress=tracker)
            return est, tracker
        tracker = None
        if fam.default_maxiter is not None:
            maxiter = opts.get("maxiter", fam.default_maxiter)
            tracker = FitProgress(label, maxiter, bool(self.progress), fam.setup_phase,
                                  opts.get("optimize", True))
        est = fam.make(opts, kernel=self.kernel, n_features=self.n_features, progress=tracker)
        return est, tracker

    def _finish(self, spec: GridSpec, target: Target | None, attrs: dict, name):
        self.spec_, self.target_, self.attrs_, self.name_ = spec, target, attrs, name

    def _covariate_stack(self, covariates, g: GridData) -> np.ndarray:
        """(k, n_y, n_x) values of the covariate rasters on the grid of ``g`` (same cells)."""
        if not family(self.model_).takes_covariates:
            raise InputError(
                f"covariates= is supported by the lattice model (model='auto' on a regular "
                f"raster, or model='lattice'); this fit uses model={self.model_!r} "
                f"({self.model_reason_}).")
        items = [covariates] if isinstance(covariates, (xr.DataArray, np.ndarray)) else list(
            covariates)
        out = []
        for i, c in enumerate(items):
            name = getattr(c, "name", None) or f"covariate {i + 1}"
            if not isinstance(c, xr.DataArray):
                raise InputError(f"{name}: covariates must be xarray DataArrays on the raster's "
                                 f"grid; got {type(c).__name__}.")
            if not bool(np.isfinite(np.asarray(c.values, dtype=np.float64)).any()):
                raise InputError(f"{name}: every cell of the covariate is missing (NaN); a "
                                 "covariate needs a value at every cell.")
            cg = to_grid_data(c, crs=self.crs)
            if cg.n_slices != 1:
                raise InputError(f"{name}: a covariate must be one 2-D raster; it has "
                                 f"{cg.n_slices} slices.")
            same = (cg.values[0].shape == g.values[0].shape and all(
                np.allclose(a, b, rtol=1e-9, atol=1e-9 * max(np.ptp(b), 1.0))
                for a, b in zip(cg.axes, g.axes, strict=True)))
            if not same:
                shapes = (f"the same {g.values[0].shape} cells at other coordinates"
                          if cg.values[0].shape == g.values[0].shape else
                          f"{cg.values[0].shape} cells against the data's {g.values[0].shape}")
                raise InputError(f"{name}: the covariate's grid differs from the data's "
                                 f"({shapes}); align it first, e.g. "
                                 "cov.rio.reproject_match(da).")
            out.append(np.asarray(cg.values[0], dtype=np.float64))
        self.covariate_names_ = [str(getattr(c, "name", None) or f"covariate {i + 1}")
                                 for i, c in enumerate(items)]
        return np.stack(out)

    @property
    def covariate_coef_(self) -> pd.DataFrame:
        """One row per slice: the covariates' coefficients (data units per covariate unit)."""
        self._check_fitted()
        names = getattr(self, "covariate_names_", [])
        # not strict: a model without covariates has no coefficients (an empty row)
        rows = [dict(zip(names, getattr(est, "covariate_coef_", np.zeros(0)), strict=False))
                for est in self.estimators_]
        return pd.DataFrame(rows, columns=names)

    def _find_blocks(self, g: GridData, covariates) -> Blocks | None:
        """The blocks of a raster whose values repeat in them, for a Gaussian fit of one
        regular, numpy-backed 2-D raster without covariates; else None."""
        if (self.likelihood != GAUSSIAN or covariates is not None or not g.regular
                or g.n_slices != 1 or not isinstance(g.values, np.ndarray)):
            return None
        return find_blocks(g.values)

    def block_grid(self) -> Target | None:
        """The grid the model was fitted on when the raster's values repeat in blocks
        (``blocks_``): one cell per block, at its centre, in the raster's CRS; else None."""
        if self.blocks_ is None or self.target_ is None:
            return None
        t, (ky, kx), (py, px) = self.target_, self.blocks_.factor, self.blocks_.phase
        return Target(t.y_dim, t.x_dim, block_axis(t.y, ky, py), block_axis(t.x, kx, px), {},
                      t.crs_wkt, t.x_first)

    def _snapped(self, my: np.ndarray, mx: np.ndarray) -> list[np.ndarray]:
        """Model coordinates moved to the centre of their block (``blocks_``), as the model
        was fitted: a block's cells are copies of one value."""
        blocks = self.block_grid()
        if blocks is None:
            return [my, mx]
        cy, cx = self.spec_.to_model(blocks.y, blocks.x)
        return [snap(my, cy), snap(mx, cx)]

    def _fit_raster(self, g: GridData, covariates=None) -> GeoRegressor:
        self.estimators_, self.n_observed_, self.fit_time_s_ = [], [], []
        shared = None
        fam = family(self.model_)
        if fam.fits_series:
            return self._fit_series(g, fam, covariates)
        bounds = [[a.min() for a in g.axes], [a.max() for a in g.axes]]
        _check_no_empty_slice(g)  # before any fit: a later slice would fail after the others
        for s in range(g.n_slices):
            label = f"slice {s + 1}/{g.n_slices} " if g.n_slices > 1 else ""
            est, tracker = self._estimator(label, shared, bounds)
            if s == 0 and self.progress and fam.estimates_cost:
                fam.announce_cost(est, g.values[s].shape)
            t0 = time.perf_counter()
            try:
                if tracker is not None:
                    tracker.start()
                fam.fit_grid(est, g.axes, g.values[s], g.regular, covariates)
            finally:
                if tracker is not None:
                    tracker.close()
            self.fit_time_s_.append(time.perf_counter() - t0)
            self.estimators_.append(est)
            self.n_observed_.append(_n_observed(est, g.values[s]))
            if self.share_hyperparameters and shared is None and g.n_slices > 1:
                shared = self._shared_from(est)
        self.extra_dim_, self.extra_coords_ = g.extra_dim, g.extra_coords
        chosen = fam.fit_reason(self.estimators_[0])  # what the fit chose from the data
        if chosen and self.model == AUTO:
            self.model_reason_ = f"{self.model_reason_}; {chosen}"
        self._finish(g.spec, grid_target(g), g.attrs, g.name)
        return self

    def _fit_series(self, g: GridData, fam, covariates) -> GeoRegressor:
        """One joint fit over the dates of a stack (families with ``fits_series``)."""
        fam.refuse_covariates(covariates)
        times = series_times(g)
        if times is None:
            raise InputError(
                f"model={self.model_!r} needs a stack of dates: a 'time' dimension, or one "
                "with datetime coordinates, and at least two dates; "
                + (f"this raster's extra dimension {g.extra_dim!r} is not time."
                   if g.extra_dim is not None and g.n_slices > 1 else "this is one image."))
        values = np.asarray(g.values)
        counts = np.isfinite(values).sum(axis=(1, 2))
        if not counts.any():
            raise InputError("every cell of every date is missing (NaN or nodata).")
        est, _ = self._estimator("")
        t0 = time.perf_counter()
        self.estimators_ = fam.fit_series(est, g.axes, values, times, g.regular)
        self.fit_time_s_ = [(time.perf_counter() - t0) / g.n_slices] * g.n_slices  # shared
        self.n_observed_ = [int(c) for c in counts]
        self.extra_dim_, self.extra_coords_ = g.extra_dim, g.extra_coords
        self._finish(g.spec, grid_target(g), g.attrs, g.name)
        return self

    @staticmethod
    def _shared_from(est) -> dict:
        """Options that reuse ``est``'s hyperparameters (standardised units), not optimised."""
        return {"kernel": est.kernel_, "noise": est.noise_, "optimize": False}

    def _fit_table(self, table, *, x, y, value, grid) -> GeoRegressor:
        if not hasattr(table, "__getitem__"):
            raise InputError(
                f"expected an xarray DataArray/Dataset or a table of points; got "
                f"{type(table).__name__}."
            )
        pts = to_point_data(table, x=x, y=y, value=value, crs=self.crs, grid=grid)
        self._resolve(None, True, n_points=int(pts.values.size))
        target = target_from(pts.spec, like=grid) if grid is not None else None
        axes = list(pts.spec.to_model(target.y, target.x)) if target is not None else None
        est, tracker = self._estimator("")
        t0 = time.perf_counter()
        try:
            if tracker is not None:
                tracker.start()
            family(self.model_).fit_points(est, pts.X, pts.values, axes, units=pts.spec.units)
        finally:
            if tracker is not None:
                tracker.close()
        self.estimators_, self.n_observed_ = [est], [int(pts.values.size)]
        self.fit_time_s_ = [time.perf_counter() - t0]
        self.extra_dim_, self.extra_coords_ = None, {}
        # a prediction grid is only geometry: its units, long_name... describe its own values,
        # not the points'
        self._finish(pts.spec, target, {}, pts.name)
        return self

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self):
        check_fitted(self, "estimators_")

    def predict(self, like: xr.DataArray | xr.Dataset | None = None, *,
                x: ArrayLike | None = None, y: ArrayLike | None = None,
                quantiles: Sequence[float] | None = None, outside: str = "raise",
                points: bool = False, lazy: bool | None = None,
                time: ArrayLike | None = None) -> xr.Dataset:
        """Predict on a raster grid (or at points).

        Args:
            like: DataArray/Dataset whose spatial grid to fill (same CRS). Default: the input
                raster (or the ``grid=`` given with points).
            x: x coordinates of the target grid (in the input's CRS), instead of ``like``.
            y: y coordinates of the target grid (with ``x``).
            quantiles: e.g. ``[0.05, 0.95]``: adds ``quantiles`` of a new observation.
            outside: cells outside the model's window raise (``"raise"``) or are NaN (``"nan"``).
            points: with ``x`` and ``y`` of equal length, predict at the points (x_i, y_i)
                instead of on their grid; the result has dimension ``point``.
            lazy: return dask-backed variables, computed block by block of rows when they are
                read or written (:func:`geogp.write_geotiff` and :func:`geogp.write_netcdf`
                write them window by window, never holding the whole raster). Default
                (None): lazy on grids of more than :data:`geogp.core.memory.LAZY_CELLS` cells.
            time: with a stack fitted by ``model="spacetime"``, the date(s) to predict, inside
                or after the series (a forecast, whose interval widens with the time since
                the last data), on the fitted grid; the result's time dimension holds them.

        Returns:
            ``xr.Dataset`` with ``mean``, ``std`` (new observation, noise included), ``std_latent``
            (and ``quantiles``), dims (extra, y, x) (x before y when the input, or ``like``,
            has its x dimension first), the input's coords, attrs and CRS."""
        self._check_fitted()
        if outside not in ("raise", "nan"):
            raise InputError(f"outside must be 'raise' or 'nan'; got {outside!r}.")
        if lazy is not None and not isinstance(lazy, (bool, np.bool_)):
            raise InputError(f"lazy must be True, False or None (lazy above "
                             f"{LAZY_CELLS:,} cells); got {lazy!r}.")
        if quantiles is not None:  # before the prediction, not after it
            quantiles = check_quantiles(quantiles)
        if points:
            return self._predict_points(x, y, quantiles, outside)
        if time is not None:
            return self._predict_dates(time, like, x, y, quantiles)
        target, axes = self._grid(like, x, y)
        n, n_q = len(self.estimators_), 0 if quantiles is None else len(quantiles)
        lazy = predicts_lazily(len(target.y), len(target.x), n) if lazy is None else lazy
        # before any output exists
        check_prediction(len(target.y), len(target.x), n, n_q, lazy=bool(lazy))
        fam = family(self.model_)
        if lazy:
            preds = [fam.predict_grid_lazy(est, axes, outside) for est in self.estimators_]
        else:
            with bar("prediction", n * len(axes[0]), bool(self.progress), unit="row") as pbar:
                preds = [fam.predict_grid(est, axes, outside, on_block=pbar.update)
                         for est in self.estimators_]
        stack = [np.stack([getattr(p, f) for p in preds]) for f in
                 ("mean", "var_latent", "var_observed")]
        return target.in_source_order(prediction_dataset(
            *stack, (target.y_dim, target.x_dim), target.coords,
            crs_wkt=self.spec_.crs_wkt or target.crs_wkt,
            spatial_dims=(target.y_dim, target.x_dim), extra_dim=self.extra_dim_,
            extra_coords=self.extra_coords_, quantiles=quantiles, attrs=self.attrs_,
            name=self.name_))

    def _predict_dates(self, time, like, x, y, quantiles) -> xr.Dataset:
        """:meth:`predict` at dates ``time`` (model="spacetime", the fitted grid)."""
        fam = family(self.model_)
        if not fam.fits_series or self.extra_dim_ is None:
            raise InputError("predict(time=...) needs a stack fitted jointly over its dates "
                             "(model='spacetime').")
        if like is not None or x is not None or y is not None:
            raise InputError("predict(time=...) predicts on the fitted grid; drop like/x/y.")
        new, days = self._days(time)
        target, axes = self._grid(None, None, None)
        pred = fam.predict_dates(self.estimators_[0], axes, np.asarray(days, dtype=np.float64))
        coord = {self.extra_dim_: xr.Variable(self.extra_dim_, new)}
        return target.in_source_order(prediction_dataset(
            pred.mean, pred.var_latent, pred.var_observed, (target.y_dim, target.x_dim),
            target.coords, crs_wkt=self.spec_.crs_wkt or target.crs_wkt,
            spatial_dims=(target.y_dim, target.x_dim), extra_dim=self.extra_dim_,
            extra_coords=coord, quantiles=quantiles, attrs=self.attrs_, name=self.name_))

    def _dates(self) -> np.ndarray:
        """The stack's dates as its time coordinate holds them (without one: 0, 1, …, in
        days, as the fit took them)."""
        coord = self.extra_coords_.get(self.extra_dim_)
        if coord is None:
            return np.arange(len(self.estimators_), dtype=np.float64)
        return np.asarray(coord.values)

    def _days(self, time) -> tuple[np.ndarray, np.ndarray]:
        """(the dates ``time`` as the stack's coordinate holds them, the same in days on the
        fitted series' scale), or a clear error."""
        first = self._dates()[0]
        dated = np.issubdtype(np.asarray(first).dtype, np.datetime64)
        if dated and np.asarray(time).dtype.kind in "iufb":  # numpy would take ns since 1970
            raise InputError(f"time must hold dates like the stack's {self.extra_dim_!r} "
                             f"(e.g. '2024-07-04'); got the number(s) {time!r}.")
        try:
            new = np.atleast_1d(np.asarray(time, dtype=first.dtype if dated else np.float64))
        except (TypeError, ValueError) as err:
            raise InputError(f"time must hold {'dates' if dated else 'numbers (days)'} like "
                             f"the stack's {self.extra_dim_!r}; got {time!r} ({err}).") from None
        if dated and np.isnat(new).any():
            raise InputError(f"time must hold valid dates; got {time!r}.")
        days = ((new - first) / np.timedelta64(1, "D") if dated
                else new.astype(np.float64) - float(first))
        return new, np.asarray(days, dtype=np.float64)

    def _grid(self, like, x, y) -> tuple[Target, list]:
        """The target grid of like / x, y (default: the fit's) and its model-coordinate axes."""
        if like is None and x is None and y is None:
            if self.target_ is None:
                raise InputError("the model was fitted on points without grid=...; pass "
                                 "like=DataArray or x=/y= coordinates to predict on.")
            target = self.target_
        else:
            target = target_from(self.spec_, like, x=x, y=y)
        return target, self._snapped(*self.spec_.to_model(target.y, target.x))

    def _predict_points(self, x, y, quantiles, outside) -> xr.Dataset:
        xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
        ys = np.atleast_1d(np.asarray(y, dtype=np.float64))
        if xs.shape != ys.shape or xs.ndim != 1:
            raise InputError(f"points=True needs x and y vectors of equal length; got shapes "
                             f"{xs.shape} and {ys.shape}.")
        X = np.stack(self._snapped(*self.spec_.to_model(ys, xs)), axis=1)
        fam = family(self.model_)
        preds = [fam.predict_points(est, X, outside) for est in self.estimators_]
        stack = [np.stack([getattr(p, f) for p in preds]) for f in
                 ("mean", "var_latent", "var_observed")]
        coords = {self.spec_.y_dim: xr.Variable("point", ys),
                  self.spec_.x_dim: xr.Variable("point", xs)}
        return prediction_dataset(*stack, ("point",), coords, crs_wkt=self.spec_.crs_wkt,
                                  extra_dim=self.extra_dim_, extra_coords=self.extra_coords_,
                                  quantiles=quantiles, attrs=self.attrs_, name=self.name_)

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False,
             key: bytes | None = None) -> None:
        """Save to one ``.npz`` (no pickle; integrity-checked, signed only with ``key``, bytes)."""
        self._check_fitted()
        save_model(self, path, overwrite=overwrite, key=key)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, max_bytes: float | None = None,
             key: bytes | None = None) -> GeoRegressor:
        """Load a model saved by :meth:`save`; predictions are reproduced exactly. ``max_bytes``:
        refuse larger declared arrays; ``key``: the save's (:func:`geogp.persist.load_model`)."""
        return load_model(path, cls, max_bytes=max_bytes, key=key)


def _check_no_empty_slice(g: GridData) -> None:
    """Refuse a stack with a slice that has no observed cell, naming the slice (its
    coordinate along the extra dimension)."""
    if g.n_slices < 2:
        return
    empty = [s for s in range(g.n_slices) if not bool(np.isfinite(g.values[s]).any())]
    if not empty:
        return
    coord = g.extra_coords.get(g.extra_dim)
    labels = [_label(coord.values[s]) if coord is not None else str(s) for s in empty]
    raise InputError(
        f"{len(empty)} of the {g.n_slices} slices along {g.extra_dim!r} have no observed cell "
        f"(every cell NaN or nodata): {g.extra_dim} = {', '.join(labels[:5])}"
        f"{' …' if len(labels) > 5 else ''} (index {', '.join(map(str, empty[:5]))}). "
        f"Each slice is fitted on its own; drop those: da.drop_isel({g.extra_dim}="
        f"{empty[:5]}{' + …' if len(empty) > 5 else ''})"
        + ("; or fit the dates jointly, model='spacetime', which predicts such a date from its "
           "neighbours in time." if _dated(g) else "."))


def _dated(g: GridData) -> bool:
    """Whether the stack's extra dimension is time, with valid dates."""
    try:
        return series_times(g) is not None
    except InputError:
        return False


def _label(value) -> str:
    """A coordinate value as a person writes it (a date without a midnight time)."""
    return date_words(value) if isinstance(value, np.datetime64) else str(value)


def _n_observed(est, values) -> int:
    n = getattr(getattr(est, "stats_", None), "n", None)
    if n is not None:
        return int(float(n))
    return int(np.isfinite(np.asarray(values)).sum())


_OWN = ("kernel", "n_features", "share_hyperparameters", "crs", "nodata", "progress")


def fit(data: xr.DataArray | xr.Dataset | pd.DataFrame, model: str = "auto", *,
        likelihood: str = GAUSSIAN, var: str | None = None, x: str = "x", y: str = "y",
        value: str = "value", grid: xr.DataArray | xr.Dataset | None = None,
        covariates: xr.DataArray | Sequence[xr.DataArray] | None = None,
        **kwargs: Any) -> GeoRegressor:
    """Fit a Gaussian process to a raster or to points: ``GeoRegressor(...).fit(data)``.

    Args:
        data: ``xr.DataArray``/``xr.Dataset`` raster (NaN/nodata = missing, numpy or dask) or a
            pandas/GeoPandas table of points.
        model: ``"auto"`` (default: ``"spacetime"`` for a stack of dates, ``"lattice"`` for a
            regular raster, ``"exact"`` for up to 2,000 points, ``"afs"`` otherwise;
            ``model_reason_`` says which and why), ``"lattice"``, ``"nonstationary"`` (alias
            ``"wavelet"``), ``"afs"``, ``"wavelet_basis"``, ``"exact"`` or ``"spacetime"``
            (image stacks).
        likelihood: ``"gaussian"`` (default), ``"poisson"``, ``"bernoulli"``, ``"student_t"``
            (an SVGP; see :class:`GeoRegressor`).
        var: variable of a Dataset.
        x: the x (or longitude) column of a point table.
        y: the y (or latitude) column of a point table.
        value: the column of the measured values.
        grid: the target raster for points.
        covariates: rasters on the data's grid used as regressors (lattice model; see
            :meth:`GeoRegressor.fit`).
        **kwargs: :class:`GeoRegressor` arguments (``kernel``, ``n_features``,
            ``share_hyperparameters``, ``crs``, ``nodata``, ``progress``) and model options
            (``maxiter``, ``margin``, ``lengthscale``, ``noise``, ...).

    Returns:
        The fitted :class:`GeoRegressor`.
    """
    own = {k: kwargs.pop(k) for k in list(kwargs) if k in _OWN}
    reg = GeoRegressor(model, likelihood=likelihood, options=kwargs or None, **own)
    return reg.fit(data, var=var, x=x, y=y, value=value, grid=grid, covariates=covariates)
