"""Fixtures of the front-end tests."""

from __future__ import annotations

import pytest
import xarray as xr

from _frontend_rasters import FEATURES, make_raster


@pytest.fixture
def raster() -> xr.DataArray:
    return make_raster()


@pytest.fixture
def fast() -> dict:
    """Model options for tests that do not check the learnt hyperparameters."""
    return {"n_features": FEATURES, "optimize": False, "lengthscale": 0.3, "noise": 0.05}


@pytest.fixture
def no_fit(monkeypatch):
    """Any fit fails the test: the refusals under test must come before it."""
    import geogp.frontend.api

    def fit(*args, **kwargs):
        raise AssertionError("the fit should not start")

    monkeypatch.setattr(geogp.frontend.api.GeoRegressor, "fit", fit)
