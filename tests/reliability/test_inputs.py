"""Bad input gets one clear line, never garbage: dtypes, damaged rasters, misused calls."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin

import geogp
from geogp.exceptions import InputError, ReadError


def _da(values):
    ny, nx = values.shape
    return xr.DataArray(values, dims=("y", "x"),
                        coords={"y": np.arange(ny, 0, -1.0), "x": np.arange(nx) * 1.0}
                        ).rio.write_crs(32633)


@pytest.mark.parametrize("values, match", [
    (np.ones((6, 7)) + 1j, "complex"),
    (np.ones((6, 7), dtype=bool), "boolean"),
    (np.full((6, 7), "a"), "real numbers"),
])
def test_non_real_rasters_are_refused(values, match):
    with pytest.raises(InputError, match=match):
        geogp.fit(_da(values), n_features=16, maxiter=2)


def _write_tif(path, ny=300, nx=400):
    data = np.arange(ny * nx, dtype=np.float32).reshape(ny, nx)
    with rasterio.open(path, "w", driver="GTiff", height=ny, width=nx, count=1,
                       dtype="float32", crs="EPSG:32633",
                       transform=from_origin(0, ny, 1, 1)) as dst:
        dst.write(data, 1)
    return data


@pytest.mark.parametrize("damage", ["truncate", "scramble"])
def test_damaged_geotiff_is_refused_on_open(tmp_path, damage):
    path = tmp_path / "in.tif"
    _write_tif(path)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    else:  # overwrite the strip offsets area and the data with garbage
        rng = np.random.default_rng(0)
        raw[8:] = rng.integers(0, 256, len(raw) - 8, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(raw))
    with pytest.raises(ReadError) as info:
        geogp.open_raster(path)
    assert "\n" not in str(info.value)


def test_intact_geotiff_reads_back(tmp_path):
    path = tmp_path / "ok.tif"
    data = _write_tif(path, 20, 30)
    np.testing.assert_array_equal(geogp.open_raster(path).values, data)


def test_misused_calls_say_what_to_do(tmp_path):
    z = np.add.outer(np.sin(np.arange(10.0) / 3), np.cos(np.arange(12.0) / 4))
    model = geogp.fit(_da(z), n_features=16, maxiter=3)
    with pytest.raises(InputError, match="like= must be an xarray"):
        model.predict(like=np.zeros((10, 12)))
    pred = model.predict()
    with pytest.raises(InputError, match="Dataset returned by predict"):
        geogp.write_geotiff(pred["mean"], tmp_path / "p.tif")
    assert not (tmp_path / "p.tif").exists()
