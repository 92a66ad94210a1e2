"""Plain longitude/latitude arrays given to array estimators are flagged (issue #17, item 3).

The warning must fire for degrees (named columns, or two unnamed columns whose values can only be
degrees away from the equator), name the right columns and the cos(latitude) factor, and stay
silent for planar, standardised and integer-index coordinates and for the front end, which
scales longitude itself.
"""

import warnings

import numpy as np
import pandas as pd
import pytest

import geogp
from geogp.core.validation import warn_if_lonlat
from geogp.exceptions import GeographicCoordinatesWarning
from geogp.models.afs import AFSRegressor

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


def _lonlat(n=60, seed=0):
    rng = np.random.default_rng(seed)
    lon = rng.uniform(-100.0, -95.5, n)
    lat = rng.uniform(34.0, 36.8, n)
    return lon, lat, np.sin(lon) + np.cos(lat) + 0.1 * rng.normal(size=n)


def _caught(X, points):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        warn_if_lonlat(X, points, "AFSRegressor")
    return [w for w in rec if issubclass(w.category, GeographicCoordinatesWarning)]


@pytest.mark.parametrize("order", ["lonlat", "latlon"])
def test_degree_arrays_are_flagged_with_the_right_columns_and_factor(order):
    lon, lat, _ = _lonlat()
    X = np.column_stack([lon, lat] if order == "lonlat" else [lat, lon])
    rec = _caught(X, X)
    assert len(rec) == 1
    msg = str(rec[0].message)
    lon_col, lat_col = (0, 1) if order == "lonlat" else (1, 0)
    assert f"longitude (column {lon_col}) and latitude (column {lat_col})" in msg
    assert f"{np.cos(np.deg2rad(lat.mean())):.2f} times as long" in msg
    assert f"{abs(lat.mean()):.0f}°N" in msg


def test_named_columns_are_flagged_even_near_the_equator():
    rng = np.random.default_rng(1)
    table = pd.DataFrame({"longitude": rng.uniform(10, 12, 30), "latitude": rng.uniform(-1, 1, 30)})
    assert len(_caught(table, table.to_numpy())) == 1


@pytest.mark.parametrize("X", [
    np.random.default_rng(2).uniform(0.0, 1.0, (50, 2)),          # unit square
    np.random.default_rng(3).normal(size=(50, 2)),                 # standardised
    np.random.default_rng(4).uniform(4e5, 5e5, (50, 2)),           # UTM metres
    np.stack(np.meshgrid(np.arange(30, 40.0), np.arange(8.0)), -1).reshape(-1, 2),  # indices
    np.random.default_rng(5).uniform(-5.0, 5.0, (50, 2)),          # near the equator
])
def test_planar_coordinates_are_not_flagged(X):
    assert _caught(X, X) == []


def test_afs_regressor_warns_at_the_users_call():
    lon, lat, y = _lonlat()
    with pytest.warns(GeographicCoordinatesWarning) as rec:
        AFSRegressor(n_features=16, maxiter=2).fit(np.column_stack([lon, lat]), y)
    assert any(w.filename == __file__ for w in rec if
               issubclass(w.category, GeographicCoordinatesWarning))


def test_front_end_scales_longitude_and_does_not_warn():
    lon, lat, y = _lonlat(200)
    table = pd.DataFrame({"lon": lon, "lat": lat, "value": y})
    with warnings.catch_warnings():
        warnings.simplefilter("error", GeographicCoordinatesWarning)
        model = geogp.fit(table, x="lon", y="lat", value="value", crs="EPSG:4326",
                          model="afs", n_features=16, maxiter=2)
    # the estimator saw (lat, lon·cos φ̄): longitude scaled by the front end
    est = model.estimators_[0]
    np.testing.assert_allclose(est.scaler_.x_mean,
                               [lat.mean(), lon.mean() * np.cos(np.deg2rad(lat.mean()))],
                               rtol=1e-12)


# issue #32, item 2: degrees declared in a projected CRS (e.g. --crs EPSG:32633)
def _projected_caught(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fn()
    return [w for w in rec if issubclass(w.category, GeographicCoordinatesWarning)]


def test_issue32_lonlat_degrees_with_a_projected_crs_warn():
    """Points and rasters whose coordinates all lie within ±180 × ±90 under a projected CRS
    in metres: warned at the user's line (the CLI prints it as one line); the same data in
    metres, or the degrees with their geographic CRS, are not flagged."""
    import xarray as xr

    from geogp.frontend.adapters import to_grid_data
    from geogp.frontend.points import to_point_data

    lon, lat, y = _lonlat()
    table = pd.DataFrame({"x": lon, "y": lat, "value": y})
    rec = _projected_caught(lambda: to_point_data(table, crs="EPSG:32633"))
    assert len(rec) == 1 and "EPSG:32633 is projected" in str(rec[0].message)
    assert "EPSG:4326" in str(rec[0].message) and rec[0].filename == __file__
    da = xr.DataArray(np.zeros((4, 5)), dims=("y", "x"),
                      coords={"y": [36.0, 35.5, 35.0, 34.5], "x": np.linspace(-100, -98, 5)})
    assert len(_projected_caught(lambda: to_grid_data(da.rio.write_crs(32633)))) == 1
    assert _projected_caught(lambda: to_grid_data(da.rio.write_crs(4326))) == []
    metres = table.assign(x=5e5 + 1e3 * lon, y=4e6 + 1e3 * lat)
    assert _projected_caught(lambda: to_point_data(metres, crs="EPSG:32633")) == []
    assert _projected_caught(lambda: to_point_data(table, crs="EPSG:4326")) == []
