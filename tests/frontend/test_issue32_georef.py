"""Issue #32, hardening round 2, item 2 (georeferencing): irregular grids are never written
with a regular transform, antimeridian points make no 360°-wide grid, a too coarse
--resolution and degrees under a projected CRS are caught."""

from __future__ import annotations

import os
import warnings
from argparse import Namespace

import numpy as np
import pytest
import xarray as xr

from geogp.cli import main
from geogp.exceptions import AntimeridianWarning, InputError, IrregularGridError
from geogp.frontend.io import open_raster, write_geotiff, write_netcdf

from _cli_helpers import error_line


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
    line = error_line(capsys)
    assert "'x' coordinates are not regularly spaced" in line and "NetCDF" in line
    assert sorted(os.listdir(tmp_path)) == ["in.nc"]


# --------------------------------------------------------------------------- antimeridian
def _dateline_table(n=80, seed=0):
    """Two clusters 1° apart across the antimeridian (179.5 … -179.5), a smooth field of the
    continuous longitude."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    lon = rng.uniform(179.0, 181.0, n)  # continuous
    lat = rng.uniform(10.0, 11.0, n)
    value = np.sin(3 * lon) + np.cos(4 * lat)
    wrapped = np.where(lon > 180.0, lon - 360.0, lon)
    return pd.DataFrame({"lon": wrapped, "lat": lat, "value": value}), lon


# the geogp command prints its warnings on stderr, where the test reads them: shown, not raised
@pytest.mark.filterwarnings("default::UserWarning")
def test_issue32_antimeridian_points_make_no_360_degree_grid(tmp_path, capsys):
    """geogp fit --resolution on points across the antimeridian: longitudes are shifted to
    0..360 and the grid covers their 2° (not 360°, which also put neighbours 359° apart)."""
    import rioxarray

    table, lon = _dateline_table()
    table.to_csv(tmp_path / "pts.csv", index=False)
    out = tmp_path / "o.tif"
    assert main(["fit", str(tmp_path / "pts.csv"), "--x", "lon", "--y", "lat", "--crs",
                 "EPSG:4326", "--resolution", "0.1", "--out", str(out), "--model", "afs",
                 "--features", "64", "--maxiter", "3", "--quiet"]) == 0
    assert "cross the antimeridian" in capsys.readouterr().err
    band = rioxarray.open_rasterio(out)
    assert band.x.min() > 178.9 and band.x.max() < 181.1
    lat = table.lat.to_numpy()
    assert band.shape[1:] == (int(np.ptp(lat) / 0.1) + 1, int(np.ptp(lon) / 0.1) + 1)


def test_issue32_antimeridian_shift_warns_with_its_own_category():
    """The shift to 0..360 (the --resolution grid of a point table) warns with
    AntimeridianWarning exactly, not a bare UserWarning, so it can be filtered by category."""
    from geogp.cli.fit_points import points_grid

    table, _lon = _dateline_table()
    args = Namespace(crs="EPSG:4326", like=None, resolution=0.1, x="lon", y="lat",
                     value="value", quantiles=None)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        grid = points_grid(args, table)
    assert [w.category for w in rec] == [AntimeridianWarning]
    assert "cross the antimeridian" in str(rec[0].message)
    assert grid.x.min() > 178.9 and grid.x.max() < 181.1


def test_issue32_antimeridian_points_follow_the_grid_or_are_refused():
    """Python API: with a target grid, points take the grid's longitude range (0..360 here);
    without one, points across the antimeridian are refused with the 0..360 advice."""
    from geogp.frontend.points import to_point_data

    table, lon = _dateline_table()
    grid = xr.DataArray(np.zeros((11, 21)), dims=("y", "x"),
                        coords={"y": np.linspace(11, 10, 11), "x": np.linspace(179, 181, 21)})
    pts = to_point_data(table, x="lon", y="lat", crs=4326, grid=grid.rio.write_crs(4326))
    np.testing.assert_allclose(pts.X[:, 1] / pts.spec.lon_scale, lon, rtol=1e-12)
    with pytest.raises(InputError, match=r"antimeridian.*0..360"):
        to_point_data(table, x="lon", y="lat", crs=4326)
    inside = table[table.lon > 0]  # one side only: unchanged, bit for bit
    pts = to_point_data(inside, x="lon", y="lat", crs=4326)
    np.testing.assert_array_equal(pts.X[:, 1], inside.lon.to_numpy() * pts.spec.lon_scale)


def test_issue32_wrapped_longitude_axis_is_not_told_to_sort():
    """A raster's longitudes wrapped at ±180 (or at 0 in 0..360): the advice makes them
    continuous; "sort it first" would have built a 360°-wide grid."""
    from geogp.frontend.adapters import check_axis

    with pytest.raises(IrregularGridError, match=r"% 360, i.e. 0..360") as exc:
        check_axis(np.array([179.0, 179.5, -180.0, -179.5]), "lon")
    assert "sort" not in str(exc.value).replace("sorting would", "")
    with pytest.raises(IrregularGridError, match=r"-180..180"):
        check_axis(np.array([350.0, 355.0, 0.0, 5.0]), "lon")
    with pytest.raises(IrregularGridError, match="sort it first"):  # plain disorder
        check_axis(np.array([1.0, 3.0, 2.0]), "lon")


# --------------------------------------------------------------------------- resolution
def test_issue32_resolution_coarser_than_the_points_is_refused(tmp_path, capsys, no_fit):
    """--resolution 5 on points spanning 1° wrote a 1 × 1 grid: refused, naming the grid."""
    table, _ = _dateline_table()
    table.assign(lon=table.lon.abs() % 1 + 10.0).to_csv(tmp_path / "pts.csv", index=False)
    out = tmp_path / "o.tif"
    assert main(["fit", str(tmp_path / "pts.csv"), "--x", "lon", "--y", "lat", "--crs",
                 "EPSG:4326", "--resolution", "5", "--out", str(out), "--quiet"]) == 2
    line = error_line(capsys)
    assert "gives a 1 × 1 grid" in line and "at least 2 cells" in line
    assert not out.exists()


# --------------------------------------------------------------------------- text in a column
def test_issue32_text_in_the_value_column_names_column_and_row(tmp_path, capsys, no_fit):
    import pandas as pd

    from geogp.frontend.points import to_point_data

    (tmp_path / "p.csv").write_text('x,y,value\n0,0,1\n1,1,"12,5"\n2,0,3\n')
    assert main(["fit", str(tmp_path / "p.csv"), "--crs", "EPSG:32633", "--resolution",
                 "0.5", "--out", str(tmp_path / "o.tif"), "--quiet"]) == 2
    line = error_line(capsys)
    assert "column 'value'" in line and "'12,5'" in line and "line 3" in line
    table = pd.DataFrame({"x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 0.0],
                          "value": ["1", "12,5", "3"]}, index=[10, 11, 12])
    with pytest.raises(InputError, match=r"column 'value' holds '12,5' at row 11"):
        to_point_data(table, crs=32633)


def test_issue32_text_in_a_vector_files_value_column_names_the_feature(tmp_path, capsys, no_fit):
    """A GeoPackage whose value column holds text: refused naming the column, the value and
    the feature (its values were silently turned into NaN and dropped)."""
    gpd = pytest.importorskip("geopandas")
    shapely = pytest.importorskip("shapely.geometry")
    gdf = gpd.GeoDataFrame({"t": ["1.5", "12,5", "3"]},
                           geometry=[shapely.Point(0, 0), shapely.Point(100, 100),
                                     shapely.Point(200, 0)], crs="EPSG:32633")
    gdf.to_file(tmp_path / "p.gpkg", driver="GPKG")
    assert main(["fit", str(tmp_path / "p.gpkg"), "--value", "t", "--resolution", "50",
                 "--out", str(tmp_path / "o.tif"), "--quiet"]) == 2
    line = error_line(capsys)
    assert "column 't'" in line and "'12,5'" in line and "feature 2" in line
    assert not (tmp_path / "o.tif").exists()


def test_non_numeric_positions_is_the_one_finder_of_text_in_numbers():
    """The CLI's CSV/vector check and the point adapter share one finder: it skips numbers,
    numeric text and missing markers (None, NaN, pandas' NA) and returns every other entry's
    position, as a naive per-entry check does."""
    import pandas as pd

    from geogp.frontend.points import non_numeric_positions

    values = [1, "2.5", None, float("nan"), pd.NA, "12,5", "n/a", 3.0, "", "-1e3", object()]

    def naive(v):
        if v is None or v is pd.NA:
            return False
        try:
            float(v)
        except (TypeError, ValueError):
            return True
        return False

    got = non_numeric_positions(values)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [i for i, v in enumerate(values) if naive(v)])
    np.testing.assert_array_equal(got, [5, 6, 8, 10])
    assert non_numeric_positions(pd.Series([1.0, None, 2.0], dtype=object)).size == 0
