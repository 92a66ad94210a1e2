"""AFS collapsed bound, posterior and estimator against exact references (docs/bound.md,
docs/afs.md, T3–T8, T10)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geogp
from geogp.exceptions import InputError, OutsideWindowError
from geogp.features.fourier import FourierFeatures
from geogp.features.fourier_statistics import dense_stats, grid_stats
from geogp.models.afs import AFSRegressor
from geogp.models.collapsed import _dense_parts, _dense_parts_reference, collapsed_bound, posterior
from geogp.models.exact import regressor as exact

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")


def _sample(rng, N=150, D=1, ell=0.3, noise=0.1, kern=geogp.SquaredExponential):
    X = rng.uniform(-1, 1, (N, D))
    k = kern(lengthscale=np.full(D, ell), variance=1.0)
    K = np.asarray(k(X, X)) + noise * np.eye(N)
    y = np.linalg.cholesky(K) @ rng.normal(size=N)
    return X, y, k, noise


def _bound(ff, k, noise, X, y, kvar0=None):
    st = dense_stats(ff, X, y)
    kv = k.variance_at_zero if kvar0 is None else kvar0
    return float(collapsed_bound(ff.log_lambda(k), noise, kv, st))


def _implied_kernel_matrix(k, X1, X2, W, n_alias=2):
    D = X1.shape[1]
    r = X1[:, None, :] - X2[None, :, :]
    out = np.zeros(r.shape[:2])
    for jj in itertools.product(range(-n_alias, n_alias + 1), repeat=D):
        j = np.array(jj)
        out += (-1.0) ** j.sum() * np.asarray(k.evaluate(r - W * j))
    return out


def _gauss_lml(K, y):
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, y)
    return -0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * y.size * np.log(2 * np.pi)


def test_whitened_bound_equals_naive_titsias(rng):
    """T4: whitened bound = log N(y | 0, ΦᵀΛΦ + σ²I) − (N k(0) − tr ΦᵀΛΦ)/(2σ²), rtol 1e-10."""
    X, y, k, noise = _sample(rng, N=80, D=2, ell=0.5)
    ff = FourierFeatures.build([0, 0], [2.2, 2.2], (4, 4))
    Phi = ff(X)
    lam = np.exp(np.asarray(ff.log_lambda(k)))
    Q = Phi @ (lam[:, None] * Phi.T)
    naive = _gauss_lml(Q + noise * np.eye(y.size), y) - (y.size * 1.0 - np.trace(Q)) / (2 * noise)
    np.testing.assert_allclose(_bound(ff, k, noise, X, y), naive, rtol=1e-10)


def test_real_and_complex_features_give_the_same_bound(rng):
    """T3: real √2 cos/sin features and complex exponentials give the same bound (rtol 1e-12)."""
    X, y, k, noise = _sample(rng, N=60, D=2, ell=0.4)
    ff = FourierFeatures.build([0, 0], [2.3, 2.3], (5, 4))
    real = _bound(ff, k, noise, X, y)
    # complex set: every signed version of every kept |z|, with the same λ
    absz = np.unique(ff.frequencies, axis=0)
    signs = np.array(list(itertools.product((1, -1), repeat=2)))
    Z = (absz[:, None, :] * signs[None, :, :]).reshape(-1, 2)
    lam = np.exp(np.asarray(k.log_spectral_density(jnp.abs(jnp.asarray(Z))))) / np.prod(ff.width)
    E = np.exp(2j * np.pi * (X @ Z.T))  # (N, M)
    A = (np.eye(Z.shape[0])
         + np.sqrt(lam)[:, None] * (E.conj().T @ E) * np.sqrt(lam)[None, :] / noise)
    v = np.sqrt(lam) * (E.conj().T @ y)
    c2 = np.real(v.conj() @ np.linalg.solve(A, v)) / noise**2
    logdet = np.linalg.slogdet(A)[1]
    t = y.size * 1.0 - np.sum(lam) * y.size
    cplx = -0.5 * (y.size * np.log(2 * np.pi * noise) + logdet + y @ y / noise - c2 + t / noise)
    assert Z.shape[0] == ff.n_features
    np.testing.assert_allclose(real, cplx, rtol=1e-12)


def test_bound_under_implied_kernel_is_below_and_converges_to_its_lml(rng):
    """T5: L̂' ≤ L̂, non-decreasing over nested lattices, |L̂' − L̂| ≤ 1e-8 when saturated (SE)."""
    X, y, k, noise = _sample(rng, N=60, D=1, ell=0.3)
    W = np.array([2.2])
    Khat = _implied_kernel_matrix(k, X, X, W)
    lml_hat = _gauss_lml(Khat + noise * np.eye(y.size), y)
    khat0 = float(_implied_kernel_matrix(k, np.zeros((1, 1)), np.zeros((1, 1)), W)[0, 0])
    prev = -np.inf
    for K in (2, 3, 5, 8, 12, 30):
        ff = FourierFeatures.build([0.0], W, K)
        b = _bound(ff, k, noise, X, y, kvar0=khat0)
        assert b <= lml_hat + 1e-9
        assert b >= prev - 1e-9
        prev = b
    assert abs(prev - lml_hat) < 1e-8


@pytest.mark.parametrize("D", [1, 2])
def test_bound_approaches_exact_lml_with_wide_window(D, rng):
    """T6 / issue 3: W = 2.5 W_x, SE: |L'' − L| < 1e-3·N at moderate M, and it shrinks with M."""
    X, y, k, noise = _sample(rng, N=150, D=D, ell=0.35)
    L = float(exact.log_marginal_likelihood(k, noise, jnp.asarray(X), jnp.asarray(y)))
    W = 2.5 * (X.max(0) - X.min(0))
    gaps = []
    for K in ((4, 8, 16) if D == 1 else (4, 8, 14)):
        ff = FourierFeatures.build((X.max(0) + X.min(0)) / 2, W, K)
        gaps.append(abs(L - _bound(ff, k, noise, X, y)))
    assert gaps[-1] < 1e-3
    assert gaps[-1] < gaps[0]


def test_saturated_posterior_equals_exact_gp_under_implied_kernel(rng):
    """T8: mean = exact GP under k̂ (rtol 1e-8); latent var differs by k(0) − k̂(0); var ≥ 0."""
    X, y, k, noise = _sample(rng, N=50, D=1, ell=0.3)
    W = np.array([2.4])
    ff = FourierFeatures.build([0.0], W, 30)
    st = dense_stats(ff, X, y)
    post = posterior(ff.log_lambda(k), noise, 1.0, st)
    Xs = np.linspace(-1.1, 1.1, 23)[:, None]
    Phi = ff(Xs)
    mean = Phi @ post.weights
    var = post.kvar0 + np.einsum("nm,mk,nk->n", Phi, post.quad, Phi)
    Khat = _implied_kernel_matrix(k, X, X, W) + noise * np.eye(y.size)
    Ks = _implied_kernel_matrix(k, Xs, X, W)
    khat0 = float(_implied_kernel_matrix(k, np.zeros((1, 1)), np.zeros((1, 1)), W)[0, 0])
    mean_ref = Ks @ np.linalg.solve(Khat, y)
    var_ref = khat0 - np.einsum("ij,ji->i", Ks, np.linalg.solve(Khat, Ks.T))
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(var - (1.0 - khat0), var_ref, rtol=1e-8, atol=1e-10)
    assert np.all(var >= 0)


def test_analytic_vjp_equals_autodiff_and_finite_differences(rng):
    """T10: the dense bound's analytic gradient = autodiff reference; the full objective = FD."""
    X, y, k, _noise = _sample(rng, N=70, D=2, ell=0.4)
    ff = FourierFeatures.build([0, 0], [2.2, 2.2], (4, 4))
    st = dense_stats(ff, X, y)

    def parts(fn, ll, nz):
        a, b = fn(ll, nz, st.G, st.r)
        return a + 0.37 * b

    ll = ff.log_lambda(k)
    g1 = jax.grad(lambda a, b: parts(_dense_parts, a, b), (0, 1))(ll, 0.2)
    g2 = jax.grad(lambda a, b: parts(_dense_parts_reference, a, b), (0, 1))(ll, 0.2)
    np.testing.assert_allclose(g1[0], g2[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g1[1], g2[1], rtol=1e-10)

    def objective(logp):
        kern = geogp.Matern32(lengthscale=jnp.exp(logp[:2]), variance=jnp.exp(logp[2]))
        return collapsed_bound(ff.log_lambda(kern), jnp.exp(logp[3]), kern.variance_at_zero, st)

    p0 = jnp.log(jnp.array([0.4, 0.6, 1.2, 0.15]))
    grad = np.asarray(jax.grad(objective)(p0))
    h = 1e-5
    fd = np.array([(objective(p0.at[i].add(h)) - objective(p0.at[i].add(-h))) / (2 * h)
                   for i in range(4)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


def test_diagonal_route_equals_dense_route_on_complete_grid(rng):
    """T12: the O(M) bound and posterior (G = N·I) equal the dense ones on a complete grid."""
    shape = (16, 12)
    ax = [np.arange(shape[0]) * 0.1, np.arange(shape[1]) * 0.15]
    vals = rng.normal(size=shape)
    center = np.array([(a[0] + a[-1]) / 2 for a in ax])
    ff = FourierFeatures.build(center, np.array(shape) * np.array([0.1, 0.15]), (6, 5))
    k = geogp.Matern52(lengthscale=[0.3, 0.4], variance=0.8)
    diag = grid_stats(ff, ax, vals, diagonal=True)
    dense = grid_stats(ff, ax, vals)
    args = (ff.log_lambda(k), 0.3, 0.8)
    np.testing.assert_allclose(collapsed_bound(*args, diag), collapsed_bound(*args, dense),
                               rtol=1e-10)
    pd, pn = posterior(*args, diag), posterior(*args, dense)
    np.testing.assert_allclose(pd.weights, pn.weights, atol=1e-10)
    assert pd.quad.shape == (ff.n_features,)  # the O(M) route keeps Q as its diagonal
    np.testing.assert_allclose(np.diag(pd.quad), pn.quad, atol=1e-10)


def _noisy_field(rng, shape=(24, 30), missing=0.3):
    ax = [np.linspace(0, 4, shape[0]), np.linspace(10, 15, shape[1])]
    g = np.meshgrid(*ax, indexing="ij")
    f = np.sin(g[0] * 1.3) + np.cos(g[1] * 0.9) * 0.7
    vals = f + 0.1 * rng.normal(size=shape)
    vals[rng.random(shape) < missing] = np.nan
    return ax, vals


def test_estimator_grid_prediction_equals_point_prediction(rng):
    """Grid prediction (separable transforms) = pointwise prediction (NUFFT and explicit
    features)."""
    ax, vals = _noisy_field(rng)
    m = AFSRegressor("matern32", n_features=200, maxiter=30).fit_grid(ax, vals)
    grid = m.predict_grid(ax)
    g = np.meshgrid(*ax, indexing="ij")
    X = np.stack([a.ravel() for a in g], axis=1)
    pts = m.predict(X)  # > 2048 points? no: 720 points -> explicit features
    big = m.predict(np.tile(X, (3, 1)))  # 2160 points -> NUFFT route
    for p in (pts,):
        np.testing.assert_allclose(grid.mean.ravel(), p.mean, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(grid.var_latent.ravel(), p.var_latent, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(big.mean[: X.shape[0]], pts.mean, atol=1e-9)
    np.testing.assert_allclose(big.var_observed[: X.shape[0]], pts.var_observed, atol=1e-9)


def test_grid_fit_equals_scattered_fit_on_the_observed_cells(rng):
    """The gappy-grid statistics give the same fitted model as the scattered-point route."""
    ax, vals = _noisy_field(rng, (14, 18))
    g = np.meshgrid(*ax, indexing="ij")
    X = np.stack([a.ravel() for a in g], axis=1)
    keep = np.isfinite(vals.ravel())
    kw = dict(n_features=120, optimize=False, lengthscale=0.5)
    a = AFSRegressor("se", **kw).fit_grid(ax, vals)
    b = AFSRegressor("se", **kw).fit(X[keep], vals.ravel()[keep])
    np.testing.assert_allclose(a.scaler_.x_mean, b.scaler_.x_mean, rtol=1e-12)
    np.testing.assert_allclose(a.bound(), b.bound(), rtol=1e-10)
    np.testing.assert_allclose(a.predict(X[:50]).mean, b.predict(X[:50]).mean, atol=1e-9)


def test_fit_recovers_exact_gp_hyperparameters_with_wide_window(rng):
    """With W = 2W_x and many features the AFS fit matches the exact GP's (ℓ, σ_f², σ²) within
    1%."""
    X, y, _, _ = _sample(rng, N=120, D=1, ell=0.25, noise=0.05)
    ref = exact.ExactGP("se").fit(X, y)
    m = AFSRegressor("se", n_freq=40, window_factor=2.0).fit(X, y)
    np.testing.assert_allclose(m.kernel_.lengthscale, ref.kernel_.lengthscale, rtol=1e-2)
    np.testing.assert_allclose(m.kernel_.variance, ref.kernel_.variance, rtol=1e-2)
    np.testing.assert_allclose(m.noise_, ref.noise_, rtol=1e-2)
    np.testing.assert_allclose(m.predict(X).mean, ref.predict(X).mean, atol=1e-2)


def test_kernel_sum_runs_through_the_model(rng):
    X, y, _, _ = _sample(rng, N=100, D=2, ell=0.3)
    m = AFSRegressor("matern12+matern32", n_features=150, maxiter=20).fit(X, y)
    assert len(m.lengthscale_) == 2
    assert np.isfinite(m.bound())


def test_bad_inputs_are_refused(rng):
    X, y, _, _ = _sample(rng, N=30, D=2)
    with pytest.raises(InputError, match="constant"):
        AFSRegressor(n_features=50).fit(X, np.ones(30))
    with pytest.raises(InputError, match="hyperparameters"):
        AFSRegressor(n_features=50).fit(X[:3], y[:3])
    with pytest.raises(InputError, match="NaN"):
        AFSRegressor(n_features=50).fit(X, np.where(np.arange(30) == 3, np.nan, y))
    m = AFSRegressor(n_features=50, maxiter=5).fit(X, y)
    with pytest.raises(OutsideWindowError):
        m.predict(np.array([[10.0, 10.0]]))
    assert np.isnan(m.predict(np.array([[10.0, 10.0]]), outside="nan").mean[0])
    ax = [np.array([0.0, 1.0, 1.0, 2.0]), np.arange(5.0)]
    with pytest.raises(InputError, match="monotonic"):
        AFSRegressor(n_features=20).fit_grid(ax, rng.normal(size=(4, 5)))


def test_mean_function_statistics_match_dense_on_every_route(rng):
    """F = ΦH, HᵀH, Hᵀy from grid/NUFFT transforms equal explicit products (1e-9 relative)."""
    from geogp.core.trend import basis, monomial_powers

    ax, vals = _noisy_field(rng, (12, 15))
    g = np.meshgrid(*ax, indexing="ij")
    X = np.stack([a.ravel() for a in g], axis=1)
    keep = np.isfinite(vals.ravel())
    X, y = X[keep], vals.ravel()[keep]
    powers = monomial_powers("quadratic", 2)
    assert len(powers) == 6
    ff = FourierFeatures.build([2.0, 12.5], [4.5, 5.5], (5, 4))
    H = basis(X, powers)
    F_ref = ff(X).T @ H
    for st in (grid_stats(ff, ax, vals, powers=powers), dense_stats(ff, X, y, powers=powers)):
        np.testing.assert_allclose(st.F, F_ref, atol=1e-9 * np.abs(F_ref).max())
        np.testing.assert_allclose(st.HH, H.T @ H, rtol=1e-12)
        np.testing.assert_allclose(st.Hy, H.T @ y, rtol=1e-10)
    from geogp.features.fourier_statistics import points_stats

    st = points_stats(ff, X, y, powers=powers)
    np.testing.assert_allclose(st.F, F_ref, atol=1e-9 * np.abs(F_ref).max())


def test_mean_function_bound_equals_exact_gp_with_explicit_basis(rng):
    """Bound with trend β = log N(y − Hβ | 0, ΦᵀΛΦ + σ²I) − t/(2σ²); gradient in β matches FD."""
    from geogp.core.trend import basis, monomial_powers
    from geogp.features.fourier_statistics import residual_stats

    X, y, k, noise = _sample(rng, N=60, D=2, ell=0.5)
    y = y + 2.0 + 1.5 * X[:, 0] - X[:, 1]
    powers = monomial_powers("linear", 2)
    ff = FourierFeatures.build([0, 0], [2.2, 2.2], (4, 4))
    st = dense_stats(ff, X, y, powers=powers)
    beta = jnp.array([1.8, 1.2, -0.7])
    H = basis(X, powers)
    Phi = ff(X)
    lam = np.exp(np.asarray(ff.log_lambda(k)))
    Q = Phi @ (lam[:, None] * Phi.T)
    resid = y - H @ np.asarray(beta)
    naive = _gauss_lml(Q + noise * np.eye(y.size), resid) - (y.size - np.trace(Q)) / (2 * noise)

    def f(b):
        return collapsed_bound(ff.log_lambda(k), noise, 1.0, residual_stats(st, b))

    np.testing.assert_allclose(f(beta), naive, rtol=1e-10)
    grad = np.asarray(jax.grad(f)(beta))
    h = 1e-6
    fd = [(f(beta.at[i].add(h)) - f(beta.at[i].add(-h))) / (2 * h) for i in range(3)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_linear_trend_is_learnt_and_used_in_predictions(rng):
    ax, vals = _noisy_field(rng, (20, 24), missing=0.2)
    g = np.meshgrid(*ax, indexing="ij")
    vals = vals + 3.0 * g[0] - 2.0 * g[1]
    m = AFSRegressor("matern32", n_features=150, mean="linear", maxiter=40).fit_grid(ax, vals)
    assert m.beta_.shape == (3,)
    X = np.stack([a.ravel() for a in g], axis=1)
    np.testing.assert_allclose(m.predict_grid(ax).mean.ravel(), m.predict(X).mean, atol=1e-9)
