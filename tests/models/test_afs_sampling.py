"""Posterior samples of AFS models (geogp.models.afs.sampling), against the analytic q(u)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from geogp.exceptions import InputError
from geogp.features.afs_dft import log_lambda as _log_lambda
from geogp.models.afs import AFSRegressor


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 3, size=(150, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AFSRegressor("matern32", n_features=64, mean="linear", maxiter=20).fit(X, y)


def _analytic(model, Xs):
    """Mean and covariance of f = φᵀu + hᵀβ at standardised Xs, written from the bound's
    formulas with dense inverses: Σ_u = (Λ⁻¹ + G/σ²)⁻¹, E u = Σ_u r/σ² (residual statistics),
    and β's flat-prior posterior (universal kriging): Cov β = Ψ⁻¹, Ψ = (HᵀH − FᵀΣ_uF/σ²)/σ²,
    with Cov(f, f) adding UΨ⁻¹Uᵀ, U = H* − Φ*Σ_uF/σ²."""
    from geogp.core.trend import basis

    stats = model.detrended_stats()
    lam = np.exp(np.asarray(_log_lambda(model.features_, model.kernel_)))
    G, r, s2 = np.asarray(stats.G), np.asarray(stats.r), model.noise_
    F, HH = np.asarray(model.stats_.F), np.asarray(model.stats_.HH)
    cov_u = np.linalg.inv(np.diag(1 / lam) + G / s2)
    mean_u = cov_u @ r / s2
    Phi = np.asarray(model.features_(Xs))
    Hs = basis(Xs, model.powers_)
    mean = Phi @ mean_u + Hs @ model.beta_
    psi = (HH - F.T @ cov_u @ F / s2) / s2
    U = Hs - Phi @ cov_u @ F / s2
    return mean, Phi @ cov_u @ Phi.T + U @ np.linalg.solve(psi, U.T)


def test_sample_moments_match_the_analytic_posterior(fitted):
    """10⁴ samples at 12 points: the sample mean within 5 standard errors of the analytic mean
    and every sample covariance within 5 of its standard errors ((Σ_ii Σ_jj + Σ_ij²)/n)^{1/2}
    of the analytic Σ (data units)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0.2, 2.8, size=(12, 2))
    n = 10_000
    s = fitted.sample(X, n, seed=3)
    assert s.shape == (n, 12)
    mean, cov = _analytic(fitted, fitted.scaler_.x(X))
    ys = fitted.scaler_.y_scale
    mean, cov = fitted.scaler_.y_mean + ys * mean, ys**2 * cov
    d = np.sqrt(np.diag(cov))
    assert np.all(np.abs(s.mean(0) - mean) < 5 * d / np.sqrt(n))
    emp = np.cov(s.T)
    se = np.sqrt((np.outer(d**2, d**2) + cov**2) / n)
    assert np.all(np.abs(emp - cov) < 5 * se)
    # the samples' variance is predict()'s latent variance less k(0) − φᵀΛφ (features' residual)
    pred = fitted.predict(X)
    lam = np.exp(np.asarray(_log_lambda(fitted.features_, fitted.kernel_)))
    Phi = np.asarray(fitted.features_(fitted.scaler_.x(X)))
    resid = fitted.kernel_.variance_at_zero - Phi**2 @ lam
    np.testing.assert_allclose(np.diag(cov), pred.var_latent - ys**2 * resid, rtol=1e-8)


def test_grid_samples_equal_point_samples_and_noise_is_added(fitted):
    """The grid route (separable transforms) draws the same weights as the point route for
    the same seed, so the two agree to transform accuracy; observed samples add noise of
    variance σ²; seeds reproduce."""
    ay, ax = np.linspace(0.1, 2.9, 9), np.linspace(0.2, 2.8, 11)
    g = fitted.sample_grid([ay, ax], 4, seed=7)
    Y, X = np.meshgrid(ay, ax, indexing="ij")
    p = fitted.sample(np.stack([Y.ravel(), X.ravel()], 1), 4, seed=7).reshape(4, 9, 11)
    np.testing.assert_allclose(g, p, rtol=0, atol=1e-8 * np.abs(p).max())
    np.testing.assert_array_equal(fitted.sample_grid([ay, ax], 2, seed=1),
                                  fitted.sample_grid([ay, ax], 2, seed=1))
    lat = fitted.sample(np.array([[1.0, 1.0]]), 20_000, seed=2)
    obs = fitted.sample(np.array([[1.0, 1.0]]), 20_000, seed=2, observed=True)
    extra = obs.var() - lat.var()
    want = fitted.noise_ * fitted.scaler_.y_scale**2
    assert abs(extra - want) < 0.1 * want + 5 * lat.var() * np.sqrt(2 / 20_000)


def test_matrix_free_samples_reuse_the_variance_draws():
    """solver='iterative' keeps n_samples centred draws of u from its variance solves: the
    samples are w + those draws (no new solve), and more than n_samples is refused."""
    rng = np.random.default_rng(6)
    X = rng.uniform(0, 3, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = AFSRegressor("matern32", n_features=144, solver="iterative", n_samples=32,
                         optimize=False, lengthscale=0.5, noise=0.05).fit(X, y)
    pts = rng.uniform(0.2, 2.8, size=(5, 2))
    s = m.sample(pts, 32, seed=0)
    post = m.posterior_
    Phi = np.asarray(m.features_(m.scaler_.x(pts)))
    want = m.scaler_.y_mean + m.scaler_.y_scale * (Phi @ (post.weights[:, None]
                                                          + post.sample_a)).T
    np.testing.assert_allclose(s, want, rtol=1e-9, atol=1e-9)
    with pytest.raises(InputError, match="n_samples"):
        m.sample(pts, 33)


def test_bad_sample_requests_are_refused(fitted):
    from geogp.exceptions import NotFittedError, OutsideWindowError

    with pytest.raises(InputError, match="integer ≥ 1"):
        fitted.sample(np.zeros((2, 2)) + 1.0, 0)
    with pytest.raises(OutsideWindowError):
        fitted.sample(np.array([[100.0, 1.0]]), 2)
    with pytest.raises(InputError, match="column"):
        fitted.sample(np.ones((2, 3)), 2)
    with pytest.raises(NotFittedError):
        AFSRegressor().sample(np.ones((2, 2)), 2)
