"""Small, named argument checks run before any tracing (STYLE.md guideline 6).

Each raises :class:`geogp.exceptions.InputError` (a ``ValueError``) whose message says what was
expected, what arrived, and how to fix it.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
from numpy.typing import ArrayLike

from geogp.exceptions import GeographicCoordinatesWarning, InputError

__all__ = ["as_points", "as_targets", "check_positive", "check_same_length", "warn_if_lonlat",
           "warn_if_degrees_in_projected_crs", "user_stacklevel"]


def _as_float64(a, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise InputError(f"{name} must be numeric; got an array of dtype {a.dtype}.")
    if np.issubdtype(a.dtype, np.floating) and a.dtype != np.float64:
        warnings.warn(
            f"{name} has dtype {a.dtype}; geogp works in float64 and upcasts it.",
            stacklevel=3,
        )
    return a.astype(np.float64, copy=False)


def as_points(X: ArrayLike, name: str = "X", *, max_dims: int = 3) -> np.ndarray:
    """Return ``X`` as a finite float64 array of shape (N, D) with N ≥ 1 and 1 ≤ D ≤ max_dims."""
    X = _as_float64(X, name)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise InputError(
            f"{name} must have shape (N, D) (one row per point); got ndim={X.ndim} with shape "
            f"{X.shape}. Reshape with X.reshape(-1, D)."
        )
    if X.shape[0] == 0:
        raise InputError(f"{name} is empty (0 points); at least one observation is needed.")
    if not 1 <= X.shape[1] <= max_dims:
        raise InputError(
            f"{name} must have 1 to {max_dims} columns (dimensions); got {X.shape[1]}.")
    bad = ~np.isfinite(X)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise InputError(
            f"{name} contains {bad.sum()} NaN/inf value(s) (first at row {rows[0]}); input "
            "coordinates must be finite. Drop those rows first."
        )
    return X


def as_targets(y: ArrayLike, name: str = "y") -> np.ndarray:
    """Return ``y`` as a finite float64 vector of shape (N,) with N ≥ 1."""
    y = _as_float64(y, name)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise InputError(f"{name} must be a vector of shape (N,); got shape {y.shape}.")
    if y.size == 0:
        raise InputError(f"{name} is empty (0 values); at least one observation is needed.")
    bad = ~np.isfinite(y)
    if bad.any():
        raise InputError(
            f"{name} contains {bad.sum()} NaN/inf value(s) (first at index "
            f"{np.flatnonzero(bad)[0]}); "
            "mark missing cells by dropping them (the xarray adapters treat NaN as missing)."
        )
    return y


def check_same_length(X: np.ndarray, y: np.ndarray, xname: str = "X", yname: str = "y") -> None:
    """Raise unless ``X`` (N, D) and ``y`` (N,) have the same number of rows."""
    if X.shape[0] != y.shape[0]:
        raise InputError(
            f"{xname} has {X.shape[0]} rows but {yname} has {y.shape[0]} values; they must match."
        )


def check_positive(value: ArrayLike, name: str) -> np.ndarray:
    """Return ``value`` as float64 after checking it is finite and strictly positive."""
    v = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise InputError(f"{name} must be finite and > 0; got {value!r}.")
    return v


_LON_NAMES = {"lon", "long", "lng", "longitude", "x_lon"}
_LAT_NAMES = {"lat", "latitude", "y_lat"}


def _lonlat_columns(X, points: np.ndarray):
    """(lon column, lat column) when X looks like degrees, else None (see warn_if_lonlat)."""
    names = [str(c).strip().lower() for c in getattr(X, "columns", [])]
    if len(names) == points.shape[1]:
        lon = [i for i, n in enumerate(names) if n in _LON_NAMES]
        lat = [i for i, n in enumerate(names) if n in _LAT_NAMES]
        if lon and lat:
            return lon[0], lat[0]
    if points.shape[1] != 2 or points.shape[0] < 3:
        return None
    if np.all(points == np.round(points)):  # integer grid indices, not degrees
        return None
    for i, j in ((0, 1), (1, 0)):  # (lon, lat)
        lon, lat = points[:, i], points[:, j]
        span = float(np.ptp(lat))
        if (np.abs(lon).max() <= 180.0 and np.abs(lat).max() <= 90.0
                and abs(float(lat.mean())) >= 20.0 and 0.0 < span <= 40.0):
            return i, j
    return None


def warn_if_lonlat(X: object, points: np.ndarray, estimator: str) -> None:
    """Warn when coordinates given to an array estimator look like longitude/latitude degrees.

    Array estimators treat columns as planar, so a degree of longitude counts as much as a degree
    of latitude, though it is cos(latitude) as long (0.71 at 45°): lengthscales and distances are
    then anisotropic in reality. The front end (``geogp.fit`` with a CRS) scales longitude by
    cos(mean latitude). Detected from column names (lon/lat, longitude/latitude) or, for two
    unnamed non-integer columns, from values within ±180° / ±90° whose latitude column lies at
    ≥ 20° from the equator (where the scale error exceeds 6 %) and spans ≤ 40°.
    """
    found = _lonlat_columns(X, points)
    if found is None:
        return
    i, j = found
    phi = float(np.mean(points[:, j]))
    warnings.warn(
        f"X looks like longitude (column {i}) and latitude (column {j}) in degrees, around "
        f"{abs(phi):.0f}°{'N' if phi >= 0 else 'S'}. {estimator} treats the columns as planar "
        f"coordinates, so a degree of longitude counts as a degree of latitude although it is "
        f"{np.cos(np.deg2rad(phi)):.2f} times as long there. Project the points first (pyproj), "
        "or fit a table or DataArray with geogp.fit(..., crs='EPSG:4326'), which scales "
        "longitude by cos(latitude). If the columns are planar coordinates, ignore this warning "
        "(category geogp.exceptions.GeographicCoordinatesWarning).",
        GeographicCoordinatesWarning, stacklevel=3)


def warn_if_degrees_in_projected_crs(crs: object, y: ArrayLike, x: ArrayLike,
                                     stacklevel: int = 3) -> None:
    """Warn when coordinates declared in a projected CRS look like longitude/latitude degrees.

    Every x within [-180, 180] and every y within [-90, 90], spanning less than 360 units,
    under a projected CRS (metres, feet): the points or cells would lie within a few hundred
    metres of the projection's origin, far more likely degrees given with the wrong CRS
    (e.g. lon/lat with ``--crs EPSG:32633``). Distances would then be read as metres.
    """
    if crs is None or not getattr(crs, "is_projected", False):
        return
    y = np.asarray(y, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    y, x = y[np.isfinite(y)], x[np.isfinite(x)]
    if y.size == 0 or x.size == 0 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return
    if np.abs(x).max() <= 180.0 and np.abs(y).max() <= 90.0 and np.ptp(x) < 360.0:
        units = getattr(crs, "linear_units", "") or "CRS units"
        warnings.warn(
            f"the coordinates all lie within x [{x.min():g}, {x.max():g}], y [{y.min():g}, "
            f"{y.max():g}], which looks like longitude/latitude in degrees, but the CRS "
            f"{crs.to_string()} is projected (units: {units}): they would be read as "
            f"{units}, a few hundred of them around the projection's origin. If they are "
            "degrees, give their geographic CRS (e.g. EPSG:4326 / --crs EPSG:4326) and "
            "reproject if needed; if they are planar, ignore this warning (category "
            "geogp.exceptions.GeographicCoordinatesWarning).",
            GeographicCoordinatesWarning, stacklevel=stacklevel)


def user_stacklevel() -> int:
    """stacklevel that points a warning at the first frame outside the geogp package."""
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # geogp/
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    return level
