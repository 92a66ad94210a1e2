"""Wavelet tables, basis layout, sparse Φ and statistics (docs/wavelets.md; T18, T20)."""

from __future__ import annotations

import numpy as np
import pytest

import geogp  # noqa: F401  (float64)
from geogp.exceptions import InputError, OutsideWindowError
from geogp.features.wavelet import make_basis
from geogp.features.wavelet_basis import FAMILIES, canonical_family, wavelet_table
from geogp.features.wavelet_statistics import wavelet_statistics

DB_FAMILIES = [f"db{p}" for p in range(2, 9)]


def _grid_values(table, which):
    """Table nodes k·2^{-L} (or a 2^{-12} grid for Haar) and the function there."""
    level = table.level if table.p > 1 else 12
    x = np.arange(table.support * 2**level + 1) / 2**level
    f = table.scaling(x) if which == "v" else table.wavelet(x)
    return x, f, 2.0**-level


def _int(f, h):
    """Trapezoid sum on the table nodes (f vanishes at both ends of the support)."""
    return h * (f.sum() - 0.5 * (f[0] + f[-1]))


@pytest.mark.parametrize("family", DB_FAMILIES)
def test_tabulated_tables_are_orthonormal(family):
    """T18: ∫v = 1, ∫w = 0, ∫v² = ∫w² = 1, vanishing moments, shift orthogonality (level 12).

    Integrals are trapezoid sums over the 2^{-12} table nodes. The piecewise-linear interpolant
    between nodes is checked separately (test_tensor_basis_gram_is_diagonal).
    """
    table = wavelet_table(family)
    x, v, h = _grid_values(table, "v")
    _, w, _ = _grid_values(table, "w")
    assert table.level == 12 and x[-1] == 2 * table.p - 1
    np.testing.assert_allclose(_int(v, h), 1.0, atol=1e-6)
    np.testing.assert_allclose(_int(w, h), 0.0, atol=1e-6)
    np.testing.assert_allclose(_int(v * v, h), 1.0, atol=1e-6)
    np.testing.assert_allclose(_int(w * w, h), 1.0, atol=1e-6)
    for k in range(table.p):  # dbp has p vanishing moments
        scale = (2 * table.p - 1) ** k
        assert abs(_int(x**k * w, h)) < 1e-8 * scale, k
    # shifted copies, evaluated through the public evaluators
    for t in range(-(2 * table.p - 2), 2 * table.p - 1):
        vs, ws = table.scaling(x - t), table.wavelet(x - t)
        np.testing.assert_allclose(_int(v * vs, h), float(t == 0), atol=1e-6)
        np.testing.assert_allclose(_int(w * ws, h), float(t == 0), atol=1e-6)
        np.testing.assert_allclose(_int(v * ws, h), 0.0, atol=1e-6)


def test_haar_closed_form_is_orthonormal():
    """T18 for Haar: midpoint sums on a dyadic grid are exact for piecewise constants."""
    table = wavelet_table("haar")
    assert canonical_family("haar") == ("db1", 1) and table.support == 1
    h = 2.0**-10
    x = np.arange(-2, 3, h) + h / 2
    v, w = table.scaling(x), table.wavelet(x)
    assert abs(h * v.sum() - 1) < 1e-14 and abs(h * w.sum()) < 1e-14
    assert abs(h * (v * v).sum() - 1) < 1e-14 and abs(h * (w * w).sum() - 1) < 1e-14
    for t in (-1, 1, 2):
        assert h * np.dot(v, table.scaling(x - t)) == 0.0
        assert h * np.dot(w, table.wavelet(x - t)) == 0.0
    assert h * np.dot(v, w) == 0.0
    # half-open support: v(1) = w(1) = 0, v(0) = w(0) = 1, w(½) = −1
    assert table.scaling(np.array([0.0, 1.0])).tolist() == [1.0, 0.0]
    assert table.wavelet(np.array([0.0, 0.5, 1.0])).tolist() == [1.0, -1.0, 0.0]


def _brute_force_phi(basis, X):
    """Φ (M, N) by evaluating every basis function's formula f(2^j x − t) at every point."""
    cols = []
    for b, x in zip(basis.dims, X.T, strict=True):
        f = np.where(b.kind[:, None] == 0,
                     b.table.scaling(np.ldexp(x[None, :], b.level[:, None]) - b.shift[:, None]),
                     b.table.wavelet(np.ldexp(x[None, :], b.level[:, None]) - b.shift[:, None]))
        cols.append(f)
    out = cols[0]
    for f in cols[1:]:  # C-order tensor product
        out = (out[:, None, :] * f[None, :, :]).reshape(-1, X.shape[0])
    return out


@pytest.mark.parametrize("family,iota,j_max,dims", [
    ("haar", -2, 3, 1), ("db4", -2, 3, 1), ("db2", -1, 1, 2), ("haar", -1, 2, 2),
])
def test_feature_matrix_matches_brute_force(family, iota, j_max, dims):
    rng = np.random.default_rng(1)
    window = np.array([[-1.7, 1.3], [-0.6, 2.2]])[:dims]
    X = rng.uniform(window[:, 0], window[:, 1], size=(60, dims))
    X[0] = window[:, 0]  # both window edges are covered
    X[1] = window[:, 1]
    basis = make_basis(family, iota, j_max, window)
    phi = basis.feature_matrix(X)
    assert phi.shape == (basis.n_features, 60)
    assert phi.getnnz(axis=0).max() <= basis.max_local
    ref = _brute_force_phi(basis, X)
    np.testing.assert_array_equal(phi.toarray() != 0, ref != 0)
    np.testing.assert_allclose(phi.toarray(), ref, rtol=1e-12, atol=1e-15)
    assert np.all(phi.data != 0)


@pytest.mark.parametrize("family", ["haar", "db3"])
def test_basis_holds_every_function_meeting_the_window(family):
    """Summed over *all* integer shifts, no nonzero function at a window point is missing."""
    lo, hi = -1.37, 2.0  # 2^j·hi is an integer: the half-open Haar case at the right edge
    basis = make_basis(family, -2, 2, [[lo, hi]])
    b = basis.dims[0]
    x = np.concatenate([np.linspace(lo, hi, 301), [hi]])
    for kind, j in [(0, -2)] + [(1, j) for j in range(-2, 3)]:
        t_all = np.arange(-200, 200)
        f = b.table.scaling if kind == 0 else b.table.wavelet
        full = np.abs(f(np.ldexp(x, j)[:, None] - t_all[None, :])).sum(axis=1)
        mine = (b.kind == kind) & (b.level == j)
        ours = np.abs(f(np.ldexp(x, j)[:, None] - b.shift[mine][None, :])).sum(axis=1)
        np.testing.assert_allclose(ours, full, rtol=0, atol=1e-15)
        assert full.min() > 0 or kind == 1 or family != "haar"


def test_tensor_basis_gram_is_diagonal():
    """Orthogonality of the assembled 1-D basis: Gram = diag(2^{-j}) on functions inside the window.

    The grid is finer than the table for the coarse levels, so this integrates the linearly
    interpolated functions: db4 at level 12 is orthogonal to about 3e-6 there.
    """
    lo, hi = -8.0, 8.0
    basis = make_basis("db4", -1, 1, [[lo, hi]])
    b = basis.dims[0]
    h = 2.0**-13
    x = np.arange(lo, hi + h / 2, h)
    phi = basis.feature_matrix(x[:, None]).toarray()
    inside = (np.ldexp(b.shift.astype(float), -b.level) >= lo) & (
        np.ldexp(b.shift + 7.0, -b.level) <= hi)
    assert inside.sum() >= 10
    p = phi[inside]
    gram = h * (p @ p.T - 0.5 * (np.outer(p[:, 0], p[:, 0]) + np.outer(p[:, -1], p[:, -1])))
    np.testing.assert_allclose(gram, np.diag(2.0 ** -b.level[inside].astype(float)), atol=5e-6)


def _brute_statistics(basis, X, y):
    phi = _brute_force_phi(basis, X)
    nz = (phi != 0).astype(float)
    pattern = (nz @ nz.T) > 0
    active = np.flatnonzero(pattern.diagonal())
    lower = np.tril(pattern[np.ix_(active, active)])
    return phi[active] @ phi[active].T, lower, phi[active] @ y, active


@pytest.mark.parametrize("family,dims", [("db4", 1), ("haar", 2), ("db2", 2)])
def test_statistics_pattern_values_and_chunk_invariance(family, dims):
    """T20: P equals the brute-force nonzero pattern; G, r agree; chunking changes nothing."""
    rng = np.random.default_rng(2)
    window = np.array([[-2.0, 2.0], [-1.0, 1.5]])[:dims]
    X = rng.uniform(window[:, 0] / 2, window[:, 1] / 2, size=(80, dims))  # some functions prune
    y = rng.normal(size=80)
    basis = make_basis(family, -1, 1, window)
    G, pattern, r, active = _brute_statistics(basis, X, y)
    ref = None
    for chunk in (None, 1, 13):
        st = wavelet_statistics(basis, X, y, chunk_size=chunk)
        np.testing.assert_array_equal(st.active, active)
        assert st.n_active < basis.n_features  # pruning happened
        gram = st.gram.toarray()
        np.testing.assert_array_equal(st.gram.toarray() != 0, pattern & (np.tril(G) != 0))
        dense_pattern = np.zeros_like(pattern)
        cols = np.repeat(np.arange(st.n_active), np.diff(st.gram.indptr))
        dense_pattern[st.gram.indices, cols] = True
        np.testing.assert_array_equal(dense_pattern, pattern)
        np.testing.assert_allclose(gram, np.tril(G), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(st.r, r, rtol=1e-12, atol=1e-12)
        assert st.n == 80 and abs(st.yy - y @ y) < 1e-12
        if ref is None:
            ref = st
        else:
            np.testing.assert_array_equal(st.gram.indices, ref.gram.indices)
            np.testing.assert_array_equal(st.gram.indptr, ref.gram.indptr)
            np.testing.assert_allclose(st.gram.data, ref.gram.data, rtol=1e-12, atol=1e-13)


def test_pattern_keeps_entries_whose_sum_cancels():
    """Haar: two points with opposite wavelet signs make G_{vw} = 0, but (v, w) stays in P."""
    basis = make_basis("haar", 0, 0, [[0.0, 1.0]])
    X = np.array([[0.25], [0.75]])  # v = 1 at both, w = +1 then −1
    st = wavelet_statistics(basis, X, np.ones(2))
    assert st.n_active == 2 and st.gram.nnz == 3
    np.testing.assert_array_equal(st.gram.toarray(), [[2.0, 0.0], [0.0, 2.0]])


def test_bad_arguments_raise_input_errors():
    with pytest.raises(InputError, match="unknown wavelet family"):
        wavelet_table("sym4")
    with pytest.raises(InputError, match="unknown wavelet family"):
        canonical_family("db9")
    with pytest.raises(InputError, match="cascade level"):
        wavelet_table("db4", level=4)
    with pytest.raises(InputError, match="j_max"):
        make_basis("db4", 2, 1, [[0.0, 1.0]])
    with pytest.raises(InputError, match="integers"):
        make_basis("db4", -1.5, 1, [[0.0, 1.0]])
    with pytest.raises(InputError, match="lo < hi"):
        make_basis("db4", -1, 1, [[1.0, 0.0]])
    with pytest.raises(InputError, match="shape"):
        make_basis("db4", -1, 1, [0.0, 1.0])
    basis = make_basis("db4", -1, 1, [[0.0, 1.0], [0.0, 1.0]])
    with pytest.raises(OutsideWindowError, match="outside the wavelet window"):
        basis.feature_matrix(np.array([[0.5, 1.5]]))
    with pytest.raises(InputError, match=r"shape \(N, 2\)"):
        basis.feature_matrix(np.array([[0.5]]))
    with pytest.raises(ValueError, match="chunk_size"):
        wavelet_statistics(basis, np.array([[0.5, 0.5]]), np.ones(1), chunk_size=0)
    assert set(FAMILIES) >= {"haar", "db4", "db8"}


@pytest.mark.parametrize("dims", [1, 2])
def test_no_points_give_an_empty_feature_matrix(dims):
    basis = make_basis("db2", 0, 2, np.array([[0.0, 1.0]] * dims))
    rows, vals = basis.local_features(np.zeros((0, dims)))
    assert rows.shape == vals.shape == (0, basis.max_local)
    assert basis.feature_matrix(np.zeros((0, dims))).shape == (basis.n_features, 0)
