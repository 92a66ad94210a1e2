"""SparsePattern: canonical lower-triangle storage, conversions, use under jit (docs/sparse_vjp.md,
adjoint)."""

from __future__ import annotations

import pickle
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from geogp.exceptions import InputError
from geogp.linalg import SparsePattern

from _reference.sparse_spd import random_spd


def test_from_coo_canonicalises_triangle_duplicates_and_diagonal():
    p = SparsePattern.from_coo(np.array([0, 2, 1, 2]), np.array([2, 0, 3, 0]), 4)
    assert p.n == 4
    # (2,0) given in both triangles and twice → once; (1,3) → (3,1); diagonal added
    assert list(zip(p.rows.tolist(), p.cols.tolist(), strict=True)) == [
        (0, 0),
        (2, 0),
        (1, 1),
        (3, 1),
        (2, 2),
        (3, 3),
    ]
    assert p.nnz == 6
    assert p.rows.dtype == np.int64 and p.cols.dtype == np.int64
    np.testing.assert_array_equal(p.indptr, [0, 2, 4, 5, 6])
    np.testing.assert_array_equal(p.rows[p.diag_index], np.arange(4))
    assert not p.rows.flags.writeable


def test_from_scipy_takes_lower_triangle_and_keeps_explicit_zeros(rng):
    a = random_spd(30, 0.1, rng).tolil()
    a[5, 2] = 0.0  # explicit zero in the pattern?
    a = sp.csc_matrix(a)
    dense = a.toarray()
    coo = a.tocoo()
    lower = {(i, j) for i, j in zip(coo.row, coo.col, strict=True) if i >= j}
    expected = lower | {(i, i) for i in range(30)}
    p = SparsePattern.from_scipy(a)
    assert set(zip(p.rows.tolist(), p.cols.tolist(), strict=True)) == expected
    keys = p.cols * p.n + p.rows
    assert np.all(np.diff(keys) > 0)  # CSC order
    values = p.values_from_scipy(a)
    np.testing.assert_array_equal(values, dense[p.rows, p.cols])
    np.testing.assert_array_equal(p.to_scipy(values).toarray(), dense)


def test_lower_csc_shares_values_and_is_sorted(rng):
    a = random_spd(20, 0.2, rng)
    p = SparsePattern.from_scipy(a)
    values = p.values_from_scipy(a)
    low = p.to_scipy_lower(values)
    assert low.indices.dtype == np.int32
    np.testing.assert_array_equal(low.toarray(), np.tril(a.toarray()))
    assert low.has_sorted_indices


def test_errors_state_what_was_expected():
    p = SparsePattern.from_coo(np.array([1]), np.array([0]), 3)
    off_pattern = sp.csc_matrix(np.array([[1.0, 0, 0], [0, 1, 0], [2.0, 0, 1]]))
    with pytest.raises(InputError, match=r"\(2, 0\) is not on the sparsity pattern"):
        p.values_from_scipy(off_pattern)
    with pytest.raises(InputError, match="shape"):
        p.to_scipy(np.ones(2))
    with pytest.raises(InputError, match="square"):
        SparsePattern.from_scipy(sp.csc_matrix(np.ones((2, 3))))
    with pytest.raises(InputError, match="sparse"):
        SparsePattern.from_scipy(np.eye(3))
    with pytest.raises(InputError, match="range"):
        SparsePattern.from_coo(np.array([3]), np.array([0]), 3)


def test_pickle_keeps_indices_and_drops_the_cache(rng):
    a = random_spd(12, 0.3, rng)
    p = SparsePattern.from_scipy(a)
    p._cache["anything"] = threading.Lock()  # e.g. a CHOLMOD analysis with its lock
    q = pickle.loads(pickle.dumps(p))
    assert q is not p and q.n == p.n and not q._cache
    np.testing.assert_array_equal(q.rows, p.rows)
    np.testing.assert_array_equal(q.cols, p.cols)


def test_hashable_by_identity_and_static_under_jit(rng):
    a = random_spd(10, 0.3, rng)
    p1, p2 = SparsePattern.from_scipy(a), SparsePattern.from_scipy(a)
    assert p1 != p2 and hash(p1) != hash(p2) and p1 == p1  # noqa: PLR0124 - reflexive

    @jax.jit
    def closed_over(v):
        return jnp.sum(v[p1.diag_index])

    def as_static(p, v):
        return jnp.zeros(p.n).at[p.rows].add(v)

    v = jnp.asarray(p1.values_from_scipy(a))
    np.testing.assert_allclose(closed_over(v), np.trace(a.toarray()))
    out = jax.jit(as_static, static_argnums=0)(p1, v)
    np.testing.assert_allclose(out, np.bincount(p1.rows, weights=np.asarray(v)))


def test_sorted_unique_equals_numpy_unique():
    """The sort-based unique of the pattern constructor against ``np.unique`` (empty, one
    key, heavy duplication and large keys)."""
    from geogp.linalg.pattern import _sorted_unique

    rng = np.random.default_rng(5)
    cases = [np.zeros(0, dtype=np.int64), np.array([7]), rng.integers(0, 5, 1000),
             rng.integers(0, 2**40, 20_000), np.repeat(rng.integers(-50, 50, 300), 3)]
    for keys in cases:
        np.testing.assert_array_equal(_sorted_unique(keys), np.unique(keys))
