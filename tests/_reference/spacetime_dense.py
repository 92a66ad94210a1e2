"""The space-time model's dense covariances (tests only): the prior of f = m + a + g at every
(date, cell) of a stack on unit cells, and the universal-kriging posterior covariance, by
dense algebra from θ (:mod:`geogp.models.spacetime.gmrf`'s model, written out)."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from geogp.models.lattice.gmrf import laplacian

__all__ = ["dense_prior", "dense_posterior_covariance"]


def _matern(shape, log_range, log_sd) -> np.ndarray:
    """The α = 2 lattice field's covariance (unit cells): (c (κ² + L)²)⁻¹."""
    n = shape[0] * shape[1]
    k2 = 8.0 / math.exp(2 * log_range)
    op = (k2 * sp.eye(n) + laplacian(shape, (1.0, 1.0))).toarray()
    return np.linalg.inv(op @ op / (4 * math.pi * k2 * math.exp(2 * log_sd)))


def dense_prior(theta: dict, shape: tuple[int, int], times: np.ndarray) -> np.ndarray:
    """Cov f over every (date, cell), date-major: (T n, T n)."""
    n, t = shape[0] * shape[1], times.size
    lag = np.abs(times[:, None] - times[None, :])
    return (np.kron(np.ones((t, t)), _matern(shape, theta["log_range_mean"], theta["log_sd_mean"]))
            + np.kron(np.exp(-lag / math.exp(theta["log_tau"])),
                      _matern(shape, theta["log_range"], theta["log_sd"]))
            + np.kron(math.exp(2 * theta["log_sd_offset"])
                      * np.exp(-lag / math.exp(theta["log_tau_offset"])), np.ones((n, n))))


def dense_posterior_covariance(observed: np.ndarray, times: np.ndarray, theta: dict,
                               picked: np.ndarray) -> np.ndarray:
    """Universal-kriging (intercept) covariance of f at the flat date-major values ``picked``
    of a stack whose values are observed where ``observed`` (T, n_y, n_x) is True, at θ
    (standardised units)."""
    cov = dense_prior(theta, observed.shape[1:], np.asarray(times, dtype=np.float64))
    obs = np.flatnonzero(observed.reshape(-1))
    sigma = cov[np.ix_(obs, obs)] + math.exp(2 * theta["log_noise"]) * np.eye(obs.size)
    si = np.linalg.inv(sigma)
    k = cov[np.ix_(picked, obs)]
    r = 1.0 - k @ si @ np.ones((obs.size, 1))
    return (cov[np.ix_(picked, picked)] - k @ si @ k.T
            + r @ r.T / float(np.ones(obs.size) @ si @ np.ones(obs.size)))
