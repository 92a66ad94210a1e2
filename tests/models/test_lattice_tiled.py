"""The lattice posterior on overlapping tiles (issue #28): layout, exactness of one tile, and
agreement with the whole-lattice posterior as the halo grows.

References: the whole-lattice posterior of the same estimator (itself checked against dense
universal kriging in test_lattice.py), and an independent count of the layout's cells.
"""

from __future__ import annotations

import numpy as np
import pytest

from geogp.exceptions import InputError
from geogp.models import lattice as lm
from geogp.models.lattice.tiled import in_core, posterior_tiles


@pytest.mark.parametrize("shape, margin, core, halo, align", [
    ((50, 70), 4, 16, 8, 1), ((50, 70), 4, 16, 8, 4), ((37, 23), 0, 10, 0, 1),
    ((64, 64), 16, 24, 30, 12), ((9, 200), 3, 40, 5, 1)])
def test_cores_partition_the_lattice_and_windows_hold_the_halo(shape, margin, core, halo, align):
    tiles = posterior_tiles(shape, margin, core, halo, align)
    lattice = tuple(n + 2 * margin for n in shape)
    count = np.zeros(lattice, dtype=int)
    for t in tiles:
        count[t.core] += 1
        for w, c, o, n in zip(t.window, t.core, t.offset, shape, strict=True):
            assert o == w.start and o % align == 0  # the tile lattice starts at its window
            assert 0 <= w.start < w.stop <= n
            # the window (plus the margin) covers the core and `halo` cells beyond it, or
            # reaches the raster's edge
            lo, hi = w.start, w.stop + 2 * margin
            assert lo <= c.start and c.stop <= hi
            assert lo <= max(c.start - halo, 0) or lo == 0
            assert hi >= min(c.stop + halo, n + 2 * margin) or w.stop == n
    assert (count == 1).all()
    # one window shape (one pattern and one symbolic analysis for every tile), and cores of
    # (nearly) equal sides, none above `core`
    assert len({tuple(w.stop - w.start for w in t.window) for t in tiles}) == 1
    for axis in (0, 1):
        sides = sorted({t.core[axis].stop - t.core[axis].start for t in tiles})
        assert sides[-1] <= max(core // align, 1) * align
        count_axis = len({t.core[axis].start for t in tiles})
        assert sides[0] >= lattice[axis] // count_axis - count_axis * align


def test_one_tile_when_the_core_holds_the_lattice():
    (t,) = posterior_tiles((30, 40), 5, 100, 7)
    assert t.window == (slice(0, 30), slice(0, 40))
    assert t.core == (slice(0, 40), slice(0, 50)) and t.offset == (0, 0)
    assert len(posterior_tiles((30, 40), 5, None, 7)) == 1


def test_in_core_selects_the_core_cells():
    (a, _b) = posterior_tiles((20, 10), 2, 12, 4)[:2]
    shape = (a.window[0].stop - a.window[0].start + 4, a.window[1].stop - a.window[1].start + 4)
    cells = np.arange(shape[0] * shape[1])
    got = in_core(cells, shape, a)
    r, c = np.divmod(cells, shape[1])
    want = ((r + a.offset[0] >= a.core[0].start) & (r + a.offset[0] < a.core[0].stop)
            & (c + a.offset[1] >= a.core[1].start) & (c + a.offset[1] < a.core[1].stop))
    assert np.array_equal(got, want) and 0 < got.sum() < got.size


def _raster(rng, shape=(60, 84)):
    """A rough field (range ≈ 4 cells) over a smooth one, with a block gap and scattered
    missing cells: the posterior correlation is short next to data and long in the gap."""
    from scipy.ndimage import gaussian_filter

    ny, nx = shape
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    f = (np.sin(yy / 17.0) + np.cos(xx / 23.0)
         + 4.0 * gaussian_filter(rng.standard_normal(shape), 2.0))
    v = f + 0.2 * rng.standard_normal(shape)
    v[18:34, 30:50] = np.nan
    v[rng.random(shape) < 0.25] = np.nan
    return (np.arange(ny) * 30.0, np.arange(nx) * 30.0), v


def _fitted(axes, v, **kw):
    opts = dict(large_scale=20, mid_scale=4, margin=6, fit_cells=None, maxiter=40,
                backend="auto")
    return lm.LatticeRegressor(**{**opts, **kw}).fit_grid(axes, v)


def _tiled_at(est, obs, ys, core, halo, scheduler=None):
    """The posterior of ``est``'s fitted model recomputed on tiles (same stage-1 θ)."""
    import copy

    e = copy.copy(est)
    e.params_ = dict(est._stage1_params)
    e.posterior_tile, e.posterior_halo, e.scheduler = core, halo, scheduler
    e._posterior(obs, ys)
    return e


@pytest.fixture(scope="module")
def whole(request):
    rng = np.random.default_rng(7)
    axes, v = _raster(rng)
    est = _fitted(axes, v, posterior_tile=None)
    obs = np.isfinite(v)
    return est, obs, est.scaler_.y(v[obs])


def test_one_tile_is_the_whole_lattice_posterior(whole):
    est, obs, ys = whole
    one = _tiled_at(est, obs, ys, 10_000, 0)
    assert one.posterior_tiles_ == 1
    np.testing.assert_array_equal(one.posterior_.mean, est.posterior_.mean)
    np.testing.assert_array_equal(one.posterior_.var, est.posterior_.var)
    np.testing.assert_array_equal(one.posterior_.cov, est.posterior_.cov)
    assert one.log_likelihood_ == est.log_likelihood_


def test_the_posterior_is_a_value_computed_without_changing_the_model(whole):
    """``lattice_posterior`` on the fitted model at its stage-1 θ returns exactly the fitted
    posterior (θ after stage 2, c, moments, coefficients, likelihood), and the model it read
    is unchanged: no attribute is set or replaced."""
    import copy

    from geogp.models.lattice.posterior import lattice_posterior

    est, obs, ys = whole
    model = copy.copy(est)
    before = dict(vars(model))
    post = lattice_posterior(model, dict(est._stage1_params), obs, ys,
                             model.plan_posterior_tiles(obs.shape))
    assert vars(model).keys() == before.keys()
    assert all(vars(model)[k] is before[k] for k in before)
    assert post.n_tiles == est.posterior_tiles_ == 1
    assert post.params.keys() == est.params_.keys()
    assert all(float(post.params[k]) == float(est.params_[k]) for k in est.params_)
    assert post.local_scale == est.local_scale_ != 1.0
    assert post.log_likelihood == est.log_likelihood_ and post.n_obs == int(obs.sum())
    whole = est.posterior_
    for got, want in ((post.mean, whole.mean), (post.var, whole.var), (post.cov, whole.cov),
                      (post.beta, est.beta_), (post.large_coef, est.large_coef_)):
        np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def tiled_by_halo(whole):
    """The whole fit's posterior on 24-cell tiles (12 of them), by halo, each computed once."""
    est, obs, ys = whole
    done = {}

    def get(halo):
        if halo not in done:
            done[halo] = _tiled_at(est, obs, ys, 24, halo)
        return done[halo]

    return get


def test_tiles_converge_to_the_whole_lattice_posterior_as_the_halo_grows(whole, tiled_by_halo):
    est, _, _ = whole
    sd = np.sqrt(est.posterior_.var)
    errors = []
    for halo in (4, 36):  # (a middle halo of 12 fell between the two; dropped for the time)
        t = tiled_by_halo(halo)
        assert t.posterior_tiles_ == 12 and np.isnan(t.log_likelihood_)
        assert est.posterior_tiles_ == 1 and np.isfinite(est.log_likelihood_)
        errors.append((np.max(np.abs(t.posterior_.mean - est.posterior_.mean) / sd),
                       np.max(np.abs(np.sqrt(t.posterior_.var) / sd - 1.0)),
                       np.max(np.abs(t.posterior_.cov - est.posterior_.cov))
                       / np.max(est.posterior_.var),
                       max(abs(float(t.params_[k] - est.params_[k])) for k in est.params_)))
    errors = np.array(errors)
    assert (np.diff(errors, axis=0) < 0).all(), errors  # every error shrinks with the halo
    # at a halo of 36 cells (≈ 9 ranges) every cell's mean is within 1 % of its posterior sd
    assert errors[-1, 0] < 1e-2 and errors[-1, 1] < 1e-3 and errors[-1, 2] < 1e-3, errors
    assert errors[-1, 3] < 1e-2, errors  # stage 2 from the tiles' M: θ within 1 %


def test_tiled_posterior_predicts_like_the_whole_one(whole, tiled_by_halo):
    """Predictions at points (bilinear, with the neighbour covariances) from the tiled
    posterior agree with the whole-lattice ones to the same tolerance; samples need the whole
    lattice's factor and are refused with the reason."""
    est, _, _ = whole
    rng = np.random.default_rng(3)
    tiled = tiled_by_halo(36)
    assert tiled.posterior_tiles_ == 12
    pts = np.stack([rng.uniform(0, 59 * 30.0, 500), rng.uniform(0, 83 * 30.0, 500)], axis=1)
    a, b = est.predict(pts), tiled.predict(pts)
    sd = np.sqrt(a.var_latent)
    np.testing.assert_allclose(b.mean, a.mean, atol=1e-2 * float(np.min(sd)))
    np.testing.assert_allclose(np.sqrt(b.var_latent), sd, rtol=1e-3)
    with pytest.raises(InputError, match="whole lattice"):
        tiled.sample_cells(2, seed=0)


def test_posterior_tile_settings_are_checked():
    axes, v = _raster(np.random.default_rng(1), (20, 20))
    for kw in ({"posterior_tile": 4}, {"posterior_tile": "big"}, {"posterior_halo": -1},
               {"posterior_halo": None}, {"posterior_tile": True}):
        with pytest.raises(InputError, match="posterior_"):
            lm.LatticeRegressor(**kw).fit_grid(axes, v)


def test_a_tiled_model_file_round_trips_and_score_refuses(tmp_path):
    """The front end: a lattice fit with posterior tiles saves and loads with the same
    predictions; score() says why it has no whole-raster likelihood."""
    import geogp
    from tests.frontend._frontend_rasters import make_raster

    da = make_raster(40, 50, seed=2)
    model = geogp.fit(da, model="lattice", maxiter=10, margin=4, posterior_tile=16,
                      posterior_halo=12)
    assert model.estimators_[0].posterior_tiles_ == 12
    path = tmp_path / "m.npz"
    model.save(path)
    back = geogp.GeoRegressor.load(path)
    assert back.estimators_[0].posterior_tiles_ == 12
    a, b = model.predict(), back.predict()
    for name in a.data_vars:
        np.testing.assert_array_equal(a[name].values, b[name].values)
    for m in (model, back):
        with pytest.raises(InputError, match="tiles"):
            m.score()


def test_the_progress_bar_counts_both_passes_over_the_tiles(capsys):
    """One posterior bar: 9 tile solves, the large scales, 9 tiles' moments (19 steps)."""
    import geogp
    from tests.frontend._frontend_rasters import make_raster

    geogp.fit(make_raster(30, 40, seed=4), model="lattice", maxiter=3, margin=4,
              posterior_tile=16, posterior_halo=8, progress=True)
    err = capsys.readouterr().err
    assert "posterior on 9 tiles (2 passes)" in err and "19/19" in err
    assert "pass 1: tile solves, 8 of 9 done" in err and "large scales" in err
    assert "pass 2: tile moments, 8 of 9 done" in err
    assert "lattice model on 30 × 40 cells: posterior on 9 tiles; estimated peak memory" in err
    # a short fit's time is given in seconds (it read "roughly 0 min")
    from geogp.models.lattice import LatticeRegressor

    secs = LatticeRegressor(margin=4, posterior_tile=16,
                            posterior_halo=8).cost_estimate((30, 40))["seconds"]
    assert secs < 90 and f"roughly {secs:.0f}" in err
    assert "(the 2-core reference rate, then this machine's load)" in err


def test_a_local_cluster_computes_the_same_posterior_bit_for_bit(whole):
    """Tiles as dask.distributed tasks on a LocalCluster of 2 worker processes give the
    in-process result exactly (each tile is single-threaded and deterministic; M is summed
    in tile order)."""
    import copy

    from distributed import Client, LocalCluster

    est, obs, ys = whole
    weighted = copy.copy(est)  # a robust fit's per-cell weights travel with the model
    weighted.obs_weight_ = np.where(obs, np.random.default_rng(3).uniform(0.1, 1.0, obs.shape),
                                    np.nan)
    here = [_tiled_at(e, obs, ys, 24, 12) for e in (est, weighted)]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        there = [_tiled_at(e, obs, ys, 24, 12, scheduler=client) for e in (est, weighted)]
        assert len(client.scheduler_info()["workers"]) == 2
    for a, b in zip(here, there, strict=True):
        assert a.posterior_tiles_ == b.posterior_tiles_ == 12
        np.testing.assert_array_equal(b.posterior_.mean, a.posterior_.mean)
        np.testing.assert_array_equal(b.posterior_.var, a.posterior_.var)
        np.testing.assert_array_equal(b.posterior_.cov, a.posterior_.cov)
        assert b.params_ == a.params_
    assert np.max(np.abs(here[1].posterior_.mean - here[0].posterior_.mean)) > 1e-3


def test_cost_estimate_counts_the_tiles_and_grows_with_the_tile_cells():
    """The announced estimates: the tiles are the posterior's, the memory is the memory
    estimate, and the time grows with the cells of the tiles (shared by dask workers)."""
    est = lm.LatticeRegressor(large_scale="auto", mid_scale="auto")
    small, big = est.cost_estimate((300, 500)), est.cost_estimate((1200, 1200))
    assert small["tiles"] == len(est.plan_posterior_tiles((300, 500))) == 1
    assert big["tiles"] == len(est.plan_posterior_tiles((1200, 1200))) > 1
    assert big["bytes"] == est.memory_estimate((1200, 1200)) <= est.max_bytes
    from geogp.models.lattice.memory import STAGES_SECONDS, WORKER_EFFICIENCY, tile_cells

    def cells(shape):
        return sum(tile_cells(t, int(est.margin)) for t in est.plan_posterior_tiles(shape))

    assert (big["seconds"] - STAGES_SECONDS) / (small["seconds"] - STAGES_SECONDS) == (
        pytest.approx(cells((1200, 1200)) / cells((300, 500))))
    assert cells((1200, 1200)) > 10 * cells((300, 500))
    # dask workers share the tiles, each at WORKER_EFFICIENCY of this process (which runs
    # its tiles on two threads): on two cores two workers gain nothing, four would
    four = est.cost_estimate((1200, 1200), workers=4)
    assert (big["seconds"] - STAGES_SECONDS) / (four["seconds"] - STAGES_SECONDS) == (
        pytest.approx(4 * WORKER_EFFICIENCY))
    assert small["seconds"] < four["seconds"] < big["seconds"]


def test_the_auto_plan_never_shrinks_below_its_smallest_core():
    """Under a limit that the raster's own arrays meet but no tile does, the plan stops at
    16-cell cores (the fit then refuses with the estimate) instead of running on to one tile
    per cell; under one that not even the raster's arrays meet, it keeps the default core
    (the estimate is the arrays', whatever the tile)."""
    from geogp.models.lattice.memory import POSTERIOR_CORE, lattice_bytes, tile_cells

    arrays = lattice_bytes(332 * 432, 0, 2, False, 4)
    est = lm.LatticeRegressor(max_bytes=arrays * 1.001, mean="linear")
    assert est._n_columns(0, (300, 400)) == 4
    tiles = est.plan_posterior_tiles((300, 400))
    sides = {c.stop - c.start for t in tiles for c in t.core}
    assert sides == {16, 332 - 20 * 16}  # 16-cell cores, and the remainder at the edge
    assert len(tiles) == -(-332 // 16) * -(-432 // 16)
    assert est.memory_estimate((300, 400)) > est.max_bytes
    assert max(tile_cells(t, 16) for t in tiles) < 332 * 432
    hopeless = lm.LatticeRegressor(max_bytes=arrays * 0.999).plan_posterior_tiles((300, 400))
    assert len(hopeless) == 1 and max(332, 432) <= POSTERIOR_CORE  # one 512-cell core holds it


def test_tile_states_wait_on_disk_as_estimated_and_are_removed(whole, tmp_path, monkeypatch):
    """Between the passes each tile's state waits in one file of a temporary directory: the
    files hold at most what :func:`state_bytes` estimates (plus the .npz headers; the
    estimate counts a next row and column for every core, also at the lattice's end), and
    are gone when the posterior is done, also when pass 2 fails."""
    import tempfile

    from geogp.models.lattice import workers as lattice_workers
    from geogp.models.lattice.memory import state_bytes

    est, obs, ys = whole
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = {}
    original = lattice_workers.KeptStates.map

    def spy(self, fn, args, report=None):
        files = list(tmp_path.glob("geogp-tiles-*/*.npz"))
        seen.update(count=len(files), size=sum(f.stat().st_size for f in files))
        return original(self, fn, args, report)

    monkeypatch.setattr(lattice_workers.KeptStates, "map", spy)
    t = _tiled_at(est, obs, ys, 24, 12)
    tiles = t.plan_posterior_tiles(obs.shape)
    want = state_bytes(tiles, t._n_columns())
    assert seen["count"] == len(tiles) == 12
    assert 0.97 * want <= seen["size"] <= want + 12 * 2048
    assert list(tmp_path.iterdir()) == []

    def broken(self, fn, args, report=None):
        raise RuntimeError("pass 2 failed")

    monkeypatch.setattr(lattice_workers.KeptStates, "map", broken)
    with pytest.raises(RuntimeError, match="pass 2 failed"):
        _tiled_at(est, obs, ys, 24, 12)
    assert list(tmp_path.iterdir()) == []


def test_a_tiled_posterior_refuses_before_its_tiles_when_the_disk_is_too_small(whole,
                                                                             monkeypatch):
    import shutil

    from geogp.models.lattice import memory as lattice_memory
    from geogp.models.lattice import posterior as lattice_posterior

    est, obs, ys = whole
    monkeypatch.setattr(lattice_memory.shutil, "disk_usage",
                        lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))

    def never(*a, **k):
        raise AssertionError("a tile ran before the refusal")

    monkeypatch.setattr(lattice_posterior, "tile_statistics", never)
    with pytest.raises(InputError, match=r"GiB on disk between their two passes.*TMPDIR"):
        _tiled_at(est, obs, ys, 24, 12)


def test_core_state_in_place_equals_the_copy(rng):
    """``overwrite_s=True`` computes F − S_F in S's own columns (no second array): the same
    numbers as the copy, and ``g`` is a view of ``s``."""
    from geogp.models.lattice.tiled import core_state, extended_core

    shape, core = (9, 11), (slice(0, 9), slice(0, 11))
    ey, ex, _ = extended_core(shape, core)
    s = rng.standard_normal((ey * ex, 6))
    cols = rng.standard_normal((shape[0] * shape[1], 5))

    def columns(rr, cc):
        return cols[rr * shape[1] + cc].copy()

    def field_cov(a, b):
        return 1.0 + 0.0 * a

    copy_state = core_state(shape, core, s.copy(), columns, field_cov)
    s2 = s.copy()
    in_place = core_state(shape, core, s2, columns, field_cov, overwrite_s=True)
    assert np.shares_memory(in_place.g, s2) and not np.shares_memory(copy_state.g, s)
    for a, b in zip(copy_state, in_place, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(copy_state.g.reshape(-1, 5), cols - s[:, 1:])


def test_local_workers_count_in_the_memory_estimate_or_leave_the_tiles_here():
    """#41 item 3: ``geogp fit --workers 2`` used 5.71 GiB across its processes on 1200²
    against an estimate of 3.6 GiB and the 4 GiB limit. The estimate now counts the tile that
    each dask worker on this machine holds and the tiles' states they keep: the tiles are
    sized so that all of it fits the limit, and where no sensible size does (cores below
    twice the halo) they run in this process, as planned for it."""
    from distributed import Client, LocalCluster

    from geogp.models.lattice.memory import POSTERIOR_HALO, lattice_bytes, tile_cells
    from geogp.models.lattice.workers import local_workers

    shape = (1200, 1200)
    tight = lm.LatticeRegressor(large_scale="auto", mid_scale="auto")  # the 4 GiB default
    roomy = lm.LatticeRegressor(large_scale="auto", mid_scale="auto", max_bytes=8 * 2**30)
    alone = {e.max_bytes: e.tile_plan(shape) for e in (tight, roomy)}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster):
        assert local_workers("auto") == 2
        two = {e.max_bytes: (e.tile_plan(shape), e.cost_estimate(shape))
               for e in (tight, roomy)}
    assert local_workers("auto") == 0  # no client any more: this process alone
    assert local_workers("tcp://10.0.0.1:8786") == 0  # a cluster by address: its own memory
    m = int(tight.margin)
    n = (shape[0] + 2 * m) * (shape[1] + 2 * m)
    rest = (tight._alpha(), tight.mid_factor(shape) is not None, tight._n_columns(0, shape))

    def biggest(tiles):
        return max(tile_cells(t, m) for t in tiles)

    for est in (tight, roomy):
        tiles, workers = alone[est.max_bytes]
        assert workers == 0 and len(tiles) > 1
        # one tile per worker at the single process's size would pass the limit
        assert lattice_bytes(n, biggest(tiles), *rest) <= est.max_bytes
        assert lattice_bytes(n, biggest(tiles), *rest, 2) > est.max_bytes
    # under 4 GiB no tiles with cores of twice the halo fit two workers: they stay here
    (tiles, workers), cost = two[tight.max_bytes]
    assert workers == 0 and tiles == alone[tight.max_bytes][0]
    assert cost["bytes"] == lattice_bytes(n, biggest(tiles), *rest) <= tight.max_bytes
    side = 2 * POSTERIOR_HALO + 2 * POSTERIOR_HALO + 2 * m  # the smallest core's tile
    assert lattice_bytes(n, side**2, *rest, 2) > tight.max_bytes
    # under 8 GiB smaller tiles fit both workers, and the estimate counts them all
    (tiles, workers), cost = two[roomy.max_bytes]
    assert workers == 2 == cost["local_workers"]
    assert biggest(tiles) < biggest(alone[roomy.max_bytes][0])
    assert cost["bytes"] == lattice_bytes(n, biggest(tiles), *rest, 2) <= roomy.max_bytes


def test_tile_states_overlap_the_next_tiles_solves_and_give_the_same_posterior(whole,
                                                                              monkeypatch):
    """In one process, a tile's state (its selected inversion) is computed in a background
    thread while the next tile is solved. The posterior equals the sequential one bit for
    bit; every state runs off the main thread; a tile's factor is copied only once the
    previous state is done (one copy and its inverse alive at a time, as without the
    overlap); and no state is pending when a tile of another window shape starts (its
    pattern's factor is freed first)."""
    import threading

    from geogp.models.lattice import posterior as lp
    from geogp.models.lattice import workers as lw

    est, obs, ys = whole
    monkeypatch.setattr(lw, "available_cores", lambda: 1)
    alone = _tiled_at(est, obs, ys, 24, 12)
    events, lock = [], threading.Lock()

    def log(*event):
        with lock:
            events.append(event)

    real_statistics, real_state, real_later = lp.tile_statistics, lp._tile_state, lp.inverse_later

    def statistics(est, raster, tile, *args, **kw):
        log("solve", tuple(w.stop - w.start for w in tile.window))
        return real_statistics(est, raster, tile, *args, **kw)

    def state(pattern, *args):
        log("start", threading.current_thread().name, len(pattern._cache))
        out = real_state(pattern, *args)
        log("end")
        return out

    def later(*args):
        log("copy")
        return real_later(*args)

    monkeypatch.setattr(lw, "available_cores", lambda: 2)
    monkeypatch.setattr(lp, "tile_statistics", statistics)
    monkeypatch.setattr(lp, "_tile_state", state)
    monkeypatch.setattr(lp, "inverse_later", later)
    both = _tiled_at(est, obs, ys, 24, 12)
    assert both.posterior_tiles_ == alone.posterior_tiles_ == 12
    for name in ("mean", "var", "cov"):
        np.testing.assert_array_equal(getattr(both.posterior_, name),
                                      getattr(alone.posterior_, name))
    kinds = [e[0] for e in events]
    assert kinds.count("solve") == kinds.count("copy") == kinds.count("start") == 12
    assert all(e[1].startswith("geogp-state") and e[2] == 0 for e in events if e[0] == "start")
    overlapped = 0
    for k, event in enumerate(events):
        copies, ends = kinds[:k].count("copy"), kinds[:k].count("end")
        if event[0] == "copy":
            assert ends == copies, (k, events)  # no state in flight
        if event[0] == "solve":
            overlapped += kinds[:k].count("start") > ends
    assert overlapped >= 1  # some tile was solved while the previous state was computed
