"""The scikit-sparse adapters (docs/sparse_vjp.md (backends); T16).

scikit-sparse 0.5 needs SuiteSparse ≥ 7.4 and cannot be built here, so its adapter runs against
a mock that mimics the 0.5 API (``CholeskyFactor(A, lower=, order=, supernodal_mode=)``,
``.factorize``, ``.solve``, ``.perm``, ``.factor``, ``.is_ll``) with dense numpy algebra: an
LLᵀ factor that raises when the matrix is not positive definite ("supernodal"), or an LDLᵀ
factor that silently produces negative pivots and a NaN log-determinant ("simplicial"), as
CHOLMOD does. Its "amd" ordering is reverse Cuthill–McKee, a genuine non-identity permutation.
"""

from __future__ import annotations

import types
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from geogp.exceptions import NotPositiveDefiniteError
from geogp.linalg import SparsePattern, dense
from geogp.linalg._sksparse import CholmodBackendError, make_backend
from geogp.linalg.cholmod import CholmodFactorization

from _reference.assertions import assert_allclose
from _reference.sparse_spd import grid_laplacian, random_spd, randomised_values

dense_jit = jax.jit(dense.logdet_and_solve, static_argnums=0)


class CholmodNotPositiveDefiniteError(Exception):
    """Same class name as scikit-sparse's."""


def _ldl(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unpivoted LDLᵀ (what a simplicial factorisation does; no check on the pivots' sign)."""
    n = c.shape[0]
    unit, d = np.eye(n), np.zeros(n)
    for j in range(n):
        d[j] = c[j, j] - (unit[j, :j] ** 2) @ d[:j]
        for i in range(j + 1, n):
            unit[i, j] = (c[i, j] - (unit[i, :j] * unit[j, :j]) @ d[:j]) / d[j]
    return unit, d


def _full_lower_csc(m: np.ndarray) -> sp.csc_array:
    """Lower triangle with every entry stored (explicit zeros kept): a closed pattern."""
    n = m.shape[0]
    rows, cols = np.tril_indices(n)
    order = np.lexsort((rows, cols))
    rows, cols = rows[order], cols[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=n))])
    return sp.csc_array((m[rows, cols], rows, indptr), shape=(n, n))


class FakeCholeskyFactor:
    """Mimics ``sksparse.cholmod.CholeskyFactor`` of scikit-sparse 0.5.x (dense inside)."""

    created: ClassVar[list[dict]] = []
    bad_perm = False

    def __init__(self, A, *, lower=True, order="default", sym_kind=None, supernodal_mode=None):
        FakeCholeskyFactor.created.append(
            {"lower": lower, "order": order, "supernodal_mode": supernodal_mode}
        )
        self._lower, self._mode = lower, supernodal_mode
        n = A.shape[0]
        if order in (None, "natural"):
            self._perm = np.arange(n)
        else:
            sym = sp.csr_matrix(A + A.T)
            self._perm = np.asarray(reverse_cuthill_mckee(sym, symmetric_mode=True), np.int64)
        if FakeCholeskyFactor.bad_perm:
            self._perm = np.zeros(n, dtype=np.int64)
        self.solve_calls: list[dict] = []

    def factorize(self, A, ldl=None, beta=0.0):
        low = sp.tril(sp.csc_matrix(A)) if self._lower else sp.triu(sp.csc_matrix(A)).T
        b = (low + sp.tril(low, -1).T).toarray()
        c = b[np.ix_(self._perm, self._perm)]
        if self._mode == "simplicial":
            unit, d = _ldl(c)
            self.is_ll = False
            self._ld = unit - np.eye(len(d)) + np.diag(d)
            self._solve = lambda r: np.linalg.solve(unit @ np.diag(d) @ unit.T, r)
            self._logdet = float(np.sum(np.log(d))) if np.all(d > 0) else float("nan")
        else:
            try:
                chol = np.linalg.cholesky(c)
            except np.linalg.LinAlgError as exc:
                raise CholmodNotPositiveDefiniteError("not positive definite") from exc
            self.is_ll = True
            self._ld = chol
            self._solve = lambda r: np.linalg.solve(chol @ chol.T, r)
            self._logdet = 2.0 * float(np.sum(np.log(np.diag(chol))))
        return self

    @property
    def perm(self):
        return self._perm

    @property
    def factor(self):
        return _full_lower_csc(self._ld)

    def solve(self, b):
        self.solve_calls.append({})
        x = np.empty_like(b)
        x[self._perm] = self._solve(b[self._perm])
        return x

    def logdet(self):
        return self._logdet


class FakeCholeskyFactorWithSystem(FakeCholeskyFactor):
    def solve(self, b, system="A"):
        assert system == "A"
        out = super().solve(b)
        self.solve_calls[-1] = {"system": system}
        return out


def _fake05(factor_class=FakeCholeskyFactor) -> types.SimpleNamespace:
    return types.SimpleNamespace(
        __name__="fake_sksparse05",
        CholeskyFactor=factor_class,
        CholmodNotPositiveDefiniteError=CholmodNotPositiveDefiniteError,
    )


@pytest.fixture(autouse=True)
def _reset_fake():
    FakeCholeskyFactor.created.clear()
    FakeCholeskyFactor.bad_perm = False
    yield
    FakeCholeskyFactor.bad_perm = False


def _problem(rng, n_grid=(6, 5)):
    a = randomised_values(grid_laplacian(*n_grid), rng)
    pattern = SparsePattern.from_scipy(a)
    values = jnp.asarray(pattern.values_from_scipy(a))
    return pattern, values, jnp.asarray(rng.standard_normal(a.shape[0]))


@pytest.mark.parametrize("mode", ["supernodal", "simplicial"])
@pytest.mark.parametrize("factor_class", [FakeCholeskyFactor, FakeCholeskyFactorWithSystem])
def test_v05_adapter_value_and_gradient_match_dense(mode, factor_class, rng):
    pattern, values, rhs = _problem(rng)
    state = CholmodFactorization(pattern, ordering="amd", mode=mode, module=_fake05(factor_class))
    assert FakeCholeskyFactor.created == [{"lower": True, "order": "amd", "supernodal_mode": mode}]
    assert not np.array_equal(state.backend.perm, np.arange(pattern.n))

    def f(solver):
        def obj(v, b):
            logdet, x = solver(v, b)
            return logdet + jnp.sum(x * b) + jnp.sum(x[:3])

        return jax.jit(jax.value_and_grad(obj, argnums=(0, 1)))

    got = f(state.logdet_and_solve)(values, rhs)
    want = f(lambda v, b: dense.logdet_and_solve(pattern, v, b))(values, rhs)
    assert_allclose(got[0], want[0], rtol=1e-12)
    for g, w in zip(got[1], want[1], strict=True):
        assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    if factor_class is FakeCholeskyFactorWithSystem:
        assert {"system": "A"} in state.backend._factor.solve_calls


@pytest.mark.parametrize("mode", ["supernodal", "simplicial"])
def test_v05_adapter_not_positive_definite(mode, rng):
    a = randomised_values(grid_laplacian(5, 4), rng).tolil()
    a[3, 3] = -4.0
    a = sp.csc_matrix(a)
    pattern = SparsePattern.from_scipy(a)
    values = pattern.values_from_scipy(a)
    state = CholmodFactorization(pattern, ordering="amd", mode=mode, module=_fake05())
    with pytest.raises(NotPositiveDefiniteError, match="positive definite"):
        state.logdet_and_solve(values, np.ones(pattern.n))
    with pytest.raises(NotPositiveDefiniteError):
        state.check_positive_definite(values)
    logdet, x = jax.jit(state.logdet_and_solve)(jnp.asarray(values), jnp.ones(pattern.n))
    assert np.isnan(logdet) and np.all(np.isnan(x))
    assert np.isnan(dense_jit(pattern, values, np.ones(pattern.n))[0])


def test_v05_invalid_permutation_is_rejected(rng):
    pattern, _, _ = _problem(rng)
    FakeCholeskyFactor.bad_perm = True
    with pytest.raises(CholmodBackendError, match="invalid permutation"):
        make_backend(pattern, "amd", "auto", module=_fake05())


def test_natural_ordering_must_give_identity(rng):
    pattern, _, _ = _problem(rng)
    reversed_perm = np.arange(pattern.n)[::-1].copy()
    fake04 = types.SimpleNamespace(
        __name__="fake_sksparse04",
        analyze=lambda A, mode, ordering_method: types.SimpleNamespace(P=lambda: reversed_perm),
    )
    make_backend(pattern, "amd", "auto", module=fake04)  # a valid permutation is accepted
    with pytest.raises(CholmodBackendError, match="natural"):
        make_backend(pattern, "natural", "auto", module=fake04)


def test_v04_invalid_permutation_is_rejected(rng):
    pattern, _, _ = _problem(rng)
    fake04 = types.SimpleNamespace(
        __name__="fake_sksparse04",
        analyze=lambda A, mode, ordering_method: types.SimpleNamespace(
            P=lambda: np.arange(pattern.n - 1)
        ),
    )
    with pytest.raises(CholmodBackendError, match="invalid permutation"):
        make_backend(pattern, "amd", "auto", module=fake04)


def test_unknown_module_and_arguments_are_rejected(rng):
    pattern, _, _ = _problem(rng)
    with pytest.raises(CholmodBackendError, match="neither"):
        make_backend(pattern, module=types.SimpleNamespace(__name__="empty"))
    with pytest.raises(ValueError, match="ordering"):
        make_backend(pattern, ordering="fancy", module=_fake05())
    with pytest.raises(ValueError, match="mode"):
        make_backend(pattern, mode="fast", module=_fake05())


def test_v04_adapter_passes_mode_and_ordering_explicitly(rng, monkeypatch):
    skc = pytest.importorskip("sksparse.cholmod")
    seen = []
    real = skc.analyze

    def recording(*args, **kwargs):
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(skc, "analyze", recording)
    a = random_spd(30, 0.1, rng)
    backend = make_backend(SparsePattern.from_scipy(a), "natural", "simplicial")
    assert seen == [{"mode": "simplicial", "ordering_method": "natural"}]
    np.testing.assert_array_equal(backend.perm, np.arange(30))
