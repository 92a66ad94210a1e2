"""Stage 1 of the lattice model's fit: the local θ on fitting tiles (composite likelihood).

−Σ_t log p_t(y_t | θ) / Σ_t N_t over independent tiles, each with its own lattice, margin and
integrated trend (:mod:`geogp.models.lattice`). With CHOLMOD, the tiles' sparse systems go
through :func:`geogp.linalg.cholmod_many.logdet_and_solve_many`: every tile is factorised in
one host call, and each tile's selected inversion (the gradient's) runs in the background
while the next tile factorises. Other backends solve tile by tile. The value and gradient are
the same either way; only the order of the host work differs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np

from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.linalg.selinv import single_blas_thread
from geogp.linalg.solvers import solve_all
from geogp.models.lattice.gmrf import (
    PARAM_RATIO,
    LatticeProblem,
    dense_likelihood,
    sparse_system,
    statistics_from_solve,
)
from geogp.models.lattice.varying import VARYING_PARAMS

if TYPE_CHECKING:  # annotations only
    import jax

__all__ = ["composite_loss", "composite_loss_ratio_excess", "every_tile", "fit_local",
           "fitting_tiles",
           "RATIO_EXCESS", "RATIO_MIN"]

# the two-range parameter as the optimiser sees it: e^t = κ₂/κ₁ − 1 (t = ``log_ratio``), kept
# above RATIO_MIN (κ₂ = 1.001 κ₁: the α = 2 limit in practice)
RATIO_EXCESS = "ratio_excess"
RATIO_MIN = 1e-3


def fitting_tiles(shape: tuple[int, int], tile: int,
                  budget: int | None) -> list[tuple[slice, slice]]:
    """Square-ish tiles partitioning ``shape``; an evenly spread subset within ``budget`` cells."""
    ny, nx = shape
    if budget is None or ny * nx <= budget:
        return [(slice(0, ny), slice(0, nx))]
    all_tiles = every_tile(shape, tile)
    ty, tx = max(1, round(ny / tile)), max(1, round(nx / tile))
    k = max(1, min(len(all_tiles), budget // ((ny // ty) * (nx // tx))))
    pick = np.unique(np.round(np.linspace(0, len(all_tiles) - 1, k)).astype(int))
    return [all_tiles[i] for i in pick]


def every_tile(shape: tuple[int, int], tile: int) -> list[tuple[slice, slice]]:
    """Square-ish tiles of about ``tile`` cells a side partitioning ``shape`` (row-major)."""
    ny, nx = shape
    ty, tx = max(1, round(ny / tile)), max(1, round(nx / tile))
    ey, ex = np.linspace(0, ny, ty + 1).astype(int), np.linspace(0, nx, tx + 1).astype(int)
    return [(slice(ey[i], ey[i + 1]), slice(ex[j], ex[j + 1]))
            for i in range(ty) for j in range(tx)]


def composite_loss(params: dict, problems: tuple[LatticeProblem, ...],
                   prior: np.ndarray | None = None) -> jax.Array:
    """−Σ_t log p_t / Σ_t N_t over the tiles (module level: the optimiser caches it). With
    ``prior`` (the varying range and sd's coefficient prior sds,
    :mod:`geogp.models.lattice.varying`), their negative log prior density joins the sum."""
    systems = [sparse_system(params, p) for p in problems]
    total = 0.0
    solutions = solve_all(problems, systems)
    for p, (_, rhs, logdet_q, noise), (logdet_b, s) in zip(problems, systems, solutions,
                                                             strict=True):
        logdet_sigma, m = statistics_from_solve(p, logdet_b, s, rhs, logdet_q, noise)
        total = total + dense_likelihood(params, m, logdet_sigma, p.n_obs, p.freq2, p.dw,
                                         p.kernel)[0]
    if prior is not None:
        total = total - 0.5 * sum(jnp.sum((params[k] / prior) ** 2) for k in VARYING_PARAMS)
    return -total / sum(p.n_obs for p in problems)


def composite_loss_ratio_excess(params: dict, problems: tuple[LatticeProblem, ...],
                                prior: np.ndarray | None = None) -> jax.Array:
    """:func:`composite_loss` with the two-range parameter given as e^t (``ratio_excess``)."""
    p = {k: v for k, v in params.items() if k != RATIO_EXCESS}
    p[PARAM_RATIO] = jnp.log(params[RATIO_EXCESS])
    return composite_loss(p, problems, prior)


def fit_local(local: dict, problems: list, bounds: dict, *, maxiter: int,
              progress: Callable[[int, float], object] | None = None,
              prior: np.ndarray | None = None) -> tuple[dict, FitReport]:
    """L-BFGS on :func:`composite_loss` from ``local`` (log parameters, all free) within
    ``bounds`` (:func:`~geogp.core.optimize.minimize_lbfgs`); returns (θ, report).

    A two-range ``log_ratio`` t is optimised as e^t ≥ :data:`RATIO_MIN`: in t the slope
    vanishes like e^t towards the α = 2 limit, where L-BFGS crawls; in e^t that limit is a
    bound one projected step reaches (benchmarks/README.md, design measurements).
    """
    loss, free, bounds = composite_loss, dict(local), dict(bounds)
    if PARAM_RATIO in free:
        loss = composite_loss_ratio_excess
        free[RATIO_EXCESS] = jnp.exp(free.pop(PARAM_RATIO))
        bounds[RATIO_EXCESS] = (RATIO_MIN, None)
    # stop once an iteration gains < 1e-6 of the loss per observation (benchmarks/README.md);
    # one BLAS thread: OpenBLAS's idle threads spin and take the core of the background inversions
    with single_blas_thread():
        free, report = minimize_lbfgs(loss, free, args=(tuple(problems), prior),
                                      unconstrained=tuple(free), maxiter=maxiter, ftol=1e-6,
                                      progress=progress, bounds=bounds)
    if RATIO_EXCESS in free:
        free[PARAM_RATIO] = jnp.log(free.pop(RATIO_EXCESS))
    return {k: free[k] for k in local}, report
