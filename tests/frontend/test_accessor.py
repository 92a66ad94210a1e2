"""The .geogp accessor translates and delegates; it never modifies its object."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import geogp

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


def test_dataarray_accessor_fits_like_geogp_fit(raster, fast):
    before = raster.copy(deep=True)
    model = raster.geogp.fit(**fast)
    assert isinstance(model, geogp.GeoRegressor)
    xr.testing.assert_identical(raster, before)
    np.testing.assert_array_equal(model.predict()["mean"].values,
                                  geogp.fit(raster, **fast).predict()["mean"].values)


def test_fill_returns_the_gap_filled_dataset(raster, fast):
    filled = raster.geogp.fill(quantiles=[0.5], **fast)
    assert set(filled.data_vars) == {"mean", "std", "std_latent", "quantiles"}
    assert filled["mean"].shape == raster.shape and np.isfinite(filled["mean"]).all()


def test_dataset_accessor_picks_the_variable(raster, fast):
    ds = xr.Dataset({"height": raster, "other": raster * 2})
    model = ds.geogp.fit(var="other", **fast)
    assert model.name_ == "other"
    np.testing.assert_allclose(model.predict()["mean"],
                               2 * ds.geogp.fit(var="height", **fast).predict()["mean"],
                               rtol=1e-9, atol=1e-12)


def test_accessor_defaults_to_the_same_model_choice_as_geogp_fit():
    import inspect

    from geogp.frontend.accessor import GeogpDataArrayAccessor

    default = inspect.signature(geogp.fit).parameters["model"].default
    assert default == "auto"
    for method in (GeogpDataArrayAccessor.fit, GeogpDataArrayAccessor.fill):
        assert inspect.signature(method).parameters["model"].default == default
