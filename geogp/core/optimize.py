"""Hyperparameter fitting: positivity transforms and L-BFGS on a JAX objective (docs/model.md).

Parameters are pytrees (usually a ``dict``) kept in their constrained form. The optimiser sees
unconstrained values through one bijection: every leaf is positive through a softplus,

    θ = softplus(u) + floor,      u = softplus⁻¹(θ − floor),

except the top-level keys listed in ``unconstrained`` (e.g. mean-function weights), which are
passed through unchanged, and the keys in ``fixed``, which are not optimised at all.

The loss is jitted with its gradient once (``jax.value_and_grad``) and handed to
``scipy.optimize.minimize(method="L-BFGS-B", jac=True)``. A non-finite objective or gradient (e.g.
a Cholesky that failed for a wild step) is reported to the line search as a very large value so
that it backs off, never as NaN.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
from jax.flatten_util import ravel_pytree

from geogp.exceptions import GeogpError, InputError

__all__ = ["FitReport", "constrain", "unconstrain", "minimize_lbfgs", "POSITIVE_FLOOR"]

POSITIVE_FLOOR = 1e-10


def _softplus_inv(y):
    y = jnp.asarray(y)
    return y + jnp.log(-jnp.expm1(-y))


def _map_top(params: dict, fn_pos, fn_free, unconstrained) -> dict:
    if not isinstance(params, dict):
        raise TypeError(f"parameters must be a dict pytree; got {type(params).__name__}.")
    return {
        k: (jax.tree_util.tree_map(fn_free, v) if k in unconstrained
            else jax.tree_util.tree_map(fn_pos, v))
        for k, v in params.items()
    }


def unconstrain(params: dict, unconstrained: Sequence[str] = ()) -> dict:
    """Map constrained parameters to the optimiser's unconstrained space."""
    return _map_top(params, lambda x: _softplus_inv(x - POSITIVE_FLOOR), lambda x: x, unconstrained)


def constrain(uparams: dict, unconstrained: Sequence[str] = ()) -> dict:
    """Inverse of :func:`unconstrain`."""
    return _map_top(
        uparams, lambda u: jax.nn.softplus(u) + POSITIVE_FLOOR, lambda x: x, unconstrained
    )


_VG_CACHE: dict = {}


def _box(free: dict, bounds: dict, unconstrained) -> scipy.optimize.Bounds | None:
    """L-BFGS-B's box over the raveled free parameters for ``bounds`` (None: no box); a
    low/high of None means unbounded on that side."""
    if not bounds:
        return None
    wrong = [k for k in bounds if k not in free or k not in unconstrained]
    if wrong:
        raise InputError(f"bounds apply to free, unconstrained parameters only; got {wrong}.")
    lows, highs = {}, {}
    for k, v in free.items():
        lo, hi = bounds.get(k, (None, None))
        lo = -np.inf if lo is None else float(lo)
        hi = np.inf if hi is None else float(hi)
        if not lo < hi:
            raise InputError(f"the bounds of {k!r} are empty: ({lo}, {hi}).")
        lows[k] = jax.tree_util.tree_map(lambda x, b=lo: jnp.full(jnp.shape(x), b), v)
        highs[k] = jax.tree_util.tree_map(lambda x, b=hi: jnp.full(jnp.shape(x), b), v)
    return scipy.optimize.Bounds(*(np.asarray(ravel_pytree(t)[0], dtype=np.float64)
                                   for t in (lows, highs)))


def _value_and_grad(loss, treedef, shape, unconstrained, unravel):
    """A jitted value-and-gradient in unconstrained space, cached per (loss, parameter layout).

    Compilation costs seconds; fitting the same model class again (another raster, another
    slice of a time series) reuses the compiled function as long as ``loss`` is the same
    function object (define losses at module level, pass data through ``args``).
    """
    key = (loss, treedef, shape, unconstrained)
    if key not in _VG_CACHE:
        def u_loss(u, held, *a):
            p = constrain(unravel(u), unconstrained)
            return loss({**p, **held}, *a)

        if len(_VG_CACHE) > 64:
            _VG_CACHE.clear()
        _VG_CACHE[key] = jax.jit(jax.value_and_grad(u_loss))
    return _VG_CACHE[key]


@dataclass
class FitReport:
    """What an optimisation did.

    Attributes:
        objective: final value of the minimised objective (e.g. −bound).
        n_iter: L-BFGS iterations; n_eval: objective+gradient evaluations.
        converged: whether scipy reported convergence (gradient or relative-decrease criterion).
        message: scipy's message.
        time_s: wall time of the optimisation, compilation included.
        history: objective after each iteration.
    """

    objective: float
    n_iter: int
    n_eval: int
    converged: bool
    message: str
    time_s: float
    history: list = field(default_factory=list)

    def __str__(self) -> str:
        state = "converged" if self.converged else "stopped"
        return (
            f"L-BFGS {state} after {self.n_iter} iterations ({self.n_eval} evaluations, "
            f"{self.time_s:.2f} s): objective {self.objective:.6g} [{self.message}]"
        )


def minimize_lbfgs(
    loss: Callable[..., Any],
    params: dict,
    *,
    args: tuple = (),
    unconstrained: Sequence[str] = (),
    fixed: Sequence[str] = (),
    maxiter: int = 500,
    gtol: float = 1e-6,
    ftol: float = 1e-10,
    progress: Callable[[int, float], None] | None = None,
    bounds: dict | None = None,
    stall: tuple[int, float] | None = None,
) -> tuple[dict, FitReport]:
    """Minimise ``loss(params)`` over positive (softplus) parameters by L-BFGS.

    Args:
        loss: pure JAX function ``loss(params, *args)`` of the constrained parameter dict
            returning a scalar.
        args: data passed to ``loss`` as jit arguments (e.g. the sufficient statistics); large
            arrays belong here rather than in a closure, where XLA would embed them as constants.
        params: initial constrained parameters (dict pytree).
        unconstrained: top-level keys whose leaves are real-valued (identity transform).
        fixed: top-level keys held at their initial value.
        maxiter: maximum L-BFGS iterations.
        gtol, ftol: scipy L-BFGS-B stopping tolerances (projected gradient; relative decrease).
        progress: optional callback ``progress(iteration, objective)`` after each iteration.
        bounds: ``{key: (low, high)}`` for keys listed in ``unconstrained`` (either may be
            None): L-BFGS-B keeps every leaf of that key inside the box (a start outside it is
            moved onto it). For parameters that the data cannot identify beyond some value
            and where the objective loses its digits (see the lattice model's range).
        stall: ``(window, rtol)``: also stop, converged, when the objective fell by less than
            ``rtol · max(|f|, 1)`` over the last ``window`` iterations (scipy's ``ftol``
            looks at one iteration only, and one long flat stretch of a problem with very
            many parameters can keep it from ever stopping).

    Returns:
        ``(params, report)``: the optimised constrained parameters and a :class:`FitReport`.

    Cost: one jitted value-and-gradient per evaluation; the cost of ``loss`` decides the rest.
    """
    if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or maxiter < 1:
        raise InputError(f"maxiter must be an integer ≥ 1; got {maxiter!r}.")
    t0 = time.perf_counter()
    free = {k: v for k, v in params.items() if k not in fixed}
    held = {k: v for k, v in params.items() if k in fixed}
    if not free:
        raise GeogpError("nothing to optimise: every parameter is fixed.")
    u0, unravel = ravel_pytree(unconstrain(free, unconstrained))
    box = _box(free, bounds or {}, unconstrained)
    if box is not None:
        u0 = jnp.clip(u0, box.lb, box.ub)
    vg = _value_and_grad(loss, jax.tree_util.tree_structure(free), tuple(np.shape(u0)),
                         tuple(unconstrained), unravel)

    state = {"best": np.inf, "n_eval": 0, "history": []}

    def fun(u):
        value, grad = vg(jnp.asarray(u), held, *args)
        value = float(value)
        grad = np.asarray(grad, dtype=np.float64)
        state["n_eval"] += 1
        if not (np.isfinite(value) and np.all(np.isfinite(grad))):
            # tell the line search to back off: a big finite value, no direction
            base = state["best"] if np.isfinite(state["best"]) else 0.0
            return base + 1e10 * (1 + abs(base)), np.zeros_like(grad)
        if value < state["best"]:
            state["best"], state["best_u"] = value, np.array(u, dtype=np.float64)
        return value, grad

    def callback(intermediate_result):
        f = float(intermediate_result.fun)
        hist = state["history"]
        hist.append(f)
        if progress is not None:
            progress(len(hist), f)
        if stall is not None and len(hist) > stall[0] and (
                hist[-stall[0] - 1] - f <= stall[1] * max(abs(f), 1.0)):
            state["stalled"] = True
            raise StopIteration  # scipy ends the run at this iterate

    res = scipy.optimize.minimize(
        fun, np.asarray(u0, dtype=np.float64), jac=True, method="L-BFGS-B",
        callback=callback, options={"maxiter": maxiter, "gtol": gtol, "ftol": ftol},
        bounds=box,
    )
    # best = inf: no evaluation was ever finite (the start included), so res.fun is the penalty
    if not np.isfinite(state["best"]):
        raise GeogpError(
            "optimisation failed: the objective was not finite at any accepted point. Check the "
            "data for outliers and the initial hyperparameters."
        )
    x, fun_x, message = res.x, float(res.fun), str(res.message)
    if state.get("stalled"):
        message = (f"the objective fell by less than {stall[1]:g} (relative) over the last "
                   f"{stall[0]} iterations")
    if not np.isfinite(fun_x) or fun_x > state["best"] + 1e9 * (1 + abs(state["best"])):
        # the line search ended on a non-finite trial (scipy then reports the penalty): keep
        # the best point evaluated, which L-BFGS had accepted or tried with a finite value
        x, fun_x = state["best_u"], state["best"]
        message += " (ended on a non-finite trial point; the best finite point is kept)"
    out = {**constrain(unravel(jnp.asarray(x)), unconstrained), **held}
    out = {k: out[k] for k in params}  # keep the caller's key order
    report = FitReport(
        objective=fun_x, n_iter=int(res.nit), n_eval=state["n_eval"],
        converged=bool(res.success) or state.get("stalled", False), message=message,
        time_s=time.perf_counter() - t0, history=state["history"],
    )
    return out, report
