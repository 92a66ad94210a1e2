"""The matrix-free (large-M) collapsed bound, gradients and posterior against the dense path."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geogp
from geogp.core.kernels import ProductKernel
from geogp.exceptions import ConvergenceWarning, InputError, MemoryEstimateError
from geogp.features import trig
from geogp.features.fourier import FourierFeatures
from geogp.features.fourier_statistics import SufficientStats, dense_stats
from geogp.features.gram_operator import GramOperator
from geogp.models.afs import AFSRegressor
from geogp.models.afs import policy as afs_policy
from geogp.models.collapsed import collapsed_bound, posterior
from geogp.models.collapsed_iterative import (
    IterativeOptions,
    iterative_bound,
    iterative_parts,
    iterative_posterior,
    rademacher_probes,
)

pytestmark = [
    # small synthetic data: the models' approximation diagnostics warn, beside the point here
    pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning"),
    # small planar coordinates in a projected CRS look like degrees: a warning beside the point
    pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning"),
]


def _problem(rng, n_dense=0, N=400):
    X = rng.uniform(-1, 1, (N, 2))
    X = X[np.linalg.norm(X - 0.3, axis=1) > 0.35]  # a hole: G far from diagonal
    y = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.1 * rng.normal(size=X.shape[0])
    ff = FourierFeatures.build(np.zeros(2), np.full(2, 2.2), (5, 5))
    st = dense_stats(ff, X, y)
    C = trig.points_bins(ff, X, np.ones(X.shape[0]), "quadratic", "direct")
    op = GramOperator.from_bins(ff, C, n_dense=n_dense)
    sti = SufficientStats(op, st.r, st.yy, st.n)
    k = geogp.Matern32(lengthscale=jnp.array([0.3, 0.4]), variance=1.2)
    return ff, X, y, st, sti, k


@pytest.mark.parametrize("n_dense", [0, 12])
def test_exact_probes_reproduce_dense_bound_and_gradients(rng, n_dense):
    """Probes √M·e_j make Hutchinson exact; full Lanczos makes the quadrature exact: then the
    estimator equals the dense bound and its gradients in log λ, σ² and r to 1e-8."""
    ff, _X, _y, st, sti, k = _problem(rng, n_dense)
    M = ff.n_features
    probes = jnp.sqrt(M) * jnp.eye(M)
    opts = IterativeOptions(tol=1e-13, maxiter=1000, n_lanczos=M + 2)
    ll = ff.log_lambda(k)

    def dense(ll, noise, r):
        return collapsed_bound(ll, noise, 1.2, SufficientStats(st.G, r, st.yy, st.n))

    def iterative(ll, noise, r):
        return iterative_bound(ll, noise, 1.2, SufficientStats(sti.G, r, st.yy, st.n), probes,
                               opts)

    args = (ll, 0.05, st.r)
    np.testing.assert_allclose(float(iterative(*args)), float(dense(*args)), rtol=1e-10)
    gd = jax.grad(dense, (0, 1, 2))(*args)
    gi = jax.grad(iterative, (0, 1, 2))(*args)
    for a, b in zip(gi, gd, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-7,
                                   atol=1e-8 * np.abs(np.asarray(b)).max())


def test_random_probes_are_accurate(rng):
    """32 Rademacher probes: log|A| within 4 of its own reported standard errors (and 1 %),
    the gradient within 2 % of its norm."""
    ff, _X, _y, st, sti, k = _problem(rng, 12)
    ll = ff.log_lambda(k)
    probes = rademacher_probes(ff.n_features, 32, seed=3)
    f_d = jax.value_and_grad(lambda a, s: collapsed_bound(a, s, 1.2, st), (0, 1))
    f_i = jax.value_and_grad(lambda a, s: iterative_bound(a, s, 1.2, sti, probes), (0, 1))
    vd, (gd_l, gd_s) = f_d(ll, 0.05)
    vi, (gi_l, gi_s) = f_i(ll, 0.05)
    logdet_dense = -2 * float(vd) - float(-2 * vi)  # the bounds differ by −½ Δlog|A| only
    _, _, info = iterative_parts(ll, 0.05, sti.G, st.r, probes)
    assert abs(logdet_dense) < 4 * float(info["slq_sd"]), (logdet_dense, info["slq_sd"])
    logdet, _, _ = iterative_parts(ll, 0.05, sti.G, st.r, probes)
    assert abs(logdet_dense) < 0.01 * abs(float(logdet))
    assert np.linalg.norm(gi_l - gd_l) < 0.02 * np.linalg.norm(gd_l)
    assert abs(float(gi_s - gd_s)) < 0.02 * abs(float(gd_s))
    assert np.all(np.asarray(info["residual"]) <= 1e-4)


@pytest.mark.parametrize("n_dense", [0, 12])
def test_posterior_weights_and_variance_decomposition(rng, n_dense):
    """Mean weights equal the dense posterior; k(0) + Σqφ² + φ₀ᵀQ₀φ₀ + φᵀD(A⁻¹ − P⁻¹)Dφ equals
    the dense variance exactly (the sampled term's expectation, computed densely here)."""
    ff, _X, _y, st, sti, k = _problem(rng, n_dense)
    ll = np.asarray(ff.log_lambda(k))
    noise = 0.05
    dense = posterior(ll, noise, 1.2, st)
    it = iterative_posterior(ll, noise, 1.2, sti, None, options=IterativeOptions(tol=1e-12))
    np.testing.assert_allclose(it.weights, dense.weights, rtol=1e-7,
                               atol=1e-9 * np.abs(dense.weights).max())
    Xt = rng.uniform(-1, 1, (50, 2))
    Phi = ff(Xt)
    d = np.exp(0.5 * ll)
    A = np.eye(d.size) + d[:, None] * np.asarray(st.G) * d[None, :] / noise
    P = np.diag(np.diag(A))
    if it.low is not None:
        P[np.ix_(it.low, it.low)] = A[np.ix_(it.low, it.low)]
    correction = np.einsum("nm,mk,nk->n", Phi * d, np.linalg.inv(A) - np.linalg.inv(P), Phi * d)
    var = 1.2 + Phi**2 @ it.diag_quad + correction
    if it.low is not None:
        var += np.einsum("nm,mk,nk->n", Phi[:, it.low], it.quad_low, Phi[:, it.low])
    var_dense = 1.2 + np.einsum("nm,mk,nk->n", Phi, dense.quad, Phi)
    np.testing.assert_allclose(var, var_dense, rtol=1e-8, atol=1e-10)


def _grid(rng, ny=40, nx=50):
    axes = [np.linspace(0, 1, ny), np.linspace(0, 1.3, nx)]
    Y, X = np.meshgrid(*axes, indexing="ij")
    f = np.sin(6 * X) + np.cos(5 * Y) + 0.5 * np.sin(9 * X * Y)
    v = f + 0.1 * rng.normal(size=f.shape)
    v[rng.uniform(size=v.shape) < 0.3] = np.nan
    v[8:18, 15:30] = np.nan
    return axes, v


def test_estimator_iterative_matches_dense_on_a_gappy_grid(rng):
    """Same θ (1 %), mean (1 % of the sd), sd (median 1.5 %, 256 samples), bound (0.5 %)."""
    axes, v = _grid(rng)
    # one window for both solvers (alias_tol=None): the adaptive window follows each route's
    # learnt θ, so the routes' small θ differences would compare different feature sets
    kw = dict(kernel="matern32", n_features=300, mean="linear", dense_block=60, alias_tol=None)
    md = AFSRegressor(solver="dense", **kw).fit_grid(axes, v)
    mi = AFSRegressor(solver="iterative", n_samples=256, n_probes=16, **kw).fit_grid(axes, v)
    assert md.solver_ == "dense" and mi.solver_ == "iterative" and mi.stats_.matrix_free
    np.testing.assert_allclose(np.asarray(mi.kernel_.lengthscale),
                               np.asarray(md.kernel_.lengthscale), rtol=0.01)
    np.testing.assert_allclose(mi.noise_, md.noise_, rtol=0.01)
    np.testing.assert_allclose(mi.beta_, md.beta_, rtol=0.02, atol=0.01)
    pd, pi = md.predict_grid(axes), mi.predict_grid(axes)
    sd = np.sqrt(pd.var_observed)
    assert np.abs(pi.mean - pd.mean).max() < 0.01 * sd.min()
    ratio = np.sqrt(pi.var_latent / pd.var_latent)
    assert np.median(np.abs(ratio - 1)) < 0.015 and abs(ratio.mean() - 1) < 0.01
    assert abs(mi.bound() - md.bound()) < 5e-3 * abs(md.bound())  # 16-probe estimate
    # point predictions (NUFFT route) agree with the grid route
    Y, X = np.meshgrid(axes[0][::7], axes[1][::9], indexing="ij")
    pp = mi.predict(np.stack([Y.ravel(), X.ravel()], axis=1))
    np.testing.assert_allclose(pp.mean, pi.mean[::7, ::9].ravel(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(pp.var_latent, pi.var_latent[::7, ::9].ravel(), rtol=1e-8)


def test_estimator_iterative_on_scattered_points(rng):
    X = rng.uniform(0, 1, (1500, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.normal(size=1500)
    kw = dict(kernel="matern52", n_features=200)
    md = AFSRegressor(solver="dense", **kw).fit(X, y)
    mi = AFSRegressor(solver="iterative", n_probes=16, **kw).fit(X, y)
    np.testing.assert_allclose(np.asarray(mi.kernel_.lengthscale),
                               np.asarray(md.kernel_.lengthscale), rtol=0.01)
    Xt = rng.uniform(0, 1, (100, 2))
    a, b = md.predict(Xt), mi.predict(Xt)
    assert np.abs(a.mean - b.mean).max() < 0.01 * np.sqrt(a.var_observed).min()


def test_solver_choice_memory_and_errors(rng, monkeypatch):
    axes, v = _grid(rng, 20, 24)
    monkeypatch.setattr(afs_policy, "ITERATIVE_ABOVE", 50)
    m = AFSRegressor(n_features=80, maxiter=3).fit_grid(axes, v)
    assert m.solver_ == "iterative"
    m = AFSRegressor(n_features=40, maxiter=3).fit_grid(axes, v)
    assert m.solver_ == "dense"
    with pytest.raises(MemoryEstimateError, match="matrix-free"):
        AFSRegressor(n_features=80, solver="iterative", max_bytes=1e5).fit_grid(axes, v)
    with pytest.raises(MemoryEstimateError, match="solver='iterative'"):
        AFSRegressor(n_features=80, solver="dense", max_bytes=1e5).fit_grid(axes, v)
    with pytest.raises(InputError, match="solver"):
        AFSRegressor(solver="cholesky").fit_grid(axes, v)
    for bad in (dict(n_probes=0), dict(n_samples=-1), dict(cg_tol=0.0), dict(cg_tol=float("nan")),
                dict(dense_block="big"), dict(warm_start=1.5)):
        with pytest.raises(InputError, match=next(iter(bad))):
            AFSRegressor(n_features=80, solver="iterative", **bad).fit_grid(axes, v)
    with pytest.raises(InputError, match="spectral density"):
        AFSRegressor(kernel=ProductKernel([geogp.Matern12(lengthscale=0.3),
                                           geogp.SquaredExponential(lengthscale=0.3)]),
                     lattice="full", solver="iterative").fit_grid(axes, v)


def test_iterative_model_saves_and_loads_bit_for_bit_and_refuses_placement(rng, tmp_path):
    import xarray as xr

    axes, v = _grid(rng, 20, 24)
    da = xr.DataArray(v, coords={"y": axes[0], "x": axes[1]}, dims=("y", "x"))
    model = geogp.fit(da.rio.write_crs("EPSG:32633"), n_features=80, solver="iterative",
                      dense_block=20, n_samples=8, maxiter=3)
    assert model.estimators_[0].stats_.matrix_free
    model.save(tmp_path / "m.npz")
    back = geogp.load_model(tmp_path / "m.npz")
    assert back.estimators_[0].stats_.matrix_free
    a, b = model.predict(), back.predict()
    for name in ("mean", "std", "std_latent"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
    from geogp.placement import Candidates, suggest_sites

    est = AFSRegressor(n_features=80, solver="iterative", maxiter=3).fit_grid(axes, v)
    with pytest.raises(InputError, match="matrix-free"):
        suggest_sites(est, Candidates.points(np.array([[0.5, 0.5], [0.2, 0.3]])), 1)


def test_posterior_warns_when_cg_hits_its_cap(rng):
    ff, _X, _y, _st, sti, k = _problem(rng, 0)
    with pytest.warns(ConvergenceWarning, match="conjugate gradients reached 2 iterations"):
        iterative_posterior(np.asarray(ff.log_lambda(k)), 1e-4, 1.2, sti, None,
                            options=IterativeOptions(tol=1e-14, maxiter=2))


def test_cg_cap_warning_has_its_own_category(rng):
    """The CG-cap warning is a ConvergenceWarning exactly (not a bare UserWarning), so users can
    silence it by category while other UserWarnings stay errors."""
    ff, _X, _y, _st, sti, k = _problem(rng, 0)
    args = (np.asarray(ff.log_lambda(k)), 1e-4, 1.2, sti, None)
    options = IterativeOptions(tol=1e-14, maxiter=2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        iterative_posterior(*args, options=options)
    assert [w.category for w in rec] == [ConvergenceWarning]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        iterative_posterior(*args, options=options)
