"""Stationary kernels with their spectral densities (docs/model.md, kernels).

Every kernel is an immutable JAX pytree whose leaves are its (constrained, positive) parameters:
``lengthscale`` (shape (D,) for ARD, or a scalar shared by all dimensions) and ``variance`` (σ_f²).
A kernel gives

- ``k(r)`` for difference vectors r of shape (..., D) via :meth:`StationaryKernel.evaluate`;
- the Gram matrix ``k(X1, X2)`` of shape (N1, N2) via ``kernel(X1, X2)``;
- the spectral density ``S(ξ) = ∫ k(r) exp(-2πi ξ·r) dr`` (ξ in cycles per input unit) via
  :meth:`StationaryKernel.spectral_density`, so that ``∫ S = k(0) = σ_f²``.

Sums of kernels (``k1 + k2``) are kernels too: the spectral density of a sum is the sum of the
spectral densities, so the Fourier features support them at no extra cost.

Example:
    >>> import numpy as np, geogp
    >>> k = geogp.Matern32(lengthscale=[0.5, 2.0], variance=1.5)
    >>> float(k.evaluate(np.zeros(2)))
    1.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    from jax.typing import ArrayLike

__all__ = [
    "StationaryKernel",
    "SquaredExponential",
    "Matern12",
    "Matern32",
    "Matern52",
    "SumKernel",
    "ProductKernel",
    "KERNELS",
    "make_kernel",
]


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _safe_norm(r2):
    """sqrt with a finite gradient at 0 (the Matérn profiles are evaluated at ρ = 0 on
    diagonals)."""
    pos = r2 > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, r2, 1.0)), 0.0)


def _as_points(X):
    """(N, D) view of X; a vector (N,) is N one-dimensional points, a scalar one point."""
    X = jnp.asarray(X)
    return X[:, None] if X.ndim == 1 else jnp.atleast_2d(X)


class Kernel:
    """Base class: anything with ``evaluate(r)``, ``spectral_density(xi)`` and
    ``variance_at_zero``."""

    def __call__(self, X1: ArrayLike, X2: ArrayLike) -> jax.Array:
        """Gram matrix k(X1, X2) of shape (N1, N2) for X1 (N1, D), X2 (N2, D). Cost O(N1 N2 D).

        A vector of shape (N,) is read as N points in one dimension, shape (N, 1).
        """
        X1 = _as_points(X1)
        X2 = _as_points(X2)
        return self.evaluate(X1[:, None, :] - X2[None, :, :])

    def scaled(self, factor: float) -> Kernel:
        """The same kernel times ``factor`` > 0: k'(r) = factor · k(r), its spectral density
        likewise (a tempered predictive: every variance of a model grows by one factor)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be scaled.")

    @staticmethod
    def _check_factor(factor: float) -> float:
        if isinstance(factor, bool) or not (np.isfinite(factor) and factor > 0):
            raise InputError(f"a kernel's scale factor must be finite and > 0; got {factor!r}.")
        return float(factor)

    def __add__(self, other: Kernel) -> SumKernel:
        if not isinstance(other, Kernel):
            return NotImplemented
        left = self.parts if isinstance(self, SumKernel) else (self,)
        right = other.parts if isinstance(other, SumKernel) else (other,)
        return SumKernel(left + right)


@jax.tree_util.register_pytree_node_class
class StationaryKernel(Kernel):
    """A stationary ARD kernel k(r) = σ_f² κ(ρ), ρ = ‖r / ℓ‖ (docs/model.md, kernels).

    Args:
        lengthscale: positive, scalar or shape (D,) (one per input dimension, ARD).
        variance: positive scalar σ_f² = k(0).
    """

    name = "stationary"

    def __init__(self, lengthscale: ArrayLike = 1.0, variance: ArrayLike = 1.0) -> None:
        if _is_concrete(lengthscale) and _is_concrete(variance):
            ell = np.asarray(lengthscale, dtype=np.float64)
            var = np.asarray(variance, dtype=np.float64)
            if ell.ndim > 1 or ell.size == 0:
                raise InputError(
                    f"lengthscale must be a scalar or a vector (D,); got shape {ell.shape}.")
            if var.ndim != 0:
                raise InputError(f"variance must be a scalar; got shape {var.shape}.")
            for nm, v in (("lengthscale", ell), ("variance", var)):
                if not np.all(np.isfinite(v)) or np.any(v <= 0):
                    raise InputError(
                        f"{type(self).__name__}: {nm} must be finite and > 0; got {v.tolist()}. "
                        "Hyperparameters are positive; pass e.g. lengthscale=0.2."
                    )
        self.lengthscale = jnp.asarray(lengthscale, dtype=jnp.float64)
        self.variance = jnp.asarray(variance, dtype=jnp.float64)

    # pytree protocol: leaves are the parameters, no validation on unflatten (tracers pass through)
    def tree_flatten(self) -> tuple[tuple[jax.Array, jax.Array], None]:
        return (self.lengthscale, self.variance), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple) -> StationaryKernel:
        obj = object.__new__(cls)
        obj.lengthscale, obj.variance = children
        return obj

    def __repr__(self) -> str:
        ell = np.round(np.asarray(self.lengthscale), 6).tolist()
        return f"{type(self).__name__}(lengthscale={ell}, variance={float(self.variance):.6g})"

    @property
    def variance_at_zero(self) -> jax.Array:
        """k(0) = σ_f²."""
        return self.variance

    def scaled(self, factor: float) -> StationaryKernel:
        """See :meth:`Kernel.scaled`: σ_f² times ``factor``."""
        return type(self).tree_unflatten(None, (self.lengthscale,
                                                self.variance * self._check_factor(factor)))

    def _ell(self, d: int):
        return jnp.broadcast_to(self.lengthscale, (d,))

    def profile(self, rho: ArrayLike) -> jax.Array:
        """κ(ρ) with κ(0) = 1, for the scaled distance ρ ≥ 0 (any shape)."""
        raise NotImplementedError

    def evaluate(self, r: ArrayLike) -> jax.Array:
        """k(r) for difference vectors r of shape (..., D); returns shape (...)."""
        r = jnp.asarray(r)
        ell = self._ell(r.shape[-1])
        rho2 = jnp.sum((r / ell) ** 2, axis=-1)
        return self.variance * self.profile_sq(rho2)

    def profile_sq(self, rho2: ArrayLike) -> jax.Array:
        """κ as a function of ρ² (overridden by SE, which needs no square root)."""
        return self.profile(_safe_norm(rho2))

    def spectral_density(self, xi: ArrayLike) -> jax.Array:
        """S(ξ) for frequencies ξ of shape (..., D) (cycles per unit); returns shape (...)."""
        raise NotImplementedError


@jax.tree_util.register_pytree_node_class
class SquaredExponential(StationaryKernel):
    r"""Squared exponential: k = σ_f² exp(−ρ²/2); S(ξ) = σ_f² (2π)^{D/2} ∏ℓ_d exp(−2π² Σ ℓ_d² ξ_d²).

    .. math:: k(r) = \sigma_f^2 e^{-\rho^2/2} \quad (\text{docs/model.md (kernels)})
    """

    name = "se"

    def profile(self, rho: ArrayLike) -> jax.Array:
        return jnp.exp(-0.5 * rho**2)

    def profile_sq(self, rho2: ArrayLike) -> jax.Array:
        return jnp.exp(-0.5 * rho2)

    def spectral_density(self, xi: ArrayLike) -> jax.Array:
        xi = jnp.asarray(xi)
        d = xi.shape[-1]
        ell = self._ell(d)
        q = jnp.sum((ell * xi) ** 2, axis=-1)
        return self.variance * (2 * jnp.pi) ** (d / 2) * jnp.prod(ell) * jnp.exp(-2 * jnp.pi**2 * q)

    def log_spectral_density(self, xi: ArrayLike) -> jax.Array:
        """log S(ξ), finite where S underflows (used to form λ^{1/2} stably)."""
        xi = jnp.asarray(xi)
        d = xi.shape[-1]
        ell = self._ell(d)
        q = jnp.sum((ell * xi) ** 2, axis=-1)
        return (
            jnp.log(self.variance) + 0.5 * d * jnp.log(2 * jnp.pi) + jnp.sum(jnp.log(ell))
            - 2 * jnp.pi**2 * q
        )


class _Matern(StationaryKernel):
    """Matérn-ν: S(ξ) = σ_f² ∏ℓ_d c_{ν,D} (2ν + 4π² q(ξ))^{−(ν + D/2)} (docs/model.md, kernels)."""

    nu: float = 0.5

    @classmethod
    def log_constant(cls, d: int) -> float:
        """log c_{ν,D} = log[2^D π^{D/2} Γ(ν + D/2) (2ν)^ν / Γ(ν)]."""
        nu = cls.nu
        return (
            d * math.log(2) + 0.5 * d * math.log(math.pi) + math.lgamma(nu + d / 2)
            + nu * math.log(2 * nu) - math.lgamma(nu)
        )

    def log_spectral_density(self, xi: ArrayLike) -> jax.Array:
        xi = jnp.asarray(xi)
        d = xi.shape[-1]
        ell = self._ell(d)
        q = jnp.sum((ell * xi) ** 2, axis=-1)
        return (
            jnp.log(self.variance) + jnp.sum(jnp.log(ell)) + self.log_constant(d)
            - (self.nu + d / 2) * jnp.log(2 * self.nu + 4 * jnp.pi**2 * q)
        )

    def spectral_density(self, xi: ArrayLike) -> jax.Array:
        return jnp.exp(self.log_spectral_density(xi))


@jax.tree_util.register_pytree_node_class
class Matern12(_Matern):
    """Matérn-1/2 (exponential): k = σ_f² exp(−ρ)."""

    name = "matern12"
    nu = 0.5

    def profile(self, rho: ArrayLike) -> jax.Array:
        return jnp.exp(-rho)


@jax.tree_util.register_pytree_node_class
class Matern32(_Matern):
    """Matérn-3/2: k = σ_f² (1 + √3ρ) exp(−√3ρ)."""

    name = "matern32"
    nu = 1.5

    def profile(self, rho: ArrayLike) -> jax.Array:
        s = math.sqrt(3.0) * rho
        return (1 + s) * jnp.exp(-s)


@jax.tree_util.register_pytree_node_class
class Matern52(_Matern):
    """Matérn-5/2: k = σ_f² (1 + √5ρ + 5ρ²/3) exp(−√5ρ)."""

    name = "matern52"
    nu = 2.5

    def profile(self, rho: ArrayLike) -> jax.Array:
        s = math.sqrt(5.0) * rho
        return (1 + s + s**2 / 3) * jnp.exp(-s)


class _CompositeKernel(Kernel):
    """A kernel made of ``parts``; the parts are the pytree children."""

    parts: tuple

    def tree_flatten(self) -> tuple[tuple[Kernel, ...], None]:
        return self.parts, None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple) -> _CompositeKernel:
        obj = object.__new__(cls)
        obj.parts = tuple(children)
        return obj


@jax.tree_util.register_pytree_node_class
class SumKernel(_CompositeKernel):
    """k = Σ_i k_i; S = Σ_i S_i. E.g. a short-range plus a long-range Matérn."""

    name = "sum"

    def __init__(self, parts: Sequence[StationaryKernel]) -> None:
        parts = tuple(parts)
        if not parts or not all(isinstance(p, StationaryKernel) for p in parts):
            raise InputError("SumKernel needs one or more stationary kernels.")
        self.parts = parts

    def __repr__(self) -> str:
        return " + ".join(repr(p) for p in self.parts)

    @property
    def variance_at_zero(self) -> jax.Array:
        return sum(p.variance for p in self.parts)

    def scaled(self, factor: float) -> SumKernel:
        """See :meth:`Kernel.scaled`: every part's σ_f² times ``factor``."""
        return SumKernel(tuple(p.scaled(factor) for p in self.parts))

    def evaluate(self, r: ArrayLike) -> jax.Array:
        return sum(p.evaluate(r) for p in self.parts)

    def spectral_density(self, xi: ArrayLike) -> jax.Array:
        return sum(p.spectral_density(xi) for p in self.parts)

    def log_spectral_density(self, xi: ArrayLike) -> jax.Array:
        logs = jnp.stack([p.log_spectral_density(xi) for p in self.parts])
        return jax.scipy.special.logsumexp(logs, axis=0)


KERNELS = {
    "se": SquaredExponential,
    "rbf": SquaredExponential,
    "squared_exponential": SquaredExponential,
    "matern12": Matern12,
    "exponential": Matern12,
    "matern32": Matern32,
    "matern52": Matern52,
}


def make_kernel(spec: str | Kernel, n_dims: int, lengthscale: ArrayLike = 0.2,
                variance: float = 1.0, *, spread: float = 4.0, centred: bool = False) -> Kernel:
    """Build a kernel from a name such as ``"matern32"`` or ``"matern12+matern32"``.

    Args:
        spec: a :class:`Kernel` (returned unchanged) or a name; ``+`` joins a sum. Names:
            ``se`` (``rbf``), ``matern12`` (``exponential``), ``matern32``, ``matern52``.
        n_dims: input dimension D; lengthscales are broadcast to shape (D,).
        lengthscale: initial lengthscale(s). For a sum, the i-th part gets
            ``lengthscale * spread**i`` (short range first, then longer), so the parts start
            at separated scales and cannot start as copies of each other; with
            ``centred=True`` the scales are centred on ``lengthscale`` instead:
            ``lengthscale * spread**(i - (P - 1)/2)`` for P parts (e.g. ℓ/2 and 2ℓ for
            spread 4), as when ``lengthscale`` comes from a single-kernel pilot fit.
        variance: initial total variance, split evenly across the parts of a sum.
        spread: ratio of the initial lengthscales of successive parts (> 1).

    Returns:
        The kernel.
    """
    if isinstance(spec, Kernel):
        return spec
    if not isinstance(spec, str):
        raise InputError(f"kernel must be a name like 'matern32' or a Kernel; got {spec!r}.")
    names = [s.strip().lower() for s in spec.split("+")]
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        raise InputError(
            f"unknown kernel name(s) {unknown}; choose from {sorted(set(KERNELS))}, joined by '+'."
        )
    ell = np.asarray(lengthscale, dtype=np.float64)
    if ell.ndim > 1 or ell.size not in (1, n_dims):
        raise InputError(
            f"lengthscale must be a scalar or have one value per input dimension (D={n_dims}); "
            f"got shape {ell.shape}."
        )
    ell = np.broadcast_to(ell.reshape(-1), (n_dims,))
    if not spread > 1:
        raise InputError(f"spread must be > 1 (parts start at distinct scales); got {spread!r}.")
    shift = (len(names) - 1) / 2 if centred else 0.0
    parts = [
        KERNELS[n](lengthscale=ell * float(spread) ** (i - shift),
                   variance=variance / len(names))
        for i, n in enumerate(names)
    ]
    return parts[0] if len(parts) == 1 else SumKernel(parts)



@jax.tree_util.register_pytree_node_class
class ProductKernel(_CompositeKernel):
    """k = ∏_i k_i on the same inputs, e.g. SE × Matérn-5/2 (docs/afs.md, AFS-DFT).

    Its spectral density is the convolution of the factors' and has no closed form, so this
    kernel has no ``spectral_density``: AFS uses the DFT of its samples instead
    (:mod:`geogp.features.afs_dft`). k(0) = ∏_i σ_{f,i}²; the factor variances are redundant
    as parameters (only their product matters).
    """

    name = "product"

    def __init__(self, parts: Sequence[Kernel]) -> None:
        parts = tuple(parts)
        if len(parts) < 2 or not all(isinstance(p, Kernel) for p in parts):
            raise InputError("ProductKernel needs two or more kernels.")
        self.parts = parts

    def __repr__(self) -> str:
        return " * ".join(f"({p!r})" for p in self.parts)

    @property
    def variance_at_zero(self) -> jax.Array:
        out = self.parts[0].variance_at_zero
        for p in self.parts[1:]:
            out = out * p.variance_at_zero
        return out

    def scaled(self, factor: float) -> ProductKernel:
        """See :meth:`Kernel.scaled`: the first factor's variance times ``factor``."""
        return ProductKernel((self.parts[0].scaled(factor), *self.parts[1:]))

    def evaluate(self, r: ArrayLike) -> jax.Array:
        """k(r) = ∏_i k_i(r) for difference vectors r of shape (..., D); returns shape (...)."""
        out = self.parts[0].evaluate(r)
        for p in self.parts[1:]:
            out = out * p.evaluate(r)
        return out
