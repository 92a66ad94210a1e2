"""CHOLMOD ``logdet_and_solve`` vs the dense reference (docs/sparse_vjp.md; T13, T15, T16).

Every value and gradient is compared with :mod:`geogp.linalg.dense` (dense Cholesky, gradients
by JAX autodiff), with the closed-form adjoint of docs/sparse_vjp.md (adjoint) written with a dense
inverse, or with finite differences (``jax.test_util.check_grads``).
"""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.test_util import check_grads

from _reference.assertions import assert_allclose
from _reference.sparse_spd import (
    grid_laplacian,
    logdet_solve_objective,
    matrix_case,
    problem_case,
    randomised_values,
)

pytest.importorskip("sksparse.cholmod")

from geogp.exceptions import NotPositiveDefiniteError
from geogp.linalg import SparsePattern, cholmod, dense

CASES = ["random10", "random200", "grid", "banded"]
# The reference, jitted once per pattern (eager JAX compiles every primitive separately).
dense_jit = jax.jit(dense.logdet_and_solve, static_argnums=0)


_matrix, _problem = matrix_case, problem_case


def _grad(f):
    """Jitted gradient w.r.t. (values, rhs): one compilation instead of one per primitive."""
    return jax.jit(jax.grad(f, argnums=(0, 1)))


_objective = logdet_solve_objective


@pytest.mark.parametrize("name", CASES)
def test_value_matches_dense(name, rng):
    pattern, values, rhs = _problem(name, rng)
    logdet, x = cholmod.logdet_and_solve(pattern, values, rhs)
    logdet_d, x_d = dense_jit(pattern, values, rhs)
    sign, want = np.linalg.slogdet(pattern.to_scipy(np.asarray(values)).toarray())
    assert sign == 1.0
    assert_allclose(logdet, want, rtol=1e-12)
    assert_allclose(logdet, logdet_d, rtol=1e-12)
    assert_allclose(x, x_d, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", CASES)
def test_gradient_matches_dense_autodiff(name, rng):
    pattern, values, rhs = _problem(name, rng)
    weights = jnp.asarray(rng.standard_normal(pattern.n))
    g = _grad(_objective(cholmod, pattern, weights))(values, rhs)
    g_d = _grad(_objective(dense, pattern, weights))(values, rhs)
    for got, want in zip(g, g_d, strict=True):
        assert_allclose(got, want, rtol=1e-8, atol=1e-10 * np.abs(want).max())


@pytest.mark.parametrize("which", ["logdet", "solution"])
def test_gradient_of_each_output_alone(which, rng):
    """δ̄ = 0 skips the selected inverse; γ̄ = 0 skips the adjoint solve."""
    pattern, values, rhs = _problem("grid", rng)
    index = 0 if which == "logdet" else 1

    def f(backend):
        return lambda v, b: jnp.sum(backend.logdet_and_solve(pattern, v, b)[index])

    g = _grad(f(cholmod))(values, rhs)
    g_d = _grad(f(dense))(values, rhs)
    for got, want in zip(g, g_d, strict=True):
        assert_allclose(got, want, rtol=1e-8, atol=1e-10 * max(np.abs(want).max(), 1.0))


def test_convention_a_matches_closed_form_adjoint(rng):
    """docs/sparse_vjp.md, convention (a): diagonal δ̄Z_ii − b̄_iγ_i; below 2δ̄Z_ij − (b̄_iγ_j +
    b̄_jγ_i)."""
    pattern, values, rhs = _problem("random200", rng)
    g_logdet, g_x = 0.8, rng.standard_normal(pattern.n)
    _, vjp = jax.vjp(lambda v, b: cholmod.logdet_and_solve(pattern, v, b), values, rhs)
    g_values, g_rhs = vjp((jnp.asarray(g_logdet), jnp.asarray(g_x)))
    b_mat = pattern.to_scipy(np.asarray(values)).toarray()
    inv = np.linalg.inv(b_mat)
    gamma = inv @ np.asarray(rhs)
    b_bar = inv @ g_x
    i, j = pattern.rows, pattern.cols
    want = 2 * g_logdet * inv[i, j] - (b_bar[i] * gamma[j] + b_bar[j] * gamma[i])
    want[i == j] /= 2
    assert_allclose(g_rhs, b_bar, rtol=1e-10)
    assert_allclose(g_values, want, rtol=1e-8, atol=1e-12)


def test_convention_b_both_triangles_through_symmetrisation(rng):
    """(b): both triangles stored; forward factors (V + Vᵀ)/2.

    Cotangent per stored entry: δ̄ Z_ij − ½(b̄_iγ_j + b̄_jγ_i) (docs/sparse_vjp.md, adjoint).
    """
    a = _matrix("random10", rng)
    pattern = SparsePattern.from_scipy(a)
    full = sp.coo_matrix(a)
    rows, cols = full.row, full.col
    v_full = jnp.asarray(full.data * (1 + 0.05 * rng.standard_normal(full.nnz)))  # V ≠ Vᵀ
    # Map both-triangle values to convention (a) with (V_ij + V_ji)/2 (lower position).
    keys = np.minimum(rows, cols) * pattern.n + np.maximum(rows, cols)
    pos = pattern.positions_of_keys(keys)
    scale = np.where(rows == cols, 1.0, 0.5)

    def to_lower(v):
        return jnp.zeros(pattern.nnz).at[pos].add(v * scale)

    rhs = jnp.asarray(rng.standard_normal(pattern.n))

    def f_sparse(v):
        logdet, x = cholmod.logdet_and_solve(pattern, to_lower(v), rhs)
        return logdet + jnp.sum(x * rhs)

    def f_dense(v):
        b = jnp.zeros((pattern.n, pattern.n)).at[rows, cols].add(v)
        b = (b + b.T) / 2
        return jnp.linalg.slogdet(b)[1] + rhs @ jnp.linalg.solve(b, rhs)

    g = jax.jit(jax.grad(f_sparse))(v_full)
    assert_allclose(g, jax.jit(jax.grad(f_dense))(v_full), rtol=1e-8, atol=1e-12)
    b_mat = np.zeros((pattern.n, pattern.n))
    np.add.at(b_mat, (rows, cols), np.asarray(v_full))
    inv = np.linalg.inv((b_mat + b_mat.T) / 2)
    gamma = inv @ np.asarray(rhs)
    b_bar = inv @ np.asarray(rhs)  # γ̄ = rhs for the term xᵀ rhs
    want = inv[rows, cols] - 0.5 * (b_bar[rows] * gamma[cols] + b_bar[cols] * gamma[rows])
    assert_allclose(g, want, rtol=1e-8, atol=1e-12)


def test_check_grads_finite_differences(rng):
    """Each stored entry is an independent parameter: finite differences see convention (a)."""
    pattern, values, rhs = _problem("random10", rng)

    def f(v, b):
        logdet, x = cholmod.logdet_and_solve(pattern, v, b)
        return logdet + jnp.sum(jnp.sin(x))

    check_grads(f, (values, rhs), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_check_grads_symmetric_parameterisation(rng):
    """A symmetric parameterisation B(θ) = B₀ + θ₁ E₁ + θ₂ E₂ (both triangles moved together)."""
    a = _matrix("random10", rng)
    pattern = SparsePattern.from_scipy(a)
    v0 = jnp.asarray(pattern.values_from_scipy(a))
    e1 = jnp.asarray(rng.uniform(size=pattern.nnz) * (pattern.rows != pattern.cols))
    e2 = jnp.asarray(np.where(pattern.rows == pattern.cols, 1.0, 0.0))
    rhs = jnp.asarray(rng.standard_normal(pattern.n))

    def f(theta):
        logdet, x = cholmod.logdet_and_solve(pattern, v0 + theta[0] * e1 + theta[1] * e2, rhs)
        return logdet - 0.5 * rhs @ x

    check_grads(f, (jnp.asarray([0.1, 0.3]),), order=1, modes=["rev"], atol=1e-7, rtol=1e-7)


def test_multiple_right_hand_sides(rng):
    pattern, values, rhs = _problem("grid", rng, k=3)
    weights = jnp.asarray(rng.standard_normal(rhs.shape))
    logdet, x = cholmod.logdet_and_solve(pattern, values, rhs)
    logdet_d, x_d = dense_jit(pattern, values, rhs)
    assert x.shape == rhs.shape
    assert_allclose(logdet, logdet_d, rtol=1e-12)
    assert_allclose(x, x_d, rtol=1e-10, atol=1e-12)
    g = _grad(_objective(cholmod, pattern, weights))(values, rhs)
    g_d = _grad(_objective(dense, pattern, weights))(values, rhs)
    for got, want in zip(g, g_d, strict=True):
        assert_allclose(got, want, rtol=1e-8, atol=1e-10 * np.abs(want).max())


def test_jit_vmap_grad_composed(rng):
    pattern, values, rhs = _problem("banded", rng)
    batch = values[None, :] * jnp.asarray(1.0 + 0.1 * rng.random((3, 1)))  # three SPD matrices
    weights = jnp.asarray(rng.standard_normal(pattern.n))

    def composed(backend):
        grad = jax.grad(_objective(backend, pattern, weights), argnums=(0, 1))
        return jax.jit(jax.vmap(grad, in_axes=(0, None)))

    g = composed(cholmod)(batch, rhs)
    g_d = composed(dense)(batch, rhs)
    for got, want in zip(g, g_d, strict=True):
        assert got.shape == want.shape
        assert_allclose(got, want, rtol=1e-8, atol=1e-10 * np.abs(want).max())
    # vmap over the right-hand side only, jitted value
    rhs_batch = jnp.asarray(rng.standard_normal((4, pattern.n)))
    fn = jax.jit(jax.vmap(lambda b: cholmod.logdet_and_solve(pattern, values, b), in_axes=0))
    logdet, x = fn(rhs_batch)
    logdet_d, x_d = jax.jit(jax.vmap(lambda b: dense.logdet_and_solve(pattern, values, b)))(
        rhs_batch
    )
    assert_allclose(logdet, logdet_d, rtol=1e-12)
    assert_allclose(x, x_d, rtol=1e-10, atol=1e-12)


def test_pattern_as_static_argument(rng):
    pattern, values, rhs = _problem("random10", rng)
    f = jax.jit(cholmod.logdet_and_solve, static_argnums=0)
    assert_allclose(f(pattern, values, rhs)[0], dense_jit(pattern, values, rhs)[0])


def test_symbolic_analysis_once_and_results_independent_of_ordering(rng, monkeypatch):
    import sksparse.cholmod as skc

    calls = []
    real_analyze = skc.analyze

    def counting_analyze(*args, **kwargs):
        calls.append(kwargs)
        return real_analyze(*args, **kwargs)

    monkeypatch.setattr(skc, "analyze", counting_analyze)
    pattern, values, rhs = _problem("grid", rng)
    value_and_grad = jax.jit(
        jax.value_and_grad(lambda v: cholmod.logdet_and_solve(pattern, v, rhs)[0])
    )
    results = []
    for t in range(4):  # four different matrices on the same pattern
        results.append(value_and_grad(values * (1.0 + 0.25 * t)))
    state = cholmod.analyze(pattern)
    assert len(calls) == 1, "symbolic analysis must run once per pattern"
    assert calls[0] == {"mode": "auto", "ordering_method": "amd"}  # passed explicitly
    assert state.backend.n_analyses == 1
    assert state.backend.n_factorizations == 4  # the backward pass reused each forward factor
    dense_value_and_grad = jax.jit(
        jax.value_and_grad(lambda v: dense.logdet_and_solve(pattern, v, rhs)[0])
    )
    for t, (val, grad) in enumerate(results):
        want = dense_value_and_grad(values * (1.0 + 0.25 * t))
        assert_allclose(val, want[0], rtol=1e-12)
        assert_allclose(grad, want[1], rtol=1e-9, atol=1e-12)
    for ordering in ("natural", "metis"):
        try:
            other = cholmod.logdet_and_solve(pattern, values, rhs, ordering=ordering)
        except Exception as exc:  # the missing-ordering error is a generic CHOLMOD error
            if "not installed" in str(exc).lower():
                continue
            raise
        base = cholmod.logdet_and_solve(pattern, values, rhs)
        assert_allclose(other[0], base[0], rtol=1e-10)
        assert_allclose(other[1], base[1], rtol=1e-10)


def _indefinite(rng):
    a = randomised_values(grid_laplacian(6, 5), rng).tolil()
    a[7, 7] = -5.0
    return sp.csc_matrix(a)


@pytest.mark.parametrize("mode", ["simplicial", "supernodal"])
def test_not_positive_definite_eager_raises(mode, rng):
    a = _indefinite(rng)
    pattern = SparsePattern.from_scipy(a)
    values = pattern.values_from_scipy(a)
    rhs = np.ones(pattern.n)
    with pytest.raises(NotPositiveDefiniteError, match="positive definite"):
        cholmod.logdet_and_solve(pattern, values, rhs, mode=mode)
    with pytest.raises(NotPositiveDefiniteError):
        cholmod.check_positive_definite(pattern, values, mode=mode)
    with pytest.raises(NotPositiveDefiniteError):
        cholmod.selected_inverse(pattern, values, mode=mode)
    assert np.isnan(dense_jit(pattern, values, rhs)[0])  # the reference agrees


@pytest.mark.parametrize("mode", ["simplicial", "supernodal"])
def test_not_positive_definite_traced_gives_nan(mode, rng):
    a = _indefinite(rng)
    pattern = SparsePattern.from_scipy(a)
    values = jnp.asarray(pattern.values_from_scipy(a))
    rhs = jnp.ones(pattern.n)

    def f(v):
        logdet, x = cholmod.logdet_and_solve(pattern, v, rhs, mode=mode)
        return logdet + jnp.sum(x)

    value, grad = jax.jit(jax.value_and_grad(f))(values)
    assert np.isnan(value)
    assert np.all(np.isnan(grad))
    # a positive definite matrix on the same pattern still works afterwards
    good = jnp.asarray(pattern.values_from_scipy(randomised_values(a, rng)))
    cholmod.check_positive_definite(pattern, good, mode=mode)
    assert np.isfinite(jax.jit(f)(good))


def test_concurrent_threads_share_the_factor_safely(rng, monkeypatch):
    """Threads factorise different matrices on one pattern; the lock keeps results correct.

    The backend is made to release the GIL right after each factorisation (as a binding that
    calls CHOLMOD without the GIL would), so that without the lock another thread would
    refactorise before this one solves.
    """
    pattern, values, rhs = _problem("grid", rng)
    scales = [1.0 + 0.3 * t for t in range(4)]
    want = [dense_jit(pattern, values * s, rhs) for s in scales]
    state = cholmod.CholmodFactorization(pattern)
    real_factorize = state.backend.factorize

    def factorize_then_yield(v):
        ok = real_factorize(v)
        time.sleep(0.002)
        return ok

    monkeypatch.setattr(state.backend, "factorize", factorize_then_yield)
    errors = []

    def work(t):
        v, b = np.asarray(values) * scales[t], np.asarray(rhs)
        for _ in range(5):
            logdet, x = state.host_forward(v, b)
            if not (np.allclose(logdet, want[t][0], rtol=1e-12) and np.allclose(x, want[t][1])):
                errors.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(scales))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
