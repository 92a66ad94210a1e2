"""The SVGP's variational objective as pure functions of pytrees (docs/svgp.md).

Whitened weights v = Λ^{-1/2}u ~ N(0, I), q(v) = N(m, S), S = LLᵀ (L stored raw: its strict
lower part and the log of its diagonal, :func:`q_chol`, :func:`L_raw_from`); with
ψ(x) = λ^{1/2} ⊙ φ(x)

    q(f(x)) = N(ψᵀm + b,  k(0) − ψᵀψ + ψᵀSψ)          (:func:`marginals`)
    ELBO    = Σ_n E_q[log p(y_n | f_n)] − KL(q(v) ‖ N(0, I))   (:func:`elbo`, :func:`kl_whitened`)

the data term of a minibatch scaled by N/B. :func:`gaussian_optimal_q` is the optimum over q for
a Gaussian likelihood (the collapsed posterior). :class:`~geogp.models.svgp.SVGPRegressor`
optimises :func:`negative_elbo_loss`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel
    from geogp.models.svgp.likelihoods import Likelihood

__all__ = ["q_chol", "L_raw_from", "log_lambda", "kl_whitened", "marginals", "elbo",
           "gaussian_optimal_q", "negative_elbo_loss"]


def q_chol(L_raw: ArrayLike) -> jax.Array:
    """Lower-triangular L of S = LLᵀ from its raw form (strict lower part, log of the diagonal)."""
    return jnp.tril(L_raw, -1) + jnp.diag(jnp.exp(jnp.diagonal(L_raw)))


def log_lambda(kernel: Kernel, freqs: ArrayLike, log_norm: ArrayLike) -> jax.Array:
    """log λ_m = log S(|z_m|) − log ∏T_d (kernels with a spectral density)."""
    return kernel.log_spectral_density(freqs) - log_norm


def kl_whitened(m: ArrayLike, L: ArrayLike) -> jax.Array:
    """KL(N(m, LLᵀ) ‖ N(0, I)) = ½ (tr S + mᵀm − M − log|S|)."""
    return 0.5 * (jnp.sum(L**2) + m @ m - m.shape[0]
                  - 2.0 * jnp.sum(jnp.log(jnp.abs(jnp.diagonal(L)))))


def marginals(Psi: ArrayLike, m: ArrayLike, L: ArrayLike, kvar0: ArrayLike,
              b: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
    """Mean and variance of q(f) at the rows of Ψ = Φᵀ diag λ^{1/2} (B, M)."""
    mu = Psi @ m + b
    var = kvar0 - jnp.sum(Psi**2, axis=1) + jnp.sum((Psi @ L) ** 2, axis=1)
    return mu, var


def elbo(params: dict, Phi: ArrayLike, y: ArrayLike, offset: ArrayLike, n_total: int,
         freqs: ArrayLike, log_norm: ArrayLike, lik: Likelihood) -> jax.Array:
    """The ELBO with the data term of the batch (Φᵀ (B, M), y, offset) scaled by N/B."""
    kern = params["kernel"]
    Psi = Phi * jnp.exp(0.5 * log_lambda(kern, freqs, log_norm))
    L = q_chol(params["q"]["L"])
    mu, var = marginals(Psi, params["q"]["m"], L, kern.variance_at_zero,
                        params.get("mean", 0.0))
    ell = lik.expected_log_lik(y, mu, var, params.get("lik", {}), offset)
    return n_total / y.shape[0] * jnp.sum(ell) - kl_whitened(params["q"]["m"], L)


def gaussian_optimal_q(Psi: ArrayLike, y: ArrayLike, noise: float,
                       b: ArrayLike = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """The optimal q(v) for a Gaussian likelihood (docs/bound.md, eq. 2.30, whitened):
    S = A⁻¹, m = σ⁻² A⁻¹Ψᵀ(y − b), A = I + σ⁻²ΨᵀΨ. Returns (m, L) with S = LLᵀ."""
    Psi = np.asarray(Psi)
    A = np.eye(Psi.shape[1]) + Psi.T @ Psi / noise
    C = np.linalg.cholesky(A)
    m = np.linalg.solve(A, Psi.T @ (np.asarray(y) - b)) / noise
    Cinv = np.linalg.solve(C, np.eye(C.shape[0]))  # A⁻¹ = C⁻ᵀC⁻¹ = (C⁻ᵀ)(C⁻ᵀ)ᵀ
    _Q, R = np.linalg.qr(Cinv)  # C⁻ᵀ = Rᵀ Qᵀ: L = Rᵀ with a positive diagonal
    L = (R * np.sign(np.diag(R))[:, None]).T
    return m, L


def L_raw_from(L: ArrayLike) -> np.ndarray:
    """Inverse of :func:`q_chol` (L with a positive diagonal)."""
    L = np.array(L)
    L[np.diag_indices_from(L)] = np.log(np.diag(L))
    return np.tril(L)


@functools.lru_cache(maxsize=32)
def negative_elbo_loss(lik: Likelihood) -> Callable[..., jax.Array]:
    """−ELBO/N on precomputed features (a module-level function per likelihood: jit cache)."""
    def loss(params, Phi, y, offset, n_total, freqs, log_norm):
        return -elbo(params, Phi, y, offset, n_total, freqs, log_norm, lik) / n_total
    return loss
