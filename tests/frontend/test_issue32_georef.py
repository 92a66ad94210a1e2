"""Issue #32, hardening round 2, item 2 (georeferencing): irregular grids are never written
with a regular transform, antimeridian points make no 360°-wide grid, a too coarse
--resolution and degrees under a projected CRS are caught."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

from geogp.cli import main
from geogp.exceptions import IrregularGridError
from geogp.io import open_raster, write_geotiff, write_netcdf


@pytest.fixture
def no_fit(monkeypatch):
    import geogp.api

    def fit(*args, **kwargs):
        raise AssertionError("the fit should not start")

    monkeypatch.setattr(geogp.api.GeoRegressor, "fit", fit)


def _error_line(capsys):
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("geogp: error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _nonuniform(ny=12, nx=16):
    """A grid whose x steps grow from 50 to 400 m."""
    x = 3e5 + np.concatenate([[0.0], np.cumsum(np.linspace(50.0, 400.0, nx - 1))])
    y = 5e6 - 100.0 * np.arange(ny)
    z = np.sin(x / 900.0)[None, :] + np.cos(y / 700.0)[:, None]
    return xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x},
                        name="h").rio.write_crs(32633)


def test_issue32_geotiff_refuses_nonuniform_x(tmp_path):
    """write_geotiff refuses an irregular grid (its cells would land up to km off); NetCDF
    keeps the coordinates exactly, so it stays allowed."""
    da = _nonuniform()
    pred = xr.Dataset({"mean": da, "std": 0 * da + 0.1}).rio.write_crs(32633)
    with pytest.raises(IrregularGridError, match="NetCDF"):
        write_geotiff(pred, tmp_path / "p.tif")
    assert os.listdir(tmp_path) == []
    back = open_raster(write_netcdf(pred, tmp_path / "p.nc"), var="mean")
    np.testing.assert_array_equal(back.x.values, da.x.values)


def test_issue32_geotiff_refuses_nonuniform_x_before_the_fit(tmp_path, capsys, no_fit):
    nc = tmp_path / "in.nc"
    _nonuniform().to_dataset().to_netcdf(nc, engine="h5netcdf")
    out = tmp_path / "o.tif"
    assert main(["fit", str(nc), "--out", str(out), "--netcdf", str(tmp_path / "o.nc"),
                 "--quiet"]) == 2
    line = _error_line(capsys)
    assert "'x' coordinates are not regularly spaced" in line and "NetCDF" in line
    assert sorted(os.listdir(tmp_path)) == ["in.nc"]
