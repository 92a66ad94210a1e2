"""The space-time lattice model's sparse algebra (docs/spacetime.md).

A stack y(s, t) on a lattice's cells s and the stack's dates t_0 < … < t_{T−1} is

    y(s, t) = x(s)ᵀβ + m(s) + a(s, t) + ε,   ε ~ N(0, σ²),

* m: a persistent field (each cell's own level over the whole series), Matérn ν = 1 in
  space (the lattice model's α = 2 operator, its own range ρ_m and sd s_m);
* a: anomalies, the same spatial operator (range ρ, sd s) in space and AR(1) between dates,
  a(·, t_k) = φ_k a(·, t_{k−1}) + √(1 − φ_k²) w_k, with φ_k = exp(−(t_k − t_{k−1})/τ): the
  time differences, not the index, set the correlation, so missing dates and irregular steps
  enter as they are. Separable: Cov a = R_T(τ) ⊗ Q_a⁻¹, precision Q_T ⊗ Q_a with Q_T the
  tridiagonal AR(1) precision;
* β: the trend, with a flat prior (REML).

The unknowns x = (m, a_0, …, a_{T−1}) have the sparse precision Q = diag(Q_m, Q_T ⊗ Q_a),
and log|Q| = log|Q_m| + n log|Q_T| + T log|Q_a| in closed form (Neumann eigenvalues in space,
log|Q_T| = −Σ log(1 − φ_k²)). The likelihood goes through B = Q + AᵀA/σ² (A: each observation
sees m(s) + a(s, t)), one CHOLMOD factorisation with the custom VJP of :mod:`geogp.linalg`,
as the 2-D lattice model's (:mod:`geogp.models.lattice.gmrf`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError
from geogp.linalg import SparsePattern
from geogp.models.lattice.gmrf import dense_likelihood, laplacian, laplacian_eigenvalues

__all__ = ["PARAMS", "SpaceTimeProblem", "make_problem", "ar1_precision", "precision",
           "log_marginal_likelihood", "posterior_mean"]

# θ: the anomalies' range, sd and time scale τ; the persistent field's range and sd; noise
PARAMS = ("log_range", "log_sd", "log_tau", "log_range_mean", "log_sd_mean", "log_noise")


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class SpaceTimeProblem:
    """Everything the likelihood needs besides θ, for one stack on one lattice (a JAX pytree).

    Attributes:
        pattern: ``SparsePattern`` of B over (m, a_0, …, a_{T−1}). solve: its
            :class:`~geogp.linalg.solvers.Solver`. shape: (n_y, n_x) lattice. area: h_y h_x.
        n_obs: N. n_trend: p. dt: (T − 1,) time steps (positive).
        m_i, m_l, m_l2: (nnz,) I, L, L² of the persistent field's block on the pattern.
        a_i, a_l, a_l2: (nnz,) I, L, L² of the spatial entry of each anomaly entry (0
            elsewhere); a_time: (nnz,) int, which entry of Q_T's (diag, off-diagonal) values
            each anomaly entry carries (−1 elsewhere).
        e_obs: (nnz,) AᵀA. eig: (n,) the Laplacian's eigenvalues. aty: (n (T + 1), 1 + p)
        Aᵀ[y, X]. wtw: [y, X]ᵀ[y, X].
    """

    pattern: object = field(repr=False)
    solve: object = field(repr=False)
    shape: tuple
    area: float
    n_obs: int
    n_trend: int
    dt: np.ndarray = field(repr=False)
    m_i: np.ndarray = field(repr=False)
    m_l: np.ndarray = field(repr=False)
    m_l2: np.ndarray = field(repr=False)
    a_i: np.ndarray = field(repr=False)
    a_l: np.ndarray = field(repr=False)
    a_l2: np.ndarray = field(repr=False)
    a_time: np.ndarray = field(repr=False)
    e_obs: np.ndarray = field(repr=False)
    eig: np.ndarray = field(repr=False)
    aty: np.ndarray = field(repr=False)
    wtw: np.ndarray = field(repr=False)

    def tree_flatten(self) -> tuple[tuple, tuple]:
        leaves = (self.dt, self.m_i, self.m_l, self.m_l2, self.a_i, self.a_l, self.a_l2,
                  self.a_time, self.e_obs, self.eig, self.aty, self.wtw)
        return leaves, (self.pattern, self.solve, self.shape, self.area, self.n_obs,
                        self.n_trend)

    @classmethod
    def tree_unflatten(cls, aux: tuple, leaves: tuple) -> SpaceTimeProblem:
        return cls(*aux, *leaves)

    @property
    def n_cells(self) -> int:
        return int(self.shape[0] * self.shape[1])

    @property
    def n_times(self) -> int:
        return int(self.dt.shape[0] + 1)


def make_problem(shape: tuple[int, int], h: tuple[float, float], times: np.ndarray,
                 cells: np.ndarray, steps: np.ndarray, y: np.ndarray, X: np.ndarray,
                 solve: object) -> SpaceTimeProblem:
    """The problem of observations ``y`` (N,) at lattice ``cells`` (N,) (row-major flat) and
    date indices ``steps`` (N,) of a stack with increasing ``times`` (T,) on a ``shape``
    lattice of cells sized ``h``, with trend columns ``X`` (N, p) and the ``solve``r of B."""
    times = np.asarray(times, dtype=np.float64)
    dt = np.diff(times)
    if times.ndim != 1 or times.size < 2 or not np.all(dt > 0):
        raise InputError("a space-time stack needs at least two dates, strictly increasing.")
    n, t_count = int(shape[0] * shape[1]), int(times.size)
    lap = laplacian(shape, h)
    ops = {"i": sp.eye(n, format="csc"), "l": lap, "l2": sp.csc_matrix(lap @ lap)}
    spatial = (abs(ops["l2"]) + abs(lap) + ops["i"]).tocsc()
    spatial.data[:] = 1.0
    time_band = sp.diags([np.ones(t_count - 1), np.ones(t_count), np.ones(t_count - 1)],
                         [-1, 0, 1], format="csc")
    # which Q_T value an anomaly entry carries: diag k → k, off-diagonal (k, k + 1) → T + k
    index = sp.diags([np.arange(t_count - 1) + t_count + 1.0, np.arange(t_count) + 1.0,
                      np.arange(t_count - 1) + t_count + 1.0], [-1, 0, 1], format="csc")
    coupling = sp.hstack([sp.eye(n)] * t_count, format="csc")  # m(s) with every a(s, t)
    structure = sp.bmat([[spatial, coupling], [coupling.T, sp.kron(time_band, spatial)]],
                        format="csc")
    pattern = SparsePattern.from_scipy(structure)
    zero_t = sp.csc_matrix((n * t_count, n * t_count))
    zero_m = sp.csc_matrix((n, n))

    def persistent(op):
        return pattern.values_from_scipy(sp.block_diag((op, zero_t), format="csc"))

    def anomalies(op):
        return pattern.values_from_scipy(sp.block_diag((zero_m, sp.kron(time_band, op)),
                                                       format="csc"))

    a_time = np.rint(pattern.values_from_scipy(
        sp.block_diag((zero_m, sp.kron(index, spatial)), format="csc"))).astype(np.int64) - 1
    cells, steps = np.asarray(cells, dtype=np.int64), np.asarray(steps, dtype=np.int64)
    y, X = np.asarray(y, dtype=np.float64), np.asarray(X, dtype=np.float64).reshape(len(y), -1)
    unknowns = n * (t_count + 1)
    rows = np.arange(len(y))
    a = sp.csr_matrix((np.ones(2 * len(y)), (np.concatenate([rows, rows]), np.concatenate(
        [cells, n * (1 + steps) + cells]))), shape=(len(y), unknowns))
    w = np.column_stack([y, X])
    return SpaceTimeProblem(
        pattern, solve, (int(shape[0]), int(shape[1])), float(h[0] * h[1]), len(y),
        int(X.shape[1]), dt, persistent(ops["i"]), persistent(ops["l"]), persistent(ops["l2"]),
        anomalies(ops["i"]), anomalies(ops["l"]), anomalies(ops["l2"]), a_time,
        pattern.values_from_scipy(sp.csc_matrix(a.T @ a)), laplacian_eigenvalues(shape, h),
        np.asarray(a.T @ w), w.T @ w)


def ar1_precision(dt: jax.Array, tau: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(diagonal (T,), off-diagonal (T − 1,), log|Q_T|) of the precision of a unit-variance
    AR(1) at dates with steps ``dt``: φ_k = exp(−dt_k/τ)."""
    phi = jnp.exp(-dt / tau)
    r = 1.0 / (-jnp.expm1(-2.0 * dt / tau))  # 1 / (1 − φ²), accurate for small steps
    diag = jnp.concatenate([jnp.zeros(1), r]) + jnp.concatenate([phi**2 * r, jnp.zeros(1)])
    diag = diag.at[0].add(1.0)
    return diag, -phi * r, jnp.sum(jnp.log(r))


def _matern(log_range, log_sd, area: float):
    """(κ², c) of the α = 2 operator c (κ² + L)², s² its marginal variance (as the lattice's)."""
    kappa2 = 8.0 / jnp.exp(2.0 * log_range)
    c = area / (4.0 * math.pi * kappa2 * jnp.exp(2.0 * log_sd))
    return kappa2, c


def precision(params: dict, problem: SpaceTimeProblem) -> tuple[jax.Array, jax.Array]:
    """(Q on the pattern, log|Q|) at θ (standardised units, lattice length unit, time in the
    stack's unit)."""
    k_m, c_m = _matern(params["log_range_mean"], params["log_sd_mean"], problem.area)
    k_a, c_a = _matern(params["log_range"], params["log_sd"], problem.area)
    diag, off, logdet_t = ar1_precision(jnp.asarray(problem.dt), jnp.exp(params["log_tau"]))
    time_values = jnp.concatenate([diag, off])
    carried = jnp.where(problem.a_time >= 0, time_values[jnp.maximum(problem.a_time, 0)], 0.0)
    q = c_m * (k_m**2 * problem.m_i + 2.0 * k_m * problem.m_l + problem.m_l2)
    q = q + carried * c_a * (k_a**2 * problem.a_i + 2.0 * k_a * problem.a_l + problem.a_l2)
    n, t_count = problem.eig.shape[0], problem.n_times
    logdet_m = n * jnp.log(c_m) + 2.0 * jnp.sum(jnp.log(k_m + problem.eig))
    logdet_a = n * jnp.log(c_a) + 2.0 * jnp.sum(jnp.log(k_a + problem.eig))
    return q, logdet_m + n * logdet_t + t_count * logdet_a


@jax.jit
def _evaluate(params, problem: SpaceTimeProblem):
    q, logdet_q = precision(params, problem)
    noise = jnp.exp(2.0 * params["log_noise"])
    rhs = problem.aty / noise
    logdet_b, s = problem.solve(problem.pattern, q + problem.e_obs / noise, rhs)
    m = problem.wtw / noise - rhs.T @ s
    logdet_sigma = logdet_b - logdet_q + problem.n_obs * jnp.log(noise)
    ll, w, _, _ = dense_likelihood(params, m, logdet_sigma, problem.n_obs, jnp.zeros(0), 0.0,
                                   "matern32")
    return ll, s, w


def log_marginal_likelihood(params: dict, problem: SpaceTimeProblem) -> jax.Array:
    """Exact REML log p(y | θ), β integrated (flat prior); differentiable in ``params``.
    Cost: one sparse Cholesky of B; the gradient adds a solve and a selected inversion."""
    return _evaluate(params, problem)[0]


def posterior_mean(params: dict, problem: SpaceTimeProblem) -> tuple[np.ndarray, np.ndarray]:
    """(E[m + a | y] as (T, n) per date and cell, β̂): the latent field's posterior mean
    without the trend, and the trend's coefficients."""
    _, s, w = _evaluate(params, problem)
    s, w = np.asarray(s), np.asarray(w)
    x = s[:, 0] - s[:, 1:] @ w  # B⁻¹Aᵀ(y − Xβ̂)/σ²
    n = problem.n_cells
    return x[:n][None, :] + x[n:].reshape(problem.n_times, n), w
