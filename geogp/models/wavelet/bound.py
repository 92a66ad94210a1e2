"""The wavelet model's sparse problem, collapsed bound and posterior: pure functions of θ.

Split from :mod:`geogp.models.wavelet.regressor` (the estimator :class:`WaveletRegressor`, a thin
shell over these). See that module's docstring for the bound, and docs/wavelets.md,
docs/sparse_vjp.md for the maths and the solvers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack, solve_triangular

from geogp import linalg
from geogp.exceptions import InputError, NotPositiveDefiniteError
from geogp.features.wavelet_statistics import WaveletStatistics
from geogp.linalg import SparsePattern
from geogp.linalg.solvers import Solver
from geogp.models.wavelet.prior import LOCATIONS, NORMALISATIONS, log_coefficients, log_precisions

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.features.wavelet import WaveletBasis

__all__ = ["BACKENDS", "WaveletProblem", "WaveletPosterior", "make_problem", "collapsed_bound",
           "posterior", "loss_per_point"]

BACKENDS = ("auto", "cholmod", "dense")
_PREDICT_ENTRIES = 2**22  # entries of the dense (M_a, chunk) right-hand sides in prediction
# the separable grid predictor holds A⁻¹ densely over all M features: at most 6,000 (two
# M × M arrays at a time while it is built, 576 MB)
GRID_DENSE_MAX = 6000


def _load_solver(backend: str) -> Solver:
    """The :class:`~geogp.linalg.solvers.Solver` of the chosen backend (docs/sparse_vjp.md,
    contract)."""
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS}; got {backend!r}.")
    if backend == "dense" or (backend == "auto" and not linalg.HAVE_CHOLMOD):
        # LAPACK on the host behind the custom VJP (one dpotrf + dpotri per value and
        # gradient); JAX's own dense Cholesky (the test oracle) only without scikit-sparse
        return Solver("lapack" if linalg.HAVE_CHOLMOD else "dense")
    if not linalg.HAVE_CHOLMOD:
        raise InputError(
            "backend='cholmod' needs scikit-sparse (CHOLMOD), which is not installed; install "
            "scikit-sparse or use backend='dense' (small problems only)."
        )
    return Solver("cholmod")


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, eq=False)
class WaveletProblem:
    """Everything the bound needs besides θ: statistics, pattern and solver (all constant).

    A JAX pytree: the index and value arrays are leaves, so a jitted objective receives them as
    arguments rather than as compiled-in constants; the rest is static (compared by identity).

    Attributes:
        stats: the :class:`~geogp.features.wavelet_statistics.WaveletStatistics`.
        pattern: the ``geogp.linalg.SparsePattern`` of P (lower triangle, CSC order).
        solve: the :class:`~geogp.linalg.solvers.Solver`,
            ``(pattern, values, rhs) -> (logdet, solution)``.
        rows, cols: (nnz,) row and column of each stored entry of P (pattern order).
        g_vals: (nnz,) G on P in pattern order.
        r: (M_a,) r = Φy of the active features.
        index: (D, M_a) per-dimension function indices of the active features.
        normalisation: ``"amplitude"`` or ``"l2"``. location: ``"left"`` or ``"centre"``.
    """

    stats: WaveletStatistics
    pattern: object = field(repr=False)
    solve: object = field(repr=False)
    rows: np.ndarray = field(repr=False)
    cols: np.ndarray = field(repr=False)
    g_vals: np.ndarray = field(repr=False)
    r: np.ndarray = field(repr=False)
    index: np.ndarray = field(repr=False)
    normalisation: str = "amplitude"
    location: str = "left"

    @property
    def basis(self) -> WaveletBasis:
        return self.stats.basis

    def tree_flatten(self) -> tuple[tuple, tuple]:
        leaves = (self.rows, self.cols, self.g_vals, self.r, self.index)
        return leaves, (self.stats, self.pattern, self.solve, self.normalisation, self.location)

    @classmethod
    def tree_unflatten(cls, aux: tuple, leaves: tuple) -> WaveletProblem:
        stats, pattern, solve, normalisation, location = aux
        return cls(stats, pattern, solve, *leaves, normalisation, location)  # type: ignore[call-arg]


# "auto": a pattern this dense gains nothing from sparse factors (the coarse levels' wide
# functions couple almost every pair), and dense LAPACK beats the selected inversion
_DENSE_FILL, _DENSE_MAX = 0.2, 8000


def _dense_is_faster(gram) -> bool:
    m = gram.shape[0]
    return m <= _DENSE_MAX and (2 * gram.nnz - m) >= _DENSE_FILL * m * m


def make_problem(stats: WaveletStatistics, backend: str = "auto",
                 normalisation: str = "amplitude", location: str = "left") -> WaveletProblem:
    """Fix the sparse pattern (and, in the CHOLMOD backend, its analysis) for the bound.

    Args:
        stats: precomputed statistics.
        backend: ``"cholmod"``, ``"dense"`` (densifies A) or ``"auto"``: CHOLMOD, except
            for patterns of at most 8,000 features filled to 20 % or more (dense LAPACK).
        normalisation: ``"amplitude"`` (default) or ``"l2"`` (docs/wavelets.md, coefficients).
        location: bump location of a basis function, ``"left"`` (t 2^{−j}, thesis eq. 4.26,
            default) or ``"centre"`` (middle of its support).

    Returns:
        A :class:`WaveletProblem`.

    Cost: O(nnz(P)) here, plus the backend's symbolic analysis.
    """
    if normalisation not in NORMALISATIONS:
        raise InputError(f"normalisation must be one of {NORMALISATIONS}; got {normalisation!r}.")
    if location not in LOCATIONS:
        raise InputError(f"location must be one of {LOCATIONS}; got {location!r}.")
    if backend == "auto" and _dense_is_faster(stats.gram):
        backend = "dense"
    solve = _load_solver(backend)
    pattern = SparsePattern.from_scipy(stats.gram)
    rows = np.asarray(pattern.rows, dtype=np.int64)
    cols = np.asarray(pattern.cols, dtype=np.int64)
    g_vals = np.asarray(pattern.values_from_scipy(stats.gram), dtype=np.float64)
    index = stats.basis.unravel(stats.active)
    return WaveletProblem(stats, pattern, solve, rows, cols, g_vals, stats.r.copy(), index,
                          normalisation, location)


def _whitened_system(params: dict, problem: WaveletProblem):
    """A on P (pattern order) and b = σ⁻² Λ^{1/2} r for the active features."""
    log_lam = log_precisions(params, problem.basis.dims, problem.index, problem.normalisation,
                             problem.location)
    sqrt_lam = jnp.exp(0.5 * log_lam)  # Λ^{1/2}, never formed from 1/λ (docs/bound.md)
    inv_noise = 1.0 / params["noise"]
    rows, cols = problem.rows, problem.cols
    # A_vals = 1[row = col] + σ⁻² √λ_row G_vals √λ_col    (docs/wavelets.md, sparsity and bound)
    a_vals = (rows == cols) + inv_noise * sqrt_lam[rows] * problem.g_vals * sqrt_lam[cols]
    b = inv_noise * sqrt_lam * problem.r  # b = σ⁻² Λ^{1/2} r
    return a_vals, b


@jax.jit
def _bound_and_solution(params: dict, problem: WaveletProblem):
    a_vals, b = _whitened_system(params, problem)
    logdet, gamma = problem.solve(problem.pattern, a_vals, b)  # (log|A|, A⁻¹b)
    noise = params["noise"]
    st = problem.stats
    # L′ = −½ [N log 2πσ² + log|A| + σ⁻² yᵀy − bᵀA⁻¹b]
    bound = -0.5 * (st.n * jnp.log(2.0 * math.pi * noise) + logdet + st.yy / noise - b @ gamma)
    return bound, gamma, a_vals


def collapsed_bound(params: dict, problem: WaveletProblem) -> jax.Array:
    """The collapsed (Titsias) bound L′ with sparse A (docs/bound.md, docs/wavelets.md).

    For the truncated prior it equals the exact log marginal likelihood
    log N(y | 0, ΦᵀΛΦ + σ²I) of the finite wavelet model.

    Args:
        params: constrained parameters (see :func:`geogp.models.wavelet.prior.init_params`).
        problem: from :func:`make_problem` (a pytree: its arrays are traced, not compiled in).

    Returns:
        Scalar L′ (standardised units). Differentiable in ``params`` (custom VJP of the solver).

    Cost: one sparse Cholesky of A (O(nnz(L)) memory) and O(nnz(P) + Σ_d M_d Q) other work.
    """
    return _bound_and_solution(params, problem)[0]


@dataclass(frozen=True, eq=False)
class WaveletPosterior:
    """Optimal q(u) at fixed θ (docs/bound.md, eq. 2.30), in whitened coordinates.

    Attributes:
        params: the parameters. problem: the :class:`WaveletProblem`.
        gamma: (M_a,) A⁻¹b, so that the mean at x* is ψ*ᵀγ with ψ* = Λ^{1/2}φ(x*).
        bound: L′ at ``params``.
        a_vals: (nnz,) A on P at ``params``.
        log_coeffs: per dimension, (M_d,) log β^{(d)} of every 1-D function (normalisation
            included).
    """

    params: dict = field(repr=False)
    problem: WaveletProblem = field(repr=False)
    gamma: np.ndarray = field(repr=False)
    bound: float
    a_vals: object = field(repr=False)
    log_coeffs: tuple = field(repr=False)

    @cached_property
    def _solve_many(self):
        """Jitted X ↦ A⁻¹X at this posterior's A (compiled once per right-hand-side width)."""
        pattern, solve = self.problem.pattern, self.problem.solve
        return jax.jit(lambda vals, rhs: solve(pattern, vals, rhs)[1])

    def _local(self, X: np.ndarray):
        """Local features at X (N, D): flat rows (N, K) and ψ = √λ·φ values (N, K)."""
        basis = self.problem.basis
        rows, vals = basis.local_features(X)
        idx = basis.unravel(rows)
        log_lam = np.log(float(self.params["amplitude"])) + sum(
            c[i] for c, i in zip(self.log_coeffs, idx, strict=True))
        return rows, np.exp(0.5 * log_lam) * vals

    def prior_variance(self, X: ArrayLike) -> np.ndarray:
        """k(x, x) = Σ_m λ_m φ_m(x)² of the finite prior at X (N, D). Cost O(N·K)."""
        _, psi = self._local(np.asarray(X, dtype=np.float64))
        return np.sum(psi**2, axis=1)

    def predict(self, X: ArrayLike, chunk_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and latent variance of f at X (standardised units).

        mean = ψ*ᵀγ (= σ⁻² φ*ᵀB⁻¹r) and var = Σ_{pruned} λ_m φ_m(x*)² + ψ_aᵀA⁻¹ψ_a
        (= φ*ᵀB⁻¹φ* over the unpruned basis, docs/wavelets.md (sparsity and bound)).

        Args:
            X: (N*, D) points inside the window.
            chunk_size: points per batch of solves; default keeps M_a·chunk ≤ 2^22.

        Returns:
            ``(mean, var)``, each (N*,).

        Cost: per chunk one factorisation of A and a solve with chunk right-hand sides;
        O(N*·K) other work.
        """
        X = np.asarray(X, dtype=np.float64)
        st = self.problem.stats
        pos_of = st.position
        ma = st.n_active
        n_pts = X.shape[0]
        step = max(1, _PREDICT_ENTRIES // max(ma, 1)) if chunk_size is None else int(chunk_size)
        step = min(step, 1 << max(n_pts - 1, 1).bit_length())  # few distinct shapes to compile
        solve_many = self._solve_many
        means, variances = [], []
        for start in range(0, n_pts, step):
            rows, psi = self._local(X[start:start + step])
            pos = pos_of[rows]
            act = pos >= 0
            means.append(np.sum(np.where(act, psi * self.gamma[np.where(act, pos, 0)], 0.0), 1))
            var_pruned = np.sum(np.where(act, 0.0, psi**2), axis=1)
            rhs = np.zeros((ma, step))  # fixed width: the last chunk is zero-padded
            cols = np.broadcast_to(np.arange(rows.shape[0])[:, None], rows.shape)
            rhs[pos[act], cols[act]] = psi[act]
            sol = np.asarray(solve_many(self.a_vals, jnp.asarray(rhs)))
            var_act = np.sum(rhs * sol, axis=0)[: rows.shape[0]]  # ψ_aᵀ A⁻¹ ψ_a
            variances.append(var_pruned + var_act)
        return np.concatenate(means), np.concatenate(variances)


    def _dense_cholesky(self) -> np.ndarray:
        """A fresh dense lower Cholesky factor of A (M_a × M_a, LAPACK dpotrf in place; the
        upper triangle holds A's entries)."""
        a = self.problem.pattern.to_scipy(np.asarray(self.a_vals)).toarray()
        a, info = lapack.dpotrf(a, lower=1, overwrite_a=1)
        if info != 0:
            raise NotPositiveDefiniteError(f"the wavelet posterior precision A is not positive "
                                           f"definite (LAPACK info {info}).")
        return a

    @cached_property
    def _grid_operator(self) -> np.ndarray:
        """D (M_y², M_x²) with D[(a, c), (b, d)] = (A⁻¹)_(a,b),(c,d) over all M = M_y·M_x
        features (zero rows and columns for the pruned ones), for :meth:`predict_grid`."""
        st = self.problem.stats
        my, mx = self.problem.basis.sizes
        # A⁻¹ in place (dpotrf, dpotri: lower triangle), then symmetrised: one M_a² array
        a, info = lapack.dpotri(self._dense_cholesky(), lower=1, overwrite_c=1)
        if info != 0:
            raise NotPositiveDefiniteError(f"the wavelet posterior precision A is not positive "
                                           f"definite (LAPACK info {info}).")
        a = np.tril(a) + np.tril(a, -1).T
        full = np.zeros((my * mx, my * mx))
        full[np.ix_(st.active, st.active)] = a
        del a
        # (a, b, c, d) → (a, c, b, d): entry (a, b),(c, d) of A⁻¹ at row (a, c), column (b, d)
        return np.ascontiguousarray(
            full.reshape(my, mx, my, mx).transpose(0, 2, 1, 3)).reshape(my * my, mx * mx)

    def grid_ready(self) -> bool:
        """Whether :meth:`predict_grid` applies: a 2-D basis of at most ``GRID_DENSE_MAX``
        features (A⁻¹ is held densely over all of them)."""
        return self.problem.basis.n_dims == 2 and self.problem.basis.n_features <= GRID_DENSE_MAX

    def axis_values(self, axes: Sequence[ArrayLike], quadratic: bool = False) -> list:
        """The prior's per-axis factors at the coordinates ``axes`` (standardised units).

        Returns, per axis d, ``(U_d, Q_d)``: U_d (n_d × M_d) CSR of u_a(x) = √β_a φ_a(x) (the
        amplitude s excluded: ψ_(a,b) = s u_a(y) v_b(x)), and with ``quadratic`` Q_d
        (n_d × M_d²) CSR of the products u_a(x) u_c(x) at column a·M_d + c (else None).
        Cost O(n_d K_d) (O(n_d K_d²) with ``quadratic``).
        """
        out = []
        for b, coeff, x in zip(self.problem.basis.dims, self.log_coeffs, axes, strict=True):
            rows, vals = b.local_features(x)
            n, k = rows.shape
            u = np.exp(0.5 * coeff[rows]) * vals
            pt = np.repeat(np.arange(n), k)
            lin = sp.csr_matrix((u.ravel(), (pt, rows.ravel())), shape=(n, b.size))
            quad = None
            if quadratic:
                pair = (rows[:, :, None] * b.size + rows[:, None, :]).ravel()
                quad = sp.csr_matrix(((u[:, :, None] * u[:, None, :]).ravel(),
                                      (np.repeat(pt, k), pair)), shape=(n, b.size**2))
            out.append((lin, quad))
        return out

    def predict_grid(self, axes: Sequence[ArrayLike]) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and latent variance of f on the grid ``axes`` (standardised units).

        The tensor basis and the separable prior variances λ_(a,b) = s² β_a β_b make every
        feature's ψ = √λ φ a product u_a(y) v_b(x), so on a grid

            mean = s U Γ Vᵀ,   var = s² [ (U∘U) Π (V∘V)ᵀ + Q_y D Q_xᵀ ]

        with U (n_y × M_y), V (n_x × M_x) the per-axis values, Γ (M_y × M_x) = A⁻¹b on the
        active features, Π the pruned features, Q_y[i, (a, c)] = u_a(y_i) u_c(y_i) (likewise
        Q_x) and D = A⁻¹ rearranged (:attr:`_grid_operator`). Same values as :meth:`predict`
        on the mesh, without one solve per cell.

        Cost: one dense inversion of A (M_a³, cached; two M² arrays while it is built) and
        O(n_y K_y² M_x² + n_y n_x K_x²).
        """
        basis, st = self.problem.basis, self.problem.stats
        axes = [np.asarray(a, dtype=np.float64).ravel() for a in axes]
        basis.check_inside(np.array([[a.min() for a in axes], [a.max() for a in axes]]),
                           "the prediction grid")
        (uy, qy), (vx, qx) = self.axis_values(axes, quadratic=True)
        my, mx = basis.sizes
        gamma = np.zeros(my * mx)
        gamma[st.active] = self.gamma
        pruned = np.ones(my * mx)
        pruned[st.active] = 0.0
        amp = float(self.params["amplitude"])
        mean = math.sqrt(amp) * np.asarray(uy @ (vx @ gamma.reshape(my, mx).T).T)
        sq = (uy.multiply(uy), vx.multiply(vx))
        var_pruned = np.asarray(sq[0] @ (sq[1] @ pruned.reshape(my, mx).T).T)
        var_act = np.asarray(qx @ np.asarray(qy @ self._grid_operator).T).T
        return mean, amp * (var_pruned + var_act)


    # ------------------------------------------------------------------ samples
    def sample_bytes(self) -> float:
        """Bytes :meth:`sample_weights` holds: A's dense Cholesky factor (M_a², kept) and the
        dense A it is computed from."""
        return 2 * 8.0 * float(self.problem.stats.n_active) ** 2

    @cached_property
    def _sample_factor(self) -> np.ndarray:
        """Lower Cholesky factor L of A (dense, M_a × M_a): L⁻ᵀz ~ N(0, A⁻¹) for z ~ N(0, I)."""
        return np.tril(self._dense_cholesky())

    def sample_weights(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(M, n) draws of the whitened weights of all M basis functions: the active ones from
        q(u) = N(γ, A⁻¹), the pruned ones (no data in their support) from the prior N(0, I).
        f = Σ_m ψ_m w_m is then a draw of the posterior field."""
        st = self.problem.stats
        out = rng.standard_normal((self.problem.basis.n_features, n))  # the prior, for pruned
        if st.n_active:
            z = out[st.active]
            out[st.active] = self.gamma[:, None] + solve_triangular(
                self._sample_factor, z, lower=True, trans="T", check_finite=False)
        return out

    def sample_points(self, X: ArrayLike, w: np.ndarray) -> np.ndarray:
        """f = Ψ(X) w at X (N, D) for weights w (M, n): (n, N), standardised units."""
        X = np.asarray(X, dtype=np.float64)
        rows, psi = self._local(X)
        n_pts, k = rows.shape
        Psi = sp.csr_matrix((psi.ravel(), (np.repeat(np.arange(n_pts), k), rows.ravel())),
                            shape=(n_pts, self.problem.basis.n_features))
        return np.asarray(Psi @ w).T

    def sample_grid(self, axes: Sequence[ArrayLike], w: np.ndarray) -> np.ndarray:
        """f on the 2-D grid ``axes`` for weights w (M, n): (n, n_y, n_x), per axis (s U W Vᵀ,
        as :meth:`predict_grid`'s mean), standardised units."""
        basis = self.problem.basis
        axes = [np.asarray(a, dtype=np.float64).ravel() for a in axes]
        basis.check_inside(np.array([[a.min() for a in axes], [a.max() for a in axes]]),
                           "the sample grid")
        (uy, _), (vx, _) = self.axis_values(axes)
        my, mx = basis.sizes
        s = math.sqrt(float(self.params["amplitude"]))
        return np.stack([s * np.asarray(uy @ (vx @ w[:, t].reshape(my, mx).T).T)
                         for t in range(w.shape[1])])


def posterior(params: dict, problem: WaveletProblem) -> WaveletPosterior:
    """Build the posterior at θ: one sparse factorisation. Cost as :func:`collapsed_bound`."""
    bound, gamma, a_vals = _bound_and_solution(params, problem)
    log_coeffs = tuple(np.asarray(c) for c in _log_coefficients_jit(
        params, problem.basis.dims, problem.normalisation, problem.location))
    return WaveletPosterior(params, problem, np.asarray(gamma), float(bound), a_vals,
                            log_coeffs)


_log_coefficients_jit = jax.jit(log_coefficients, static_argnums=(1, 2, 3))


def loss_per_point(params: dict, problem: WaveletProblem) -> jax.Array:
    """−L′/N, the objective minimised by :class:`WaveletRegressor` (module level: the
    optimiser caches its compilation per loss function)."""
    return -collapsed_bound(params, problem) / problem.stats.n
