"""Dense LAPACK ``logdet_and_solve`` (geogp.linalg.lapack) against the JAX dense reference.

Values against numpy's slogdet and the dense reference, gradients against JAX autodiff of the
dense reference and finite differences, under jit and with several right-hand sides; not
positive definite: NaN under tracing, NotPositiveDefiniteError eagerly (docs/sparse_vjp.md).
"""

from __future__ import annotations

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

pytest.importorskip("sksparse.cholmod")  # the host logic is shared with the CHOLMOD backend

from geogp.exceptions import NotPositiveDefiniteError
from geogp.linalg import SparsePattern, dense, lapack

dense_jit = jax.jit(dense.logdet_and_solve, static_argnums=0)
CASES = ["random10", "random200", "grid", "banded", "full60"]


_matrix, _problem = matrix_case, problem_case


_objective = logdet_solve_objective


@pytest.mark.parametrize("name", CASES)
def test_value_and_gradient_match_the_dense_reference(name, rng):
    pattern, values, rhs = _problem(name, rng)
    logdet, x = lapack.logdet_and_solve(pattern, values, rhs)
    sign, want = np.linalg.slogdet(pattern.to_scipy(np.asarray(values)).toarray())
    assert sign == 1.0
    assert_allclose(logdet, want, rtol=1e-12)
    assert_allclose(x, dense_jit(pattern, values, rhs)[1], rtol=1e-10, atol=1e-12)
    w = jnp.asarray(rng.standard_normal(rhs.shape))
    got = jax.jit(jax.grad(_objective(lapack, pattern, w), argnums=(0, 1)))(values, rhs)
    ref = jax.jit(jax.grad(_objective(dense, pattern, w), argnums=(0, 1)))(values, rhs)
    for g, r in zip(got, ref, strict=True):
        assert_allclose(g, r, rtol=1e-8, atol=1e-10)


def test_several_right_hand_sides_and_finite_differences(rng):
    pattern, values, rhs = _problem("random10", rng, k=3)
    w = jnp.asarray(rng.standard_normal(rhs.shape))
    f = _objective(lapack, pattern, w)
    got = jax.grad(f, argnums=(0, 1))(values, rhs)
    ref = jax.grad(_objective(dense, pattern, w), argnums=(0, 1))(values, rhs)
    for g, r in zip(got, ref, strict=True):
        assert_allclose(g, r, rtol=1e-8, atol=1e-10)
    check_grads(f, (values, rhs), order=1, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_not_positive_definite(rng):
    a = randomised_values(grid_laplacian(6, 5), rng).tolil()
    a[7, 7] = -5.0
    a = sp.csc_matrix(a)
    pattern = SparsePattern.from_scipy(a)
    values = jnp.asarray(pattern.values_from_scipy(a))
    rhs = jnp.ones(pattern.n)
    with pytest.raises(NotPositiveDefiniteError, match="positive definite"):
        lapack.logdet_and_solve(pattern, values, rhs)

    def f(v):
        logdet, x = lapack.logdet_and_solve(pattern, v, rhs)
        return logdet + jnp.sum(x)

    value, grad = jax.jit(jax.value_and_grad(f))(values)
    assert np.isnan(value) and np.all(np.isnan(grad))
    good = jnp.asarray(pattern.values_from_scipy(randomised_values(sp.csc_matrix(
        grid_laplacian(6, 5)), rng)))
    assert np.isfinite(jax.jit(f)(good))
