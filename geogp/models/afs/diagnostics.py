"""How good is an AFS approximation? The window rule, and the diagnostics of docs/afs.md
(aliasing and truncation).

Two errors separate the AFS objective L'' from the exact log marginal likelihood L:

- **Aliasing** (the window W). The odd lattice implies k̂(r) = Σ_j (−1)^{Σj} k(r − W∘j)
  (docs/afs.md, lattices; the full lattice has positive aliases at 2W). Two data points r
  apart along axis d (|r_d| ≤ W_xd) see the nearest alias at distance W_d − |r_d| ≥ W_d − W_xd,
  so the covariance of the data's farthest pair is off by about k((W_d − W_xd) e_d). With the
  thesis window W = W_x/0.95 that distance is 5 % of the data's extent: unless ℓ ≪ W_x,
  opposite edges are anti-correlated and the learnt lengthscales come out short (1-D SE,
  N = 150, ℓ = 0.3: 0.32 against the exact GP's 0.48, standardised units).
- **Truncation** (the bandwidth F_d = K_d/W_d). The features carry Σ_m λ_m of the prior
  variance k(0) at every point; the bound's trace term treats the rest as noise, which
  lengthens the learnt lengthscales (strongly for Matérn-1/2, whose spectrum decays slowly).

**Window rule** (:func:`alias_width`, :func:`balanced_width`). The nearest alias must be
W_xd + r_d away, r_d the distance at which the kernel along axis d falls to ``alias_tol``·k(0):
a few lengthscales (SE 3.0ℓ, Matérn-3/2 3.8ℓ, Matérn-1/2 4.6ℓ at tol = 0.01) rather than a
fixed multiple of W_x, so for ℓ ≪ W_x it is the thesis window and for long lengthscales it
widens only as much as the kernel needs (at most 3·W_x). At a fixed number of features a
wider window lowers the bandwidth, so the window stops widening where the alias error meets
the truncation error (both relative to k(0)): an alias error below the truncation buys nothing,
and without this balance a rough kernel with few features runs away (more truncation, longer
ℓ, wider window). :class:`~geogp.models.afs.AFSRegressor` fits on ``window_factor``/``margin``
first and refits on the window the learnt θ needs (statistics recomputed, θ continued) while
the alias error exceeds ``REFIT_FACTOR``·max(alias_tol, truncation), at most 3 times; kernel
sums, and fixed θ, start on the window their initial θ needs.

**Diagnostics** (:func:`diagnostics`, ``AFSRegressor.diagnostics_``), all dimensionless:

- ``alias``: max_d |k((T_d − W_xd) e_d)| / k(0), T_d = W_d (odd lattice) or 2W_d (full): the
  leading alias error on the covariance of the data's farthest pair, i.e. between the
  farthest data point and the alias of the nearest (the quantity the window rule controls).
  Warned above 0.05, with "widen the window", or "increase n_features" when the window is
  held back by the truncation.
- ``alias_self``: max_d |k(T_d e_d)| / k(0), the aliasing ratio of docs/afs.md (aliasing and
  truncation): the leading error of the implied variance k̂(0) − k(0), a point against its
  own alias. Reported, not warned: it is at most ``alias``, and understates the error
  between points far apart, which is what biases the fit.
- ``truncation``: 1 − Σ_m λ_m / k(0), the fraction of the prior variance the features miss.
  It equals t/(N k(0)), t the trace diagnostic, because φ(x)ᵀΛφ(x) = Σ_m λ_m at every x (the
  mask keeps every sign of every |z|); it includes the small alias part k(0) − k̂(0).
- ``truncation_to_noise``: truncation · k(0)/σ² = t/(Nσ²), the missed variance relative to the
  noise variance. The bias it causes in log ℓ scales with it (1-D Matérn-1/2, N = 150: 0.02
  gave ℓ 20% too long); warned above 0.01 ("increase n_features").
- ``spectral_edge``: max_d S(F_d e_d)/S(0) at the highest kept frequency along each axis
  (the thesis's truncation measure; NaN for kernels without S). Reported, not warned.
- ``lengthscale_ratio``: max over kernel parts and axes of ℓ_d / W_d; warned above 1/3
  (a learnt ℓ_d not ≪ W_d, thesis §3.2.8).
- ``part_share``: for a kernel sum, the smallest part's share of k(0) (1 for one kernel);
  warned below 10⁻³: the sum has collapsed to its other parts, which for a rough part is often
  the truncation (its variance is the one the features miss).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np

from geogp.exceptions import ApproximationWarning
from geogp.features.afs_dft import log_lambda

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel
    from geogp.features.fourier import FourierFeatures

__all__ = ["ALIAS_TOL", "ALIAS_WARN", "TRUNCATION_WARN", "LENGTHSCALE_WARN", "PART_WARN",
           "MAX_AUTO_FACTOR", "REFIT_FACTOR", "REFIT_GROWTH", "decay_distance", "alias_width",
           "alias_error", "truncation", "balanced_width", "diagnostics", "refit_reason",
           "warn_if_poor"]

ALIAS_TOL = 0.01  # default alias_tol of the window rule
ALIAS_WARN = 0.05  # warn when the farthest pair's alias error exceeds this
TRUNCATION_WARN = 0.01  # warn when the missed prior variance exceeds this fraction of σ²
LENGTHSCALE_WARN = 1 / 3  # warn when a learnt ℓ_d exceeds this fraction of W_d
PART_WARN = 1e-3  # warn when a part of a kernel sum keeps less than this share of σ_f²
MAX_AUTO_FACTOR = 3.0  # the automatic window never exceeds this multiple of W_x
REFIT_FACTOR = 2.0  # refit on a wider window when the learnt θ's alias exceeds this × the floor
REFIT_GROWTH = 1.25  # ... sized for lengthscales this much longer (a narrow window shrinks them)

_GRID = 2049  # distances tried per axis by decay_distance
_PERIOD = {"odd": 1.0, "full": 2.0}  # lattice period T_d / W_d: where the nearest alias sits


def _axis_profile(kernel, distances: np.ndarray, d: int, n_dims: int) -> np.ndarray:
    """|k(r e_d)| / k(0) at the distances r (any shape) along axis d."""
    r = np.zeros((*distances.shape, n_dims))
    r[..., d] = distances
    k0 = float(kernel.variance_at_zero)
    return np.abs(np.asarray(kernel.evaluate(jnp.asarray(r)))) / k0


def decay_distance(kernel: Kernel, tol: float, r_max: ArrayLike) -> np.ndarray:
    """(D,) smallest r_d ∈ [0, r_max_d] with |k(r e_d)| ≤ tol·k(0); r_max_d when none is.

    Evaluated on 2,049 distances per axis and rounded up to the next one (resolution
    r_max/2048), so the returned distance never undershoots. The kernels of geogp (SE, Matérn,
    their sums and products) decrease along each axis, so the first such distance is the one.
    """
    r_max = np.atleast_1d(np.asarray(r_max, dtype=np.float64))
    D = r_max.size
    out = np.empty(D)
    t = np.linspace(0.0, 1.0, _GRID)
    for d in range(D):
        r = t * r_max[d]
        below = np.flatnonzero(_axis_profile(kernel, r, d, D) <= tol)
        out[d] = r[below[0]] if below.size else r_max[d]
    return out


def alias_width(base: np.ndarray, extent: np.ndarray, kernel: Kernel, tol: float | None,
                growth: float = 1.0,
                lattice: str = "odd", max_factor: float = MAX_AUTO_FACTOR) -> np.ndarray:
    """The window rule: the smallest W_d ≥ base_d whose nearest alias, at T_d = W_d (odd
    lattice) or 2W_d (full lattice), is at least W_xd + growth·r_d away, r_d from
    :func:`decay_distance` at ``tol``; T_d − W_xd is capped at (max_factor − 1)·W_xd.
    ``tol=None`` keeps ``base``.

    ``growth`` > 1 allows for lengthscales that will grow when refitted on the wider window
    (all lengthscales ×g is the kernel k(r/g), whose decay distance is g·r_d).
    """
    base = np.asarray(base, dtype=np.float64)
    if tol is None:
        return base
    extent = np.asarray(extent, dtype=np.float64)
    reach = (max_factor - 1) * extent
    period = extent + growth * decay_distance(kernel, tol, reach / growth)
    return np.maximum(base, period / _PERIOD[lattice])


def alias_error(kernel: Kernel, width: np.ndarray, extent: np.ndarray, lattice: str = "odd",
                growth: float = 1.0) -> float:
    """max_d |k((T_d − W_xd) e_d)| / k(0) with T_d the lattice period (W_d odd, 2W_d full):
    the leading alias error on the covariance of the data's farthest pair. ``growth`` g
    evaluates it for all lengthscales ×g (the kernel k(r/g))."""
    period = _PERIOD[lattice] * np.asarray(width, dtype=np.float64)
    gap = np.maximum(period - np.asarray(extent), 0.0) / growth
    return float(max(_axis_profile(kernel, gap[d:d + 1], d, gap.size)[0]
                     for d in range(gap.size)))


def truncation(ff: FourierFeatures, kernel: Kernel) -> float:
    """1 − Σ_m λ_m / k(0): the share of the prior variance the features miss."""
    return 1.0 - float(jnp.sum(jnp.exp(log_lambda(ff, kernel)))) / float(kernel.variance_at_zero)


def balanced_width(base: np.ndarray, extent: np.ndarray, kernel: Kernel, tol: float | None,
                   features_at: Callable[[np.ndarray], FourierFeatures], growth: float = 1.0,
                   lattice: str = "odd") -> np.ndarray:
    """The window of the estimator: the narrowest W on the segment from ``base`` to
    :func:`alias_width` whose alias error is at most max(tol, truncation(W)).

    At a fixed number of features a wider window lowers the bandwidth, so the truncation
    error grows as the alias error falls; both are errors of the implied kernel relative to
    k(0), and an alias error below the truncation error buys nothing. (Without this balance a
    rough kernel with few features runs away: the wider window truncates more, truncation
    lengthens the learnt ℓ, the longer ℓ asks for a wider window.) ``features_at(W)`` gives
    the feature set on window W. Returns ``base`` when it already qualifies.
    """
    base = np.asarray(base, dtype=np.float64)
    if tol is None:
        return base
    target = alias_width(base, extent, kernel, tol, growth, lattice)

    def ok(width):
        floor = max(tol, truncation(features_at(width), kernel))
        return alias_error(kernel, width, extent, lattice, growth) <= floor

    if np.all(target <= base * (1 + 1e-12)) or ok(base):
        return base
    lo, hi = 0.0, 1.0  # ok(base + hi·(target − base)); target passes unless capped
    for _ in range(16):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(base + mid * (target - base)) else (mid, hi)
    return base + hi * (target - base)


def _parts(kernel) -> tuple:
    return tuple(getattr(kernel, "parts", (kernel,)))


def diagnostics(ff: FourierFeatures, kernel: Kernel, noise: float, extent: np.ndarray) -> dict:
    """The diagnostics of a feature set at hyperparameters (kernel, noise), data extent W_x.

    Cost O(M) (λ) plus a few kernel evaluations; no data access. See the module docstring for
    the definitions. Returns a dict of floats.
    """
    width = np.asarray(ff.width, dtype=np.float64)
    period = np.asarray(ff.period, dtype=np.float64)
    D = width.size
    k0 = float(kernel.variance_at_zero)
    missed = truncation(ff, kernel)
    if hasattr(kernel, "log_spectral_density"):
        top = ff.frequencies.max(axis=0)
        z = np.zeros((D + 1, D))
        z[np.arange(1, D + 1), np.arange(D)] = top
        logs = np.asarray(kernel.log_spectral_density(jnp.asarray(z)))
        edge = float(np.exp(np.max(logs[1:]) - logs[0]))
    else:
        edge = float("nan")
    # ℓ_d/W_d of every part of a sum (a factor of a product may be long harmlessly)
    ells = [np.broadcast_to(np.asarray(p.lengthscale, dtype=np.float64), (D,))
            for p in _parts(kernel) if hasattr(p, "lengthscale")
            and type(kernel).__name__ != "ProductKernel"]
    ratio = max((float(np.max(e / width)) for e in ells), default=float("nan"))
    parts = _parts(kernel)
    part_var = [float(getattr(p, "variance_at_zero", np.nan)) for p in parts]
    share = min(part_var) / sum(part_var) if len(parts) > 1 else 1.0
    return {
        "alias": alias_error(kernel, width, extent, ff.lattice),
        "alias_self": float(max(_axis_profile(kernel, period[d:d + 1], d, D)[0]
                                for d in range(D))),
        "truncation": missed,
        "truncation_to_noise": missed * k0 / float(noise),
        "spectral_edge": edge,
        "lengthscale_ratio": ratio,
        "part_share": float(share),
        "window_factor": float(np.max(width / np.maximum(extent, 1e-300))),
        "n_features": int(ff.n_features),
    }


def refit_reason(k: int, most: int, width: np.ndarray, new: np.ndarray, extent: np.ndarray) -> str:
    """Why AFS refits (the ``k``-th window refit of at most ``most``), in words: the window
    ``width`` aliases the learnt kernel; the statistics are recomputed on ``new``."""
    return (f"AFS refit {k} (of at most {most}): the learnt lengthscales alias on a window "
            f"{np.max(np.asarray(width) / extent):.3g}× the data's extent; new statistics on "
            f"{np.max(np.asarray(new) / extent):.3g}×, L-BFGS from where it stopped")


def warn_if_poor(diag: dict, stacklevel: int = 2) -> list:
    """One :class:`ApproximationWarning` listing every diagnostic above its threshold, with
    the numbers and the fix. Returns the list of problems (empty: no warning)."""
    problems = []
    if diag["alias"] > ALIAS_WARN:
        held = diag["alias"] <= REFIT_FACTOR * diag["truncation"]
        fix = ("Increase n_features: the window is held back by the truncation (wider, it "
               "would truncate more) and widens by itself with more features" if held else
               "Widen the window (alias_tol, window_factor or margin)")
        problems.append(
            f"aliasing: the window is {diag['window_factor']:.3g}× the data's extent, and the "
            f"kernel still correlates the data's farthest points with their alias at "
            f"{diag['alias']:.3g}·k(0) (> {ALIAS_WARN}); lengthscales are likely biased "
            f"downwards. {fix}")
    if diag["truncation_to_noise"] > TRUNCATION_WARN:
        problems.append(
            f"truncation: the {diag['n_features']} features miss {diag['truncation']:.3g} of the "
            f"prior variance, {diag['truncation_to_noise']:.3g} of the noise variance "
            f"(> {TRUNCATION_WARN}); lengthscales and noise are likely biased upwards. "
            "Increase n_features")
    if diag["lengthscale_ratio"] > LENGTHSCALE_WARN:
        problems.append(
            f"a learnt lengthscale is {diag['lengthscale_ratio']:.3g} of the window width "
            f"(> {LENGTHSCALE_WARN:.3g}, thesis §3.2.8): widen the window (alias_tol, "
            "window_factor or margin), or model the long range with a trend (mean=)")
    if diag.get("part_share", 1.0) < PART_WARN:
        problems.append(
            f"a part of the kernel sum carries only {diag['part_share']:.2g} of the signal "
            "variance: the sum has collapsed to its other part(s). A rough part (Matérn-1/2) "
            "vanishes when the features miss its variance: increase n_features, or drop it")
    if problems:
        warnings.warn("AFS approximation: " + "; ".join(problems) + ".", ApproximationWarning,
                      stacklevel=stacklevel + 1)
    return problems
