"""Scattered observations: tables of points (pandas, GeoPandas, dicts of arrays) for the core.

The point-table counterpart of :func:`geogp.frontend.adapters.to_grid_data`: the same CRS treatment
(:class:`~geogp.frontend.adapters.GridSpec`, longitude scaled by cos(latitude) for geographic CRSs)
and the same model coordinates, ordered (y, x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd  # xarray's dependency, loaded with geogp.frontend.adapters

from geogp.exceptions import AllMissingError, InputError
from geogp.frontend.adapters import GridSpec, find_spatial_dims, resolve_spec

if TYPE_CHECKING:  # annotations only
    import xarray as xr
    from numpy.typing import ArrayLike

__all__ = ["PointData", "non_numeric_positions", "to_point_data"]


@dataclass
class PointData:
    """Scattered observations for the core: X (N, 2) in model (y, x) order, values (N,)."""

    X: np.ndarray
    values: np.ndarray
    spec: GridSpec
    name: str | None = None


def _column(table, name: str) -> np.ndarray:
    try:
        col = table[name]
    except (KeyError, IndexError, TypeError) as err:
        cols = list(getattr(table, "columns", getattr(table, "keys", lambda: [])()))
        raise InputError(f"column {name!r} not found; the table has {cols}.") from err
    try:
        return np.asarray(col, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        pass
    raw = np.asarray(col, dtype=object).ravel()
    bad = non_numeric_positions(raw)
    if bad.size:
        i, v = int(bad[0]), raw[bad[0]]
        label = list(getattr(col, "index", range(raw.size)))[i]
        comma = " (a decimal comma? write 12.5, or read the CSV with decimal=',')" if (
            isinstance(v, str) and "," in v) else ""
        raise InputError(f"column {name!r} holds {v!r} at row {label!r}, which is not "
                         f"a number{comma}; every value must be numeric (NaN or an empty "
                         "cell marks a missing one).")
    raise InputError(f"column {name!r} cannot be read as numbers (dtype {raw.dtype}).")


def non_numeric_positions(values: ArrayLike) -> np.ndarray:
    """Positions (int64, ascending) of the entries of a 1-D sequence that are neither numbers
    nor missing (None, NaN, pandas' NA): text such as ``"n/a"`` or ``"12,5"``."""
    raw = np.asarray(values, dtype=object).ravel()
    bad = []
    for i, v in enumerate(raw):
        if v is None or v is pd.NA:
            continue
        try:
            float(v)
        except (TypeError, ValueError):
            bad.append(i)
    return np.asarray(bad, dtype=np.int64)


def _continuous_longitudes(xs: np.ndarray, grid) -> np.ndarray:
    """Longitudes that are continuous across the antimeridian, where the data need it.

    With a target ``grid``, each point is moved by a multiple of 360° to within 180° of the
    grid's central longitude (its own convention, -180..180 or 0..360). Without one, points
    that span more than 180° but less across the antimeridian (179.5 ... -179.5) are refused:
    they would be treated as 359° apart.
    """
    if grid is not None:
        try:
            gx = np.asarray(grid[find_spatial_dims(grid)[1]].values, dtype=np.float64)
        except (InputError, KeyError):
            gx = np.array([])
        if gx.size:
            centre = 0.5 * (np.nanmin(gx) + np.nanmax(gx))
            turns = np.floor((xs - centre + 180.0) / 360.0)  # 0 for most: xs kept bit for bit
            return xs - 360.0 * turns
    span, wrapped = np.ptp(xs), np.ptp(xs % 360.0)
    if span > 180.0 and wrapped < span:
        raise InputError(
            f"the points' longitudes span {span:.6g}° from {xs.min():.6g} to {xs.max():.6g}, "
            f"but only {wrapped:.6g}° across the antimeridian: as given, neighbours on both "
            "sides of 180° would be 360° apart. Shift them to 0..360 (lon % 360) and predict "
            "on a grid in the same range, or pass the target grid (grid=...), whose longitude "
            "range the points then follow.")
    return xs


def to_point_data(table: pd.DataFrame | dict, *, x: str = "x", y: str = "y",
                  value: str = "value", crs: Any = None,
                  grid: xr.DataArray | xr.Dataset | None = None) -> PointData:
    """Translate a table of points (pandas/GeoPandas DataFrame or dict of arrays).

    A GeoDataFrame's point geometry replaces the ``x``/``y`` columns and its ``crs`` is used.
    Rows with a missing (NaN) value are dropped; NaN/inf coordinates and infinite values raise.
    The CRS comes from ``crs``, the table, or the target ``grid``, in that order.
    """
    geom = getattr(table, "geometry", None)
    if geom is not None and hasattr(geom, "x"):
        xs, ys = np.asarray(geom.x, dtype=np.float64), np.asarray(geom.y, dtype=np.float64)
        crs = crs if crs is not None else getattr(table, "crs", None)
    else:
        xs, ys = _column(table, x), _column(table, y)
    vals = _column(table, value)
    if not (xs.size == ys.size == vals.size):
        raise InputError(f"columns have different lengths: x {xs.size}, y {ys.size}, "
                         f"value {vals.size}.")
    if np.isinf(vals).any():
        raise InputError(f"column {value!r} has {int(np.isinf(vals).sum())} infinite value(s); "
                         "replace them by NaN (missing) or finite numbers.")
    keep = np.isfinite(vals)
    if not keep.any():
        raise AllMissingError(f"every value in column {value!r} is missing (NaN).")
    xs, ys, vals = xs[keep], ys[keep], vals[keep]
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise InputError("point coordinates contain NaN/inf; drop those rows first.")
    if crs is None and grid is not None:
        try:
            crs = grid.rio.crs
        except Exception:
            crs = None
    spec = resolve_spec(crs, None if crs is not None else grid, y, x, ys, xs)
    if spec.geographic:
        xs = _continuous_longitudes(xs, grid)
    my, mx = spec.to_model(ys, xs)
    return PointData(np.stack([my, mx], axis=1), vals, spec, value)
