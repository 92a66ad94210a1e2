"""The composite likelihood of the lattice model's fitting tiles (stage 1 of the fit).

−Σ_t log p_t(y_t | θ) / Σ_t N_t over independent tiles, each with its own lattice, margin and
integrated trend (:mod:`geogp.models.lattice`). With CHOLMOD, the tiles' sparse systems go
through :func:`geogp.linalg.cholmod_many.logdet_and_solve_many`: every tile is factorised in
one host call, and each tile's selected inversion (the gradient's) runs in the background
while the next tile factorises. Other backends solve tile by tile. The value and gradient are
the same either way; only the order of the host work differs.
"""

from __future__ import annotations

import functools

from geogp.models.lattice_gmrf import (
    LatticeProblem,
    dense_likelihood,
    sparse_system,
    statistics_from_solve,
)

__all__ = ["composite_loss"]


def _cholmod_keywords(solve):
    """The keywords of a CHOLMOD solver made by ``functools.partial``; None for another one."""
    from geogp.linalg import HAVE_CHOLMOD

    if HAVE_CHOLMOD and isinstance(solve, functools.partial):
        from geogp.linalg import cholmod

        if solve.func is cholmod.logdet_and_solve and not solve.args:
            return dict(solve.keywords)
    return None


def _solve_all(problems, systems) -> list:
    """[(log|B_t|, B_t⁻¹ rhs_t)] for every tile: batched when all go through CHOLMOD."""
    keywords = [_cholmod_keywords(p.solve) for p in problems]
    if len(problems) > 1 and keywords[0] is not None and all(k == keywords[0] for k in keywords):
        from geogp.linalg.cholmod_many import logdet_and_solve_many

        return logdet_and_solve_many(
            [(p.pattern, b, rhs) for p, (b, rhs, _, _) in zip(problems, systems)], **keywords[0])
    return [p.solve(p.pattern, b, rhs) for p, (b, rhs, _, _) in zip(problems, systems)]


def composite_loss(params, problems: tuple[LatticeProblem, ...]):
    """−Σ_t log p_t / Σ_t N_t over the tiles (module level: the optimiser caches it)."""
    systems = [sparse_system(params, p) for p in problems]
    total = 0.0
    for p, (_, rhs, logdet_q, noise), (logdet_b, s) in zip(problems, systems,
                                                             _solve_all(problems, systems)):
        logdet_sigma, m = statistics_from_solve(p, logdet_b, s, rhs, logdet_q, noise)
        total = total + dense_likelihood(params, m, logdet_sigma, p.n_obs, p.freq2, p.dw,
                                         p.kernel)[0]
    return -total / sum(p.n_obs for p in problems)
