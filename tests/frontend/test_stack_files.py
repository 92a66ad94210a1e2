"""Image series from files (#43, front end): several single-date rasters, or one multi-band
GeoTIFF whose bands are the dates, read as a (time, y, x) stack; dates from the file names,
the band descriptions or --time; bad stacks refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import rasterio
import xarray as xr

import geogp
from geogp.exceptions import InputError
from geogp.frontend.io import date_in_name, open_stack

pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


def _image(seed, ny=12, nx=14, shift=0.0):
    rng = np.random.default_rng(seed)
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    z = np.sin(xx / 4.0) + np.cos(yy / 3.0) + 0.1 * seed + 0.05 * rng.standard_normal((ny, nx))
    z[rng.random((ny, nx)) < 0.2] = np.nan
    return xr.DataArray(z, dims=("y", "x"), coords={"y": 5e5 - 100.0 * yy[:, 0] + shift,
                                                   "x": 1e5 + 100.0 * xx[0]}).rio.write_crs(32633)


def _write(tmp_path, names, **kw):
    paths = []
    for i, name in enumerate(names):
        p = tmp_path / name
        _image(i, **kw).rio.to_raster(p)
        paths.append(p)
    return paths


def test_dates_are_read_from_names():
    assert date_in_name("ndvi_2020-06-01.tif") == np.datetime64("2020-06-01")
    assert date_in_name("sst_20200601_v2.tif") == np.datetime64("2020-06-01")
    assert date_in_name("MOD13A1.A2004145.500m.tif") == np.datetime64("2004-05-24")
    assert date_in_name("scene_7.tif") is None
    assert date_in_name("bad_2020-13-45.tif") is None  # not a calendar date
    assert date_in_name("two_20200601_20200602.tif") is None  # ambiguous


def test_files_become_a_stack_in_date_order(tmp_path):
    paths = _write(tmp_path, ["b_2020-06-17.tif", "a_2020-06-01.tif", "c_2020-07-03.tif"])
    da = open_stack(paths)
    assert da.dims == ("time", "y", "x") and da.rio.crs.to_epsg() == 32633
    want = np.array(["2020-06-01", "2020-06-17", "2020-07-03"], dtype="datetime64[D]")
    assert np.array_equal(da.time.values.astype("datetime64[D]"), want)
    first = geogp.open_raster(paths[1])  # the earliest date
    np.testing.assert_array_equal(da.isel(time=0).values, first.values)
    given = open_stack(paths, times=["2021-01-03", "2021-01-01", "2021-01-02"])
    np.testing.assert_array_equal(given.isel(time=0).values, first.values)


@pytest.mark.parametrize("case, match", [
    ("count", "3 dates given for 2 files"),
    ("nodate", "no date found in the file 'scene_1.tif'"),
    ("duplicate", "two images have the date 2020-06-01"),
    ("grid", "is not on the grid of"),
])
def test_bad_stacks_are_refused_in_one_line(tmp_path, case, match):
    if case == "grid":
        a = _write(tmp_path, ["a_2020-06-01.tif"])
        b = tmp_path / "b_2020-06-02.tif"
        _image(1, shift=50.0).rio.to_raster(b)
        paths, times = [*a, b], None
    elif case == "nodate":
        paths, times = _write(tmp_path, ["x_2020-06-01.tif", "scene_1.tif"]), None
    elif case == "duplicate":
        paths, times = _write(tmp_path, ["a_2020-06-01.tif", "b_20200601.tif"]), None
    else:
        paths, times = _write(tmp_path, ["a.tif", "b.tif"]), ["2020-01-01"] * 3
    with pytest.raises(InputError, match=match):
        open_stack(paths, times=times)


def test_a_multi_band_geotiff_with_dated_bands_is_a_series(tmp_path):
    bands = xr.concat([_image(i) for i in range(3)], dim="band").assign_coords(band=[1, 2, 3])
    path = tmp_path / "series.tif"
    bands.rio.to_raster(path)
    with rasterio.open(path, "r+") as ds:
        for i, d in enumerate(["2020-06-01", "2020-06-17", "2020-07-03"], start=1):
            ds.set_band_description(i, f"ndvi {d}")
    da = open_stack(path)
    assert da.dims == ("time", "y", "x") and da.sizes["time"] == 3
    assert da.time.values[2].astype("datetime64[D]") == np.datetime64("2020-07-03")
    np.testing.assert_array_equal(da.isel(time=1).values, bands.isel(band=1).values)


def test_geogp_fit_fills_a_series_of_files(tmp_path):
    from geogp.cli import main

    paths = _write(tmp_path, ["ndvi_2020-06-17.tif", "ndvi_2020-06-01.tif",
                              "ndvi_2020-07-03.tif"])
    out = tmp_path / "filled.nc"
    saved = tmp_path / "stack_model.npz"
    assert main(["fit", *map(str, paths), "--model", "spacetime", "--out", str(out),
                 "--maxiter", "3", "--quiet", "--save-model", str(saved)]) == 0
    ds = xr.open_dataset(out)
    again = geogp.load_model(saved).predict()  # the saved joint model predicts the same
    np.testing.assert_allclose(again["mean"].values, ds["mean"].values, rtol=1e-6)
    assert ds["mean"].dims[0] == "time" and ds.sizes["time"] == 3
    assert np.isfinite(ds["mean"].values).all() and (ds["std"].values > 0).all()
    assert str(ds.time.values[0].astype("datetime64[D]")) == "2020-06-01"
    observed = open_stack(paths).values
    seen = np.isfinite(observed)
    assert np.corrcoef(ds["mean"].values[seen], observed[seen])[0, 1] > 0.95


def test_geogp_fit_writes_one_geotiff_per_date_and_keeps_none_on_failure(tmp_path):
    """--out NAME_{date}.tif: one GeoTIFF per date (mean and std bands, the stack's grid), the
    same values as the NetCDF of the same fit; with --samples, each date's sample bands are its
    slice of the NetCDF's joint (sample, time, y, x) samples. A name that
    exists (no --overwrite) is refused before the fit, and nothing is written."""
    from geogp.cli import main
    from geogp.cli.runner import EXIT_USAGE

    paths = _write(tmp_path, ["ndvi_2020-06-17.tif", "ndvi_2020-06-01.tif",
                              "ndvi_2020-07-03.tif"])
    template = str(tmp_path / "filled_{date}.tif")
    nc = tmp_path / "filled.nc"
    assert main(["fit", *map(str, paths), "--out", template, "--netcdf", str(nc),
                 "--maxiter", "3", "--quiet", "--samples", "2"]) == 0
    ds = xr.open_dataset(nc)
    samples = ds["samples"].transpose("sample", "time", "y", "x").values
    assert samples.shape == (2, 3, 12, 14) and np.isfinite(samples).all()
    for k, day in enumerate(["2020-06-01", "2020-06-17", "2020-07-03"]):
        with rasterio.open(tmp_path / f"filled_{day}.tif") as src:
            assert src.count == 4 and src.descriptions == (
                "mean", "std", "samples sample=1", "samples sample=2")
            assert src.crs.to_epsg() == 32633 and src.shape == (12, 14)
            np.testing.assert_allclose(src.read(1), ds["mean"].values[k], rtol=1e-6)
            np.testing.assert_allclose(src.read([3, 4]), samples[:, k], rtol=1e-6)
    taken = tmp_path / "again_2020-06-17.tif"
    taken.write_bytes(b"keep me")
    assert main(["fit", *map(str, paths), "--out", str(tmp_path / "again_{date}.tif"),
                 "--maxiter", "3", "--quiet"]) == EXIT_USAGE
    assert taken.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.glob("again_*")) == ["again_2020-06-17.tif"]


def test_a_date_field_needs_a_stack_of_dates(tmp_path):
    from geogp.cli import main
    from geogp.cli.runner import EXIT_USAGE

    (path,) = _write(tmp_path, ["one.tif"])
    assert main(["fit", str(path), "--out", str(tmp_path / "f_{date}.tif"),
                 "--quiet"]) == EXIT_USAGE
    assert not list(tmp_path.glob("f_*"))
