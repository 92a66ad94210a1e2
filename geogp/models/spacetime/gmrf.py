"""The space-time lattice model's sparse algebra (docs/spacetime.md).

A stack y(s, t) on a lattice's cells s and the stack's dates t_0 < … < t_{T−1} is

    y(s, t) = x(s, t)ᵀβ + m(s) + a(s, t) + g(t) + ε,   ε ~ N(0, σ²),

* m: a persistent field (each cell's own level over the whole series), Matérn ν = 1 in
  space (the lattice model's α = 2 operator, its own range ρ_m and sd s_m);
* a: anomalies, the same spatial operator (range ρ, sd s) in space and AR(1) between dates,
  a(·, t_k) = φ_k a(·, t_{k−1}) + √(1 − φ_k²) w_k, with φ_k = exp(−(t_k − t_{k−1})/τ): the
  time differences, not the index, set the correlation, so missing dates and irregular steps
  enter as they are. Separable: Cov a = R_T(τ) ⊗ Q_a⁻¹, precision Q_T ⊗ Q_a with Q_T the
  tridiagonal AR(1) precision;
* g: each date's offset from the series' level (a cloud-free scene is warmer, a season
  greener), AR(1) in time (sd s_g, time scale τ_g), so a date without data borrows it from
  its neighbours in time;
* β: the trend, with a flat prior (REML).

The unknowns x = (m, a_0, …, a_{T−1}, g) have the sparse precision
Q = diag(Q_m, Q_T(τ) ⊗ Q_a, Q_T(τ_g)/s_g²), and log|Q| in closed form (Neumann eigenvalues in
space, log|Q_T| = −Σ log(1 − φ_k²)). The likelihood goes through B = Q + AᵀA/σ² (A: each
observation sees m(s) + a(s, t) + g(t)), one CHOLMOD factorisation with the custom VJP of
:mod:`geogp.linalg`, as the 2-D lattice model's (:mod:`geogp.models.lattice.gmrf`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from geogp.exceptions import InputError
from geogp.linalg import SparsePattern, cholmod
from geogp.linalg.cholmod import selected_inverse
from geogp.linalg.solvers import Solver, solve_all
from geogp.models.lattice.gmrf import dense_likelihood, laplacian, laplacian_eigenvalues

__all__ = ["PARAMS", "Structure", "SpaceTimeProblem", "structure", "make_problem",
           "ar1_precision", "precision", "log_marginal_likelihood",
           "composite_log_likelihood", "posterior_mean", "posterior", "Moments",
           "kriging_means", "prior_draws", "DateCovariance"]

# θ: the anomalies' range, sd and time scale τ; the persistent field's range and sd; the dates'
# offsets' sd and time scale; noise
PARAMS = ("log_range", "log_sd", "log_tau", "log_range_mean", "log_sd_mean", "log_sd_offset",
          "log_tau_offset", "log_noise")


@dataclass(frozen=True, eq=False)
class Structure:
    """What a lattice shape, cell size and set of dates fix, shared by every window of that
    shape (one symbolic analysis): the pattern of B over (m, a_0, …, a_{T−1}, g) and where each
    operator's values sit on it.

    Attributes:
        pattern: ``SparsePattern`` of B. shape: (n_y, n_x). h: cell size. dt: (T − 1,) steps.
        m_i, m_l, m_l2: (nnz,) I, L, L² of the persistent field's block on the pattern.
        a_i, a_l, a_l2: (nnz,) I, L, L² of the spatial entry of each anomaly entry (0
            elsewhere); a_time: (nnz,) int, which entry of Q_T's (diag, off-diagonal) values
            each anomaly entry carries (−1 elsewhere); g_time: the same for the offsets' block.
        eig: (n,) the Laplacian's eigenvalues.
    """

    pattern: SparsePattern = field(repr=False)
    shape: tuple
    h: tuple
    dt: np.ndarray = field(repr=False)
    m_i: np.ndarray = field(repr=False)
    m_l: np.ndarray = field(repr=False)
    m_l2: np.ndarray = field(repr=False)
    a_i: np.ndarray = field(repr=False)
    a_l: np.ndarray = field(repr=False)
    a_l2: np.ndarray = field(repr=False)
    a_time: np.ndarray = field(repr=False)
    g_time: np.ndarray = field(repr=False)
    eig: np.ndarray = field(repr=False)

    @property
    def n_cells(self) -> int:
        return int(self.shape[0] * self.shape[1])

    @property
    def n_times(self) -> int:
        return int(self.dt.shape[0] + 1)

    @property
    def n_unknowns(self) -> int:
        return self.n_cells * (self.n_times + 1) + self.n_times

    def observation_matrix(self, cells: np.ndarray, steps: np.ndarray) -> sp.csr_matrix:
        """A: row i sees m(cells_i) + a(cells_i, steps_i) + g(steps_i)."""
        n, rows = self.n_cells, np.arange(len(cells))
        cols = np.concatenate([cells, n * (1 + steps) + cells, n * (1 + self.n_times) + steps])
        return sp.csr_matrix((np.ones(3 * len(cells)), (np.tile(rows, 3), cols)),
                             shape=(len(cells), self.n_unknowns))


def _check_times(times: np.ndarray) -> np.ndarray:
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or times.size < 2 or not np.all(np.diff(times) > 0):
        raise InputError("a space-time stack needs at least two dates, strictly increasing.")
    return times


def structure(shape: tuple[int, int], h: tuple[float, float], times: np.ndarray,
              slot: int = 0) -> Structure:
    """The :class:`Structure` of a ``shape`` lattice of cells sized ``h`` at increasing
    ``times`` (T,); cached, so windows of one shape share one pattern and one analysis.
    ``slot`` k > 0: the same structure with a pattern of its own (its own CHOLMOD factor), so
    that k + 1 windows of one shape can be factorised side by side."""
    times = _check_times(times)
    key = ((int(shape[0]), int(shape[1])), (float(h[0]), float(h[1])), tuple(times.tolist()))
    if slot == 0:
        return _structure(*key)
    return _slot(key, int(slot))


@functools.lru_cache(maxsize=8)
def _slot(key: tuple, slot: int) -> Structure:
    st = _structure(*key)
    own = SparsePattern(st.pattern.rows, st.pattern.cols, st.pattern.n)
    return dataclasses.replace(st, pattern=own)


@functools.lru_cache(maxsize=8)
def _structure(shape: tuple[int, int], h: tuple[float, float], times: tuple) -> Structure:
    t_count, n = len(times), shape[0] * shape[1]
    lap = laplacian(shape, h)
    ops = {"i": sp.eye(n, format="csc"), "l": lap, "l2": sp.csc_matrix(lap @ lap)}
    spatial = (abs(ops["l2"]) + abs(lap) + ops["i"]).tocsc()
    spatial.data[:] = 1.0
    band = sp.diags([np.ones(t_count - 1), np.ones(t_count), np.ones(t_count - 1)],
                    [-1, 0, 1], format="csc")
    # which Q_T value an entry carries: diag k → k, off-diagonal (k, k + 1) → T + k (1-based)
    index = sp.diags([np.arange(t_count - 1) + t_count + 1.0, np.arange(t_count) + 1.0,
                      np.arange(t_count - 1) + t_count + 1.0], [-1, 0, 1], format="csc")
    m_a = sp.hstack([sp.eye(n)] * t_count, format="csc")  # m(s) with every a(s, t)
    m_g = sp.csc_matrix(np.ones((n, t_count)))  # m(s) with every date's offset
    a_g = sp.kron(sp.eye(t_count), np.ones((n, 1)), format="csc")  # a(s, t) with g(t)
    pattern = SparsePattern.from_scipy(sp.bmat(
        [[spatial, m_a, m_g], [m_a.T, sp.kron(band, spatial), a_g], [m_g.T, a_g.T, band]],
        format="csc"))
    zero_a, zero_m, zero_g = (sp.csc_matrix((k, k)) for k in (n * t_count, n, t_count))

    def on(m=zero_m, a=zero_a, g=zero_g):
        return pattern.values_from_scipy(sp.block_diag((m, a, g), format="csc"))

    a_time = np.rint(on(a=sp.kron(index, spatial))).astype(np.int64) - 1
    g_time = np.rint(on(g=index)).astype(np.int64) - 1
    kron = functools.partial(sp.kron, band)
    return Structure(pattern, shape, h, np.diff(np.asarray(times)), on(m=ops["i"]),
                     on(m=ops["l"]), on(m=ops["l2"]), on(a=kron(ops["i"])),
                     on(a=kron(ops["l"])), on(a=kron(ops["l2"])), a_time, g_time,
                     laplacian_eigenvalues(shape, h))


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True)
class SpaceTimeProblem:
    """Everything the likelihood needs besides θ, for one stack on one lattice (a JAX pytree).

    Attributes:
        structure: the :class:`Structure` (shape, dates, pattern). solve: the
            :class:`~geogp.linalg.solvers.Solver` of B. n_obs: N. n_trend: p.
        e_obs: (nnz,) AᵀA on the pattern. aty: (unknowns, 1 + p) Aᵀ[y, X].
        wtw: [y, X]ᵀ[y, X].
    """

    structure: Structure = field(repr=False)
    solve: object = field(repr=False)
    n_trend: int
    n_obs: int
    e_obs: np.ndarray = field(repr=False)
    aty: np.ndarray = field(repr=False)
    wtw: np.ndarray = field(repr=False)

    def tree_flatten(self) -> tuple[tuple, tuple]:
        # N is data, not structure: static, it made every window with another count of
        # observations compile the likelihood again (and keep that executable)
        return (self.n_obs, self.e_obs, self.aty, self.wtw), (self.structure, self.solve,
                                                              self.n_trend)

    @classmethod
    def tree_unflatten(cls, aux: tuple, leaves: tuple) -> SpaceTimeProblem:
        return cls(*aux, *leaves)

    @property
    def pattern(self) -> SparsePattern:
        return self.structure.pattern

    @property
    def n_cells(self) -> int:
        return self.structure.n_cells

    @property
    def n_times(self) -> int:
        return self.structure.n_times


def make_problem(shape: tuple[int, int], h: tuple[float, float], times: np.ndarray,
                 cells: np.ndarray, steps: np.ndarray, y: np.ndarray, X: np.ndarray,
                 solve: object, slot: int = 0) -> SpaceTimeProblem:
    """The problem of observations ``y`` (N,) at lattice ``cells`` (N,) (row-major flat) and
    date indices ``steps`` (N,) of a stack with increasing ``times`` (T,) on a ``shape``
    lattice of cells sized ``h``, with trend columns ``X`` (N, p) and the ``solve``r of B.
    Problems in different slots (:func:`structure`) can be factorised at once."""
    st = structure(shape, h, times, slot)
    cells, steps = np.asarray(cells, dtype=np.int64), np.asarray(steps, dtype=np.int64)
    y, X = np.asarray(y, dtype=np.float64), np.asarray(X, dtype=np.float64).reshape(len(y), -1)
    a = st.observation_matrix(cells, steps)
    w = np.column_stack([y, X])
    return SpaceTimeProblem(st, solve, int(X.shape[1]), len(y),
                            st.pattern.values_from_scipy(sp.csc_matrix(a.T @ a)),
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


def _carried(index: np.ndarray, values: jax.Array) -> jax.Array:
    return jnp.where(index >= 0, values[jnp.maximum(index, 0)], 0.0)


def precision(params: dict, problem: SpaceTimeProblem) -> tuple[jax.Array, jax.Array]:
    """(Q on the pattern, log|Q|) at θ (standardised units, lattice length unit, time in the
    stack's unit)."""
    st = problem.structure
    area = st.h[0] * st.h[1]
    k_m, c_m = _matern(params["log_range_mean"], params["log_sd_mean"], area)
    k_a, c_a = _matern(params["log_range"], params["log_sd"], area)
    dt = jnp.asarray(st.dt)
    diag, off, logdet_t = ar1_precision(dt, jnp.exp(params["log_tau"]))
    g_diag, g_off, logdet_g = ar1_precision(dt, jnp.exp(params["log_tau_offset"]))
    c_g = jnp.exp(-2.0 * params["log_sd_offset"])
    q = c_m * (k_m**2 * st.m_i + 2.0 * k_m * st.m_l + st.m_l2)
    q = q + _carried(st.a_time, jnp.concatenate([diag, off])) * c_a * (
        k_a**2 * st.a_i + 2.0 * k_a * st.a_l + st.a_l2)
    q = q + c_g * _carried(st.g_time, jnp.concatenate([g_diag, g_off]))
    n, t_count = st.n_cells, st.n_times
    logdet_m = n * jnp.log(c_m) + 2.0 * jnp.sum(jnp.log(k_m + st.eig))
    logdet_a = n * jnp.log(c_a) + 2.0 * jnp.sum(jnp.log(k_a + st.eig))
    logdet = logdet_m + n * logdet_t + t_count * logdet_a + logdet_g + t_count * jnp.log(c_g)
    return q, logdet


def _system(params, problem: SpaceTimeProblem):
    """(B on the pattern, Aᵀ[y, X]/σ², log|Q|, σ²) at θ."""
    q, logdet_q = precision(params, problem)
    noise = jnp.exp(2.0 * params["log_noise"])
    return q + problem.e_obs / noise, problem.aty / noise, logdet_q, noise


def _from_solve(params, problem: SpaceTimeProblem, logdet_b, s, rhs, logdet_q, noise):
    """(REML log-likelihood, β̂, Var(β̂)⁻¹, (y − Xβ̂)ᵀΣ⁻¹(y − Xβ̂)) from log|B| and
    S = B⁻¹Aᵀ[y, X]/σ²."""
    m = problem.wtw / noise - rhs.T @ s
    logdet_sigma = logdet_b - logdet_q + problem.n_obs * jnp.log(noise)
    ll, w, a, _ = dense_likelihood(params, m, logdet_sigma, problem.n_obs, jnp.zeros(0), 0.0,
                                   "matern32")
    return ll, w, a, m[0, 0] - m[1:, 0] @ w


@jax.jit
def _evaluate(params, problem: SpaceTimeProblem):
    b, rhs, logdet_q, noise = _system(params, problem)
    logdet_b, s = problem.solve(problem.pattern, b, rhs)
    ll, w, a, quad = _from_solve(params, problem, logdet_b, s, rhs, logdet_q, noise)
    return ll, s, w, a, b, quad


def log_marginal_likelihood(params: dict, problem: SpaceTimeProblem) -> jax.Array:
    """Exact REML log p(y | θ), β integrated (flat prior); differentiable in ``params``.
    Cost: one sparse Cholesky of B; the gradient adds a solve and a selected inversion."""
    return _evaluate(params, problem)[0]


def composite_log_likelihood(params: dict, problems: tuple[SpaceTimeProblem, ...]
                             ) -> jax.Array:
    """Σ_w log p_w(y_w | θ) over independent windows; differentiable. With a solver that
    batches (CHOLMOD) and windows in different slots (:func:`structure`), every window is
    factorised in one host call and each selected inversion (the gradient's) runs while the
    next window factorises (:mod:`geogp.linalg.cholmod_many`)."""
    systems = [_system(params, p) for p in problems]
    solutions = solve_all(problems, systems)
    return sum(_from_solve(params, p, logdet_b, s, rhs, logdet_q, noise)[0]
               for p, (_, rhs, logdet_q, noise), (logdet_b, s)
               in zip(problems, systems, solutions, strict=True))


def _unknowns_per_value(st: Structure) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat (T n,) indices of m(s), a(s, t) and g(t) behind f(s, t), date-major."""
    n, t_count = st.n_cells, st.n_times
    cells = np.tile(np.arange(n), t_count)
    steps = np.repeat(np.arange(t_count), n)
    return cells, n * (1 + steps) + cells, n * (1 + t_count) + steps


def _at_every_value(st: Structure, v: np.ndarray) -> np.ndarray:
    """(m + a + g) of unknowns ``v`` (rows) at every (date, cell): (T, n, …)."""
    im, ia, ig = _unknowns_per_value(st)
    return (v[im] + v[ia] + v[ig]).reshape(st.n_times, st.n_cells, *v.shape[1:])


def posterior_mean(params: dict, problem: SpaceTimeProblem) -> tuple[np.ndarray, np.ndarray]:
    """(E[f | y] as (T, n) per date and cell, β̂), f = m + a + g: the latent field's posterior
    mean without the trend, and the trend's coefficients."""
    _, s, w, _, _, _ = _evaluate(params, problem)
    s, w = np.asarray(s), np.asarray(w)
    return _at_every_value(problem.structure, s[:, 0] - s[:, 1:] @ w), w  # B⁻¹Aᵀ(y − Xβ̂)/σ²


# one jitted evaluation (with its CHOLMOD host callbacks) at a time across threads: two tiles'
# evaluations run at once from two threads hung, each callback waiting on a lock
_EVALUATION_LOCK = threading.Lock()


class Moments(NamedTuple):
    """What :func:`posterior` returns: ``mean`` and ``var`` (T, n), ``coef`` β̂ (p,), and
    ``scale2``, the REML estimate of a factor on every variance (signal and noise alike) at
    θ's other parameters: (y − Xβ̂)ᵀΣ⁻¹(y − Xβ̂)/(N − p), 1 in expectation when θ is right.
    Multiplying all variances by it leaves the mean unchanged."""

    mean: np.ndarray
    var: np.ndarray
    coef: np.ndarray
    scale2: float


def posterior(params: dict, problem: SpaceTimeProblem, x_new: np.ndarray | None = None,
              ordering: str = "metis") -> Moments:
    """:class:`Moments` of xᵀβ + f at every (date, cell), as (T, n), universal kriging:
    the variance adds the trend's, (x − Uᵀe)ᵀ Var(β̂) (x − Uᵀe) with U = B⁻¹AᵀX/σ². ``x_new``:
    (T, n, p) trend columns at every value (default: the intercept, ones). Variances come
    from one selected inversion of B (CHOLMOD backend)."""
    with _EVALUATION_LOCK:  # threads overlap in the selected inversion below, not in XLA
        _, s, w, a, b, quad = jax.block_until_ready(_evaluate(params, problem))
    s, w, a = np.asarray(s), np.asarray(w), np.asarray(a)
    st = problem.structure
    t_count, n, p = st.n_times, st.n_cells, problem.n_trend
    x_new = np.ones((t_count, n, p)) if x_new is None else np.asarray(x_new)
    mean = _at_every_value(st, s[:, 0] - s[:, 1:] @ w) + x_new @ w
    z = selected_inverse(st.pattern, np.asarray(b), ordering=ordering)
    big = st.pattern.n

    def entry(i, j):  # (B⁻¹)[i, j] with i ≥ j, on the pattern's lower triangle
        return z[st.pattern.positions_of_keys(j.astype(np.int64) * big + i)]

    im, ia, ig = _unknowns_per_value(st)
    var = (entry(im, im) + entry(ia, ia) + entry(ig, ig)
           + 2.0 * (entry(ia, im) + entry(ig, im) + entry(ig, ia))).reshape(t_count, n)
    r = x_new - _at_every_value(st, s[:, 1:])
    var = var + np.einsum("tnp,pq,tnq->tn", r, np.linalg.inv(a), r)
    dof = max(problem.n_obs - p, 1)
    return Moments(mean, var, w, float(quad) / dof)


def kriging_means(params: dict, problem: SpaceTimeProblem, cells: np.ndarray,
                  steps: np.ndarray, X: np.ndarray, Y: np.ndarray,
                  x_new: np.ndarray | None = None) -> np.ndarray:
    """Universal-kriging means of xᵀβ + f at every (date, cell), (T, n, k), of the data
    vectors ``Y`` (N, k) observed where the problem's are (``cells``, ``steps`` and trend
    columns ``X`` (N, p): the problem's own, in its order), each column with its own β̂: what
    :func:`posterior` gives as the mean with that column as data, from one factorisation of B
    and one solve for all columns. ``x_new`` as for :func:`posterior`."""
    st = problem.structure
    with _EVALUATION_LOCK:
        b, rhs, _, noise = (np.asarray(v) for v in _system(params, problem))
    Y = np.asarray(Y, dtype=np.float64).reshape(len(cells), -1)
    X = np.asarray(X, dtype=np.float64).reshape(len(cells), -1)
    a = st.observation_matrix(np.asarray(cells, np.int64), np.asarray(steps, np.int64))
    p, k = X.shape[1], Y.shape[1]
    s = problem.solve.host_solve(problem.pattern, b, np.column_stack([a.T @ Y / noise,
                                                                      rhs[:, 1:]]))
    s_y, s_x = s[:, :k], s[:, k:]  # B⁻¹AᵀY/σ², B⁻¹AᵀX/σ²
    # XᵀΣ⁻¹[Y, X] = Xᵀ[Y, X]/σ² − (AᵀX/σ²)ᵀ B⁻¹Aᵀ[Y, X]/σ², as Σ⁻¹ = I/σ² − A B⁻¹ Aᵀ/σ⁴
    beta = np.linalg.solve(X.T @ X / noise - rhs[:, 1:].T @ s_x,
                           X.T @ Y / noise - rhs[:, 1:].T @ s_y)  # (p, k)
    x_new = np.ones((st.n_times, st.n_cells, p)) if x_new is None else np.asarray(x_new)
    return _at_every_value(st, s_y - s_x @ beta) + np.einsum("tnp,pk->tnk", x_new, beta)


class DateCovariance:
    """The universal-kriging posterior covariance of xᵀβ + f at one date over a window's
    cells, C = H B⁻¹ Hᵀ + r Var(β̂) rᵀ (H: each cell's m + a + g at that date, r = x − H B⁻¹
    AᵀX/σ², the intercept's x = 1), at θ: what :func:`posterior`'s variance is the diagonal of.
    Products with it cost one solve with the window's factor, which CHOLMOD keeps on the
    problem's pattern (one slot per window held at once). Standardised units.

    Args:
        params: θ. problem: the window's (its dates include ``step``). step: the date's index.
    """

    def __init__(self, params: dict, problem: SpaceTimeProblem, step: int) -> None:
        st = problem.structure
        if not 0 <= step < st.n_times:
            raise InputError(f"step must index one of the window's {st.n_times} dates; got "
                             f"{step!r}.")
        with _EVALUATION_LOCK:
            b, rhs, _, noise = (np.asarray(v) for v in _system(params, problem))
        self.problem, self._b = problem, b
        n = st.n_cells
        self.n = n
        self._rows = (np.arange(n), n * (1 + step) + np.arange(n), n * (1 + st.n_times) + step)
        self._r = self._beta_inv = None
        if problem.n_obs > problem.n_trend:  # β̂ exists: its variance widens C
            s_x = self._solve(rhs[:, 1:])
            self._r = 1.0 - self._h(s_x)  # (n, p), x = 1 at every cell
            self._beta_inv = np.linalg.inv(problem.wtw[1:, 1:] / float(noise)
                                           - rhs[:, 1:].T @ s_x)

    def _solve(self, rhs: np.ndarray) -> np.ndarray:
        return self.problem.solve.host_solve(self.problem.pattern, self._b, rhs)

    def _h(self, v: np.ndarray) -> np.ndarray:
        m, a, g = self._rows
        return v[m] + v[a] + v[g]

    def apply(self, x: np.ndarray) -> np.ndarray:
        """C x for x (n, k) over the window's cells (row-major): one solve, k right-hand
        sides."""
        x = np.asarray(x, dtype=np.float64).reshape(self.n, -1)
        m, a, g = self._rows
        rhs = np.zeros((self.problem.pattern.n, x.shape[1]))
        rhs[m] = x
        rhs[a] = x
        rhs[g] = x.sum(axis=0)
        out = self._h(self._solve(rhs))
        if self._r is not None:
            out += self._r @ (self._beta_inv @ (self._r.T @ x))
        return out

    def release(self) -> None:
        """Free the window's factor now (the pattern's slot then serves another window)."""
        if self.problem.solve.backend == "cholmod":
            cholmod.analyze(self.problem.pattern, ordering=self.problem.solve.ordering).release()


def prior_draws(params: dict, shape: tuple[int, int], h: tuple[float, float],
                times: np.ndarray, n: int, rng: np.random.Generator,
                solver: Solver | None = None) -> np.ndarray:
    """``n`` draws of f = m + a + g from the prior at every (date, cell) of a ``shape``
    lattice with cells sized ``h`` at ``times``: (n, T, n_y, n_x). A field with precision
    c (κ² I + L)² is (κ² I + L)⁻¹ z / √c (one factorisation of κ² I + L per field, one solve
    per date); the anomalies follow their AR(1) from date to date, the offsets theirs. Memory:
    the draws and one date's work."""
    times = _check_times(times)
    solver = solver or Solver("cholmod", ordering="metis")
    area = float(h[0] * h[1])
    lap = laplacian(tuple(shape), tuple(h))
    cells = lap.shape[0]

    def field(log_range, log_sd):  # draws(count) of one Matérn field: (count, cells)
        kappa2, c = (float(v) for v in _matern(log_range, log_sd, area))
        op = sp.csc_matrix(kappa2 * sp.eye(cells) + lap)
        pattern = SparsePattern.from_scipy(op)  # one pattern: its factor serves every solve
        values = pattern.values_from_scipy(op)
        return lambda count: solver.host_solve(
            pattern, values, rng.standard_normal((cells, count))).T / math.sqrt(c)

    t_count = times.size
    dt = np.diff(times)
    phi = np.exp(-dt / math.exp(params["log_tau"]))
    phi_g = np.exp(-dt / math.exp(params["log_tau_offset"]))
    out = np.empty((n, t_count, cells))
    out[:] = field(params["log_range_mean"], params["log_sd_mean"])(n)[:, None]  # m, every date
    g = math.exp(params["log_sd_offset"]) * rng.standard_normal((n, t_count))
    anomaly = field(params["log_range"], params["log_sd"])
    a = anomaly(n)
    out[:, 0] += a
    for k in range(1, t_count):
        a = phi[k - 1] * a + math.sqrt(1.0 - phi[k - 1] ** 2) * anomaly(n)
        out[:, k] += a
        g[:, k] = phi_g[k - 1] * g[:, k - 1] + math.sqrt(1.0 - phi_g[k - 1] ** 2) * g[:, k]
    out += g[:, :, None]
    return out.reshape(n, t_count, *shape)
