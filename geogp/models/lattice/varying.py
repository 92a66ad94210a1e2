"""A range and sd that vary over the raster: the lattice model's non-stationary form.

The local field's operator becomes (κ(s)² − Δ)(τ(s) g) = W (Lindgren, Rue & Lindström 2011,
§3.2), on the lattice Q = D (K + L)(K + L) D with K = diag κ², D = diag √c and, per cell, the
stationary formulas of :func:`~geogp.models.lattice.gmrf.precision` (α = 2):
κ²(s) = 8 / ρ(s)², c(s) = A / (4π κ²(s) s(s)²). Where ρ and s are constant this is the
stationary Q exactly; where they vary slowly ρ(s) and s(s) are the local range and marginal
sd. log|Q| = Σ log c + 2 log|K + L| (one more sparse Cholesky, of a 5-point matrix).

log ρ(s) = log ρ₀ + Σ_ℓ ψ_ℓ(s)ᵀ b_ℓ, and the same for log s(s), over a multiresolution basis:
level ℓ holds the tensor products of cubic B-splines on 2^ℓ knot intervals along the raster's
longer side (proportionally fewer on the shorter one), down to :data:`MIN_SPACING` cells
between knots. The coefficients have the prior b_ℓ ~ N(0, (PRIOR_SD / 2^ℓ)²), which shrinks
the fine levels: the fit is penalised REML (the prior's log density is added). Everything else
(the mid-scale level, the large scales, the trend, the tiles, the posterior) is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.interpolate import BSpline

from geogp.core.robust import cavity

__all__ = ["MIN_SPACING", "PRIOR_SD", "SPREAD_BLOCKS", "SPREAD_LEAST", "SPREAD_VARYING",
           "VARYING_AUTO_MAX_CELLS", "VARYING_MAX_CELLS", "VARYING_PARAMS", "VaryingBasis",
           "calibration_spread"]

# the coefficients of log range and log sd, flat over the levels
VARYING_PARAMS = ("varying_range", "varying_sd")
# the finest level keeps at least this many cells between knots: a local range and sd need
# a few ranges' worth of data around each knot to be estimated
MIN_SPACING = 12
# prior sd of the coarsest level's coefficients (log units: e^1 in range or sd); halves per level
PRIOR_SD = 1.0
# varying="auto": the stationary fit's leave-one-out z² averaged per block of a
# SPREAD_BLOCKS² partition (blocks with at least SPREAD_LEAST observations); the roughness
# varies where the log block means have a sd above SPREAD_VARYING. Measured
# (benchmarks/bench_nonstationary.py, spread): 0.09–0.13 on stationary draws, 0.3–0.4 on the
# satellite raster and the Jacksboro DEM, 1.2–1.8 on the simulated warps, 1.15 on topobathy
SPREAD_BLOCKS = 4
SPREAD_LEAST = 50
SPREAD_VARYING = 0.5
# varying="auto" refits only rasters up to this many cells (its fitting tiles cover the raster),
# varying=True refuses beyond VARYING_MAX_CELLS (those tiles are held together)
VARYING_AUTO_MAX_CELLS = 250_000
VARYING_MAX_CELLS = 1_000_000


@dataclass(frozen=True)
class VaryingBasis:
    """The multiresolution basis of the varying log range and log sd on a raster.

    Attributes:
        raster_shape: (n_y, n_x) raster cells (margins excluded; the margins take the value
            at the raster's edge).
        intervals: per level, the knot intervals (m_y, m_x); level ℓ has (m_y + 3)(m_x + 3)
            functions.
    """

    raster_shape: tuple[int, int]
    intervals: tuple[tuple[int, int], ...]

    @classmethod
    def auto(cls, raster_shape: tuple[int, int], levels: int | None = None) -> VaryingBasis:
        """Levels 0, 1, … with 2^ℓ intervals along the longer side, as many as keep
        :data:`MIN_SPACING` cells between knots (at least level 0), or ``levels`` of them."""
        ny, nx = (int(v) for v in raster_shape)
        long = max(ny, nx)
        if levels is None:
            levels = 1 + max(0, math.floor(math.log2(max(long / MIN_SPACING, 1.0))))
        out = []
        for ell in range(int(levels)):
            m = 2**ell
            out.append(tuple(max(1, round(m * n / long)) for n in (ny, nx)))
        return cls((ny, nx), tuple(out))

    @property
    def sizes(self) -> tuple[tuple[int, int], ...]:
        """Per level the coefficient grid (m_y + 3, m_x + 3)."""
        return tuple((my + 3, mx + 3) for my, mx in self.intervals)

    @property
    def n_coef(self) -> int:
        """Coefficients per varying quantity (all levels)."""
        return sum(a * b for a, b in self.sizes)

    def prior_sd(self) -> np.ndarray:
        """(n_coef,) the prior sd of each coefficient: PRIOR_SD / 2^ℓ on level ℓ."""
        return np.concatenate([np.full(a * b, PRIOR_SD / 2**ell)
                               for ell, (a, b) in enumerate(self.sizes)])

    def matrices(self, rows: np.ndarray, cols: np.ndarray) -> tuple[tuple, tuple]:
        """((B_y per level), (B_x per level)): the 1-D B-spline values (len(rows), m_y + 3)
        and (len(cols), m_x + 3) at raster row and column positions (cell centres at 0, 1, …;
        positions beyond the raster take the edge's value)."""
        by, bx = [], []
        for my, mx in self.intervals:
            by.append(_bsplines(rows, self.raster_shape[0], my))
            bx.append(_bsplines(cols, self.raster_shape[1], mx))
        return tuple(by), tuple(bx)

    def field(self, coef: jax.Array | np.ndarray, by: tuple, bx: tuple) -> jax.Array:
        """Σ_ℓ B_y,ℓ C_ℓ B_x,ℓᵀ flattened row-major: the deviation of the log quantity at every
        cell of the lattice that ``by``, ``bx`` were evaluated on (JAX, differentiable in
        ``coef``)."""
        out, start = 0.0, 0
        for (a, b), my, mx in zip(self.sizes, by, bx, strict=True):
            c = jnp.reshape(coef[start:start + a * b], (a, b))
            out = out + my @ c @ mx.T
            start += a * b
        return jnp.ravel(out)

    def at(self, coef: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """(N,) the deviation at fractional raster positions (rows, cols) (numpy)."""
        out, start = np.zeros(np.shape(rows)), 0
        by, bx = self.matrices(rows, cols)
        for (a, b), my, mx in zip(self.sizes, by, bx, strict=True):
            c = np.reshape(np.asarray(coef)[start:start + a * b], (a, b))
            out += np.sum((my @ c) * mx, axis=1)
            start += a * b
        return out


def _bsplines(pos: np.ndarray, n: int, intervals: int) -> np.ndarray:
    """(len(pos), intervals + 3) uniform cubic B-splines over the cells' extent
    [−0.5, n − 0.5], positions clamped to it."""
    z = np.clip((np.asarray(pos, dtype=np.float64) + 0.5) / n, 0.0, 1.0)
    knots = np.arange(-3, intervals + 4) / intervals
    return BSpline.design_matrix(z, knots, 3).toarray()


def calibration_spread(mean: np.ndarray, var: np.ndarray, y: np.ndarray, noise: float,
                       observed: np.ndarray) -> float:
    """The sd over blocks of log mean z², z the leave-one-out residual of each observation
    normalised by its predictive sd (1 on average under a well-specified model, whatever the
    block). ``mean``, ``var``: the latent posterior at the observed cells (row-major order of
    ``observed``, the raster's mask), ``y`` their data, ``noise`` σ² (same units). NaN when
    fewer than two blocks have :data:`SPREAD_LEAST` observations."""
    loo_mean, loo_var = cavity(mean, var, y, np.full(y.shape, noise))
    z2 = (y - loo_mean) ** 2 / (loo_var + noise)
    rows, cols = np.nonzero(observed)
    block = (rows * SPREAD_BLOCKS // observed.shape[0]) * SPREAD_BLOCKS + (
        cols * SPREAD_BLOCKS // observed.shape[1])
    count = np.bincount(block, minlength=SPREAD_BLOCKS**2)
    total = np.bincount(block, weights=z2, minlength=SPREAD_BLOCKS**2)
    keep = count >= SPREAD_LEAST
    if keep.sum() < 2:
        return float("nan")
    return float(np.std(np.log(total[keep] / count[keep])))
