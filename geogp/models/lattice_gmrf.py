"""Operators, data and exact likelihood of the lattice SPDE/GMRF model (:mod:`geogp.models.lattice`).

The precision Q(θ) = c (κ²I + L)^α on a fixed pattern, log|Q| in closed form from the Neumann
Laplacian's eigenvalues, and the REML log marginal likelihood by one sparse Cholesky of
B = Q + PᵀP/σ² (formulas in :mod:`geogp.models.lattice`'s docstring).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError

__all__ = ["ALPHAS", "BACKENDS", "PARAMS", "LatticeProblem", "laplacian", "make_problem",
           "precision", "log_marginal_likelihood"]

ALPHAS = (1, 2)
BACKENDS = ("auto", "cholmod", "dense")
PARAMS = ("log_range", "log_sd", "log_noise")


# --------------------------------------------------------------------------- operators
def _second_difference(n: int) -> sp.csr_matrix:
    """Neumann 1-D −d²: tridiag(−1, 2, −1) with 1 in the corners (zero matrix if n = 1)."""
    if n == 1:
        return sp.csr_matrix((1, 1))
    main = np.full(n, 2.0)
    main[[0, -1]] = 1.0
    off = -np.ones(n - 1)
    return sp.diags([off, main, off], [-1, 0, 1], format="csr")


def _neumann_eigenvalues(n: int) -> np.ndarray:
    """Eigenvalues 4 sin²(πk/2n), k = 0..n−1, of :func:`_second_difference`."""
    return 4.0 * np.sin(np.pi * np.arange(n) / (2.0 * n)) ** 2


def laplacian(shape: tuple[int, int], h: tuple[float, float]) -> sp.csc_matrix:
    """L = −Δ (5-point, Neumann) on a row-major ``shape`` lattice with cell sizes ``h``."""
    ny, nx = shape
    return sp.csc_matrix(sp.kron(_second_difference(ny) / h[0] ** 2, sp.eye(nx))
                         + sp.kron(sp.eye(ny), _second_difference(nx) / h[1] ** 2))


def _structure(shape: tuple[int, int], alpha: int) -> sp.csc_matrix:
    """Sparsity of Q: the 13-point stencil (α = 2) or the 9-point one (α = 1; the diagonal
    neighbours are explicit zeros, kept for the covariances of bilinear prediction)."""
    ny, nx = shape
    ty = abs(_second_difference(ny)) + sp.eye(ny) if ny > 1 else sp.eye(1)
    tx = abs(_second_difference(nx)) + sp.eye(nx) if nx > 1 else sp.eye(1)
    nine = sp.csc_matrix(sp.kron(ty, tx))
    if alpha == 1:
        return nine
    five = abs(laplacian(shape, (1.0, 1.0))) + sp.eye(ny * nx)
    return sp.csc_matrix(five @ five + nine)


def _coefficients(params, alpha: int, area: float):
    """(κ², c, σ²) from the log parameters (ρ and s in the lattice's length unit)."""
    rho = jnp.exp(params["log_range"])
    var = jnp.exp(2.0 * params["log_sd"])
    noise = jnp.exp(2.0 * params["log_noise"])
    if alpha == 2:
        kappa2 = 8.0 / rho**2
        c = area / (4.0 * math.pi * kappa2 * var)
    else:
        kappa2 = 4.0 / rho**2
        c = area * jnp.log1p(32.0 / (area * kappa2)) / (4.0 * math.pi * var)
    return kappa2, c, noise


# --------------------------------------------------------------------------- the problem
@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class LatticeProblem:
    """Everything the likelihood needs besides θ, for one lattice (a JAX pytree).

    Attributes:
        pattern: ``SparsePattern`` of B (lower triangle, CSC order). solve: its
            ``logdet_and_solve``. alpha: 1 or 2. area: h_y h_x. n_obs: N. n_trend: p.
        e_i, e_l, e_l2: (nnz,) I, L and L² on the pattern. e_obs: (nnz,) PᵀP on the pattern.
        eig: (n,) Laplacian eigenvalues λ_kl (for log|Q|). ptw: (n, 1 + p) Pᵀ[y, X].
        wtw: (1 + p, 1 + p) [y, X]ᵀ[y, X].
    """

    pattern: object = field(repr=False)
    solve: object = field(repr=False)
    alpha: int
    area: float
    n_obs: int
    n_trend: int
    e_i: np.ndarray = field(repr=False)
    e_l: np.ndarray = field(repr=False)
    e_l2: np.ndarray = field(repr=False)
    e_obs: np.ndarray = field(repr=False)
    eig: np.ndarray = field(repr=False)
    ptw: np.ndarray = field(repr=False)
    wtw: np.ndarray = field(repr=False)

    def tree_flatten(self):
        leaves = (self.e_i, self.e_l, self.e_l2, self.e_obs, self.eig, self.ptw, self.wtw)
        return leaves, (self.pattern, self.solve, self.alpha, self.area, self.n_obs,
                        self.n_trend)

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(*aux, *leaves)


def _load_solver(backend: str, ordering: str):
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS}; got {backend!r}.")
    from geogp import linalg

    if backend == "dense" or (backend == "auto" and not linalg.HAVE_CHOLMOD):
        return linalg.dense.logdet_and_solve
    if not linalg.HAVE_CHOLMOD:
        raise InputError("backend='cholmod' needs scikit-sparse (CHOLMOD), which is not "
                         "installed; install it or use backend='dense' (small lattices only).")
    return functools.partial(linalg.cholmod.logdet_and_solve, ordering=ordering)


def make_problem(shape, h, alpha: int, cells: np.ndarray, y: np.ndarray, X: np.ndarray,
                 backend: str = "auto", ordering: str = "nesdis") -> LatticeProblem:
    """Fix the lattice, its pattern and the data for :func:`log_marginal_likelihood`.

    Args:
        shape: (n_y, n_x) lattice (margin included). h: (h_y, h_x) cell sizes.
        alpha: 1 or 2. cells: (N,) distinct flat (row-major) indices of the observed cells.
        y: (N,) observations. X: (N, p) trend features (p may be 0).
        backend: ``"cholmod"``, ``"dense"`` (reference, small lattices) or ``"auto"``.
        ordering: CHOLMOD fill-reducing ordering (nested dissection suits lattices).

    Cost: O(nnz(Q)) here; the CHOLMOD analysis happens on the first evaluation.
    """
    from geogp.linalg import SparsePattern

    if alpha not in ALPHAS:
        raise InputError(f"alpha must be one of {ALPHAS}; got {alpha!r}.")
    shape = (int(shape[0]), int(shape[1]))
    n = shape[0] * shape[1]
    lap = laplacian(shape, h)
    pattern = SparsePattern.from_scipy(_structure(shape, alpha))
    e_l2 = (pattern.values_from_scipy(sp.csc_matrix(lap @ lap)) if alpha == 2
            else np.zeros(pattern.nnz))
    obs = np.zeros(n)
    obs[cells] = 1.0
    W = np.column_stack([y, X])
    ptw = np.zeros((n, W.shape[1]))
    ptw[cells] = W
    eig = np.add.outer(_neumann_eigenvalues(shape[0]) / h[0] ** 2,
                       _neumann_eigenvalues(shape[1]) / h[1] ** 2).ravel()
    return LatticeProblem(
        pattern, _load_solver(backend, ordering), int(alpha), float(h[0] * h[1]),
        int(len(cells)), int(X.shape[1]),
        pattern.values_from_scipy(sp.eye(n, format="csc")), pattern.values_from_scipy(lap),
        e_l2, pattern.values_from_scipy(sp.diags(obs, format="csc")), eig, ptw, W.T @ W)


def precision(params, problem: LatticeProblem):
    """(Q on the pattern, log|Q|, κ², σ²) at θ (standardised units)."""
    kappa2, c, noise = _coefficients(params, problem.alpha, problem.area)
    if problem.alpha == 2:
        q = c * (kappa2**2 * problem.e_i + 2.0 * kappa2 * problem.e_l + problem.e_l2)
    else:
        q = c * (kappa2 * problem.e_i + problem.e_l)
    logdet_q = problem.eig.shape[0] * jnp.log(c) + problem.alpha * jnp.sum(
        jnp.log(kappa2 + problem.eig))
    return q, logdet_q, kappa2, noise


@jax.jit
def _evaluate(params, problem: LatticeProblem):
    q, logdet_q, _, noise = precision(params, problem)
    b_vals = q + problem.e_obs / noise
    rhs = problem.ptw / noise
    logdet_b, s = problem.solve(problem.pattern, b_vals, rhs)
    m = problem.wtw / noise - rhs.T @ s  # [y, X]ᵀ Σ⁻¹ [y, X]
    p = problem.n_trend
    quad = m[0, 0]
    logdet_xx = 0.0
    beta = jnp.zeros(p)
    if p:
        chol = jnp.linalg.cholesky(m[1:, 1:])
        beta = jax.scipy.linalg.cho_solve((chol, True), m[1:, 0])
        quad = quad - m[1:, 0] @ beta
        logdet_xx = 2.0 * jnp.sum(jnp.log(jnp.diag(chol)))
    n = problem.n_obs
    ll = -0.5 * (logdet_b - logdet_q + n * jnp.log(noise) + quad + logdet_xx
                 + (n - p) * math.log(2.0 * math.pi))
    return ll, s, beta, m, b_vals


def log_marginal_likelihood(params, problem: LatticeProblem):
    """Exact REML log marginal likelihood log p(y | θ) with β integrated (flat prior).

    Differentiable in ``params`` (dict of ``log_range``, ``log_sd``, ``log_noise``, in the
    lattice's units and standardised y). Cost: one sparse Cholesky of B; the gradient adds a
    solve and a selected inversion.
    """
    return _evaluate(params, problem)[0]


def _loss(params, problems):
    """−Σ_t log p_t / Σ_t N_t over the tiles (module level: the optimiser caches it)."""
    total = sum(p.n_obs for p in problems)
    return -sum(log_marginal_likelihood(params, p) for p in problems) / total
