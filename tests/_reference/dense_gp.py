"""A plain-numpy dense Gaussian process: the closed-form reference for exact GP regression.

y = f + ε, f ~ N(0, K), ε ~ N(0, σ² I). Cholesky via numpy/scipy, no JAX.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg


def log_marginal_likelihood(K, y, noise) -> float:
    """log N(y | 0, K + σ² I) for K (N, N), y (N,)."""
    K = np.asarray(K, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    L = np.linalg.cholesky(K + noise * np.eye(n))
    a = scipy.linalg.solve_triangular(L, y, lower=True)
    return float(-0.5 * a @ a - np.log(np.diag(L)).sum() - 0.5 * n * np.log(2 * np.pi))


def predict(K, Ks, Kss, y, noise):
    """Posterior of f: mean (N*,) and covariance (N*, N*).

    Args:
        K: (N, N) train covariance; Ks: (N, N*) train-test covariance; Kss: (N*, N*).
    """
    n = K.shape[0]
    C = np.asarray(K) + noise * np.eye(n)
    cf = scipy.linalg.cho_factor(C, lower=True)
    mean = Ks.T @ scipy.linalg.cho_solve(cf, y)
    cov = Kss - Ks.T @ scipy.linalg.cho_solve(cf, Ks)
    return mean, cov


def sample(K, noise, rng):
    """One draw of y ~ N(0, K + σ² I) by Cholesky."""
    n = K.shape[0]
    L = np.linalg.cholesky(np.asarray(K) + noise * np.eye(n))
    return L @ rng.standard_normal(n)
