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
from geogp._validation import warn_if_lonlat
from geogp.exceptions import GeographicCoordinatesWarning
from geogp.models.afs import AFSRegressor


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
