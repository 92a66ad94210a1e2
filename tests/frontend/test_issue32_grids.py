"""Issue #32, hardening round 2 (misleading messages): rotated or sheared GeoTIFFs and
curvilinear NetCDF are refused with their real cause and the fix, not "dimension 'y' has no
coordinates"; a rotated ``like=`` grid is no longer read as rows and columns numbered 0, 1, …"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import rasterio
import xarray as xr
from rasterio.transform import Affine

import geogp
from geogp.cli import main
from geogp.exceptions import IrregularGridError
from geogp.frontend.io import open_raster


def _write(path, transform, ny=12, nx=15):
    z = np.random.default_rng(0).standard_normal((ny, nx)).astype("float32")
    with rasterio.open(path, "w", driver="GTiff", width=nx, height=ny, count=1,
                       dtype="float32", crs="EPSG:32633", transform=transform) as dst:
        dst.write(z, 1)
    return str(path)


ROTATED = Affine.translation(3e5, 5e6) * Affine.rotation(20) * Affine.scale(100, -100)
SHEARED = Affine(100.0, 15.0, 3e5, 0.0, -100.0, 5e6)


def _curvilinear(dims=("y", "x")):
    j, i = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    lat, lon = 40 + 0.1 * j + 0.02 * i, 10 + 0.03 * j + 0.1 * i
    return xr.DataArray(np.arange(42.0).reshape(6, 7), dims=dims, name="t",
                        coords={"lat": (dims, lat), "lon": (dims, lon)})


@pytest.mark.parametrize("transform", [ROTATED, SHEARED], ids=["rotated", "sheared"])
def test_issue32_grids_rotated_geotiff_names_the_transform(tmp_path, transform):
    da = open_raster(_write(tmp_path / "r.tif", transform))
    with pytest.raises(IrregularGridError, match=r"rotated or sheared .*gdalwarp") as info:
        geogp.fit(da)
    assert "has no coordinates" not in str(info.value)


@pytest.mark.parametrize("dims", [("y", "x"), ("nj", "ni")])
def test_issue32_grids_curvilinear_names_the_2d_coordinates(dims):
    with pytest.raises(IrregularGridError, match=r"curvilinear grid: its coordinates "
                       r"\['lat', 'lon'\] are 2-D.*Regrid"):
        geogp.fit(_curvilinear(dims))


def test_issue32_grids_rotated_like_grid_is_refused(tmp_path):
    """A rotated --like grid was read with row and column numbers as coordinates."""
    like = open_raster(_write(tmp_path / "r.tif", ROTATED))
    table = pd.DataFrame({"x": 3e5 + 50.0 * np.arange(10), "y": 5e6 - 70.0 * np.arange(10),
                          "value": np.sin(np.arange(10.0))})
    with pytest.raises(IrregularGridError, match="rotated or sheared"):
        geogp.fit(table, crs=32633, grid=like)


def test_issue32_grids_cli_rotated_one_line(tmp_path, capsys):
    path = _write(tmp_path / "r.tif", ROTATED)
    assert main(["fit", path, "--out", str(tmp_path / "o.tif")]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and "rotated or sheared" in err[0] and "gdalwarp" in err[0], err


def test_issue32_grids_north_up_and_plain_arrays_unchanged(tmp_path):
    """A north-up GeoTIFF still opens as before; an array without any coordinates still gets
    the plain advice."""
    da = open_raster(_write(tmp_path / "n.tif", Affine(100.0, 0, 3e5, 0, -100.0, 5e6)))
    g = geogp.frontend.adapters.to_grid_data(da)
    assert g.regular and g.values.shape == (1, 12, 15)
    bare = xr.DataArray(np.ones((5, 6)), dims=("y", "x"))
    with pytest.raises(geogp.exceptions.InputError, match="'y' has no coordinates"):
        geogp.frontend.adapters.to_grid_data(bare)
