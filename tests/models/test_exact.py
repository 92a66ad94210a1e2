"""Tests of geogp.models.exact: the exact GP every approximation is tested against
(docs/bound.md, baselines).

References: scikit-learn's GaussianProcessRegressor (value and analytic gradient of the log
marginal likelihood, predictive moments) and the plain-numpy dense GP in tests/_reference.
"""

from __future__ import annotations

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geogp.core import kernels as gk
from geogp.models.exact import regressor as exact
from geogp.models.exact.regressor import ExactGP, log_marginal_likelihood, predict

from _reference import dense_gp, kernels_np
from _reference.assertions import assert_allclose

sk_gp = pytest.importorskip("sklearn.gaussian_process")
sk_k = pytest.importorskip("sklearn.gaussian_process.kernels")

CLASSES = {
    "se": gk.SquaredExponential,
    "matern12": gk.Matern12,
    "matern32": gk.Matern32,
    "matern52": gk.Matern52,
}
NAMES = tuple(CLASSES)
ELL, VAR, NOISE = np.array([0.8, 1.3]), 1.4, 0.09


def _sk_base(name, ell):
    if name == "se":
        return sk_k.RBF(length_scale=ell)
    nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[name]
    return sk_k.Matern(length_scale=ell, nu=nu)


def _sk_observed(name, ell=ELL, var=VAR, noise=NOISE):
    """σ_f² k + white noise, no optimiser, no normalisation, no extra jitter (alpha = 0)."""
    kernel = sk_k.ConstantKernel(var) * _sk_base(name, ell) + sk_k.WhiteKernel(noise)
    return sk_gp.GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None, normalize_y=False)


@pytest.fixture
def data(rng):
    X = rng.uniform(-2.0, 2.0, size=(40, 2))
    y = np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1]) + 0.3 * rng.standard_normal(40)
    Xs = rng.uniform(-2.5, 2.5, size=(15, 2))
    return X, y, Xs


# ---------------------------------------------------------------------------------------------
# Log marginal likelihood
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_lml_matches_sklearn(name, data):
    X, y, _ = data
    gpr = _sk_observed(name).fit(X, y)
    ours = log_marginal_likelihood(CLASSES[name](ELL, VAR), NOISE, X, y)
    assert_allclose(ours, gpr.log_marginal_likelihood_value_, rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_lml_matches_dense_numpy_reference(name, data):
    X, y, _ = data
    K = kernels_np.gram(name, X, X, ELL, VAR)
    ours = log_marginal_likelihood(CLASSES[name](ELL, VAR), NOISE, X, y)
    assert_allclose(ours, dense_gp.log_marginal_likelihood(K, y, NOISE), rtol=1e-10)


def test_lml_of_sum_kernel_matches_sklearn(data):
    X, y, _ = data
    kern = gk.Matern12([0.3, 0.4], 0.5) + gk.SquaredExponential([1.5, 2.0], 0.8)
    sk = (sk_k.ConstantKernel(0.5) * sk_k.Matern([0.3, 0.4], nu=0.5)
          + sk_k.ConstantKernel(0.8) * sk_k.RBF([1.5, 2.0]) + sk_k.WhiteKernel(NOISE))
    gpr = sk_gp.GaussianProcessRegressor(sk, alpha=0.0, optimizer=None).fit(X, y)
    assert_allclose(log_marginal_likelihood(kern, NOISE, X, y),
                    gpr.log_marginal_likelihood_value_, rtol=1e-8)


def test_lml_same_eager_and_under_jit(data):
    X, y, _ = data
    kern = gk.Matern32(ELL, VAR)
    eager = log_marginal_likelihood(kern, NOISE, X, y)
    jitted = jax.jit(log_marginal_likelihood)(kern, NOISE, jnp.asarray(X), jnp.asarray(y))
    assert_allclose(jitted, eager, rtol=1e-13)


# ---------------------------------------------------------------------------------------------
# Gradients (T10 for the exact objective)
# ---------------------------------------------------------------------------------------------


def _lml_of_log_params(name, X, y):
    """θ = log(ℓ₁, ℓ₂, σ_f², σ²) ↦ LML."""
    def f(theta):
        kern = CLASSES[name](jnp.exp(theta[:2]), jnp.exp(theta[2]))
        return log_marginal_likelihood(kern, jnp.exp(theta[3]), X, y)
    return f


@pytest.mark.parametrize("name", NAMES)
def test_lml_gradient_matches_central_differences(name, data):
    X, y, _ = data
    f = jax.jit(_lml_of_log_params(name, X, y))
    theta = jnp.log(jnp.array([*ELL, VAR, NOISE]))
    grad = jax.grad(f)(theta)
    h = 1e-5
    eye = np.eye(4)
    fd = np.array([(f(theta + h * eye[i]) - f(theta - h * eye[i])) / (2 * h) for i in range(4)])
    assert_allclose(grad, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())


@pytest.mark.parametrize("name", NAMES)
def test_lml_gradient_matches_sklearn_analytic_gradient(name, data):
    """sklearn differentiates in log-hyperparameters θ = log(σ_f², ℓ₁, ℓ₂, σ²) by hand."""
    X, y, _ = data
    gpr = _sk_observed(name).fit(X, y)
    value, sk_grad = gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
    theta = jnp.log(jnp.array([*ELL, VAR, NOISE]))
    value_ours, grad = jax.value_and_grad(_lml_of_log_params(name, X, y))(theta)
    assert_allclose(value_ours, value, rtol=1e-8)
    assert_allclose(np.asarray(grad)[[2, 0, 1, 3]], sk_grad, rtol=1e-8,
                    atol=1e-10 * np.abs(sk_grad).max())


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_predict_matches_sklearn_observed_std(name, data):
    """With a WhiteKernel, sklearn's std includes the noise: compare with std_observed."""
    X, y, Xs = data
    mean_sk, std_sk = _sk_observed(name).fit(X, y).predict(Xs, return_std=True)
    gp = ExactGP(CLASSES[name](ELL, VAR), noise=NOISE, standardize=False, optimize=False)
    pred = gp.fit(X, y).predict(Xs)
    assert_allclose(pred.mean, mean_sk, rtol=1e-8, atol=1e-12)
    assert_allclose(pred.std_observed, std_sk, rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_predict_matches_sklearn_latent_std(name, data):
    """Noise as alpha (not a kernel term): sklearn's std is the latent sd of f."""
    X, y, Xs = data
    gpr = sk_gp.GaussianProcessRegressor(sk_k.ConstantKernel(VAR) * _sk_base(name, ELL),
                                         alpha=NOISE, optimizer=None).fit(X, y)
    mean_sk, std_sk = gpr.predict(Xs, return_std=True)
    pred = ExactGP(CLASSES[name](ELL, VAR), noise=NOISE, standardize=False,
                   optimize=False).fit(X, y).predict(Xs)
    assert_allclose(pred.mean, mean_sk, rtol=1e-8, atol=1e-12)
    assert_allclose(pred.std_latent, std_sk, rtol=1e-8)
    assert_allclose(pred.var_observed, pred.var_latent + NOISE, rtol=1e-14)


def test_predict_full_covariance_matches_dense_reference(data):
    X, y, Xs = data
    kern = gk.Matern52(ELL, VAR)
    mean, cov = predict(kern, NOISE, X, y, Xs, full_cov=True)
    g = lambda A, B: kernels_np.gram("matern52", A, B, ELL, VAR)  # noqa: E731
    mean_ref, cov_ref = dense_gp.predict(g(X, X), g(X, Xs), g(Xs, Xs), y, NOISE)
    assert_allclose(mean, mean_ref, rtol=1e-10, atol=1e-13)
    assert_allclose(cov, cov_ref, rtol=1e-9, atol=1e-12)
    _, var = predict(kern, NOISE, X, y, Xs)
    assert_allclose(var, np.diag(cov_ref), rtol=1e-9, atol=1e-12)


def test_standardized_model_equals_scaled_model_on_original_data(data):
    """GP on z-scored data with (ℓ̃, σ̃_f², σ̃²) = GP on the raw data with (ℓ̃ s_x, σ̃_f² s_y²,
    σ̃² s_y²) and constant mean m_y; the standardised LML is the raw one + N log s_y."""
    X, y, Xs = data
    X = X * np.array([3.0, 0.5]) + np.array([100.0, -7.0])
    Xs = Xs * np.array([3.0, 0.5]) + np.array([100.0, -7.0])
    y = 4.0 * y + 20.0
    gp = ExactGP("matern32", lengthscale=[0.4, 0.7], variance=0.9, noise=0.05,
                 optimize=False).fit(X, y)
    sx, my, sy = X.std(axis=0), y.mean(), y.std()
    assert_allclose(gp.scaler_.x_scale, sx, rtol=1e-14)
    ell, var, noise = np.array([0.4, 0.7]) * sx, 0.9 * sy**2, 0.05 * sy**2
    g = lambda A, B: kernels_np.gram("matern32", A, B, ell, var)  # noqa: E731
    mean_ref, cov_ref = dense_gp.predict(g(X, X), g(X, Xs), g(Xs, Xs), y - my, noise)
    pred = gp.predict(Xs)
    assert_allclose(pred.mean, mean_ref + my, rtol=1e-9)
    assert_allclose(pred.var_latent, np.diag(cov_ref), rtol=1e-8, atol=1e-12 * sy**2)
    assert_allclose(pred.var_observed, np.diag(cov_ref) + noise, rtol=1e-8)
    lml_raw = dense_gp.log_marginal_likelihood(g(X, X), y - my, noise)
    assert_allclose(gp.log_marginal_likelihood(), lml_raw + len(y) * np.log(sy), rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# Fitting
# ---------------------------------------------------------------------------------------------


def test_optimize_false_keeps_initial_parameters(data):
    X, y, _ = data
    gp = ExactGP("matern12", lengthscale=0.3, variance=1.2, noise=0.2, optimize=False).fit(X, y)
    assert_allclose(gp.kernel_.lengthscale, [0.3, 0.3])
    assert_allclose(gp.kernel_.variance, 1.2)
    assert gp.noise_ == 0.2
    assert gp.report_.message == "not optimised"
    assert_allclose(gp.report_.objective, -gp.log_marginal_likelihood(), rtol=1e-12)


def test_fit_reaches_sklearn_optimum(rng):
    """Same data, same start: L-BFGS on the JAX LML and sklearn's optimiser agree."""
    X = rng.uniform(0, 5, size=(60, 1))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.standard_normal(60)
    gp = ExactGP("se", lengthscale=0.5, variance=1.0, noise=0.1, standardize=False).fit(X, y)
    kernel = sk_k.ConstantKernel(1.0) * sk_k.RBF(0.5) + sk_k.WhiteKernel(0.1)
    gpr = sk_gp.GaussianProcessRegressor(kernel, alpha=0.0).fit(X, y)
    ours = np.log([float(gp.kernel_.variance), float(gp.kernel_.lengthscale[0]), gp.noise_])
    lml_ours = gp.log_marginal_likelihood()
    assert gp.report_.converged
    assert_allclose(lml_ours, gpr.log_marginal_likelihood(ours), rtol=1e-10)
    assert lml_ours >= gpr.log_marginal_likelihood_value_ - 1e-6
    assert_allclose(ours, gpr.kernel_.theta, atol=1e-3)
    assert_allclose(gp.report_.objective, -lml_ours, rtol=1e-8)


def test_fit_recovers_hyperparameters_of_a_known_gp():
    """N = 2000 points in 2-D drawn from a known SE GP: ℓ, σ_f², σ² within 20% (docs/bound.md,
    baselines).

    The default path: standardised data, default start ℓ̃ = 0.2, σ̃_f² = 1; the fitted
    values are mapped back through ``scaler_``. 2000 points on [0, 30]² with ℓ = 1 cover
    900 lengthscale-squares, so the sampling error of σ_f² is several times below 20%.
    """
    rng = np.random.default_rng(7)
    ell, var, noise, n = 1.0, 1.5, 0.1, 2000
    X = rng.uniform(0.0, 30.0, size=(n, 2))
    y = dense_gp.sample(kernels_np.gram("se", X, X, ell, var), noise, rng)
    gp = ExactGP("se", noise=0.1).fit(X, y)
    sc = gp.scaler_
    assert gp.report_.converged, gp.report_
    assert_allclose(np.asarray(gp.kernel_.lengthscale) * sc.x_scale, [ell, ell], rtol=0.2)
    assert_allclose(float(gp.kernel_.variance) * sc.y_scale**2, var, rtol=0.2)
    assert_allclose(gp.noise_ * sc.y_scale**2, noise, rtol=0.2)


def test_exact_doctests():
    result = doctest.testmod(exact)
    assert result.attempted > 0 and result.failed == 0
