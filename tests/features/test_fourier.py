"""AFS features: lattices, mask, implied kernel, Fourier-domain statistics (docs/afs.md, T2, T9,
T12)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import geogp
from geogp.exceptions import InputError, MemoryEstimateError, OutsideWindowError
from geogp.features import trig
from geogp.features.fourier import FourierFeatures, _khatri_rao_rows, lattice_rows
from geogp.features.fourier_statistics import (
    dense_stats,
    grid_lemma_holds,
    grid_stats,
    points_stats,
)


def _alias_sum(kernel, r, period, signed, n_alias=2):
    """Σ_j (±1)^{Σj} k(r − T∘j): the kernel implied by a saturated lattice (docs/afs.md,
    lattices)."""
    D = r.shape[-1]
    out = np.zeros(r.shape[:-1])
    for jj in itertools.product(range(-n_alias, n_alias + 1), repeat=D):
        j = np.array(jj)
        sign = (-1.0) ** j.sum() if signed else 1.0
        out += sign * np.asarray(kernel.evaluate(r - period * j))
    return out


@pytest.mark.parametrize("lattice", ["odd", "full"])
@pytest.mark.parametrize("D", [1, 2])
def test_saturated_features_reproduce_implied_kernel(lattice, D, rng):
    """T2: Φ(x)ᵀΛΦ(x') → alias sum of k (signed on the odd lattice), atol 1e-12."""
    k = geogp.SquaredExponential(lengthscale=[0.3, 0.25][:D], variance=1.3)
    W = np.array([2.0, 1.6][:D])
    ff = FourierFeatures.build(np.zeros(D), W, 24 if lattice == "odd" else 48, lattice)
    X1 = rng.uniform(-W / 2, W / 2, (7, D))
    X2 = rng.uniform(-W / 2, W / 2, (5, D))
    lam = np.exp(np.asarray(ff.log_lambda(k)))
    approx = ff(X1) @ (lam[:, None] * ff(X2).T)
    if lattice == "odd":
        exact = _alias_sum(k, X1[:, None, :] - X2[None, :, :], W, signed=True)
    else:
        exact = _alias_sum(k, X1[:, None, :] - X2[None, :, :], 2 * W, signed=False)
    np.testing.assert_allclose(approx, exact, atol=1e-12, rtol=0)


def test_mask_dimensionwise_equals_cube_then_mask():
    """T9: the Khatri–Rao construction with the running mask keeps the cube's rows, in order."""
    for lattice, K in [("odd", (6, 9)), ("full", (5, 7)), ("odd", (3, 4, 5))]:
        rows = _khatri_rao_rows(K, lattice)
        per = [lattice_rows(k, lattice)[0] for k in K]
        cube = np.array(list(itertools.product(*[range(p.size) for p in per])))
        ratio = sum((per[d][cube[:, d]] / K[d]) ** 2 for d in range(len(K)))
        expected = cube[ratio <= 1 + 1e-12]
        np.testing.assert_array_equal(rows, expected)
        assert rows.shape[0] < cube.shape[0]


def test_mask_is_closed_under_sign_flips():
    """T9: every |z| kept appears with all its cos/sin combinations (2^D rows on the odd
    lattice)."""
    ff = FourierFeatures.build([0, 0], [3, 2], (8, 5))
    _freqs, counts = np.unique(ff.frequencies, axis=0, return_counts=True)
    assert np.all(counts == 4)
    kinds = {tuple(ff.frequencies[i]): set() for i in range(ff.n_features)}
    for i in range(ff.n_features):
        kinds[tuple(ff.frequencies[i])].add(tuple(ff.kinds[i]))
    assert all(len(v) == 4 for v in kinds.values())


def test_budget_gives_at_most_requested_features():
    ff = FourierFeatures.for_budget([0, 0], [4.0, 2.0], 500)
    assert 400 < ff.n_features <= 500
    assert ff.n_freq[0] > ff.n_freq[1]  # common bandwidth: the wider axis gets more frequencies


def test_too_many_features_refused_with_estimate():
    with pytest.raises(MemoryEstimateError, match="GiB") as err:
        FourierFeatures.build([0, 0], [1, 1], (400, 400), max_bytes=2**30)
    assert err.value.needed_bytes > 2**30


def test_outside_window_raises_or_flags():
    ff = FourierFeatures.build([0.0], [2.0], 5)
    X = np.array([[0.5], [1.5]])
    with pytest.raises(OutsideWindowError, match="outside the feature window"):
        ff.check_inside(X)
    np.testing.assert_array_equal(ff.check_inside(X, outside="nan"), [True, False])
    # with the model's scaler the message speaks the caller's units: x = 100 + 50·z
    from geogp.models.base import Standardizer

    sc = Standardizer(np.array([100.0]), np.array([50.0]), 0.0, 1.0)
    with pytest.raises(OutsideWindowError, match=r"input units.*\[50, 150\].*\[175\.0\]"):
        ff.check_inside(X, scaler=sc)


def test_bad_lattice_and_width():
    with pytest.raises(InputError, match="lattice"):
        FourierFeatures.build([0.0], [1.0], 4, lattice="even")
    with pytest.raises(InputError, match="width"):
        FourierFeatures.build([0.0], [-1.0], 4)


# ----------------------------------------------------------------------------- statistics
def _grid(rng, shape=(13, 17), missing=0.3):
    ax = [np.linspace(-1.0, 2.0, shape[0]), np.linspace(0.5, 1.7, shape[1])]
    vals = rng.normal(size=shape)
    vals[rng.random(shape) < missing] = np.nan
    return ax, vals


def _observed_points(ax, vals):
    g = np.meshgrid(*ax, indexing="ij")
    X = np.stack([a.ravel() for a in g], axis=1)
    keep = np.isfinite(vals.ravel())
    return X[keep], vals.ravel()[keep]


@pytest.mark.parametrize("lattice", ["odd", "full"])
def test_gappy_grid_and_nufft_statistics_equal_dense(lattice, rng):
    """T9/T12: Fourier-domain statistics equal ΦΦᵀ and Φy of the observed cells (1e-9 relative)."""
    ax, vals = _grid(rng)
    X, y = _observed_points(ax, vals)
    ff = FourierFeatures.build([0.5, 1.1], [3.3, 1.35], (7, 5), lattice)
    ref = dense_stats(ff, X, y)
    for st in (grid_stats(ff, ax, vals), points_stats(ff, X, y, "nufft"),
               points_stats(ff, X, y, "direct")):
        scale = np.abs(np.asarray(ref.G)).max()
        np.testing.assert_allclose(st.G, ref.G, atol=1e-9 * scale, rtol=0)
        np.testing.assert_allclose(st.r, ref.r, atol=1e-9 * np.abs(np.asarray(ref.r)).max(), rtol=0)
        assert float(st.n) == y.size
        np.testing.assert_allclose(float(st.yy), y @ y, rtol=1e-12)


def test_statistics_are_chunk_size_invariant(rng):
    """T9: the chunked sums do not depend on the chunk size (numpy and dask inputs)."""
    import dask.array as da

    ax, vals = _grid(rng, (20, 11))
    X, y = _observed_points(ax, vals)
    ff = FourierFeatures.build([0.5, 1.1], [3.3, 1.35], (5, 4))
    a = dense_stats(ff, X, y, chunk_rows=7)
    b = dense_stats(ff, X, y, chunk_rows=1000)
    np.testing.assert_allclose(a.G, b.G, rtol=1e-12, atol=1e-12)
    g1 = grid_stats(ff, ax, vals, chunk_bytes=1)  # one row per chunk
    g2 = grid_stats(ff, ax, da.from_array(vals, chunks=(6, 11)))
    g3 = grid_stats(ff, ax, vals)
    for g in (g1, g2):
        np.testing.assert_allclose(g.G, g3.G, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g.r, g3.r, rtol=1e-12, atol=1e-12)
    s = dense_stats(ff, X[:50], y[:50]) + dense_stats(ff, X[50:], y[50:])
    np.testing.assert_allclose(s.G, a.G, rtol=1e-12, atol=1e-12)


def test_complete_grid_gram_is_diagonal_when_lemma_holds(rng):
    """T12: W_d = N_d η_d and 2K_d ≤ N_d ⇒ ‖G − N·I‖_max ≤ 1e-9·N; the O(M) route matches."""
    shape = (12, 9)
    eta = np.array([0.1, 0.25])
    ax = [np.arange(n) * e + 0.3 for n, e in zip(shape, eta, strict=True)]
    vals = rng.normal(size=shape)
    X, y = _observed_points(ax, vals)
    center = np.array([(a[0] + a[-1]) / 2 for a in ax])
    ff = FourierFeatures.build(center, np.array(shape) * eta, (6, 4), mask=False)
    assert grid_lemma_holds(shape, ff.n_freq)
    N = vals.size
    G = np.asarray(dense_stats(ff, X, y).G)
    assert np.abs(G - N * np.eye(ff.n_features)).max() <= 1e-9 * N
    diag = grid_stats(ff, ax, vals, diagonal=True)
    np.testing.assert_allclose(diag.G, N)
    np.testing.assert_allclose(diag.r, dense_stats(ff, X, y).r, atol=1e-10 * N)
    # violation: K too large for the grid -> refused
    ff_bad = FourierFeatures.build(center, np.array(shape) * eta, (7, 4), mask=False)
    assert not grid_lemma_holds(shape, ff_bad.n_freq)
    with pytest.raises(InputError, match=r"Lemma 3.1"):
        grid_stats(ff_bad, ax, vals, diagonal=True)
    gap = vals.copy()
    gap[0, 0] = np.nan
    with pytest.raises(InputError, match="complete grid"):
        grid_stats(ff, ax, gap, diagonal=True)


def _lemma_gcd(N, a, M):
    return N // np.gcd(a, N) >= M


@pytest.mark.parametrize("N", range(2, 13))
def test_lemma_gcd_condition_matches_brute_force(N):
    """T12: complex Gram of M frequencies spaced a/N (cycles per cell) is N·I iff N/gcd(a,N) ≥ M."""
    n = np.arange(N)
    for a in range(1, 9):
        for M in range(1, 9):
            z = a * np.arange(M) / N
            E = np.exp(2j * np.pi * np.outer(z, n))
            is_diag = np.allclose(E @ E.conj().T, N * np.eye(M), atol=1e-9)
            assert is_diag == _lemma_gcd(N, a, M), (N, a, M)
    # docs/afs.md (gridded data): counterexample to the printed condition
    assert not _lemma_gcd(6, 4, 4)


@pytest.mark.parametrize("lattice", ["odd", "full"])
def test_trig_polynomials_evaluate_quadratic_and_linear_forms(lattice, rng):
    """Grid/NUFFT evaluation of Σ Q φφ and Σ w φ equals explicit features (used for prediction)."""
    ax = [np.linspace(-1, 1, 9), np.linspace(-0.4, 0.9, 6)]
    g = np.meshgrid(*ax, indexing="ij")
    X = np.stack([a.ravel() for a in g], axis=1)
    ff = FourierFeatures.build([0.0, 0.25], [2.4, 1.5], (5, 4), lattice)
    Q = rng.normal(size=(ff.n_features,) * 2)
    Q = Q + Q.T
    w = rng.normal(size=ff.n_features)
    Phi = ff(X)
    quad = np.einsum("nm,mk,nk->n", Phi, Q, Phi)
    lin = Phi @ w
    A, B = trig.quadratic_form_coefficients(ff, Q), trig.linear_coefficients(ff, w)
    np.testing.assert_allclose(trig.evaluate_grid(ff, ax, A, "quadratic").ravel(), quad, atol=1e-10)
    np.testing.assert_allclose(trig.evaluate_grid(ff, ax, B, "linear").ravel(), lin, atol=1e-11)
    np.testing.assert_allclose(trig.evaluate_points(ff, X, A, "quadratic"), quad, atol=1e-10)
    np.testing.assert_allclose(trig.evaluate_points(ff, X, B, "linear"), lin, atol=1e-11)
