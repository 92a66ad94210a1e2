"""From predicted arrays back to geodata: prediction targets and output ``xr.Dataset``s.

The way back of :mod:`geogp.frontend.adapters`: :func:`target_from` turns a ``like=`` raster or
coordinate vectors into a :class:`Target` grid, and :func:`prediction_dataset` wraps predictive
moments as a Dataset with the input's coordinates, attributes and CRS (rioxarray).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import rioxarray  # noqa: F401  (registers the .rio accessor used below)
import xarray as xr

from geogp.core.grid_checks import require_axes
from geogp.exceptions import InputError
from geogp.frontend.adapters import GridData, GridSpec, check_axis, find_spatial_dims

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

_Raster = TypeVar("_Raster", xr.DataArray, xr.Dataset)

__all__ = ["Target", "grid_target", "target_from", "check_quantiles", "prediction_dataset"]


@dataclass
class Target:
    """A prediction grid: dimension names, user coordinates, coordinates to attach, its CRS,
    and whether its source put the x dimension first (outputs then keep that order)."""

    y_dim: str
    x_dim: str
    y: np.ndarray
    x: np.ndarray
    coords: dict
    crs_wkt: str | None = None
    x_first: bool = False

    def in_source_order(self, obj: _Raster) -> _Raster:
        """``obj`` (Dataset or DataArray with dims (..., y, x)) in the source's order."""
        return obj.transpose(..., self.x_dim, self.y_dim) if self.x_first else obj


def grid_target(g: GridData) -> Target:
    """The input raster of :func:`geogp.frontend.adapters.to_grid_data` as a prediction target."""
    return Target(g.spec.y_dim, g.spec.x_dim, g.y, g.x, dict(g.coords), g.spec.crs_wkt,
                  g.x_first)


def target_from(spec: GridSpec, like: xr.DataArray | xr.Dataset | None = None, *,
                x: ArrayLike | None = None, y: ArrayLike | None = None) -> Target:
    """The prediction grid from ``like`` (DataArray/Dataset) or coordinate vectors ``x``, ``y``.

    ``like`` must use the model's CRS (or none): reproject it first otherwise.
    """
    if like is not None:
        if not isinstance(like, (xr.DataArray, xr.Dataset)):
            raise InputError(f"like= must be an xarray DataArray or Dataset whose grid to fill; "
                             f"got {type(like).__name__}. For plain coordinates pass x=... and "
                             "y=... (points=True to predict at points).")
        if x is not None or y is not None:
            raise InputError("pass either like=... or x=/y=..., not both.")
        y_dim, x_dim = find_spatial_dims(like)
        require_axes(like, y_dim, x_dim)  # not like[y_dim]: xarray would number the rows
        yy, _ = check_axis(like[y_dim].values, y_dim, min_size=1)
        xx, _ = check_axis(like[x_dim].values, x_dim, min_size=1)
        like_crs = None
        with contextlib.suppress(Exception):
            like_crs = like.rio.crs
        if like_crs is not None and spec.crs is not None and like_crs != spec.crs:
            raise InputError(
                f"the target grid's CRS ({like_crs.to_string()}) differs from the model's "
                f"({spec.crs.to_string()}); reproject it first (like.rio.reproject(...))."
            )
        coords = {k: v.variable for k, v in like.coords.items()
                  if set(v.dims) <= {y_dim, x_dim} and k != "band"}
        dims = list(like.dims) if isinstance(like, xr.DataArray) else []
        x_first = bool(dims) and dims.index(x_dim) < dims.index(y_dim)
        return Target(y_dim, x_dim, yy, xx, coords,
                      like_crs.to_wkt() if like_crs is not None else None, x_first)
    if x is None or y is None:
        raise InputError("give a target grid: like=DataArray, or both x= and y= coordinates.")
    yy, _ = check_axis(np.atleast_1d(y), spec.y_dim, min_size=1)
    xx, _ = check_axis(np.atleast_1d(x), spec.x_dim, min_size=1)
    coords = {spec.y_dim: xr.Variable(spec.y_dim, yy), spec.x_dim: xr.Variable(spec.x_dim, xx)}
    return Target(spec.y_dim, spec.x_dim, yy, xx, coords)


def check_quantiles(quantiles: ArrayLike, name: str = "quantiles") -> np.ndarray:
    """``quantiles`` as a 1-D float64 array of distinct probabilities strictly inside (0, 1);
    anything else raises :class:`InputError` (a repeated one would give two identical bands)."""
    try:
        q = np.atleast_1d(np.asarray(quantiles, dtype=np.float64))
    except (TypeError, ValueError):
        q = np.array([np.nan])
    if q.ndim != 1 or q.size == 0 or np.any(~(q > 0) | ~(q < 1)):
        raise InputError(f"{name} must be numbers strictly between 0 and 1; got {quantiles}.")
    values, counts = np.unique(q, return_counts=True)
    if np.any(counts > 1):
        raise InputError(f"{name} has repeated values {values[counts > 1].tolist()}; give each "
                         "quantile once.")
    return q


def prediction_dataset(mean: ArrayLike, var_latent: ArrayLike, var_observed: ArrayLike,
                       dims: tuple, coords: dict, *,
                       crs_wkt: str | None = None, spatial_dims: tuple | None = None,
                       extra_dim: str | None = None, extra_coords: dict | None = None,
                       quantiles: ArrayLike | None = None, attrs: dict | None = None,
                       name: str | None = None) -> xr.Dataset:
    """Wrap predictive moments as an ``xr.Dataset``.

    Args:
        mean, var_latent, var_observed: arrays (S, *shape): S slices of the extra dimension
            (S = 1 without one) on a grid (shape (N_y, N_x)) or at points (shape (N*,)).
        dims: names of the trailing dimensions, e.g. ``("y", "x")`` or ``("point",)``.
        coords: coordinates to attach. crs_wkt: CRS written with rioxarray ``write_crs``.
        spatial_dims: (y_dim, x_dim) registered with rioxarray (grids).
        extra_dim, extra_coords: the extra dimension and its coordinates.
        quantiles: probabilities in (0, 1), or None.
        attrs, name: the input's attributes and name (``units`` goes to every variable).

    Returns:
        Dataset with ``mean``; ``std`` (of a new observation, noise included); ``std_latent``;
        and ``quantiles`` (dims ``quantile, ...``) of a new observation when asked for.
    """
    # lazy: ~0.3 s to import, and only quantiles need it
    from scipy.stats import norm  # noqa: PLC0415

    dims = ((extra_dim,) if extra_dim else ()) + tuple(dims)

    def squeeze(a):  # numpy, or dask (a lazy prediction stays lazy)
        a = a if hasattr(a, "dask") else np.asarray(a)
        return a if extra_dim else a[0]

    std = np.sqrt(np.maximum(var_observed, 0.0))
    base = dict(attrs or {})
    label = name or base.get("long_name") or "value"
    units = base.get("units")
    data = {
        "mean": (dims, squeeze(mean), {"long_name": f"predictive mean of {label}"}),
        "std": (dims, squeeze(std), {"long_name": f"predictive std of a new observation of "
                                                  f"{label} (noise included)"}),
        "std_latent": (dims, squeeze(np.sqrt(np.maximum(var_latent, 0.0))),
                       {"long_name": f"predictive std of the noise-free {label}"}),
    }
    coords = {**coords, **(extra_coords or {})}
    if quantiles is not None:
        q = check_quantiles(quantiles)
        z = norm.ppf(q).reshape((-1,) + (1,) * len(dims))
        qv = squeeze(mean)[None] + z * squeeze(std)[None]
        data["quantiles"] = (("quantile", *dims), qv,
                             {"long_name": f"quantiles of a new observation of {label}"})
        coords["quantile"] = xr.Variable("quantile", q)
    for v in data.values():
        if units:
            v[2]["units"] = units
    # the input's description (long_name, source, ...) stays on the Dataset: GeoTIFF tags and
    # NetCDF global attributes; units go to the variables
    ds = xr.Dataset(data, coords=coords, attrs={k: v for k, v in base.items() if k != "units"})
    if spatial_dims is not None:
        ds = ds.rio.set_spatial_dims(y_dim=spatial_dims[0], x_dim=spatial_dims[1])
    if crs_wkt:
        ds = ds.rio.write_crs(crs_wkt)
    return ds
