"""Batched CG and Lanczos quadrature against dense linear algebra."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sla

from geogp.linalg.krylov import cg, lanczos_quadrature, lanczos_tridiagonal


def _spd(rng, M, cond):
    Q, _ = np.linalg.qr(rng.normal(size=(M, M)))
    ev = np.geomspace(1.0, cond, M)
    return (Q * ev) @ Q.T


def test_cg_solves_every_column(rng):
    M = 40
    A = _spd(rng, M, 1e3)
    B = rng.normal(size=(M, 4))
    B[:, 2] = np.linalg.eigh(A)[1][:, 0]  # an eigenvector: converges in one step
    res = jax.jit(lambda b: cg(lambda X: jnp.asarray(A) @ X, b, tol=1e-12, maxiter=500))(B)
    np.testing.assert_allclose(np.asarray(res.x), np.linalg.solve(A, B), rtol=1e-8, atol=1e-10)
    n_iter = np.asarray(res.n_iter)
    assert n_iter[2] <= 2 and n_iter.max() <= 500
    assert np.all(np.asarray(res.residual) <= 1e-12)


def test_cg_zero_column_and_cap(rng):
    A = _spd(rng, 30, 1e6)
    B = np.zeros((30, 2))
    B[:, 1] = rng.normal(size=30)
    res = cg(lambda X: jnp.asarray(A) @ X, B, tol=1e-14, maxiter=3)
    assert np.all(np.asarray(res.x[:, 0]) == 0) and int(res.n_iter[0]) == 0
    assert int(res.n_iter[1]) == 3 and float(res.residual[1]) > 1e-14  # capped, and says so


def test_lanczos_quadrature_is_exact_with_full_krylov_space(rng):
    """‖z‖² e₁ᵀ log(T) e₁ = zᵀ log(A) z when Lanczos runs to the end (Gauss quadrature)."""
    M = 25
    A = _spd(rng, M, 50.0)
    Z = rng.normal(size=(M, 3))
    res = cg(lambda X: jnp.asarray(A) @ X, Z, tol=1e-13, maxiter=200, n_lanczos=M + 5)
    T = lanczos_tridiagonal(res.alpha, res.beta, res.n_iter)
    est = np.sum(Z * Z, axis=0) * np.asarray(lanczos_quadrature(T, jnp.log))
    logA = sla.logm(A).real
    np.testing.assert_allclose(est, np.einsum("mi,mk,ki->i", Z, logA, Z), rtol=1e-8)
    # T's first entry is the Rayleigh quotient of z (used as a control variate)
    np.testing.assert_allclose(np.asarray(T[:, 0, 0]),
                               np.einsum("mi,mk,ki->i", Z, A, Z) / np.sum(Z * Z, axis=0),
                               rtol=1e-10)


def test_truncated_lanczos_quadrature_converges(rng):
    """With fewer Lanczos steps than M the quadrature is approximate, and improves with steps."""
    M = 200
    A = _spd(rng, M, 1e2)
    z = rng.choice([-1.0, 1.0], size=(M, 1))
    exact = float(z[:, 0] @ sla.logm(A).real @ z[:, 0])
    errs = []
    for L in (2, 5, 20, 60):
        res = cg(lambda X: jnp.asarray(A) @ X, z, tol=1e-12, maxiter=400, n_lanczos=L)
        T = lanczos_tridiagonal(res.alpha, res.beta, res.n_iter)
        errs.append(abs(M * float(lanczos_quadrature(T, jnp.log)[0]) - exact))
    assert errs[3] < errs[2] < errs[1] < errs[0]
    assert errs[2] < 1e-4 * abs(exact) and errs[3] < 1e-8 * abs(exact)
