"""Sparse symmetric positive definite test matrices and a dense symbolic factorisation.

Shared by the ``tests/linalg`` files. Everything here is plain numpy/scipy, independent of
geogp's sparse code.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def random_spd(n: int, density: float, rng: np.random.Generator) -> sp.csc_matrix:
    """Random sparse SPD matrix: random symmetric pattern, diagonally dominant values."""
    a = sp.random(n, n, density=density, random_state=rng, data_rvs=rng.standard_normal)
    a = sp.csc_matrix(a + a.T)
    row_sums = np.asarray(abs(a).sum(axis=1)).ravel()
    return sp.csc_matrix(a + sp.diags(row_sums + 0.5 + rng.random(n)))


def grid_laplacian(nx: int, ny: int, shift: float = 0.1) -> sp.csc_matrix:
    """Five-point-stencil 2-D Laplacian plus ``shift · I`` (SPD), size ``nx·ny``."""

    def path(m: int) -> sp.csc_matrix:
        off = -np.ones(m - 1)
        return sp.csc_matrix(sp.diags([off, 2 * np.ones(m), off], [-1, 0, 1]))

    lap = sp.kron(path(nx), sp.identity(ny)) + sp.kron(sp.identity(nx), path(ny))
    return sp.csc_matrix(lap + shift * sp.identity(nx * ny))


def grid_laplacian_eigenvalues(nx: int, ny: int, shift: float = 0.1) -> np.ndarray:
    """Closed-form eigenvalues of :func:`grid_laplacian` (all ``nx·ny`` of them)."""
    ex = 2.0 - 2.0 * np.cos(np.pi * np.arange(1, nx + 1) / (nx + 1))
    ey = 2.0 - 2.0 * np.cos(np.pi * np.arange(1, ny + 1) / (ny + 1))
    return (ex[:, None] + ey[None, :]).ravel() + shift


def randomised_values(a: sp.csc_matrix, rng: np.random.Generator) -> sp.csc_matrix:
    """Same pattern as ``a`` with random symmetric off-diagonal values, still SPD."""
    low = sp.tril(a, k=-1).tocoo()
    vals = rng.uniform(-1.0, 1.0, low.nnz)
    off = sp.coo_matrix((vals, (low.row, low.col)), shape=a.shape)
    off = sp.csc_matrix(off + off.T)
    row_sums = np.asarray(abs(off).sum(axis=1)).ravel()
    return sp.csc_matrix(off + sp.diags(row_sums + 0.2 + rng.random(a.shape[0])))


def banded_spd(n: int, bandwidth: int, rng: np.random.Generator) -> sp.csc_matrix:
    """Random SPD band matrix with ``bandwidth`` sub-diagonals."""
    offsets = list(range(-bandwidth, 0))
    diags = [rng.uniform(-1.0, 1.0, n + k) for k in offsets]
    low = sp.diags(diags, offsets, shape=(n, n))
    off = sp.csc_matrix(low + low.T)
    row_sums = np.asarray(abs(off).sum(axis=1)).ravel()
    return sp.csc_matrix(off + sp.diags(row_sums + 0.3))


def symbolic_cholesky_pattern(a: np.ndarray) -> np.ndarray:
    """Boolean lower-triangular pattern of the Cholesky factor of ``a`` (dense elimination).

    Structural fill only (no cancellation): eliminating column k connects every pair of its
    remaining neighbours. ``O(n³)``: small matrices only.
    """
    n = a.shape[0]
    filled = np.tril(a != 0) | np.eye(n, dtype=bool)
    filled = filled | filled.T
    for k in range(n):
        nbrs = np.flatnonzero(filled[k + 1 :, k]) + k + 1
        filled[np.ix_(nbrs, nbrs)] = True
    return np.tril(filled)


def factor_on_pattern(a: np.ndarray, pattern: np.ndarray) -> tuple[np.ndarray, ...]:
    """Dense Cholesky of ``a`` stored on a lower pattern, as CSC ``(indptr, indices, data)``."""
    chol = np.linalg.cholesky(a)
    rows, cols = np.nonzero(pattern)
    order = np.lexsort((rows, cols))
    rows, cols = rows[order], cols[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=a.shape[0]))])
    return indptr, rows, chol[rows, cols]


def logdet_solve_objective(backend, pattern, weights):
    """Scalar f(values, rhs) using both outputs of ``backend.logdet_and_solve``, so that both
    cotangents (δ̄ and γ̄) are nonzero in a gradient test."""
    import jax.numpy as jnp

    def f(values, rhs):
        logdet, x = backend.logdet_and_solve(pattern, values, rhs)
        return 0.7 * logdet + jnp.sum(weights * x) + 0.1 * jnp.sum(x**2)

    return f


def matrix_case(name: str, rng: np.random.Generator) -> sp.csc_matrix:
    """The named SPD test matrices of the sparse-backend tests."""
    if name == "random10":
        return random_spd(10, 0.3, rng)
    if name == "random200":
        return random_spd(200, 0.02, rng)
    if name == "grid":
        return randomised_values(grid_laplacian(12, 11), rng)
    if name == "full60":  # a full pattern (the dense LAPACK backend's use)
        g = rng.standard_normal((60, 80))
        return sp.csc_matrix(g @ g.T / 80 + np.eye(60))
    return banded_spd(150, 4, rng)


def problem_case(name: str, rng: np.random.Generator, k=None):
    """(pattern, values, rhs) of :func:`matrix_case`; rhs (n,) or (n, k) standard normal."""
    import jax.numpy as jnp

    from geogp.linalg import SparsePattern

    a = matrix_case(name, rng)
    pattern = SparsePattern.from_scipy(a)
    values = jnp.asarray(pattern.values_from_scipy(a))
    shape = (a.shape[0],) if k is None else (a.shape[0], k)
    return pattern, values, jnp.asarray(rng.standard_normal(shape))
