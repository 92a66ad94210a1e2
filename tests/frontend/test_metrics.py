"""Metrics of docs/crossvalidation.md (scores), checked against numerical integration and scale
identities (T22)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from geogp.core import metrics
from geogp.exceptions import InputError


@pytest.mark.parametrize("y, mu, s", [(0.3, 0.0, 1.0), (-2.5, 0.4, 0.7), (10.0, 9.0, 3.0),
                                      (1.0, 1.0, 0.01)])
def test_crps_closed_form_matches_the_integral(y, mu, s):
    """CRPS = ∫ (F(t) − 1{t ≥ y})² dt, split at y so that each piece is smooth (T22)."""
    F = norm(mu, s).cdf
    below, _ = integrate.quad(lambda t: F(t) ** 2, -np.inf, y, epsabs=1e-13, epsrel=1e-12)
    above, _ = integrate.quad(lambda t: (1 - F(t)) ** 2, y, np.inf, epsabs=1e-13, epsrel=1e-12)
    assert metrics.crps_gaussian([y], [mu], [s]) == pytest.approx(below + above, rel=1e-8,
                                                                 abs=1e-12)


def test_scale_identities(rng):
    """On the standardised scale ×s_y gives RMSE, MAE, CRPS, IS; NLPD shifts by log s_y;
    coverage is unchanged (docs/crossvalidation.md (scores), eqs. 2.118–2.119)."""
    y, mu = rng.normal(size=200), rng.normal(size=200)
    s = rng.uniform(0.5, 2.0, size=200)
    m, sy = 3.7, 42.0
    Y, MU, S = m + sy * y, m + sy * mu, sy * s
    for f in (metrics.crps_gaussian, metrics.interval_score):
        assert f(Y, MU, S) == pytest.approx(sy * f(y, mu, s), rel=1e-12)
    for f in (metrics.rmse, metrics.mae):
        assert f(Y, MU) == pytest.approx(sy * f(y, mu), rel=1e-12)
    assert metrics.nlpd(Y, MU, S) == pytest.approx(metrics.nlpd(y, mu, s) + math.log(sy),
                                                   rel=1e-12)
    assert metrics.coverage(Y, MU, S) == metrics.coverage(y, mu, s)


def test_known_values():
    y, mu, s = np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0]), np.ones(3)
    assert metrics.rmse(y, mu) == pytest.approx(math.sqrt(10 / 3), rel=1e-15)
    assert metrics.mae(y, mu) == pytest.approx(4 / 3, rel=1e-15)
    assert metrics.nlpd(y, mu, s) == pytest.approx(0.5 * math.log(2 * math.pi) + 10 / 6,
                                                   rel=1e-14)
    # y = 4 lies 3 sd above the mean: outside the 95% interval, penalised by (2/α)(y − u)
    u = 1 + 1.959963984540054
    expected = np.mean([2 * 1.959963984540054] * 3) + (2 / 0.05) * (4 - u) / 3
    assert metrics.interval_score(y, mu, s) == pytest.approx(expected, rel=1e-12)
    assert metrics.coverage(y, mu, s) == pytest.approx(2 / 3)
    assert metrics.crps_gaussian([0.0], [0.0], [1.0]) == pytest.approx(
        2 * norm.pdf(0) - 1 / math.sqrt(math.pi), rel=1e-14)


def test_missing_cells_are_left_out_and_errors_are_clear():
    y = np.array([[1.0, np.nan], [3.0, 4.0]])
    mu = np.array([[1.0, 5.0], [3.0, np.nan]])
    out = metrics.evaluate(y, mu, np.ones((2, 2)))
    assert out["n"] == 2 and out["rmse"] == 0.0 and out["coverage95"] == 1.0
    with pytest.raises(InputError, match="nothing to score"):
        metrics.rmse([np.nan], [1.0])
    with pytest.raises(InputError, match="same number"):
        metrics.rmse([1.0, 2.0], [1.0])
    with pytest.raises(InputError, match="> 0"):
        metrics.nlpd([1.0], [1.0], [0.0])
