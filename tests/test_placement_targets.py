"""Placement over a whole target area (issue #17): no target-lattice artefact, exact selection
over all targets by bounds, stratified thinning, the default minimum distance, the sites map.

The references refit the collapsed posterior with the sites' φφᵀ added (no rank-one updates),
as in tests/test_placement.py.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import geogp  # noqa: F401  (float64)
from geogp.exceptions import InputError
from geogp.features.fourier_statistics import SufficientStats
from geogp.models.afs import AFSRegressor
from geogp.models.collapsed import posterior
from geogp.placement import Candidates, auto_min_distance, plot_sites, suggest_sites
from geogp.placement import screen as screen_mod

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

try:  # small matrices: threaded BLAS only adds overhead on a shared machine
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

NY, NX, STEP = 24, 32, 0.02  # raster: 768 cells, 0.02 apart


@pytest.fixture(scope="module", autouse=True)
def _single_threaded_blas():
    if threadpool_limits is None:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def short():
    """Matérn-1/2 with ℓ ≈ 2–3 cells on a gappy raster: a short posterior correlation."""
    rng = np.random.default_rng(5)
    ay, ax = np.arange(NY) * STEP, np.arange(NX) * STEP
    Y, X = np.meshgrid(ay, ax, indexing="ij")
    z = np.sin(9 * X) * np.cos(7 * Y) + 0.3 * rng.normal(size=Y.shape)
    for cy, cx, r in [(0.15, 0.2, 0.09), (0.35, 0.5, 0.07), (0.1, 0.5, 0.05)]:
        z[(Y - cy) ** 2 + (X - cx) ** 2 < r * r] = np.nan  # round gaps, no rectangle
    model = AFSRegressor(kernel="matern12", n_features=200, lengthscale=0.3, noise=0.1,
                         optimize=False, margin=0.05).fit_grid([ay, ax], z)
    return model, Candidates.grid([ay, ax])


@pytest.fixture(scope="module")
def all_targets(short):
    """The greedy picks with every cell a target, through the explicit |T| × |V_c| matrix."""
    model, grid = short
    return suggest_sites(model, grid, 6, min_distance=0)


class Refit:
    """Latent variances C_ii at ``locs`` of the collapsed posterior refitted with sites added."""

    def __init__(self, model, locs):
        ff, sc = model.features_, model.scaler_
        self.m, self.Phi = model, np.asarray(ff(sc.x(locs)))
        self.lam = np.exp(np.asarray(ff.log_lambda(model.kernel_)))
        self.kvar0 = float(model.kernel_.variance_at_zero)

    def var(self, sites):
        stats = self.m.stats_
        if len(sites):
            F = self.Phi[list(sites)]
            stats = stats + SufficientStats(F.T @ F, np.zeros(F.shape[1]), 0.0, float(len(F)))
        Q = posterior(np.log(self.lam), self.m.noise_, self.kvar0, stats).quad
        return self.kvar0 + np.sum((self.Phi @ Q) * self.Phi, axis=1)

    def marginal(self, sites) -> float:
        """Full-target marginal criterion of a set: ½ Σ_i log(ρ_i(∅)/ρ_i(A)), ρ = C_ii + σ²."""
        s2 = self.m.noise_
        return 0.5 * float(np.sum(np.log((self.var([]) + s2) / (self.var(sites) + s2))))


def _cells(df):
    return np.stack(np.unravel_index(df["index"].to_numpy(), (NY, NX)), axis=1)


def _chebyshev_min(c) -> int:
    d = np.abs(c[:, None] - c[None]).max(-1)
    return int(d[np.triu_indices(len(c), 1)].min())


# --------------------------------------------------------------------------- (1) all targets
def test_bounds_route_equals_all_targets_and_the_refit_criterion(short, all_targets):
    """max_targets below |T|: the marginal criterion still counts all 768 targets (bounds and
    exact re-ranking) and returns the same picks, scores and target columns as the explicit
    matrix; the summed gains equal the refitted full-target criterion of the pick set."""
    model, grid = short
    df = suggest_sites(model, grid, 6, min_distance=0, max_targets=50)
    assert df.attrs["n_targets"] == NY * NX and not df.attrs["targets_thinned"]
    assert df.attrs["criterion_gap"] == 0.0 and len(df.attrs["exact_evaluations"]) == 6
    assert df["index"].tolist() == all_targets["index"].tolist()
    np.testing.assert_allclose(df["score"], all_targets["score"], rtol=1e-9)
    np.testing.assert_allclose(df["mean_std_after"], all_targets["mean_std_after"], rtol=1e-9)
    ref = Refit(model, grid.coords)
    full = ref.marginal(df["index"].tolist())
    np.testing.assert_allclose(df["score"].sum(), full, rtol=1e-8)  # gains telescope


@pytest.mark.parametrize("kind", ["grid targets", "point targets", "exact GP"])
def test_bounds_route_other_operators(short, kind):
    """Separate grid targets (separable products), scattered targets (NUFFT) and the exact GP
    (explicit features): the bounds route returns the explicit matrix's picks and scores."""
    model, grid = short
    if kind == "exact GP":
        from geogp.models.exact.regressor import ExactGP

        rng = np.random.default_rng(3)
        X = rng.uniform(0, 0.4, (60, 2))
        model = ExactGP("matern12", lengthscale=0.2, noise=0.1, optimize=False).fit(
            X, np.sin(9 * X[:, 0]) + 0.1 * rng.normal(size=60))
        axis = np.linspace(0.0, 0.4, 12)
        grid, targets, kw = Candidates.grid([axis, axis]), None, {}
    elif kind == "grid targets":
        targets = Candidates.grid([np.linspace(0.05, 0.4, 15), np.linspace(0.05, 0.55, 20)])
        kw = {"dense_limit": 0}
    else:
        targets = np.random.default_rng(4).uniform(0.05, 0.4, (300, 2))
        kw = {"dense_limit": 0}
    a = suggest_sites(model, grid, 4, targets=targets, min_distance=0, **kw)
    b = suggest_sites(model, grid, 4, targets=targets, min_distance=0, max_targets=20, **kw)
    assert b.attrs["exact_evaluations"] is not None and b.attrs["criterion_gap"] == 0.0
    assert b["index"].tolist() == a["index"].tolist()
    np.testing.assert_allclose(b["score"], a["score"], rtol=1e-8)
    np.testing.assert_allclose(b["mean_std_after"], a["mean_std_after"], rtol=1e-8)


def test_capped_evaluations_state_a_certified_gap(short, all_targets, monkeypatch):
    """With too few exact evaluations allowed, the pick is the best evaluated one and the
    reported gap bounds its shortfall: F(pick) ≥ F(best)/(1 + gap), F over all targets."""
    model, grid = short
    monkeypatch.setattr(screen_mod, "_BATCH", 2)
    df = suggest_sites(model, grid, 3, min_distance=0, max_targets=50, max_evaluations=2)
    gap = df.attrs["criterion_gap"]
    assert df.attrs["exact_evaluations"] == [2, 2, 2]
    assert 0.0 < gap < 0.5  # the cap did bite, and the bounds still say something
    best = all_targets["score"].iloc[0]  # step 1: same state in both runs
    assert df["score"].iloc[0] <= best * (1 + 1e-12)
    assert df["score"].iloc[0] >= best / (1.0 + gap)


def test_stratified_target_subset_loses_against_all_targets(short, all_targets):
    """Why every target counts: greedy picks scored on a stratified random subset of the cells
    (1 in 5) give up a stated share of the full-target criterion on this raster."""
    model, grid = short
    ref = Refit(model, grid.coords)
    full = ref.marginal(all_targets["index"].tolist())
    losses = []
    for seed in range(3):
        sub, thinned = grid.thin(160, seed)
        assert thinned
        df = suggest_sites(model, grid, 6, min_distance=0, targets=sub.coords)
        losses.append(1.0 - ref.marginal(df["index"].tolist()) / full)
    assert max(losses) > 0.05  # thinning costs information here...
    assert min(losses) > -1e-9  # ...and never beat the full-target greedy on this raster


# --------------------------------------------------------------------------- (2) regression
def test_regular_stride_targets_pulled_sites_onto_their_lattice(short, all_targets):
    """The artefact of issue #17, reproduced with the targets of 0.x (every 6th cell, offset 3)
    and absent from the default: no adjacent sites, no shared lattice, exact full-target picks."""
    model, grid = short
    idx = np.unravel_index(grid.flat, (NY, NX))
    keep = np.all([i % 6 == 3 for i in idx], axis=0)
    old = _cells(suggest_sites(model, grid, 6, targets=grid.coords[keep], min_distance=0))
    assert _chebyshev_min(old) == 1  # adjacent cells...
    assert np.mean(np.all(old % 6 == 3, axis=1)) >= 1 / 3  # ...on the target lattice

    df = suggest_sites(model, grid, 6, max_targets=50)  # defaults: all targets, auto distance
    new = _cells(df)
    assert df["index"].tolist() == all_targets["index"].tolist()
    assert _chebyshev_min(new) >= 2
    assert np.sum(np.all(new % 6 == 3, axis=1)) <= 1  # chance level: 6/36 of a site
    xy = df[["x", "y"]].to_numpy()
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1)[np.triu_indices(len(xy), 1)]
    assert d.min() >= df.attrs["min_distance"] > 0


# --------------------------------------------------------------------------- (3) thinning
def test_thin_is_stratified_and_not_a_stride():
    axes = [np.linspace(0, 1, 60), np.linspace(0, 2, 80)]
    mask = np.ones((60, 80), dtype=bool)
    mask[10:30, 20:50] = False
    grid = Candidates.grid(axes, mask)
    sub, thinned = grid.thin(200, seed=3)
    assert thinned and 150 <= len(sub) <= 200
    rows = np.searchsorted(axes[0], sub.coords[:, 0])
    cols = np.searchsorted(axes[1], sub.coords[:, 1])
    for idx in (rows, cols):
        assert np.gcd.reduce(np.abs(idx - idx[0])) == 1  # no common stride
        for s in range(2, 9):  # each residue class appears: not aliased with any stride
            assert np.unique(idx % s).size == s
    # stratified: every kept cell is a grid cell, and every cell has a kept one nearby
    kept = set(zip(rows.tolist(), cols.tolist(), strict=True))
    assert all(mask[r, c] for r, c in kept)
    ii, jj = np.nonzero(mask)
    d = np.abs(ii[:, None] - rows[None]) + np.abs(jj[:, None] - cols[None])
    assert d.min(axis=1).max() <= 2 * 5  # blocks of at most 5 × 5 cells here
    again, _ = grid.thin(200, seed=3)
    other, _ = grid.thin(200, seed=4)
    np.testing.assert_array_equal(again.coords, sub.coords)
    assert not np.array_equal(other.coords, sub.coords)
    pts = Candidates.points(np.random.default_rng(0).uniform(size=(500, 2)))
    few, thinned = pts.thin(50, seed=1)
    assert thinned and len(few) == 50
    with pytest.raises(InputError, match="≥ 1"):
        grid.thin(0)


# --------------------------------------------------------------------------- (4) min distance
@pytest.fixture(scope="module")
def smooth():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=40)
    model = AFSRegressor(n_features=60, lengthscale=1.0, noise=0.05, optimize=False,
                         margin=0.1).fit(X, y)
    axis = np.linspace(0.02, 0.98, 25)  # 0.04 apart
    return model, Candidates.grid([axis, axis])


def test_default_min_distance_is_applied_and_reported(smooth):
    model, grid = smooth
    ell = min(float(np.min(e)) for e in model.lengthscale_)
    assert math.isclose(auto_min_distance(model), ell / 4, rel_tol=1e-12)
    patch = np.array([[0.5, 0.5], [0.52, 0.5], [0.5, 0.52]])  # targets close together
    free = suggest_sites(model, grid, 8, targets=patch, min_distance=0)
    pts = free[["x", "y"]].to_numpy()
    d_free = np.linalg.norm(pts[:, None] - pts[None], axis=-1)[np.triu_indices(8, 1)]
    assert free.attrs["min_distance"] == 0 and not free.attrs["min_distance_auto"]
    assert d_free.min() < ell / 4  # without it, sites come closer (so the default bites)
    for strategy in ("variance", "mi", "krause"):
        df = suggest_sites(model, grid, 8, strategy=strategy, targets=patch)
        assert df.attrs["min_distance_auto"] and df.attrs["min_distance"] == ell / 4
        pts = df[["x", "y"]].to_numpy()
        d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)[np.triu_indices(8, 1)]
        assert d.min() >= ell / 4
    with pytest.raises(InputError, match="'auto'"):
        suggest_sites(model, grid, 2, min_distance="far")
    with pytest.raises(InputError, match="max_evaluations"):
        suggest_sites(model, grid, 2, max_evaluations=0)


def test_cli_reports_the_default_min_distance(tmp_path, capsys):
    import argparse

    import rioxarray  # noqa: F401
    import xarray as xr

    from geogp.cli.place import add_place_parser, run_place

    rng = np.random.default_rng(0)
    y, x = 5000.0 - 100.0 * np.arange(18), 300000.0 + 100.0 * np.arange(22)
    z = np.sin(x / 400.0)[None, :] + np.cos(y / 300.0)[:, None] + 0.05 * rng.normal(size=(18, 22))
    z[4:9, 6:12] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="z")
    da.rio.write_crs("EPSG:32633").rio.to_raster(tmp_path / "in.tif")
    parser = argparse.ArgumentParser(prog="geogp")
    add_place_parser(parser.add_subparsers(dest="command"))
    help_text = parser._subparsers._group_actions[0].choices["place"].format_help()
    assert "default auto: 1/4 of the shortest learnt lengthscale" in " ".join(help_text.split())

    def run(*extra):
        out = tmp_path / f"s{len(extra)}.geojson"
        argv = ["place", str(tmp_path / "in.tif"), "--n", "5", "--out", str(out), "--features",
                "64", "--maxiter", "15", "--overwrite", *extra]
        code = run_place(parser.parse_args(argv))
        doc = json.loads(out.read_text()) if code == 0 else None
        return code, capsys.readouterr(), doc

    code, io, doc = run()
    assert code == 0
    line = next(s for s in io.out.splitlines() if s.startswith("minimum distance"))
    assert "¼ of the shortest learnt lengthscale, at most half the spacing" in line
    md = float(line.split(":")[1].split()[0])
    assert md > 0
    xy = np.array([f["geometry"]["coordinates"] for f in doc["features"]])
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1)[np.triu_indices(len(xy), 1)]
    assert d.min() >= md * (1 - 1e-4)  # md printed to 4 significant digits
    code, io, _ = run("--min-distance", "0")
    assert code == 0 and "minimum distance between sites: none" in io.out
    with pytest.raises(SystemExit):
        run("--min-distance", "far")
    assert "expected a distance or 'auto'" in capsys.readouterr().err
    (tmp_path / "s2.geojson").unlink()  # written by the "--min-distance 0" run
    code, io, _ = run("--max-memory", "0.0001")  # refused with the estimate, nothing written
    assert code == 1 and "would need about" in io.err and "0.0001 GiB" not in io.out
    # refused before the fit: the AFS placement's least memory (#41 item 4)
    assert "placement with 64 Fourier features over 396 cells" in io.err
    assert not (tmp_path / "s2.geojson").exists()


# --------------------------------------------------------------------------- (5) the map
def test_map_labels_do_not_overlap_and_legend_is_outside():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    rng = np.random.default_rng(2)
    centres = np.array([[0.3, 0.3], [0.31, 0.305], [0.32, 0.3], [0.7, 0.6], [0.705, 0.61],
                        [0.71, 0.6], [0.72, 0.605], [0.2, 0.9]])
    sites = pd.DataFrame({"order": np.arange(1, 13),
                          "x": np.r_[centres[:, 0], 0.3 + 0.01 * rng.uniform(size=4)],
                          "y": np.r_[centres[:, 1], 0.3 + 0.01 * rng.uniform(size=4)]})
    axis = np.linspace(0, 1, 30)
    fig, ax = plt.subplots(figsize=(6, 5))
    plot_sites(sites, rng.uniform(size=(30, 30)), axis, axis, ax=ax, title="t")
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    from matplotlib.text import Text

    labels = [Text.get_window_extent(t, r) for t in ax.texts]  # the text, not its leader line
    assert len(labels) == 12
    for i in range(12):
        for j in range(i + 1, 12):
            assert not labels[i].overlaps(labels[j]), (sites["order"][i], sites["order"][j])
    legend = ax.get_legend().get_window_extent(r)
    assert not legend.overlaps(ax.get_window_extent(r))  # outside the map
    marks = ax.transData.transform(sites[["x", "y"]].to_numpy())
    assert not np.any([legend.contains(px, py) for px, py in marks])
    plt.close(fig)


def test_packing_distance_is_half_an_even_spread_spacing():
    """On a grid of cell size h, n sites spread evenly over N cells are h √(N/n) apart: the
    cap of the default minimum distance is half that (and 1-D: h N/n)."""
    from geogp.placement.candidates import packing_distance

    yy, xx = np.meshgrid(np.arange(40) * 30.0, np.arange(60) * 30.0, indexing="ij")
    grid = np.stack([yy.ravel(), xx.ravel()], axis=1)
    assert math.isclose(packing_distance(grid, 24), 0.5 * 30.0 * math.sqrt(2400 / 24))
    assert math.isclose(packing_distance(np.arange(100.0)[:, None] * 2.0, 10), 0.5 * 2.0 * 10)
    assert packing_distance(grid[:1], 3) == math.inf
