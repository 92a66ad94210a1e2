"""One entry point per feature family, ``features.statistics(data)``: a raster with gaps and
its observed cells as points give the same statistics through every route (against the
explicit feature matrices), and misuse is refused with a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from geogp.core.trend import basis as trend_basis
from geogp.core.trend import monomial_powers
from geogp.exceptions import InputError
from geogp.features.data import Grid, Points
from geogp.features.fourier import FourierFeatures
from geogp.features.wavelet import make_basis


def _raster(rng, ny=14, nx=17):
    ay, ax = np.linspace(-0.9, 0.8, ny), np.linspace(-0.7, 0.95, nx)
    v = rng.normal(size=(ny, nx))
    v[rng.random(v.shape) < 0.25] = np.nan
    v[3:7, 4:9] = np.nan  # a gap
    Y, X = np.meshgrid(ay, ax, indexing="ij")
    obs = np.isfinite(v)
    return Grid((ay, ax), v), Points(np.stack([Y[obs], X[obs]], axis=1), v[obs])


@pytest.mark.parametrize("method", ["dense", "nufft", "direct"])
def test_fourier_grid_and_point_routes_equal_explicit_features(rng, method):
    grid, pts = _raster(rng)
    ff = FourierFeatures.build([0.0, 0.1], [2.6, 2.4], (6, 5))
    powers = monomial_powers("linear", 2)
    from_grid = ff.statistics(grid, powers=powers)
    from_points = ff.statistics(pts, method=method, powers=powers)
    Phi, H = ff(pts.X), trend_basis(pts.X, powers)  # the naive reference
    ref = {"G": Phi.T @ Phi, "r": Phi.T @ pts.y, "F": Phi.T @ H, "HH": H.T @ H,
           "Hy": H.T @ pts.y}
    for stats in (from_grid, from_points):
        for name, want in ref.items():
            got = np.asarray(getattr(stats, name))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max(),
                                       err_msg=name)
        assert float(stats.yy) == pytest.approx(float(pts.y @ pts.y), rel=1e-12)
        assert int(stats.n) == pts.n_obs


@pytest.mark.parametrize("family, iota, j_max", [("haar", 0, 2), ("db2", -1, 1)])
def test_wavelet_grid_and_point_routes_equal_explicit_features(rng, family, iota, j_max):
    grid, pts = _raster(rng)
    wb = make_basis(family, iota, j_max, np.array([[-1.0, 1.0], [-1.0, 1.0]]))
    Phi = wb.feature_matrix(pts.X).toarray()  # (M, N), the naive reference
    for stats in (wb.statistics(grid), wb.statistics(pts, chunk_size=37)):
        act = np.asarray(stats.active)
        np.testing.assert_array_equal(act, np.flatnonzero(np.abs(Phi).sum(axis=1) > 0))
        want = np.tril(Phi[act] @ Phi[act].T)  # G is stored as its lower triangle
        np.testing.assert_allclose(stats.gram.toarray(), want, rtol=0,
                                   atol=1e-10 * np.abs(want).max())
        np.testing.assert_allclose(np.asarray(stats.r), Phi[act] @ pts.y, rtol=0, atol=1e-10)


def test_misuse_is_refused_with_a_clear_error(rng):
    grid, pts = _raster(rng)
    ff = FourierFeatures.build([0.0, 0.1], [2.6, 2.4], (4, 4))
    wb = make_basis("haar", 0, 1, np.array([[-1.0, 1.0], [-1.0, 1.0]]))
    with pytest.raises(InputError, match=r"Points.y must have shape"):
        Points(np.zeros((5, 2)), np.zeros(4))
    with pytest.raises(InputError, match=r"Points.X must have shape \(N, D\)"):
        Points(np.zeros(5), np.zeros(5))
    with pytest.raises(InputError, match=r"Grid.values must have shape \(14, 17\)"):
        Grid(grid.axes, np.zeros((17, 14)))
    with pytest.raises(InputError, match="needs a complete Grid"):
        ff.statistics(pts, diagonal=True)
    with pytest.raises(InputError, match="method must be"):
        ff.statistics(pts, method="fft")
    with pytest.raises(InputError, match="gram='dense'"):
        ff.statistics(pts, method="dense", gram="operator")
    for features in (ff, wb):
        with pytest.raises(InputError, match="Points or Grid"):
            features.statistics((pts.X, pts.y))
