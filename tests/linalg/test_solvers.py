"""The Solver object (geogp.linalg.solvers): each backend equals the dense reference, it says
whether it batches, batching gives the same values and gradients, and bad backends are refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from geogp.exceptions import InputError
from geogp.linalg import HAVE_CHOLMOD, SparsePattern
from geogp.linalg.solvers import Solver

BACKENDS = ["dense"] + (["lapack", "cholmod"] if HAVE_CHOLMOD else [])


def _system(rng, n=30):
    a = sp.random(n, n, density=0.15, random_state=int(rng.integers(1 << 30)))
    b = (a @ a.T + n * sp.identity(n)).tocsc()
    pattern = SparsePattern.from_scipy(sp.tril(b).tocsc())
    return b.toarray(), pattern, pattern.values_from_scipy(sp.tril(b).tocsc()), rng.normal(size=n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_equals_dense_algebra(rng, backend):
    dense_b, pattern, values, rhs = _system(rng)
    logdet, x = Solver(backend)(pattern, values, rhs)
    assert float(logdet) == pytest.approx(np.linalg.slogdet(dense_b)[1], rel=1e-12)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(dense_b, rhs), rtol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_solve_many_equals_one_by_one_with_gradients(rng, backend):
    systems = [_system(rng, n) for n in (20, 25, 30)]
    solver = Solver(backend)
    assert solver.batches == (backend == "cholmod")

    def total(scale, many):
        items = [(p, v * scale, r) for _, p, v, r in systems]
        out = solver.solve_many(items) if many else [solver(*it) for it in items]
        return sum(ld + jnp.sum(x) for ld, x in out)

    a, ga = jax.value_and_grad(total)(1.3, True)
    b, gb = jax.value_and_grad(total)(1.3, False)
    assert float(a) == pytest.approx(float(b), rel=1e-12)
    assert float(ga) == pytest.approx(float(gb), rel=1e-10)
    # the derivative in the scale against central differences
    h = 1e-6
    fd = (float(total(1.3 + h, True)) - float(total(1.3 - h, True))) / (2 * h)
    assert float(ga) == pytest.approx(fd, rel=1e-6)


def test_equal_solvers_compare_and_hash_alike_and_bad_backends_are_refused():
    assert Solver("cholmod", "nesdis") == Solver("cholmod", "nesdis")
    assert hash(Solver("dense")) == hash(Solver("dense"))
    assert Solver("cholmod", "amd") != Solver("cholmod", "nesdis")
    with pytest.raises(InputError, match="solver backend"):
        Solver("umfpack")
