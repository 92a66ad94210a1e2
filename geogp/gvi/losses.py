"""Expected losses E_q[ℓ(y, f)] of an observation y ~ N(f, σ²) under q(f) = N(m, v), per
observation, in closed form where one exists (docs/gvi.md, losses).

* ``"nll"``: −log N(y | f, σ²); its expectation plus KL(q ‖ p) is the negative ELBO.
* ``"beta"``: the β-divergence (density power) scoring rule of Basu et al. (1998), used for GVI
  by Knoblauch, Jewson & Damoulas (2022): ℓ_β(y, f) = −p(y|f)^β / β + ∫ p(z|f)^{1+β} dz /
  (1 + β). An outlier's p(y|f)^β vanishes, so its pull on q is bounded.
* ``"gamma"``: the γ-divergence scoring rule (Fujisawa & Eguchi 2008): ℓ_γ(y, f) =
  −(1 + γ)/γ · p(y|f)^γ / (∫ p(z|f)^{1+γ} dz)^{γ/(1+γ)}.
* ``"huber"``: Huber's loss of the standardised residual e = (y − f)/σ with threshold c,
  e²/2 inside, c|e| − c²/2 outside, plus log σ; under q, e ~ N((y − m)/σ, v/σ²), and the
  expectation is a sum of truncated-normal moments.

For Gaussian p(y|f), p(y|f)^a = (2πσ²)^{−a/2} exp(−a (y − f)²/(2σ²)) and
E_q exp(−a (y − f)²/(2σ²)) = √(σ²/(σ² + a v)) exp(−a (y − m)²/(2(σ² + a v))), so the β and γ
losses are closed forms in (m, v).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.stats import norm
from numpy.typing import ArrayLike

from geogp.exceptions import InputError

__all__ = ["LOSSES", "expected_loss"]

LOSSES = ("nll", "beta", "gamma", "huber")


def _power_moment(y, m, v, noise, a):
    """E_q p(y | f)^a for p(y | f) = N(y | f, σ²), q(f) = N(m, v)."""
    s = noise + a * v
    return ((2 * math.pi * noise) ** (-a / 2) * jnp.sqrt(noise / s)
            * jnp.exp(-a * (y - m) ** 2 / (2 * s)))


def expected_loss(kind: str, y: ArrayLike, m: ArrayLike, v: ArrayLike, noise: float | jax.Array,
                  *, beta: float = 0.2, gamma: float = 0.2, c: float = 1.345) -> jax.Array:
    """E_q[ℓ(y, f)] per observation (same shape as ``y``) for q(f) = N(m, v) and the noise
    variance ``noise`` (σ²); differentiable in ``m``, ``v`` and ``noise`` (JAX).

    Args:
        kind: one of :data:`LOSSES`.
        beta, gamma: the β- and γ-divergence's power (> 0; → 0 recovers the NLL's minimiser).
        c: Huber's threshold in noise sds.
    """
    y, m, v = jnp.asarray(y), jnp.asarray(m), jnp.asarray(v)
    if kind == "nll":
        return 0.5 * jnp.log(2 * math.pi * noise) + ((y - m) ** 2 + v) / (2 * noise)
    if kind == "beta":
        _positive(beta, "beta")
        integral = (2 * math.pi * noise) ** (-beta / 2) * (1 + beta) ** -0.5
        return -_power_moment(y, m, v, noise, beta) / beta + integral / (1 + beta)
    if kind == "gamma":
        _positive(gamma, "gamma")
        integral = (2 * math.pi * noise) ** (-gamma / 2) * (1 + gamma) ** -0.5
        return (-(1 + gamma) / gamma * _power_moment(y, m, v, noise, gamma)
                / integral ** (gamma / (1 + gamma)))
    if kind == "huber":
        _positive(c, "c")
        return _huber(y, m, v, noise, c) + 0.5 * jnp.log(noise)
    raise InputError(f"loss must be one of {LOSSES}; got {kind!r}.")


def _huber(y, m, v, noise, c):
    """E ρ_c(e) for e ~ N(μ, s²), μ = (y − m)/σ, s² = v/σ²: on [−c, c] the truncated second
    moment, outside it the truncated first moments of ±e."""
    mu, s = (y - m) / jnp.sqrt(noise), jnp.sqrt(v / noise)
    lo, hi = (-c - mu) / s, (c - mu) / s
    phi_lo, phi_hi = norm.pdf(lo), norm.pdf(hi)
    cdf_lo, cdf_hi = norm.cdf(lo), norm.cdf(hi)
    inside = cdf_hi - cdf_lo
    # e = μ + s z: E[z; α..β] = φ(α) − φ(β), E[z²; α..β] = P + αφ(α) − βφ(β)
    second = (mu**2 * inside + 2 * mu * s * (phi_lo - phi_hi)
              + s**2 * (inside + lo * phi_lo - hi * phi_hi))
    upper = mu * (1 - cdf_hi) + s * phi_hi  # E[e; e > c]
    lower = -(mu * cdf_lo - s * phi_lo)  # E[−e; e < −c]
    outside = 1.0 - inside
    return 0.5 * second + c * (upper + lower) - 0.5 * c**2 * outside


def _positive(value, name: str) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
        raise InputError(f"{name} must be a positive number; got {value!r}.")
