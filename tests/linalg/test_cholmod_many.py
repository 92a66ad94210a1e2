"""``logdet_and_solve_many`` (several CHOLMOD systems per host call, prefetched inversions)
against the dense reference, term by term: values, gradients and failures."""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _reference.assertions import assert_allclose
from _reference.sparse_spd import problem_case, randomised_values

pytest.importorskip("sksparse.cholmod")

from geogp.exceptions import InputError
from geogp.linalg import SparsePattern, cholmod, cholmod_many, dense
from geogp.linalg.selinv import single_blas_thread

NAMES = ("grid", "random200", "banded")


def _terms(rng):
    """Three systems of different sizes (one with several right-hand sides) and weights."""
    out = []
    for t, name in enumerate(NAMES):
        pattern, values, rhs = problem_case(name, rng, k=None if t else 3)
        out.append((pattern, values, rhs, jnp.asarray(rng.standard_normal(rhs.shape))))
    return out


def _sum_objective(solve_terms, terms):
    """Σ_t (0.7 log|B_t| + w_tᵀx_t + 0.1 |x_t|²): both cotangents nonzero in every term."""
    def f(values, rhs):
        out = solve_terms([(p, v, r) for (p, *_), v, r in zip(terms, values, rhs, strict=True)])
        return sum(0.7 * ld + jnp.sum(w * x) + 0.1 * jnp.sum(x**2)
                   for (ld, x), (*_, w) in zip(out, terms, strict=True))
    return f


def _dense_terms(items):
    return [dense.logdet_and_solve(p, v, r) for p, v, r in items]


@pytest.mark.parametrize("prefetch", [True, False])
def test_values_and_gradients_match_the_dense_reference(prefetch, rng):
    terms = _terms(rng)
    values = tuple(v for _, v, _, _ in terms)
    rhs = tuple(r for _, _, r, _ in terms)
    many = _sum_objective(
        lambda items: cholmod_many.logdet_and_solve_many(items, prefetch_inverse=prefetch), terms)
    value, (g_values, g_rhs) = jax.jit(jax.value_and_grad(many, argnums=(0, 1)))(values, rhs)
    want, (w_values, w_rhs) = jax.value_and_grad(_sum_objective(_dense_terms, terms),
                                                 argnums=(0, 1))(values, rhs)
    assert_allclose(value, want, rtol=1e-11)
    for got, ref in zip(g_values + g_rhs, w_values + w_rhs, strict=True):
        assert_allclose(got, ref, rtol=1e-8, atol=1e-10)
    # every output, not only the sum: each term's logdet and solution
    for (ld, x), (p, v, r, _) in zip(cholmod_many.logdet_and_solve_many(
            [(p, v, r) for p, v, r, _ in terms]), terms, strict=True):
        want_ld, want_x = dense.logdet_and_solve(p, v, r)
        assert_allclose(ld, want_ld, rtol=1e-12)
        assert_allclose(x, want_x, rtol=1e-10, atol=1e-12)


def test_same_gradient_as_term_by_term_and_repeatable(rng):
    """The batched operation and one ``logdet_and_solve`` per term give the same numbers (the
    same factorisations), and a second evaluation reuses the prefetched factors exactly."""
    terms = _terms(rng)
    values = tuple(v for _, v, _, _ in terms)
    rhs = tuple(r for _, _, r, _ in terms)
    single = _sum_objective(
        lambda items: [cholmod.logdet_and_solve(p, v, r) for p, v, r in items], terms)
    many = _sum_objective(cholmod_many.logdet_and_solve_many, terms)
    vg_many = jax.jit(jax.value_and_grad(many, argnums=(0, 1)))
    a = vg_many(values, rhs)
    b = jax.jit(jax.value_and_grad(single, argnums=(0, 1)))(values, rhs)
    c = vg_many(values, rhs)
    for x, y, z in zip(jax.tree.leaves(a), jax.tree.leaves(b), jax.tree.leaves(c), strict=True):
        assert_allclose(x, y, rtol=1e-13, atol=1e-15)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(z))


def test_a_term_that_is_not_positive_definite_gives_nan_for_that_term_only(rng):
    terms = _terms(rng)[:2]
    pattern, values, _rhs, _ = terms[0]
    bad = values.at[pattern.diag_index].set(-1.0)  # every pivot negative
    values2 = (bad, terms[1][1])

    def f(vals):
        out = cholmod_many.logdet_and_solve_many(
            [(p, v, r) for (p, _, r, _), v in zip(terms, vals, strict=True)])
        return out[0][0] + jnp.sum(out[0][1]), out[1][0] + jnp.sum(out[1][1])

    (first, second) = jax.jit(f)(values2)
    assert np.isnan(first)
    want = dense.logdet_and_solve(terms[1][0], terms[1][1], terms[1][2])
    assert_allclose(second, want[0] + jnp.sum(want[1]), rtol=1e-10)
    grads = jax.jit(jax.grad(lambda v: f(v)[0]))(values2)
    assert np.all(np.isnan(grads[0]))


def test_a_failed_background_inversion_gives_nan_not_an_exception(rng, monkeypatch,
                                                                 background_pool):
    terms = _terms(rng)[:2]

    def broken(*args):
        raise RuntimeError("simulated failure inside the background inversion")

    monkeypatch.setattr(cholmod, "_inverse_on_pattern", broken)
    values = tuple(v * 1.37 for _, v, _, _ in terms)  # values no cached factor holds
    f = _sum_objective(cholmod_many.logdet_and_solve_many,
                       [(p, None, None, w) for p, _, _, w in terms])
    g = jax.jit(jax.grad(f))(values, tuple(r for _, _, r, _ in terms))
    assert all(np.all(np.isnan(x)) for x in g)
    state = cholmod.analyze(terms[0][0])
    assert "simulated failure" in state.last_error


def test_bad_calls_are_refused(rng):
    pattern, values, rhs = problem_case("grid", rng)
    with pytest.raises(InputError, match="at least one"):
        cholmod_many.logdet_and_solve_many([])
    with pytest.raises(InputError, match="only once"):
        cholmod_many.logdet_and_solve_many([(pattern, values, rhs), (pattern, values, rhs)])
    with pytest.raises(InputError, match="shape"):
        cholmod_many.logdet_and_solve_many([(pattern, values[:-1], rhs)])


@pytest.fixture
def background_pool(monkeypatch):
    """A one-thread background pool even on a one-core machine (where prefetching is off)."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    monkeypatch.setitem(cholmod._PREFETCH, "pool", pool)
    yield pool
    pool.shutdown()


def test_prefetched_inverse_is_the_selected_inverse(rng, background_pool):
    """The background inversion is B⁻¹ on the pattern (dense inverse), for new values too,
    and a refactorisation before it is used drops it for the new values' own."""
    pattern, values, _rhs = problem_case("grid", rng)
    a = randomised_values(pattern.to_scipy(np.asarray(values)), rng)
    pattern2 = SparsePattern.from_scipy(a)
    state = cholmod.analyze(pattern2)
    v0 = pattern2.values_from_scipy(a)
    for v in (v0, 1.5 * v0, 2.0 * v0):
        with state.lock:
            assert state._ensure_factor(np.asarray(v), prefetch=True)
            assert state._zfuture is not None  # started in the background
            if v is not v0:
                assert state._ensure_factor(np.asarray(v) * 1.01, prefetch=True)  # replaced
                v = v * 1.01  # noqa: PLW2901 - the values now factorised, checked below
            z = state._selected_inverse_locked()
        inv = np.linalg.inv(pattern2.to_scipy(np.asarray(v)).toarray())
        assert_allclose(z, inv[pattern2.rows, pattern2.cols], rtol=1e-10, atol=1e-13)


def test_a_queued_inversion_is_taken_back_by_the_waiting_thread(rng, background_pool,
                                                                  monkeypatch):
    """With the pool's only thread busy, every prefetched inversion is still queued when the
    backward pass needs it: the pass cancels it and inverts in its own thread (none runs in
    the pool), and the gradients still equal the dense reference's."""
    import threading

    terms = _terms(rng)
    values = tuple(v for _, v, _, _ in terms)
    rhs = tuple(r for _, _, r, _ in terms)
    threads = []
    inverse = cholmod._inverse_on_pattern

    def recording(*args):
        threads.append(threading.current_thread())
        return inverse(*args)

    monkeypatch.setattr(cholmod, "_inverse_on_pattern", recording)
    release = threading.Event()
    blocker = background_pool.submit(release.wait, 60)
    try:
        many = _sum_objective(
            lambda items: cholmod_many.logdet_and_solve_many(items, prefetch_inverse=True), terms)
        value, (g_values, g_rhs) = jax.value_and_grad(many, argnums=(0, 1))(values, rhs)
    finally:
        release.set()
        blocker.result()
    assert threads == [threading.current_thread()] * len(terms)
    want, (w_values, w_rhs) = jax.value_and_grad(_sum_objective(_dense_terms, terms),
                                                 argnums=(0, 1))(values, rhs)
    assert_allclose(value, want, rtol=1e-11)
    for got, ref in zip(g_values + g_rhs, w_values + w_rhs, strict=True):
        assert_allclose(got, ref, rtol=1e-8, atol=1e-10)


def _run_in_child(fn) -> int:
    """Fork; run ``fn()`` in the child (exit 0 if it returns True); the child's exit code, or
    a failure when it does not finish within 60 s."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 2
        finally:
            os._exit(code)
    deadline = time.time() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.time() > deadline:
            os.kill(pid, 9)
            pytest.fail("the forked child's prefetched inversion never finished")
        time.sleep(0.05)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
@pytest.mark.filterwarnings(r"ignore:os.fork\(\) was called:RuntimeWarning")  # JAX's, on purpose
def test_a_forked_child_inverts_without_the_parents_threads(rng, background_pool,
                                                            monkeypatch):
    """The child has none of the parent's threads. A new inversion there needs a new pool,
    and one the parent had started (still running at the fork) is done again in the child:
    waiting for it would never end."""
    pattern, values, _rhs = problem_case("grid", rng)
    state = cholmod.analyze(pattern)

    def want(scale):
        inv = np.linalg.inv(pattern.to_scipy(np.asarray(values) * scale).toarray())
        return inv[pattern.rows, pattern.cols]

    def invert(scale):
        with state.lock:
            state._ensure_factor(np.asarray(values) * scale, prefetch=True)
            return np.allclose(state._selected_inverse_locked(), want(scale), rtol=1e-10)

    assert invert(1.1)  # the parent's pool is running
    assert _run_in_child(lambda: invert(1.3)) == 0
    # an inversion still running in the parent's thread at the fork
    real = cholmod._inverse_on_pattern

    def slow(*args):
        time.sleep(1.0)
        return real(*args)

    monkeypatch.setattr(cholmod, "_inverse_on_pattern", slow)
    with state.lock:
        state._ensure_factor(np.asarray(values) * 1.7, prefetch=True)
    assert _run_in_child(lambda: invert(1.7)) == 0
    assert invert(1.7)  # and the parent still gets its own


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
@pytest.mark.filterwarnings(r"ignore:os.fork\(\) was called:RuntimeWarning")  # JAX's, on purpose
def test_a_forked_child_inverts_after_a_foreign_thread_limited_blas(rng):
    """A thread Python did not start (JAX's host callbacks, a C library's) took control of
    OpenBLAS's limits in the parent; in the child that thread is gone, and asking whether it
    lives fails. The child must clear it and invert."""
    import _thread
    import threading

    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not hasattr(getattr(threadpoolctl, "OpenBLASController", None),
                   "clear_controlling_thread"):
        pytest.skip("this threadpoolctl has no controlling thread")
    threadpoolctl.OpenBLASController.clear_controlling_thread(force=True)
    done = threading.Event()

    def foreign():
        with single_blas_thread():
            pass
        done.set()

    _thread.start_new_thread(foreign, ())  # a _DummyThread to threading
    assert done.wait(30)
    pattern, values, _rhs = problem_case("banded", rng)
    state = cholmod.analyze(pattern)
    want = np.linalg.inv(pattern.to_scipy(np.asarray(values)).toarray())[pattern.rows,
                                                                           pattern.cols]

    def invert():
        with state.lock:
            state._ensure_factor(np.asarray(values), prefetch=True)
            return np.allclose(state._selected_inverse_locked(), want, rtol=1e-10)

    assert _run_in_child(invert) == 0
