"""Dense reference backend (docs/sparse_vjp.md (backends); T13, T17): always runs, with or without
CHOLMOD.

Compared with numpy's ``slogdet`` / ``solve`` (independent algorithms: LU) and with central
finite differences; checked to give NaN on a matrix that is not positive definite.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from geogp.exceptions import InputError
from geogp.linalg import HAVE_CHOLMOD, SparsePattern, dense
from geogp.linalg import logdet_and_solve as default_logdet_and_solve

from _reference.assertions import assert_allclose
from _reference.sparse_spd import grid_laplacian, random_spd, randomised_values

solve_jit = jax.jit(dense.logdet_and_solve, static_argnums=0)


@pytest.mark.parametrize("k", [None, 3])
def test_matches_numpy(k, rng):
    a = random_spd(60, 0.05, rng)
    p = SparsePattern.from_scipy(a)
    rhs = rng.standard_normal((60,) if k is None else (60, k))
    logdet, x = solve_jit(p, p.values_from_scipy(a), rhs)
    sign, want = np.linalg.slogdet(a.toarray())
    assert sign == 1.0
    assert_allclose(logdet, want, rtol=1e-12)
    assert_allclose(x, np.linalg.solve(a.toarray(), rhs), rtol=1e-10, atol=1e-13)
    assert x.shape == rhs.shape


def test_to_dense_is_tril_plus_transpose_minus_diagonal(rng):
    a = randomised_values(grid_laplacian(4, 3), rng)
    p = SparsePattern.from_scipy(a)
    np.testing.assert_array_equal(dense.to_dense(p, p.values_from_scipy(a)), a.toarray())


def test_gradient_matches_finite_differences(rng):
    a = random_spd(8, 0.3, rng)
    p = SparsePattern.from_scipy(a)
    values = jnp.asarray(p.values_from_scipy(a))
    rhs = jnp.asarray(rng.standard_normal(8))

    def f(v, b):
        logdet, x = dense.logdet_and_solve(p, v, b)
        return logdet + jnp.sum(jnp.cos(x))

    check_grads(jax.jit(f), (values, rhs), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_not_positive_definite_gives_nan(rng):
    a = randomised_values(grid_laplacian(4, 3), rng).tolil()
    a[2, 2] = -3.0
    p = SparsePattern.from_scipy(a.tocsc())
    logdet, _ = solve_jit(p, p.values_from_scipy(a.tocsc()), np.ones(12))
    assert np.isnan(logdet)


def test_rejects_float32_and_bad_shapes(rng):
    a = random_spd(5, 0.4, rng)
    p = SparsePattern.from_scipy(a)
    values = p.values_from_scipy(a)
    with pytest.raises(InputError, match="float64"):
        dense.logdet_and_solve(p, values.astype(np.float32), np.ones(5))
    with pytest.raises(InputError, match=rf"values of shape \({p.nnz},\)"):
        dense.logdet_and_solve(p, values[:-1], np.ones(5))
    with pytest.raises(InputError, match="rhs of shape"):
        dense.logdet_and_solve(p, values, np.ones(4))
    with pytest.raises(InputError, match="SparsePattern"):
        dense.logdet_and_solve(a, values, np.ones(5))


def test_default_backend_follows_availability():
    if HAVE_CHOLMOD:
        from geogp.linalg import cholmod

        assert default_logdet_and_solve is cholmod.logdet_and_solve
    else:  # pragma: no cover - depends on the installation
        assert default_logdet_and_solve is dense.logdet_and_solve
