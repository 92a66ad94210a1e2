"""Tests of geogp.core.optimize: the positivity bijection and L-BFGS on JAX objectives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geogp.core import kernels as gk
from geogp.core.optimize import POSITIVE_FLOOR, FitReport, constrain, minimize_lbfgs, unconstrain
from geogp.exceptions import GeogpError, InputError

from _reference.assertions import assert_allclose

# ---------------------------------------------------------------------------------------------
# constrain / unconstrain
# ---------------------------------------------------------------------------------------------


def test_constrain_is_softplus_plus_floor():
    u = np.array([-30.0, -2.0, 0.0, 1.5, 40.0])
    out = constrain({"a": jnp.asarray(u)})["a"]
    assert_allclose(out, np.logaddexp(0.0, u) + POSITIVE_FLOOR, rtol=1e-14)
    assert np.all(np.asarray(out) > 0)


def test_round_trip_over_many_magnitudes():
    p = {"a": jnp.array([1e-8, 1e-3, 0.2, 1.0, 30.0, 1e4]), "b": jnp.asarray(0.7)}
    u = unconstrain(p)
    assert np.all(np.isfinite(np.asarray(u["a"])))
    back = constrain(u)
    assert_allclose(back["a"], p["a"], rtol=1e-12)
    assert_allclose(back["b"], p["b"], rtol=1e-14)
    back_u = unconstrain(constrain({"a": jnp.array([-12.0, 0.0, 5.0])}))["a"]
    assert_allclose(back_u, [-12.0, 0.0, 5.0], rtol=1e-9, atol=1e-12)


def test_round_trip_through_kernel_pytrees_and_unconstrained_keys():
    p = {"kernel": gk.Matern12([0.3, 2.0], 0.5) + gk.SquaredExponential(1.5, 4.0),
         "noise": jnp.asarray(0.01), "w": jnp.array([-3.0, 0.0, 2.5])}
    u = unconstrain(p, unconstrained=("w",))
    assert_allclose(u["w"], p["w"], rtol=0)  # identity on the unconstrained keys
    assert isinstance(u["kernel"], gk.SumKernel)
    back = constrain(u, unconstrained=("w",))
    for a, b in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(p), strict=True):
        assert_allclose(a, b, rtol=1e-12)


def test_parameters_must_be_a_dict():
    with pytest.raises(TypeError, match="must be a dict"):
        unconstrain([1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# minimize_lbfgs
# ---------------------------------------------------------------------------------------------


def test_finds_minimum_of_quadratic_in_positive_parameters():
    target_b = jnp.array([0.5, 3.0])

    def loss(p):
        return (p["a"] - 2.0) ** 2 + jnp.sum((p["b"] - target_b) ** 2)

    out, report = minimize_lbfgs(loss, {"b": jnp.array([1.0, 1.0]), "a": jnp.asarray(0.1)})
    assert list(out) == ["b", "a"]  # the caller's key order
    assert_allclose(out["a"], 2.0, rtol=1e-6)
    assert_allclose(out["b"], [0.5, 3.0], rtol=1e-6)
    assert report.converged
    assert report.objective < 1e-11
    assert report.n_eval >= report.n_iter >= 1
    assert len(report.history) == report.n_iter
    assert np.all(np.diff(report.history) <= 1e-15)  # L-BFGS accepts only decreasing steps


def test_minimum_on_the_floor_side_stays_positive():
    """Optimum of the unconstrained problem is negative: the positive solution sits near 0."""
    out, _ = minimize_lbfgs(lambda p: (p["a"] + 1.0) ** 2, {"a": jnp.asarray(1.0)})
    assert 0 < float(out["a"]) < 1e-3


def test_fixed_keys_are_held_exactly():
    def loss(p):
        return (p["a"] - p["b"]) ** 2 + (p["b"] - 3.0) ** 2

    b0 = jnp.asarray(1.0)
    out, _ = minimize_lbfgs(loss, {"a": jnp.asarray(5.0), "b": b0}, fixed=("b",))
    assert float(out["b"]) == 1.0
    assert_allclose(out["a"], 1.0, rtol=1e-6)  # minimiser of the loss given b = 1
    out_free, _ = minimize_lbfgs(loss, {"a": jnp.asarray(5.0), "b": b0})
    assert_allclose([out_free["a"], out_free["b"]], [3.0, 3.0], rtol=1e-6)


def test_unconstrained_keys_reach_negative_values():
    def loss(p):
        return (p["a"] - 2.0) ** 2 + jnp.sum((p["w"] - jnp.array([-4.0, 0.5])) ** 2)

    out, _ = minimize_lbfgs(loss, {"a": jnp.asarray(1.0), "w": jnp.zeros(2)},
                            unconstrained=("w",))
    assert_allclose(out["w"], [-4.0, 0.5], rtol=1e-6)
    assert_allclose(out["a"], 2.0, rtol=1e-6)


def test_bounds_hold_unconstrained_leaves_in_their_box():
    """The minimum of Σ(w − t)² over a box is t clipped to it (the KKT point of a separable
    convex quadratic); a start outside the box is moved onto it; an unbounded key is free."""
    target = jnp.array([-4.0, 0.5, 3.0])

    def loss(p):
        return jnp.sum((p["w"] - target) ** 2) + (p["v"] - 7.0) ** 2

    out, _ = minimize_lbfgs(loss, {"w": jnp.array([5.0, 5.0, 5.0]), "v": jnp.asarray(0.0)},
                            unconstrained=("w", "v"), bounds={"w": (-1.0, 2.0)})
    assert_allclose(out["w"], [-1.0, 0.5, 2.0], rtol=1e-8)
    assert_allclose(out["v"], 7.0, rtol=1e-6)
    one_sided, _ = minimize_lbfgs(loss, {"w": jnp.zeros(3), "v": jnp.asarray(0.0)},
                                  unconstrained=("w", "v"), bounds={"w": (None, 0.0)})
    assert_allclose(one_sided["w"], [-4.0, 0.0, 0.0], rtol=1e-6, atol=1e-9)


def test_bounds_on_positive_or_unknown_keys_and_empty_boxes_are_refused():
    def loss(p):
        return (p["a"] - 1.0) ** 2 + (p["w"] - 1.0) ** 2

    params = {"a": jnp.asarray(1.0), "w": jnp.asarray(0.0)}
    with pytest.raises(InputError, match="unconstrained parameters only"):
        minimize_lbfgs(loss, params, unconstrained=("w",), bounds={"a": (0.0, 1.0)})
    with pytest.raises(InputError, match="unconstrained parameters only"):
        minimize_lbfgs(loss, params, unconstrained=("w",), bounds={"zz": (0.0, 1.0)})
    with pytest.raises(InputError, match="empty"):
        minimize_lbfgs(loss, params, unconstrained=("w",), bounds={"w": (2.0, 1.0)})


def test_backs_off_from_a_region_where_the_loss_is_nan():
    """(a − 2.9)² for a < 3 and NaN beyond. From a = 2.5 the first L-BFGS step (unit length in
    u = softplus⁻¹(a)) lands at a ≈ 3.45, in the NaN region; the line search must back off."""
    visited = []

    def loss(p):
        a = p["a"]
        jax.debug.callback(lambda v: visited.append(float(v)), a)
        return jnp.where(a < 3.0, (a - 2.9) ** 2, jnp.nan)

    out, report = minimize_lbfgs(loss, {"a": jnp.asarray(2.5)})
    assert max(visited) >= 3.0, "the test never reached the NaN region"
    assert_allclose(out["a"], 2.9, rtol=1e-6)
    assert np.isfinite(report.objective) and report.objective < 1e-10


def test_a_run_ending_on_a_non_finite_trial_keeps_the_best_point(monkeypatch):
    """When L-BFGS-B stops on a trial point where the loss is not finite (scipy then reports
    the penalty as the result), the best finite point evaluated is returned, and the report
    says so: no error, no penalty in the report."""
    import scipy.optimize

    real = scipy.optimize.minimize

    def ending_on_a_bad_trial(fun, x0, **kw):
        res = real(fun, x0, **kw)
        res.x = res.x + 50.0            # a trial deep in the NaN region
        res.fun = fun(res.x)[0]         # the penalty
        return res

    monkeypatch.setattr(scipy.optimize, "minimize", ending_on_a_bad_trial)
    loss = lambda p: jnp.where(p["a"] < 3.0, (p["a"] - 2.9) ** 2, jnp.nan)  # noqa: E731
    out, report = minimize_lbfgs(loss, {"a": jnp.asarray(2.5)})
    assert_allclose(out["a"], 2.9, rtol=1e-6)
    assert report.objective < 1e-10 and "best finite point is kept" in report.message


def test_loss_nan_everywhere_raises_a_clear_error():
    with pytest.raises(GeogpError, match="objective was not finite"):
        minimize_lbfgs(lambda p: jnp.nan * p["a"], {"a": jnp.asarray(1.0)})


def test_nothing_to_optimise_raises():
    with pytest.raises(GeogpError, match="every parameter is fixed"):
        minimize_lbfgs(lambda p: p["a"] ** 2, {"a": jnp.asarray(1.0)}, fixed=("a",))


def test_progress_callback_and_iteration_limit():
    calls = []

    def rosenbrock(p):
        x, y = p["xy"][0], p["xy"][1]
        return (1 - x) ** 2 + 100 * (y - x**2) ** 2

    out, report = minimize_lbfgs(rosenbrock, {"xy": jnp.array([3.0, 0.2])}, maxiter=3,
                                 progress=lambda i, f: calls.append((i, f)))
    assert [i for i, _ in calls] == [1, 2, 3]
    assert [f for _, f in calls] == report.history
    assert report.n_iter == 3 and not report.converged
    assert "stopped after 3 iterations" in str(report)
    assert out["xy"].dtype == jnp.float64


def test_stall_stops_at_the_first_window_that_fell_by_less_than_its_tolerance():
    """``stall=(w, rtol)`` ends the run, converged, at the first iteration k ≥ w whose
    objective is within rtol·max(|f|, 1) of iteration k − w's (checked on the history against
    the rule written out here), and a run without it goes on."""
    def rosenbrock(p):
        x, y = p["xy"][0], p["xy"][1]
        return (1 - x) ** 2 + 100 * (y - x**2) ** 2

    start = {"xy": jnp.array([-1.2, 1.0])}
    window, rtol = 3, 1e-2
    _, free = minimize_lbfgs(rosenbrock, start, unconstrained=("xy",))
    _, report = minimize_lbfgs(rosenbrock, start, unconstrained=("xy",),
                               stall=(window, rtol))
    h, g = report.history, free.history

    def fell_too_little(k):  # iteration k + 1 (1-based) against k + 1 − window
        return g[k - window] - g[k] <= rtol * max(abs(g[k]), 1.0)

    stops = [k for k in range(window, len(g)) if fell_too_little(k)]
    assert stops, "the reference run never stalls: the test would check nothing"
    assert len(h) == stops[0] + 1 and h == g[:len(h)]
    assert report.converged and f"last {window} iterations" in report.message
    assert len(g) > len(h)


def test_fit_report_text():
    r = FitReport(objective=-12.5, n_iter=7, n_eval=9, converged=True, message="OK", time_s=0.25)
    assert str(r) == ("L-BFGS converged after 7 iterations (9 evaluations, 0.25 s): "
                      "objective -12.5 [OK]")
    assert r.history == []
