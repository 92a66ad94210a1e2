"""SVGP on AFS features with non-Gaussian likelihoods (geogp/models/svgp/regressor.py, svgp/elbo.py,
docs/svgp.md).

References are independent of the code under test: the collapsed bound and posterior of
geogp.models.collapsed (Gaussian), a numpy/scipy Gaussian VI of the same weight-space model with
hand-written gradients and 60-point quadrature, a Laplace approximation by Newton iterations,
adaptive quadrature (scipy.integrate.quad) and Monte Carlo.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special as sps

import geogp  # float64
from geogp.core.kernels import Matern32
from geogp.exceptions import InputError, NotFittedError
from geogp.features.fourier_statistics import dense_stats
from geogp.models.collapsed import collapsed_bound, posterior
from geogp.models.svgp.elbo import L_raw_from, elbo, gaussian_optimal_q
from geogp.models.svgp.likelihoods import Bernoulli, Gaussian, Poisson, StudentT
from geogp.models.svgp.regressor import SVGPRegressor

from _reference.svgp_vi import laplace_weights as _laplace
from _reference.svgp_vi import ref_vi as _ref_vi

# small planar coordinates in a projected CRS look like degrees: a warning beside the point
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning")


def _data(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 10, (n, 2))
    f = np.sin(0.6 * X[:, 0]) + 0.5 * np.cos(0.4 * X[:, 1])
    return rng, X, f


def _psi(model, X):
    ff, k = model.features_, model.kernel_
    return ff(model.scaler_.x(X)) * np.exp(0.5 * np.asarray(ff.log_lambda(k)))


# ------------------------------------------------------------------ 1. Gaussian = collapsed
def test_gaussian_reaches_collapsed_bound_and_posterior():
    rng, X, f = _data()
    y = f + 0.3 * rng.normal(size=f.size)
    k = Matern32(lengthscale=[0.6, 0.8], variance=1.3)
    noise = 0.1
    model = SVGPRegressor(Gaussian(noise=noise), k, n_features=40, mean=None,
                          learn_hyperparameters=False, optimizer="lbfgs", maxiter=5000)
    model.fit(X, y)
    ff, Xs, ys = model.features_, model.scaler_.x(X), model.scaler_.y(y)
    stats = dense_stats(ff, Xs, ys)
    ll = ff.log_lambda(k)
    bound = float(collapsed_bound(ll, noise, k.variance_at_zero, stats))
    # analytic optimum: ELBO equals the collapsed bound to 1e-8 (relative)
    Psi = ff(Xs) * np.exp(0.5 * np.asarray(ll))
    m, L = gaussian_optimal_q(Psi, ys, noise)
    p = {"q": {"m": jnp.asarray(m), "L": jnp.asarray(L_raw_from(L))}, "kernel": k,
         "lik": {"noise": jnp.asarray(noise)}}
    e_opt = float(elbo(p, jnp.asarray(ff(Xs)), jnp.asarray(ys), jnp.zeros(ys.size), ys.size,
                       jnp.asarray(ff.frequencies), ff.log_norm, Gaussian()))
    assert abs(e_opt - bound) <= 1e-8 * abs(bound)
    # optimised q: ELBO and q(v) equal the collapsed ones (1e-4 relative)
    assert abs(model.elbo_ - bound) <= 1e-4 * abs(bound)
    post = posterior(ll, noise, k.variance_at_zero, stats)
    sl = post.sqrt_lam
    m_ref = post.weights / sl  # whitened mean A⁻¹λ½r/σ²
    S_ref = (post.quad + np.diag(sl**2)) / np.outer(sl, sl)  # A⁻¹
    S = model.q_chol_ @ model.q_chol_.T
    assert np.linalg.norm(model.q_mean_ - m_ref) <= 1e-4 * np.linalg.norm(m_ref)
    assert np.linalg.norm(S - S_ref) <= 1e-4 * np.linalg.norm(S_ref)


# ------------------------------------------------------------------ 2. reference VI, Laplace
@pytest.mark.parametrize("kind", ["poisson", "bernoulli"])
def test_posterior_matches_reference_vi(kind):
    rng, X, f = _data(n=150, seed=1)
    y = rng.poisson(np.exp(1 + f)).astype(float) if kind == "poisson" else \
        (rng.uniform(size=f.size) < sps.ndtr(2 * f)).astype(float)
    k = Matern32(lengthscale=[0.7, 0.7], variance=1.0)
    model = SVGPRegressor(kind, k, n_features=24, learn_hyperparameters=False,
                          optimizer="lbfgs", maxiter=5000).fit(X, y)
    Psi = _psi(model, X)
    k0 = float(k.variance_at_zero)
    m, L, b, e_ref = _ref_vi(Psi, y, k0, kind, 0.0)
    assert abs(model.elbo_ - e_ref) <= 1e-6 * abs(e_ref)
    Xt = rng.uniform(0, 10, (30, 2))
    Pt = _psi(model, Xt)
    mu_ref = Pt @ m + b
    var_ref = k0 - np.sum(Pt**2, 1) + np.sum((Pt @ L) ** 2, 1)
    pred = model.predict(Xt)
    np.testing.assert_allclose(pred.mean_latent, mu_ref, atol=1e-4)
    np.testing.assert_allclose(pred.var_latent, var_ref, rtol=1e-3, atol=1e-5)
    if kind == "poisson":
        np.testing.assert_allclose(pred.mean, np.exp(mu_ref + var_ref / 2), rtol=1e-3)
        # Laplace at the same b, a different approximation (its mean is the mode, VI's lies
        # about v/2 lower for Poisson): compare the posterior mean rates E[exp f], within
        # 20 % everywhere and 7 % on average (counts here are 0–10: Laplace is rough there)
        v_l, C_l = _laplace(Psi, y, b)
        var_l = k0 - np.sum(Pt**2, 1) + np.einsum("ij,jk,ik->i", Pt, C_l, Pt)
        rel = np.abs(pred.mean / np.exp(Pt @ v_l + b + var_l / 2) - 1)
        assert rel.max() < 0.2 and rel.mean() < 0.07
        np.testing.assert_allclose(pred.var_latent, var_l, rtol=0.25)
    else:  # probit predictive Φ(μ/√(1+v)) against dense quadrature
        x60, w60 = np.polynomial.hermite_e.hermegauss(60)
        p_q = sps.ndtr(mu_ref[:, None] + np.sqrt(var_ref)[:, None] * x60) @ w60 / np.sqrt(2 * np.pi)
        np.testing.assert_allclose(pred.mean, p_q, atol=1e-4)


def test_expected_log_lik_quadrature():
    cases = [(Poisson(), 3.0, {}), (Bernoulli(), 1.0, {}), (Bernoulli(link="logit"), 0.0, {}),
             (StudentT(dof=3.0), 0.7, {"scale": jnp.asarray(0.4)}),
             (Gaussian(), 0.7, {"noise": jnp.asarray(0.3)})]
    rng = np.random.default_rng(5)
    for lik, y, par in cases:
        for mu, var in [(0.3, 0.5), (-1.0, 2.0)]:
            got = float(lik.expected_log_lik(jnp.asarray([y]), jnp.asarray([mu]),
                                             jnp.asarray([var]), par)[0])
            # dense quadrature: trapezoid on 40,001 points over μ ± 12σ (error ≪ 1e-9)
            fg = np.linspace(mu - 12 * np.sqrt(var), mu + 12 * np.sqrt(var), 40_001)
            pdf = np.exp(-(fg - mu) ** 2 / (2 * var)) / np.sqrt(2 * np.pi * var)
            dens = np.trapezoid(np.asarray(lik.log_prob(y, jnp.asarray(fg), par)) * pdf, fg)
            # 20-point Gauss–Hermite: 1e-6 for the smooth log-likelihoods; Student-t's
            # log(1 + z²/ν) is far from polynomial (50 nodes, sd/scale up to 3.5): 1e-3 stated
            tol = 1e-3 if isinstance(lik, StudentT) else 1e-6
            assert abs(got - dens) <= tol * (1 + abs(dens)), (lik, mu, var, got - dens)
            fs = mu + np.sqrt(var) * rng.normal(size=100_000)
            mc = np.asarray(lik.log_prob(y, jnp.asarray(fs), par))
            assert abs(got - mc.mean()) <= 5 * mc.std() / np.sqrt(mc.size)


# ------------------------------------------------------------------ 3. minibatches
def test_minibatch_elbo_is_unbiased():
    rng, X, f = _data(n=200, seed=2)
    y = rng.poisson(np.exp(f)).astype(float)
    model = SVGPRegressor("poisson", n_features=24, maxiter=30).fit(X, y)
    ff, p = model.features_, model._params
    Phi = jnp.asarray(ff(model.scaler_.x(X)))
    consts = (jnp.asarray(ff.frequencies), ff.log_norm)
    lik, N, B = model.likelihood_, 200, 20
    full = float(elbo(p, Phi, jnp.asarray(y), jnp.zeros(N), N, *consts, lik))
    batch = jax.jit(jax.vmap(lambda i: elbo(p, Phi[i], jnp.asarray(y)[i], jnp.zeros(B), N,
                                            *consts, lik)))
    parts = np.asarray(batch(jnp.asarray(rng.permutation(N).reshape(-1, B))))
    assert abs(parts.mean() - full) <= 1e-10 * abs(full)  # a partition: exact
    idx = np.stack([rng.choice(N, B, replace=False) for _ in range(4000)])
    est = np.asarray(batch(jnp.asarray(idx)))
    assert abs(est.mean() - full) <= 4 * est.std() / np.sqrt(est.size)


def test_minibatch_fit_reaches_full_batch_optimum():
    rng, X, f = _data(n=400, seed=3)
    y = rng.poisson(np.exp(0.5 + f)).astype(float)
    k = Matern32(lengthscale=[0.7, 0.7], variance=1.0)
    kw = dict(n_features=24, learn_hyperparameters=False)
    full = SVGPRegressor("poisson", k, optimizer="lbfgs", maxiter=3000, **kw).fit(X, y)
    mini = SVGPRegressor("poisson", k, batch_size=50, maxiter=3000, learning_rate=0.02,
                         seed=1, **kw).fit(X, y)
    assert mini.elbo_ <= full.elbo_ + 1e-6  # the full batch is the optimum
    assert full.elbo_ - mini.elbo_ < 1.0  # within one nat of it (ELBO ≈ −600)
    Xt = rng.uniform(0, 10, (20, 2))
    np.testing.assert_allclose(mini.predict(Xt).mean_latent, full.predict(Xt).mean_latent,
                               atol=0.05)


def test_hyperparameters_learnt_improve_elbo():
    rng, X, f = _data(n=200, seed=4)
    y = (rng.uniform(size=f.size) < sps.ndtr(2 * f)).astype(float)
    fixed = SVGPRegressor("bernoulli", n_features=24, learn_hyperparameters=False,
                          optimizer="lbfgs", maxiter=200).fit(X, y)
    learnt = SVGPRegressor("bernoulli", n_features=24, optimizer="lbfgs",
                           maxiter=200).fit(X, y)
    assert learnt.elbo_ > fixed.elbo_
    acc = np.mean((learnt.predict(X).mean > 0.5) == (f > 0))
    assert acc > 0.8


# ------------------------------------------------------------------ 4. validation
@pytest.mark.parametrize("kind, bad, msg", [
    ("poisson", -1.0, "counts ≥ 0"), ("poisson", 1.5, "integer counts"),
    ("bernoulli", 2.0, "{0, 1}"), ("gaussian", np.nan, "NaN"), ("poisson", np.inf, "NaN/inf")])
def test_bad_input_refused(kind, bad, msg):
    _, X, f = _data(n=30)
    y = (f > 0).astype(float)
    y[3] = bad
    with pytest.raises(InputError, match=msg if msg != "{0, 1}" else r"\{0, 1\}"):
        SVGPRegressor(kind, maxiter=5).fit(X, y)


def test_shapes_and_not_fitted():
    _, X, f = _data(n=30)
    with pytest.raises(InputError, match="rows"):
        SVGPRegressor("gaussian", maxiter=5).fit(X, f[:-1])
    with pytest.raises(InputError, match="likelihood"):
        SVGPRegressor("gamma", maxiter=5).fit(X, f)
    with pytest.raises(InputError, match="exposure"):
        SVGPRegressor("poisson", maxiter=5).fit(X, np.ones(30), exposure=-np.ones(30))
    with pytest.raises(NotFittedError):
        SVGPRegressor("poisson").predict(X)


# ------------------------------------------------------------------ 5. front end
def test_front_end_poisson_raster(tmp_path):
    import xarray as xr

    from geogp.cli import main

    rng = np.random.default_rng(6)
    yc, xc = np.arange(20.0), np.arange(25.0)
    lam = np.exp(1 + np.sin(xc / 5)[None, :] + np.cos(yc / 4)[:, None])
    z = rng.poisson(lam).astype(float)
    z[4:8, 6:12] = np.nan
    z[:, 0] = np.nan  # an unobserved edge column: the window must still cover the raster
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": yc, "x": xc}).rio.write_crs(32633)
    opts = dict(n_features=48, maxiter=300)
    pred = geogp.fit(da, likelihood="poisson", **opts).predict(like=da)
    assert pred["mean"].shape == da.shape and (pred["mean"].values > 0).all()
    # the same model fitted directly on the observed cells, predicted on the grid
    obs = np.isfinite(z)
    iy, ix = np.nonzero(obs)
    Y, Xg = np.meshgrid(yc, xc, indexing="ij")
    grid = np.stack([Y.ravel(), Xg.ravel()], 1)
    own = SVGPRegressor("poisson", bounds=[grid.min(0), grid.max(0)], **opts)
    own.fit(np.stack([yc[iy], xc[ix]], 1), z[obs])
    ref = own.predict(grid)
    np.testing.assert_allclose(pred["mean"].values.ravel(), ref.mean, rtol=1e-3)
    np.testing.assert_allclose(pred["std"].values.ravel(), np.sqrt(ref.var_observed), rtol=1e-3)
    assert np.corrcoef(pred["mean"].values[obs], lam[obs])[0, 1] > 0.8
    path = tmp_path / "counts.tif"
    da.rio.to_raster(path)
    assert main(["fit", str(path), "--out", str(tmp_path / "rates.tif"), "--likelihood",
                 "poisson", "--features", "48", "--maxiter", "100", "--quiet"]) == 0
    with pytest.raises(InputError, match="counts"):
        geogp.fit(da * 0.5, likelihood="poisson", **opts)
