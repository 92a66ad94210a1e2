"""Scattered observations: tables of points (pandas, GeoPandas, dicts of arrays) for the core.

The point-table counterpart of :func:`geogp.adapters.to_grid_data`: the same CRS treatment
(:class:`~geogp.adapters.GridSpec`, longitude scaled by cos(latitude) for geographic CRSs) and
the same model coordinates, ordered (y, x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geogp.adapters import GridSpec, resolve_spec
from geogp.exceptions import AllMissingError, InputError

__all__ = ["PointData", "to_point_data"]


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
    return np.asarray(col, dtype=np.float64).ravel()


def to_point_data(table, *, x: str = "x", y: str = "y", value: str = "value", crs=None,
                  grid=None) -> PointData:
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
    spec = resolve_spec(crs, None if crs is not None else grid, y, x, ys)
    my, mx = spec.to_model(ys, xs)
    return PointData(np.stack([my, mx], axis=1), vals, spec, value)
