"""Tests of geogp.core.kernels: covariance functions, spectral densities (docs/model.md (kernels),
T1), pytrees.

The spectral densities are checked against numerical Fourier/Hankel transforms of independent
numpy closed forms of k (tests/_reference), never against a copy of the density formulas.
"""

from __future__ import annotations

import doctest
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

import geogp
from geogp.core import kernels as gk
from geogp.exceptions import InputError

from _reference import kernels_np, transforms
from _reference.assertions import assert_allclose

CLASSES = {
    "se": gk.SquaredExponential,
    "matern12": gk.Matern12,
    "matern32": gk.Matern32,
    "matern52": gk.Matern52,
}
NAMES = tuple(CLASSES)
ELL, VAR = 0.7, 1.7  # isotropic tests: non-unit on purpose, so ℓ and σ_f² factors are exercised
ELL_ARD = (0.6, 1.4)  # docs/model.md (kernels), T1 (D = 2, ARD)


def _density_on_axis(kern, n_dims: int):
    """ξ ↦ S(ξ e₁) in D dimensions, vectorised over a numpy array of |ξ|, jitted once."""
    f = jax.jit(lambda x: kern.spectral_density(
        jnp.concatenate([x[..., None], jnp.zeros((*x.shape, n_dims - 1))], axis=-1)))
    return lambda x: np.asarray(f(jnp.asarray(x, dtype=jnp.float64)))


def _radial_k(name: str, n_dims: int, ell=ELL, var=VAR):
    """r ↦ k(r e₁) from the numpy reference, vectorised."""
    def k(r):
        r = np.asarray(r, dtype=np.float64)
        e = np.zeros((*r.shape, n_dims))
        e[..., 0] = r
        return kernels_np.k(name, e, ell, var)
    return k


# ---------------------------------------------------------------------------------------------
# T1, D = 1
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_density_1d_is_fourier_transform_of_kernel(name):
    """S(ξ) = 2∫₀^∞ k(r) cos(2πξr) dr (adaptive cosine-weighted quadrature), rtol 1e-8."""
    S = _density_on_axis(CLASSES[name](lengthscale=ELL, variance=VAR), 1)
    k = _radial_k(name, 1)
    # beyond ξℓ ≈ 0.5 the SE density is below 1e-4 S(0) and cancellation limits the reference
    xis = np.array([0.0, 0.05, 0.15, 0.3, 0.5] + ([] if name == "se" else [1.0, 2.0])) / ELL
    numeric = [transforms.cosine_transform_1d(lambda r: float(k(r)), x, upper=40 * ELL)
               for x in xis]
    assert_allclose(S(xis), numeric, rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_density_1d_integrates_to_variance(name):
    """∫S dξ = k(0) = σ_f², rtol 1e-8."""
    S = _density_on_axis(CLASSES[name](lengthscale=ELL, variance=VAR), 1)
    half, _ = scipy.integrate.quad(lambda x: float(S(x)), 0, np.inf, epsabs=1e-14,
                                   epsrel=1e-12, limit=500)
    assert_allclose(2 * half, VAR, rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_inverse_transform_1d_recovers_kernel(name):
    """k(r) = 2∫₀^∞ S(ξ) cos(2πξr) dξ with the cosine-weighted QAWF rule for the tails."""
    S = _density_on_axis(CLASSES[name](lengthscale=ELL, variance=VAR), 1)
    k = _radial_k(name, 1)
    rs = np.array([0.05, 0.2, 0.5, 1.0, 2.0, 3.0]) * ELL
    upper = 4.0 / ELL if name == "se" else np.inf  # SE: S(4/ℓ) ~ e^{-315}, QAWF needs a tail
    numeric = np.array([transforms.cosine_transform_1d(lambda x: float(S(x)), r, upper=upper)
                        for r in rs])
    assert_allclose(numeric, k(rs), rtol=1e-6, atol=1e-7 * VAR)


# ---------------------------------------------------------------------------------------------
# T1, D = 2 isotropic (Hankel transforms of order 0)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_density_2d_isotropic_is_hankel_transform_of_kernel(name):
    """S(ρ_ξ) = 2π∫₀^∞ k(r) J₀(2πρ_ξ r) r dr, rtol 1e-8."""
    S = _density_on_axis(CLASSES[name](lengthscale=ELL, variance=VAR), 2)
    k = _radial_k(name, 2)
    xis = np.array([0.05, 0.15, 0.3, 0.5] + ([] if name == "se" else [1.0, 2.0])) / ELL
    numeric = [transforms.hankel_2d(k, x, n_panels=60, scale=ELL) for x in xis]
    assert_allclose(S(xis), numeric, rtol=1e-8)
    assert_allclose(S(0.0), transforms.integral_2d_radial(k), rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_density_2d_isotropic_integrates_to_variance(name):
    """2π∫₀^∞ S(ρ) ρ dρ = σ_f², rtol 1e-8."""
    S = _density_on_axis(CLASSES[name](lengthscale=ELL, variance=VAR), 2)
    assert_allclose(transforms.integral_2d_radial(S), VAR, rtol=1e-8)


@pytest.mark.parametrize("name", NAMES)
def test_inverse_hankel_2d_recovers_kernel(name):
    """k(r) = 2π∫₀^∞ S(ρ) J₀(2πρr) ρ dρ (Matérn-½ tail: S ρ ~ ρ⁻², Euler-averaged)."""
    S = _density_on_axis(CLASSES[name](lengthscale=ELL, variance=VAR), 2)
    k = _radial_k(name, 2)
    rs = np.array([0.05, 0.2, 0.5, 1.0, 2.0, 3.0]) * ELL
    numeric = [transforms.hankel_2d(S, r, n_panels=400, scale=1.0 / ELL) for r in rs]
    assert_allclose(numeric, k(rs), rtol=1e-6, atol=1e-7 * VAR)


def test_density_3d_isotropic_integrates_to_variance():
    """D = 3 (the largest supported): 4π∫₀^∞ S(ρ) ρ² dρ = σ_f² for every kernel."""
    for name, cls in CLASSES.items():
        S = _density_on_axis(cls(lengthscale=ELL, variance=VAR), 3)
        val, _ = scipy.integrate.quad(lambda x, S=S: float(S(x)) * x * x, 0, np.inf, epsabs=1e-14,
                                      epsrel=1e-12, limit=500)
        assert_allclose(4 * np.pi * val, VAR, rtol=1e-8, err_msg=name)


# ---------------------------------------------------------------------------------------------
# T1, D = 2 ARD (Riemann sum), ℓ = (0.6, 1.4), h = 0.02 on [−25, 25]²
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ard_grid():
    h = 0.02
    grid = np.linspace(-25.0, 25.0, 2501)  # spacing exactly h, r = 0 on the grid
    rho = np.sqrt((grid[:, None] / ELL_ARD[0]) ** 2 + (grid[None, :] / ELL_ARD[1]) ** 2)
    return h, grid, rho


@pytest.mark.parametrize("name, rtol", [("se", 1e-8), ("matern12", 1e-4), ("matern32", 1e-8),
                                        ("matern52", 1e-8)])
def test_density_2d_ard_is_riemann_sum_of_kernel(name, rtol, ard_grid):
    """S(ξ) = Σ k(r) cos(2πξ·r) h²; Matérn-½'s kink at 0 limits the sum to rtol 1e-4."""
    h, grid, rho = ard_grid
    kgrid = VAR * kernels_np.profile(name, rho)
    kern = CLASSES[name](lengthscale=ELL_ARD, variance=VAR)
    xis = np.array([[0.0, 0.0], [0.25, -0.15], [0.1, 0.3], [-0.4, 0.05]])
    numeric = [transforms.riemann_2d_cos(kgrid, grid, h, xi) for xi in xis]
    assert_allclose(kern.spectral_density(xis), numeric, rtol=rtol)


# ---------------------------------------------------------------------------------------------
# Constants and log densities
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls, d, expected", [
    (gk.Matern12, 1, 2.0),
    (gk.Matern32, 1, 12 * math.sqrt(3)),
    (gk.Matern52, 1, 400 * math.sqrt(5) / 3),
    (gk.Matern12, 2, 2 * math.pi),
    (gk.Matern32, 2, 18 * math.sqrt(3) * math.pi),
    (gk.Matern52, 2, 250 * math.sqrt(5) * math.pi),
])
def test_matern_constant_table(cls, d, expected):
    """c_{ν,D} against the table of docs/model.md (kernels), and S(0) = σ_f² ∏ℓ_d c_{ν,D}
    (2ν)^{−(ν+D/2)}."""
    assert_allclose(math.exp(cls.log_constant(d)), expected, rtol=1e-14)
    ell = np.array([0.6, 1.4])[:d]
    s0 = cls(lengthscale=ell, variance=VAR).spectral_density(np.zeros(d))
    assert_allclose(s0, VAR * ell.prod() * expected * (2 * cls.nu) ** -(cls.nu + d / 2),
                    rtol=1e-13)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_log_spectral_density_is_log_of_density(name, d, rng):
    kern = CLASSES[name](lengthscale=rng.uniform(0.3, 2.0, d), variance=VAR)
    xi = rng.normal(scale=0.5, size=(20, d))
    assert_allclose(kern.log_spectral_density(xi), np.log(kern.spectral_density(xi)), rtol=1e-12)


def test_log_spectral_density_finite_where_density_underflows():
    kern = gk.SquaredExponential(lengthscale=1.0, variance=2.0)
    xi = np.array([[20.0]])  # S = 2√(2π) e^{−800}: underflows to 0
    assert float(kern.spectral_density(xi)[0]) == 0.0
    assert_allclose(kern.log_spectral_density(xi),
                    [math.log(2.0) + 0.5 * math.log(2 * math.pi) - 2 * math.pi**2 * 400.0],
                    rtol=1e-14)


# ---------------------------------------------------------------------------------------------
# Covariance values against independent implementations
# ---------------------------------------------------------------------------------------------

sk_kernels = pytest.importorskip("sklearn.gaussian_process.kernels")


def _sklearn_kernel(name, ell, var):
    base = (sk_kernels.RBF(length_scale=ell) if name == "se"
            else sk_kernels.Matern(length_scale=ell, nu={"matern12": 0.5, "matern32": 1.5,
                                                         "matern52": 2.5}[name]))
    return sk_kernels.ConstantKernel(var) * base


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_gram_matches_sklearn_and_numpy(name, d, rng):
    ell = rng.uniform(0.3, 2.0, d)
    X1, X2 = rng.normal(size=(7, d)), rng.normal(size=(5, d))
    K = CLASSES[name](lengthscale=ell, variance=VAR)(X1, X2)
    assert K.shape == (7, 5)
    assert_allclose(K, _sklearn_kernel(name, ell, VAR)(X1, X2), rtol=1e-12)
    assert_allclose(K, kernels_np.gram(name, X1, X2, ell, VAR), rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_evaluate_at_zero_and_symmetry(name, rng):
    kern = CLASSES[name](lengthscale=[0.5, 2.0], variance=VAR)
    X = rng.normal(size=(6, 2))
    K = np.asarray(kern(X, X))
    assert_allclose(np.diag(K), VAR, rtol=1e-15)
    np.testing.assert_array_equal(K, K.T)
    assert float(kern.evaluate(np.zeros(2))) == VAR
    assert_allclose(kern.variance_at_zero, VAR)
    assert np.linalg.eigvalsh(K).min() > 0


def test_gram_of_one_dimensional_vectors_treats_entries_as_points():
    """k(x, x') with x of shape (N,) means N points in 1-D (as in tinygp), not one N-D point."""
    x = np.linspace(0.0, 1.0, 5)
    kern = gk.Matern32(lengthscale=0.3, variance=VAR)
    K = kern(x, x)
    assert K.shape == (5, 5)
    assert_allclose(K, kern(x[:, None], x[:, None]), rtol=1e-15)


def test_scalar_lengthscale_is_shared_by_all_dimensions(rng):
    X = rng.normal(size=(5, 3))
    a = gk.Matern52(lengthscale=0.8, variance=1.3)(X, X)
    b = gk.Matern52(lengthscale=[0.8, 0.8, 0.8], variance=1.3)(X, X)
    assert_allclose(a, b, rtol=1e-15)


# ---------------------------------------------------------------------------------------------
# Sums and make_kernel
# ---------------------------------------------------------------------------------------------


def test_sum_kernel_is_sum_of_parts(rng):
    k1 = gk.Matern12(lengthscale=[0.3, 0.5], variance=0.4)
    k2 = gk.SquaredExponential(lengthscale=[1.5, 2.0], variance=1.1)
    k3 = gk.Matern52(lengthscale=0.9, variance=0.2)
    s = k1 + k2 + k3
    assert isinstance(s, gk.SumKernel) and len(s.parts) == 3  # flattened, not nested
    X = rng.normal(size=(6, 2))
    xi = rng.normal(scale=0.7, size=(9, 2))
    assert_allclose(s(X, X), k1(X, X) + k2(X, X) + k3(X, X), rtol=1e-14)
    dens = k1.spectral_density(xi) + k2.spectral_density(xi) + k3.spectral_density(xi)
    assert_allclose(s.spectral_density(xi), dens, rtol=1e-14)
    assert_allclose(s.log_spectral_density(xi), np.log(dens), rtol=1e-12)
    assert_allclose(s.variance_at_zero, 0.4 + 1.1 + 0.2, rtol=1e-15)


def test_sum_kernel_density_integrates_to_total_variance():
    s = gk.Matern12(lengthscale=0.3, variance=0.4) + gk.Matern32(lengthscale=1.2, variance=0.9)
    S = _density_on_axis(s, 2)
    assert_allclose(transforms.integral_2d_radial(S), 1.3, rtol=1e-8)


def test_make_kernel_parses_sums():
    k = gk.make_kernel("matern12+matern32", n_dims=2, lengthscale=0.2, variance=1.0)
    assert isinstance(k, gk.SumKernel)
    assert [type(p) for p in k.parts] == [gk.Matern12, gk.Matern32]
    assert_allclose(k.parts[0].lengthscale, [0.2, 0.2])
    assert_allclose(k.parts[1].lengthscale, [0.8, 0.8])  # i-th part starts at ℓ·4^i
    assert_allclose([p.variance for p in k.parts], [0.5, 0.5])  # variance split evenly
    k2 = gk.make_kernel(" Matern12 + MATERN32 ", n_dims=2)
    assert [type(p) for p in k2.parts] == [gk.Matern12, gk.Matern32]


@pytest.mark.parametrize("spec, cls", [("se", gk.SquaredExponential),
                                       ("rbf", gk.SquaredExponential),
                                       ("exponential", gk.Matern12),
                                       ("matern52", gk.Matern52)])
def test_make_kernel_single_names(spec, cls):
    k = gk.make_kernel(spec, n_dims=3, lengthscale=[0.1, 0.2, 0.3], variance=2.0)
    assert type(k) is cls
    assert_allclose(k.lengthscale, [0.1, 0.2, 0.3])
    assert_allclose(k.variance, 2.0)


def test_make_kernel_passes_kernels_through_and_rejects_unknown_names():
    k = gk.Matern32(lengthscale=1.0)
    assert gk.make_kernel(k, n_dims=2) is k
    with pytest.raises(InputError, match=r"unknown kernel name.*'matern72'"):
        gk.make_kernel("matern32+matern72", n_dims=2)
    with pytest.raises(InputError, match="kernel must be a name"):
        gk.make_kernel(3.0, n_dims=2)


# ---------------------------------------------------------------------------------------------
# Pytrees and JAX transformations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kern", [
    gk.SquaredExponential(lengthscale=[0.5, 1.5], variance=2.0),
    gk.Matern12(lengthscale=0.4, variance=0.3),
    gk.Matern32(lengthscale=[0.5, 1.5], variance=2.0),
    gk.Matern52(lengthscale=[0.5, 1.5], variance=2.0),
    gk.Matern12(lengthscale=[0.2, 0.3], variance=0.5) + gk.Matern32(lengthscale=1.0),
], ids=["se", "m12", "m32", "m52", "sum"])
def test_kernel_is_pytree_and_jits(kern, rng):
    leaves, treedef = jax.tree_util.tree_flatten(kern)
    n_parts = len(kern.parts) if isinstance(kern, gk.SumKernel) else 1
    assert len(leaves) == 2 * n_parts
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert type(back) is type(kern)
    X = rng.normal(size=(6, 2))
    xi = rng.normal(size=(4, 2))
    assert_allclose(back(X, X), kern(X, X), rtol=0)
    # same values under jit, with the kernel as a traced argument
    assert_allclose(jax.jit(lambda k, a: k(a, a))(kern, X), kern(X, X), rtol=1e-14)
    assert_allclose(jax.jit(lambda k, a: k.spectral_density(a))(kern, xi),
                    kern.spectral_density(xi), rtol=1e-14)
    # the leaves are the parameters: doubling every ℓ and σ_f² gives k'(X, X) = 2 k(X/2, X/2)
    doubled = jax.tree_util.tree_map(lambda v: 2 * v, kern)
    assert_allclose(doubled(X, X), 2 * kern(X / 2, X / 2), rtol=1e-14)


@pytest.mark.parametrize("name", NAMES)
def test_gradient_wrt_parameters_is_finite_with_coincident_points(name, rng):
    """Gram matrices contain ρ = 0; the Matérn gradients there must not be NaN."""
    X = rng.normal(size=(5, 2))
    X = np.vstack([X, X[:2]])  # duplicated points: off-diagonal zeros too

    def total(ell, var):
        return jnp.sum(CLASSES[name](lengthscale=ell, variance=var)(X, X))

    g_ell, g_var = jax.grad(total, argnums=(0, 1))(jnp.array([0.7, 1.3]), 1.5)
    assert np.all(np.isfinite(g_ell)) and np.isfinite(g_var)
    # d/dσ_f² of Σk = Σk/σ_f²
    assert_allclose(g_var, total(jnp.array([0.7, 1.3]), 1.5) / 1.5, rtol=1e-13)
    # d/dℓ against central differences
    h = 1e-6
    fd = [(total(jnp.array([0.7 + h * (i == 0), 1.3 + h * (i == 1)]), 1.5)
           - total(jnp.array([0.7 - h * (i == 0), 1.3 - h * (i == 1)]), 1.5)) / (2 * h)
          for i in range(2)]
    assert_allclose(g_ell, fd, rtol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"lengthscale": 0.0}, "lengthscale must be finite and > 0"),
    ({"lengthscale": [0.5, -1.0]}, "lengthscale must be finite and > 0"),
    ({"lengthscale": np.nan}, "lengthscale must be finite and > 0"),
    ({"variance": 0.0}, "variance must be finite and > 0"),
    ({"variance": -2.0}, "variance must be finite and > 0"),
    ({"variance": np.inf}, "variance must be finite and > 0"),
    ({"lengthscale": np.ones((2, 2))}, "lengthscale must be a scalar or a vector"),
    ({"variance": [1.0, 2.0]}, "variance must be a scalar"),
])
def test_kernel_rejects_bad_parameters(kwargs, match):
    for cls in CLASSES.values():
        with pytest.raises(ValueError, match=match):
            cls(**kwargs)


def test_kernel_doctests():
    result = doctest.testmod(gk, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_kernel_outputs_are_float64():
    assert jax.config.jax_enable_x64
    kern = geogp.Matern32(lengthscale=0.5)
    assert kern.lengthscale.dtype == jnp.float64
    assert kern(np.zeros((2, 1)), np.ones((3, 1))).dtype == jnp.float64
    assert kern.spectral_density(np.zeros((1, 2))).dtype == jnp.float64


def test_make_kernel_rejects_lengthscale_of_wrong_length():
    with pytest.raises(InputError, match=r"per input dimension \(D=2\); got shape \(3,\)"):
        gk.make_kernel("matern32", n_dims=2, lengthscale=[0.1, 0.2, 0.3])


def test_scaled_kernels_multiply_covariance_and_spectral_density():
    """k.scaled(c) is c·k for every kind (the robust fits' tempered predictive)."""
    from geogp.core.kernels import ProductKernel

    rng = np.random.default_rng(3)
    x, xi = rng.normal(size=(6, 2)), rng.normal(size=(5, 2))
    base = geogp.Matern32(lengthscale=[0.5, 2.0], variance=1.5)
    total = base + geogp.SquaredExponential(lengthscale=0.3, variance=0.2)
    for k in (base, total, ProductKernel((base, geogp.Matern12(lengthscale=0.7)))):
        s = k.scaled(2.5)
        assert type(s) is type(k)
        np.testing.assert_allclose(s(x, x), 2.5 * np.asarray(k(x, x)), rtol=1e-13)
        assert float(s.variance_at_zero) == pytest.approx(2.5 * float(k.variance_at_zero))
    for k in (base, total):
        np.testing.assert_allclose(k.scaled(2.5).spectral_density(xi),
                                   2.5 * np.asarray(k.spectral_density(xi)), rtol=1e-13)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(InputError, match="scale factor"):
            total.scaled(bad)
