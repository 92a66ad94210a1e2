"""Saving and loading fitted models: one .npz file, no pickle, identical predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.exceptions import GeogpError, OutputExistsError, ReadError

from _frontend_rasters import FEATURES

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


def _assert_same(a: xr.Dataset, b: xr.Dataset):
    assert set(a.data_vars) == set(b.data_vars)
    for v in a.data_vars:
        np.testing.assert_array_equal(a[v].values, b[v].values)  # bit for bit
    for c in a.dims:
        np.testing.assert_array_equal(a[c].values, b[c].values)
    assert a.rio.crs == b.rio.crs


def test_round_trip_reproduces_predictions_exactly(raster, tmp_path):
    model = geogp.fit(raster, n_features=FEATURES, maxiter=15)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = geogp.load_model(path)
    _assert_same(model.predict(quantiles=[0.1, 0.9]), loaded.predict(quantiles=[0.1, 0.9]))
    sub = raster.isel(x=slice(3, 9))
    _assert_same(model.predict(like=sub), loaded.predict(like=sub))
    assert loaded.summary() == model.summary()
    est, back = model.estimators_[0], loaded.estimators_[0]
    np.testing.assert_array_equal(np.asarray(back.stats_.G), np.asarray(est.stats_.G))
    assert back.report_.n_iter == est.report_.n_iter


def test_round_trip_with_time_dimension_and_geographic_crs(fast, tmp_path):
    from _frontend_rasters import make_raster

    base = make_raster(dims=("lat", "lon"), origin=(7.0, 46.0), step=0.01, crs=4326)
    stack = xr.concat([base, base * 3], dim="time").assign_coords(
        time=np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[ns]"))
    model = geogp.fit(stack, **fast)
    model.save(tmp_path / "m.npz")
    loaded = geogp.GeoRegressor.load(tmp_path / "m.npz")
    assert loaded.spec_.geographic and loaded.spec_.lon_scale == model.spec_.lon_scale
    _assert_same(model.predict(), loaded.predict())


def test_file_holds_no_pickled_objects(raster, fast, tmp_path):
    geogp.fit(raster, **fast).save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files)
        meta = json.loads(str(z["__meta__"]))
    assert meta["format"] == "geogp-model" and meta["spec"]["crs_wkt"]


def test_save_refuses_overwrite_and_unsupported_models(raster, fast, tmp_path):
    model = geogp.fit(raster, **fast)
    model.save(tmp_path / "m.npz")
    with pytest.raises(OutputExistsError):
        model.save(tmp_path / "m.npz")
    model.save(tmp_path / "m.npz", overwrite=True)
    model.model_ = "exact"
    with pytest.raises(GeogpError, match="saving model='exact' is not supported"):
        model.save(tmp_path / "other.npz")
    assert not (tmp_path / "other.npz").exists()


def test_load_rejects_other_files(tmp_path):
    with pytest.raises(ReadError, match="no such file"):
        geogp.load_model(tmp_path / "none.npz")
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(ReadError, match="not a geogp model"):
        geogp.load_model(tmp_path / "x.npz")
