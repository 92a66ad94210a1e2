"""Wavelet coefficient prior, collapsed bound, posterior and estimator (docs/wavelets.md; T19, T20,
T25).

Every check compares with an independent reference: the thesis formulas written out in plain
numpy, dense N×N Gaussian-process algebra with K = ΦᵀΛΦ (``_reference.dense_gp``), a dense
JAX log marginal likelihood for gradients, and central finite differences.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geogp.exceptions import InputError, OutsideWindowError
from geogp.features.wavelet import make_basis
from geogp.features.wavelet_statistics import wavelet_statistics
from geogp.linalg import HAVE_CHOLMOD
from geogp.models import wavelet as wm
from geogp.models.wavelet.prior import (
    effective_lengthscale,
    init_params,
    log_coefficients_1d,
    log_precisions,
)

from _reference import dense_gp


# --------------------------------------------------------------------------- backends
def _problem(stats, backend="dense", normalisation="amplitude"):
    return wm.make_problem(stats, backend, normalisation)


# --------------------------------------------------------------------------- helpers
def _params(d, q, rng, **kw):
    p = init_params(d, q, decay=rng.uniform(0.3, 1.5, d),
                    component_decay=rng.uniform(0.1, 2.0, (d, q)),
                    component_weight=rng.uniform(0.3, 2.0, (d, q)),
                    component_centre=rng.uniform(-1, 1, (d, q)),
                    component_width=rng.uniform(0.3, 1.0, (d, q)), noise=0.3, amplitude=1.3)
    p.update({k: jnp.asarray(v, dtype=jnp.float64) for k, v in kw.items()})
    return p


def _beta_thesis(a0, a, b, c, s, level, shift, iota):
    """Eqs. 4.25–4.27 written out directly in numpy (no logs)."""
    C = lambda x: (2 ** (1 + x) - 1) * 2 ** (1 + x)  # noqa: E731
    jj = level - iota + 2
    num = C(a0) * 2.0 ** (-(1 + a0) * jj)
    z = 1.0
    for q in range(len(a)):
        g = 2.0 ** (-(((shift * 2.0**-level) - c[q]) / s[q]) ** 2)
        num = num + b[q] * C(a[q]) * 2.0 ** (-(1 + a[q]) * jj) * g
        z = z + b[q] * g
    return num / (2 * z)


def _lambda_np(basis, params, normalisation="amplitude", location="left"):
    """λ of all M features from the thesis formulas: σ_f² ∏_d β^{(d)} (× 2^j for "l2")."""
    P = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    idx = basis.unravel(np.arange(basis.n_features))
    lam = float(P["amplitude"]) * np.ones(basis.n_features)
    for d, b in enumerate(basis.dims):
        beta = _beta_thesis(P["decay"][d], P["component_decay"][d], P["component_weight"][d],
                            P["component_centre"][d], P["component_width"][d],
                            b.level.astype(float),
                            b.shift + (3.5 * (b.table.p == 4) if location == "centre" else 0.0),
                            b.iota)
        beta = np.where(b.kind == 0, 0.5, beta)  # α_t = ½ (4.24)
        if normalisation == "l2":
            beta = beta * 2.0 ** b.level.astype(float)
        lam = lam * beta[idx[d]]
    return lam


def _dense_phi_lambda(basis, params, X, normalisation="amplitude"):
    """All M features at X (dense (M, N)), and λ of all M features (numpy reference)."""
    return basis.feature_matrix(X).toarray(), _lambda_np(basis, params, normalisation)


_log_coefficients_1d = jax.jit(log_coefficients_1d, static_argnums=8)
_log_precisions = jax.jit(log_precisions, static_argnums=(1, 3))
_effective_lengthscale = jax.jit(effective_lengthscale, static_argnums=1)
_value_and_grad = jax.jit(jax.value_and_grad(wm.collapsed_bound))


@pytest.fixture(scope="module")
def data1d():
    rng = np.random.default_rng(5)
    X = np.sort(rng.uniform(-1.5, 1.5, (70, 1)), axis=0)
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=70)
    return X, y


@pytest.fixture(scope="module")
def data2d():
    rng = np.random.default_rng(6)
    X = rng.uniform(-1.0, 1.0, (60, 2))
    y = np.cos(2 * X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=60)
    return X, y


# --------------------------------------------------------------------------- prior (T19)
def test_coefficients_match_thesis_formulas(rng):
    level = np.repeat(np.arange(-2, 4), 9)
    shift = np.tile(np.arange(-4, 5), 6)
    kind = np.ones_like(level)
    kind[:3] = 0
    for q in (0, 1, 3):
        p = _params(1, q, rng)
        got = np.exp(np.asarray(_log_coefficients_1d(
            p["decay"][0], p["component_decay"][0], p["component_weight"][0],
            p["component_centre"][0], p["component_width"][0], kind, level, shift, -2)))
        args = [np.asarray(p[k][0]) for k in ("decay", "component_decay", "component_weight",
                                                "component_centre", "component_width")]
        want = _beta_thesis(*args, level.astype(float), shift.astype(float), -2)
        want[kind == 0] = 0.5  # α_t = ½ (4.24)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # the library's product over dimensions, with the amplitude and the "l2" factor 2^j
    basis = make_basis("db2", -1, 1, [[-1.0, 1.0], [-0.5, 2.0]])
    p = _params(2, 2, rng)
    idx = basis.unravel(np.arange(basis.n_features))
    for norm in ("amplitude", "l2"):
        got = np.exp(np.asarray(_log_precisions(p, basis.dims, idx, norm)))
        np.testing.assert_allclose(got, _lambda_np(basis, p, norm), rtol=1e-12)


def test_centre_location_moves_the_bumps(problems):
    """location="centre" reads g_q at the middle of each db4 support (t + 3.5) 2^{−j}."""
    _name, X, y, basis, params, stats, _probs = problems[0]
    assert basis.dims[0].table.p == 4
    phi, lam = _dense_phi_lambda(basis, params, X)
    lam_c = _lambda_np(basis, params, location="centre")
    assert np.max(np.abs(np.log(lam_c / lam))) > 1e-3
    want = dense_gp.log_marginal_likelihood(phi.T @ (lam_c[:, None] * phi), y,
                                            float(params["noise"]))
    got = float(wm.collapsed_bound(params, wm.make_problem(stats, "auto", location="centre")))
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize("a0", [0.3, 0.5, 2.0])
def test_normalisation_identities(a0):
    """T19: α + Σβ = 1 (Q = 0); Haar k(x,x) = 1 − ½·2^{−(1+a0)(j_max−ι+1)}; "l2" variant."""
    iota, j_max = -2, 3
    levels = np.arange(iota, j_max + 1)
    beta = np.exp(np.asarray(_log_coefficients_1d(
        jnp.asarray(a0), jnp.zeros(0), jnp.zeros(0), jnp.zeros(0), jnp.zeros(0),
        np.ones_like(levels), levels, np.zeros_like(levels), iota)))
    r = 2.0 ** -(1 + a0)
    C = (2 ** (1 + a0) - 1) * 2 ** (1 + a0)
    tail = 0.5 * C * r ** (j_max - iota + 3) / (1 - r)  # Σ_{j > j_max} β_j in closed form
    assert abs(0.5 + beta.sum() + tail - 1.0) < 1e-14

    basis = make_basis("haar", iota, j_max, [[-2.3, 1.9]])
    X = np.random.default_rng(0).uniform(-2.3, 1.9, (200, 1))
    params = init_params(1, 0, decay=a0)
    phi = basis.feature_matrix(X).toarray()
    idx = basis.unravel(np.arange(basis.n_features))
    for norm, want in [("amplitude", 1 - 0.5 * r ** (j_max - iota + 1)),
                       ("l2", 2.0**iota * 0.5 + np.sum(2.0**levels * beta))]:
        lam = np.exp(np.asarray(_log_precisions(params, basis.dims, idx, norm)))
        np.testing.assert_allclose(lam @ phi**2, want, rtol=0, atol=1e-12)
    if a0 == 0.5:  # the values quoted in docs/wavelets.md (normalisation) for the L² convention
        assert abs(2.0**iota * 0.5 + np.sum(2.0**levels * beta) - 0.37) < 0.005


def test_product_kernel_and_psd(data2d, rng):
    """2-D: ΦᵀΛΦ = σ_f² k₁ ⊙ k₂ with per-dimension parameters, and it is PSD."""
    X, _ = data2d
    basis = make_basis("db2", -1, 1, [[-1.0, 1.0], [-1.0, 1.0]])
    p = _params(2, 1, rng)
    phi, lam = _dense_phi_lambda(basis, p, X)
    K = phi.T @ (lam[:, None] * phi)
    factors = []
    for d, b in enumerate(basis.dims):
        basis_d = make_basis("db2", -1, 1, [[b.lo, b.hi]])
        p_d = {k: (v[d:d + 1] if np.ndim(v) else v) for k, v in p.items()}
        p_d["amplitude"] = jnp.asarray(1.0)
        phi_d, lam_d = _dense_phi_lambda(basis_d, p_d, X[:, d:d + 1])
        factors.append(phi_d.T @ (lam_d[:, None] * phi_d))
    np.testing.assert_allclose(K, 1.3 * factors[0] * factors[1], rtol=1e-12, atol=1e-14)
    for k in [K, *factors]:
        eig = np.linalg.eigvalsh(k)
        assert eig.min() >= -1e-10 * eig.max()


# --------------------------------------------------------------------------- bound (T20)
MARGIN = 0.5  # the window extends beyond the data, so some features are pruned


@pytest.fixture(scope="module")
def problems(data1d, data2d):
    """(name, X, y, basis, params, stats, {backend: problem}) for a few configurations."""
    rng = np.random.default_rng(7)
    backends = ["dense"] + (["cholmod"] if HAVE_CHOLMOD else [])
    out = []
    for name, fam, iota, jm, (X, y), q in [("db4-1d", "db4", -2, 2, data1d, 1),
                                            ("haar-1d", "haar", -2, 3, data1d, 2),
                                            ("db2-2d", "db2", -1, 0, data2d, 1)]:
        window = np.stack([X.min(0) - MARGIN, X.max(0) + MARGIN], 1)
        basis = make_basis(fam, iota, jm, window)
        stats = wavelet_statistics(basis, X, y)
        assert stats.n_active < basis.n_features
        out.append((name, X, y, basis, _params(X.shape[1], q, rng), stats,
                    {b: _problem(stats, b) for b in backends}))
    return out


def _fd_check(problem, params, keys=("decay", "component_decay", "component_centre",
                                     "component_width", "noise")):
    """Central differences of the bound in log θ (in θ for the centres) vs jax.grad."""
    _, grad = _value_and_grad(params, problem)
    for k in keys:
        v = np.asarray(params[k], dtype=np.float64)
        i = np.unravel_index(v.size - 1, v.shape) if v.ndim else ()
        h = 1e-5
        vals = []
        for sgn in (1, -1):
            w = v.copy()
            w[i] = v[i] + sgn * h if k == "component_centre" else v[i] * math.exp(sgn * h)
            vals.append(float(_value_and_grad({**params, k: jnp.asarray(w)}, problem)[0]))
        fd = (vals[0] - vals[1]) / (2 * h)
        g = float(np.asarray(grad[k])[i]) * (1.0 if k == "component_centre" else v[i])
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7, err_msg=k)


@pytest.mark.parametrize("case", [0, 1, 2])
def test_bound_equals_exact_lml_and_gradients_agree(problems, case):
    """T20: sparse bound = log N(y | 0, ΦᵀΛΦ + σ²I); CHOLMOD = dense backend (value and VJP);
    gradients = central finite differences."""
    name, X, y, basis, params, _stats, probs = problems[case]
    phi, lam = _dense_phi_lambda(basis, params, X)
    want = dense_gp.log_marginal_likelihood(phi.T @ (lam[:, None] * phi), y, float(params["noise"]))
    results = {b: _value_and_grad(params, p) for b, p in probs.items()}
    for backend, (value, _) in results.items():
        np.testing.assert_allclose(float(value), want, rtol=1e-9, err_msg=f"{name} {backend}")
    if "cholmod" in results:
        for k in params:
            np.testing.assert_allclose(results["cholmod"][1][k], results["dense"][1][k],
                                       rtol=1e-8, atol=1e-10, err_msg=f"{name} {k}")
    _fd_check(probs["cholmod" if "cholmod" in probs else "dense"], params)


def test_l2_normalisation_bound(problems):
    _name, X, y, basis, params, stats, _ = problems[0]
    phi, lam = _dense_phi_lambda(basis, params, X, "l2")
    want = dense_gp.log_marginal_likelihood(phi.T @ (lam[:, None] * phi), y, float(params["noise"]))
    got = float(wm.collapsed_bound(params, _problem(stats, "auto", "l2")))
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_pruning_and_chunk_invariance(problems):
    """A narrower window drops only data-free (pruned) features; chunking changes nothing."""
    _name, X, y, basis, params, stats, probs = problems[0]
    ref = float(wm.collapsed_bound(params, probs["dense"]))
    tight = make_basis("db4", -2, 2, np.stack([X.min(0), X.max(0)], 1))
    st_tight = wavelet_statistics(tight, X, y, chunk_size=7)
    assert tight.n_features < basis.n_features and st_tight.n_active == stats.n_active
    np.testing.assert_allclose(float(wm.collapsed_bound(params, _problem(st_tight, "auto"))), ref,
                               rtol=1e-12)


@pytest.mark.parametrize("case", [0, 2])
def test_predictions_match_exact_gp(problems, case):
    """Mean and latent variance = dense GP with K = ΦᵀΛΦ, also where features are pruned."""
    _name, X, y, basis, params, _stats, probs = problems[case]
    post = wm.posterior(params, probs["cholmod" if "cholmod" in probs else "dense"])
    win = basis.window
    Xs = np.random.default_rng(3).uniform(win[:, 0], win[:, 1], (40, X.shape[1]))
    phi, lam = _dense_phi_lambda(basis, params, X)
    phis, _ = _dense_phi_lambda(basis, params, Xs)
    K, Ks, Kss = (a.T @ (lam[:, None] * b) for a, b in ((phi, phi), (phi, phis), (phis, phis)))
    mean, cov = dense_gp.predict(K, Ks, Kss, y, float(params["noise"]))
    got_mean, got_var = post.predict(Xs, chunk_size=16)  # several chunks, last one padded
    np.testing.assert_allclose(got_mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got_var, np.diag(cov), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(post.prior_variance(Xs), np.diag(Kss), rtol=1e-12)
    np.testing.assert_allclose(post.bound, dense_gp.log_marginal_likelihood(
        K, y, float(params["noise"])), rtol=1e-9)


# --------------------------------------------------------------------------- lengthscale
def test_effective_lengthscale_formula(rng):
    p = _params(2, 2, rng)
    X = rng.normal(size=(15, 2))
    got = np.asarray(_effective_lengthscale(p, -2, X))
    c = 0.5 * math.log2(math.e)
    for d in range(2):
        a0 = float(p["decay"][d])
        num = 2.0 ** -(-2 + c / (1 + a0))
        den = 1.0
        for q in range(2):
            g = 2.0 ** -(((X[:, d] - float(p["component_centre"][d, q]))
                          / float(p["component_width"][d, q])) ** 2)
            bq = float(p["component_weight"][d, q])
            num = num + bq * g * 2.0 ** -(-2 + c / (1 + float(p["component_decay"][d, q])))
            den = den + bq * g
        np.testing.assert_allclose(got[:, d], num / den, rtol=1e-13)
    p0 = {**p, "component_weight": jnp.zeros((2, 2))}  # no components: ℓ₀ = 2^{−j′} everywhere
    np.testing.assert_allclose(np.asarray(_effective_lengthscale(p0, -2, X)),
                               np.broadcast_to(2.0 ** -(-2 + c / (1 + np.asarray(p["decay"]))),
                                               (15, 2)), rtol=1e-14)


# --------------------------------------------------------------------------- estimator
def test_regressor_fit_predict_on_original_scale(data2d):
    X, y = data2d
    X = X * np.array([100.0, 3.0]) + np.array([5e5, -7.0])  # projected-metre-like coordinates
    y = 10.0 + 4.0 * y
    m = wm.WaveletRegressor("haar", iota=-1, j_max=1, n_components=1, maxiter=10).fit(X, y)
    assert m.report_.history[-1] < m.report_.history[0]
    assert m.n_active_features_ <= m.n_features_
    # the fitted model equals a dense GP on the standardised data, mapped back
    Xs_tr = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    phi, lam = _dense_phi_lambda(m.basis_, m.params_, Xs_tr)
    noise = float(m.params_["noise"])
    K = phi.T @ (lam[:, None] * phi)
    np.testing.assert_allclose(m.bound_, dense_gp.log_marginal_likelihood(K, ys, noise), rtol=1e-9)
    Xt = X[:7] * 0.999 + 0.001 * X.mean(0)
    phis, _ = _dense_phi_lambda(m.basis_, m.params_, (Xt - X.mean(0)) / X.std(0))
    mean, cov = dense_gp.predict(K, phi.T @ (lam[:, None] * phis),
                                 phis.T @ (lam[:, None] * phis), ys, noise)
    pred = m.predict(Xt)
    np.testing.assert_allclose(pred.mean, y.mean() + y.std() * mean, rtol=1e-8)
    np.testing.assert_allclose(pred.var_latent, y.var() * np.diag(cov), rtol=1e-8)
    np.testing.assert_allclose(pred.var_observed, pred.var_latent + y.var() * noise, rtol=1e-12)
    np.testing.assert_allclose(m.signal_to_noise(Xt) ** 2,
                               np.diag(phis.T @ (lam[:, None] * phis)) / noise, rtol=1e-10)
    ell = m.effective_lengthscale(Xt)
    np.testing.assert_allclose(
        ell, np.asarray(_effective_lengthscale(m.params_, -1, (Xt - X.mean(0)) / X.std(0)))
        * X.std(0), rtol=1e-12)
    grid = m.predict_grid(np.linspace(X[:, 0].min(), X[:, 0].max(), 4),
                          np.linspace(X[:, 1].min(), X[:, 1].max(), 2))
    np.testing.assert_allclose(grid.mean[1:3, 1], m.predict(np.array(
        [[grid_x, X[:, 1].max()] for grid_x in np.linspace(X[:, 0].min(), X[:, 0].max(), 4)[1:3]]
    )).mean, rtol=1e-10)
    assert grid.mean.shape == (4, 2) and np.all(grid.var_latent >= 0)
    with pytest.raises(OutsideWindowError, match="margin"):
        m.predict(X[:1] + np.array([1e4, 0.0]))
    with pytest.raises(InputError, match=r"1 column.*fitted on 2-dimensional"):
        m.predict(X[:3, :1])


@pytest.mark.parametrize("kwargs,match", [
    ({"family": "sym4"}, "unknown wavelet family"),
    ({"n_components": -1}, "n_components"),
    ({"margin": -1.0}, "margin"),
    ({"normalisation": "unit"}, "normalisation"),
    ({"location": "middle"}, "location"),
    ({"backend": "gpu"}, "backend"),
    ({"decay": -0.5}, "decay"),
    ({"iota": 2, "j_max": 1}, "j_max"),
])
def test_regressor_rejects_bad_arguments(kwargs, match):
    X = np.linspace(0, 1, 20)[:, None]
    with pytest.raises(InputError, match=match):
        wm.WaveletRegressor(**kwargs).fit(X, np.sin(X[:, 0]))


def test_regressor_rejects_bad_data():
    m = wm.WaveletRegressor("haar", n_components=0, optimize=False)
    with pytest.raises(InputError, match="1 to 2 columns"):
        m.fit(np.zeros((5, 3)), np.arange(5.0))
    with pytest.raises(InputError, match="rows"):
        m.fit(np.zeros((5, 1)), np.arange(4.0))
    with pytest.raises(ValueError, match="NaN"):
        m.fit(np.array([[0.0], [np.nan], [1.0]]), np.arange(3.0))


# --------------------------------------------------------------------------- T25 (slow)
def _toy(seed):
    """docs/tests.md (reference experiments) non-stationary toy: 180 points on [−5, 5], patch of 18
    around x = 2."""
    rng = np.random.default_rng(seed)
    x = np.linspace(-5, 5, 180)
    u = (x + 5) / 10
    g = 0.3 * u + 0.7 / (1 + np.exp(-21 * (u - 0.7)))
    K = np.exp(-0.5 * (g[:, None] - g[None]) ** 2 / 0.4**2)
    f = np.linalg.cholesky(K + 1e-10 * np.eye(180)) @ rng.standard_normal(180)
    y = f + 0.05 * rng.standard_normal(180)
    test = np.zeros(180, bool)
    test[np.argsort(np.abs(x - 2))[:18]] = True
    return x[:, None], y, test


@pytest.fixture(scope="module")
def t25_rmse():
    """Patch RMSE of the two wavelet models of Table 4.1 on seed 0 of the toy (thesis App. C.2)."""
    x, y, test = _toy(0)
    rmse = {}
    for name, model in [("haar", wm.WaveletRegressor("haar", iota=-2, j_max=3)),
                        ("db4", wm.WaveletRegressor("db4", iota=-2, j_max=3))]:
        pred = model.fit(x[~test], y[~test]).predict(x[test])
        rmse[name] = float(np.sqrt(np.mean((pred.mean - y[test]) ** 2)))
    return rmse


@pytest.mark.slow
def test_t25_wavelets_on_patch(t25_rmse):
    """T25 (loose): db4 within 2× of the thesis's 0.046 and better than Haar."""
    assert t25_rmse["db4"] < 2 * 0.046
    assert t25_rmse["haar"] > t25_rmse["db4"]


# T25's other half (db4 below the stationary model, stationary ≈ 0.425) is not reproduced
# under the documented toy, at any of three patch widths: it is not a test but a recorded
# finding, with the figures, in benchmarks/README.md (bench_wavelet_patch.py).


# --------------------------------------------------------------------------- default levels
def test_default_levels_follow_the_extent_and_the_pixel_size():
    """iota='auto': the coarsest scale 2^{-ι} spans the window; j_max='auto': the finest scale
    2^{-j} is within 2× of the pixel size (raster) or of the typical spacing (points), and
    the next coarser level would not be."""
    import warnings

    from geogp.exceptions import ApproximationWarning

    rng = np.random.default_rng(3)
    ay, ax = np.arange(40) * 0.25, 10.0 + np.arange(56) * 0.25   # pixel 0.25 (data units)
    v = np.sin(ay)[:, None] + np.cos(ax / 2)[None, :] + 0.05 * rng.normal(size=(40, 56))
    v[rng.random(v.shape) < 0.3] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)  # fits in memory: no warning
        m = wm.WaveletRegressor("haar", n_components=0, optimize=False).fit_grid([ay, ax], v)
    # the axis whose pixel is finest in the standardised units sets the level
    scale = float(np.max(m.scaler_.x_scale))   # standardised → data units on that axis
    finest = 2.0 ** -m.j_max_ * scale
    assert 0.25 / 2 < finest <= 2 * 0.25   # within 2× of the pixel
    assert 2.0 * finest > 2 * 0.25          # one level coarser would not be
    widths = [b.hi - b.lo for b in m.basis_.dims]
    assert 2.0 ** -m.iota_ >= max(widths) > 2.0 ** -(m.iota_ + 1)
    # scattered points: (area/N)^(1/2)
    X = rng.uniform(0, 10, size=(400, 2))
    p = wm.WaveletRegressor("haar", n_components=0, optimize=False).fit(X, np.sin(X[:, 0]))
    box = np.ptp(X, axis=0) / p.scaler_.x_scale   # the data's box, standardised
    assert p.spacing_ == pytest.approx(np.sqrt(np.prod(box) / 400), rel=1e-12)
    assert p.spacing_ / 2 < 2.0 ** -p.j_max_ <= 2 * p.spacing_


# the uncapped reference fit is itself capped (at most 4,000 db2 functions), with its own warning
@pytest.mark.filterwarnings("ignore:wavelet levels:geogp.exceptions.ApproximationWarning")
def test_default_finest_level_is_capped_by_memory_with_a_warning():
    """With a small max_bytes the finest level is lowered until the estimate fits, and a
    warning says so; an explicit j_max above the limit is refused with the estimate."""
    from geogp.exceptions import ApproximationWarning, MemoryEstimateError

    rng = np.random.default_rng(4)
    ay, ax = np.arange(40) * 0.25, np.arange(56) * 0.25
    v = np.sin(ay)[:, None] + np.cos(ax / 2)[None, :] + 0.05 * rng.normal(size=(40, 56))
    free = wm.WaveletRegressor("db2", n_components=0, optimize=False).fit_grid([ay, ax], v)
    limit = 0.5 * wm.WaveletRegressor._grid_needed_bytes(free.basis_,
                                                          int(np.isfinite(v).sum()))
    # the message gives the pixel in data units (axes of different extents: it is the same
    # 0.25 along both, whatever their standardised scales)
    with pytest.warns(ApproximationWarning, match=r"finest level.*the data's spacing \(0\.25\)"):
        capped = wm.WaveletRegressor("db2", n_components=0, optimize=False,
                                     max_bytes=limit).fit_grid([ay, ax], v)
    assert capped.j_max_ < free.j_max_
    assert wm.WaveletRegressor._grid_needed_bytes(capped.basis_, v.size) <= limit
    with pytest.raises(MemoryEstimateError, match="GiB"):
        wm.WaveletRegressor("db2", j_max=free.j_max_, n_components=0, optimize=False,
                            max_bytes=limit).fit(np.stack(np.meshgrid(ay, ax, indexing="ij"),
                                                          -1).reshape(-1, 2), v.ravel())
    with pytest.raises(InputError, match="j_max must be an integer level or 'auto'"):
        wm.WaveletRegressor(j_max="fine").fit(np.zeros((5, 1)) + np.arange(5.0)[:, None],
                                              np.arange(5.0))


@pytest.mark.skipif(not HAVE_CHOLMOD, reason="compares with the CHOLMOD backend")
def test_auto_backend_goes_dense_for_dense_patterns_with_the_same_bound():
    """backend='auto' takes dense LAPACK when the pattern is ≥ 20 % filled (coarse levels
    couple almost every pair) and CHOLMOD otherwise; the bound and its gradient are the same,
    and equal those of JAX's own dense Cholesky (autodiff, the oracle)."""
    import dataclasses

    from geogp.features.wavelet import make_basis
    from geogp.features.wavelet_statistics import wavelet_statistics
    from geogp.linalg.solvers import Solver
    from geogp.models.wavelet import bound as wm

    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, size=(300, 2))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=300)
    coarse = wavelet_statistics(make_basis("db2", -1, 0, [[-1.2, 1.2]] * 2), X, y)
    fine = wavelet_statistics(make_basis("haar", 0, 3, [[-1.2, 1.2]] * 2), X, y)
    assert wm._dense_is_faster(coarse.gram) and not wm._dense_is_faster(fine.gram)
    assert wm.make_problem(coarse, "auto").solve == Solver("lapack")
    assert wm.make_problem(fine, "auto").solve == Solver("cholmod")
    params = _params(2, 1, rng)
    loss = wm.collapsed_bound
    a, ga = jax.value_and_grad(loss)(params, wm.make_problem(coarse, "auto"))
    b, gb = jax.value_and_grad(loss)(params, wm.make_problem(coarse, "cholmod"))
    oracle = dataclasses.replace(wm.make_problem(coarse, "auto"), solve=Solver("dense"))
    c, gc = jax.value_and_grad(loss)(params, oracle)
    assert float(a) == pytest.approx(float(b), rel=1e-10)
    assert float(a) == pytest.approx(float(c), rel=1e-10)
    for k in ga:
        np.testing.assert_allclose(ga[k], gb[k], rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(ga[k], gc[k], rtol=1e-7, atol=1e-10)
