"""Posterior samples of wavelet models (WaveletRegressor.sample / sample_grid), against the
dense posterior of the finite prior written from scratch: B = diag(1/λ) + σ⁻²ΦΦᵀ over all M
basis functions (pruned ones included), f = Φᵀu with u ~ N(σ⁻²B⁻¹Φy, B⁻¹)."""

from __future__ import annotations

import numpy as np
import pytest

from geogp.exceptions import InputError, MemoryEstimateError
from geogp.models.wavelet import WaveletRegressor
from geogp.models.wavelet.prior import log_precisions


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(11)
    X = rng.uniform(0.0, 1.0, size=(160, 2))
    X = X[np.hypot(X[:, 0] - 0.6, X[:, 1] - 0.4) > 0.22]  # a hole: some functions pruned
    y = np.sin(5 * X[:, 0]) + np.cos(4 * X[:, 1]) + 0.1 * rng.normal(size=X.shape[0])
    m = WaveletRegressor("db2", iota=0, j_max=2, noise=0.05, optimize=False).fit(X, y)
    assert m.n_active_features_ < m.n_features_
    return m, X, y


def _analytic(model, X_data, y, X):
    """Mean and covariance of f at X (data units) from the dense posterior."""
    b, pr = model.basis_, model.problem_
    idx = b.unravel(np.arange(b.n_features))
    lam = np.exp(np.asarray(log_precisions(model.params_, b.dims, idx, pr.normalisation,
                                           pr.location))) * float(model.params_["amplitude"])
    s2, sc = float(model.params_["noise"]), model.scaler_
    Phi = b.feature_matrix(sc.x(X_data)).toarray()
    B = np.diag(1.0 / lam) + Phi @ Phi.T / s2
    Ps = b.feature_matrix(sc.x(X)).toarray()
    mean_u = np.linalg.solve(B, Phi @ sc.y(y)) / s2
    cov = Ps.T @ np.linalg.solve(B, Ps)
    return sc.y_mean + sc.y_scale * (Ps.T @ mean_u), sc.y_scale**2 * cov


def test_sample_moments_match_the_dense_posterior(fitted):
    """2·10⁴ samples at 10 points, some deep in the hole: the sample mean within 5 standard
    errors of the dense mean, every sample covariance within 5 of its standard errors."""
    m, X_data, y = fitted
    rng = np.random.default_rng(0)
    X = np.vstack([rng.uniform(0.05, 0.95, size=(7, 2)), [[0.6, 0.4], [0.55, 0.45], [0.7, 0.35]]])
    n = 20_000
    s = m.sample(X, n, seed=4)
    assert s.shape == (n, X.shape[0])
    mean, cov = _analytic(m, X_data, y, X)
    d = np.sqrt(np.diag(cov))
    assert np.all(np.abs(s.mean(0) - mean) < 5 * d / np.sqrt(n))
    se = np.sqrt((np.outer(d**2, d**2) + cov**2) / n)
    assert np.all(np.abs(np.cov(s.T) - cov) < 5 * se)
    # and the samples' variance is predict()'s latent variance
    np.testing.assert_allclose(d**2, m.predict(X).var_latent, rtol=1e-8)


def test_grid_samples_are_the_point_samples_on_the_mesh(fitted):
    m = fitted[0]
    ay, ax = np.linspace(0.1, 0.9, 7), np.linspace(0.05, 0.95, 9)
    grid = m.sample_grid([ay, ax], 5, seed=7)
    Y, Xg = np.meshgrid(ay, ax, indexing="ij")
    pts = m.sample(np.stack([Y.ravel(), Xg.ravel()], axis=1), 5, seed=7)
    assert grid.shape == (5, 7, 9)
    np.testing.assert_allclose(grid.reshape(5, -1), pts, rtol=0, atol=1e-12)
    # observed samples add the noise: the same latent draws, plus independent noise
    obs = m.sample_grid([ay, ax], 400, seed=8, observed=True)
    lat = m.sample_grid([ay, ax], 400, seed=8)
    resid = (obs - lat) / m.scaler_.y_scale
    assert resid.std() == pytest.approx(np.sqrt(float(m.params_["noise"])), rel=0.05)


def test_sampling_refuses_bad_requests_before_allocating(fitted):
    m = fitted[0]
    with pytest.raises(InputError, match="integer ≥ 1"):
        m.sample(np.zeros((1, 2)) + 0.5, 0)
    with pytest.raises(InputError, match="axis 1 must be a non-empty vector of finite"):
        m.sample_grid([np.linspace(0.1, 0.9, 3), np.array([0.5, np.nan])], 2)
    import copy

    small = copy.copy(m)  # the same fit, held to a budget below A's dense factor
    small.max_bytes = 0.5 * m.posterior_.sample_bytes()
    with pytest.raises(MemoryEstimateError, match="posterior samples"):
        small.sample_grid([np.linspace(0.1, 0.9, 3)] * 2, 2)
