"""Collapsed (Titsias) bound and optimal posterior from precomputed statistics (docs/bound.md).

Everything here is a pure function of (log λ, σ², k(0),
:class:`~geogp.features.fourier_statistics.SufficientStats`): the data are not touched. With
A = I + σ⁻² Λ^{1/2} G Λ^{1/2} = L_A L_Aᵀ and c = σ⁻² L_A⁻¹ (λ^{1/2} ⊙ r), the bound is

    L = −½ [N log 2πσ² + 2 Σ log diag L_A + σ⁻² yᵀy − ‖c‖² + σ⁻² (N k(0) − Σ_m λ_m G_mm)]

(whitened, stable: A ⪰ I, K_uu = Λ⁻¹ is never formed). Per evaluation O(M³) (Cholesky) or O(M)
when G is diagonal (complete grid, Lemma 3.1, docs/afs.md (gridded data)).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import scipy.linalg as sla

from geogp.features.fourier_statistics import SufficientStats

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["collapsed_bound", "trace_term", "Posterior", "posterior"]


def trace_term(log_lam: jax.Array, kvar0: ArrayLike, stats: SufficientStats) -> jax.Array:
    """t = tr K_ff − Σ_m λ_m G_mm = N k(0) − Σ λ_m G_mm: the "is M large enough?" diagnostic.
    With weights, tr W(K_ff − Q_ff) = Σ_i w_i k(0) − Σ_m λ_m Σ_i w_i φ_m(x_i)², the same
    form with Σw for N and the weighted G.

    For exact inter-domain features t/(2σ²) ≤ E[L − L'] ≤ t/σ² (docs/bound.md, Theorem 2.10).
    """
    return stats.weight_total * kvar0 - jnp.sum(jnp.exp(log_lam) * stats.G_diag)


def collapsed_bound(log_lam: jax.Array, noise: ArrayLike, kvar0: ArrayLike,
                    stats: SufficientStats) -> jax.Array:
    """The collapsed bound L'' (docs/bound.md, whitened form; docs/afs.md (gridded data) when G is
    diagonal).

    Args:
        log_lam: (M,) log λ_m = log (K_uu⁻¹)_mm.
        noise: σ² (scalar); kvar0: k(0) of the true kernel (scalar).
        stats: the sufficient statistics; with weights w the noise is N(0, σ²/w_i) at each
            observation (:class:`~geogp.features.fourier_statistics.SufficientStats`).

    Returns:
        Scalar bound. Cost O(M³) (dense G) or O(M) (diagonal G); memory O(M²). The gradient of
        the dense case is analytic (:func:`_dense_parts`), about one extra triangular inverse.
    """
    N = stats.n
    if stats.diagonal:
        lam = jnp.exp(log_lam)
        kappa = 1.0 + stats.G * lam / noise  # eigenvalues of A
        logdet_a = jnp.sum(jnp.log(kappa))
        c2 = jnp.sum(lam * stats.r**2 / kappa) / noise**2
    else:
        logdet_a, c2 = _dense_parts(log_lam, noise, stats.G, stats.r)
    t = trace_term(log_lam, kvar0, stats)
    return -0.5 * (N * jnp.log(2 * math.pi * noise) - stats.log_weights + logdet_a
                   + stats.yy / noise - c2 + t / noise)


def _dense_parts_reference(log_lam, noise, G, r):
    """(log|A|, ‖c‖²) by plain autodiff-able JAX: the reference for :func:`_dense_parts`."""
    sl = jnp.exp(0.5 * log_lam)
    A = jnp.eye(r.shape[0]) + (sl[:, None] * G * sl[None, :]) / noise  # A = I + σ⁻²Λ½GΛ½
    L = jnp.linalg.cholesky(A)
    c = jsl.solve_triangular(L, sl * r, lower=True) / noise  # c = σ⁻² L⁻¹ Λ½ r
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L))), c @ c


@jax.custom_vjp
def _dense_parts(log_lam, noise, G, r):
    """(log|A|, ‖c‖²) with A = I + σ⁻²Λ½GΛ½, ‖c‖² = σ⁻⁴ vᵀA⁻¹v, v = λ½ ⊙ r.

    Analytic derivatives (G is a data constant: its cotangent is returned as zero, so G must
    never depend on parameters; r may, e.g. through a mean function):
        ∂log|A|/∂log λ_m = 1 − (A⁻¹)_mm,     ∂log|A|/∂σ² = −(M − tr A⁻¹)/σ²,
        ∂‖c‖²/∂log λ_m = σ⁻⁴ α_m²,          ∂‖c‖²/∂σ² = −σ⁻⁶ (vᵀα + αᵀα),
        ∂‖c‖²/∂r = 2σ⁻⁴ λ½ ⊙ α,             α = A⁻¹v.
    """
    return _dense_fwd(log_lam, noise, G, r)[0]


def _dense_fwd(log_lam, noise, G, r):
    sl = jnp.exp(0.5 * log_lam)
    A = jnp.eye(r.shape[0]) + (sl[:, None] * G * sl[None, :]) / noise
    L = jnp.linalg.cholesky(A)
    v = sl * r
    w = jsl.solve_triangular(L, v, lower=True)
    alpha = jsl.solve_triangular(L.T, w, lower=False)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))
    c2 = (w @ w) / noise**2
    return (logdet, c2), (L, v, alpha, noise, G, sl)


def _dense_bwd(res, cot):
    L, v, alpha, noise, G, sl = res
    g_logdet, g_c2 = cot
    Linv = jsl.solve_triangular(L, jnp.eye(L.shape[0]), lower=True)
    diag_ainv = jnp.sum(Linv**2, axis=0)  # (A⁻¹)_mm = Σ_k (L⁻¹)_km²
    M = v.shape[0]
    d_loglam = g_logdet * (1.0 - diag_ainv) + g_c2 * alpha**2 / noise**2
    d_noise = (g_logdet * (-(M - jnp.sum(diag_ainv)) / noise)
               + g_c2 * (-(v @ alpha + alpha @ alpha) / noise**3))
    d_r = g_c2 * 2.0 * sl * alpha / noise**2
    return d_loglam, d_noise, jnp.zeros_like(G), d_r


_dense_parts.defvjp(_dense_fwd, _dense_bwd)


class Posterior(NamedTuple):
    """Optimal q(u) in whitened form, ready for prediction (docs/bound.md, eq. 2.30).

    Attributes:
        sqrt_lam: (M,) λ^{1/2}.
        weights: (M,) w with mean(x) = φ(x)ᵀ w = σ⁻² φᵀ B⁻¹ r.
        quad: (M, M) Q = Λ^{1/2} A⁻¹ Λ^{1/2} − Λ, so var_f(x) = k(0) + φ(x)ᵀ Q φ(x); its
            diagonal (M,) when the statistics are diagonal.
        chol: (M, M) lower Cholesky factor of A, or (M,) diag of A when diagonal.
        noise: σ²; kvar0: k(0).
    """

    sqrt_lam: np.ndarray
    weights: np.ndarray
    quad: np.ndarray
    chol: np.ndarray
    noise: float
    kvar0: float


def posterior(log_lam: jax.Array, noise: ArrayLike, kvar0: ArrayLike,
              stats: SufficientStats) -> Posterior:
    """q(u) at fixed hyperparameters. Cost O(M³) once (A⁻¹ is formed for fast variance maps)."""
    log_lam = np.asarray(log_lam)
    noise = float(noise)
    sl = np.exp(0.5 * log_lam)
    lam = sl**2
    r = np.asarray(stats.r)
    if stats.diagonal:
        a = 1.0 + np.asarray(stats.G) * lam / noise
        weights = lam * r / (a * noise)
        quad = lam / a - lam  # diagonal Q as a vector: no M × M array on the O(M) route
        chol = np.sqrt(a)
    else:
        G = np.asarray(stats.G)
        A = np.eye(lam.size) + sl[:, None] * G * sl[None, :] / noise
        chol = np.linalg.cholesky(A)
        Ainv = sla.cho_solve((chol, True), np.eye(lam.size))
        weights = sl * (Ainv @ (sl * r)) / noise
        quad = sl[:, None] * Ainv * sl[None, :]
        quad[np.diag_indices_from(quad)] -= lam
        quad = 0.5 * (quad + quad.T)
    return Posterior(sl, weights, quad, chol, noise, float(kvar0))
