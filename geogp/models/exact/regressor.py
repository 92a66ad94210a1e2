"""Exact Gaussian-process regression: the reference every approximation is tested against.

Model y = f(x) + ε, f ~ GP(0, k), ε ~ N(0, σ²) (docs/model.md, docs/bound.md (baselines)). Functions
are pure JAX in the kernel and noise; :class:`ExactGP` is the scikit-learn-style estimator around
them.

Cost: O(N³) time and O(N²) memory per evaluation; practical up to N ≈ 2·10⁴.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from geogp.core.kernels import Kernel, make_kernel
from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.core.validation import (
    as_points,
    as_targets,
    check_positive,
    check_same_length,
    warn_if_lonlat,
)
from geogp.exceptions import MemoryEstimateError
from geogp.models.base import Prediction, Standardizer, check_columns, check_fitted

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["log_marginal_likelihood", "predict", "ExactGP"]


def _chol(kernel: Kernel, noise, X):
    K = kernel(X, X)
    n = X.shape[0]
    return jnp.linalg.cholesky(K + noise * jnp.eye(n))


def log_marginal_likelihood(kernel: Kernel, noise: ArrayLike, X: ArrayLike,
                            y: ArrayLike) -> jax.Array:
    """log N(y | 0, K + σ²I) (docs/bound.md (baselines), eq. 1.35).

    Args:
        kernel: the covariance function.
        noise: σ², scalar.
        X: (N, D) inputs; y: (N,) targets.

    Returns:
        Scalar log marginal likelihood. Cost O(N³).
    """
    n = X.shape[0]
    return _gaussian_lml(kernel(X, X) + noise * jnp.eye(n), y)


@jax.custom_vjp
def _gaussian_lml(C, y):
    """log N(y | 0, C) with the analytic gradient ∂/∂C = ½(ααᵀ − C⁻¹), α = C⁻¹y.

    Differentiating through the Cholesky factorisation costs several times the factorisation;
    this rule costs one more O(N³) solve. ``y`` is treated as data (zero cotangent).
    """
    return _lml_fwd(C, y)[0]


def _lml_fwd(C, y):
    L = jnp.linalg.cholesky(C)
    w = jsl.solve_triangular(L, y, lower=True)  # L w = y
    n = y.shape[0]
    value = -0.5 * (w @ w) - jnp.sum(jnp.log(jnp.diag(L))) - 0.5 * n * math.log(2 * math.pi)
    return value, (L, w, y)


def _lml_bwd(res, g):
    L, w, y = res
    alpha = jsl.solve_triangular(L.T, w, lower=False)
    Cinv = jsl.cho_solve((L, True), jnp.eye(L.shape[0]))
    return g * 0.5 * (jnp.outer(alpha, alpha) - Cinv), jnp.zeros_like(y)


_gaussian_lml.defvjp(_lml_fwd, _lml_bwd)


def predict(kernel: Kernel, noise: ArrayLike, X: ArrayLike, y: ArrayLike, Xs: ArrayLike,
            full_cov: bool = False) -> tuple[jax.Array, jax.Array]:
    """Posterior of f at Xs: mean (N*,) and latent variance (N*,) or covariance (N*, N*).

    mean = K*ᵀ(K + σ²I)⁻¹y, var = k** − K*ᵀ(K + σ²I)⁻¹K*. Cost O(N³ + N² N*).
    """
    L = _chol(kernel, noise, X)
    Ks = kernel(X, Xs)
    alpha = jsl.cho_solve((L, True), y)
    V = jsl.solve_triangular(L, Ks, lower=True)
    mean = Ks.T @ alpha
    if full_cov:
        return mean, kernel(Xs, Xs) - V.T @ V
    kss = kernel.variance_at_zero * jnp.ones(Xs.shape[0])
    return mean, kss - jnp.sum(V**2, axis=0)


def _negative_lml_per_point(params, X, y):
    """−log N(y | 0, K + σ²I) / N (module level, so minimize_lbfgs reuses its compilation)."""
    return -log_marginal_likelihood(params["kernel"], params["noise"], X, y) / y.shape[0]


class ExactGP:
    """Exact GP regression with hyperparameters learnt by L-BFGS on the log marginal likelihood.

    Args:
        kernel: name (``"se"``, ``"matern32"``, ``"matern12+matern32"``...) or a Kernel, whose
            parameters are then the initial values (in standardised units if ``standardize``).
        lengthscale: initial lengthscale when ``kernel`` is a name (standardised units;
            thesis C.1.5 default 0.2, docs/model.md).
        variance: initial signal variance σ_f² when ``kernel`` is a name (default 1).
        noise: initial noise variance σ² (default 1).
        standardize: z-score inputs and targets with training statistics (docs/model.md).
        optimize: learn the hyperparameters (else keep the initial values).
        maxiter: L-BFGS iteration limit.
        max_bytes: refuse (before allocating) data whose N × N matrices (kernel, Cholesky
            factor, their gradients: about 6 copies) would need more memory than this.

    Attributes:
        kernel_: fitted kernel (standardised units); noise_: fitted σ² (standardised units).
        report_: :class:`geogp.core.optimize.FitReport`; scaler_: the :class:`Standardizer`.

    Example:
        >>> import numpy as np
        >>> X = np.linspace(0, 1, 30)[:, None]; y = np.sin(6 * X[:, 0])
        >>> gp = ExactGP(kernel="se", noise=0.01).fit(X, y)
        >>> float(np.abs(gp.predict(X).mean - y).max()) < 0.05
        True
    """

    def __init__(self, kernel: str | Kernel = "se", *, lengthscale: ArrayLike = 0.2,
                 variance: float = 1.0, noise: float = 1.0,
                 standardize: bool = True, optimize: bool = True, maxiter: int = 500,
                 max_bytes: float = 4 * 2**30) -> None:
        self.kernel = kernel
        self.lengthscale = lengthscale
        self.variance = variance
        self.noise = noise
        self.standardize = standardize
        self.optimize = optimize
        self.maxiter = maxiter
        self.max_bytes = max_bytes

    def fit(self, X: ArrayLike, y: ArrayLike) -> ExactGP:
        """Learn the hyperparameters on X (N, D), y (N,). Returns self."""
        X_in, X = X, as_points(X)
        warn_if_lonlat(X_in, X, "ExactGP")
        y = as_targets(y)
        check_same_length(X, y)
        needed = 6 * 8.0 * X.shape[0] ** 2
        if needed > self.max_bytes:
            raise MemoryEstimateError(
                f"the exact GP on {X.shape[0]} points (N × N kernel, factor and gradients)",
                needed, self.max_bytes, "Use AFSRegressor (any N), or raise "
                "max_bytes if the machine has the memory.")
        check_positive(self.noise, "noise")
        self.scaler_ = (Standardizer.from_data(X, y) if self.standardize
                        else Standardizer.identity(X.shape[1]))
        Xs, ys = jnp.asarray(self.scaler_.x(X)), jnp.asarray(self.scaler_.y(y))
        kern = make_kernel(self.kernel, X.shape[1], self.lengthscale, self.variance)
        params = {"kernel": kern, "noise": jnp.asarray(float(self.noise))}
        n = X.shape[0]

        loss = _negative_lml_per_point  # module level: compiled once per parameter layout

        if self.optimize:
            params, report = minimize_lbfgs(loss, params, args=(Xs, ys), maxiter=self.maxiter)
            report.objective *= n
            report.history = [h * n for h in report.history]
        else:
            report = FitReport(float(loss(params, Xs, ys)) * n, 0, 1, True, "not optimised", 0.0)
        self.kernel_, self.noise_ = params["kernel"], float(params["noise"])
        self.report_ = report
        self.X_train_, self.y_train_ = Xs, ys
        return self

    def log_marginal_likelihood(self) -> float:
        """LML of the training data at the fitted parameters, on the standardised scale."""
        return float(log_marginal_likelihood(self.kernel_, self.noise_, self.X_train_,
                                             self.y_train_))

    def predict(self, X: ArrayLike) -> Prediction:
        """Predictive mean and variances at X (N*, D), on the data's original scale."""
        check_fitted(self, "X_train_")
        X = as_points(X, "X (prediction points)")
        check_columns(X, self.X_train_.shape[1])
        mean, var = predict(self.kernel_, self.noise_, self.X_train_, self.y_train_,
                            jnp.asarray(self.scaler_.x(X)))
        return self.scaler_.unscale(np.asarray(mean), np.asarray(var), self.noise_)
