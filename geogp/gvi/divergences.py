"""Divergences D(q ‖ p) between Gaussians q = N(μ_q, Σ_q) and p = N(μ_p, Σ_p) (docs/gvi.md,
divergences): dense reference forms, and pGVI's projected forms summed over one-dimensional
marginals. With Δ = μ_q − μ_p and k the dimension:

* ``"kl"``: ½ [tr(Σ_p⁻¹Σ_q) + ΔᵀΣ_p⁻¹Δ − k + log|Σ_p| − log|Σ_q|];
* ``"wasserstein"``: the squared 2-Wasserstein distance (GWI),
  |Δ|² + tr Σ_q + tr Σ_p − 2 tr (Σ_p^{1/2} Σ_q Σ_p^{1/2})^{1/2};
* ``"bhattacharyya"``: ⅛ ΔᵀΣ̄⁻¹Δ + ½ log(|Σ̄| / √(|Σ_q||Σ_p|)), Σ̄ = (Σ_q + Σ_p)/2;
* ``"hellinger"``: the squared Hellinger distance 1 − ∫√(qp) = 1 − exp(−D_B), in [0, 1]
  (the MSc report's form has the sign of the exponent wrong);
* ``"renyi"``: Rényi's divergence of order α (≠ 1; α → 1 gives the KL):
  (α/2) ΔᵀΣ_α⁻¹Δ − [log|Σ_α| − (1 − α) log|Σ_q| − α log|Σ_p|] / (2(α − 1)),
  Σ_α = αΣ_p + (1 − α)Σ_q (positive definite);
* ``"sqdiff"``: the squared L2 distance of the densities, ∫(q − p)² =
  ∫q² + ∫p² − 2∫qp, with ∫N(x|a, A) N(x|b, B) dx = N(a | b, A + B).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from numpy.typing import ArrayLike

from geogp.exceptions import InputError

__all__ = ["DIVERGENCES", "divergence", "projected"]

DIVERGENCES = ("kl", "wasserstein", "bhattacharyya", "hellinger", "renyi", "sqdiff")


def _logdet(c):
    return 2.0 * jnp.sum(jnp.log(jnp.diag(jnp.linalg.cholesky(c))))


def _quad(c, d):
    chol = jnp.linalg.cholesky(c)
    z = jnp.linalg.solve(chol, d)
    return z @ z


def _gauss_overlap(d, c):
    """N(d | 0, c): ∫ N(x | a, A) N(x | b, B) dx with d = a − b, c = A + B."""
    k = d.shape[0]
    return jnp.exp(-0.5 * (_quad(c, d) + _logdet(c) + k * math.log(2 * math.pi)))


def _sqrt_psd(c):
    w, u = jnp.linalg.eigh(c)
    return (u * jnp.sqrt(jnp.clip(w, 0.0))) @ u.T


def _check_alpha(alpha: float) -> None:
    if not (isinstance(alpha, (int, float)) and alpha > 0 and alpha != 1):
        raise InputError(f"alpha must be positive and not 1 (α → 1 is the KL); got {alpha!r}.")


def divergence(kind: str, mean_q: ArrayLike, cov_q: ArrayLike, mean_p: ArrayLike,
               cov_p: ArrayLike, *, alpha: float = 0.5) -> jax.Array:
    """D(q ‖ p) for dense means (k,) and covariances (k, k); differentiable (JAX).

    Cost O(k³): a reference for small k and the building block of the projected forms."""
    mq, mp = jnp.atleast_1d(jnp.asarray(mean_q)), jnp.atleast_1d(jnp.asarray(mean_p))
    cq, cp = jnp.atleast_2d(jnp.asarray(cov_q)), jnp.atleast_2d(jnp.asarray(cov_p))
    d, k = mq - mp, mq.shape[0]
    if kind == "kl":
        chol = jnp.linalg.cholesky(cp)
        trace = jnp.sum(jnp.linalg.solve(chol, jnp.linalg.cholesky(cq)) ** 2)
        return 0.5 * (trace + _quad(cp, d) - k + _logdet(cp) - _logdet(cq))
    if kind == "wasserstein":
        root = _sqrt_psd(cp)
        cross = jnp.sum(jnp.sqrt(jnp.clip(jnp.linalg.eigvalsh(root @ cq @ root), 0.0)))
        return d @ d + jnp.trace(cq) + jnp.trace(cp) - 2.0 * cross
    if kind in ("bhattacharyya", "hellinger"):
        mid = 0.5 * (cq + cp)
        db = 0.125 * _quad(mid, d) + 0.5 * (_logdet(mid) - 0.5 * _logdet(cq) - 0.5 * _logdet(cp))
        return db if kind == "bhattacharyya" else 1.0 - jnp.exp(-db)
    if kind == "renyi":
        _check_alpha(alpha)
        mix = alpha * cp + (1 - alpha) * cq
        return (0.5 * alpha * _quad(mix, d) - (_logdet(mix) - (1 - alpha) * _logdet(cq)
                                                - alpha * _logdet(cp)) / (2 * (alpha - 1)))
    if kind == "sqdiff":
        zero = jnp.zeros(k)
        return (_gauss_overlap(zero, 2 * cq) + _gauss_overlap(zero, 2 * cp)
                - 2.0 * _gauss_overlap(d, cq + cp))
    raise InputError(f"divergence must be one of {DIVERGENCES}; got {kind!r}.")


def projected(kind: str, mean_q: ArrayLike, var_q: ArrayLike, mean_p: ArrayLike,
              var_p: ArrayLike, *, alpha: float = 0.5) -> jax.Array:
    """pGVI's projected divergence: Σ_i D(q_i ‖ p_i) over the one-dimensional marginals
    q_i = N(mean_q[i], var_q[i]), p_i = N(mean_p[i], var_p[i]); O(k), so it scales to every
    cell of a raster."""
    mq, vq = jnp.asarray(mean_q), jnp.asarray(var_q)
    mp, vp = jnp.asarray(mean_p), jnp.asarray(var_p)
    d = mq - mp
    if kind == "kl":
        return 0.5 * jnp.sum(vq / vp + d**2 / vp - 1.0 + jnp.log(vp / vq))
    if kind == "wasserstein":
        return jnp.sum(d**2 + (jnp.sqrt(vq) - jnp.sqrt(vp)) ** 2)
    if kind in ("bhattacharyya", "hellinger"):
        mid = 0.5 * (vq + vp)
        db = 0.125 * d**2 / mid + 0.5 * jnp.log(mid / jnp.sqrt(vq * vp))
        return jnp.sum(db if kind == "bhattacharyya" else 1.0 - jnp.exp(-db))
    if kind == "renyi":
        _check_alpha(alpha)
        mix = alpha * vp + (1 - alpha) * vq
        return jnp.sum(0.5 * alpha * d**2 / mix - (jnp.log(mix) - (1 - alpha) * jnp.log(vq)
                                                   - alpha * jnp.log(vp)) / (2 * (alpha - 1)))
    if kind == "sqdiff":
        return jnp.sum(1.0 / jnp.sqrt(4 * math.pi * vq) + 1.0 / jnp.sqrt(4 * math.pi * vp)
                       - 2.0 * jnp.exp(-0.5 * d**2 / (vq + vp))
                       / jnp.sqrt(2 * math.pi * (vq + vp)))
    raise InputError(f"divergence must be one of {DIVERGENCES}; got {kind!r}.")
