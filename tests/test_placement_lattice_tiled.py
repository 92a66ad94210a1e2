"""Placement on a lattice posterior computed on tiles (issue #29, geogp.placement.lattice_tiled),
against the same model's whole-lattice posterior (one factor, exact) at the same θ: the tile's
covariance, the picks of each strategy, and observations added without refitting."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from geogp.exceptions import InputError
from geogp.models import lattice as lm
from geogp.models.lattice.posterior import tile_sampler
from geogp.models.lattice.state import Tiled
from geogp.models.lattice.tiled import tile_lattice
from geogp.placement import Candidates, suggest_sites
from geogp.placement.greedy import run_greedy
from geogp.placement.lattice import LatticeCovariance, add_lattice_observations
from geogp.placement.lattice_setup import lattice_greedy
from geogp.placement.lattice_tiled import add_tiled_observations, model_tiles

# rasters without a CRS on purpose (planar is assumed, with a warning)
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.MissingCRSWarning")

SHAPE = (48, 64)


def _raster():
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(11)
    ny, nx = SHAPE
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    v = (np.sin(yy / 13.0) + np.cos(xx / 17.0)
         + 3.0 * gaussian_filter(rng.standard_normal(SHAPE), 1.5)
         + 0.2 * rng.standard_normal(SHAPE))
    v[14:30, 20:44] = np.nan  # a block gap across tile boundaries
    v[rng.random(SHAPE) < 0.25] = np.nan
    return (np.arange(ny) * 30.0, np.arange(nx) * 30.0), v


def _on_tiles(est, obs, ys, core, halo):
    """``est``'s posterior recomputed on tiles at the same stage-1 θ."""
    e = copy.copy(est)
    e.params_ = dict(est._stage1_params)
    e.posterior_tile, e.posterior_halo = core, halo
    e._posterior(obs, ys)
    return e


@pytest.fixture(scope="module")
def models():
    axes, v = _raster()
    est = lm.LatticeRegressor(large_scale=12, mid_scale=4, margin=4, fit_cells=None,
                              maxiter=30, posterior_tile=None, backend="cholmod"
                              ).fit_grid(axes, v)
    obs = np.isfinite(v)
    ys = est.scaler_.y(v[obs])
    tiled = _on_tiles(est, obs, ys, 24, 16)
    assert est.posterior_tiles_ == 1 and tiled.posterior_tiles_ == 9
    return est, tiled, axes, obs, ys


def _window_of(lc, whole_shape):
    """(rows, cols) slices of the whole lattice that tile covariance ``lc`` covers."""
    (oy, ox), (h, w) = lc.offset, lc.shape
    assert oy + h <= whole_shape[0] and ox + w <= whole_shape[1]
    return slice(oy, oy + h), slice(ox, ox + w)


def test_the_sampler_of_a_one_tile_layout_is_the_whole_lattice_sampler(models):
    """tile_sampler at the fitted θ (local variances carrying c) rebuilds what the fit kept:
    B/c, F − S_F and D A⁻¹ D."""
    est, _, _, obs, _ = models
    one = copy.copy(est)
    want, post = est.posterior_.sampler(), est.posterior_
    one.posterior_ = Tiled(mean=post.mean, var=post.var, cov=post.cov, observed=obs,
                           w_cov=want.w_cov)
    (tile,) = one.plan_posterior_tiles(obs.shape)
    got = tile_sampler(one, tile)
    np.testing.assert_allclose(got.b_vals, want.b_vals, rtol=1e-10)
    np.testing.assert_allclose(got.g, want.g, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(got.w_cov, want.w_cov)
    assert (got.pi - want.pi).count_nonzero() == 0


def test_tile_columns_converge_to_the_whole_lattice_with_the_halo(models):
    """A core cell's covariance column from its tile's posterior matches the whole lattice's
    over the tile's window, closer with a wider halo; the window holds its mass."""
    est, _, _, obs, ys = models
    whole = LatticeCovariance(est)
    errors = []
    for halo in (4, 16):
        tiled = _on_tiles(est, obs, ys, 24, halo)
        tile = model_tiles(tiled)[4]  # an inner tile: second row, second column
        lc = LatticeCovariance(tiled, tile)
        rows, cols = _window_of(lc, est.shape_)
        (cr, cc), nx = tile.core, est.shape_[1]
        cell = (cr.start + 5) * nx + cc.start + 7
        col = whole.prior_column(cell).reshape(est.shape_)
        local = (cr.start + 5 - rows.start) * lc.shape[1] + cc.start + 7 - cols.start
        got = lc.prior_column(local).reshape(lc.shape)
        errors.append(np.max(np.abs(got - col[rows, cols])) / col.max())
        if halo == 16:
            assert np.sum(col[rows, cols] ** 2) > 0.999 * np.sum(col**2)
            np.testing.assert_allclose(got.ravel()[local], col.ravel()[cell], rtol=0.02)
    assert errors[1] < 0.05 and errors[1] < 0.5 * errors[0], errors


def test_tiled_variance_placement_picks_the_whole_lattice_sites(models):
    est, tiled, axes, _, _ = models
    cands = Candidates.grid(list(axes))
    want = suggest_sites(est, cands, 6, strategy="variance")
    got = suggest_sites(tiled, cands, 6, strategy="variance")
    np.testing.assert_array_equal(got["index"], want["index"])
    np.testing.assert_allclose(got["score"], want["score"], rtol=0.02)
    np.testing.assert_allclose(got["std_before"], want["std_before"], rtol=0.02)
    assert got.attrs["model"] == "lattice"


@pytest.mark.parametrize("strategy", ["reduction", "mi"])
def test_tiled_picks_are_near_the_exact_greedy_best(models, strategy):
    """Each tiled pick, conditioned on the picks before it, is worth at least 90 % of the
    best candidate by the exact criterion over every cell of the whole lattice (dense
    columns of its conditioned covariance), and its reported score is that criterion's
    value at the pick within 3 %. Stale tiles are rebuilt on the way."""
    est, tiled, axes, _, _ = models
    cands = Candidates.grid(list(axes))
    g = lattice_greedy(tiled, cands, None, None, strategy, "marginal", 5, 1e12)
    active = np.ones(len(cands), dtype=bool)
    picks, why = run_greedy(g, 5, active, None, None, 0.0, cands.coords)
    assert why == "n" and g.rebuilds > 0
    m, nx = int(est.margin), est.shape_[1]
    rows, cols = np.divmod(np.arange(len(cands)), SHAPE[1])
    cells = (rows + m) * nx + cols + m
    whole = LatticeCovariance(est)
    rho = whole.variance()[cells] + whole.noise  # the probes' weights before any site
    taken = []
    for p in picks:
        cov = np.concatenate([whole.columns(cells[a:a + 256])[cells]
                              for a in range(0, cells.size, 256)], axis=1)
        d = np.diag(cov) + whole.noise
        w = np.ones_like(rho) if strategy == "reduction" else 0.5 / rho
        exact = np.sum(cov**2 * w[:, None], axis=0) / d
        exact[taken] = -np.inf
        a = p["index"]
        assert exact[a] >= 0.9 * exact.max(), (exact[a], exact.max())
        np.testing.assert_allclose(p["score"], exact[a], rtol=0.03)
        whole.add(int(cells[a]))
        taken.append(a)


def test_tiled_placement_refuses_the_joint_mi_and_a_model_without_its_observed_cells(models):
    _, tiled, axes, _, _ = models
    cands = Candidates.grid(list(axes))
    with pytest.raises(InputError, match="joint mi"):
        suggest_sites(tiled, cands, 2, strategy="mi", criterion="joint")
    loaded = copy.copy(tiled)
    loaded.posterior_ = tiled.posterior_.moments()  # what a model file keeps
    with pytest.raises(InputError, match="loaded from a file"):
        suggest_sites(loaded, cands, 2)


def test_tiled_observations_match_the_whole_lattice_update(models):
    """Two measurements (one in the block gap, across a tile boundary from the other) move
    the tiled posterior's moments as they move the whole lattice's: the same mean, variance
    and neighbour covariances to the tiles' error; tiles whose window holds neither keep
    their moments (the tile's lattice, its window and margins, holds neither); placement
    continues from the update (the sites are absorbed)."""
    est, tiled, axes, obs, ys = models
    X = np.array([[axes[0][22], axes[1][30]], [axes[0][8], axes[1][40]]])
    y = np.array([1.5, -0.7])
    want = add_lattice_observations(est, X, y)
    var_before = tiled.posterior_.var.copy()
    got = add_tiled_observations(tiled, X, y)
    scale = est.posterior_.var.max()
    assert np.max(np.abs(got.posterior_.var - want.posterior_.var)) < 0.02 * scale
    assert (np.max(np.abs(got.posterior_.mean - want.posterior_.mean))
            < 0.02 * np.ptp(est.posterior_.mean))
    assert np.max(np.abs(got.posterior_.cov - want.posterior_.cov)) < 0.02 * scale
    moved = np.abs(want.posterior_.var - est.posterior_.var) > 1e-3 * scale
    assert moved.sum() > 50  # the measurements matter
    np.testing.assert_array_equal(tiled.posterior_.var, var_before)  # the input is unchanged
    # with smaller tiles some lattices hold neither site: those tiles keep their moments
    narrow = _on_tiles(est, obs, ys, 16, 8)
    moved_narrow = add_tiled_observations(narrow, X, y)
    m = int(est.margin)
    far = [t for t in model_tiles(narrow)  # the tile's lattice: its window and margins
           if not any(r0 <= r + m < r1 and c0 <= c + m < c1
                      for (r0, r1, c0, c1) in [tile_lattice(t, m)]
                      for r, c in ((22, 30), (8, 40)))]
    assert far
    for tile in far:
        (cr, cc), ny_nx = tile.core, est.shape_
        np.testing.assert_array_equal(moved_narrow.posterior_.var.reshape(ny_nx)[cr, cc],
                                      narrow.posterior_.var.reshape(ny_nx)[cr, cc])
    # continuing: the greedy starts from the measured sites (their variance is the noise's)
    cands = Candidates.grid(list(axes))
    sites = suggest_sites(got, cands, 1, strategy="variance")
    first = suggest_sites(tiled, cands, 1, strategy="variance")
    assert sites["std_before"].iloc[0] <= first["std_before"].iloc[0] + 1e-12
    nx = est.shape_[1]
    at = (22 + m) * nx + 30 + m
    assert got.posterior_.var[at] < est.noise_var_


def test_tiled_placement_refuses_before_allocating_with_its_estimate(models):
    """Above max_memory the tiled placement is refused with the estimate, before any tile is
    factorised (traced peak far below one tile's covariance columns)."""
    import tracemalloc

    from geogp.exceptions import MemoryEstimateError

    _, tiled, axes, _, _ = models
    cands = Candidates.grid(list(axes))
    tracemalloc.start()
    try:
        with pytest.raises(MemoryEstimateError, match="would need about") as err:
            suggest_sites(tiled, cands, 3, strategy="reduction", max_memory=2**20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert err.value.needed_bytes > 2**20
    from geogp.models.lattice.memory import tile_cells

    biggest = max(tile_cells(t, tiled.margin) for t in model_tiles(tiled))
    assert peak < 8 * biggest * 16  # less than 16 columns of one tile
