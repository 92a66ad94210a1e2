"""The objectives AFSRegressor minimises, as module-level functions (compiled once).

- :func:`negative_bound_per_point`: −L''/N of the dense (or diagonal) collapsed bound
  (:mod:`geogp.models.collapsed`);
- :func:`iterative_loss`: the same on the matrix-free path
  (:mod:`geogp.models.collapsed_iterative`), one function object per :class:`IterativeOptions`;
- :func:`warm_start`: θ from the dense bound of the preconditioner's low-frequency block,
  a cheap starting point for the expensive large-M optimisation;
- :func:`loss_and_args`: which of these (or the AFS-DFT bound of a kernel without S) fits the
  features and statistics at hand, with its data arguments;
- :func:`merge_reports`: one report for successive fits (pilot, wider windows).

Parameters are dicts ``{"kernel", "noise"[, "mean"]}`` (see :mod:`geogp.core.optimize`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np

from geogp.core.optimize import FitReport, minimize_lbfgs
from geogp.features.afs_dft import log_lambda
from geogp.features.fourier_statistics import SufficientStats, residual_stats
from geogp.models.collapsed import collapsed_bound
from geogp.models.collapsed_iterative import IterativeOptions, iterative_bound

if TYPE_CHECKING:  # annotations only
    import jax

    from geogp.core.kernels import Kernel
    from geogp.features.fourier import FourierFeatures

__all__ = ["negative_bound_per_point", "iterative_loss", "warm_start", "loss_and_args",
           "merge_reports"]


def _bound_inputs(params, stats, freqs, log_norm):
    """(log λ, σ², k(0), statistics of y − Hβ) from the parameters: what every bound takes."""
    log_lam = params["kernel"].log_spectral_density(freqs) - log_norm
    if "mean" in params:
        stats = residual_stats(stats, params["mean"])
    return log_lam, params["noise"], params["kernel"].variance_at_zero, stats


def negative_bound_per_point(params: dict, stats: SufficientStats, freqs: jax.Array,
                             log_norm: jax.Array) -> jax.Array:
    """−L''/N as a function of the parameters (module level, so its compilation is cached)."""
    log_lam, noise, kvar0, stats = _bound_inputs(params, stats, freqs, log_norm)
    return -collapsed_bound(log_lam, noise, kvar0, stats) / stats.n


_ITERATIVE_LOSSES: dict = {}


def iterative_loss(options: IterativeOptions) -> Callable[..., jax.Array]:
    """−L''/N on the matrix-free path, one function object per options (compilation cached)."""
    if options not in _ITERATIVE_LOSSES:
        def loss(params, stats, freqs, log_norm, probes):
            log_lam, noise, kvar0, stats = _bound_inputs(params, stats, freqs, log_norm)
            return -iterative_bound(log_lam, noise, kvar0, stats, probes, options) / stats.n

        _ITERATIVE_LOSSES[options] = loss
    return _ITERATIVE_LOSSES[options]


def warm_start(params: dict, stats: SufficientStats, ff: FourierFeatures, n_low: int,
               maxiter: int) -> tuple[dict, FitReport | None]:
    """θ from the dense bound over the ``n_low`` lowest frequencies (no data access).

    Their statistics are a sub-block of what the matrix-free operator keeps for its
    preconditioner (G₀₀, and the matching rows of r and F), so this costs O(n_low³) per step;
    the large-M optimisation then starts nearer its optimum. Returns (params, report), with
    the parameters unchanged (report None) when the operator has no dense block.
    """
    op = stats.G
    if op.low is None or n_low <= 0:
        return params, None
    low = np.asarray(op.low)
    freq = np.linalg.norm(ff.frequencies[low], axis=1)
    keep = np.sort(np.argsort(freq, kind="stable")[:n_low])
    idx = low[keep]
    sub = stats.with_data(op.G_low[np.ix_(keep, keep)], stats.r[idx],
                          None if stats.F is None else stats.F[idx], diagonal=False)
    args = (sub, jnp.asarray(ff.frequencies[idx]), jnp.asarray(ff.log_norm))
    return minimize_lbfgs(negative_bound_per_point, params, args=args, unconstrained=("mean",),
                          maxiter=maxiter)


def loss_and_args(ff: FourierFeatures, stats: SufficientStats, kernel: Kernel,
                  options: IterativeOptions,
                  probes: jax.Array | None = None) -> tuple[Callable[..., jax.Array], tuple]:
    """(loss, args) for :func:`~geogp.core.optimize.minimize_lbfgs` on these features and
    statistics: matrix-free (``probes`` needed), dense with a closed-form S (module-level
    losses: compiled once per parameter layout), or AFS-DFT λ for kernels without S
    (docs/afs.md, AFS-DFT)."""
    if stats.matrix_free:
        return iterative_loss(options), (stats, jnp.asarray(ff.frequencies),
                                         jnp.asarray(ff.log_norm), probes)
    if hasattr(kernel, "log_spectral_density"):
        return negative_bound_per_point, (stats, jnp.asarray(ff.frequencies),
                                          jnp.asarray(ff.log_norm))

    def loss(p, st):
        if "mean" in p:
            st = residual_stats(st, p["mean"])
        return -collapsed_bound(log_lambda(ff, p["kernel"]), p["noise"],
                                p["kernel"].variance_at_zero, st) / st.n

    return loss, (stats,)


def merge_reports(reports: list, refits: int) -> FitReport:
    """One FitReport for successive fits (pilot, wider windows): the last objective and
    message; iterations, evaluations, time and history summed over the fits."""
    last = reports[-1]
    if len(reports) == 1:
        return last
    note = f" (after {refits} wider window(s))" if refits else ""
    return FitReport(last.objective, sum(r.n_iter for r in reports),
                     sum(r.n_eval for r in reports), last.converged, last.message + note,
                     sum(r.time_s for r in reports), [h for r in reports for h in r.history])
