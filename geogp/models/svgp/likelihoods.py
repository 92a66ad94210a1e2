"""Likelihoods for the uncollapsed SVGP (docs/svgp.md): log p(y | f), expectations, predictives.

Each likelihood is an immutable, hashable object (it is closed over by jitted functions) with

- ``init_params(y)``: its own positive parameters (noise, scale, dof), a dict (may be empty);
- ``log_prob(y, f, params, offset)``: log p(y | f), broadcasting over f;
- ``expected_log_lik(y, mu, var, params, offset)``: E_{f~N(mu, var)}[log p(y | f)], analytic
  for Gaussian and Poisson, Gauss–Hermite quadrature (``GH_POINTS`` nodes) otherwise;
- ``predict(mu, var, params, offset)``: mean and variance of a new observation y*;
- ``check(y)``: validation of the observations (InputError with a clear message).

``offset`` is added to f (Poisson: log exposure); 0 elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
from numpy.polynomial.hermite_e import hermegauss

from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    import jax
    from numpy.typing import ArrayLike

__all__ = ["Gaussian", "Poisson", "Bernoulli", "StudentT", "make_likelihood", "gauss_hermite",
           "GH_POINTS", "LIKELIHOODS"]

GH_POINTS = 20


def gauss_hermite(n: int = GH_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for E_{z~N(0,1)}[g(z)] ≈ Σ_i w_i g(x_i) (probabilists' Hermite)."""
    x, w = hermegauss(n)
    return x, w / math.sqrt(2 * math.pi)


def _quadrature(fn, mu, var, n: int = GH_POINTS):
    """E_{f~N(mu, var)}[fn(f)] by Gauss–Hermite, fn elementwise; shapes of mu."""
    x, w = gauss_hermite(n)
    sd = jnp.sqrt(jnp.maximum(var, 0.0))
    f = mu[..., None] + sd[..., None] * jnp.asarray(x)
    return jnp.sum(fn(f) * jnp.asarray(w), axis=-1)


def _finite(y, name):
    y = np.asarray(y, dtype=np.float64)
    bad = ~np.isfinite(y)
    if bad.any():
        raise InputError(f"{name} contains {int(bad.sum())} NaN/inf value(s) (first at index "
                         f"{int(np.flatnonzero(bad)[0])}); drop missing observations first.")
    return y


@dataclass(frozen=True)
class Likelihood:
    name = "base"
    gh_points = GH_POINTS  # Gauss–Hermite nodes of the expectations that are not analytic

    def init_params(self, y: ArrayLike) -> dict:
        return {}

    def check(self, y: ArrayLike, name: str = "y") -> np.ndarray:
        return _finite(y, name)

    def log_prob(self, y: ArrayLike, f: ArrayLike, params: dict,
                 offset: ArrayLike = 0.0) -> jax.Array:
        raise NotImplementedError

    def expected_log_lik(self, y: ArrayLike, mu: ArrayLike, var: ArrayLike, params: dict,
                         offset: ArrayLike = 0.0) -> jax.Array:
        return _quadrature(lambda f: self.log_prob(y[..., None], f, params,
                                                   jnp.asarray(offset)[..., None]
                                                   if jnp.ndim(offset) else offset), mu, var,
                           self.gh_points)

    def predict(self, mu: ArrayLike, var: ArrayLike, params: dict,
                offset: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
        raise NotImplementedError

    @property
    def standardise(self) -> bool:
        """Whether y is z-scored before fitting (real-valued likelihoods)."""
        return False


@dataclass(frozen=True)
class Gaussian(Likelihood):
    """y = f + ε, ε ~ N(0, σ²), σ² learnt ("noise"). The expectation is analytic."""

    name = "gaussian"
    noise: float = 1.0

    def init_params(self, y: ArrayLike) -> dict:
        return {"noise": jnp.asarray(float(self.noise))}

    def log_prob(self, y: ArrayLike, f: ArrayLike, params: dict,
                 offset: ArrayLike = 0.0) -> jax.Array:
        s2 = params["noise"]
        return -0.5 * (jnp.log(2 * math.pi * s2) + (y - f - offset) ** 2 / s2)

    def expected_log_lik(self, y: ArrayLike, mu: ArrayLike, var: ArrayLike, params: dict,
                         offset: ArrayLike = 0.0) -> jax.Array:
        s2 = params["noise"]
        return -0.5 * (jnp.log(2 * math.pi * s2) + ((y - mu - offset) ** 2 + var) / s2)

    def predict(self, mu: ArrayLike, var: ArrayLike, params: dict,
                offset: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
        return mu + offset, var + params["noise"]

    @property
    def standardise(self) -> bool:
        return True


@dataclass(frozen=True)
class Poisson(Likelihood):
    """y ~ Poisson(exp(f + offset)), offset = log exposure. E[log p] is analytic:
    y(μ + o) − exp(μ + o + v/2) − log y!."""

    name = "poisson"

    def check(self, y: ArrayLike, name: str = "y") -> np.ndarray:
        y = _finite(y, name)
        if np.any(y < 0):
            raise InputError(f"{name}: the Poisson likelihood needs counts ≥ 0; got "
                             f"{int((y < 0).sum())} negative value(s) (minimum {y.min():g}).")
        frac = np.abs(y - np.round(y)) > 1e-9
        if np.any(frac):
            raise InputError(f"{name}: the Poisson likelihood needs integer counts; got "
                             f"{int(frac.sum())} non-integer value(s) (first "
                             f"{y[np.flatnonzero(frac)[0]]:g}). Round them, or use "
                             "likelihood='gaussian' or 'student_t' for real values.")
        return y

    def log_prob(self, y: ArrayLike, f: ArrayLike, params: dict,
                 offset: ArrayLike = 0.0) -> jax.Array:
        eta = f + offset
        return y * eta - jnp.exp(eta) - jss.gammaln(y + 1.0)

    def expected_log_lik(self, y: ArrayLike, mu: ArrayLike, var: ArrayLike, params: dict,
                         offset: ArrayLike = 0.0) -> jax.Array:
        eta = mu + offset
        return y * eta - jnp.exp(eta + 0.5 * var) - jss.gammaln(y + 1.0)

    def predict(self, mu: ArrayLike, var: ArrayLike, params: dict,
                offset: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
        """Mean and variance of the count y*: E[rate] and E[rate] + Var[rate] (log-normal)."""
        eta = mu + offset
        rate = jnp.exp(eta + 0.5 * var)
        var_rate = jnp.expm1(var) * jnp.exp(2 * eta + var)
        return rate, rate + var_rate


@dataclass(frozen=True)
class Bernoulli(Likelihood):
    """y ∈ {0, 1}, p(y = 1 | f) = Φ(f) (``link="probit"``, default) or 1/(1 + e^{−f})
    (``"logit"``). The probit predictive is closed-form: Φ(μ/√(1 + v))."""

    name = "bernoulli"
    link: str = "probit"

    def __post_init__(self):
        if self.link not in ("probit", "logit"):
            raise InputError(f"Bernoulli link must be 'probit' or 'logit'; got {self.link!r}.")

    def check(self, y: ArrayLike, name: str = "y") -> np.ndarray:
        y = _finite(y, name)
        bad = (y != 0) & (y != 1)
        if np.any(bad):
            raise InputError(f"{name}: the Bernoulli likelihood needs values in {{0, 1}}; got "
                             f"{int(bad.sum())} other value(s) (first "
                             f"{y[np.flatnonzero(bad)[0]]:g}).")
        return y

    def _log_p1(self, z):
        """log p(y = 1 | f = z)."""
        return jss.log_ndtr(z) if self.link == "probit" else -jnp.logaddexp(0.0, -z)

    def log_prob(self, y: ArrayLike, f: ArrayLike, params: dict,
                 offset: ArrayLike = 0.0) -> jax.Array:
        s = 2.0 * y - 1.0
        return self._log_p1(s * (f + offset))

    def predict(self, mu: ArrayLike, var: ArrayLike, params: dict,
                offset: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
        eta = mu + offset
        if self.link == "probit":
            p = jss.ndtr(eta / jnp.sqrt(1.0 + var))
        else:
            p = _quadrature(lambda f: jnp.exp(self._log_p1(f)), eta, var)
        return p, p * (1.0 - p)


@dataclass(frozen=True)
class StudentT(Likelihood):
    """y = f + scale·t_ν: heavy-tailed noise. ``scale`` learnt; ``dof`` fixed unless
    ``learn_dof`` (then kept > 2 so that the predictive variance exists)."""

    name = "student_t"
    # log(1 + z²/ν) is far from polynomial when the latent sd exceeds the scale: 20 nodes err
    # by ~1e-2 nats at sd/scale ≈ 3.5, 50 nodes by ~3e-4 (tests/models/test_svgp.py)
    gh_points = 50
    dof: float = 4.0
    scale: float = 0.5
    learn_dof: bool = False

    def __post_init__(self):
        if not self.dof > (2.0 if self.learn_dof else 0.0):
            raise InputError(f"student_t dof must be > 0 (> 2 when learnt); got {self.dof!r}.")

    def init_params(self, y: ArrayLike) -> dict:
        p = {"scale": jnp.asarray(float(self.scale))}
        if self.learn_dof:
            p["dof_excess"] = jnp.asarray(float(self.dof) - 2.0)
        return p

    def nu(self, params: dict) -> jax.Array | float:
        return params["dof_excess"] + 2.0 if self.learn_dof else self.dof

    def log_prob(self, y: ArrayLike, f: ArrayLike, params: dict,
                 offset: ArrayLike = 0.0) -> jax.Array:
        nu, s = self.nu(params), params["scale"]
        z2 = ((y - f - offset) / s) ** 2
        return (jss.gammaln((nu + 1) / 2) - jss.gammaln(nu / 2) - 0.5 * jnp.log(nu * math.pi)
                - jnp.log(s) - (nu + 1) / 2 * jnp.log1p(z2 / nu))

    def predict(self, mu: ArrayLike, var: ArrayLike, params: dict,
                offset: ArrayLike = 0.0) -> tuple[jax.Array, jax.Array]:
        nu, s = self.nu(params), params["scale"]
        noise = jnp.where(nu > 2, s**2 * nu / jnp.maximum(nu - 2, 1e-12), jnp.inf)
        return mu + offset, var + noise

    @property
    def standardise(self) -> bool:
        return True


LIKELIHOODS = {"gaussian": Gaussian, "poisson": Poisson, "bernoulli": Bernoulli,
               "student_t": StudentT}


def make_likelihood(spec: str | Likelihood) -> Likelihood:
    """A likelihood from a name (``"gaussian"``, ``"poisson"``, ``"bernoulli"``,
    ``"student_t"``) or an instance (returned unchanged)."""
    if isinstance(spec, Likelihood):
        return spec
    if not isinstance(spec, str) or spec.lower() not in LIKELIHOODS:
        raise InputError(f"likelihood must be one of {sorted(LIKELIHOODS)} or a Likelihood; "
                         f"got {spec!r}.")
    return LIKELIHOODS[spec.lower()]()
