"""Per-observation weights in the AFS statistics (issue #44: how a robust loss enters AFS, as
it enters the lattice model: noise variance σ²/w_i at observation i). Every route against
the explicit weighted products, unit weights against the unweighted statistics, and the
collapsed bound and posterior against dense algebra with the heteroscedastic noise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import geogp
from geogp.core.trend import basis as trend_basis
from geogp.core.trend import monomial_powers
from geogp.exceptions import InputError
from geogp.features.data import Grid, Points
from geogp.features.fourier import FourierFeatures
from geogp.models.collapsed import collapsed_bound, posterior


def _raster(rng, ny=14, nx=17):
    ay, ax = np.linspace(-0.9, 0.8, ny), np.linspace(-0.7, 0.95, nx)
    v = rng.normal(size=(ny, nx))
    v[rng.random(v.shape) < 0.25] = np.nan
    v[3:7, 4:9] = np.nan  # a gap
    w = rng.uniform(0.05, 2.0, v.shape)
    Y, X = np.meshgrid(ay, ax, indexing="ij")
    obs = np.isfinite(v)
    return Grid((ay, ax), v), w, Points(np.stack([Y[obs], X[obs]], axis=1), v[obs]), w[obs]


@pytest.mark.parametrize("method", ["dense", "nufft", "direct"])
def test_every_route_gives_the_weighted_products(rng, method):
    grid, w_grid, pts, w = _raster(rng)
    ff = FourierFeatures.build([0.0, 0.1], [2.6, 2.4], (6, 5))
    powers = monomial_powers("linear", 2)
    Phi, H = ff(pts.X), trend_basis(pts.X, powers)  # the naive reference
    W = w[:, None]
    ref = {"G": Phi.T @ (W * Phi), "r": Phi.T @ (w * pts.y), "F": Phi.T @ (W * H),
           "HH": H.T @ (W * H), "Hy": H.T @ (w * pts.y)}
    for stats in (ff.statistics(grid, powers=powers, weights=w_grid),
                  ff.statistics(pts, method=method, powers=powers, weights=w)):
        for name, want in ref.items():
            got = np.asarray(getattr(stats, name))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max(),
                                       err_msg=name)
        assert float(stats.yy) == pytest.approx(float(pts.y @ (w * pts.y)), rel=1e-12)
        assert int(stats.n) == pts.n_obs  # the count, not the weights' sum
        assert float(stats.wsum) == pytest.approx(float(w.sum()), rel=1e-12)
        assert float(stats.logw) == pytest.approx(float(np.log(w).sum()), rel=1e-12)


def test_unit_weights_are_the_unweighted_statistics_and_bound(rng):
    _, _, pts, _ = _raster(rng)
    ff = FourierFeatures.build([0.0, 0.1], [2.6, 2.4], (6, 5))
    k = geogp.Matern32(lengthscale=0.4)
    plain = ff.statistics(pts)
    ones = ff.statistics(pts, weights=np.ones(pts.n_obs))
    ll = ff.log_lambda(k)
    for name in ("G", "r", "yy"):
        np.testing.assert_allclose(np.asarray(getattr(ones, name)),
                                   np.asarray(getattr(plain, name)), rtol=1e-12, atol=1e-12)
    assert float(collapsed_bound(ll, 0.1, k.variance_at_zero, ones)) == pytest.approx(
        float(collapsed_bound(ll, 0.1, k.variance_at_zero, plain)), rel=1e-12)


def test_the_weighted_bound_and_posterior_equal_dense_algebra(rng):
    """L'' = log N(y | 0, ΦΛΦᵀ + D) − ½ tr D⁻¹(K − ΦΛΦᵀ), D = σ² diag(1/w), and q(u) is the
    dense heteroscedastic Bayesian regression on the features (Σ_u = (Λ⁻¹ + ΦᵀD⁻¹Φ)⁻¹)."""
    X = rng.uniform(-1.0, 1.0, (60, 2))
    y = np.sin(2.0 * X[:, 0]) + 0.3 * rng.standard_normal(60)
    w = rng.uniform(0.02, 1.5, 60)
    ff = FourierFeatures.build([0.0, 0.0], [4.0, 4.0], (7, 7))
    k = geogp.Matern32(lengthscale=0.5, variance=1.3)
    noise = 0.09
    stats = ff.statistics(Points(X, y), weights=w)
    ll = np.asarray(ff.log_lambda(k))
    lam = np.exp(ll)
    Phi = np.asarray(ff(X))
    Q = Phi @ (lam[:, None] * Phi.T)
    D = np.diag(noise / w)
    K = np.asarray(k(X, X))
    want = (multivariate_normal(np.zeros(60), Q + D).logpdf(y)
            - 0.5 * np.trace(np.linalg.solve(D, K - Q)))
    got = float(collapsed_bound(ll, noise, k.variance_at_zero, stats))
    assert got == pytest.approx(want, rel=1e-10, abs=1e-9)
    post = posterior(ll, noise, k.variance_at_zero, stats)
    cov_u = np.linalg.inv(np.diag(1.0 / lam) + Phi.T @ (w[:, None] / noise * Phi))
    np.testing.assert_allclose(post.weights, cov_u @ Phi.T @ (w * y / noise), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(post.quad + np.diag(lam), cov_u, rtol=1e-9, atol=1e-12)
    # the noise's log-determinant is where the weights' logs enter: scaling every weight
    # by c is the noise σ²/c
    c = 2.5
    scaled = ff.statistics(Points(X, y), weights=c * w)
    assert float(collapsed_bound(ll, noise, k.variance_at_zero, scaled)) == pytest.approx(
        float(collapsed_bound(ll, noise / c, k.variance_at_zero, stats)), rel=1e-10)
    assert math.isfinite(got)


def test_bad_weights_are_refused_in_one_line(rng):
    grid, w_grid, pts, w = _raster(rng)
    ff = FourierFeatures.build([0.0, 0.1], [2.6, 2.4], (6, 5))
    for bad in (np.where(np.arange(w.size) == 3, -1.0, w), np.where(np.arange(w.size) == 0,
                                                                   np.nan, w), 0.0 * w):
        with pytest.raises(InputError, match="weights must be finite and > 0"):
            ff.statistics(pts, weights=bad)
    with pytest.raises(InputError, match="weights have shape"):
        ff.statistics(pts, weights=w[:-1])
    with pytest.raises(InputError, match="weights have shape"):
        ff.statistics(grid, weights=w_grid[:, :-1])
    full = Grid(grid.axes, np.nan_to_num(grid.values))
    with pytest.raises(InputError, match="unit weights only"):
        ff.statistics(full, diagonal=True, weights=w_grid)


def test_the_matrix_free_bound_takes_the_weights_as_the_dense_one(rng):
    """The iterative (matrix-free) bound of weighted statistics agrees with the dense bound up
    to its stochastic log-determinant's error (as unweighted), far below the weights' own
    terms ((N − Σw) k(0)/2σ² − ½Σ log w, which a bound ignoring them would miss)."""
    from geogp.models.collapsed_iterative import iterative_bound, rademacher_probes

    X = rng.uniform(-1.0, 1.0, (300, 2))
    y = np.sin(2.0 * X[:, 0]) + 0.3 * rng.standard_normal(300)
    w = np.where(rng.random(300) < 0.1, 0.05, 1.0)
    ff = FourierFeatures.build([0.0, 0.0], [4.0, 4.0], (6, 6))
    k = geogp.Matern32(lengthscale=0.5)
    ll = ff.log_lambda(k)
    probes = rademacher_probes(ff.n_features, 8, 0)
    noise = 0.01
    terms = (w.size - w.sum()) * float(k.variance_at_zero) / (2 * noise) - 0.5 * np.log(w).sum()
    for weights in (None, w):
        dense = ff.statistics(Points(X, y), weights=weights)
        free = ff.statistics(Points(X, y), gram="operator", dense_block=8, weights=weights)
        gap = (float(iterative_bound(ll, noise, k.variance_at_zero, free, probes))
               - float(collapsed_bound(ll, noise, k.variance_at_zero, dense)))
        assert abs(gap) < 0.01 * terms, (gap, terms)
