"""Placement at a date of a stack (#43 item 5): the space-time posterior at the next date, its
covariance columns and the sequential conditioning on sites against dense algebra, the greedy
picks against a brute-force greedy on the dense covariance, tiles against the whole stack,
and the front end (``suggest_sites(time=)``, ``geogp place STACK``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.cli import main
from geogp.exceptions import InputError
from geogp.frontend.api_placement import place
from geogp.models.spacetime import SpaceTimeRegressor
from geogp.models.spacetime.forecast import ForecastCovariance
from geogp.placement import Candidates, suggest_sites
from tests.models.test_spacetime_estimator import THETA, _stack, _standardised

from _reference.spacetime_dense import dense_posterior_covariance

pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.MissingCRSWarning")

TIMES = np.array([0.0, 8.0, 16.0, 40.0, 48.0])  # a missing date between 16 and 40
NEXT = 56.0


def _fixed(shape, seed, **kw):
    """A space-time model at the true θ on a simulated stack (no refit), its grid axes set."""
    _, y, times = _stack(shape=shape, times=TIMES, seed=seed)
    kw = {"calibrate": False, "local_scale": False, "large_scales": None, **kw}
    est = SpaceTimeRegressor(optimize=False,
                             params=_standardised(THETA, float(np.nanstd(y))), **kw)
    est.fit(y, times)
    est.axes_ = [np.arange(shape[0], dtype=np.float64), np.arange(shape[1], dtype=np.float64)]
    return est, y


def _dense_at(est, y, time):
    """The dense universal-kriging covariance of f at ``time`` (after the series) over every
    cell, with the forecast's widening g (its sds' factor) on both sides, and the noise
    variance of a measurement at each cell (standardised units)."""
    n = y.shape[1] * y.shape[2]
    observed = np.concatenate([np.isfinite(y), np.zeros((1, *y.shape[1:]), bool)])
    dense = dense_posterior_covariance(observed, np.append(est.times_, time), est.params_,
                                       y.shape[0] * n + np.arange(n))
    fc = est.forecast(time)
    noise = ((fc.sd_observed**2 - fc.sd_latent**2) / est.scale_**2).ravel()
    g = np.sqrt(noise / math.exp(2 * est.params_["log_noise"]))
    return fc, dense * np.outer(g, g), noise


@pytest.fixture(scope="module")
def one_tile():
    """An 8 × 9 stack in one tile, its sds widened by each tile's factor and the folds'."""
    est, y = _fixed((8, 9), 1, local_scale=True)
    est.interval_scale_ = 1.3
    return est, y, *_dense_at(est, y, NEXT)


def test_forecast_covariance_is_the_dense_posterior_at_the_next_date(one_tile):
    est, _, fc, dense, noise = one_tile
    cov = ForecastCovariance(fc)
    assert noise.min() > math.exp(2 * est.params_["log_noise"])  # widened: g > 1
    scale = np.abs(dense).max()
    assert np.abs(cov.variance() - np.diag(dense)).max() < 1e-10 * scale
    cells = np.array([0, 17, 40, 71])
    assert np.abs(cov.columns(cells) - dense[:, cells]).max() < 1e-10 * scale
    x = np.random.default_rng(0).standard_normal((cov.n, 3))
    assert np.abs(cov.apply(x) - dense @ x).max() < 1e-10 * np.abs(dense @ x).max()
    assert np.allclose(cov.noise, noise, rtol=1e-12)


def test_sites_condition_the_forecast_as_dense_measurements_at_that_date_would(one_tile):
    """Three sites absorbed one by one give the dense posterior given measurements there
    (noise σ_s² = g_s² σ²): variances, columns and products."""
    _, _, fc, dense, noise = one_tile
    cov = ForecastCovariance(fc)
    sites = [12, 50, 13]
    for s in sites:
        cov.add(s)
    k = dense[:, sites]
    after = dense - k @ np.linalg.solve(dense[np.ix_(sites, sites)] + np.diag(noise[sites]),
                                        k.T)
    scale = np.abs(dense).max()
    assert np.abs(cov.variance() - np.diag(after)).max() < 1e-10 * scale
    assert np.abs(cov.columns([3, 60]) - after[:, [3, 60]]).max() < 1e-10 * scale
    x = np.random.default_rng(1).standard_normal((cov.n, 2))
    assert np.abs(cov.apply(x) - after @ x).max() < 1e-10 * np.abs(after @ x).max()
    assert np.diag(after)[sites].max() < noise[sites].min()  # measured: below the noise


def _brute_force(c, noise, strategy, k):
    """The greedy on a dense covariance: each pick the best score, then conditioned."""
    c, picks = c.copy(), []
    for _ in range(k):
        d = np.diag(c) + noise
        if strategy == "variance":
            score = d.copy()
        elif strategy == "reduction":
            score = (c**2).sum(axis=0) / d
        else:  # the marginal mi: −½ Σ_i log(1 − C_ia² / ((C_ii + σ_i²) d_a))
            score = -0.5 * np.log1p(-c**2 / np.outer(np.diag(c) + noise, d)).sum(axis=0)
        score[picks] = -np.inf
        a = int(np.argmax(score))
        picks.append(a)
        c = c - np.outer(c[:, a], c[a]) / d[a]
    return picks


@pytest.mark.parametrize("strategy", ["variance", "reduction", "mi"])
def test_picks_are_the_brute_force_greedy_on_the_dense_forecast(one_tile, strategy):
    est, _, fc, dense, noise = one_tile
    sites = suggest_sites(fc, Candidates.grid(est.axes_), 4, strategy=strategy,
                          min_distance=0)
    assert sites.attrs["model"] == "spacetime" and not sites.attrs["targets_thinned"]
    picks = _brute_force(dense, noise, strategy, 4)
    assert sites["index"].tolist() == picks
    std = np.sqrt(np.diag(dense))[picks[0]] * est.scale_  # data units
    assert sites["std_before"].iloc[0] == pytest.approx(std, rel=1e-9)


def test_on_tiles_columns_approach_the_whole_stack_as_the_halo_grows():
    """Tile by tile a site's column stops at its tile's window: the error shrinks as the halo
    grows; what stays is the date's offset, which every cell shares."""
    errors, dense = [], None
    for halo in (2, 4, 6):
        est, y = _fixed((20, 22), 2, tile=14, halo=halo)
        if dense is None:  # the whole stack's: the same θ and data for every halo
            _, dense, _ = _dense_at(est, y, NEXT)
        cov = ForecastCovariance(est.forecast(NEXT))
        cells = np.arange(0, cov.n, 7)
        errors.append(np.abs(cov.columns(cells) - dense[:, cells]).max() / np.diag(dense).max())
        assert np.abs(cov.variance() - np.diag(dense)).max() < 0.05 * np.diag(dense).max()
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.06, errors


def test_a_pass_over_many_tiles_analyses_each_held_slot_once():
    """Tiles beyond those held at once reuse a slot's symbolic analysis (only the numeric
    factor is redone): two products over 12 tiles analyse at most HOLD_TILES patterns."""
    from geogp.linalg import cholmod
    from geogp.models.spacetime.forecast import HOLD_TILES

    est, _ = _fixed((20, 22), 4, tile=10, halo=2)
    cov = ForecastCovariance(est.forecast(NEXT))
    assert len(cov._tiles) >= 3 * HOLD_TILES
    x = np.ones((cov.n, 2))
    cov.apply(x)
    first = cov.apply(x)
    patterns = {id(dc.problem.pattern): dc.problem.pattern for dc, _ in cov._held.values()}
    analyses = [cholmod.analyze(p, ordering=est.ordering).backend.n_analyses
                for p in patterns.values()]
    assert len(patterns) == HOLD_TILES and max(analyses) == 1, analyses
    assert np.array_equal(first, cov.apply(x))  # refactorised tiles give the same products
    cov.release()


@pytest.fixture(scope="module")
def stack_da():
    """A 14 × 15 stack of 5 dates (UTM), a patch clouded on the last two dates."""
    _, y, times = _stack(shape=(14, 15), times=TIMES, seed=3)
    y[-2:, 3:9, 4:10] = np.nan
    dates = np.datetime64("2021-03-01") + times.astype("timedelta64[D]")
    da = xr.DataArray(y, dims=("time", "y", "x"), name="ndvi",
                      coords={"time": dates, "y": 9000.0 - 100.0 * np.arange(14),
                              "x": 300000.0 + 100.0 * np.arange(15)})
    return da.rio.write_crs("EPSG:32633")


@pytest.fixture(scope="module")
def stack_model(stack_da):
    return geogp.fit(stack_da, maxiter=15)


def test_suggest_sites_on_a_stack_places_at_the_next_date(stack_model):
    """The default date is the next one (the last plus the median step, 8 days); "variance"
    picks the cell whose new measurement is the most uncertain at that date, with the std
    that predict(time=) gives there; the patch clouded on the last dates draws the
    reduction's sites."""
    geo = stack_model
    assert geo.model_ == "spacetime"
    sites = geo.suggest_sites(3, strategy="variance")
    assert sites.attrs["time"] == "2021-04-26" and (sites["time"] == "2021-04-26").all()
    pred = geo.predict(time=np.datetime64("2021-04-26")).squeeze("time")
    std = pred["std"].values
    iy, ix = np.unravel_index(int(np.nanargmax(std)), std.shape)
    assert (sites["x"].iloc[0], sites["y"].iloc[0]) == (pred.x.values[ix], pred.y.values[iy])
    assert sites["std_before"].iloc[0] == pytest.approx(
        float(pred["std_latent"].values[iy, ix]), rel=1e-9)
    near = geo.suggest_sites(2, strategy="reduction")
    rows = (9000.0 - near["y"].to_numpy()) / 100.0
    cols = (near["x"].to_numpy() - 300000.0) / 100.0
    assert np.all((rows >= 1) & (rows <= 10) & (cols >= 2) & (cols <= 11)), near
    later = geo.suggest_sites(2, time="2021-06-01", strategy="variance")
    assert later.attrs["time"] == "2021-06-01"
    assert later["std_before"].iloc[0] > sites["std_before"].iloc[0]  # further: wider


def test_placement_in_time_refuses_what_it_cannot_do(stack_da, stack_model):
    with pytest.raises(InputError, match="one date"):
        stack_model.suggest_sites(2, time=["2021-04-26", "2021-05-04"])
    with pytest.raises(InputError, match=r"valid dates|dates like"):
        stack_model.suggest_sites(2, time="next week")
    with pytest.raises(InputError, match="got the number"):  # not ns since 1970
        stack_model.suggest_sites(2, time=56)
    joint = stack_model.estimators_[0].model
    with pytest.raises(InputError, match="at one date"):
        suggest_sites(joint, Candidates.grid(joint.axes_), 2)
    alone = geogp.fit(stack_da.isel(time=-1), maxiter=5)
    with pytest.raises(InputError, match="stack fitted jointly"):
        alone.suggest_sites(2, time="2021-04-26")
    import pandas as pd

    table = pd.DataFrame({"x": [300100.0], "y": [8900.0], "value": [10.0]})
    with pytest.raises(InputError, match="measured points on a stack"):
        place(stack_da, 2, measured=table)
    with pytest.raises(InputError, match="fitted jointly"):
        place(stack_da, 2, model="lattice")
    with pytest.raises(InputError, match="has none"):
        place(stack_da.isel(time=0), 2, time="2021-04-26")


def test_geogp_place_on_a_stack_writes_sites_for_the_date(stack_da, tmp_path, capsys):
    path = tmp_path / "stack.nc"
    stack_da.to_netcdf(path)
    out = tmp_path / "sites.geojson"
    code = main(["place", str(path), "--n", "2", "--out", str(out), "--time", "2021-05-10",
                 "--maxiter", "10", "--quiet"])
    assert code == 0
    features = json.loads(out.read_text())["features"]
    assert len(features) == 2
    assert all(f["properties"]["time"] == "2021-05-10" for f in features)
    x, y = features[0]["geometry"]["coordinates"]
    assert 300000.0 <= x <= 301400.0 and 7700.0 <= y <= 9000.0


def test_a_stack_without_time_coordinates_places_at_the_next_step(stack_da):
    """A time dimension without coordinates is a stack of steps 0, 1, …: the sites are for
    the next step."""
    geo = geogp.fit(stack_da.drop_vars("time"), maxiter=5)
    assert geo.model_ == "spacetime"
    sites = geo.suggest_sites(2, strategy="variance")
    assert sites.attrs["time"] == "5" and len(sites) == 2
    assert geo.suggest_sites(1, time=19032.25).attrs["time"] == "19032.25"  # every digit
