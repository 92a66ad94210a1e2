"""The composite likelihood of the lattice model's fitting tiles (stage 1 of the fit).

−Σ_t log p_t(y_t | θ) / Σ_t N_t over independent tiles, each with its own lattice, margin and
integrated trend (:mod:`geogp.models.lattice`). With CHOLMOD, the tiles' sparse systems go
through :func:`geogp.linalg.cholmod_many.logdet_and_solve_many`: every tile is factorised in
one host call, and each tile's selected inversion (the gradient's) runs in the background
while the next tile factorises. Other backends solve tile by tile. The value and gradient are
the same either way; only the order of the host work differs.
"""

from __future__ import annotations

from geogp.models.lattice_gmrf import (
    LatticeProblem,
    dense_likelihood,
    sparse_system,
    statistics_from_solve,
)

__all__ = ["composite_loss"]


def _solve_all(problems, systems) -> list:
    """[(log|B_t|, B_t⁻¹ rhs_t)] for every tile: in one batch when they share a solver that
    batches (CHOLMOD), else tile by tile."""
    items = [(p.pattern, b, rhs) for p, (b, rhs, _, _) in zip(problems, systems)]
    solver = problems[0].solve
    if all(p.solve == solver for p in problems):
        return solver.solve_many(items)
    return [p.solve(*item) for p, item in zip(problems, items)]


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
