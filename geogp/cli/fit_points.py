"""The point inputs of ``geogp fit``: tables (CSV) and vector files of points, and the
prediction grid over them (``--like GRID.tif`` or ``--resolution R``). :mod:`geogp.cli.fit`
imports this module when it runs, not for ``--help``."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import xarray as xr

from geogp.core.memory import check_prediction
from geogp.exceptions import AntimeridianWarning, InputError
from geogp.frontend.adapters import as_crs
from geogp.frontend.io import open_raster
from geogp.frontend.points import non_numeric_positions

if TYPE_CHECKING:  # annotations only
    import argparse

__all__ = ["TABLE_SUFFIXES", "VECTOR_SUFFIXES", "points_grid", "read_table"]


VECTOR_SUFFIXES = (".gpkg", ".geojson", ".json", ".shp", ".fgb")
TABLE_SUFFIXES = (".csv", *VECTOR_SUFFIXES)


def _read_vector(args):
    """A GeoPackage/GeoJSON/shapefile of points as a (x, y, value) table; sets ``args.crs``.

    Needs geopandas (the optional extra ``geogp[vector]``). The file's CRS is used; with
    ``--crs`` too, the points are reprojected to it.
    """
    try:
        import geopandas as gpd
    except ImportError:
        raise InputError(f"reading {args.input!r} needs geopandas: pip install 'geogp[vector]' "
                         "(or pip install geopandas), or export the points to CSV with x, y "
                         "and value columns.") from None
    try:
        gdf = gpd.read_file(args.input)
    except Exception as err:  # fiona/pyogrio raise many types for unreadable files
        raise InputError(f"cannot read {args.input!r} as a vector file: {err}") from None
    if len(gdf) == 0:
        raise InputError(f"{args.input!r} holds no features.")
    kinds = set(gdf.geom_type.dropna())
    if kinds != {"Point"}:
        raise InputError(f"{args.input!r} must hold Point geometries only; it has "
                         f"{sorted(kinds) or 'none'}. Take centroids first if that is meant.")
    if args.value not in gdf.columns:
        cols = [c for c in gdf.columns if c != gdf.geometry.name]
        raise InputError(f"{args.input!r} has no column {args.value!r}; it has {cols[:12]}. "
                         "Name it with --value.")
    if gdf.crs is None and args.crs is None:
        raise InputError(f"{args.input!r} has no CRS; pass --crs (e.g. --crs EPSG:4326).")
    if gdf.crs is None:
        gdf = gdf.set_crs(args.crs)
    elif args.crs is not None:
        gdf = gdf.to_crs(args.crs)
    args.crs = gdf.crs.to_wkt()
    _check_numeric(gdf[args.value], args.value, args.input, feature=True)
    return pd.DataFrame({args.x: gdf.geometry.x.to_numpy(), args.y: gdf.geometry.y.to_numpy(),
                         args.value: pd.to_numeric(gdf[args.value], errors="coerce")})


def read_table(args: argparse.Namespace) -> pd.DataFrame:
    """The points of ``args.input``: a CSV table, or a vector file (:func:`_read_vector`)."""
    if str(args.input).lower().endswith(VECTOR_SUFFIXES):
        return _read_vector(args)
    try:
        table = pd.read_csv(args.input)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read the table {args.input!r}: {err}") from None
    missing = [c for c in (args.x, args.y, args.value) if c not in table.columns]
    if missing:
        raise InputError(f"the table {args.input!r} has no column(s) {missing}; it has "
                         f"{list(table.columns)[:12]}. Name them with --x, --y, --value.")
    for col in (args.x, args.y, args.value):
        _check_numeric(table[col], col, args.input)
    return table


def _check_numeric(column, name: str, path, feature: bool = False) -> None:
    """Refuse text in a column of numbers, naming the column, the value and its line (of a
    CSV) or its feature (of a vector file, ``feature``)."""
    if pd.api.types.is_numeric_dtype(column):
        return
    bad = non_numeric_positions(column.to_numpy(dtype=object))
    if bad.size:
        value = column.iloc[bad[0]]
        comma = (" (a decimal comma? write 12.5, or use ',' only between columns)"
                 if isinstance(value, str) and "," in value else "")
        where = (f"in feature {bad[0] + 1}" if feature else
                 f"on line {bad[0] + 2} (row {bad[0] + 1} after the header)")
        raise InputError(f"column {name!r} of {str(path)!r} holds {value!r} {where}, which is "
                         f"not a number{comma}; {bad.size} such value(s) in all. Leave a cell "
                         "empty to mark a missing value.")


def points_grid(args: argparse.Namespace, table: pd.DataFrame) -> xr.DataArray:
    """The prediction grid of a point table: --like's raster, or --resolution over the points."""
    if args.crs is None:
        raise InputError("a point table needs its CRS: pass --crs (e.g. --crs EPSG:4326).")
    if (args.like is None) == (args.resolution is None):
        raise InputError("a point table needs a prediction grid: pass --like GRID.tif or "
                         "--resolution R (one of them).")
    if args.like is not None:
        return open_raster(args.like)
    r = float(args.resolution)
    if not (np.isfinite(r) and r > 0):
        raise InputError(f"--resolution must be a positive number; got {args.resolution}.")
    xs = np.asarray(table[args.x], dtype=np.float64)
    ys = np.asarray(table[args.y], dtype=np.float64)
    ok = np.isfinite(xs) & np.isfinite(ys)
    if not ok.any():
        raise InputError("the table has no point with finite coordinates.")
    xs = _unwrap_antimeridian(args, table, xs, ok)
    span_x, span_y = np.ptp(xs[ok]), np.ptp(ys[ok])
    nx = int(np.floor(span_x / r)) + 1
    ny = int(np.floor(span_y / r)) + 1
    if nx * ny > 10**8:
        raise InputError(f"--resolution {r} gives a {ny} × {nx} grid; choose a coarser one.")
    if nx < 2 or ny < 2:
        small = min(span_x, span_y)
        advice = (f"Choose a resolution below the smaller span (e.g. {small / 10:.3g}), or "
                  "give a grid with --like." if small > 0 else "The points lie on one line "
                  "(a single x or y value): give a grid with --like.")
        raise InputError(
            f"--resolution {r:g} gives a {ny} × {nx} grid (rows × columns) over points that "
            f"span {span_x:.6g} × {span_y:.6g} (x × y, CRS units); a grid needs at least 2 "
            f"cells along each axis. {advice}")
    # before the grid: the grid itself (a double a cell) and the prediction on it
    check_prediction(ny, nx, 1, len(getattr(args, "quantiles", None) or ()), template=True)
    x = 0.5 * (xs[ok].min() + xs[ok].max()) + r * (np.arange(nx) - 0.5 * (nx - 1))
    y = 0.5 * (ys[ok].min() + ys[ok].max()) - r * (np.arange(ny) - 0.5 * (ny - 1))
    grid = xr.DataArray(np.full((ny, nx), np.nan), dims=("y", "x"), coords={"y": y, "x": x},
                        name=args.value)
    return grid.rio.write_crs(args.crs)


def _unwrap_antimeridian(args, table, xs, ok):
    """Longitudes across the antimeridian (179.5 ... -179.5) shifted to 0..360, in ``table``
    too, so that the grid spans the points' real extent rather than 360°; ``xs`` otherwise."""
    if not as_crs(args.crs).is_geographic:
        return xs
    span, wrapped = np.ptp(xs[ok]), np.ptp(xs[ok] % 360.0)
    if span <= 180.0 or wrapped >= span:
        return xs
    xs = np.where(ok, xs % 360.0, xs)
    table[args.x] = xs
    warnings.warn(f"the points cross the antimeridian: their longitudes span {wrapped:.6g}° "
                  f"that way, not {span:.6g}°; they were shifted to 0..360 and the grid runs "
                  f"from {xs[ok].min():.6g} to {xs[ok].max():.6g}°E.", AntimeridianWarning,
                  stacklevel=2)
    return xs
