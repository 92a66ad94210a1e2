"""Wavelet statistics of rasters from per-axis evaluations (issue #14): equal to the
scattered-point statistics of the observed cells, and the grid route of the model equals the
scattered one."""

from __future__ import annotations

import numpy as np
import pytest

from geogp.exceptions import InputError, MemoryEstimateError, OutsideWindowError
from geogp.families import fit_grid, predict_grid
from geogp.features.wavelet import make_basis
from geogp.features.wavelet_grid import grid_wavelet_statistics
from geogp.features.wavelet_statistics import wavelet_statistics
from geogp.models.wavelet import WaveletRegressor


def _raster(rng, ny, nx):
    ay, ax = np.linspace(0.03, 0.95, ny), np.linspace(0.01, 0.9, nx)
    v = rng.normal(size=(ny, nx))
    v[rng.random(v.shape) < 0.3] = np.nan
    v[2:5, 3:7] = np.nan   # a gap
    return ay, ax, v


@pytest.mark.parametrize("family, iota, j_max, shape", [
    ("haar", 0, 2, (9, 11)), ("db2", -1, 2, (13, 10)), ("db4", -2, 1, (20, 24)),
])
def test_grid_statistics_equal_scattered_statistics(family, iota, j_max, shape):
    rng = np.random.default_rng(0)
    ay, ax, v = _raster(rng, *shape)
    basis = make_basis(family, iota, j_max, np.array([[0.0, 1.0], [0.0, 1.0]]))
    grid = grid_wavelet_statistics(basis, [ay, ax], v)
    Y, X = np.meshgrid(ay, ax, indexing="ij")
    obs = np.isfinite(v)
    ref = wavelet_statistics(basis, np.stack([Y[obs], X[obs]], axis=1), v[obs])
    np.testing.assert_array_equal(grid.active, ref.active)
    np.testing.assert_array_equal(grid.gram.indptr, ref.gram.indptr)   # the same pattern P,
    np.testing.assert_array_equal(grid.gram.indices, ref.gram.indices)  # explicit zeros too
    scale = np.abs(ref.gram.data).max()
    np.testing.assert_allclose(grid.gram.data, ref.gram.data, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(grid.r, ref.r, rtol=0, atol=1e-10 * np.abs(ref.r).max())
    assert grid.yy == pytest.approx(ref.yy, rel=1e-12) and grid.n == ref.n


def test_grid_route_of_the_model_equals_the_scattered_route():
    rng = np.random.default_rng(1)
    ay, ax, v = _raster(rng, 14, 17)
    v = np.where(np.isfinite(v), np.sin(6 * ay)[:, None] + np.cos(4 * ax)[None, :], np.nan)
    opts = dict(family="db2", iota=-1, j_max=2, optimize=False)  # same θ: compare exactly
    a, b = WaveletRegressor(**opts), WaveletRegressor(**opts)
    fit_grid(a, [ay, ax], v, regular=True)     # per-axis statistics
    fit_grid(b, [ay, ax], v, regular=False)    # observed cells as scattered points
    assert a.stats_.gram.nnz == b.stats_.gram.nnz
    pa = predict_grid(a, [ay, ax])
    pb = predict_grid(b, [ay, ax])
    np.testing.assert_allclose(pa.mean, pb.mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(pa.var_observed, pb.var_observed, rtol=1e-7)


def test_grid_statistics_refuse_before_allocating():
    rng = np.random.default_rng(2)
    ay, ax, v = _raster(rng, 20, 24)
    basis = make_basis("db4", -2, 1, np.array([[0.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(MemoryEstimateError, match="overlapping pairs"):
        grid_wavelet_statistics(basis, [ay, ax], v, max_bytes=1e5)


@pytest.mark.parametrize("family, iota, j_max", [("db2", -1, 2), ("haar", 0, 3)])
def test_separable_grid_prediction_equals_the_point_prediction(family, iota, j_max):
    """predict_grid (per-axis sandwich with a dense A⁻¹) equals predict at every cell of the
    mesh, for a raster with a gap (pruned features) and a grid finer than the data's."""
    rng = np.random.default_rng(3)
    ay, ax, v = _raster(rng, 14, 17)
    v = np.where(np.isfinite(v), np.sin(6 * ay)[:, None] + np.cos(4 * ax)[None, :], np.nan)
    v[6:12, 9:15] = np.nan  # a large gap: functions with no data in their support
    est = WaveletRegressor(family, iota=iota, j_max=j_max, maxiter=5)
    fit_grid(est, [ay, ax], v, regular=True)
    assert est.posterior_.grid_ready()
    assert est.stats_.n_active < est.basis_.n_features  # some features are pruned
    gy, gx = np.linspace(ay[0], ay[-1], 23), np.linspace(ax[0], ax[-1], 19)
    grid = est.predict_grid(gy, gx)
    yy, xx = np.meshgrid(gy, gx, indexing="ij")
    point = est.predict(np.stack([yy.ravel(), xx.ravel()], axis=1))
    np.testing.assert_allclose(grid.mean.ravel(), point.mean, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(grid.var_latent.ravel(), point.var_latent, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(grid.var_observed.ravel(), point.var_observed, rtol=1e-9)
    # the front end's block-wise route gives the same rasters, and takes it for subclasses
    blocks = predict_grid(est, [gy, gx], block_cells=5 * gx.size)
    np.testing.assert_allclose(blocks.var_latent, grid.var_latent, rtol=1e-12)
    calls = []

    class Traced(WaveletRegressor):
        def predict_grid(self, *axes):
            calls.append(len(axes[0]))
            return super().predict_grid(*axes)

    est.__class__ = Traced
    predict_grid(est, [gy, gx], block_cells=5 * gx.size)
    assert calls == [5, 5, 5, 5, 3]  # the separable route, block by block
    with pytest.raises(InputError, match="axis 0 must be a non-empty vector of finite"):
        est.predict_grid(np.r_[gy[:3], np.nan], gx)
    with pytest.raises(OutsideWindowError, match="outside the wavelet window"):
        est.predict_grid(gy + 1e3, gx)
