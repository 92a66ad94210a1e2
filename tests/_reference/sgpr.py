"""SGPR, the collapsed variational GP with inducing inputs (Titsias 2009): docs/bound.md baseline.

Inducing inputs Z (M, D) give K_uf = k(Z, X) and K_uu = k(Z, Z) + 1e-8·σ_f²·I. The bound uses the
stable whitened form of docs/bound.md (baselines) in the whitened bound:

    L_u = chol(K_uu),  V = L_u⁻¹ K_uf,  A = I + σ⁻² V Vᵀ = L_A L_Aᵀ,  c = σ⁻² L_A⁻¹ V y,
    L' = −½ [N log 2πσ² + 2 Σ log diag L_A + σ⁻² yᵀy − ‖c‖² + σ⁻² (N σ_f² − ‖V‖_F²)].

Unlike AFS, K_uf depends on θ, so nothing is precomputable: every evaluation costs O(N M² + M³)
time and O(N M) memory. Z is chosen once (k-means or greedy variance selection, which is
pivoted Cholesky) and held fixed while L-BFGS learns the kernel and noise; optionally the
selection is repeated under the learnt θ and the fit restarted (Burt et al. 2020b alternation).
"""

from __future__ import annotations

import math
import time
import warnings
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import scipy.linalg
from scipy.cluster.vq import kmeans2

from geogp.core.kernels import Kernel, make_kernel
from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.core.validation import (
    as_points,
    as_targets,
    check_positive,
    check_same_length,
    warn_if_lonlat,
)
from geogp.exceptions import InputError
from geogp.models.base import Prediction, Standardizer, check_columns, check_fitted

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = [
    "JITTER",
    "sgpr_bound",
    "sgpr_trace_term",
    "SGPRPosterior",
    "sgpr_posterior",
    "sgpr_predict",
    "greedy_variance",
    "kmeans_inducing",
    "SGPRRegressor",
]

JITTER = 1e-8  # K_uu + JITTER·σ_f²·I (docs/bound.md, baselines)
_PREDICT_CHUNK = 8192


def _kvar0(kernel: Kernel):
    return kernel.variance_at_zero


def _factors(kernel: Kernel, Z, X, jitter):
    """(L_u, V): L_u = chol(k(Z, Z) + jitter·σ_f² I) (M, M), V = L_u⁻¹ k(Z, X) (M, N)."""
    M = Z.shape[0]
    Kuu = kernel(Z, Z) + jitter * _kvar0(kernel) * jnp.eye(M)
    Lu = jnp.linalg.cholesky(Kuu)
    V = jsl.solve_triangular(Lu, kernel(Z, X), lower=True)  # V = L_u⁻¹ K_uf
    return Lu, V


def sgpr_trace_term(kernel: Kernel, Z: ArrayLike, X: ArrayLike,
                    jitter: float = JITTER) -> jax.Array:
    """t = tr(K_ff − Q_ff) = N σ_f² − ‖V‖_F²: the "is M large enough?" diagnostic (docs/bound.md).

    Args:
        kernel: a stationary kernel; Z: (M, D) inducing inputs; X: (N, D) inputs.

    Returns:
        Scalar t ≥ 0 (up to rounding). Cost O(N M² + M³).
    """
    _, V = _factors(kernel, Z, X, jitter)
    return X.shape[0] * _kvar0(kernel) - jnp.sum(V**2)


def sgpr_bound(kernel: Kernel, noise: ArrayLike, Z: ArrayLike, X: ArrayLike, y: ArrayLike,
               jitter: float = JITTER) -> jax.Array:
    """The collapsed Titsias bound L' for inducing inputs Z (docs/bound.md (baselines), stable
    form).

    Args:
        kernel: a stationary kernel (k(x, x) = k(0) for all x).
        noise: σ², scalar.
        Z: (M, D) inducing inputs; X: (N, D) inputs; y: (N,) targets.
        jitter: K_uu gets jitter·σ_f² on its diagonal.

    Returns:
        Scalar bound L' ≤ log N(y | 0, K + σ²I). Pure JAX: differentiable in the kernel
        parameters, σ² and Z.

    Cost: O(N M² + M³) time, O(N M) memory, on every evaluation (nothing is precomputable).
    """
    N = y.shape[0]
    M = Z.shape[0]
    _, V = _factors(kernel, Z, X, jitter)
    A = jnp.eye(M) + (V @ V.T) / noise  # A = I + σ⁻² V Vᵀ ⪰ I
    LA = jnp.linalg.cholesky(A)
    c = jsl.solve_triangular(LA, V @ y, lower=True) / noise  # c = σ⁻² L_A⁻¹ V y
    logdet_a = 2.0 * jnp.sum(jnp.log(jnp.diagonal(LA)))
    trace = N * _kvar0(kernel) - jnp.sum(V**2)  # tr K_ff − tr Q_ff
    return -0.5 * (N * jnp.log(2 * math.pi * noise) + logdet_a + (y @ y) / noise - c @ c
                   + trace / noise)


_bound_jit = jax.jit(sgpr_bound, static_argnums=5)
_factors_jit = jax.jit(_factors, static_argnums=3)
_trace_jit = jax.jit(sgpr_trace_term, static_argnums=3)


class SGPRPosterior(NamedTuple):
    """Optimal q(u) for fixed Z and θ, ready for prediction (docs/bound.md with
    ψ* = L_u⁻¹ k(Z, x*)).

    Attributes:
        Z: (M, D) inducing inputs; chol_uu: (M, M) L_u; chol_a: (M, M) L_A; c: (M,) c.
        noise: σ²; kvar0: k(0).
    """

    Z: np.ndarray
    chol_uu: np.ndarray
    chol_a: np.ndarray
    c: np.ndarray
    noise: float
    kvar0: float


def sgpr_posterior(kernel: Kernel, noise: ArrayLike, Z: ArrayLike, X: ArrayLike, y: ArrayLike,
                   jitter: float = JITTER) -> SGPRPosterior:
    """Factors of the optimal q(u) at fixed (θ, Z). Cost O(N M² + M³), memory O(N M)."""
    noise = float(noise)
    Lu, V = _factors_jit(kernel, jnp.asarray(Z), jnp.asarray(X), float(jitter))
    Lu, V = np.asarray(Lu), np.asarray(V)
    LA = np.linalg.cholesky(np.eye(V.shape[0]) + (V @ V.T) / noise)
    c = scipy.linalg.solve_triangular(LA, V @ np.asarray(y), lower=True) / noise
    return SGPRPosterior(np.asarray(Z), Lu, LA, c, noise, float(_kvar0(kernel)))


def sgpr_predict(kernel: Kernel, post: SGPRPosterior,
                 Xs: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and latent variance of f at Xs (N*, D).

    mean = a*ᵀ c, var_f = k(0) − ‖ψ*‖² + ‖a*‖² with ψ* = L_u⁻¹ k(Z, x*), a* = L_A⁻¹ ψ*
    (docs/bound.md, eq. 2.34). Returns two (N*,) arrays. Cost O(N* M²), in chunks of 8192 points.
    """
    Xs = np.asarray(Xs, dtype=np.float64)
    mean = np.empty(Xs.shape[0])
    var = np.empty(Xs.shape[0])
    for start in range(0, Xs.shape[0], _PREDICT_CHUNK):
        sl = slice(start, start + _PREDICT_CHUNK)
        Kus = np.asarray(kernel(post.Z, Xs[sl]))
        psi = scipy.linalg.solve_triangular(post.chol_uu, Kus, lower=True)
        a = scipy.linalg.solve_triangular(post.chol_a, psi, lower=True)
        mean[sl] = a.T @ post.c
        var[sl] = post.kvar0 - np.sum(psi**2, axis=0) + np.sum(a**2, axis=0)
    return mean, np.maximum(var, 0.0)


# ---------------------------------------------------------------------- inducing inputs
def greedy_variance(kernel: Kernel, X: ArrayLike, n_inducing: int,
                    tol: float = 1e-12) -> np.ndarray:
    """Greedy variance selection of inducing inputs = the pivots of a pivoted Cholesky of K_ff.

    Repeatedly picks n = argmax_n [k(x_n, x_n) − Σ_m V_mn²], the residual variance of f(x_n)
    given the points already chosen (GVI report, Algorithm 1; Burt et al. 2020b; docs/bound.md
    (baselines)). Ties go to the lowest index. Stops early, with a warning, when every residual
    variance is ≤ tol·k(0) (e.g. duplicated inputs): further points would make K_uu singular.

    Args:
        kernel: a stationary kernel (diag K_ff = k(0)).
        X: (N, D) candidate inputs.
        n_inducing: M, the number of points wanted (1 ≤ M ≤ N).
        tol: relative residual variance below which the selection stops.

    Returns:
        (M',) int64 indices into X, in order of selection, M' ≤ M.

    Cost: O(N M²) time (one kernel column and one (m × N) product per step), O(N M) memory.
    """
    X = np.asarray(X, dtype=np.float64)
    N = X.shape[0]
    if not 1 <= int(n_inducing) <= N:
        raise InputError(f"n_inducing must be between 1 and the number of points ({N}); "
                         f"got {n_inducing}.")
    M = int(n_inducing)
    kv = float(_kvar0(kernel))
    d = np.full(N, kv)  # residual variances diag(K − VᵀV)
    V = np.zeros((M, N))
    column = jax.jit(lambda k, A, b: k(A, b[None, :])[:, 0])
    Xj = jnp.asarray(X)
    picked = []
    for m in range(M):
        i = int(np.argmax(d))  # first maximum: ties → lowest index
        if d[i] <= tol * kv:
            warnings.warn(
                f"greedy variance selection stopped at {m} of {M} inducing points: every "
                f"remaining point has residual variance ≤ {tol:g}·k(0) (duplicated inputs?).",
                stacklevel=2,
            )
            break
        kcol = np.asarray(column(kernel, Xj, X[i]))
        v = (kcol - V[:m].T @ V[:m, i]) / math.sqrt(d[i])  # new row of V = L_u⁻¹ K_uf
        V[m] = v
        d -= v**2
        d[i] = -np.inf  # chosen: never again, whatever the rounding
        picked.append(i)
    return np.asarray(picked, dtype=np.int64)


def kmeans_inducing(X: ArrayLike, n_inducing: int, seed: int = 0, n_iter: int = 20) -> np.ndarray:
    """Inducing inputs at k-means centroids (scipy ``kmeans2``, k-means++ start, seeded).

    Args:
        X: (N, D) inputs; n_inducing: M ≤ N; seed: random seed; n_iter: Lloyd iterations.

    Returns:
        (M, D) centroids. An empty cluster keeps its previous centroid and scipy warns
        (``missing='warn'``); k-means++ seeding makes this rare.

    Cost: O(N M D) per iteration.
    """
    X = np.asarray(X, dtype=np.float64)
    if not 1 <= int(n_inducing) <= X.shape[0]:
        raise InputError(f"n_inducing must be between 1 and the number of points "
                         f"({X.shape[0]}); got {n_inducing}.")
    centroids, _ = kmeans2(X, int(n_inducing), iter=int(n_iter), minit="++",
                           seed=np.random.default_rng(seed))
    return centroids


# ---------------------------------------------------------------------- estimator
class SGPRRegressor:
    """Collapsed SGPR (Titsias 2009) with fixed inducing inputs, the docs/bound.md baseline.

    Args:
        kernel: name (``"se"``, ``"matern32"``, ``"matern12+matern32"``...) or a Kernel whose
            parameters are the initial values (standardised units when ``standardize``).
        n_inducing: number of inducing inputs M (capped at N).
        init: ``"greedy"`` (greedy variance = pivoted Cholesky under the initial θ) or
            ``"kmeans"`` (k-means centroids, seeded by ``seed``).
        rounds: Burt et al. (2020b) alternation: after each L-BFGS fit, reselect Z greedily
            under the learnt θ and refit, at most ``rounds`` fits in all; stops when Z no longer
            changes, and keeps the round with the highest bound (reselecting by variance does
            not always raise it). ``rounds=1`` (default) is a single fit with Z fixed.
        lengthscale, variance, noise: initial values (docs/model.md defaults ℓ = 0.2,
            σ_f² = σ² = 1).
        standardize: z-score inputs and targets with training statistics (docs/model.md).
        optimize: learn θ (else keep the initial values). maxiter: L-BFGS iterations per round.
        seed: k-means seed. jitter: K_uu + jitter·σ_f²·I.

    Attributes:
        Z_: (M, D) inducing inputs (standardised units); inducing_index_: their row indices in
        X for greedy selection (None for k-means); kernel_, noise_ (standardised units);
        report_: the kept round's :class:`~geogp.core.optimize.FitReport`; reports_: all rounds;
        select_time_s_: seconds spent choosing Z; scaler_; posterior_.

    Example:
        >>> import numpy as np
        >>> X = np.linspace(0, 1, 40)[:, None]; y = np.sin(6 * X[:, 0])
        >>> m = SGPRRegressor("se", n_inducing=10, noise=0.01).fit(X, y)
        >>> float(np.abs(m.predict(X).mean - y).max()) < 0.05
        True
    """

    def __init__(self, kernel: str | Kernel = "se", *, n_inducing: int = 100, init: str = "greedy",
                 rounds: int = 1, lengthscale: ArrayLike = 0.2,
                 variance: float = 1.0, noise: float = 1.0, standardize: bool = True,
                 optimize: bool = True, maxiter: int = 300, seed: int = 0,
                 jitter: float = JITTER) -> None:
        self.kernel = kernel
        self.n_inducing = n_inducing
        self.init = init
        self.rounds = rounds
        self.lengthscale = lengthscale
        self.variance = variance
        self.noise = noise
        self.standardize = standardize
        self.optimize = optimize
        self.maxiter = maxiter
        self.seed = seed
        self.jitter = jitter

    def _check_args(self, N):
        if self.init not in ("greedy", "kmeans"):
            raise InputError(f"init must be 'greedy' or 'kmeans'; got {self.init!r}.")
        if int(self.n_inducing) < 1:
            raise InputError(f"n_inducing must be ≥ 1; got {self.n_inducing}.")
        if int(self.rounds) < 1:
            raise InputError(f"rounds must be ≥ 1; got {self.rounds}.")
        check_positive(self.noise, "noise")
        if N <= 3:
            raise InputError(f"only {N} observation(s); SGPR needs more points than parameters.")

    def _select(self, kernel, Xs):
        M = min(int(self.n_inducing), Xs.shape[0])
        if self.init == "kmeans" and not hasattr(self, "Z_"):
            return kmeans_inducing(Xs, M, self.seed), None
        idx = greedy_variance(kernel, Xs, M)
        return Xs[idx], idx

    def fit(self, X: ArrayLike, y: ArrayLike) -> SGPRRegressor:
        """Learn θ (kernel and noise) on X (N, D), y (N,) with Z fixed per round. Returns self.

        Cost: selection O(N M²) per round (greedy) or O(N M D · iterations) (k-means), then
        O(N M² + M³) per L-BFGS evaluation; memory O(N M).
        """
        X_in, X = X, as_points(X)
        warn_if_lonlat(X_in, X, "SGPRRegressor")
        y = as_targets(y)
        check_same_length(X, y)
        self._check_args(X.shape[0])
        self.scaler_ = (Standardizer.from_data(X, y) if self.standardize
                        else Standardizer.identity(X.shape[1]))
        Xs, ys = self.scaler_.x(X), self.scaler_.y(y)
        kern = make_kernel(self.kernel, X.shape[1], self.lengthscale, self.variance)
        params = {"kernel": kern, "noise": jnp.asarray(float(self.noise))}
        n = X.shape[0]
        jitter = float(self.jitter)

        def loss(p, X_, y_, Z_):
            return -sgpr_bound(p["kernel"], p["noise"], Z_, X_, y_, jitter) / n

        for attr in ("Z_", "inducing_index_"):
            self.__dict__.pop(attr, None)
        self.reports_ = []
        self.select_time_s_ = 0.0
        Xj, yj = jnp.asarray(Xs), jnp.asarray(ys)
        best = None  # (objective, params, Z, idx): the round with the highest bound
        for _ in range(int(self.rounds)):
            t0 = time.perf_counter()
            Z, idx = self._select(params["kernel"], Xs)
            self.select_time_s_ += time.perf_counter() - t0
            if (idx is not None and getattr(self, "inducing_index_", None) is not None
                    and np.array_equal(np.sort(idx), np.sort(self.inducing_index_))):
                break  # Z has stabilised
            self.Z_, self.inducing_index_ = Z, idx
            if self.optimize:
                params, report = minimize_lbfgs(loss, params, args=(Xj, yj, jnp.asarray(Z)),
                                                maxiter=self.maxiter)
                report.objective *= n
                report.history = [h * n for h in report.history]
            else:
                value = -float(_bound_jit(params["kernel"], params["noise"], jnp.asarray(Z),
                                          Xj, yj, jitter))
                report = FitReport(value, 0, 1, True, "not optimised", 0.0)
            self.reports_.append(report)
            if best is None or report.objective < best[0]:
                best = (report.objective, params, Z, idx)
            if not self.optimize:
                break
        # reselection does not always raise the bound: keep the best round
        _, params, self.Z_, self.inducing_index_ = best
        self.report_ = min(self.reports_, key=lambda r: r.objective)
        self.kernel_, self.noise_ = params["kernel"], float(params["noise"])
        self.X_train_, self.y_train_ = Xj, yj
        self.posterior_ = sgpr_posterior(self.kernel_, self.noise_, self.Z_, Xj, yj, jitter)
        return self

    def bound(self) -> float:
        """The collapsed bound L' at the fitted θ and Z (standardised scale)."""
        return float(_bound_jit(self.kernel_, self.noise_, jnp.asarray(self.Z_), self.X_train_,
                                self.y_train_, float(self.jitter)))

    def trace_diagnostic(self) -> float:
        """t = tr(K_ff − Q_ff) at the fitted θ and Z (0 would mean Z captures f exactly)."""
        return float(_trace_jit(self.kernel_, jnp.asarray(self.Z_), self.X_train_,
                                float(self.jitter)))

    @property
    def inducing_inputs_(self) -> np.ndarray:
        """(M, D) inducing inputs in the user's units."""
        return self.Z_ * self.scaler_.x_scale + self.scaler_.x_mean

    @property
    def noise_variance_(self) -> float:
        return self.noise_ * self.scaler_.y_scale**2

    def predict(self, X: ArrayLike) -> Prediction:
        """Predictive mean and latent/observed variances at X (N*, D) on the original scale.

        Cost O(N* M²).
        """
        check_fitted(self, "posterior_")
        X = as_points(X, "X (prediction points)")
        check_columns(X, self.Z_.shape[1])
        mean, var = sgpr_predict(self.kernel_, self.posterior_, self.scaler_.x(X))
        return self.scaler_.unscale(mean, var, self.noise_)
