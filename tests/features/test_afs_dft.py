"""AFS-DFT: λ from the DFT of kernel samples (docs/afs.md (AFS-DFT), T11; gradients T10)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geogp
from geogp.core.kernels import ProductKernel
from geogp.exceptions import InputError
from geogp.features.afs_dft import (
    dft_log_lambda,
    dft_spectrum,
    feature_bins,
    log_lambda,
    sample_offsets,
)
from geogp.features.fourier import FourierFeatures
from geogp.features.fourier_statistics import dense_stats
from geogp.models.collapsed import collapsed_bound

from _reference import dense_gp

_gram = jax.jit(lambda k, X: k(X, X))  # jitted: eager JAX compiles every primitive separately



def _product(ell_se, ell_m52, variance=1.0):
    return ProductKernel([geogp.SquaredExponential(lengthscale=ell_se, variance=variance),
                          geogp.Matern52(lengthscale=ell_m52)])


@pytest.mark.parametrize("D", [1, 2])
def test_reconstruction_is_exact_at_the_samples(D):
    """T11: (∏2W_d)⁻¹ Σ_j ŝ_j e^{i2π z_j·r} = k(r) at r = m∘b (1e-12), by an explicit sum and
    through the real features Φ(x)ᵀΛΦ(x′) with λ = ŝ(|j|)/∏2W_d."""
    k = _product(np.array([0.5, 0.8])[:D], np.array([0.7, 0.4])[:D])
    W = np.array([1.7, 2.3])[:D]
    J = np.array([6, 5])[:D]
    s = np.asarray(dft_spectrum(k, W, J))
    assert s.shape == tuple(2 * J + 1)
    offs = sample_offsets(W, J)
    R = np.stack([g.ravel() for g in np.meshgrid(*offs, indexing="ij")], axis=1)  # m∘b
    Zj = np.stack([g.ravel() for g in np.meshgrid(
        *[np.arange(-j, j + 1) / (2 * w) for j, w in zip(J, W, strict=True)], indexing="ij")],
        axis=1)
    rec = (np.exp(2j * np.pi * R @ Zj.T) @ s.ravel()).real / np.prod(2 * W)
    k_R = np.asarray(jax.jit(k.evaluate)(R))
    np.testing.assert_allclose(rec, k_R, atol=1e-12)
    # the same through the real full-lattice features (K_d = J_d + 1, no mask)
    ff = FourierFeatures.build(np.zeros(D), W, J + 1, lattice="full", mask=False)
    lam = s.ravel()[feature_bins(ff)] / np.prod(2 * W)
    x0 = np.array([0.3, -0.2])[:D]
    Phi0, Phi = ff(x0[None, :]), ff(x0 + R)
    np.testing.assert_allclose(Phi @ (lam * Phi0[0]), k_R, atol=1e-12)


def test_dft_converges_to_the_spectral_density_for_se():
    """T11: SE with W ≥ 10ℓ: ŝ = S(z_j) within 1e-10·max S on the whole DFT grid (ARD, 2-D).

    The DFT is periodic in j with period M_d, so ŝ_j also holds the alias S(z_j ∓ M_d/(2W_d));
    J_d is taken large enough that S at the grid edge is below 1e-11·S(0)
    (2π²ℓ_d²(J_d/2W_d)² > 25.3).
    """
    ell = np.array([0.3, 0.5])
    k = geogp.SquaredExponential(lengthscale=ell, variance=1.7)
    W = 10 * ell.max() * np.ones(2)
    J = np.array([40, 25])
    s = np.asarray(dft_spectrum(k, W, J))
    z = np.stack(np.meshgrid(*[np.arange(-j, j + 1) / (2 * w) for j, w in zip(J, W, strict=True)],
                             indexing="ij"), axis=-1)
    S = np.asarray(k.spectral_density(z))
    np.testing.assert_allclose(s, S, rtol=0, atol=1e-10 * S.max())
    # and the features' λ agrees with the closed-form one
    ff = FourierFeatures.build([0, 0], W, J + 1, lattice="full")
    np.testing.assert_allclose(np.exp(np.asarray(dft_log_lambda(ff, k).log_lam)),
                               np.exp(np.asarray(ff.log_lambda(k))),
                               atol=1e-10 * S.max() / np.prod(2 * W))


def test_nonpositive_values_are_clipped_or_dropped(rng):
    """T11: SE truncated at W = 1.5ℓ has ŝ < 0 somewhere: clip counts them (> 0) and floors λ
    at ε·max ŝ; drop gives λ = 0 (log λ = −inf); both bounds are finite."""
    ell = 1.0
    W = 1.5 * ell
    k = geogp.SquaredExponential(lengthscale=ell)
    ff = FourierFeatures.build([0.0], [W], 20, lattice="full")
    clip = dft_log_lambda(ff, k, "clip")
    drop = dft_log_lambda(ff, k, "drop")
    s_m = np.asarray(clip.s_hat).ravel()[feature_bins(ff)]
    n_neg = int(np.sum(s_m <= 0))
    assert n_neg > 0 and int(drop.n_nonpositive) == n_neg
    assert int(clip.n_nonpositive) >= n_neg
    floor = np.log(1e-12 * np.asarray(clip.s_hat).max() / (2 * W))
    np.testing.assert_allclose(np.asarray(clip.log_lam)[s_m <= 0], floor, rtol=1e-12)
    assert np.all(np.isneginf(np.asarray(drop.log_lam)[s_m <= 0]))
    assert np.all(np.isfinite(np.asarray(drop.log_lam)[s_m > 0]))
    X = rng.uniform(-W / 2, W / 2, (40, 1))
    y = np.sin(3 * X[:, 0])
    st = dense_stats(ff, X, y)
    bound = jax.jit(collapsed_bound)
    for res in (clip, drop):
        assert np.isfinite(float(bound(res.log_lam, 0.1, 1.0, st)))


def test_product_kernel_bound_approaches_exact_lml(rng):
    """T11: SE × M52 in 1-D, W = 2.5·W_x: |L − L''| < 1e-3 at M = 159 (full lattice, DFT λ)."""
    X = rng.uniform(-1, 1, (100, 1))
    k = _product(0.5, 0.7)
    noise = 0.1
    K = np.asarray(_gram(k, X))
    y = dense_gp.sample(K, noise, rng)
    lml = dense_gp.log_marginal_likelihood(K, y, noise)
    ff = FourierFeatures.build([0.0], [5.0], 80, lattice="full")

    @jax.jit
    def bound(k, st):
        res = dft_log_lambda(ff, k)
        return collapsed_bound(res.log_lam, noise, k.variance_at_zero, st), res.n_nonpositive

    value, n_bad = bound(k, dense_stats(ff, X, y))
    assert ff.n_features == 159 and int(n_bad) == 0
    assert abs(lml - float(value)) < 1e-3


def test_gradient_through_the_dft_matches_central_differences(rng):
    """T10: d L''/d log θ through jnp.fft vs central differences (rtol 1e-5)."""
    X = rng.uniform(-1, 1, (50, 1))
    y = np.sin(4 * X[:, 0]) + 0.3 * rng.normal(size=50)
    ff = FourierFeatures.build([0.0], [4.0], 30, lattice="full")
    st = dense_stats(ff, X, y)

    @jax.jit
    def f(logp):
        k = ProductKernel([geogp.SquaredExponential(lengthscale=jnp.exp(logp[0]),
                                                    variance=jnp.exp(logp[1])),
                           geogp.Matern52(lengthscale=jnp.exp(logp[2]))])
        ll = dft_log_lambda(ff, k).log_lam
        return collapsed_bound(ll, jnp.exp(logp[3]), k.variance_at_zero, st)

    p0 = np.log([0.5, 1.2, 0.8, 0.2])
    g = np.asarray(jax.jit(jax.grad(f))(jnp.asarray(p0)))
    h = 1e-5
    fd = np.array([(float(f(p0 + h * e)) - float(f(p0 - h * e))) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_bad_inputs_are_refused():
    k = _product(0.5, 0.7)
    odd = FourierFeatures.build([0.0], [2.0], 5)
    full = FourierFeatures.build([0.0], [2.0], 5, lattice="full")
    with pytest.raises(InputError, match="full"):
        dft_log_lambda(odd, k)
    with pytest.raises(InputError, match="lattice='full'"):
        log_lambda(odd, k)
    with pytest.raises(InputError, match="nonpositive"):
        dft_log_lambda(full, k, nonpositive="zero")
    with pytest.raises(InputError, match="J must be"):
        dft_log_lambda(full, k, J=2)
    with pytest.raises(InputError, match="two or more"):
        ProductKernel([geogp.SquaredExponential()])
    # closed-form kernels keep their exact λ through the dispatcher
    se = geogp.SquaredExponential(lengthscale=0.3)
    np.testing.assert_array_equal(np.asarray(log_lambda(odd, se)), np.asarray(odd.log_lambda(se)))


def test_afs_regressor_uses_the_dft_for_a_product_kernel(rng):
    """AFSRegressor with a ProductKernel fits on the full lattice through AFS-DFT λ."""
    from geogp.models.afs import AFSRegressor

    X = rng.uniform(-1, 1, (60, 1))
    y = np.sin(3 * X[:, 0]) + 0.2 * rng.normal(size=60)
    k0 = _product(0.5, 1.0)
    m = AFSRegressor(kernel=k0, lattice="full", n_freq=40, window_factor=2.0,
                     maxiter=30).fit(X, y)

    @jax.jit
    def bound(k, noise, st):
        res = dft_log_lambda(m.features_, k)
        return collapsed_bound(res.log_lam, noise, k.variance_at_zero, st), res.n_nonpositive

    value, n_bad = bound(m.kernel_, m.noise_, m.stats_)
    np.testing.assert_allclose(float(value), -m.report_.objective, rtol=1e-10)
    assert int(n_bad) == 0 and m.features_.lattice == "full"
    p = m.predict(X[:5])
    assert np.all(np.isfinite(p.mean)) and np.all(p.var_latent >= 0)
    with pytest.raises(InputError, match="lattice='full'"):
        AFSRegressor(kernel=k0, n_freq=10, maxiter=5).fit(X, y)
