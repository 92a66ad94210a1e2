"""Several independent ``(log|B_t|, B_t⁻¹ b_t)`` in one host call each way (CHOLMOD, custom VJP).

A sum of terms, each with its own sparse matrix (the lattice model's fitting tiles), could call
:func:`geogp.linalg.cholmod.logdet_and_solve` once per term. XLA then runs the host callbacks
one after another and puts each term's backward pass right after its forward pass, since a
term's cotangent does not depend on the others. Nothing can overlap.

Here the forward callback factorises every matrix before any backward pass runs. With
``prefetch_inverse`` each factor's selected inversion starts in a background thread as soon as
the factor exists (the compiled kernel releases the GIL). The next matrix factorises in the
meantime, and the backward callback mostly finds the inversions done. Same results as the
single-matrix operation: each term uses its own :class:`~geogp.linalg.cholmod.CholmodFactorization`.
Only the order of the host work changes. The backward pass visits the terms last-first: the
last term's inversion is the one most likely still queued, and the waiting thread takes it
back and computes it itself (:mod:`geogp.linalg.cholmod`). What this saves is in
benchmarks/README.md (design measurements).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from geogp.exceptions import InputError
from geogp.linalg._checks import check_inputs
from geogp.linalg.cholmod import CholmodFactorization, analyze
from geogp.linalg.pattern import SparsePattern

__all__ = ["logdet_and_solve_many"]


def logdet_and_solve_many(
    items: Sequence[tuple[SparsePattern, Any, Any]],
    *,
    ordering: str = "amd",
    mode: str = "auto",
    prefetch_inverse: bool = True,
) -> list[tuple[jax.Array, jax.Array]]:
    """``[(log|B_t|, B_t⁻¹ b_t)]`` for ``items = [(pattern_t, values_t, rhs_t)]``, differentiable.

    Usable under ``jax.jit`` and reverse-mode autodiff like
    :func:`geogp.linalg.cholmod.logdet_and_solve`; a term whose matrix is not positive
    definite gives NaN (value and gradients), also when called eagerly (no
    :class:`~geogp.exceptions.NotPositiveDefiniteError` here: the caller checks the terms).

    Args:
        items: one ``(pattern, values, rhs)`` per term; each pattern at most once (a pattern
            keeps one factor, which two terms would overwrite in turn).
        ordering, mode: as for :func:`geogp.linalg.cholmod.analyze`.
        prefetch_inverse: start each factor's selected inversion in the background as soon
            as it is factorised (for losses whose every evaluation is differentiated).

    Returns:
        One ``(logdet, solution)`` per term, in order.

    Raises:
        InputError: No terms, a pattern given twice, or wrong shapes or dtypes.

    Cost: one factorisation and one solve per term forward; backward one solve and one
    selected inversion per term, overlapping the next factorisations when prefetched.
    """
    if not items:
        raise InputError("logdet_and_solve_many needs at least one (pattern, values, rhs).")
    patterns = [p for p, _, _ in items]
    if len({id(p) for p in patterns}) != len(patterns):
        raise InputError("each pattern may appear only once in logdet_and_solve_many (a "
                         "pattern keeps one factor, which two terms would overwrite in turn).")
    checked = [check_inputs(p, v, r) for p, v, r in items]
    states = tuple(analyze(p, ordering=ordering, mode=mode) for p in patterns)
    op = _cached_op(states, ordering, mode, bool(prefetch_inverse))
    logdets, solutions = op(tuple(jnp.asarray(v) for v, _ in checked),
                            tuple(jnp.asarray(r) for _, r in checked))
    return list(zip(logdets, solutions, strict=True))


def _cached_op(states: tuple[CholmodFactorization, ...], ordering: str, mode: str,
               prefetch: bool) -> Any:
    """The operation for these factorisations, kept on the first pattern (it holds the others'
    states alive for as long as that pattern lives: the terms of one loss live together)."""
    key = ("cholmod-many", ordering, mode, prefetch, tuple(id(s) for s in states[1:]))
    cache = states[0].pattern._cache
    if key not in cache:
        cache[key] = _build_op(states, prefetch)
    return cache[key]


def _build_op(states: tuple[CholmodFactorization, ...], prefetch: bool) -> Any:
    f64 = jnp.float64
    n = len(states)

    def host_forward(*flat: np.ndarray) -> tuple[np.ndarray, ...]:
        out = [state.host_forward(v, r, prefetch)
               for state, v, r in zip(states, flat[:n], flat[n:], strict=True)]
        return tuple(o[0] for o in out) + tuple(o[1] for o in out)

    def host_backward(*flat: np.ndarray) -> tuple[np.ndarray, ...]:
        values, solutions, g_logdets, g_solutions = (flat[i * n:(i + 1) * n] for i in range(4))
        # last term first: its prefetched inversion is the one most likely still queued, so
        # this thread computes it while the pool's thread finishes the first terms' ones
        terms = list(zip(states, values, solutions, g_logdets, g_solutions, strict=True))
        out = [state.host_backward(*args) for state, *args in reversed(terms)][::-1]
        return tuple(o[0] for o in out) + tuple(o[1] for o in out)

    def forward(values: tuple, rhs: tuple) -> tuple[tuple, tuple]:
        shapes = (tuple(jax.ShapeDtypeStruct((), f64) for _ in states)
                  + tuple(jax.ShapeDtypeStruct(r.shape, f64) for r in rhs))
        flat = jax.pure_callback(host_forward, shapes, *values, *rhs, vmap_method="sequential")
        return tuple(flat[:n]), tuple(flat[n:])

    @jax.custom_vjp
    def op(values: tuple, rhs: tuple) -> tuple[tuple, tuple]:
        return forward(values, rhs)

    def op_fwd(values: tuple, rhs: tuple) -> Any:
        logdets, solutions = forward(values, rhs)
        return (logdets, solutions), (values, solutions)

    def op_bwd(residuals: Any, cotangents: Any) -> tuple[tuple, tuple]:
        values, solutions = residuals
        g_logdets, g_solutions = cotangents
        shapes = (tuple(jax.ShapeDtypeStruct(v.shape, f64) for v in values)
                  + tuple(jax.ShapeDtypeStruct(s.shape, f64) for s in solutions))
        flat = jax.pure_callback(
            host_backward, shapes, *values, *solutions,
            *(jnp.asarray(g, f64) for g in g_logdets),
            *(jnp.asarray(g, f64) for g in g_solutions), vmap_method="sequential")
        return tuple(flat[:n]), tuple(flat[n:])

    op.defvjp(op_fwd, op_bwd)
    return op
