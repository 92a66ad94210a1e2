"""Plain-numpy closed forms of the docs/model.md (kernels) kernels, written independently of
geogp.core.kernels.

Only the covariance functions are given here. The spectral densities are *not* copied: the
tests obtain them by transforming these functions numerically (``transforms.py``).
"""

from __future__ import annotations

import numpy as np

NAMES = ("se", "matern12", "matern32", "matern52")


def profile(name: str, rho):
    """κ(ρ) with κ(0) = 1 for the scaled distance ρ = ‖r/ℓ‖ ≥ 0."""
    rho = np.asarray(rho, dtype=np.float64)
    if name == "se":
        return np.exp(-0.5 * rho**2)
    if name == "matern12":
        return np.exp(-rho)
    if name == "matern32":
        s = np.sqrt(3.0) * rho
        return (1.0 + s) * np.exp(-s)
    if name == "matern52":
        s = np.sqrt(5.0) * rho
        return (1.0 + s + s**2 / 3.0) * np.exp(-s)
    raise KeyError(name)


def k(name: str, r, lengthscale, variance):
    """k(r) for difference vectors r of shape (..., D); ARD lengthscale broadcast to (D,)."""
    r = np.asarray(r, dtype=np.float64)
    ell = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (r.shape[-1],))
    rho = np.sqrt(np.sum((r / ell) ** 2, axis=-1))
    return variance * profile(name, rho)


def gram(name: str, X1, X2, lengthscale, variance):
    """k(X1, X2) of shape (N1, N2) for X1 (N1, D), X2 (N2, D)."""
    X1 = np.asarray(X1, dtype=np.float64)
    X2 = np.asarray(X2, dtype=np.float64)
    return k(name, X1[:, None, :] - X2[None, :, :], lengthscale, variance)
