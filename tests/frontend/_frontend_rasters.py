"""Small rasters for the front-end tests (30 × 40 cells: every fit takes well under a second
once JAX has compiled its operations)."""

from __future__ import annotations

import numpy as np
import xarray as xr

FEATURES = 64  # small M keeps each fit fast; the numbers are not what these tests check


def make_raster(ny=30, nx=40, *, seed=0, frac_missing=0.2, crs=32633, dims=("y", "x"),
                origin=(300_000.0, 5_000_000.0), step=100.0):
    """A smooth field plus noise on a north-up grid of ``step`` metres, with random holes."""
    rng = np.random.default_rng(seed)
    x = origin[0] + step * (np.arange(nx) + 0.5)
    y = origin[1] - step * (np.arange(ny) + 0.5)
    X, Y = np.meshgrid(x - x.mean(), y - y.mean())
    z = np.sin(X / (6 * step)) + np.cos(Y / (5 * step)) + 0.05 * rng.standard_normal(X.shape)
    z[rng.random(z.shape) < frac_missing] = np.nan
    da = xr.DataArray(z, dims=dims, coords={dims[0]: y, dims[1]: x}, name="height",
                      attrs={"units": "m", "long_name": "height"})
    if crs is not None:
        da = da.rio.set_spatial_dims(x_dim=dims[1], y_dim=dims[0]).rio.write_crs(crs)
    return da


