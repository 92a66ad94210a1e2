"""Matrix-free G = ΦΦᵀ (FFT correlation over the bin lattice) against the dense assembly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geogp.features import trig
from geogp.features.fourier import FourierFeatures
from geogp.features.fourier_statistics import (
    SufficientStats,
    grid_noise_projection,
    grid_stats,
    points_noise_projection,
)
from geogp.features.gram_operator import GramOperator, lowest_frequencies, subset

CASES = [("odd", 1, 7), ("odd", 2, (5, 4)), ("odd", 3, 3), ("full", 1, 6), ("full", 2, (4, 5)),
         ("full", 3, 3)]


def _points_case(rng, lattice, D, K, N=300):
    ff = FourierFeatures.build(np.zeros(D), np.full(D, 2.3), K, lattice)
    X = rng.uniform(-1, 1, (N, D))
    w = rng.uniform(0, 1, N)  # non-uniform weights: any data set, not only masks
    return ff, X, w, trig.points_bins(ff, X, w, "quadratic", "direct")


@pytest.mark.parametrize("lattice,D,K", CASES)
def test_matvec_equals_dense_gram(rng, lattice, D, K):
    """G v by two FFTs equals the dense ΦᵀWΦ for every lattice and dimension (1e-12 relative)."""
    ff, X, w, C = _points_case(rng, lattice, D, K)
    Phi = ff(X)
    G = Phi.T @ (w[:, None] * Phi)
    op = GramOperator.from_bins(ff, C)
    V = rng.normal(size=(ff.n_features, 3))
    scale = np.abs(G).max() * np.abs(V).max() * ff.n_features
    np.testing.assert_allclose(np.asarray(op.matvec(jnp.asarray(V))), G @ V, atol=1e-12 * scale)
    np.testing.assert_allclose(np.asarray(op @ jnp.asarray(V[:, 0])), G @ V[:, 0],
                               atol=1e-12 * scale)
    np.testing.assert_allclose(np.asarray(op.diag), np.diag(G), rtol=1e-10)
    np.testing.assert_allclose(trig.assemble_gram_diagonal(ff, C), np.diag(G), rtol=1e-10)


def test_dense_block_is_the_low_frequency_submatrix(rng):
    ff, X, _w, C = _points_case(rng, "odd", 2, (6, 6))
    op = GramOperator.from_bins(ff, C, n_dense=20)
    low = lowest_frequencies(ff, 20)
    freq = np.linalg.norm(ff.frequencies, axis=1)
    assert freq[low].max() <= np.sort(freq)[19] + 1e-12  # the 20 smallest |z|
    G = trig.assemble_gram(ff, C)
    np.testing.assert_allclose(np.asarray(op.G_low), G[np.ix_(low, low)], rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(op.low), low)
    sub = subset(ff, low)
    np.testing.assert_allclose(sub(X), ff(X)[:, low], rtol=0, atol=0)


def test_operator_passes_through_jit_and_grad(rng):
    """The operator is a pytree; d/dv (uᵀG v) = G u (G symmetric) through the FFTs."""
    ff, _X, _w, C = _points_case(rng, "odd", 2, (4, 4))
    op = GramOperator.from_bins(ff, C)
    u = jnp.asarray(rng.normal(size=ff.n_features))
    g = jax.jit(jax.grad(lambda v, o: u @ o.matvec(v)))(jnp.zeros(ff.n_features), op)
    np.testing.assert_allclose(np.asarray(g), trig.assemble_gram(ff, C) @ np.asarray(u),
                               rtol=1e-10, atol=1e-10)


def test_grid_stats_operator_matches_dense_route(rng):
    ff = FourierFeatures.build([0.5, 0.6], [1.2, 1.4], (5, 6))
    axes = [np.linspace(0, 1, 23), np.linspace(0, 1.2, 31)]
    v = rng.normal(size=(23, 31))
    v[rng.uniform(size=v.shape) < 0.3] = np.nan
    dense = grid_stats(ff, axes, v)
    op = grid_stats(ff, axes, v, gram="operator", dense_block=10)
    assert op.matrix_free and not dense.matrix_free
    np.testing.assert_allclose(op.G.dense(), np.asarray(dense.G), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(np.asarray(op.r), np.asarray(dense.r), rtol=1e-12)
    with pytest.raises(ValueError):
        op + op  # statistics add before the operator is built
    with pytest.raises(ValueError):
        SufficientStats(op.G, jnp.zeros(3), op.yy, op.n)


def test_diag_quad_coefficients_equal_dense_quad_coefficients(rng):
    for lattice in ("odd", "full"):
        ff = FourierFeatures.build(np.zeros(2), np.full(2, 2.0), (4, 5), lattice)
        q = rng.normal(size=ff.n_features)
        np.testing.assert_allclose(trig.diagonal_quadratic_form_coefficients(ff, q),
                                   trig.quadratic_form_coefficients(ff, np.diag(q)), atol=1e-12)


def test_noise_projections_are_phi_eta(rng):
    """Φη for posterior samples: the grid route (any chunking) and the points route."""
    ff = FourierFeatures.build([0.5, 0.6], [1.2, 1.4], (4, 5))
    axes = [np.linspace(0, 1, 12), np.linspace(0, 1.2, 17)]
    v = rng.normal(size=(12, 17))
    v[rng.uniform(size=v.shape) < 0.3] = np.nan
    obs = np.isfinite(v)
    Y, X = np.meshgrid(*axes, indexing="ij")
    Phi = ff(np.stack([Y[obs], X[obs]], axis=1))
    R = grid_noise_projection(ff, axes, v, 3, np.random.default_rng(7))  # one chunk
    eta = np.random.default_rng(7).standard_normal((*v.shape, 3))[obs]
    np.testing.assert_allclose(R, Phi.T @ eta, atol=1e-11)
    Rc = grid_noise_projection(ff, axes, v, 400, np.random.default_rng(8), chunk_bytes=20000)
    # chunks draw η in another order: check the covariance instead, E[R Rᵀ] = G (400 draws)
    G = Phi.T @ Phi
    rel = np.abs(Rc @ Rc.T / 400 - G).max() / np.abs(G).max()
    assert rel < 0.25, rel
    Xp = np.stack([Y[obs], X[obs]], axis=1)
    Rp = points_noise_projection(ff, Xp, 2, np.random.default_rng(9))
    eta = np.random.default_rng(9).standard_normal((2, Xp.shape[0]))
    np.testing.assert_allclose(Rp, Phi.T @ eta.T, atol=1e-10)


@pytest.mark.parametrize("lattice,D,K", [("odd", 1, 6), ("odd", 2, (5, 4)), ("full", 2, (4, 5))])
def test_product_coefficients_give_pointwise_products(rng, lattice, D, K):
    """Σ_s (φᵀw1_s)(φᵀw2_s) from one set of quadratic-form bins (FFT convolutions), against Φ
    directly."""
    ff = FourierFeatures.build(np.zeros(D), np.full(D, 2.3), K, lattice)
    W1, W2 = rng.normal(size=(2, ff.n_features, 3))
    B1, B2 = (np.stack([trig.linear_coefficients(ff, W[:, s]) for s in range(3)])
              for W in (W1, W2))
    A = trig.product_coefficients(ff, B1, B2)
    X = rng.uniform(-1, 1, (60, D))
    Phi = ff(X)
    direct = np.sum((Phi @ W1) * (Phi @ W2), axis=1)
    np.testing.assert_allclose(trig.evaluate_points(ff, X, A, "quadratic"), direct,
                               atol=1e-11 * np.abs(direct).max())
