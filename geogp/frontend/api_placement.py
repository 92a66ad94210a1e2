"""The active loop on a fitted :class:`~geogp.frontend.api.GeoRegressor`, in the user's CRS and
units: :meth:`~PlacementMixin.suggest_sites` (where to measure next, on the raster's cells) and
:meth:`~PlacementMixin.add_observations` (a new model conditioned on what was measured, the
hyperparameters kept). Both go through the model family's placement contract
(:mod:`geogp.placement.contract`). :func:`place` is the whole of ``geogp place`` as one call:
choose and fit the placement model, take in what was measured, suggest the sites."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import xarray as xr

from geogp.core.grid_checks import spacing
from geogp.exceptions import InputError, MemoryEstimateError
from geogp.families import AUTO, FALLBACK, SERIES_MODEL, family, make_estimator, resolve_model
from geogp.frontend.adapters import date_words, find_spatial_dims, series_times, to_grid_data
from geogp.frontend.blocks import block_mask
from geogp.placement.candidates import Candidates, nearest_cells
from geogp.placement.feature_models import memory_estimate
from geogp.placement.observe import add_observations
from geogp.placement.suggest import suggest_sites

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.frontend.outputs import Target

__all__ = ["PlacementMixin", "Placed", "place", "placement_model", "mask_on_target", "is_stack"]

PLACEMENT_FEATURES = 2000  # the dense AFS posterior that placement updates rank by rank

_SCORES = ["score", "std_before", "std_reduction", "mean_std_after"]


class PlacementMixin:
    """:meth:`suggest_sites` and :meth:`add_observations` of
    :class:`~geogp.frontend.api.GeoRegressor`."""

    def _one_raster(self, what: str):
        """(the estimator, the target grid, its model-coordinate axes) of a model fitted on
        one 2-D raster (or points with ``grid=``)."""
        self._check_fitted()
        if len(self.estimators_) != 1:
            raise InputError(f"{what} works on a model of one 2-D raster; this one has "
                             f"{len(self.estimators_)} slices along {self.extra_dim_!r}. "
                             "Fit one slice (da.isel(...)).")
        if self.target_ is None:
            raise InputError(f"{what} places on the model's grid; this model was fitted on "
                             "points without grid=.")
        fam = family(self.model_)
        if not fam.can_place:
            raise InputError(f"{what} is not available for model={self.model_!r}.")
        target = self.block_grid() or self.target_  # a raster's blocks: the cells fitted
        return self.estimators_[0], target, list(self.spec_.to_model(target.y, target.x))

    def _dated(self, time: Any) -> tuple[Any, Any, list, Any]:
        """(the posterior at a date of a stack fitted jointly, the target grid, its model
        axes, the date as the stack's coordinate holds it): the date ``time``, by default the
        next one (the last date plus the median step)."""
        fam = family(self.model_)
        if time is None:
            dates = self._dates()
            time = dates[-1] + (np.median(np.diff(dates)) if dates.size > 1 else 0)
        new, days = self._days(time)
        if new.size != 1:
            raise InputError(f"time must be one date; got {new.size}.")
        target = self.target_
        return (fam.forecast(self.estimators_[0], float(days[0])), target,
                list(self.spec_.to_model(target.y, target.x)), new[0])

    def suggest_sites(self, n: int, *, time: Any = None, strategy: str = "auto",
                      exclude: ArrayLike | None = None,
                      min_distance: float | str = "auto", max_targets: int = 1000,
                      max_memory: float = 4 * 2**30, **options: Any) -> pd.DataFrame:
        """Where to measure next: ``n`` cells of the model's raster, chosen greedily.

        Args:
            n: number of sites.
            time: with a stack fitted jointly over its dates (``model="spacetime"``): the
                date to measure at, inside or after the series; by default the next date
                (the last plus the median step). The sites are chosen on the posterior at
                that date (a forecast after the series), with the fit's hyperparameters.
            strategy: ``"auto"`` (the family's default: total variance reduction on the
                lattice model, the log-determinant ``"mi"`` elsewhere), ``"variance"``,
                ``"mi"``, ``"reduction"`` (lattice) or ``"krause"`` (afs, wavelet).
            exclude: boolean (y, x) mask of the raster, True = not allowed; or a DataArray on
                the raster's grid, non-zero = not allowed (NaN counts as zero).
            min_distance: between sites, in model units (the CRS's; ``"auto"``: the model's).
            max_targets, max_memory: as :func:`geogp.placement.suggest_sites`; further
            ``options`` go there too.

        Returns:
            DataFrame in selection order: ``order``, ``index`` (the cell's flat index in
            (y, x) row-major order; on a raster of blocks, ``blocks_``, the block's among the
            blocks), ``x``, ``y`` (cell centres in the raster's CRS; block centres), ``time``
            (a stack's sites: their date, also in ``attrs``),
            ``score``, ``std_before``, ``std_reduction``, ``mean_std_after``
            (data units); ``attrs`` as :func:`geogp.placement.suggest_sites`, with ``crs``.
        """
        self._check_fitted()
        when = None
        if family(self.model_).places_in_time and self.extra_dim_ is not None:
            est, target, axes, when = self._dated(time)
        elif time is not None:
            raise InputError("time= places at a date of a stack fitted jointly over its dates "
                             f"(model='spacetime'); this model is {self.model_!r}"
                             + (f" with {len(self.estimators_)} slices fitted one by one."
                                if len(self.estimators_) > 1 else "."))
        else:
            est, target, axes = self._one_raster("suggest_sites")
        raster = self.target_
        if isinstance(exclude, xr.DataArray):
            named = "" if exclude.name is None else f" {str(exclude.name)!r}"
            exclude = mask_on_target(exclude, raster, f"the exclusion mask{named}")
        if strategy == "auto":
            strategy = family(self.model_).placement_strategy
        if exclude is not None:
            exclude = np.asarray(exclude, dtype=bool)
            if exclude.shape != (len(raster.y), len(raster.x)):
                raise InputError(f"exclude must be a (y, x) mask of shape "
                                 f"{(len(raster.y), len(raster.x))}; got {exclude.shape}.")
            if self.blocks_ is not None:  # a block is excluded where any of its cells is
                exclude = block_mask(exclude, self.blocks_)
        sites = suggest_sites(est, Candidates.grid(axes), n, strategy=strategy, exclude=exclude,
                              min_distance=min_distance, max_targets=max_targets,
                              max_memory=max_memory, names=("y_model", "x_model"), **options)
        iy, ix = np.unravel_index(sites["index"].to_numpy(), (len(target.y), len(target.x)))
        out = pd.DataFrame({"order": sites["order"].to_numpy(), "index": sites["index"].to_numpy(),
                            "x": target.x[ix], "y": target.y[iy],
                            **{c: sites[c].to_numpy() for c in _SCORES}})
        out.attrs = {**sites.attrs, "coord_names": ["x", "y"], "crs": self.spec_.crs_wkt}
        if when is not None:  # the date the sites are for, in the table and its files
            out.insert(4, "time", _date_words(when))
            out.attrs["time"] = _date_words(when)
        return out

    def add_observations(self, points: pd.DataFrame, *, x: str = "x", y: str = "y",
                         value: str = "value") -> Any:
        """A new fitted model conditioned on measurements, without refitting: the
        hyperparameters are kept, the posterior updated exactly. This model is unchanged.

        Args:
            points: a table with columns ``x``, ``y`` (in the raster's CRS) and ``value``
                (data units), e.g. :meth:`suggest_sites`' rows with the measured values. A
                point is taken at its nearest cell of the raster (of its blocks, on a raster
                of blocks: ``blocks_``), and must lie on it.

        Returns:
            A new model of the same kind (:meth:`predict`, :meth:`suggest_sites`...).
        """
        est, target, axes = self._one_raster("add_observations")
        if not family(self.model_).can_condition:
            raise InputError(f"add_observations is not available for model={self.model_!r}; "
                             "refit with the new data.")
        if not isinstance(points, pd.DataFrame):
            raise InputError(f"points must be a DataFrame with columns {x!r}, {y!r} and "
                             f"{value!r}; got {type(points).__name__}.")
        pts = _table_points(points, x, y, value, "points")
        rows, cols = nearest_cells(pts[:, 0], pts[:, 1], target.y, target.x, "a point")
        X = np.stack([axes[0][rows], axes[1][cols]], axis=1)
        out = copy.copy(self)
        out.estimators_ = [add_observations(est, X, pts[:, 2])]
        return out


def _date_words(value: Any) -> str:
    """A date as a person writes it, or a number of days with every digit."""
    if isinstance(value, np.datetime64):
        return date_words(value)
    return np.format_float_positional(float(value), trim="-")


def mask_on_target(mask: xr.DataArray, target: Target, what: str) -> np.ndarray:
    """(N_y, N_x) boolean: True where ``mask`` (a 2-D raster on ``target``'s grid) is non-zero;
    NaN counts as zero. Refuses a mask on another grid."""
    y_dim, x_dim = find_spatial_dims(mask)
    if set(mask.dims) - {y_dim, x_dim}:
        raise InputError(f"{what} must be a single 2-D band; it has dimensions "
                         f"{list(mask.dims)}.")
    mask = mask.transpose(y_dim, x_dim)
    y, x = np.asarray(mask[y_dim].values, float), np.asarray(mask[x_dim].values, float)
    same = (y.shape == target.y.shape and x.shape == target.x.shape
            and np.allclose(y, target.y, rtol=0, atol=1e-6 * spacing(target.y))
            and np.allclose(x, target.x, rtol=0, atol=1e-6 * spacing(target.x)))
    if not same:
        raise InputError(
            f"{what} is not on the input's grid (shape {(y.size, x.size)} vs "
            f"{(target.y.size, target.x.size)}, or other coordinates); resample it first, "
            "e.g. mask.rio.reproject_match(raster).")
    return np.nan_to_num(np.asarray(mask.values, dtype=np.float64), nan=0.0) != 0



@dataclass(frozen=True)
class Placed:
    """What :func:`place` returns: the fitted (and, with ``measured``, conditioned) model,
    the suggested sites (:meth:`PlacementMixin.suggest_sites`' table) and notes for the
    user (what was chosen and why)."""

    model: Any
    sites: pd.DataFrame
    notes: tuple[str, ...]


def placement_model(shape: tuple[int, int], regular: bool, model: str = AUTO, *,
                    afs_options: bool = False, max_memory: float = 4 * 2**30,
                    options: dict | None = None,
                    spacing: tuple[float, float] | None = None) -> tuple[str, dict, str]:
    """(model name, its options, a note or "") for placing on a raster of ``shape`` cells:
    ``model``, with ``"auto"`` resolved as :func:`geogp.fit` resolves it (AFS when
    ``afs_options``: a kernel or a feature count was given). A family whose posterior goes
    on tiles gets ``max_memory`` as its limit, and the note says when it needs more than one.
    ``spacing``: the raster's per-axis step variation (nearly regular rasters, as for
    :func:`~geogp.families.resolve_model`)."""
    if model == AUTO and afs_options:
        return FALLBACK, dict(options or {}), ""
    opts = {**(options or {}), "max_bytes": float(max_memory)}
    if model == AUTO:
        model = resolve_model(AUTO, raster_shape=shape, regular=regular, options=opts,
                              spacing=spacing)[0]
    fam = family(model)
    if not fam.posterior_on_tiles:
        return model, dict(options or {}), ""
    tiles = fam.posterior_tiles(make_estimator(model, options=opts), shape)
    if tiles == 1:
        return model, opts, ""
    return model, opts, (f"placement tile by tile: on {shape[0]} × {shape[1]} cells the "
                         f"lattice posterior takes {tiles} tiles within the memory limit; each "
                         "site is scored by its tile over the cells within the tile's halo.")


def place(data: xr.DataArray, n: int, *, model: str = AUTO, kernel: Any = None,
          n_features: int | None = None, measured: pd.DataFrame | None = None,
          refit: bool = False, x: str = "x", y: str = "y", value: str = "value",
          strategy: str = "auto", exclude: ArrayLike | xr.DataArray | None = None,
          min_distance: float | str = "auto", max_memory: float = 4 * 2**30,
          progress: bool = False, options: dict | None = None, time: Any = None,
          **placement: Any) -> Placed:
    """Fit a model to a raster and suggest where to measure next: ``geogp place`` as a call.

    Args:
        data: a 2-D raster (NaN/nodata = missing), as for :func:`geogp.fit`; or a stack of
            dates (a time dimension), fitted jointly over its dates (``model="spacetime"``),
            whose sites are for the date ``time``.
        time: with a stack, the date to measure at (default: the next date, the last plus
            the median step): the sites are chosen on the posterior at that date.
        n: number of sites.
        model: ``"auto"`` (the model :func:`geogp.fit` chooses; AFS with ``kernel`` or
            ``n_features``) or a model name whose family places (``can_place``).
        kernel: the kernel of an AFS model.
        n_features: the features of an AFS model (default 2,000: the dense posterior that
            placement updates rank by rank).
        measured: measurements made since the raster, a table with columns ``x``, ``y`` (the
            raster's CRS) and ``value``; each is taken at its nearest cell. The posterior is
            conditioned on them with the hyperparameters kept, or, with ``refit``, they are
            written into the raster before the fit.
        strategy: as :meth:`PlacementMixin.suggest_sites`.
        exclude: as :meth:`PlacementMixin.suggest_sites`.
        min_distance: as :meth:`PlacementMixin.suggest_sites`.
        max_memory: as :meth:`PlacementMixin.suggest_sites`; in bytes, it also bounds a
            lattice fit, which goes on tiles beyond it.
        placement: further options of :meth:`PlacementMixin.suggest_sites`
            (``criterion``, ``max_targets``...).
        progress: as :class:`geogp.GeoRegressor`.
        options: as :class:`geogp.GeoRegressor`.

    Returns:
        :class:`Placed`: the model, the sites and notes.
    """
    from geogp.frontend.api import GeoRegressor  # noqa: PLC0415 (geogp.frontend.api imports this module)

    if refit and measured is None:
        raise InputError("refit=True refits with the measured points; pass measured too.")
    if not (np.isfinite(max_memory) and max_memory > 0):
        raise InputError(f"max_memory must be a positive number of bytes; got {max_memory}.")
    afs_options = kernel is not None or n_features is not None
    if model != AUTO:
        if not family(model).can_place:
            raise InputError(f"model={model!r} does not support placement.")
        if afs_options and not family(model).takes_features:
            raise InputError(f"kernel and n_features are AFS options; model={model!r} takes "
                             "neither.")
    most = family(FALLBACK).max_placement_features
    if n_features is not None and not 4 <= n_features <= most:
        raise InputError(f"n_features must be between 4 and {most} (placement uses the dense "
                         f"posterior); got {n_features}.")
    if not isinstance(data, xr.DataArray):
        raise InputError(f"place needs a raster DataArray; got {type(data).__name__}.")
    if data.ndim == 3 and is_stack(data):
        return _place_in_time(data, n, model=model, measured=measured, strategy=strategy,
                              exclude=exclude, min_distance=min_distance, max_memory=max_memory,
                              progress=progress, options=options, time=time, **placement)
    if time is not None:
        raise InputError("time= places at a date of a stack of dates (a time dimension); "
                         "this raster has none.")
    if data.ndim != 2:
        raise InputError(f"place works on one 2-D raster; this one has dimensions "
                         f"{list(data.dims)}. Select one slice first (e.g. da.isel(...)).")
    points = None if measured is None else _measured_cells(measured, data, x, y, value)
    if points is not None and refit:  # the measurements become data
        data = data.transpose(*find_spatial_dims(data)).copy()
        data.values[points[0], points[1]] = points[2]
    g = to_grid_data(data)
    name, opts, note = placement_model(g.values[0].shape, g.regular, model,
                                       afs_options=afs_options, max_memory=max_memory,
                                       options=options, spacing=g.spacing)
    _check_strategy(name, strategy)
    notes = [note] if note else []
    features = (n_features or PLACEMENT_FEATURES) if family(name).takes_features else None
    if features is not None:  # the least any strategy needs, known before the fit
        cells = int(np.prod(g.values[0].shape))
        least = memory_estimate(cells, cells, features, strategy="variance")
        if least > max_memory:
            raise MemoryEstimateError(
                f"placement with {features} Fourier features over {cells} cells", least,
                max_memory, "Use fewer features (n_features=) or raise max_memory.",
                cli_hint="Use fewer --features, or raise --max-memory GIB if the machine has "
                "the memory.")
    geo = GeoRegressor(name, kernel=kernel, n_features=features, progress=progress,
                       options=opts or None).fit(data)
    if points is not None and not refit:  # condition on them, θ kept
        geo = geo.add_observations(measured, x=x, y=y, value=value)
        notes.append(f"posterior updated with {len(points[2])} measurement(s) "
                     "(hyperparameters kept).")
    sites = geo.suggest_sites(n, strategy=strategy, exclude=exclude, min_distance=min_distance,
                              max_memory=max_memory, **placement)
    return Placed(geo, sites, tuple(notes))


def is_stack(data: xr.DataArray) -> bool:
    """Whether ``data`` (3-D) is a stack of dates: its extra dimension is time (a bad time
    axis, unsorted or repeated dates, is refused in one line)."""
    return series_times(to_grid_data(data)) is not None


def _place_in_time(data: xr.DataArray, n: int, *, model: str, measured: Any, strategy: str,
                   exclude: Any, min_distance: float | str, max_memory: float, progress: bool,
                   options: dict | None, time: Any, **placement: Any) -> Placed:
    """:func:`place` on a stack of dates: the stack fitted jointly, the sites for ``time``."""
    from geogp.frontend.api import GeoRegressor  # noqa: PLC0415 (geogp.frontend.api imports this module)

    if measured is not None:
        raise InputError("measured points on a stack: add them to the stack at their date "
                         "and fit again (conditioning a stack without a refit is not "
                         "available).")
    name = SERIES_MODEL if model == AUTO else model
    if not family(name).places_in_time:
        raise InputError(f"placement at a date of a stack needs its dates fitted jointly "
                         f"(model={SERIES_MODEL!r}); model={model!r} fits each date alone.")
    _check_strategy(name, strategy)
    geo = GeoRegressor(model, progress=progress, options=options).fit(data)
    if not family(geo.model_).places_in_time:
        raise InputError(f"placement at a date of a stack needs its dates fitted jointly; "
                         f"this stack got {geo.model_!r} ({geo.model_reason_}).")
    sites = geo.suggest_sites(n, time=time, strategy=strategy, exclude=exclude,
                              min_distance=min_distance, max_memory=max_memory, **placement)
    return Placed(geo, sites, (f"sites for {sites.attrs['time']}, from the stack's posterior "
                               "at that date (hyperparameters of the joint fit).",))


def _check_strategy(name: str, strategy: str) -> None:
    """Refuse, before the fit, a strategy the model ``name`` does not offer."""
    offered = family(name).placement_strategies()
    if strategy != "auto" and strategy not in offered:
        raise InputError(f"strategy {strategy!r} is not available for the {name} model "
                         f"(it offers {', '.join(offered)}); choose one of those, or another "
                         "model.")


def _measured_cells(measured, data, x, y, value):
    """(rows, cols, values) of the measurements at their nearest cells of ``data``."""
    if not isinstance(measured, pd.DataFrame):
        raise InputError(f"measured must be a DataFrame with columns {x!r}, {y!r} and "
                         f"{value!r}; got {type(measured).__name__}.")
    pts = _table_points(measured, x, y, value, "measured")
    y_dim, x_dim = find_spatial_dims(data)
    rows, cols = nearest_cells(pts[:, 0], pts[:, 1], data[y_dim].values, data[x_dim].values,
                               "a measured point")
    return rows, cols, pts[:, 2]


def _table_points(table: pd.DataFrame, x: str, y: str, value: str, what: str) -> np.ndarray:
    """(n, 3) finite x, y, value of a table of measurements; refuses anything else."""
    missing = [c for c in (x, y, value) if c not in table.columns]
    if missing:
        raise InputError(f"{what} lack the column(s) {missing}; they have "
                         f"{list(table.columns)}.")
    try:
        pts = table[[x, y, value]].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{what}' {x!r}, {y!r} and {value!r} must be numbers.") from None
    if len(pts) == 0 or not np.all(np.isfinite(pts)):
        raise InputError(f"{what} must hold at least one row of finite {x}, {y} and {value}.")
    return pts
