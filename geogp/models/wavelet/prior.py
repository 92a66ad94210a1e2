"""Coefficient prior of the multiresolution (wavelet) covariance function (docs/wavelets.md).

In one dimension the covariance function is (thesis eq. 4.23, corrected)

    k(x, x′) = Σ_t α_t v_{ι,t}(x) v_{ι,t}(x′) + Σ_{j=ι}^{j_max} Σ_t β_{j,t} w_{j,t}(x) w_{j,t}(x′)

with α_t = ½ (4.24) and, writing C(a) = (2^{1+a} − 1)·2^{1+a}, e_a(j) = C(a) 2^{−(1+a)(j−ι+2)}
and g_q(x) = 2^{−((x − c_q)/s_q)²},

    Q = 0:  β_{j,t} = ½ e_{a_0}(j)                                                  (4.25)
    Q ≥ 1:  β_{j,t} = [e_{a_0}(j) + Σ_q b_q e_{a_q}(j) g_q(t 2^{−j})] / Z_{j,t}      (4.26)
            Z_{j,t} = 2 [1 + Σ_q b_q g_q(t 2^{−j})]                                 (4.27)

Σ_{j≥ι} e_a(j) = 1 (A.75), so α + Σ_j β_j = 1 for Q = 0. A larger decay a puts less weight on
fine levels, so a component adds fine-scale content near c_q when a_q < a_0 (the thesis's
§4.3.0.13 states the opposite inequality). In D dimensions the kernel is the
product of D such factors, each with its own parameters, times an overall amplitude σ_f²
(fixed at 1 by default, as in the thesis). The inducing-feature precisions are then
λ_m = σ_f² ∏_d β^{(d)}_{m_d}: the coefficients of the orthogonal basis functions (the RKHS inner
products ⟨f, φ_m⟩ have K_uu = diag(1/λ) for any scaling of φ_m, docs/wavelets.md).

**Normalisation** (docs/wavelets.md, normalisation). ``"amplitude"`` (default) uses the
unit-amplitude functions v(2^j x − t), w(2^j x − t), for which Haar gives
k(x, x) = 1 − ½·2^{−(1+a_0)(j_max−ι+1)}: a_0 controls the scale, not the variance, as §4.3.0.12
intends. ``"l2"`` uses the L²-normalised functions 2^{j/2}v(2^j x − t) of eqs. 4.19/4.21; since
the basis is the same up to scaling, it is implemented as λ_m → λ_m·2^{j_m} on the
unit-amplitude features.

Everything is computed in log space: C(a)·2^{−(1+a)(j−ι+2)} underflows for large a and j.
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
    from numpy.typing import ArrayLike

    from geogp.features.wavelet import WaveletBasis1D

__all__ = [
    "NORMALISATIONS",
    "LOCATIONS",
    "PARAMETER_NAMES",
    "init_params",
    "log_coefficients_1d",
    "log_coefficients",
    "log_precisions",
    "effective_lengthscale",
]

NORMALISATIONS = ("amplitude", "l2")
LOCATIONS = ("left", "centre")
PARAMETER_NAMES = ("decay", "component_decay", "component_weight", "component_centre",
                   "component_width", "noise", "amplitude")
_LOG2 = math.log(2.0)


def init_params(n_dims: int, n_components: int, *, decay: ArrayLike = 0.5,
                component_decay: ArrayLike = 0.5,
                component_weight: ArrayLike = 1.0, component_centre: ArrayLike | None = None,
                component_width: ArrayLike = 1.0,
                noise: float = 0.5, amplitude: float = 1.0) -> dict:
    """Initial (constrained) parameters; defaults are the thesis's (App. C.2.2).

    Args:
        n_dims: D, input dimensions.
        n_components: Q, localised components per dimension.
        decay: a_0 > 0 (scalar or (D,)).
        component_decay, component_weight, component_centre, component_width: a_q > 0,
            b_q ≥ 0, c_q, s_q > 0 (scalars, (Q,) or (D, Q)). Centres default to 0 for Q = 1 and
            evenly spaced in [−1, 1] for Q > 1 (identical centres would stay identical).
        noise: σ² > 0 (standardised units). amplitude: σ_f² > 0.

    Returns:
        dict with keys :data:`PARAMETER_NAMES`: ``decay`` (D,), ``component_*`` (D, Q),
        ``noise`` and ``amplitude`` scalars, all float64 JAX arrays.
    """
    d, q = int(n_dims), int(n_components)
    if q < 0:
        raise InputError(f"n_components must be a non-negative integer; got {n_components!r}.")
    if component_centre is None:
        component_centre = np.linspace(-1.0, 1.0, q) if q > 1 else np.zeros(q)

    def arr(value, shape, name, positive=True, allow_zero=False):
        try:
            a = np.broadcast_to(np.asarray(value, dtype=np.float64), shape).copy()
        except ValueError as err:
            raise InputError(
                f"{name} must broadcast to shape {shape}; got {np.shape(value)}.") from err
        bad = ~np.isfinite(a) | ((a < 0) if allow_zero else (a <= 0) if positive else False)
        if np.any(bad):
            need = "≥ 0" if allow_zero else "> 0" if positive else "finite"
            raise InputError(f"{name} must be finite and {need}; got {value!r}.")
        return jnp.asarray(a)

    return {
        "decay": arr(decay, (d,), "decay"),
        "component_decay": arr(component_decay, (d, q), "component_decay"),
        "component_weight": arr(component_weight, (d, q), "component_weight", allow_zero=True),
        "component_centre": arr(component_centre, (d, q), "component_centre", positive=False),
        "component_width": arr(component_width, (d, q), "component_width"),
        "noise": arr(noise, (), "noise"),
        "amplitude": arr(amplitude, (), "amplitude"),
    }


def _log_c(a):
    """log C(a) = log(2^{1+a} − 1) + (1 + a) log 2."""
    e = (1.0 + a) * _LOG2
    return jnp.log(jnp.expm1(e)) + e


def log_coefficients_1d(decay: ArrayLike, component_decay: ArrayLike, component_weight: ArrayLike,
                        component_centre: ArrayLike,
                        component_width: ArrayLike, kind: ArrayLike, level: ArrayLike,
                        shift: ArrayLike, iota: int) -> jax.Array:
    """log α_t (scaling functions) and log β_{j,t} (wavelets) of one dimension.

    Args:
        decay: a_0, scalar. component_decay, component_weight, component_centre,
            component_width: (Q,) a_q, b_q, c_q, s_q.
        kind: (M_d,) 0 for scaling functions, 1 for wavelets. level: (M_d,) j. shift: (M_d,) t
            (the bump location is t 2^{−j}).
        iota: canonical scale ι.

    Returns:
        (M_d,) log coefficients; thesis eqs. 4.24–4.27 as corrected in docs/wavelets.md
        (coefficients).

    Cost: O(M_d·Q).
    """
    level = jnp.asarray(level, dtype=jnp.float64)
    steps = (level - iota + 2.0) * _LOG2  # (j − ι + 2) log 2
    log_e0 = _log_c(decay) - (1.0 + decay) * steps  # log e_{a_0}(j)
    if component_decay.shape[0] == 0:
        log_beta = log_e0 - _LOG2  # (4.25)
    else:
        loc = jnp.asarray(shift, dtype=jnp.float64) * jnp.exp2(-level)  # t 2^{−j}
        log_g = -(((loc[:, None] - component_centre) / component_width) ** 2) * _LOG2
        log_eq = _log_c(component_decay) - (1.0 + component_decay) * steps[:, None]
        terms = jnp.concatenate([log_e0[:, None], log_eq + log_g], axis=1)
        weights = jnp.concatenate(
            [jnp.ones_like(log_e0)[:, None], jnp.broadcast_to(component_weight, log_g.shape)],
            axis=1)
        log_num = jax.nn.logsumexp(terms, axis=1, b=weights)  # log[e_0 + Σ_q b_q e_q g_q]
        log_z = _LOG2 + jnp.log1p(jnp.exp(log_g) @ component_weight)  # (4.27)
        log_beta = log_num - log_z  # (4.26)
    return jnp.where(jnp.asarray(kind) == 0, -_LOG2, log_beta)  # α_t = ½ (4.24)


def log_coefficients(params: dict, dims: Sequence[WaveletBasis1D], normalisation: str = "amplitude",
                     location: str = "left") -> tuple:
    """Per-dimension log coefficients log β^{(d)} of every 1-D basis function.

    Args:
        params: constrained parameters (see :func:`init_params`).
        dims: the basis's :class:`~geogp.features.wavelet.WaveletBasis1D` per dimension.
        normalisation: ``"amplitude"`` or ``"l2"`` (adds j log 2 to a function of level j).
        location: where a function sits for the bumps g_q: ``"left"``, t 2^{−j}, the left end
            of its support (thesis eq. 4.26, the default, kept for reproduction), or
            ``"centre"``, (t + (2p − 1)/2) 2^{−j}, the middle of its support.

    Returns:
        Tuple of D arrays of shape (M_d,).

    Cost: O(Σ_d M_d·Q).
    """
    out = []
    for d, b in enumerate(dims):
        shift = b.shift + (0.5 * b.table.support if location == "centre" else 0.0)
        log_b = log_coefficients_1d(
            params["decay"][d], params["component_decay"][d], params["component_weight"][d],
            params["component_centre"][d], params["component_width"][d],
            b.kind, b.level, shift, b.iota)
        if normalisation == "l2":
            log_b = log_b + _LOG2 * jnp.asarray(b.level, dtype=jnp.float64)
        out.append(log_b)
    return tuple(out)


def log_precisions(params: dict, dims: Sequence[WaveletBasis1D], index: ArrayLike,
                   normalisation: str = "amplitude",
                   location: str = "left") -> jax.Array:
    """log λ_m = log σ_f² + Σ_d log β^{(d)}_{m_d} for the features listed in ``index``.

    Args:
        params: constrained parameters (see :func:`init_params`).
        dims: the basis's :class:`~geogp.features.wavelet.WaveletBasis1D` per dimension.
        index: (D, K) per-dimension function indices m_d of K features.
        normalisation: ``"amplitude"`` or ``"l2"``. location: ``"left"`` or ``"centre"``.

    Returns:
        (K,) log precisions (= log prior variances of the basis coefficients).

    Cost: O(Σ_d M_d·Q + D·K).
    """
    coeffs = log_coefficients(params, dims, normalisation, location)
    out = jnp.log(params["amplitude"]) * jnp.ones(jnp.shape(index)[1])
    for d, log_b in enumerate(coeffs):
        out = out + log_b[index[d]]
    return out


def effective_lengthscale(params: dict, iota: int, X: ArrayLike) -> jax.Array:
    """Heuristic local lengthscale per dimension (thesis eqs. 4.33–4.36, docs/wavelets.md (effective
    lengthscale)).

    j′ = ι + ½ log₂e / (1 + a_0), j′_q = ι + ½ log₂e / (1 + a_q) and
    ℓ_eff(x) = [2^{−j′} + Σ_q b_q g_q(x) 2^{−j′_q}] / [1 + Σ_q b_q g_q(x)].

    It is where the coefficient tail over j has fallen by e^{−1/2}; it is qualitative only
    (the thesis rescales it for display, §4.4.1.4).

    Args:
        params: constrained parameters. iota: canonical scale ι.
        X: (N, D) points (same units as the basis, i.e. standardised).

    Returns:
        (N, D) effective lengthscales in those units.

    Cost: O(N·D·Q).
    """
    X = jnp.asarray(X, dtype=jnp.float64)
    half_log2e = 0.5 / _LOG2
    ell0 = jnp.exp2(-(iota + half_log2e / (1.0 + params["decay"])))  # (D,)
    ellq = jnp.exp2(-(iota + half_log2e / (1.0 + params["component_decay"])))  # (D, Q)
    g = jnp.exp2(-(((X[:, :, None] - params["component_centre"]) /
                    params["component_width"]) ** 2))  # (N, D, Q)
    bg = params["component_weight"] * g
    return (ell0 + jnp.sum(bg * ellq, axis=-1)) / (1.0 + jnp.sum(bg, axis=-1))
