"""The space-time model's intervals checked on gap-shaped folds of windows spread over the
raster (#43: coverage 0.93–0.97 on real stacks, where the model's form is wrong): the factor is the
lower confidence bound of the 95 % quantile of the standardised errors over Z95, never below 1;
it is 1 on a draw of the model's own form and recovers most of the factor a θ that
understates the variance misses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geogp.models.spacetime import SpaceTimeRegressor
from geogp.models.spacetime.calibration import (
    ERRORS_PER_INDEPENDENT,
    MIN_HIDDEN,
    Z95,
    interval_scale,
    stack_gap_folds,
)
from tests.models.test_spacetime_estimator import THETA, _stack, _standardised


def test_the_scale_is_a_lower_bound_of_the_95_quantile_of_the_errors_over_z95():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(200_000)
    assert interval_scale(z) == 1.0  # calibrated: nothing to widen
    assert interval_scale(3.0 * z) == pytest.approx(3.0, rel=0.02)  # many errors: the 95 %
    assert interval_scale(0.5 * z) == 1.0  # never narrower than the model's own
    wide = np.abs(rng.standard_t(2, 2_000))
    level = 0.95 - 2.0 * np.sqrt(0.95 * 0.05 * ERRORS_PER_INDEPENDENT / wide.size)
    assert interval_scale(wide) == pytest.approx(np.quantile(wide, level) / Z95)
    assert interval_scale(wide) < np.quantile(wide, 0.95) / Z95  # few: a lower bound
    assert interval_scale(5.0 * z[:MIN_HIDDEN - 1]) == 1.0  # too few to say
    assert interval_scale(np.r_[3.0 * z, np.nan, np.inf]) == pytest.approx(
        interval_scale(3.0 * z), rel=1e-4)
    # a right model's errors, a few thousand at a time: never widened (the 95 % quantile
    # alone would be above Z95 half the time)
    assert all(interval_scale(rng.standard_normal(3000)) == 1.0 for _ in range(20))


def test_folds_hide_only_observed_cells_under_another_dates_clouds():
    _, y, _ = _stack(seed=3)
    obs = np.isfinite(y)
    hidden = stack_gap_folds(obs, 2, seed=1)
    assert hidden.shape == (2, *obs.shape) and hidden.any()
    assert not (hidden & ~obs).any()
    for k in range(obs.shape[0]):  # every hidden cell was under cloud on some other date
        others = np.delete(obs, k, axis=0)
        assert (~others[:, hidden[0, k]]).any(axis=0).all()
    whole = stack_gap_folds(obs, 1, fraction=1.0, seed=1)[0]  # another date's whole mask
    for k in range(obs.shape[0]):
        assert any(np.array_equal(whole[k], obs[k] & ~obs[j])
                   for j in range(obs.shape[0]) if j != k)


def test_a_draw_of_the_models_own_form_is_left_nearly_as_it_is():
    _, y, times = _stack(shape=(24, 24), seed=5)
    scale = float(np.nanstd(y))
    est = SpaceTimeRegressor(optimize=False, params=_standardised(THETA, scale), tile=64)
    est.fit(y, times)
    assert est.interval_scale_ == 1.0


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_a_theta_that_understates_the_variance_is_widened_by_the_factor_it_misses(seed):
    """θ with every sd 2.5× too small, as a fit of the wrong form can end: the posterior mean
    is the same and every sd 2.5× too small, so 2.5 is the factor to find. Without the tiles'
    own variance factors (local_scale=False), the folds find 75–110 % of it (a lower
    confidence bound: on one 24² window of 8 dates they widen by less than they could), and
    the hidden values' coverage goes from below 0.6 to above 0.8 (one fold of clouds is a
    noisy score: its cells' errors are correlated)."""
    _, y, times = _stack(shape=(24, 24), seed=seed)
    obs = np.isfinite(y)
    hidden = stack_gap_folds(obs, 1, seed=11)[0]  # scored on values the fit never sees
    train = np.where(hidden, np.nan, y)
    narrow = _standardised(THETA, float(np.nanstd(train)))
    for key in ("log_sd", "log_sd_mean", "log_sd_offset", "log_noise"):
        narrow[key] -= math.log(2.5)
    kw = {"tile": 64, "optimize": False, "params": narrow, "local_scale": False}
    plain = SpaceTimeRegressor(calibrate=False, **kw).fit(train, times)
    folds = SpaceTimeRegressor(**kw).fit(train, times)
    assert 0.75 * 2.5 <= folds.interval_scale_ <= 1.1 * 2.5

    def covered(est):
        return float(np.mean((np.abs(y - est.mean_) / est.sd_observed_)[hidden] < Z95))

    assert covered(plain) < 0.6 and covered(folds) > 0.8
    np.testing.assert_array_equal(folds.mean_, plain.mean_)
    np.testing.assert_allclose(folds.sd_observed_, folds.interval_scale_ * plain.sd_observed_,
                               rtol=1e-12)


def _narrow(train):
    theta = _standardised(THETA, float(np.nanstd(train)))
    for key in ("log_sd", "log_sd_mean", "log_sd_offset", "log_noise"):
        theta[key] -= math.log(2.5)
    return theta


def test_the_tiles_own_variance_factor_finds_what_theta_misses_before_the_folds_do():
    """The same θ, every sd 2.5× too small, with local_scale (the default): each tile's REML
    factor restores the sds (2.5 within 10 %), and the folds then find nothing to widen."""
    _, y, times = _stack(shape=(24, 24), seed=7)
    kw = {"tile": 14, "halo": 4, "optimize": False, "params": _narrow(y), "large_scales": None}
    plain = SpaceTimeRegressor(calibrate=False, local_scale=False, **kw).fit(y, times)
    local = SpaceTimeRegressor(**kw).fit(y, times)
    ratio = local.sd_observed_ / plain.sd_observed_
    assert np.all(np.abs(ratio / 2.5 - 1.0) < 0.1), (ratio.min(), ratio.max())
    assert local.interval_scale_ < 1.1
    np.testing.assert_array_equal(local.mean_, plain.mean_)


def test_a_variance_that_changes_across_the_raster_is_followed_by_the_tiles_factors():
    """Anomalies 3× larger on the right half than θ says: the right half's intervals come out
    wider than the left's, and the hidden values there are covered far better than with one
    variance for all."""
    f, y, times = _stack(shape=(20, 48), seed=4)
    rng = np.random.default_rng(5)
    extra = 2.0 * (f - f.mean(axis=0))  # the anomalies and offsets, tripled on the right
    right = np.zeros(f.shape[1:], bool)
    right[:, 24:] = True
    y = np.where(right, y + extra + 0.2 * rng.standard_normal(y.shape), y)
    obs = np.isfinite(y)
    hidden = stack_gap_folds(obs, 1, seed=2)[0]
    train = np.where(hidden, np.nan, y)
    theta = _standardised(THETA, float(np.nanstd(train)))
    kw = {"tile": 16, "halo": 4, "optimize": False, "params": theta, "calibrate": False}
    one = SpaceTimeRegressor(local_scale=False, **kw).fit(train, times)
    local = SpaceTimeRegressor(**kw).fit(train, times)
    ratio = local.sd_observed_ / one.sd_observed_
    assert np.median(ratio[:, right]) > 1.5 * np.median(ratio[:, ~right])

    def covered(est, where):
        z = np.abs(y - est.mean_) / est.sd_observed_
        return float(np.mean(z[hidden & where[None]] < Z95))

    assert covered(local, right) > covered(one, right) + 0.1


@pytest.mark.parametrize("shape", [(100, 100), (201, 301), (16, 100)])
def test_calibration_windows_spread_over_both_axes(shape):
    """The folds' windows reach every edge of the raster (rows and columns alike), within the
    count asked for; those without data are left out."""
    from geogp.models.spacetime.regressor import CALIBRATION_WINDOWS

    values = np.zeros((3, *shape))
    values[:, :, -10:] = np.nan  # the last columns never observed
    est = SpaceTimeRegressor()
    est.values_, est.shape_, est.fit_size_ = values, values.shape, 16
    got = est._calibration_windows()
    assert 0 < len(got) <= CALIBRATION_WINDOWS
    assert min(w.y0 for w in got) == 0 and max(w.y1 for w in got) == shape[0]
    assert min(w.x0 for w in got) == 0 and max(w.x1 for w in got) == shape[1]
    assert all(np.isfinite(values[0, w.y0:w.y1, w.x0:w.x1]).sum() >= 10 for w in got)
