"""xarray / pandas ⇄ numpy adapters: the one border between geodata and the numerical core.

Everything that knows about DataArrays, CRSs, nodata values and coordinate names lives here
(docs/model.md "xarray adapters"; STYLE.md §3 "xarray only at the edges"). The core sees numpy or
dask arrays in *model coordinates*:

- the model's input dimensions are always ordered (y, x), the raster's row-major order;
- projected CRSs (and rasters without a CRS) are used as planar coordinates, unchanged;
- **geographic CRSs** (longitude/latitude in degrees, e.g. EPSG:4326): longitude is multiplied
  by cos(φ̄), φ̄ the mean latitude of the grid (or of the points), so that one unit is about one
  degree of latitude (≈ 111.2 km) along both axes and distances are isotropic. Lengthscales of
  geographic inputs are therefore reported in *degrees of latitude*, and converted to km
  (× 111.195) in summaries. This local equirectangular scaling is accurate while the data span a
  few degrees of latitude (the scale error at latitude φ is cos φ / cos φ̄ − 1).

Normalisers (STYLE.md guideline 11): :func:`as_crs` for anything CRS-like,
:func:`find_spatial_dims` for the (y, x) dimension names, :func:`check_axis` for coordinates
(monotone, no duplicates; regular or not), :func:`~geogp.frontend.nodata.masked_values` for nodata
(:mod:`geogp.frontend.nodata`). Tables of points are read by :mod:`geogp.frontend.points`; the way
back, from arrays to ``xr.Dataset`` predictions, is :mod:`geogp.frontend.outputs`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import rioxarray  # noqa: F401  (registers the .rio accessor used below)
import xarray as xr
from rioxarray.crs import crs_from_user_input

from geogp.core.grid_checks import require_axes, spacing_variation, unsupported_grid_message
from geogp.core.validation import user_stacklevel, warn_if_degrees_in_projected_crs
from geogp.exceptions import (
    AllMissingError,
    InputError,
    IrregularGridError,
    MissingCRSWarning,
)
from geogp.frontend.nodata import masked_values

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike
    from rasterio.crs import CRS

__all__ = [
    "KM_PER_DEGREE",
    "GridSpec",
    "GridData",
    "as_crs",
    "find_spatial_dims",
    "check_axis",
    "resolve_spec",
    "select_variable",
    "to_grid_data",
    "to_xy",
]

KM_PER_DEGREE = math.pi * 6371.0088 / 180.0  # one degree of latitude on the mean Earth sphere

_Y_NAMES = ("y", "lat", "latitude", "northing", "rlat", "nav_lat")
_X_NAMES = ("x", "lon", "long", "longitude", "easting", "rlon", "nav_lon")
_Y_STANDARD = ("latitude", "projection_y_coordinate", "grid_latitude")
_X_STANDARD = ("longitude", "projection_x_coordinate", "grid_longitude")
_LAT_NAMES = ("lat", "latitude", "nav_lat")


# --------------------------------------------------------------------------- normalisers
def as_crs(crs_like: Any) -> CRS | None:
    """Return a :class:`rasterio.crs.CRS` for any CRS-like input (EPSG int/str, WKT, pyproj CRS).

    ``None`` stays ``None``. Raises :class:`InputError` for input that is not a CRS.
    """
    if crs_like is None:
        return None
    try:
        return crs_from_user_input(crs_like)
    except Exception as err:  # rasterio/pyproj raise several types
        raise InputError(
            f"could not understand the CRS {crs_like!r} ({err}); pass e.g. 'EPSG:32633', 4326 or "
            "a WKT string."
        ) from err


def _cf_axis(coord: xr.DataArray) -> str | None:
    attrs = coord.attrs
    axis = str(attrs.get("axis", "")).upper()
    std = str(attrs.get("standard_name", "")).lower()
    units = str(attrs.get("units", "")).lower()
    if axis == "Y" or std in _Y_STANDARD or units in ("degrees_north", "degree_north"):
        return "y"
    if axis == "X" or std in _X_STANDARD or units in ("degrees_east", "degree_east"):
        return "x"
    return None


def find_spatial_dims(obj: xr.DataArray | xr.Dataset) -> tuple[str, str]:
    """Names of the (y, x) dimensions of a DataArray or Dataset.

    Looked up in order: rioxarray's spatial dims, CF attributes (``axis``, ``standard_name``,
    ``units`` degrees_north/east), then usual names (y/x, lat/lon, latitude/longitude, ...).
    """
    found: dict[str, str] = {}
    try:
        found = {"y": obj.rio.y_dim, "x": obj.rio.x_dim}
    except Exception:  # rioxarray raises MissingSpatialDimensionError
        found = {}
    if set(found) != {"y", "x"} or not all(v in obj.dims for v in found.values()):
        found = {}
        for dim in obj.dims:
            if dim in obj.coords:
                kind = _cf_axis(obj.coords[dim])
                if kind and kind not in found:
                    found[kind] = dim
        for kind, names in (("y", _Y_NAMES), ("x", _X_NAMES)):
            if kind not in found:
                for dim in obj.dims:
                    if str(dim).lower() in names and dim not in found.values():
                        found[kind] = dim
                        break
    if set(found) != {"y", "x"} or found["y"] == found["x"]:
        grid = [d for d in obj.dims if d != "band"]
        why = unsupported_grid_message(obj, grid) if len(grid) == 2 else ""
        if why:
            raise IrregularGridError(why)
        raise InputError(
            f"could not find the two spatial dimensions among {list(obj.dims)}; expected names "
            "such as ('y', 'x') or ('lat', 'lon'), or CF attributes axis='Y'/'X'. Rename them "
            "(da.rename(...)) or call da.rio.set_spatial_dims(x_dim=..., y_dim=...)."
        )
    return found["y"], found["x"]


def check_axis(values: ArrayLike, name: str, min_size: int = 2) -> tuple[np.ndarray, bool]:
    """Validate one coordinate vector; return it as float64 and whether it is regularly spaced.

    Raises :class:`IrregularGridError` for non-finite, duplicated or non-monotonic coordinates.
    Regular means constant spacing within rtol 1e-9 (docs/model.md), or within the rounding of the
    coordinates' own dtype (float32 coordinates from files are accepted as regular).
    Inputs need ``min_size`` = 2 values; a prediction target may have a single one.
    """
    raw = np.asarray(values)
    if raw.ndim != 1:
        raise IrregularGridError(f"coordinate {name!r} must be 1-D; got shape {raw.shape}.")
    if not np.issubdtype(raw.dtype, np.number):
        raise IrregularGridError(
            f"coordinate {name!r} must be numeric; got dtype {raw.dtype}. Spatial coordinates "
            "are numbers (metres, degrees...)."
        )
    a = raw.astype(np.float64)
    if not np.all(np.isfinite(a)):
        raise IrregularGridError(f"coordinate {name!r} contains NaN/inf values.")
    if a.size < min_size:
        raise InputError(
            f"coordinate {name!r} has {a.size} value(s); a raster needs at least {min_size} "
            "cells along each spatial dimension."
        )
    if a.size == 1:
        return a, True
    step = np.diff(a)
    if np.any(step == 0):
        i = int(np.flatnonzero(step == 0)[0])
        raise IrregularGridError(
            f"coordinate {name!r} has duplicated values (e.g. {a[i]!r} at positions {i} and "
            f"{i + 1}); drop duplicates first (da.drop_duplicates({name!r}))."
        )
    if not (np.all(step > 0) or np.all(step < 0)):
        _refuse_wrapped_longitudes(a, name)
        raise IrregularGridError(
            f"coordinate {name!r} is not monotonic; sort it first (da.sortby({name!r}))."
        )
    eps = np.finfo(raw.dtype).eps if np.issubdtype(raw.dtype, np.floating) else 0.0
    tol = max(1e-9 * abs(step.mean()), 8 * eps * float(np.abs(a).max()))
    regular = bool(np.all(np.abs(step - step.mean()) <= tol))
    return a, regular


def _refuse_wrapped_longitudes(a: np.ndarray, name: str) -> None:
    """Raise :class:`IrregularGridError` when ``a`` is a monotonic run of longitudes cut by one
    360° jump (e.g. 179.5, -179.5 across the antimeridian): sorting would put its two sides
    360° apart; the fix is a continuous range."""
    if a.min() < -180.0 or a.max() > 360.0 or np.ptp(a) <= 180.0:
        return
    for shifted, how in ((a % 360.0, f"da[{name!r}] % 360, i.e. 0..360"),
                         ((a + 180.0) % 360.0 - 180.0, f"(da[{name!r}] + 180) % 360 - 180, "
                                                       "i.e. -180..180")):
        step = np.diff(shifted)
        if np.all(step > 0) or np.all(step < 0):
            i = int(np.flatnonzero(np.abs(np.diff(a)) > 180.0)[0])
            raise IrregularGridError(
                f"coordinate {name!r} looks like longitudes that wrap around at positions {i} "
                f"and {i + 1} ({a[i]:g} then {a[i + 1]:g}); sorting would put the two sides "
                f"360° apart. Make it continuous instead: da.assign_coords({name}={how}).")


def select_variable(obj: xr.DataArray | xr.Dataset, var: str | None = None) -> xr.DataArray:
    """The DataArray to model: ``obj`` itself, or one variable of a Dataset.

    A Dataset with one data variable needs no ``var``; otherwise ``var`` must name one, and an
    unknown name raises :class:`InputError` listing the variables.
    """
    if isinstance(obj, xr.DataArray):
        if var is not None and obj.name is not None and var != obj.name:
            raise InputError(f"variable {var!r} not found; the DataArray is named {obj.name!r}.")
        return obj
    if not isinstance(obj, xr.Dataset):
        raise InputError(
            f"expected an xarray DataArray or Dataset; got {type(obj).__name__}. Scattered points "
            "go in a table (pandas DataFrame) with x, y and value columns."
        )
    names = [str(n) for n in obj.data_vars]
    if var is None:
        if len(names) != 1:
            raise InputError(
                f"the dataset has {len(names)} data variables {names}; choose one with var=NAME "
                "(CLI: --var NAME)."
            )
        var = names[0]
    if var not in obj.data_vars:
        raise InputError(f"variable {var!r} not found; the dataset has {names}.")
    return obj[var]


# --------------------------------------------------------------------------- specification
@dataclass(frozen=True)
class GridSpec:
    """How model coordinates relate to the user's (the CRS treatment of docs/model.md).

    Attributes:
        y_dim, x_dim: names of the spatial dimensions (or point-table columns).
        crs_wkt: the CRS as WKT, or None when the data carry none.
        geographic: the CRS is geographic (longitude/latitude in degrees).
        lon_scale: factor applied to x in model coordinates: cos(mean latitude) when
            geographic, 1 otherwise.
        assumed: what was assumed when the CRS was missing ("" when it was given).
    """

    y_dim: str
    x_dim: str
    crs_wkt: str | None
    geographic: bool
    lon_scale: float = 1.0
    assumed: str = ""

    @property
    def crs(self) -> CRS | None:
        """The CRS as :class:`rasterio.crs.CRS`, or None."""
        return as_crs(self.crs_wkt) if self.crs_wkt else None

    @property
    def units(self) -> str:
        """Units of lengthscales in model coordinates."""
        if self.geographic:
            return "degrees of latitude"
        crs = self.crs
        if crs is not None:
            unit = crs.linear_units or ""
            return unit if unit and unit.lower() != "unknown" else "CRS units"
        return "coordinate units"

    def to_model(self, y: ArrayLike, x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Model coordinates (y, x·lon_scale) of user coordinates."""
        return np.asarray(y, dtype=np.float64), np.asarray(x, dtype=np.float64) * self.lon_scale


def resolve_spec(crs_arg: Any, obj: xr.DataArray | xr.Dataset | None, y_name: str, x_name: str,
                 lat_values: ArrayLike, x_values: ArrayLike | None = None) -> GridSpec:
    """The :class:`GridSpec` of data whose (y, x) coordinates are named ``y_name``, ``x_name``.

    The CRS is ``crs_arg``, else ``obj.rio.crs``; without one a :class:`MissingCRSWarning`
    says what was assumed (geographic for latitude-like names or CF units, else planar).
    Geographic CRSs get ``lon_scale`` = cos(mean of ``lat_values``). With ``x_values``, a
    projected CRS whose coordinates look like degrees gives a
    :class:`~geogp.exceptions.GeographicCoordinatesWarning`.
    """
    crs = as_crs(crs_arg)
    if crs is None and obj is not None:
        try:
            crs = obj.rio.crs
        except Exception:
            crs = None
    assumed = ""
    if crs is None:
        coords = getattr(obj, "coords", {})
        attrs = coords[y_name].attrs if y_name in coords else {}
        looks_geo = (str(y_name).lower() in _LAT_NAMES or str(attrs.get("units", "")).lower()
                     in ("degrees_north", "degree_north")
                     or str(attrs.get("standard_name", "")) == "latitude")
        if looks_geo:
            assumed = (f"no CRS found; the coordinates ({y_name!r}, {x_name!r}) look like "
                       "latitude/longitude, so geogp assumed a geographic CRS (degrees, "
                       "EPSG:4326 axes) and scaled longitude by cos(latitude).")
        else:
            assumed = (f"no CRS found; geogp assumed planar coordinates: ({y_name!r}, {x_name!r}) "
                       "are used as they are, distances in coordinate units. Set the CRS with "
                       "da.rio.write_crs(...) (or crs=...) if that is wrong.")
        warnings.warn(assumed, MissingCRSWarning, stacklevel=user_stacklevel())
        geographic = bool(looks_geo)
        wkt = None
    else:
        geographic = bool(crs.is_geographic)
        wkt = crs.to_wkt()
        if x_values is not None:
            warn_if_degrees_in_projected_crs(crs, lat_values, x_values,
                                             stacklevel=user_stacklevel() + 1)
    lon_scale = 1.0
    if geographic:
        lat = np.asarray(lat_values, dtype=np.float64)
        lat = lat[np.isfinite(lat)]
        if lat.size == 0 or np.abs(lat).max() > 90:
            raise InputError(
                f"geographic CRS but the latitudes ({y_name!r}) are not within [-90, 90]; check "
                "the CRS and the coordinate order."
            )
        lon_scale = float(np.cos(np.deg2rad(lat.mean())))
    return GridSpec(str(y_name), str(x_name), wkt, geographic, lon_scale, assumed)


# --------------------------------------------------------------------------- grids
@dataclass
class GridData:
    """A raster ready for the core.

    Attributes:
        values: (S, N_y, N_x) float64 numpy or dask array, NaN = missing (S slices of the
            extra dimension; S = 1 without one).
        y, x: (N_y,), (N_x,) user coordinates. axes: [y, x·lon_scale] model coordinates,
            idealised to exact regular spacing when ``regular``.
        regular: both axes are regularly spaced (the fast grid path applies).
        spec: the :class:`GridSpec`. extra_dim: name of the extra dimension or None.
        coords: spatial and scalar coordinates (e.g. ``spatial_ref``) to copy to predictions.
        extra_coords: coordinates along the extra dimension.
        attrs, name: the input's attributes (nodata keys removed) and name.
        x_first: the input had its x dimension before its y dimension (predictions follow).
        spacing: (y, x) the largest relative deviation of each axis's steps from their mean
            (:func:`~geogp.core.grid_checks.spacing_variation`; 0 along a regular axis).
    """

    values: object
    y: np.ndarray
    x: np.ndarray
    axes: list
    regular: bool
    spec: GridSpec
    extra_dim: str | None = None
    coords: dict = field(default_factory=dict)
    extra_coords: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    name: str | None = None
    x_first: bool = False
    spacing: tuple[float, float] = (0.0, 0.0)

    @property
    def n_slices(self) -> int:
        return int(self.values.shape[0])


_NODATA_KEYS = ("_FillValue", "missing_value", "nodata", "scale_factor", "add_offset")


def _ideal(a: np.ndarray) -> np.ndarray:
    return a[0] + (a[-1] - a[0]) / (a.size - 1) * np.arange(a.size)


def _keep_coords(da: xr.DataArray, dims: set, need: str | None = None) -> dict:
    """Coordinates of ``da`` on ``dims`` only (scalars such as spatial_ref included), or, with
    ``need``, those that involve dimension ``need``."""
    return {k: v.variable for k, v in da.coords.items()
            if set(v.dims) <= dims and (need is None or need in v.dims)}


def to_grid_data(da: xr.DataArray | xr.Dataset, *, var: str | None = None, crs: Any = None,
                 nodata: float | None = None) -> GridData:
    """Translate a raster DataArray (or one variable of a Dataset) for the core.

    Args:
        da: DataArray with two spatial dimensions and at most one extra dimension (time,
            band...); a singleton ``band`` dimension (GeoTIFF) is squeezed. numpy- or
            dask-backed. Missing cells are NaN or the nodata value (see :func:`masked_values`).
        var: variable name when ``da`` is a Dataset.
        crs: CRS override (anything :func:`as_crs` accepts); default ``da.rio.crs``. Without
            any CRS a :class:`MissingCRSWarning` says what was assumed.
        nodata: nodata override.

    Returns:
        :class:`GridData` with values of shape (S, N_y, N_x).
    """
    da = select_variable(da, var)
    if "band" in da.dims and da.sizes["band"] == 1:
        da = da.squeeze("band", drop=True)
    if da.ndim < 2:
        raise InputError(
            f"expected a raster with two spatial dimensions (y, x); got {da.ndim} dimension(s) "
            f"{list(da.dims)}. Scattered points go in a table: geogp.fit(table, x=..., y=..., "
            "value=..., grid=...)."
        )
    y_dim, x_dim = find_spatial_dims(da)
    extra = [d for d in da.dims if d not in (y_dim, x_dim)]
    if len(extra) > 1:
        raise InputError(
            f"expected at most one dimension besides ({y_dim!r}, {x_dim!r}); got {extra} "
            f"(shape {dict(da.sizes)}). Select slices (da.isel(...)) or stack them into one "
            "dimension (da.stack(sample=[...]))."
        )
    require_axes(da, y_dim, x_dim)  # rotated GeoTIFFs, curvilinear grids: says so
    x_first = da.dims.index(x_dim) < da.dims.index(y_dim)
    da = da.transpose(*extra, y_dim, x_dim)
    y, reg_y = check_axis(da[y_dim].values, y_dim)
    x, reg_x = check_axis(da[x_dim].values, x_dim)
    spec = resolve_spec(crs, da, y_dim, x_dim, y, x)
    vals = masked_values(da, nodata).data
    if not extra:
        vals = vals[None]
    if isinstance(vals, np.ndarray):
        if np.isinf(vals).any():
            raise InputError(
                f"the raster {da.name or ''!s} contains {int(np.isinf(vals).sum())} infinite "
                "value(s); replace them by NaN (missing) or finite numbers."
            )
        if not np.isfinite(vals).any():
            raise AllMissingError(
                "every cell of the raster is missing (NaN or nodata); there is nothing to fit. "
                "Check the nodata value and the variable."
            )
    elif not bool(np.isfinite(vals).any().compute()):  # dask: one cheap reduction, so that
        raise AllMissingError(                         # the error is the right one
            "every cell of the raster is missing (NaN or nodata); there is nothing to fit."
        )
    regular = reg_y and reg_x
    my, mx = spec.to_model(_ideal(y) if regular else y, _ideal(x) if regular else x)
    attrs = {k: v for k, v in da.attrs.items() if k not in _NODATA_KEYS}
    extra_dim = extra[0] if extra else None
    extra_coords = _keep_coords(da, {extra_dim}, extra_dim) if extra_dim else {}
    spacing = (0.0 if reg_y else spacing_variation(y), 0.0 if reg_x else spacing_variation(x))
    return GridData(vals, y, x, [my, mx], regular, spec, extra_dim,
                    _keep_coords(da, {y_dim, x_dim}), extra_coords, attrs, da.name, x_first,
                    spacing)


def to_xy(da: xr.DataArray | xr.Dataset, *, var: str | None = None, crs: Any = None,
          nodata: float | None = None) -> tuple[np.ndarray, np.ndarray, GridSpec, bool]:
    """Flatten a 2-D raster to scattered points (docs/model.md ``to_xy``).

    Returns:
        ``(X, y, spec, complete)``: X (N, 2) observed cells in model coordinates, ordered
        (y, x); y (N,) their values; the :class:`GridSpec`; and whether the observed cells form
        a complete regular grid (no missing cell, constant spacing), the condition of docs/afs.md
        (gridded data). Rasters with an extra dimension are refused: select a slice first.
    """
    g = to_grid_data(da, var=var, crs=crs, nodata=nodata)
    if g.n_slices != 1 or g.extra_dim is not None:
        raise InputError(f"to_xy needs a 2-D raster; got the extra dimension {g.extra_dim!r}. "
                         "Select a slice first (da.isel(...)).")
    v = np.asarray(g.values[0], dtype=np.float64)
    obs = np.isfinite(v)
    iy, ix = np.nonzero(obs)
    X = np.stack([g.axes[0][iy], g.axes[1][ix]], axis=1)
    return X, v[obs], g.spec, bool(g.regular and obs.all())


def is_time_axis(g: GridData) -> bool:
    """Whether the extra dimension of ``g`` is time: named ``time``, or with datetime
    coordinates."""
    if g.extra_dim is None:
        return False
    coord = g.extra_coords.get(g.extra_dim)
    dated = coord is not None and np.issubdtype(np.asarray(coord.values).dtype, np.datetime64)
    return dated or str(g.extra_dim).lower() == "time"


def date_words(value: np.datetime64) -> str:
    """A date as a person writes it: YYYY-MM-DD at midnight, ISO 8601 otherwise."""
    stamp = pd.Timestamp(value)
    return str(stamp.date()) if stamp == stamp.normalize() else stamp.isoformat()


def series_times(g: GridData) -> np.ndarray | None:
    """The dates of a stack in days since its first, when its extra dimension is time (named
    ``time``, or with datetime coordinates); numeric time coordinates are taken as days. None
    for a 2-D raster or another extra dimension (bands...).

    Raises:
        InputError: the dates are not strictly increasing (unsorted, duplicated, a step of 0).
    """
    if g.n_slices < 2 or not is_time_axis(g):
        return None
    coord = g.extra_coords.get(g.extra_dim)
    values = None if coord is None else np.asarray(coord.values)
    dated = values is not None and np.issubdtype(values.dtype, np.datetime64)
    if values is None:
        return np.arange(g.n_slices, dtype=np.float64)
    if dated:
        days = (values - values[0]) / np.timedelta64(1, "D")
    elif np.issubdtype(values.dtype, np.number):
        days = values.astype(np.float64) - float(values[0])
    else:
        raise InputError(f"the {g.extra_dim!r} coordinate must hold dates or numbers (days); "
                         f"got {values.dtype}.")
    step = np.diff(days)
    if not np.all(step > 0):
        bad = int(np.flatnonzero(~(step > 0))[0])
        what = "repeats" if step[bad] == 0 else "goes back"
        raise InputError(f"the dates along {g.extra_dim!r} must increase strictly; date "
                         f"{bad + 1} ({values[bad + 1]}) {what} after date {bad} "
                         f"({values[bad]}). Sort them (da.sortby({g.extra_dim!r})) and drop "
                         "duplicates.")
    return days
