"""Predicting other dates with the space-time model (#43 item 3, ``predict(time=...)``):
inside the series and after it (a forecast), as the posterior with those dates added
unobserved; intervals that widen with the time since the last data."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import geogp
from geogp.exceptions import InputError
from tests.models.test_spacetime_estimator import THETA, _as_da, _fixed, _stack, _standardised


@pytest.fixture(scope="module")
def stack():
    return _stack(shape=(14, 16))


def test_a_forecast_is_the_posterior_with_the_date_added_unobserved(stack):
    """The first 7 dates, asked for the 8th's date, against the 8-date stack whose last
    image is all missing (a path the estimator tests check against its neighbours)."""
    f, y, times = stack
    blank = y.copy()
    blank[7] = np.nan
    seven = _fixed((f[:7], y[:7], times[:7]), tile=64)
    eight = _fixed((f, blank, times), tile=64)
    mean, latent, observed = seven.predict_dates([times[7]])
    np.testing.assert_allclose(mean[0], eight.mean_[7], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(latent[0], eight.sd_latent_[7], rtol=1e-8)
    np.testing.assert_allclose(observed[0], eight.sd_observed_[7], rtol=1e-8)
    # a fitted date, and a date between two fitted ones, inside the series
    again, between = seven.predict_dates([times[3], 0.5 * (times[3] + times[4])])[1]
    np.testing.assert_allclose(again, seven.sd_latent_[3], rtol=1e-8)
    assert (between > np.minimum(seven.sd_latent_[3], seven.sd_latent_[4]) - 1e-12).all()


def test_forecast_intervals_widen_with_the_horizon_and_settle(stack):
    _, _, times = stack
    est = _fixed(stack, tile=64)
    ahead = times[-1] + np.array([1.0, 8.0, 32.0, 128.0, 1024.0, 2048.0])
    mean, latent, _ = est.predict_dates(ahead)
    spread = latent.mean(axis=(1, 2))
    assert (np.diff(spread[:5]) > 0).all(), spread
    # far ahead only the persistent field and the series' level remain: the same map
    assert np.max(np.abs(mean[5] - mean[4])) < 1e-3 * spread[4]
    assert abs(spread[5] / spread[4] - 1.0) < 1e-3
    # one step ahead (τ = 16 days) still knows the last date: close to its own posterior
    assert np.sqrt(np.mean((mean[0] - est.mean_[-1]) ** 2)) < 0.5 * spread[0]


def test_the_front_end_predicts_dates_in_the_users_calendar(stack):
    _, y, times = stack
    scale = float(np.nanstd(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(_as_da(y, times), model="spacetime", optimize=False, tile=64,
                          params=_standardised(THETA, scale))
    first = pd.Timestamp("2021-03-01")
    when = [first + pd.Timedelta(days=float(times[-1]) + 10)]
    out = model.predict(time=when)
    assert out["mean"].dims == ("time", "y", "x") and out.sizes["time"] == 1
    assert out.time.values[0] == np.datetime64(when[0])
    est = model.estimators_[0].model
    mean, _, observed = est.predict_dates([times[-1] + 10])
    np.testing.assert_allclose(out["mean"].values, mean, rtol=1e-10)
    np.testing.assert_allclose(out["std"].values, observed, rtol=1e-10)
    with pytest.raises(InputError, match="fitted grid"):
        model.predict(like=_as_da(y, times).isel(time=0), time=when)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per_image = geogp.fit(_as_da(y[:2], times[:2]), model="lattice", maxiter=2)
    with pytest.raises(InputError, match="model='spacetime'"):
        per_image.predict(time=when)


def test_a_fitted_stack_round_trips_through_a_model_file(stack, tmp_path):
    """#43 (save): the joint model is stored once; the loaded model predicts the fitted dates
    and forecasts exactly as the fitted one, and says the same summary."""
    _, y, times = stack
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(_as_da(y, times), model="spacetime", maxiter=3, tile=64)
    path = tmp_path / "st.npz"
    model.save(path)
    back = geogp.load_model(path)
    assert len(back.estimators_) == len(times)
    assert all(e.model is back.estimators_[0].model for e in back.estimators_)
    assert back.estimators_[0].model.interval_scale_ == model.estimators_[0].model.interval_scale_
    a, b = model.predict(), back.predict()
    for name in a.data_vars:
        np.testing.assert_array_equal(b[name].values, a[name].values)
    when = [pd.Timestamp("2021-03-01") + pd.Timedelta(days=float(times[-1]) + 5)]
    fa, fb = model.predict(time=when), back.predict(time=when)
    np.testing.assert_array_equal(fb["mean"].values, fa["mean"].values)
    np.testing.assert_array_equal(fb["std"].values, fa["std"].values)
    assert back.summary().splitlines()[1].split(", fit in")[0] == (
        model.summary().splitlines()[1].split(", fit in")[0])


def test_a_model_file_whose_grid_is_not_the_stacks_is_refused():
    from geogp.exceptions import ReadError
    from geogp.persist.semantics import check_series_grid

    ay, ax = np.arange(5.0), np.arange(7.0)
    check_series_grid([ay, ax], ay.copy(), ax.copy(), "slice s0")  # the same cells: accepted
    for ty, tx in ((ay + 0.5, ax), (ay, ax[:-1])):
        with pytest.raises(ReadError, match="cells do not match the stored grid"):
            check_series_grid([ay, ax], ty, tx, "slice s0")
