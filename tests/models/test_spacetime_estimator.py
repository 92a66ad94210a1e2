"""The space-time estimator (#43): tiles against the whole stack's exact posterior, the REML
fit, the front end's stack path (dates, bad stacks) and joint samples against the dense
posterior covariance."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import xarray as xr
from scipy.linalg import solve_triangular as sla_solve_triangular
from sksparse.cholmod import cholesky

import geogp
from geogp.exceptions import InputError
from geogp.linalg.solvers import Solver
from geogp.models.lattice.gmrf import laplacian
from geogp.models.spacetime import SpaceTimeRegressor
from geogp.models.spacetime.gmrf import log_marginal_likelihood, make_problem
from geogp.models.spacetime.regressor import windows

from _reference.spacetime_dense import dense_posterior_covariance

TRUE = {"range": 4.0, "sd": 0.6, "tau": 16.0, "range_mean": 3.0, "sd_mean": 1.0,
        "sd_offset": 0.4, "tau_offset": 40.0, "noise": 0.1}
THETA = {"log_range": math.log(4.0), "log_sd": math.log(0.6), "log_tau": math.log(16.0),
         "log_range_mean": math.log(3.0), "log_sd_mean": math.log(1.0),
         "log_sd_offset": math.log(0.4), "log_tau_offset": math.log(40.0),
         "log_noise": math.log(0.1)}


def _field_draws(shape, rng_range, sd, rng, k):
    """k draws of the lattice's α = 2 field (unit cells), by its sparse Cholesky factor."""
    n = shape[0] * shape[1]
    k2 = 8.0 / rng_range**2
    op = k2 * sp.eye(n) + laplacian(shape, (1.0, 1.0))
    factor = cholesky(sp.csc_matrix(op @ op / (4 * math.pi * k2 * sd**2)))
    z = factor.apply_Pt(factor.solve_Lt(rng.standard_normal((n, k)),
                                        use_LDLt_decomposition=False))
    return z.T.reshape(k, *shape)


def _stack(shape=(18, 20), times=None, seed=0, cloud=0.35):
    """(truth f, noisy y with clouds as NaN, times): a draw of the model (standardised
    scale: level 10 + m + a + g)."""
    times = np.arange(8) * 8.0 if times is None else times
    rng = np.random.default_rng(seed)
    a = _field_draws(shape, TRUE["range"], TRUE["sd"], rng, times.size)
    for k in range(1, times.size):
        phi = math.exp(-(times[k] - times[k - 1]) / TRUE["tau"])
        a[k] = phi * a[k - 1] + math.sqrt(1 - phi**2) * a[k]
    g = np.zeros(times.size)
    g[0] = TRUE["sd_offset"] * rng.standard_normal()
    for k in range(1, times.size):
        phi = math.exp(-(times[k] - times[k - 1]) / TRUE["tau_offset"])
        g[k] = phi * g[k - 1] + TRUE["sd_offset"] * math.sqrt(1 - phi**2) * rng.standard_normal()
    f = 10.0 + _field_draws(shape, TRUE["range_mean"], TRUE["sd_mean"], rng, 1)[0] + a
    f = f + g[:, None, None]
    y = f + TRUE["noise"] * rng.standard_normal(f.shape)
    yy, xx = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    for k in range(times.size):  # a disc of cloud per date, somewhere else each time
        cy, cx = rng.uniform(0, shape[0]), rng.uniform(0, shape[1])
        r = math.sqrt(cloud * shape[0] * shape[1] / math.pi)
        y[k][(yy - cy) ** 2 + (xx - cx) ** 2 < r**2] = np.nan
    return f, y, times


def _standardised(theta, loc_scale):
    """θ in the estimator's standardised units (it divides the data by their sd)."""
    out = dict(theta)
    for key in ("log_sd", "log_sd_mean", "log_sd_offset", "log_noise"):
        out[key] = theta[key] - math.log(loc_scale)
    return out


def test_windows_partition_the_raster_into_cores_of_one_window_shape():
    for shape, size, halo in (((50, 37), 16, 4), ((10, 40), 16, 5), ((16, 16), 16, 3)):
        tiles = windows(shape, size, halo)
        covered = np.zeros(shape, int)
        for w in tiles:
            covered[w.cy0:w.cy1, w.cx0:w.cx1] += 1
            assert w.shape == tiles[0].shape
            assert w.y0 <= w.cy0 and w.cy1 <= w.y1 and w.x0 <= w.cx0 and w.cx1 <= w.x1
            # each core has its halo where the raster allows it
            assert w.cy0 - w.y0 >= min(halo, w.cy0) and w.y1 - w.cy1 >= min(halo,
                                                                             shape[0] - w.cy1)
        assert (covered == 1).all()
    with pytest.raises(InputError, match="halo"):
        windows((30, 30), 8, 4)


@pytest.fixture(scope="module")
def stack():
    return _stack()


def _fixed(stack, **kw):
    _, y, times = stack
    scale = float(np.nanstd(y))
    # the exact posterior at θ, as the references have it
    kw = {"calibrate": False, "local_scale": False, "large_scales": None, **kw}
    est = SpaceTimeRegressor(optimize=False, params=_standardised(THETA, scale), **kw)
    return est.fit(y, times)


def test_tiles_on_a_local_cluster_give_this_processs_moments(stack, monkeypatch):
    """#43: with a dask client (``geogp fit --workers N``) the posterior's tiles run on its
    workers, each from its window of the stack alone; the moments are this process's, every
    tile's REML factor included (local_scale), to rounding. A few windows are sent ahead at
    a time (TASKS_AHEAD, 3 here), and the tiles still come back in order."""
    from distributed import Client, LocalCluster, get_task_stream

    from geogp.models.spacetime import regressor

    monkeypatch.setattr(regressor, "TASKS_AHEAD", 3)
    here = _fixed(stack, tile=10, halo=3, local_scale=True, scheduler=None)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        with get_task_stream(client) as tasks:
            there = _fixed(stack, tile=10, halo=3, local_scale=True, scheduler=client)
        assert len(client.scheduler_info()["workers"]) == 2
    tiles = windows(stack[1].shape[1:], 10, 3)
    ran = [t for t in tasks.data if "tile_task" in str(t["key"])]
    assert len(tiles) > 2 and len(ran) == len(tiles)  # every tile on a worker
    assert len({t["worker"] for t in ran}) == 2
    for a, b in ((here.mean_, there.mean_), (here.sd_latent_, there.sd_latent_),
                 (here.sd_observed_, there.sd_observed_)):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_tiles_converge_to_the_whole_stacks_posterior_as_the_halo_grows(stack):
    """The posterior on 12-cell tiles (every date) against the whole stack's, at θ fixed:
    every error shrinks as the halo grows; at 6 cells (1.5 ranges) the means are within 5 %
    of a posterior sd and the sds within 2 %."""
    whole = _fixed(stack, tile=64)
    errors = []
    for halo in (2, 6):
        tiled = _fixed(stack, tile=12 + 2 * halo, halo=halo)
        errors.append((np.max(np.abs(tiled.mean_ - whole.mean_) / whole.sd_latent_),
                       np.max(np.abs(tiled.sd_latent_ / whole.sd_latent_ - 1.0))))
    errors = np.array(errors)
    assert (np.diff(errors, axis=0) < 0).all(), errors
    assert errors[-1, 0] < 0.05 and errors[-1, 1] < 0.02, errors


def test_tiles_computed_in_threads_equal_those_computed_one_by_one(stack):
    """Two threads, each with its own factor, give the serial tiles' moments to rounding."""
    serial = _fixed(stack, tile=12, halo=3, threads=1)
    threaded = _fixed(stack, tile=12, halo=3, threads=2)
    np.testing.assert_allclose(threaded.mean_, serial.mean_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(threaded.sd_latent_, serial.sd_latent_, rtol=1e-10)


def test_the_fit_finds_a_likelihood_at_least_the_true_parameters_and_near_them(stack):
    """REML over the whole stack (one window): the optimum is at least as likely as the
    truth, and the ranges, sds, time scale and noise land within a factor 1.6 of it."""
    _, y, times = stack
    est = SpaceTimeRegressor(tile=64, fit_size=64, maxiter=80).fit(y, times)
    obs = np.isfinite(y)
    steps, rows, cols = np.nonzero(obs)
    z = (y[obs] - est.loc_) / est.scale_
    problem = make_problem(y.shape[1:], (1.0, 1.0), times, rows * y.shape[2] + cols, steps, z,
                           np.ones((z.size, 1)), Solver("cholmod"))
    truth = _standardised(THETA, est.scale_)
    assert (float(log_marginal_likelihood(est.params_, problem))
            >= float(log_marginal_likelihood(truth, problem)) - 1e-6)
    for key in ("log_range", "log_sd", "log_tau", "log_range_mean", "log_sd_mean", "log_noise"):
        assert abs(est.params_[key] - truth[key]) < math.log(1.6), key


def _front(y, times, **kw):
    """``geogp.fit`` on the stack at the true θ (no refit), warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return geogp.fit(_as_da(y, times), model="spacetime", optimize=False,
                         params=_standardised(THETA, float(np.nanstd(y))), **kw)


def _as_da(y, times, dim="time"):
    coords = {"y": 500.0 - 30.0 * np.arange(y.shape[1]), "x": 30.0 * np.arange(y.shape[2])}
    if times is not None:
        coords[dim] = pd.Timestamp("2021-03-01") + pd.to_timedelta(times, "D")
    return xr.DataArray(y, dims=(dim, "y", "x"), coords=coords).rio.write_crs(32633)


def test_the_front_end_fits_a_stack_jointly_in_the_users_units(stack):
    """geogp.fit(stack, model="spacetime"): one joint fit; predictions (time, y, x) are the
    estimator's posterior in data units; ranges in metres, time scales in days (the dates'
    steps, not their index: the same stack with dates 8 days apart or 16 gives τ twice)."""
    _, y, times = stack
    opts = {"optimize": False, "tile": 64, "calibrate": False, "local_scale": False}
    scale = float(np.nanstd(y))
    est = SpaceTimeRegressor(params=_standardised(THETA, scale), **opts).fit(y, times)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(_as_da(y, times), model="spacetime",
                          params=_standardised(THETA, scale), **opts)
    pred = model.predict()
    assert pred["mean"].dims == ("time", "y", "x") and model.model_ == "spacetime"
    np.testing.assert_allclose(pred["mean"].values, est.mean_, rtol=1e-10)
    np.testing.assert_allclose(pred["std_latent"].values, est.sd_latent_, rtol=1e-10)
    table = model.hyperparameters()
    assert table["lengthscale_y"].iloc[0] == pytest.approx(4.0 * 30.0)
    assert table["noise_sd"].iloc[0] == pytest.approx(0.1)


def test_a_date_without_data_is_kept_and_predicted_from_its_neighbours_in_time(stack):
    f, y, times = stack
    y = y.copy()
    y[4] = np.nan
    est = _fixed((f, y, times), tile=64)
    assert np.isfinite(est.mean_[4]).all()
    # wider than on its observed neighbours, yet far below the field's own spread
    assert est.sd_latent_[4].mean() > est.sd_latent_[[3, 5]].mean()
    assert float(np.sqrt(np.mean((est.mean_[4] - f[4]) ** 2))) < 0.5 * float(f[4].std()
                                                                             + TRUE["sd"])


@pytest.mark.parametrize(("dates", "message"), [
    ([0.0, 8.0, 8.0, 16.0], "repeats"), ([0.0, 16.0, 8.0, 24.0], "goes back")])
def test_bad_dates_are_refused_in_one_line(dates, message):
    _, y, _ = _stack(shape=(6, 7), times=np.arange(4) * 8.0)
    with pytest.raises(InputError, match=message):
        geogp.fit(_as_da(y, np.array(dates)), model="spacetime")


def test_a_stack_that_is_not_a_time_series_is_refused():
    _, y, _ = _stack(shape=(6, 7), times=np.arange(4) * 8.0)
    with pytest.raises(InputError, match="not time"):
        geogp.fit(_as_da(y, None, dim="band"), model="spacetime")
    with pytest.raises(InputError, match="one image"):
        geogp.fit(_as_da(y[:1], np.zeros(1)).isel(time=0), model="spacetime")


def test_a_tile_without_data_gets_the_prior_around_the_stacks_mean(stack):
    """A tile with no observation at any date (land in a sea-surface stack) is predicted by
    the prior: the stack's mean, and an sd at least that of every cell with data in reach."""
    f, y, times = stack
    y = y.copy()
    y[:, :, :8] = np.nan  # the first 8 columns never observed: one 8-column tile core
    est = _fixed((f, y, times), tile=8, halo=0)
    empty = est.mean_[:, :, :8]
    np.testing.assert_allclose(empty, est.loc_)
    assert (est.sd_latent_[:, :, :8].min() >= est.sd_latent_[:, :, 8:].max())


def test_a_lon_lat_stack_with_float32_coordinates_predicts_on_its_own_cells(stack):
    """Satellite products store lon/lat as float32: the prediction grid (the input's own)
    still matches the fitted cells."""
    _, y, times = stack
    da = xr.DataArray(y, dims=("time", "lat", "lon"), coords={
        "time": pd.Timestamp("2021-03-01") + pd.to_timedelta(times, "D"),
        "lat": (36.0 - 0.01 * np.arange(y.shape[1])).astype(np.float32),
        "lon": (-5.0 + 0.01 * np.arange(y.shape[2])).astype(np.float32)}).rio.write_crs(4326)
    scale = float(np.nanstd(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = geogp.fit(da, model="spacetime", optimize=False, tile=64,
                         params=_standardised(THETA, scale)).predict()
    assert np.isfinite(pred["mean"].values).all() and (pred["std"].values > 0).all()


def test_samples_of_a_stack_in_one_tile_have_the_dense_posterior_covariance(stack):
    """One tile over the whole stack: 4,000 samples at 40 random (date, cell) values,
    whitened by the dense universal-kriging covariance there, are independent standard
    normals (mean and every covariance entry within 5 Monte-Carlo sds)."""
    est = _fixed(stack, tile=64)
    n = 4000
    draws = est.sample(n, seed=0)
    assert draws.shape == (n, *est.shape_)
    picked = np.random.default_rng(5).choice(draws[0].size, 40, replace=False)
    dev = (draws.reshape(n, -1)[:, picked] - est.mean_.reshape(-1)[picked]) / est.scale_
    cov = dense_posterior_covariance(np.isfinite(stack[1]), stack[2], est.params_, picked)
    w = sla_solve_triangular(np.linalg.cholesky(cov), dev.T, lower=True).T
    err = w.T @ w / n - np.eye(picked.size)
    assert np.abs(w.mean(axis=0)).max() < 5 / math.sqrt(n)
    assert np.abs(np.diag(err)).max() < 5 * math.sqrt(2 / n)  # a variance's MC sd: √(2/n)
    assert np.abs(err - np.diag(np.diag(err))).max() < 5 / math.sqrt(n)


def test_samples_on_tiles_reproduce_the_mean_and_the_widened_sds(stack):
    """On 12-cell tiles with each tile's variance factor and a folds' factor of 1.5: the
    samples' mean is the posterior mean (within 5 Monte-Carlo sds everywhere) and their sd
    the predicted one, latent and of a new observation (within 3 % on average and 12 %
    at every value: 1,000 samples give each sd to ±2.2 %)."""
    est = _fixed(stack, tile=12, halo=3, local_scale=True)
    est.interval_scale_ = 1.5
    est.mean_, est.sd_latent_, est.noise_sd_ = est._moments(est.times_, est._block)
    n = 1000
    for observed, sd in ((False, est.sd_latent_), (True, est.sd_observed_)):
        draws = est.sample(n, seed=1, observed=observed)
        assert np.abs(draws.mean(axis=0) - est.mean_).max() < 5 * (sd / math.sqrt(n)).max()
        ratio = draws.std(axis=0) / sd
        assert abs(ratio.mean() - 1.0) < 0.03 and np.abs(ratio - 1.0).max() < 0.12, (
            ratio.mean(), ratio.min(), ratio.max())


def test_the_front_end_draws_joint_stack_samples_that_a_saved_model_repeats(stack, tmp_path):
    """model.sample(n) on a stack: (sample, time, y, x) in the data's units and coordinates,
    the dates jointly (a sample's anomalies persist from one date to the next as the model's
    AR(1) says), the same draws from the saved and loaded model with the same seed."""
    _, y, times = stack
    scale = float(np.nanstd(y))
    opts = {"optimize": False, "tile": 14, "halo": 3, "calibrate": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(_as_da(y, times), model="spacetime",
                          params=_standardised(THETA, scale), **opts)
    draws = model.sample(300, seed=4)
    assert draws.dims == ("sample", "time", "y", "x") and draws.shape[1:] == y.shape
    np.testing.assert_array_equal(draws["time"].values, model.predict()["time"].values)
    # cells under cloud on two consecutive dates 8 days apart (τ = 16 days): their deviations
    # from the mean correlate, where draws of each date alone would not
    dev = (draws - model.predict()["mean"]).values
    both = np.isnan(y[1:]) & np.isnan(y[:-1])
    a, b = dev[:, 1:][:, both], dev[:, :-1][:, both]
    corr = np.mean(a * b) / np.sqrt(np.mean(a**2) * np.mean(b**2))
    assert corr > 0.3, corr
    model.save(tmp_path / "m.npz")
    again = geogp.load_model(tmp_path / "m.npz").sample(300, seed=4)
    np.testing.assert_allclose(again.values, draws.values, rtol=1e-9, atol=1e-9)


def test_a_model_file_that_kept_every_dates_observation_sd_loads_the_same(stack, tmp_path,
                                                                          monkeypatch):
    """Files written before 2026-11-29 kept the sd of a new observation as a whole stack; the
    model now keeps its 2-D noise map. Such a file (written here by the old layout) loads
    with the same predictions, intervals included."""
    from geogp.models.spacetime import family as st_family
    from geogp.models.spacetime.codec import save_series

    _, y, times = stack
    model = _front(y, times, tile=10, halo=3)
    est = model.estimators_[0].model
    assert est.noise_sd_.shape == y.shape[1:]
    assert np.ptp(est.noise_sd_) > 0  # the tiles' variance factors differ

    def old_layout(dates, arrays, init):
        out = save_series(dates, arrays, init)
        del arrays["series/noise_sd"]
        arrays["series/sd_observed"] = dates[0].model.sd_observed_
        return out

    monkeypatch.setattr(st_family, "save_series", old_layout)
    model.save(tmp_path / "old.npz")
    monkeypatch.undo()
    before, after = model.predict(), geogp.load_model(tmp_path / "old.npz").predict()
    for name in ("mean", "std", "std_latent"):
        np.testing.assert_allclose(after[name].values, before[name].values, rtol=1e-12)
