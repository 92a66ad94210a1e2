"""AFS-DFT: prior precisions λ from a DFT of kernel samples, for kernels without a closed-form S.

A product of kernels in the same dimension (e.g. SE × Matérn-5/2) has a spectral density that
is a convolution with no closed form (docs/afs.md (AFS-DFT), thesis §3.3). AFS-DFT replaces S(z_j)
by the corrected centred DFT of the kernel sampled on a grid that spans one period 2W_d:

    b_d = 2W_d / M_d,  M_d = 2J_d + 1,  r = m∘b,  m_d ∈ {−J_d..J_d},
    ŝ_j = (∏_d b_d) Σ_m k(m∘b) exp(−i2π Σ_d j_d m_d / M_d),     z_j = j/(2W)   (eq. 3.61),

evaluated as ifftshift → fftn → fftshift (real part, k is even) with ``jnp.fft``, so gradients
in θ flow through it. It is the full (2W)⁻¹ lattice only. Then λ_j = ŝ_j / ∏_d 2W_d.

Properties (tested, T11): the reconstruction (∏2W_d)⁻¹ Σ_j ŝ_j e^{i2π z_j·r} equals k exactly
at the sample points; ŝ → S(z) when W ≫ ℓ (SE). Truncating k to one period does not preserve
positive definiteness, so some ŝ_j may be ≤ 0: they are clipped to ε·max ŝ (default) or
dropped (λ = 0, which in the whitened bound is the same as removing the feature), and counted.

The kernel must be even in each coordinate separately (true of every ARD kernel in geogp and of
their products): the real features share one λ between the 2^D sign patterns of a frequency,
and λ is read at j = +|j|.

Cost: O(P log P) per evaluation with P = ∏_d M_d grid samples (P = M_full on the unmasked
full lattice), plus O(P·D) kernel evaluations; memory O(P·D).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from geogp.exceptions import InputError
from geogp.features.fourier import FourierFeatures

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel

__all__ = [
    "EPS",
    "DFTLambda",
    "sample_offsets",
    "dft_spectrum",
    "feature_bins",
    "dft_log_lambda",
    "log_lambda",
]

EPS = 1e-12  # clip floor ε·max ŝ (docs/afs.md, AFS-DFT)


class DFTLambda(NamedTuple):
    """Result of :func:`dft_log_lambda`.

    Attributes:
        log_lam: (M,) log λ_m per feature; −inf for a dropped feature (``nonpositive='drop'``).
        n_nonpositive: number of feature rows whose ŝ was clipped (ŝ < ε·max ŝ) or dropped
            (ŝ ≤ 0). A JAX integer (traceable).
        s_hat: (M_1, ..., M_D) the centred DFT ŝ, index j_d + J_d along axis d.
    """

    log_lam: jnp.ndarray
    n_nonpositive: jnp.ndarray
    s_hat: jnp.ndarray


def _half_sizes(ff: FourierFeatures, J) -> tuple:
    """J_d per dimension: K_d − 1 (the feature set's highest |j|) unless given (≥ K_d − 1)."""
    need = tuple(int(k) - 1 for k in ff.n_freq)
    if J is None:
        return need
    J = tuple(int(j) for j in np.broadcast_to(np.asarray(J), (ff.n_dims,)))
    if any(j < n for j, n in zip(J, need, strict=True)):
        raise InputError(f"J must be ≥ K_d − 1 = {list(need)} per dimension (the features' "
                         f"highest |j|); got {list(J)}.")
    return J


def sample_offsets(width: ArrayLike, J: ArrayLike) -> list:
    """Per-dimension sample positions m·b_d, m ∈ {−J_d..J_d}, b_d = 2W_d/(2J_d + 1).

    Args:
        width: (D,) window widths W_d; J: (D,) half sizes J_d ≥ 0.

    Returns:
        D numpy vectors of lengths M_d = 2J_d + 1, centred at 0, spanning (−W_d, W_d).
    """
    width = np.atleast_1d(np.asarray(width, dtype=np.float64))
    J = np.broadcast_to(np.asarray(J, dtype=np.int64), width.shape)
    return [np.arange(-j, j + 1) * (2 * w / (2 * j + 1)) for w, j in zip(width, J, strict=True)]


def dft_spectrum(kernel: Kernel, width: ArrayLike, J: ArrayLike) -> jax.Array:
    """ŝ_j on the centred lattice j ∈ ∏_d {−J_d..J_d} (docs/afs.md (AFS-DFT), eq. 3.61 corrected).

    Args:
        kernel: anything with ``evaluate(r)`` for r of shape (..., D), e.g. a ProductKernel.
        width: (D,) window widths W_d (the period of the implied kernel is 2W_d).
        J: (D,) half sizes; M_d = 2J_d + 1 samples per dimension.

    Returns:
        (M_1, ..., M_D) real JAX array, ŝ at index j + J; z_j = j/(2W).

    Cost: O(P log P + P·D), P = ∏ M_d; differentiable in the kernel's parameters.
    """
    width = np.atleast_1d(np.asarray(width, dtype=np.float64))
    J = np.broadcast_to(np.asarray(J, dtype=np.int64), width.shape)
    grids = np.meshgrid(*sample_offsets(width, J), indexing="ij")
    r = jnp.asarray(np.stack(grids, axis=-1))  # (M_1, ..., M_D, D) sample offsets m∘b
    cell = float(np.prod(2 * width / (2 * J + 1)))  # ∏_d b_d
    return _centred_dft(kernel, r, cell)


@jax.jit
def _centred_dft(kernel, r, cell):
    """cell · Re fftshift(fftn(ifftshift(k(r)))): m = 0 moved to index 0, then j = 0 to the centre.

    Jitted so that eager calls compile once rather than primitive by primitive.
    """
    s = jnp.fft.fftshift(jnp.fft.fftn(jnp.fft.ifftshift(kernel.evaluate(r))))
    return cell * jnp.real(s)


@partial(jax.jit, static_argnums=3)
def _floor(s_hat, bins, eps, nonpositive):
    """(log ŝ_m clipped or dropped, count) for the feature bins (see :func:`dft_log_lambda`)."""
    s_m = s_hat.ravel()[bins]
    if nonpositive == "clip":
        floor = eps * jnp.max(s_hat)
        return jnp.log(jnp.maximum(s_m, floor)), jnp.sum(s_m < floor)
    pos = s_m > 0
    # double where: no NaN gradient from the log of the unused branch
    return jnp.where(pos, jnp.log(jnp.where(pos, s_m, 1.0)), -jnp.inf), jnp.sum(~pos)


def feature_bins(ff: FourierFeatures, J: ArrayLike | None = None) -> np.ndarray:
    """Flat index into the centred ŝ array of each feature's frequency |j| (shape (M,)).

    Args:
        ff: full-lattice features (numerators are the integers j ≥ 0).
        J: (D,) half sizes of the DFT grid (default K_d − 1).
    """
    if ff.lattice != "full":
        raise InputError(
            "AFS-DFT uses the full (2W)⁻¹ lattice only (docs/afs.md, AFS-DFT); build the features "
            "with "
            "lattice='full' (AFSRegressor(lattice='full'))."
        )
    J = _half_sizes(ff, J)
    j = np.rint(np.abs(ff.numerators)).astype(np.int64)
    shape = tuple(2 * h + 1 for h in J)
    return np.ravel_multi_index(tuple((j[:, d] + J[d]) for d in range(ff.n_dims)), shape)


def dft_log_lambda(ff: FourierFeatures, kernel: Kernel, nonpositive: str = "clip", eps: float = EPS,
                   J: ArrayLike | None = None) -> DFTLambda:
    """log λ_m = log ŝ(|j_m|) − log ∏_d 2W_d for full-lattice features (docs/afs.md, AFS-DFT).

    Args:
        ff: full-lattice :class:`FourierFeatures` (masked or not).
        kernel: a kernel with ``evaluate`` (its spectral density is not used).
        nonpositive: ``"clip"`` (λ = max(ŝ, ε·max ŝ)/∏2W_d) or ``"drop"`` (λ = 0 where ŝ ≤ 0:
            log λ = −inf, the feature no longer contributes to the bound or the predictions).
        eps: the clip floor ε relative to max ŝ (default 1e-12).
        J: DFT half sizes (D,), default K_d − 1 (then the grid is exactly the feature lattice).

    Returns:
        :class:`DFTLambda` (log_lam (M,), n_nonpositive, s_hat (M_1..M_D)).

    Cost: O(P log P + M), P = ∏_d (2J_d + 1). Traceable under ``jax.jit``/``jax.grad``.
    """
    if nonpositive not in ("clip", "drop"):
        raise InputError(f"nonpositive must be 'clip' or 'drop'; got {nonpositive!r}.")
    bins = feature_bins(ff, J)
    J = _half_sizes(ff, J)
    s_hat = dft_spectrum(kernel, ff.width, J)
    log_s, n_bad = _floor(s_hat, jnp.asarray(bins), eps, nonpositive)
    return DFTLambda(log_s - float(np.sum(np.log(2 * ff.width))), n_bad, s_hat)


def log_lambda(ff: FourierFeatures, kernel: Kernel, nonpositive: str = "clip") -> jax.Array:
    """log λ (M,) for any kernel: closed-form S when the kernel has one, else AFS-DFT.

    Kernels with ``log_spectral_density`` use λ = S(|z|)/∏T_d on either lattice
    (:meth:`FourierFeatures.log_lambda`); others (e.g. :class:`~geogp.core.kernels.ProductKernel`)
    need full-lattice features and use :func:`dft_log_lambda`.
    """
    if hasattr(kernel, "log_spectral_density"):
        return ff.log_lambda(kernel)
    if ff.lattice != "full":
        raise InputError(
            f"{type(kernel).__name__} has no closed-form spectral density, so AFS uses the DFT "
            "of its samples, which needs the full lattice (docs/afs.md, AFS-DFT): pass "
            "lattice='full'."
        )
    return dft_log_lambda(ff, kernel, nonpositive).log_lam
