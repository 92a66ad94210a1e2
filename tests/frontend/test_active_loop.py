"""The user-level active loop (#42 item 2): ``model.suggest_sites`` in the raster's CRS and
``model.add_observations`` returning a new model, the old one unchanged. Checked against the
numerical layer (``geogp.placement``) on the same fitted estimator, in model units."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geogp
from geogp.exceptions import InputError
from geogp.placement import Candidates
from geogp.placement import add_observations as add_to_estimator
from geogp.placement import suggest_sites as suggest_on_estimator


@pytest.fixture(scope="module", params=["lattice", "afs"])
def fitted(request):
    rng = np.random.default_rng(5)
    y, x = 5.2e6 - 250.0 * np.arange(24), 4.1e5 + 250.0 * np.arange(30)
    yy, xx = np.meshgrid(np.arange(24), np.arange(30), indexing="ij")
    z = np.sin(xx / 5.0) + np.cos(yy / 4.0) + 0.1 * rng.standard_normal(xx.shape)
    z[8:15, 10:19] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}).rio.write_crs(32632)
    opts = {"n_features": 200} if request.param == "afs" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(da, model=request.param, maxiter=5, **opts)
    return da, model


def test_suggest_sites_gives_the_estimator_s_picks_in_the_raster_crs(fitted):
    da, model = fitted
    sites = model.suggest_sites(4)
    est = model.estimators_[0]
    my, mx = model.spec_.to_model(da.y.values, da.x.values)
    strategy = "reduction" if model.model_ == "lattice" else "mi"
    ref = suggest_on_estimator(est, Candidates.grid([my, mx]), 4, strategy=strategy)
    iy, ix = np.unravel_index(ref["index"].to_numpy(), da.shape)
    np.testing.assert_array_equal(sites["x"], da.x.values[ix])
    np.testing.assert_array_equal(sites["y"], da.y.values[iy])
    np.testing.assert_array_equal(sites["score"], ref["score"])
    np.testing.assert_array_equal(sites["index"], ref["index"])
    assert list(sites.columns) == ["order", "index", "x", "y", "score", "std_before",
                                   "std_reduction", "mean_std_after"]
    assert sites.attrs["strategy"] == strategy and "32632" in sites.attrs["crs"]


def test_add_observations_returns_a_new_model_conditioned_on_the_values(fitted):
    _, model = fitted
    sites = model.suggest_sites(3)
    measured = sites.assign(value=[5.0, -5.0, 0.5])
    before = model.predict()
    new = model.add_observations(measured)
    after = new.predict()
    xr.testing.assert_identical(model.predict(), before)  # the old model is unchanged
    my, mx = model.spec_.to_model(measured["y"].to_numpy(), measured["x"].to_numpy())
    ref = add_to_estimator(model.estimators_[0], np.stack([my, mx], axis=1),
                           measured["value"].to_numpy())
    pts = ref.predict(np.stack([my, mx], axis=1))
    at = after.sel(x=xr.DataArray(measured["x"]), y=xr.DataArray(measured["y"]))
    np.testing.assert_allclose(at["mean"].values, pts.mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(at["std_latent"].values, np.sqrt(pts.var_latent), rtol=1e-10)
    was = before.sel(x=xr.DataArray(measured["x"]), y=xr.DataArray(measured["y"]))
    assert np.all(at["std_latent"].values < was["std_latent"].values)  # measured: surer


def test_add_observations_refuses_bad_points(fitted):
    da, model = fitted
    with pytest.raises(InputError, match="lack the column"):
        model.add_observations(pd.DataFrame({"x": [da.x.values[0]], "y": [da.y.values[0]]}))
    with pytest.raises(InputError, match="outside the raster"):
        model.add_observations(pd.DataFrame({"x": [0.0], "y": [0.0], "value": [1.0]}))
    with pytest.raises(InputError, match="finite"):
        model.add_observations(pd.DataFrame({"x": [da.x.values[0]], "y": [da.y.values[0]],
                                             "value": [np.nan]}))
    with pytest.raises(InputError, match="DataFrame"):
        model.add_observations(np.zeros((2, 3)))


def test_place_is_fit_then_add_observations_then_suggest_sites(fitted):
    """geogp place's library call: with measured points and the hyperparameters kept, the
    same sites and scores as the three steps by hand, on the same data and options."""
    from geogp.frontend.api_placement import place

    da, model = fitted
    measured = pd.DataFrame({"x": da.x.values[[3, 20]], "y": da.y.values[[10, 2]],
                             "value": [2.0, -1.0]})
    opts = {"n_features": 200} if model.model_ == "afs" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done = place(da, 3, model=model.model_, measured=measured, options={"maxiter": 5},
                     **opts)
        by_hand = geogp.fit(da, model=model.model_, maxiter=5, **opts)
    ref = by_hand.add_observations(measured).suggest_sites(3)
    pd.testing.assert_frame_equal(done.sites, ref)
    assert any("2 measurement(s)" in note for note in done.notes)


def test_place_with_refit_fits_on_the_raster_with_the_measurements_written_in(fitted):
    from geogp.frontend.api_placement import place

    da, _ = fitted
    measured = pd.DataFrame({"x": [da.x.values[12]], "y": [da.y.values[10]], "value": [7.0]})
    done = place(da, 2, model="lattice", measured=measured, refit=True, options={"maxiter": 2})
    assert np.isnan(da.values[10, 12])  # the caller's raster is untouched
    assert done.model.n_observed_[0] == int(np.isfinite(da.values).sum()) + 1
    assert not done.notes  # nothing was conditioned after the fit


def test_place_refuses_what_it_cannot_do(fitted):
    from geogp.frontend.api_placement import place

    da, _ = fitted
    with pytest.raises(InputError, match="pass measured too"):
        place(da, 2, refit=True)
    with pytest.raises(InputError, match="takes neither"):
        place(da, 2, model="lattice", n_features=100)
    with pytest.raises(InputError, match="dimensions"):  # bands: not a stack of dates
        place(da.expand_dims(band=2), 2)
    with pytest.raises(InputError, match="not on the input's grid"):
        place(da, 2, model="lattice", exclude=da.isel(x=slice(1, None)), options={"maxiter": 1})
