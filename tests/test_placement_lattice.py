"""Placement on the lattice posterior (issue #29): covariance columns and the sequential
(Woodbury) conditioning on new sites, against dense algebra and against the model's own
posterior recomputed with the site observed at the same θ."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from geogp.exceptions import InputError
from geogp.models import lattice as lm
from geogp.models.lattice.state import Tiled
from geogp.placement.lattice import LatticeCovariance

# rasters without a CRS on purpose (planar is assumed, with a warning)
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.MissingCRSWarning")


def _raster(seed, shape=(22, 26)):
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(seed)
    ny, nx = shape
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    v = np.sin(yy / 6.0) + np.cos(xx / 7.0) + 2.0 * gaussian_filter(
        rng.standard_normal(shape), 1.5) + 0.2 * rng.standard_normal(shape)
    v[6:14, 8:18] = np.nan
    v[rng.random(shape) < 0.3] = np.nan
    return (np.arange(ny) * 10.0, np.arange(nx) * 10.0), v


def _every_cell(est, v):
    """Every cell of the test raster ``v`` (10-unit spacing) as placement candidates, and
    their flat cells of ``est``'s lattice (margin included)."""
    from geogp.placement import Candidates

    m = int(est.margin)
    ny, nx = v.shape
    rows, cols = np.divmod(np.arange(ny * nx), nx)
    return (Candidates.grid([np.arange(ny) * 10.0, np.arange(nx) * 10.0]),
            (rows + m) * est.shape_[1] + cols + m)


def _place_cli(tmp_path):
    """The 20 × 24 test raster as ``tmp_path/in.tif`` (UTM), and a parser of `geogp place`."""
    import argparse

    import rioxarray  # noqa: F401
    import xarray as xr

    from geogp.cli.place import add_place_parser

    _, v = _raster(5, (20, 24))
    y, x = 5000.0 - np.arange(20) * 100.0, 300000.0 + np.arange(24) * 100.0
    da = xr.DataArray(v, dims=("y", "x"), coords={"y": y, "x": x}).rio.write_crs("EPSG:32633")
    da.rio.to_raster(tmp_path / "in.tif")
    parser = argparse.ArgumentParser(prog="geogp")
    add_place_parser(parser.add_subparsers(dest="command"))
    return parser


@pytest.fixture(scope="module", params=[None, 4], ids=["fine", "mid-scale"])
def fitted(request):
    axes, v = _raster(3)
    est = lm.LatticeRegressor(large_scale=12, mid_scale=request.param, margin=4,
                              fit_cells=None, maxiter=25, posterior_tile=None,
                              backend="cholmod").fit_grid(axes, v)
    return est, v


def _dense_covariance(est):
    """C = H (B/c)⁻¹ Hᵀ + R A⁻¹ Rᵀ from the model's posterior state, densely."""
    sm = est.posterior_.sampler()
    binv = np.linalg.inv(sm.pattern.to_scipy(sm.b_vals).toarray())
    n = est.shape_[0] * est.shape_[1]
    h = np.eye(n) if sm.pi is None else np.hstack([np.eye(n), sm.pi.toarray()])
    return h @ binv @ h.T + sm.g @ sm.w_cov @ sm.g.T  # g (D A⁻¹ D) gᵀ = r A⁻¹ rᵀ


def test_columns_are_the_dense_posterior_covariance(fitted):
    est, _ = fitted
    cov = _dense_covariance(est)
    np.testing.assert_allclose(np.diag(cov), est.posterior_.var, rtol=1e-9)  # the model's own
    lc = LatticeCovariance(est)
    for cell in (0, 37, lc.n // 2, lc.n - 1):
        np.testing.assert_allclose(lc.prior_column(cell), cov[:, cell], rtol=1e-9,
                                   atol=1e-12 * cov.max())


def test_sequential_sites_equal_joint_dense_conditioning(fitted):
    """Three sites absorbed one by one give the covariance conditioned on all three at once
    (dense: C − C_S (C_SS + σ²I)⁻¹ C_Sᵀ)."""
    est, _ = fitted
    cov = _dense_covariance(est)
    lc = LatticeCovariance(est)
    sites = [lc.n // 3, lc.n // 3 + 1, 2 * lc.n // 3]
    for s in sites:
        lc.add(s)
    cs = cov[:, sites]
    want = cov - cs @ np.linalg.solve(cs[sites] + lc.noise * np.eye(3), cs.T)
    np.testing.assert_allclose(lc.variance(), np.diag(want), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(lc.column(5), want[:, 5], rtol=1e-8, atol=1e-11)
    assert lc.sites == sites
    assert np.all(lc.variance() <= est.posterior_.var + 1e-12)  # a measurement never adds variance


def test_a_site_equals_the_posterior_recomputed_with_it_observed(fitted):
    """Absorbing a measurement at a gap cell gives the variances of the model's posterior
    recomputed (selected inversion of the refactorised system) with that cell observed, at
    the same θ."""
    est, v = fitted
    m = int(est.margin)
    obs = np.isfinite(v)
    site = (10, 12)  # inside the block gap
    assert not obs[site]
    obs2 = obs.copy()
    obs2[site] = True
    ys2 = np.zeros(obs2.sum())  # the variances do not depend on the value
    again = copy.copy(est)
    again.optimize = False
    again._posterior(obs2, ys2)
    lc = LatticeCovariance(est)
    cell = (site[0] + m) * est.shape_[1] + site[1] + m
    lc.add(cell)
    np.testing.assert_allclose(lc.variance(), again.posterior_.var, rtol=1e-7)
    assert lc.variance()[cell] < 0.5 * est.posterior_.var[cell]


def test_cells_are_checked_and_tiled_models_refused(fitted):
    est, _ = fitted
    lc = LatticeCovariance(est)
    for bad in (-1, lc.n, 2.5, True):
        with pytest.raises(InputError, match="flat index"):
            lc.add(bad)
    tiled = copy.copy(est)
    post = est.posterior_
    tiled.posterior_ = Tiled(mean=post.mean, var=post.var, cov=post.cov, n_tiles=4,
                             observed=np.ones(1, bool), w_cov=post.sampler().w_cov)
    with pytest.raises(InputError, match="whole lattice"):
        tiled.sample_cells(1)
    loaded = copy.copy(est)
    loaded.posterior_ = post.moments()  # what a model file keeps
    with pytest.raises(InputError, match="loaded from a file"):
        LatticeCovariance(loaded)


def _dense_greedy(cov, noise, cand, targets, n, strategy, taken=()):
    """Brute-force greedy on the dense covariance: every step scores every candidate from the
    conditioned covariance, recomputed from scratch."""
    picks = []
    for _ in range(n):
        chosen = list(taken) + [cand[p] for p in picks]
        c = cov
        if chosen:
            cs = cov[:, chosen]
            c = cov - cs @ np.linalg.solve(cs[chosen] + noise * np.eye(len(chosen)), cs.T)
        var = np.diag(c)
        if strategy == "variance":
            score = var[cand] + noise
        elif strategy == "reduction":
            x = c[np.ix_(cand, targets)]
            score = np.sum(x**2, axis=1) / (var[cand] + noise)
        elif strategy == "joint":
            x = c[np.ix_(targets, cand)]
            q = np.sum(x * np.linalg.solve(c[np.ix_(targets, targets)]
                                           + noise * np.eye(len(targets)), x), axis=0)
            score = -0.5 * np.log1p(-np.minimum(q / (var[cand] + noise), 1 - 1e-15))
        else:
            x = c[np.ix_(cand, targets)]
            z = x**2 / ((var[cand, None] + noise) * (var[None, targets] + noise))
            score = -0.5 * np.sum(np.log1p(-np.minimum(z, 1 - 1e-15)), axis=1)
        score[picks] = -np.inf
        picks.append(int(np.argmax(score)))
    return picks


@pytest.mark.parametrize("strategy", ["variance", "mi", "joint", "reduction"])
def test_suggest_sites_on_the_lattice_equals_brute_force_greedy(fitted, strategy):
    from geogp.placement import suggest_sites

    est, v = fitted
    m = int(est.margin)
    ny, nx = v.shape
    cands, cand_cells = _every_cell(est, v)
    rng = np.random.default_rng(0)
    tsel = np.sort(rng.choice(ny * nx, 40, replace=False))
    targets = cands.coords[tsel] if strategy != "variance" else None
    existing = np.array([[105.0, 123.0]])  # off-centre: its nearest cell (10, 12)
    got = suggest_sites(est, cands, 4, strategy="mi" if strategy == "joint" else strategy,
                        criterion="joint" if strategy == "joint" else "marginal",
                        targets=targets, existing=existing, min_distance=0)
    assert got.attrs["model"] == "lattice"
    cov = _dense_covariance(est)
    taken = [(10 + m) * est.shape_[1] + 12 + m]
    want = _dense_greedy(cov, float(est.noise_var_), cand_cells, cand_cells[tsel], 4, strategy,
                         taken)
    assert got["index"].tolist() == want


def test_lattice_placement_refuses_what_it_cannot_do(fitted):
    from geogp.exceptions import MemoryEstimateError
    from geogp.placement import Candidates, suggest_sites

    est, v = fitted
    ay, ax = np.arange(v.shape[0]) * 10.0, np.arange(v.shape[1]) * 10.0
    with pytest.raises(InputError, match="not available for the lattice"):
        suggest_sites(est, Candidates.grid([ay, ax]), 2, strategy="krause")
    with pytest.raises(InputError, match="not a cell centre"):
        suggest_sites(est, Candidates.grid([ay + 3.0, ax]), 2, strategy="variance")
    with pytest.raises(MemoryEstimateError, match="lattice placement"):
        suggest_sites(est, Candidates.grid([ay, ax]), 2, strategy="variance", max_memory=1e4)


def test_cli_place_uses_the_lattice_model_by_default(tmp_path, capsys):
    """`geogp place` with defaults fits what `geogp fit` would (the lattice model on a regular
    raster) and returns the sites suggest_sites gives on that model."""
    import json

    import rioxarray  # noqa: F401

    import geogp
    from geogp.cli.place import run_place
    from geogp.placement import Candidates, suggest_sites

    parser = _place_cli(tmp_path)
    out = tmp_path / "s.geojson"
    argv = ["place", str(tmp_path / "in.tif"), "--n", "3", "--out", str(out), "--maxiter", "10",
            "--strategy", "variance", "--min-distance", "0"]
    assert run_place(parser.parse_args(argv)) == 0
    assert "by variance" in capsys.readouterr().out
    xy = np.array([f["geometry"]["coordinates"] for f in json.loads(out.read_text())["features"]])

    geo = geogp.fit(geogp.open_raster(tmp_path / "in.tif"), maxiter=10, posterior_tile=None)
    assert geo.model_ == "lattice"
    est = geo.estimators_[0]
    my, mx = geo.spec_.to_model(geo.target_.y, geo.target_.x)
    sites = suggest_sites(est, Candidates.grid([my, mx]), 3, strategy="variance",
                          min_distance=0)
    assert sites.attrs["model"] == "lattice"
    iy, ix = np.unravel_index(sites["index"].to_numpy(), (my.size, mx.size))
    np.testing.assert_array_equal(xy, np.stack([geo.target_.x[ix], geo.target_.y[iy]], 1))


def test_batched_columns_equal_single_columns(fitted):
    est, _ = fitted
    lc = LatticeCovariance(est)
    lc.add(lc.n // 2)
    cells = [3, lc.n // 2, lc.n - 5, 77]
    batch = lc.columns(cells)
    for j, c in enumerate(cells):
        np.testing.assert_allclose(batch[:, j], lc.column(c), rtol=1e-12, atol=1e-14)


def test_added_observations_equal_the_posterior_recomputed_with_them(fitted):
    """The active loop's update (two measurements, values included) gives the mean, variance
    and neighbour covariances of the posterior recomputed with them at the same θ; placing
    again on the updated model starts from that posterior, and samples are refused."""
    from geogp.placement import Candidates, add_observations, suggest_sites

    est, v = fitted
    obs = np.isfinite(v)
    sites = [(10, 12), (8, 15)]  # inside the block gap
    values = np.array([1.7, -0.4])
    X = np.array([[r * 10.0, c * 10.0] for r, c in sites])
    before = est.posterior_.mean.copy()
    upd = add_observations(est, X, values)
    obs2 = obs.copy()
    vals = v.copy()
    for (r, c), val in zip(sites, values, strict=True):
        obs2[r, c], vals[r, c] = True, val
    again = copy.copy(est)
    again.optimize = False
    again._posterior(obs2, est.scaler_.y(vals[obs2]))
    scale = float(np.max(est.posterior_.var))
    np.testing.assert_allclose(upd.posterior_.mean, again.posterior_.mean, atol=1e-7 * scale)
    np.testing.assert_allclose(upd.posterior_.var, again.posterior_.var, rtol=1e-7)
    np.testing.assert_allclose(upd.posterior_.cov, again.posterior_.cov, atol=1e-8 * scale)
    assert np.array_equal(est.posterior_.mean, before)
    assert not np.allclose(upd.posterior_.mean, before)
    # the original model is unchanged, and placement continues from the update
    ay, ax = np.arange(v.shape[0]) * 10.0, np.arange(v.shape[1]) * 10.0
    cands = Candidates.grid([ay, ax])
    first = suggest_sites(est, cands, 1, strategy="variance", min_distance=0)
    then = suggest_sites(upd, cands, 1, strategy="variance", min_distance=0)
    assert then["std_before"].iloc[0] <= first["std_before"].iloc[0]
    again_sites = suggest_sites(again, cands, 2, strategy="variance", min_distance=0)
    assert suggest_sites(upd, cands, 2, strategy="variance", min_distance=0)[
        "index"].tolist() == again_sites["index"].tolist()
    with pytest.raises(InputError, match="need a refit"):
        upd.sample_cells(1, seed=0)


def test_cli_place_continues_from_measurements(tmp_path, capsys):
    """The active loop from the shell: `--measured` conditions the lattice posterior on the
    new points (their nearest cells) and places from there, like add_observations; `--refit`
    makes them data; bad tables are refused in one line."""
    import argparse
    import json

    import pandas as pd
    import rioxarray  # noqa: F401
    import xarray as xr

    import geogp
    from geogp.cli.place import add_place_parser, run_place
    from geogp.placement import Candidates, add_observations, suggest_sites

    _, v = _raster(6, (20, 24))
    y, x = 5000.0 - np.arange(20) * 100.0, 300000.0 + np.arange(24) * 100.0
    da = xr.DataArray(v, dims=("y", "x"), coords={"y": y, "x": x}).rio.write_crs("EPSG:32633")
    da.rio.to_raster(tmp_path / "in.tif")
    pd.DataFrame({"x": [x[12] + 20.0, x[10]], "y": [y[9] - 30.0, y[8]],
                  "value": [2.5, -1.0]}).to_csv(tmp_path / "m.csv", index=False)
    parser = argparse.ArgumentParser(prog="geogp")
    add_place_parser(parser.add_subparsers(dest="command"))

    def run(*extra):
        out = tmp_path / "s.geojson"
        argv = ["place", str(tmp_path / "in.tif"), "--n", "2", "--out", str(out), "--maxiter",
                "10", "--strategy", "variance", "--min-distance", "0", "--overwrite", *extra]
        code = run_place(parser.parse_args(argv))
        doc = json.loads(out.read_text()) if code == 0 else None
        return code, capsys.readouterr(), doc

    code, io, doc = run("--measured", str(tmp_path / "m.csv"))
    assert code == 0 and "posterior updated with 2 measurement(s)" in io.out
    geo = geogp.fit(geogp.open_raster(tmp_path / "in.tif"), maxiter=10, posterior_tile=None)
    my, mx = geo.spec_.to_model(geo.target_.y, geo.target_.x)
    upd = add_observations(geo.estimators_[0], np.array([[my[9], mx[12]], [my[8], mx[10]]]),
                           [2.5, -1.0])
    want = suggest_sites(upd, Candidates.grid([my, mx]), 2, strategy="variance",
                         min_distance=0)
    iy, ix = np.unravel_index(want["index"].to_numpy(), (my.size, mx.size))
    xy = np.array([f["geometry"]["coordinates"] for f in doc["features"]])
    np.testing.assert_array_equal(xy, np.stack([x[ix], y[iy]], 1))
    # the same points as a GeoPackage in lon/lat (reprojected to the raster's CRS), and as a
    # CSV with other column names: the same sites
    import geopandas as gpd

    table = pd.read_csv(tmp_path / "m.csv")
    gpd.GeoDataFrame({"temp": table["value"]}, geometry=gpd.points_from_xy(
        table["x"], table["y"]), crs="EPSG:32633").to_crs("EPSG:4326").to_file(
        tmp_path / "m.gpkg")
    code, io, again = run("--measured", str(tmp_path / "m.gpkg"), "--value", "temp")
    assert code == 0 and "posterior updated with 2 measurement(s)" in io.out
    assert again["features"] == doc["features"]
    table.rename(columns={"x": "east", "y": "north"}).to_csv(tmp_path / "m2.csv", index=False)
    code, io, again = run("--measured", str(tmp_path / "m2.csv"), "--x", "east", "--y", "north")
    assert code == 0 and again["features"] == doc["features"]
    code, io, _ = run("--measured", str(tmp_path / "m2.csv"))
    assert code == 2 and "--x, --y, --value" in io.err
    code, io, _ = run("--measured", str(tmp_path / "m.csv"), "--refit")
    assert code == 0 and "posterior updated" not in io.out
    pd.DataFrame({"x": [x[0] - 500.0], "y": [y[0]], "value": [1.0]}).to_csv(
        tmp_path / "far.csv", index=False)
    code, io, _ = run("--measured", str(tmp_path / "far.csv"))
    last = io.err.strip().splitlines()[-1]  # one error line (after any library warnings)
    assert code == 2 and last.startswith("geogp: error:") and "outside the raster" in last
    code, io, _ = run("--refit")
    assert code == 2 and "pass --measured too" in io.err


def test_probed_marginal_mi_estimates_the_first_order_criterion_over_every_cell(fitted):
    """Over every cell, the lattice's marginal mi is ½ Σ_i C_ai²/(ρ_i d_a) estimated by random
    sign probes: with many probes the estimate matches the dense value within its stated
    error (relative sd √(2/m)), before and after sites are absorbed; suggest_sites takes this
    route when the targets pass max_targets (no thinning)."""
    from geogp.placement import suggest_sites
    from geogp.placement.lattice_setup import lattice_greedy

    est, v = fitted
    cands, cells = _every_cell(est, v)
    probes = 6000
    g = lattice_greedy(est, cands, None, None, "mi", "marginal", 2, 1e12, probes=probes)
    cov = _dense_covariance(est)
    noise = float(est.noise_var_)

    def exact(c):
        var = np.diag(c)[cells]
        x = c[np.ix_(cells, cells)]
        return 0.5 * np.sum(x**2 / (var[None, :] + noise), axis=1) / (var + noise)

    tol = 5 * np.sqrt(2.0 / probes)  # five standard deviations of the estimate, relative
    active = np.ones(len(cells), dtype=bool)
    np.testing.assert_allclose(g.score_all(active), exact(cov), rtol=tol)
    for a in (100, 300):
        g.add(a, active)
    chosen = list(cells[[100, 300]])
    cs = cov[:, chosen]
    after = cov - cs @ np.linalg.solve(cs[chosen] + noise * np.eye(2), cs.T)
    # the weights 1/ρ_i stay those of the start (ρ from the data only)
    var0 = np.diag(cov)[cells]
    x = after[np.ix_(cells, cells)]
    want = 0.5 * np.sum(x**2 / (var0[None, :] + noise), axis=1) / (np.diag(after)[cells] + noise)
    np.testing.assert_allclose(g.score_all(active), want, rtol=tol)
    sites = suggest_sites(est, cands, 3, max_targets=50, min_distance=0)
    assert sites.attrs["n_targets"] == len(cells) and not sites.attrs["targets_thinned"]
    # total variance reduction: Σ_i C_ai² / d_a, the same probes with W = I
    g = lattice_greedy(est, cands, None, None, "reduction", "marginal", 1, 1e12, probes=probes)
    x = cov[np.ix_(cells, cells)]
    want = np.sum(x**2, axis=1) / (np.diag(cov)[cells] + noise)
    np.testing.assert_allclose(g.score_all(active), want, rtol=tol)


def test_cli_place_default_strategy_is_reduction_on_the_lattice(tmp_path, capsys):
    import argparse

    import rioxarray  # noqa: F401
    import xarray as xr

    from geogp.cli.place import add_place_parser, run_place

    _, v = _raster(8, (16, 20))
    da = xr.DataArray(v, dims=("y", "x"), coords={"y": 900.0 - 50 * np.arange(16),
                                                  "x": 50.0 * np.arange(20)})
    da.rio.write_crs("EPSG:32633").rio.to_raster(tmp_path / "in.tif")
    parser = argparse.ArgumentParser(prog="geogp")
    add_place_parser(parser.add_subparsers(dest="command"))
    argv = ["place", str(tmp_path / "in.tif"), "--n", "2", "--out",
            str(tmp_path / "s.geojson"), "--maxiter", "5", "--min-distance", "0"]
    assert run_place(parser.parse_args(argv)) == 0
    assert "2 site(s) by reduction among 320 cells" in capsys.readouterr().out


@pytest.mark.parametrize("gib", [2.0, 3.0])
def test_place_auto_keeps_the_lattice_model_and_says_when_it_places_on_tiles(gib):
    """On a 300 × 500 raster `auto` takes the lattice model, as `geogp fit` does, under either
    limit. Under --max-memory 2 its posterior needs tiles (about 2.05 GiB on the whole
    raster), and the note says that placement goes tile by tile; under 3 it is one factor and
    there is no note. The count of tiles is the lattice estimator's own at that limit."""
    from geogp.families import make_estimator, resolve_model
    from geogp.frontend.api_placement import placement_model

    v = np.zeros((300, 500))
    model, opts, note = placement_model(v.shape, True, "auto", max_memory=gib * 2**30)
    limit = {"max_bytes": gib * 2**30}
    assert opts == limit
    assert resolve_model("auto", raster_shape=v.shape, options=limit)[0] == model == "lattice"
    tiles = len(make_estimator("lattice", options=limit).plan_posterior_tiles(v.shape))
    assert (tiles > 1) == (gib == 2.0)
    if tiles == 1:
        assert note == ""
    else:
        assert "tile by tile" in note and f"{tiles} tiles" in note and "300 × 500" in note


@pytest.mark.parametrize("strategy", ["reduction", "mi"])
def test_probed_picks_are_refined_by_exact_scores(fitted, strategy):
    """With few probes (noisy scores), each pick is the best of the REFINE_TOP best-probed
    candidates by the exact criterion from the dense covariance (conditioned on the sites so
    far), and is never worse by that criterion than the probes' own favourite."""
    from geogp.placement.lattice import REFINE_TOP
    from geogp.placement.lattice_setup import lattice_greedy

    est, v = fitted
    cands, cells = _every_cell(est, v)
    noise = float(est.noise_var_)
    cov = _dense_covariance(est)
    rho0 = np.diag(cov)[cells] + noise
    g = lattice_greedy(est, cands, None, None, strategy, "marginal", 3, 1e12, probes=8)
    active = np.ones(len(cells), dtype=bool)
    chosen = []
    for _ in range(3):
        c = cov
        if chosen:
            cs = cov[:, cells[chosen]]
            c = cov - cs @ np.linalg.solve(cs[cells[chosen]] + noise * np.eye(len(chosen)), cs.T)
        x = c[np.ix_(cells, cells)]
        d = np.diag(c)[cells] + noise
        exact = (np.sum(x**2, axis=1) / d if strategy == "reduction"
                 else 0.5 * np.sum(x**2 / rho0[None, :], axis=1) / d)
        rank = np.where(active, g.score_all(active), -np.inf)
        top = np.argsort(-rank, kind="stable")[:REFINE_TOP]
        a, score = g.refine(rank, None)
        assert a == top[np.argmax(exact[top])]
        assert score == pytest.approx(exact[a], rel=1e-8)
        assert exact[a] >= exact[int(np.argmax(rank))]
        g.add(a, active)
        active[a] = False
        chosen.append(a)
