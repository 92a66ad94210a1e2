"""#43: the space-time model's large scales (geogp/models/spacetime/large.py): a coarse joint
model of the block means, whose posterior the cells' model takes as its prior mean."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import geogp
from geogp.exceptions import InputError, ReadError
from geogp.models.spacetime import SpaceTimeRegressor
from geogp.models.spacetime.forecast import ForecastCovariance
from geogp.models.spacetime.large import (
    MIN_BLOCK_FRACTION,
    Upsampler,
    add_deviations,
    block_means,
    block_step,
    interpolation_weights,
    spans,
)
from tests.models.test_spacetime_estimator import THETA, _front, _stack, _standardised

pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.MissingCRSWarning")


def test_blocks_are_of_about_k_cells_without_a_sliver_at_the_edge():
    for n, k in ((100, 16), (11, 4), (37, 12), (12, 12), (5, 12)):
        blocks = spans(n, k)
        sizes = [b - a for a, b in blocks]
        assert blocks[0][0] == 0 and blocks[-1][1] == n
        assert all(a == b0 for (_, b0), (a, _) in itertools.pairwise(blocks))  # contiguous
        assert len(blocks) == max(1, round(n / k)) and max(sizes) - min(sizes) <= 1
        assert block_step(n, k) == pytest.approx(n / len(blocks))


def test_block_means_are_the_observed_means_of_each_block_or_nan_where_too_few():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((3, 11, 9))
    values[rng.random(values.shape) < 0.6] = np.nan
    out = block_means(values, 4)
    rows, cols = spans(11, 4), spans(9, 4)
    assert out.shape == (3, len(rows), len(cols))
    for t in range(3):
        for i, (y0, y1) in enumerate(rows):
            for j, (x0, x1) in enumerate(cols):
                block = values[t, y0:y1, x0:x1]
                seen = block[np.isfinite(block)]
                if seen.size >= max(1, MIN_BLOCK_FRACTION * block.size):
                    assert out[t, i, j] == pytest.approx(seen.mean(), rel=1e-12)
                else:
                    assert np.isnan(out[t, i, j])


def test_interpolation_is_linear_between_the_blocks_centres_and_constant_beyond():
    w = interpolation_weights(11, 4)  # blocks 0–3, 4–6, 7–10: centres 1.5, 5, 8.5
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    centres = np.array([1.5, 5.0, 8.5])
    cells = np.arange(11.0)
    inside = (cells >= 1.5) & (cells <= 8.5)
    np.testing.assert_allclose((w @ (2.0 * centres - 3.0))[inside], 2.0 * cells[inside] - 3.0)
    np.testing.assert_allclose(w[0], w[1])  # beyond the first centre: its value
    np.testing.assert_allclose(w[10], [0.0, 0.0, 1.0])
    up = Upsampler((11, 7), 4)
    plane = np.arange(6.0).reshape(3, 2)
    np.testing.assert_allclose(up.matrix() @ plane.ravel(), up.up(plane).ravel())


def _fit(y, times, **kw):
    scale = float(np.nanstd(y))
    kw = {"optimize": False, "params": _standardised(THETA, scale), "calibrate": False, **kw}
    return SpaceTimeRegressor(**kw).fit(y, times)


@pytest.fixture(scope="module")
def large():
    """A 36 × 40 stack of 8 dates on 12-cell tiles (large scales from 12 × 12 blocks)."""
    _, y, times = _stack(shape=(36, 40), seed=3)
    return y, times, _fit(y, times, tile=12, halo=3)


def test_the_moments_are_the_coarse_models_plus_the_cells_model_of_the_rest(large):
    """mean = the coarse mean interpolated + the cells' posterior of the standardised stack
    less it, at θ; latent variance = the two latent variances summed (independent), each
    widened as its own model says."""
    y, times, est = large
    assert est.block_ == 12 and est.coarse_ is not None
    coarse = est.coarse_
    standard = (y - est.loc_) / est.scale_
    np.testing.assert_allclose(coarse.values_ * coarse.scale_ + coarse.loc_,
                               block_means(standard, 12), rtol=1e-12, equal_nan=True)
    up = Upsampler(y.shape[1:], 12)
    big = np.stack([up.up(p) for p in coarse.mean_])
    big_sd = np.stack([up.up(p) for p in coarse.sd_latent_])
    rest = (standard - big) * est.scale_ + est.loc_  # the stack less the large scales
    cells = _fit(rest, times, tile=12, halo=3, large_scales=None)
    np.testing.assert_allclose(est.mean_, cells.mean_ + est.scale_ * big, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(est.sd_latent_**2, cells.sd_latent_**2 + (est.scale_ * big_sd)**2,
                               rtol=1e-9)
    np.testing.assert_allclose(est.noise_sd_, cells.noise_sd_, rtol=1e-9)


def test_a_dates_large_anomaly_reaches_the_cells_deep_in_its_cloud():
    """Each date shifted by its own smooth large-scale anomaly (a plane, tilted and offset
    differently every date, independent between dates), and a 20 × 20 cloud over the centre
    of one date:
    on 12-cell tiles no tile sees beyond its 3-cell halo, so without the large scales the
    cloud's centre has only the other dates; with them it has the date's own anomaly."""
    f, y, times = _stack(shape=(48, 48), seed=5, cloud=0.1)
    rng = np.random.default_rng(6)
    yy, xx = np.meshgrid(np.arange(48) / 47.0, np.arange(48) / 47.0, indexing="ij")
    tilt = 2.0 * rng.standard_normal((times.size, 3))
    truth_shift = (tilt[:, :1, None] * yy + tilt[:, 1:2, None] * xx + tilt[:, 2:, None])
    y = y + truth_shift
    clean = f + truth_shift
    y[4, 14:34, 14:34] = np.nan
    deep = np.zeros(y.shape, bool)
    deep[4, 19:29, 19:29] = True
    err = {}
    for large_scales in ("auto", None):
        est = _fit(y, times, tile=12, halo=3, large_scales=large_scales)
        err[large_scales] = math.sqrt(np.mean((est.mean_ - clean)[deep] ** 2))
    assert err["auto"] < 0.5 * err[None], err


def test_predict_dates_and_the_forecast_carry_the_large_scales(large):
    """At a fitted date predict_dates gives the fitted moments; after the series the forecast
    is the coarse model's forecast interpolated plus the cells' model's of the rest, and the
    placement covariance's columns are consistent with its variance."""
    y, times, est = large
    mean, latent, _ = est.predict_dates(times[[2, 5]])
    np.testing.assert_allclose(mean, est.mean_[[2, 5]], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(latent, est.sd_latent_[[2, 5]], rtol=1e-8)
    nxt = float(times[-1] + 8.0)
    fc = est.forecast(nxt)
    cm, cs, _ = est.coarse_.predict_dates([nxt])
    up = Upsampler(y.shape[1:], 12)
    rest = est.values_ * est.scale_ + est.loc_  # the stack less the large scales
    cells = _fit(rest, times, tile=12, halo=3, large_scales=None).forecast(nxt)
    np.testing.assert_allclose(fc.mean, cells.mean + est.scale_ * up.up(cm[0]), rtol=1e-9)
    np.testing.assert_allclose(fc.sd_latent**2,
                               cells.sd_latent**2 + (est.scale_ * up.up(cs[0]))**2, rtol=1e-9)
    cov = ForecastCovariance(fc)
    sites = np.array([5, 700, 1300])
    cols = cov.prior_columns(sites)
    np.testing.assert_allclose(cols[sites, np.arange(3)], cov.variance()[sites], rtol=1e-9)
    x = np.random.default_rng(0).standard_normal((cov.n, 2))
    np.testing.assert_allclose(cov.apply(x)[sites], (cols.T @ x), rtol=1e-9, atol=1e-12)


def test_interpolated_deviations_have_the_sd_maps_variance_between_the_centres():
    """Draws of a coarse field correlated more along x than y (its sd varying), interpolated by
    add_deviations: every cell's variance is (W_y sd W_xᵀ)² within Monte-Carlo error, also
    midway between the centres, where plain interpolation of the draws falls short."""
    rng = np.random.default_rng(1)
    cy, cx, n = 5, 6, 20_000
    iy, ix = np.meshgrid(np.arange(cy), np.arange(cx), indexing="ij")
    corr = np.exp(-np.abs(iy.ravel()[:, None] - iy.ravel()[None]) / 0.7
                  - np.abs(ix.ravel()[:, None] - ix.ravel()[None]) / 2.5)
    sd = 0.5 + rng.random((1, cy, cx))
    z = (np.linalg.cholesky(corr) @ rng.standard_normal((cy * cx, n))).T.reshape(n, 1, cy, cx)
    up = Upsampler((5 * 8, 6 * 8), 8)
    out = np.zeros((n, 1, 40, 48))
    add_deviations(out, z * sd[None], sd, up, 2.0)
    want = (2.0 * up.up(sd[0])) ** 2
    ratio = out[:, 0].var(axis=0) / want
    assert np.abs(ratio - 1.0).max() < 0.05, (ratio.min(), ratio.max())
    plain = np.stack([up.up(d) for d in z[:2000, 0] * sd[0]]).var(axis=0) / (want / 4.0)
    assert plain.min() < 0.8  # what the rescaling repairs


def test_samples_spread_as_the_sds_say_with_the_large_scales(large):
    """The coarse model's draws (independent of the cells') add to the cells' draws: the
    samples' variance reproduces sd_latent_² (within Monte-Carlo error)."""
    est = large[2]
    draws = est.sample(600, seed=2)
    ratio = draws.var(axis=0) / est.sd_latent_**2
    assert abs(ratio.mean() - 1.0) < 0.03, ratio.mean()
    bound = 5 * est.sd_latent_.max() / math.sqrt(600)
    assert np.abs(np.mean(draws, axis=0) - est.mean_).max() < bound


def test_one_tile_has_no_large_scales_and_bad_sides_are_refused():
    _, y, times = _stack(shape=(18, 20), seed=1)
    assert _fit(y, times).block_ == 0  # one tile covers the raster
    for bad in (1, "big", 2.5, True):
        with pytest.raises(InputError, match="large_scales"):
            SpaceTimeRegressor(large_scales=bad).fit(y, times)
    small, large_ = (SpaceTimeRegressor(tile=12, large_scales=k).memory_estimate((8, 400, 400))
                     for k in (None, 4))
    assert large_ - small == pytest.approx(4.5 * 8 * 8 * 100 * 100, rel=1e-9)


def test_a_saved_model_with_large_scales_predicts_samples_and_forecasts_the_same(large,
                                                                                  tmp_path):
    y, times, _ = large
    model = _front(y, times, tile=12, halo=3)
    assert model.estimators_[0].model.block_ == 12
    model.save(tmp_path / "m.npz")
    again = geogp.load_model(tmp_path / "m.npz")
    before, after = model.predict(), again.predict()
    for name in ("mean", "std", "std_latent"):
        np.testing.assert_allclose(after[name].values, before[name].values, rtol=1e-12)
    np.testing.assert_allclose(again.sample(5, seed=1).values, model.sample(5, seed=1).values,
                               rtol=1e-9, atol=1e-9)
    t = before["time"].values[-1] + np.timedelta64(8, "D")
    np.testing.assert_allclose(again.predict(time=t)["std"].values,
                               model.predict(time=t)["std"].values, rtol=1e-9)


def test_a_model_file_whose_block_and_coarse_model_disagree_is_refused(large, tmp_path,
                                                                       monkeypatch):
    from geogp.models.spacetime import family as st_family
    from geogp.models.spacetime.codec import save_series

    y, times, _ = large
    model = _front(y, times, tile=12, halo=3)

    def damaged(dates, arrays, init):
        out = save_series(dates, arrays, init)
        out[0]["coarse"] = None
        return out

    monkeypatch.setattr(st_family, "save_series", damaged)
    model.save(tmp_path / "bad.npz")
    monkeypatch.undo()
    with pytest.raises(ReadError, match="disagree"):
        geogp.load_model(tmp_path / "bad.npz")


def test_a_folds_large_scales_leave_its_hidden_values_out(large):
    """The folds that calibrate the intervals see the large scales without the values they
    hide: the block means the fold touches are averaged again without them, and the coarse
    posterior at its θ follows (against a coarse model fitted to those block means at that
    θ)."""
    y, times, est = large
    w = est._calibration_windows()[0]
    hidden = np.zeros((times.size, *w.shape), bool)
    hidden[2, 3:11, 4:12] = hidden[5, 0:6, 6:12] = True
    hidden &= np.isfinite(est.values_[:, w.y0:w.y1, w.x0:w.x1])
    mean, latent = est._large_without([(w, hidden)])
    standard = (y - est.loc_) / est.scale_
    full = np.zeros(y.shape, bool)
    full[:, w.y0:w.y1, w.x0:w.x1] = hidden
    coarse = est.coarse_
    again = SpaceTimeRegressor(optimize=False, params=coarse.params_, calibrate=False,
                               tile=12, halo=3, large_scales=None)
    again.fit(block_means(np.where(full, np.nan, standard), 12), times,
              (coarse.unit_, coarse.h_[1] * coarse.unit_))
    np.testing.assert_allclose(mean, again.mean_, rtol=1e-9, atol=1e-9)
    # the sds through the coarse model itself (its tiles' variance factors are shrunk towards
    # 1, which is not invariant to a refit's own standardisation)
    reference = (block_means(np.where(full, np.nan, standard), 12) - coarse.loc_) / coarse.scale_
    _, sd, _ = coarse._moments(times, lambda w: reference[:, w.y0:w.y1, w.x0:w.x1])
    np.testing.assert_allclose(latent, sd, rtol=1e-9)
    assert np.abs(mean - coarse.mean_).max() > 1e-3  # the hidden values did move it


def test_a_model_file_from_before_the_large_scales_loads(tmp_path, monkeypatch):
    from geogp.models.spacetime import family as st_family
    from geogp.models.spacetime.codec import save_series

    _, y, times = _stack(shape=(18, 20), seed=1)
    model = _front(y, times)

    def old_layout(dates, arrays, init):
        out = save_series(dates, arrays, init)
        del out[0]["block"], out[0]["coarse"]
        out[0]["init"].pop("large_scales")
        return out

    monkeypatch.setattr(st_family, "save_series", old_layout)
    model.save(tmp_path / "old.npz")
    monkeypatch.undo()
    again = geogp.load_model(tmp_path / "old.npz")
    assert again.estimators_[0].model.block_ == 0
    np.testing.assert_allclose(again.predict()["std"].values, model.predict()["std"].values,
                               rtol=1e-12)
