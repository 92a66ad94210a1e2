"""Takahashi selected inverse vs the dense inverse (docs/sparse_vjp.md (selected inversion); T14).

The compiled kernel is checked on its own (factor from numpy's dense Cholesky, stored on a
symbolic pattern computed by dense elimination), then through CHOLMOD with the orderings
natural, AMD and METIS after un-permuting onto the matrix's own pattern.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from geogp.linalg.selinv import SelectedInverseError, gather_on_pattern, supernodes, takahashi

from _reference.sparse_spd import (
    banded_spd,
    factor_on_pattern,
    grid_laplacian,
    random_spd,
    randomised_values,
    symbolic_cholesky_pattern,
)


def _cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "diagonal": np.diag(rng.uniform(1.0, 2.0, 7)),
        "one_by_one": np.array([[3.0]]),
        "dense": random_spd(40, 1.0, rng).toarray(),
        "random_sparse": random_spd(120, 0.03, rng).toarray(),
        "banded": banded_spd(60, 3, rng).toarray(),
        "grid": randomised_values(grid_laplacian(9, 8), rng).toarray(),
        "two_blocks_and_separator": _two_blocks(rng),
    }


def _two_blocks(rng: np.random.Generator) -> np.ndarray:
    """Dense blocks of 20 and 10 unknowns joined only through 3 separator unknowns: wide
    supernodes with few rows below (r = 3) and a root (r = 0)."""
    a = random_spd(33, 1.0, rng).toarray()
    a[:20, 20:30] = a[20:30, :20] = 0.0
    return a + 33.0 * np.eye(33)


@pytest.mark.parametrize(
    "name", ["diagonal", "one_by_one", "dense", "random_sparse", "banded", "grid",
             "two_blocks_and_separator"]
)
def test_takahashi_equals_dense_inverse_on_factor_pattern(name, rng):
    a = _cases(rng)[name]
    indptr, indices, data = factor_on_pattern(a, symbolic_cholesky_pattern(a))
    z = takahashi(indptr, indices, data)
    inv = np.linalg.inv(a)
    cols = np.repeat(np.arange(a.shape[0]), np.diff(indptr))
    np.testing.assert_allclose(z, inv[indices, cols], rtol=0, atol=1e-12 * np.abs(inv).max())


def test_both_kernel_paths_are_exercised(rng):
    """The random sparse case has blocks for the BLAS path and single columns for the loops."""
    a = _cases(rng)["random_sparse"]
    indptr, indices, _ = factor_on_pattern(a, symbolic_cholesky_pattern(a))
    starts = supernodes(indptr, indices)
    sizes = np.diff(starts)
    below = np.diff(indptr)[starts[:-1]] - sizes
    assert np.any((sizes >= 4) & (below >= 8)), "no supernode takes the BLAS path"
    assert np.any((sizes == 1) & (below > 0)), "no single-column supernode"


def test_wide_blocks_with_few_rows_below_are_exercised(rng):
    """Wide supernodes whose Z_JJ goes through BLAS although r < 8: 0 < r < 8 in the two
    blocks' case, a root (r = 0) in the dense one."""
    def blocks(a):
        indptr, indices, _ = factor_on_pattern(a, symbolic_cholesky_pattern(a))
        starts = supernodes(indptr, indices)
        sizes = np.diff(starts)
        return sizes, np.diff(indptr)[starts[:-1]] - sizes

    sizes, below = blocks(_cases(rng)["two_blocks_and_separator"])
    assert np.any((sizes >= 16) & (below > 0) & (below < 8))
    sizes, below = blocks(_cases(rng)["dense"])
    assert np.any((sizes >= 16) & (below == 0))


def test_gather_reads_both_triangles(rng):
    a = _cases(rng)["banded"]
    indptr, indices, data = factor_on_pattern(a, symbolic_cholesky_pattern(a))
    z = takahashi(indptr, indices, data)
    inv = np.linalg.inv(a)
    rows, cols = np.nonzero(np.abs(a) > 0)  # both triangles, inside the factor's pattern
    got = gather_on_pattern(indptr, indices, z, rows, cols)
    np.testing.assert_allclose(got, inv[rows, cols], atol=1e-12 * np.abs(inv).max())


def test_pattern_not_closed_is_detected(rng):
    a = _cases(rng)["grid"]
    pattern = symbolic_cholesky_pattern(a)
    fill = pattern & ~np.tril(a != 0)  # entries created by elimination only
    i, j = np.argwhere(fill)[0]
    pattern[i, j] = False
    indptr, indices, data = factor_on_pattern(a, pattern)
    with pytest.raises(SelectedInverseError, match="not closed"):
        takahashi(indptr, indices, data)


def test_non_positive_diagonal_is_detected(rng):
    a = _cases(rng)["banded"]
    indptr, indices, data = factor_on_pattern(a, symbolic_cholesky_pattern(a))
    data = data.copy()
    data[indptr[5]] = -1.0
    with pytest.raises(SelectedInverseError, match="positive diagonal"):
        takahashi(indptr, indices, data)


def test_entry_off_pattern_is_detected(rng):
    a = np.diag([1.0, 2.0, 3.0])
    indptr, indices, data = factor_on_pattern(a, symbolic_cholesky_pattern(a))
    z = takahashi(indptr, indices, data)
    with pytest.raises(SelectedInverseError, match="not on the pattern"):
        gather_on_pattern(indptr, indices, z, np.array([2]), np.array([0]))


# --------------------------------------------------------------------------- via CHOLMOD
def _orderings():
    cholmod = pytest.importorskip("sksparse.cholmod")
    out = ["natural", "amd"]
    try:
        cholmod.analyze(sp.identity(3, format="csc"), ordering_method="metis")
        out.append("metis")
    except Exception:  # METIS not compiled into this CHOLMOD
        pass
    return out


@pytest.mark.parametrize("mode", ["simplicial", "supernodal"])
@pytest.mark.parametrize("case", ["random_sparse", "grid"])
def test_cholmod_selected_inverse_on_pattern(case, mode, rng):
    from geogp.linalg import SparsePattern
    from geogp.linalg.cholmod import analyze

    a = sp.csc_matrix(_cases(rng)[case])
    pattern = SparsePattern.from_scipy(a)
    values = pattern.values_from_scipy(a)
    inv = np.linalg.inv(a.toarray())
    want = inv[pattern.rows, pattern.cols]
    results = {}
    for ordering in _orderings():
        state = analyze(pattern, ordering=ordering, mode=mode)
        if ordering != "natural":
            assert not np.array_equal(state.backend.perm, np.arange(pattern.n))
        results[ordering] = state.selected_inverse(values)
        np.testing.assert_allclose(
            results[ordering], want, rtol=0, atol=1e-12 * np.abs(inv).max(), err_msg=ordering
        )
    assert len(results) >= 2


def test_cholmod_selected_inverse_with_release_frees_the_factor_and_refactorises(rng):
    """``release=True`` gives the same entries, drops the factor (the next use analyses the
    pattern again, to the same permutation) and later solves stay exact."""
    from geogp.linalg import SparsePattern
    from geogp.linalg.cholmod import analyze, logdet_and_solve, selected_inverse

    a = sp.csc_matrix(_cases(rng)["grid"])
    pattern = SparsePattern.from_scipy(a)
    values = pattern.values_from_scipy(a)
    inv = np.linalg.inv(a.toarray())
    kept = selected_inverse(pattern, values, ordering="amd")
    state = analyze(pattern, ordering="amd")
    analyses = state.backend.n_analyses
    freed = selected_inverse(pattern, values, ordering="amd", release=True)
    np.testing.assert_array_equal(freed, kept)
    assert state.backend._released and state._values is None
    np.testing.assert_allclose(freed, inv[pattern.rows, pattern.cols], atol=1e-12 * abs(inv).max())
    b = rng.standard_normal(pattern.n)
    logdet, x = logdet_and_solve(pattern, values, b, ordering="amd")
    assert state.backend.n_analyses == analyses + 1 and not state.backend._released
    np.testing.assert_allclose(np.asarray(x), inv @ b, rtol=1e-10)
    np.testing.assert_allclose(float(logdet), np.linalg.slogdet(a.toarray())[1], rtol=1e-12)
    pattern.release_factors()  # the same through the pattern, for every cached factor
    assert state.backend._released
