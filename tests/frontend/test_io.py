"""GeoTIFF / NetCDF writing and reading: round trips, atomic writes, unreadable files."""

from __future__ import annotations

import os

import numpy as np
import pytest
import rasterio
import xarray as xr

import geogp
from geogp.exceptions import InputError, OutputExistsError, ReadError
from geogp.frontend.io import atomic_path, open_raster, write_geotiff, write_netcdf

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


@pytest.fixture
def pred(raster, fast):
    return geogp.fit(raster, **fast).predict(quantiles=[0.05, 0.95])


def test_geotiff_round_trip(pred, raster, tmp_path):
    path = write_geotiff(pred, tmp_path / "p.tif")
    with rasterio.open(path) as src:
        assert src.count == 2 and src.descriptions == ("mean", "std")
        assert src.crs.to_epsg() == 32633
        assert src.transform == raster.rio.transform()
        assert (src.height, src.width) == raster.shape
        assert np.isnan(src.nodata) and src.dtypes == ("float32", "float32")
        assert src.profile["compress"] == "deflate"
        np.testing.assert_allclose(src.read(1), pred["mean"].values, rtol=1e-6)
        np.testing.assert_allclose(src.read(2), pred["std"].values, rtol=1e-6)


def test_geotiff_optional_bands_and_nodata(pred, tmp_path):
    masked = pred.where(pred["mean"] > 0)  # NaN cells get the nodata value
    path = write_geotiff(masked, tmp_path / "p.tif", latent=True, quantiles=True,
                         nodata=-9999.0, dtype="float64")
    with rasterio.open(path) as src:
        assert src.descriptions == ("mean", "std", "std_latent", "q0.05", "q0.95")
        assert src.nodata == -9999.0
        band = src.read(1)
        np.testing.assert_array_equal(band == -9999.0, np.isnan(masked["mean"].values))
        np.testing.assert_array_equal(src.read(4), masked["quantiles"].sel(quantile=0.05)
                                      .fillna(-9999.0).values)
    back = open_raster(path)  # masked read: nodata → NaN
    assert back.dims == ("band", "y", "x")
    assert int(np.isnan(back[0]).sum()) == int((band == -9999.0).sum()) > 0


def test_lat_lon_named_grids_keep_their_georeferencing(tmp_path):
    """Dims named lat/lon (CF NetCDF): the GeoTIFF and the NetCDF carry the grid's own
    transform and CRS (rioxarray only guesses dims named x/y)."""
    lat, lon = 60.0 - 0.01 * np.arange(30), 10.0 + 0.01 * np.arange(40)
    z = np.sin(50 * lon)[None, :] + np.cos(40 * lat)[:, None]
    grid = {"dims": ("lat", "lon"), "coords": {"lat": lat, "lon": lon}}
    pred = xr.Dataset({"mean": xr.DataArray(z, **grid), "std": xr.DataArray(0.1 + 0 * z, **grid)})
    pred = pred.rio.write_crs(4326)
    want = rasterio.transform.from_origin(lon[0] - 0.005, lat[0] + 0.005, 0.01, 0.01)
    with rasterio.open(write_geotiff(pred, tmp_path / "p.tif")) as src:
        assert src.transform.almost_equals(want, precision=1e-9)
        assert src.crs.to_epsg() == 4326
        np.testing.assert_allclose(src.read(1), z, rtol=1e-6)
    back = open_raster(write_netcdf(pred, tmp_path / "p.nc"), var="mean")
    assert back.dims == ("lat", "lon") and back.rio.crs.to_epsg() == 4326
    assert back.rio.transform().almost_equals(want, precision=1e-9)
    np.testing.assert_array_equal(back.values, z)


def test_packed_geotiff_is_unpacked_with_its_scale_and_offset(tmp_path):
    stored = np.arange(12, dtype=np.int16).reshape(3, 4) * 100
    stored[1, 2] = -32768
    profile = {"driver": "GTiff", "height": 3, "width": 4, "count": 1, "dtype": "int16",
               "crs": "EPSG:32633", "nodata": -32768,
               "transform": rasterio.transform.from_origin(500000, 5e6, 30, 30)}
    with rasterio.open(tmp_path / "packed.tif", "w", **profile) as dst:
        dst.write(stored, 1)
        dst.scales, dst.offsets = (0.01,), (273.15,)
    da = open_raster(tmp_path / "packed.tif")
    want = np.where(stored == -32768, np.nan, stored * 0.01 + 273.15)
    np.testing.assert_allclose(da.values, want, rtol=1e-6)
    # the stored nodata (0) is not a decoded value: a cell that decodes to 0 m stays data
    raw = np.array([[0, 1000, 1005], [900, 1000, 1010]], dtype=np.uint16)
    profile.update(height=2, width=3, dtype="uint16", nodata=0)
    with rasterio.open(tmp_path / "dem.tif", "w", **profile) as dst:
        dst.write(raw, 1)
        dst.scales, dst.offsets = (1.0,), (-1000.0,)
    from geogp.frontend.nodata import masked_values

    got = masked_values(open_raster(tmp_path / "dem.tif")).values
    np.testing.assert_array_equal(got, np.where(raw == 0, np.nan, raw - 1000.0))


def test_cloud_optimized_geotiff(pred, tmp_path):
    path = write_geotiff(pred, tmp_path / "p.tif", cog=True)
    with rasterio.open(path) as src:
        assert src.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG"
        assert src.descriptions == ("mean", "std") and src.crs.to_epsg() == 32633


def test_geotiff_with_a_time_dimension(raster, fast, tmp_path):
    stack = xr.concat([raster, raster + 1], dim="time").assign_coords(
        time=np.array(["2021-05-01", "2021-06-01"], dtype="datetime64[ns]"))
    pred = geogp.fit(stack, **fast).predict()
    with rasterio.open(write_geotiff(pred, tmp_path / "t.tif")) as src:
        assert src.descriptions == ("mean time=2021-05-01", "mean time=2021-06-01",
                                    "std time=2021-05-01", "std time=2021-06-01")


def test_netcdf_round_trip_with_grid_mapping(pred, tmp_path):
    path = write_netcdf(pred, tmp_path / "p.nc")
    raw = xr.open_dataset(path, engine="h5netcdf", decode_coords=False)
    assert raw["mean"].attrs["grid_mapping"] == "spatial_ref"
    assert "crs_wkt" in raw["spatial_ref"].attrs and raw.attrs["Conventions"].startswith("CF")
    back = open_raster(path, var="mean")
    assert "spatial_ref" in back.coords and back.rio.crs.to_epsg() == 32633
    np.testing.assert_array_equal(back.values, pred["mean"].values)
    with pytest.raises(InputError, match=r"'nope' not found.*\['mean', 'std', 'std_latent', "
                                         r"'quantiles'\]"):
        open_raster(path, var="nope")
    with pytest.raises(InputError, match="var=NAME"):
        open_raster(path)  # several rasters, none chosen


def test_open_single_variable_netcdf_and_integer_geotiff(raster, fast, tmp_path):
    nc = tmp_path / "one.nc"
    raster.to_dataset().to_netcdf(nc, engine="h5netcdf")
    assert open_raster(nc).name == "height"
    z = np.where(np.isnan(raster.values), -32768, np.round(raster.values * 100)).astype(np.int16)
    tif = tmp_path / "int.tif"
    raster.copy(data=z).rio.write_nodata(-32768).rio.to_raster(tif)
    da = open_raster(tif)
    assert da.dims == ("y", "x") and int(np.isnan(da).sum()) == int(np.isnan(raster).sum())
    model = geogp.fit(da, **fast)
    assert model.n_observed_[0] == int(raster.notnull().sum())


def test_unreadable_files_are_clear(tmp_path):
    with pytest.raises(ReadError, match="no such file"):
        open_raster(tmp_path / "missing.tif")
    junk = tmp_path / "junk.tif"
    junk.write_bytes(b"this is not a raster")
    with pytest.raises(ReadError, match="cannot read"):
        open_raster(junk)
    bad_nc = tmp_path / "junk.nc"
    bad_nc.write_text("nope")
    with pytest.raises(ReadError, match="NetCDF"):
        open_raster(bad_nc)


def test_existing_output_needs_overwrite(pred, tmp_path):
    path = tmp_path / "p.tif"
    path.write_bytes(b"old")
    with pytest.raises(OutputExistsError, match="overwrite"):
        write_geotiff(pred, path)
    assert path.read_bytes() == b"old"
    write_geotiff(pred, path, overwrite=True)
    with rasterio.open(path) as src:
        assert src.count == 2


def test_a_failed_write_leaves_no_file(pred, tmp_path, monkeypatch):
    """Inject a failure half-way through writing: no output and no temporary file remain, and
    an existing file is left as it was."""
    calls = {"n": 0}
    original = rasterio.io.DatasetWriter.write

    def failing_write(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full (injected)")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(rasterio.io.DatasetWriter, "write", failing_write)
    monkeypatch.setattr(geogp.frontend.io, "_WINDOW_BYTES", 1)  # one band per write: fail at band 2
    with pytest.raises(OSError, match="injected"):
        write_geotiff(pred, tmp_path / "p.tif")
    assert os.listdir(tmp_path) == []
    old = tmp_path / "keep.tif"
    old.write_bytes(b"old")
    calls["n"] = 0
    with pytest.raises(OSError, match="injected"):
        write_geotiff(pred, old, overwrite=True)
    assert old.read_bytes() == b"old" and os.listdir(tmp_path) == ["keep.tif"]


def test_atomic_path_cleans_up_on_error(tmp_path):
    with pytest.raises(RuntimeError), atomic_path(tmp_path / "x.nc") as tmp:
        tmp.write_text("partial")
        raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    with pytest.raises(InputError, match="does not exist"), atomic_path(tmp_path / "no" / "x.nc"):
        pass


@pytest.mark.parametrize("cog", [False, True])
def test_geotiff_is_written_window_by_window_from_a_dask_prediction(pred, tmp_path, monkeypatch,
                                                                     cog):
    """Bands are written WRITE_ROWS rows at a time: a dask-backed prediction is computed one
    window at a time (never a whole band), the bands of a window in one computation, and the
    file reads back equal to the values; a window that reads back differently is caught by
    the digests and nothing is kept."""
    import dask

    import geogp.frontend.io as gio

    monkeypatch.setattr(gio, "WRITE_ROWS", 7)
    ny = pred.sizes["y"]
    lazy = pred.chunk({"y": 7})
    shapes = []
    compute = dask.compute

    def counting(*arrays, **kw):
        shapes.append([a.shape for a in arrays])
        return compute(*arrays, **kw)

    monkeypatch.setattr(dask, "compute", counting)
    path = write_geotiff(lazy, tmp_path / "w.tif", latent=True, cog=cog)
    # one computation per window, of its rows of all three bands
    assert shapes == [[(min(a + 7, ny) - a, pred.sizes["x"])] * 3 for a in range(0, ny, 7)]
    with rasterio.open(path) as src:
        for i, name in enumerate(("mean", "std", "std_latent"), start=1):
            np.testing.assert_array_equal(src.read(i),
                                          pred[name].values.astype(np.float32))

    original = rasterio.io.DatasetReader.read

    def corrupt(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        w = kwargs.get("window")
        if w is not None and w.row_off == 7:
            out = out.copy()
            out[0, 0] += 1.0
        return out

    monkeypatch.setattr(rasterio.io.DatasetReader, "read", corrupt)
    with pytest.raises(OSError, match="reads back differently"):
        write_geotiff(pred, tmp_path / "bad.tif", cog=cog)
    assert sorted(os.listdir(tmp_path)) == ["w.tif"]


def test_geotiff_keeps_the_inputs_long_name_and_source_tags(raster, fast, tmp_path):
    """A raster with long_name / source attributes (as read from a tagged GeoTIFF or a NetCDF)
    gives a prediction GeoTIFF with the same dataset tags; encoding keys do not become tags."""
    da = raster.assign_attrs(long_name="surface height", source="a survey, 2024",
                             scale_factor=1.0)
    pred = geogp.fit(da, **fast).predict()
    with rasterio.open(write_geotiff(pred, tmp_path / "p.tif")) as src:
        tags = src.tags()
        assert tags["long_name"] == "surface height" and tags["source"] == "a survey, 2024"
        assert "scale_factor" not in tags and tags["software"] == "geogp"
        assert src.tags(1)["units"] == "m"
    with rasterio.open(write_geotiff(pred, tmp_path / "c.tif", cog=True)) as src:
        assert src.tags()["source"] == "a survey, 2024"
