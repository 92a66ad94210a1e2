"""Adapters: spatial dims, coordinates, nodata, CRS treatment and bad rasters (docs/model.md)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.exceptions import (
    AllMissingError,
    InputError,
    IrregularGridError,
    MissingCRSWarning,
)
from geogp.frontend.adapters import (
    as_crs,
    check_axis,
    find_spatial_dims,
    select_variable,
    to_grid_data,
)
from geogp.frontend.nodata import masked_values
from geogp.frontend.points import to_point_data

from _frontend_rasters import make_raster

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


@pytest.mark.parametrize("dims", [("y", "x"), ("lat", "lon"), ("latitude", "longitude"),
                                  ("northing", "easting")])
def test_spatial_dims_by_name(dims):
    da = xr.DataArray(np.zeros((2, 3)), dims=dims)
    assert find_spatial_dims(da) == dims


def test_spatial_dims_by_cf_attributes():
    da = xr.DataArray(np.zeros((4, 2, 3)), dims=("t", "r", "c"),
                      coords={"r": ("r", [1.0, 0.0], {"axis": "Y"}),
                              "c": ("c", [0.0, 1.0, 2.0], {"standard_name": "longitude"})})
    assert find_spatial_dims(da) == ("r", "c")


def test_spatial_dims_not_found_says_how_to_fix():
    with pytest.raises(InputError, match="set_spatial_dims"):
        find_spatial_dims(xr.DataArray(np.zeros((2, 3)), dims=("a", "b")))


def test_check_axis_regular_irregular_and_float32():
    assert check_axis(np.arange(5.0), "x")[1]
    assert not check_axis(np.array([0.0, 1.0, 3.0, 7.0]), "x")[1]
    assert check_axis(np.arange(5.0)[::-1], "x")[1]  # descending is fine
    lon = (-84.41375 + 0.000833333 * (np.arange(400) + 0.5)).astype(np.float32)
    assert check_axis(lon, "lon")[1]  # float32 rounding is not irregularity


@pytest.mark.parametrize("coords, match", [([0.0, 1.0, 1.0, 2.0], "duplicated"),
                                           ([0.0, 2.0, 1.0, 3.0], "not monotonic"),
                                           ([0.0, np.nan, 2.0], "NaN")])
def test_check_axis_rejects_bad_coordinates(coords, match):
    with pytest.raises(IrregularGridError, match=match):
        check_axis(np.array(coords), "x")


def test_integer_raster_with_nodata_becomes_nan():
    z = np.arange(12, dtype=np.int16).reshape(3, 4)
    z[1, 2] = -9999
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": [2.0, 1.0, 0.0], "x": np.arange(4.0)})
    out = masked_values(da.rio.write_nodata(-9999))
    assert out.dtype == np.float64 and np.isnan(out[1, 2]) and int(np.isnan(out).sum()) == 1
    assert float(out[0, 1]) == 1.0
    out = masked_values(da.assign_attrs(_FillValue=-9999))  # CF attribute, no rioxarray
    assert int(np.isnan(out).sum()) == 1


def test_grid_data_of_integer_raster_with_nodata(raster):
    z = np.round(raster.fillna(-1).values * 100).astype(np.int32)
    da = raster.copy(data=z).rio.write_nodata(-100)
    g = to_grid_data(da)
    assert g.values.dtype == np.float64 and g.values.shape == (1, 30, 40)
    assert np.isnan(g.values).sum() == (z == -100).sum() > 0


def test_nan_values_and_extra_dimension_layout(raster):
    stack = xr.concat([raster, raster + 1], dim="time").assign_coords(time=[10, 20])
    g = to_grid_data(stack.transpose("y", "time", "x"))  # any order in, (time, y, x) out
    assert g.values.shape == (2, 30, 40) and g.extra_dim == "time"
    np.testing.assert_array_equal(g.values[1], raster.values + 1)
    assert g.regular and g.spec.crs.to_epsg() == 32633 and g.spec.lon_scale == 1.0


def test_singleton_band_is_squeezed(raster):
    g = to_grid_data(raster.expand_dims(band=[1]))
    assert g.values.shape == (1, 30, 40) and g.extra_dim is None


@pytest.mark.parametrize("shape, dims", [((40,), ("x",)), ((2, 3, 30, 40), ("t", "z", "y", "x"))])
def test_one_and_four_dimensional_arrays_are_refused(shape, dims):
    da = xr.DataArray(np.ones(shape), dims=dims,
                      coords={d: np.arange(float(n)) for d, n in zip(dims, shape, strict=True)})
    with pytest.raises(InputError, match="dimension"):
        to_grid_data(da.rio.write_crs(3857))


def test_all_missing_is_refused(raster):
    with pytest.raises(AllMissingError, match="every cell"):
        to_grid_data(raster * np.nan)


def test_infinite_values_are_refused(raster):
    bad = raster.copy()
    bad[3, 4] = np.inf
    with pytest.raises(InputError, match="infinite"):
        to_grid_data(bad)


def test_unknown_variable_lists_the_variables(raster):
    ds = xr.Dataset({"a": raster, "b": raster})
    with pytest.raises(InputError, match=r"\['a', 'b'\]"):
        select_variable(ds, "c")
    with pytest.raises(InputError, match="var=NAME"):
        select_variable(ds)


def test_missing_crs_warns_and_says_planar():
    da = make_raster(crs=None)
    with pytest.warns(MissingCRSWarning, match="planar"):
        g = to_grid_data(da)
    assert g.spec.crs is None and not g.spec.geographic and "planar" in g.spec.assumed


def test_missing_crs_with_lat_lon_names_assumes_geographic():
    da = make_raster(crs=None, dims=("lat", "lon"), origin=(10.0, 60.0), step=0.01)
    with pytest.warns(MissingCRSWarning, match="latitude/longitude"):
        g = to_grid_data(da)
    assert g.spec.geographic and g.spec.crs is None


def test_geographic_crs_scales_longitude_by_cos_mean_latitude():
    da = make_raster(dims=("lat", "lon"), origin=(10.0, 60.3), step=0.01, crs=4326)
    g = to_grid_data(da)
    lat0 = da["lat"].values.mean()
    assert g.spec.geographic and g.spec.units == "degrees of latitude"
    assert g.spec.lon_scale == pytest.approx(math.cos(math.radians(lat0)), rel=1e-12)
    np.testing.assert_allclose(g.axes[1], da["lon"].values * g.spec.lon_scale, rtol=1e-12)
    np.testing.assert_allclose(g.axes[0], da["lat"].values, rtol=1e-12)


def test_geographic_lengthscales_are_isotropic_in_degrees_of_latitude():
    """A field with equal scales on the ground, sampled on a lon/lat grid at 60° N (cos = ½):
    with the cos(latitude) scaling both learnt lengthscales agree; treated as planar degrees,
    the longitude lengthscale is 1/cos(60°) = 2 times larger (the fits are otherwise the same
    problem, standardisation removes the scale)."""
    lat = 60.0 - 0.02 * (np.arange(36) - 17.5)
    lon = 10.0 + 0.04 * (np.arange(36) - 17.5)  # 0.04° of longitude = 0.02° on the ground
    LON, LAT = np.meshgrid((lon - 10.0) * 0.5, lat - 60.0)
    rng = np.random.default_rng(3)
    z = np.sin(LON / 0.06 + 0.3) * np.cos(LAT / 0.06) + 0.02 * rng.standard_normal(LON.shape)
    da = xr.DataArray(z, dims=("lat", "lon"), coords={"lat": lat, "lon": lon})
    opts = {"n_features": 100, "maxiter": 60}
    geo = geogp.fit(da.rio.set_spatial_dims(x_dim="lon", y_dim="lat").rio.write_crs(4326),
                    **opts)
    ell_y, ell_x = geo.lengthscale_
    assert 0.8 < ell_x / ell_y < 1.25
    table = geo.hyperparameters()
    assert table["lengthscale_y_km"].iloc[0] == pytest.approx(ell_y * 111.195, rel=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingCRSWarning)
        planar = geogp.fit(da.rename(lat="y", lon="x"), **opts)
    lon_scale = math.cos(math.radians(lat.mean()))
    assert planar.lengthscale_[0] == pytest.approx(ell_y, rel=1e-6)
    assert planar.lengthscale_[1] == pytest.approx(ell_x / lon_scale, rel=1e-6)


def test_as_crs_normalises_and_rejects():
    assert as_crs(4326).to_epsg() == 4326 and as_crs("EPSG:32633").to_epsg() == 32633
    assert as_crs(None) is None
    with pytest.raises(InputError, match="CRS"):
        as_crs("not a crs")


def test_point_table_drops_missing_values_and_reads_crs_from_grid(raster):
    import pandas as pd

    df = pd.DataFrame({"e": [300_050.0, 300_150.0, 300_250.0], "n": [4_999_950.0] * 3,
                       "v": [1.0, np.nan, 3.0]})
    pts = to_point_data(df, x="e", y="n", value="v", grid=raster)
    assert pts.X.shape == (2, 2) and pts.spec.crs.to_epsg() == 32633
    np.testing.assert_array_equal(pts.X[:, 0], [4_999_950.0] * 2)  # model order is (y, x)
    with pytest.raises(InputError, match="column 'nope' not found"):
        to_point_data(df, x="nope", y="n", value="v", grid=raster)


def test_to_xy_flattens_observed_cells(raster):
    from geogp.frontend.adapters import to_xy

    X, y, spec, complete = to_xy(raster)
    ok = np.isfinite(raster.values)
    assert X.shape == (int(ok.sum()), 2) and not complete and spec.y_dim == "y"
    np.testing.assert_array_equal(y, raster.values[ok])
    Y, Xg = np.meshgrid(raster.y.values, raster.x.values, indexing="ij")
    np.testing.assert_allclose(X, np.stack([Y[ok], Xg[ok]], axis=1), rtol=1e-12)
    assert to_xy(raster.fillna(0.0))[3]
