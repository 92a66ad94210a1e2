"""Rasters that are not north-up grids: rotated or sheared GeoTIFFs and curvilinear NetCDF;
and how far an axis's spacing is from regular (:func:`spacing_variation`).

geogp needs one coordinate vector per spatial dimension. A GeoTIFF whose transform rotates or
shears its cells has none (rioxarray gives it 2-D ``xc``/``yc`` coordinates instead), and
neither has a curvilinear grid (2-D ``lat``/``lon``, as in swath or ocean-model output). Both
are refused with the real cause and the fix (warp or regrid to a north-up grid), rather than
"dimension 'y' has no coordinates" (issue #32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geogp.exceptions import InputError, IrregularGridError

if TYPE_CHECKING:  # annotations only
    import xarray as xr

__all__ = ["require_axes", "two_dimensional_coords", "rotation_of", "spacing_variation",
           "NEARLY_REGULAR_TOLERANCE"]

# the lattice model fits an axis whose steps differ from their mean by at most this fraction on
# its cells with the mean step, so its distances are off by at most as much (#41: Mercator-like
# and Gaussian latitude grids vary by a few %); beyond it the axis is irregular
NEARLY_REGULAR_TOLERANCE = 0.10

# not da.rio.reproject(): rioxarray recomputes the transform from the coordinates and drops the
# rotation (a 20° rotated test raster came back displaced by 500 m)
_WARP = ("Warp it to a north-up grid first: gdalwarp in.tif north_up.tif (GDAL), or in Python "
         "open it through rasterio.vrt.WarpedVRT(src, crs=src.crs) (rasterio)")


def rotation_of(obj: xr.DataArray | xr.Dataset) -> tuple[float, float, float, float] | None:
    """The transform's (a, b, d, e) when it rotates or shears the cells (b or d ≠ 0), else None."""
    try:
        t = obj.rio.transform(recalc=False)
    except Exception:  # no transform, or none that rioxarray can read
        return None
    if abs(t.b) > 1e-12 * max(abs(t.a), abs(t.e), 1e-300) or \
            abs(t.d) > 1e-12 * max(abs(t.a), abs(t.e), 1e-300):
        return t.a, t.b, t.d, t.e
    return None


def two_dimensional_coords(obj: xr.DataArray | xr.Dataset, dims: Sequence[str]) -> list[str]:
    """Names of the coordinates of ``obj`` that vary along both of ``dims`` (2-D lat/lon...)."""
    dims = set(dims)
    return [str(k) for k, v in obj.coords.items() if len(dims) == 2 and dims <= set(v.dims)]


def unsupported_grid_message(obj: xr.DataArray | xr.Dataset, dims: Sequence[str]) -> str:
    """Why ``obj`` has no 1-D coordinates on ``dims`` and how to fix it; "" when not known."""
    rot = rotation_of(obj)
    if rot is not None:
        a, b, d, e = rot
        return (f"the raster's transform is rotated or sheared (a, b, d, e = {a:.6g}, {b:.6g}, "
                f"{d:.6g}, {e:.6g}; b and d should be 0): its cells are not aligned with the x "
                f"and y axes, so they have no x/y coordinate vectors. {_WARP}.")
    two_d = two_dimensional_coords(obj, dims)
    if two_d:
        return (f"the raster is a curvilinear grid: its coordinates {two_d} are 2-D (one value "
                f"per cell), and geogp needs one coordinate vector per spatial dimension (a "
                f"north-up, rectilinear grid). Regrid it to a regular grid first (e.g. xESMF, "
                f"or gdalwarp with -geoloc for GDAL-readable files), or fit its cells as points: "
                f"a table with x, y and value columns from the 2-D coordinates.")
    return ""


def require_axes(obj: xr.DataArray | xr.Dataset, y_dim: str, x_dim: str) -> None:
    """Refuse ``obj`` unless both spatial dimensions carry coordinates, naming the cause."""
    for dim in (y_dim, x_dim):
        if dim not in obj.coords:
            why = unsupported_grid_message(obj, (y_dim, x_dim))
            if why:
                raise IrregularGridError(why)
            raise InputError(
                f"spatial dimension {dim!r} has no coordinates; assign them "
                f"(da.assign_coords({dim}=...)) or write a transform with rioxarray.")


def spacing(a: Sequence[float] | np.ndarray) -> float:
    """The largest step between neighbouring coordinates (1.0 for a single one)."""
    a = np.asarray(a, float)
    return float(np.abs(np.diff(a)).max()) if a.size > 1 else 1.0


def spacing_variation(a: Sequence[float] | np.ndarray) -> float:
    """The largest relative deviation of the steps of the monotonic axis ``a`` from their mean
    step, ``max |Δa / mean(Δa) − 1|`` (0 for a regular axis or a single coordinate)."""
    step = np.diff(np.asarray(a, dtype=np.float64))
    return float(np.max(np.abs(step / step.mean() - 1.0))) if step.size else 0.0
