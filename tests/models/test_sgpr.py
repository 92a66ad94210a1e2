"""SGPR baseline against exact references (docs/bound.md (baselines), T23, T10)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import geogp
from geogp.exceptions import InputError

from _reference import dense_gp
from _reference.sgpr import (
    SGPRRegressor,
    greedy_variance,
    kmeans_inducing,
    sgpr_bound,
    sgpr_posterior,
    sgpr_predict,
)

_gram = jax.jit(lambda k, A, B: k(A, B))  # jitted: eager JAX compiles every primitive separately


def _data(rng, N=60, D=2, ell=0.5, noise=0.1):
    X = rng.uniform(-1, 1, (N, D))
    k = geogp.SquaredExponential(lengthscale=np.full(D, ell), variance=1.3)
    y = dense_gp.sample(np.asarray(_gram(k, X, X)), noise, rng)
    return X, y, k, noise


def _pivoted_cholesky_reference(K, M):
    """Textbook pivoted Cholesky on an explicit matrix: the pivot is the first maximum of the
    diagonal of the Schur complement; returns the pivot order (plain numpy, no geogp)."""
    S = np.array(K, dtype=np.float64)
    N = S.shape[0]
    free = np.ones(N, dtype=bool)
    piv = []
    for _ in range(M):
        d = np.where(free, np.diag(S), -np.inf)
        i = int(np.argmax(d))
        piv.append(i)
        free[i] = False
        col = S[:, i] / np.sqrt(S[i, i])
        S = S - np.outer(col, col)  # Schur complement
    return np.array(piv)


def test_bound_with_z_equal_x_is_the_exact_lml(rng):
    """T23: Z = X makes Q_ff = K_ff, so the bound is the exact LML (rtol 1e-6; jitter 1e-8)."""
    X, y, k, noise = _data(rng)
    bound = jax.jit(sgpr_bound)
    got = float(bound(k, noise, jnp.asarray(X), jnp.asarray(X), jnp.asarray(y)))
    want = dense_gp.log_marginal_likelihood(np.asarray(_gram(k, X, X)), y, noise)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # and it is a lower bound with fewer inducing points
    sub = float(bound(k, noise, jnp.asarray(X[:10]), jnp.asarray(X), jnp.asarray(y)))
    assert sub < want


def test_predictions_with_z_equal_x_are_the_exact_gp(rng):
    """T23: mean and latent variance equal the exact GP's when Z = X (rtol 1e-6).

    Without jitter the algebra is exact; the default 1e-8·σ_f² jitter replaces K by
    Q_ff = K(K + εI)⁻¹K ≈ K − εI on the well-determined directions.
    """
    X, y, k, noise = _data(rng, ell=0.25)
    Xs = rng.uniform(-1.2, 1.2, (25, 2))
    m_ref, C_ref = dense_gp.predict(np.asarray(_gram(k, X, X)), np.asarray(_gram(k, X, Xs)),
                                    np.asarray(_gram(k, Xs, Xs)), y, noise)
    mean, var = sgpr_predict(k, sgpr_posterior(k, noise, X, X, y, jitter=0.0), Xs)
    np.testing.assert_allclose(mean, m_ref, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var, np.diag(C_ref), rtol=1e-6, atol=1e-9)
    # the default jitter moves them by O(ε·σ_f²/σ²) only
    mean, var = sgpr_predict(k, sgpr_posterior(k, noise, X, X, y), Xs)
    np.testing.assert_allclose(mean, m_ref, atol=1e-5)
    np.testing.assert_allclose(var, np.diag(C_ref), atol=1e-5)


def test_greedy_variance_is_pivoted_cholesky(rng):
    """T23: greedy variance selection picks exactly the pivots of a pivoted Cholesky."""
    X, _, k, _ = _data(rng, N=120)
    K = np.asarray(_gram(k, X, X))
    idx = greedy_variance(k, X, 25)
    ref = _pivoted_cholesky_reference(K, 25)
    np.testing.assert_array_equal(idx, ref)
    assert idx[0] == 0  # all diagonals tie at σ_f²: the lowest index wins
    # LAPACK's pivoted Cholesky (dpstrf) agrees too
    _, piv, _rank, _info = scipy.linalg.lapack.dpstrf(K, lower=1, tol=-1.0)
    np.testing.assert_array_equal(idx, piv[:25] - 1)


def test_greedy_variance_stops_on_duplicates(rng):
    X = np.repeat(rng.uniform(-1, 1, (5, 2)), 3, axis=0)
    k = geogp.SquaredExponential(lengthscale=0.3)
    with pytest.warns(UserWarning, match="stopped at 5 of 8"):
        idx = greedy_variance(k, X, 8)
    assert sorted(X[idx].tolist()) == sorted(np.unique(X, axis=0).tolist())


def test_gradient_matches_central_differences(rng):
    """T10: jax.grad of the bound in log-parameters vs central differences (rtol 1e-5)."""
    X, y, _, _ = _data(rng, N=50)
    Z = jnp.asarray(X[::4])
    Xj, yj = jnp.asarray(X), jnp.asarray(y)

    def f(logp):
        k = geogp.SquaredExponential(lengthscale=jnp.exp(logp[:2]), variance=jnp.exp(logp[2]))
        return sgpr_bound(k, jnp.exp(logp[3]), Z, Xj, yj)

    p0 = np.log([0.4, 0.7, 1.2, 0.2])
    g = np.asarray(jax.jit(jax.grad(f))(jnp.asarray(p0)))
    fj = jax.jit(f)
    h = 1e-5
    fd = np.array([(float(fj(p0 + h * e)) - float(fj(p0 - h * e))) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_estimator_with_all_points_is_the_exact_gp(rng):
    """With Z = X (M = N), the fitted SGPR is the exact GP at its learnt θ: bound, predictions."""
    X, y, _, _ = _data(rng, N=40, D=2, ell=0.3)
    sg = SGPRRegressor("se", n_inducing=40, maxiter=100).fit(X, y)
    assert sorted(sg.inducing_index_.tolist()) == list(range(40))
    K = np.asarray(_gram(sg.kernel_, sg.X_train_, sg.X_train_))
    ys = np.asarray(sg.y_train_)
    lml = dense_gp.log_marginal_likelihood(K, ys, sg.noise_)
    np.testing.assert_allclose(sg.bound(), lml, rtol=1e-6)
    assert sg.trace_diagnostic() < 1e-6 and sg.report_.converged
    Xs = rng.uniform(-1, 1, (6, 2))
    Xss = sg.scaler_.x(Xs)
    m_ref, C_ref = dense_gp.predict(K, np.asarray(_gram(sg.kernel_, sg.X_train_, Xss)),
                                    np.asarray(_gram(sg.kernel_, Xss, Xss)), ys, sg.noise_)
    p = sg.predict(Xs)
    s_y = sg.scaler_.y_scale
    np.testing.assert_allclose(p.mean, sg.scaler_.y_mean + s_y * m_ref, atol=1e-5 * s_y)
    np.testing.assert_allclose(p.var_latent, s_y**2 * np.diag(C_ref), atol=1e-5 * s_y**2)
    np.testing.assert_allclose(p.var_observed - p.var_latent, sg.noise_variance_, rtol=1e-12)


def test_kmeans_start_and_alternation(rng):
    X, y, _, _ = _data(rng, N=150, D=2, ell=0.5)
    km = SGPRRegressor("se", n_inducing=15, init="kmeans", optimize=False).fit(X, y)
    assert km.Z_.shape == (15, 2) and km.inducing_index_ is None
    np.testing.assert_allclose(kmeans_inducing(km.scaler_.x(X), 15, seed=0), km.Z_)
    np.testing.assert_allclose(km.report_.objective, -km.bound(), rtol=1e-12)
    alt = SGPRRegressor("se", n_inducing=15, rounds=2, maxiter=40).fit(X, y)
    assert 1 <= len(alt.reports_) <= 2
    # the kept round is the best one, and its θ, Z are the ones reported
    np.testing.assert_allclose(-alt.bound(), min(r.objective for r in alt.reports_), rtol=1e-8)
    p = alt.predict(X[:5])
    assert np.all(p.var_observed > p.var_latent) and np.all(p.var_latent >= 0)


def test_bad_inputs_are_refused(rng):
    X, y, _, _ = _data(rng, N=20)
    with pytest.raises(InputError, match="init"):
        SGPRRegressor(init="random").fit(X, y)
    with pytest.raises(InputError, match="rows"):
        SGPRRegressor().fit(X, y[:-1])
    with pytest.raises(InputError, match="n_inducing"):
        greedy_variance(geogp.SquaredExponential(), X, 0)
    with pytest.raises(ValueError):
        SGPRRegressor(noise=-1.0).fit(X, y)
    m = SGPRRegressor(n_inducing=5, optimize=False).fit(X, y)
    with pytest.raises(InputError, match="column"):
        m.predict(np.zeros((3, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.predict(X[:3])
