"""Cross-validation: folds that do not leak, gap shapes that survive the move, exact scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
from scipy import ndimage
from scipy.stats import norm

import geogp
from geogp.core import metrics
from geogp.crossval import (
    block_folds,
    cross_validate,
    distance_to_observed,
    gap_folds,
    make_folds,
    random_folds,
    transplant,
)
from geogp.exceptions import InputError

pytestmark = [
    # small synthetic data: the models' approximation diagnostics warn, beside the point here
    pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning"),
    # small planar coordinates in a projected CRS look like degrees: a warning beside the point
    pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning"),
]


def _raster(values):
    ny, nx = values.shape
    return xr.DataArray(values, dims=("y", "x"),
                        coords={"y": np.arange(ny, 0, -1.0), "x": np.arange(nx) * 1.0}
                        ).rio.write_crs(32633)


def _cloudy(ny=40, nx=60, seed=0):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:ny, 0:nx]
    z = np.sin(xx / 7.0) + np.cos(yy / 5.0) + 0.05 * rng.standard_normal((ny, nx))
    miss = np.zeros((ny, nx), bool)
    miss[5:12, 8:20] = True          # a rectangle-ish cloud
    miss[11:16, 8:11] = True         # with an appendix: an L
    miss[ny - 10, nx - 20] = True      # a one-cell gap
    miss[ny - 15:ny - 12, nx - 10:nx - 7] = True
    z[miss] = np.nan
    return z, miss


# --------------------------------------------------------------------------- folds
@pytest.mark.parametrize("kind", ["gaps", "random", "blocks"])
def test_folds_hold_out_only_observed_cells(kind):
    _z, miss = _cloudy()
    obs = ~miss
    folds = make_folds(obs, kind, 4, seed=3)
    assert folds.shape == (4, *obs.shape) and folds.dtype == bool
    assert not np.any(folds & miss[None])
    assert folds.reshape(4, -1).any(axis=1).all()


def test_random_and_block_folds_partition():
    _z, miss = _cloudy()
    obs = ~miss
    r = random_folds(obs, 5, seed=1)
    assert np.all(r.sum(axis=0) <= 1)                              # disjoint
    sizes = r.reshape(5, -1).sum(axis=1)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == obs.sum()   # K-fold partition
    b = block_folds(obs, 3, block=10, seed=1)
    assert np.array_equal(b.sum(axis=0), obs.astype(int))         # every observed cell once
    # a block is never split between folds
    ids = (np.arange(40)[:, None] // 10) * 6 + np.arange(60)[None, :] // 10
    for k in range(3):
        for bid in np.unique(ids[b[k]]):
            cells = (ids == bid) & obs
            assert b[k][cells].all()


def test_transplanted_gaps_keep_their_shape():
    ny, nx = 50, 70
    obs = np.ones((ny, nx), bool)
    missing = np.zeros((ny, nx), bool)
    missing[3:9, 4:14] = True
    missing[8:15, 4:7] = True            # an L-shaped cloud, 8-connected
    shape = missing[3:15, 4:14]
    for rotate in (False, True):
        folds = gap_folds(obs, 3, fraction=0.01, missing=missing, rotate=rotate, seed=7)
        orientations = [np.rot90(shape, k) for k in range(4)]
        orientations += [np.fliplr(s) for s in orientations]
        for held in folds:
            lab, n = ndimage.label(held, structure=np.ones((3, 3)))
            assert n == 1                      # one transplanted cloud, whole
            piece = held[ndimage.find_objects(lab)[0]]
            if rotate:
                assert any(p.shape == piece.shape and np.array_equal(p, piece)
                           for p in orientations)
            else:
                assert np.array_equal(piece, shape)


def test_gap_folds_follow_the_gap_sizes_and_are_reproducible():
    _z, miss = _cloudy()
    obs = ~miss
    a = gap_folds(obs, 3, fraction=0.1, seed=11)
    b = gap_folds(obs, 3, fraction=0.1, seed=11)
    assert np.array_equal(a, b)
    n_obs = obs.sum()
    for held in a:   # at least the target, at most 1.5× it unless one shape is larger
        assert 0.1 * n_obs <= held.sum() <= max(1.5 * 0.1 * n_obs, 120)


def test_transplant_refuses_a_shape_that_does_not_fit():
    with pytest.raises(InputError, match="does not fit"):
        transplant(np.ones((3, 3), bool), (5, 5), (3, 0))


def test_distance_to_observed_matches_brute_force():
    rng = np.random.default_rng(0)
    train = rng.random((17, 23)) < 0.2
    d = distance_to_observed(train)
    ty, tx = np.nonzero(train)
    yy, xx = np.mgrid[0:17, 0:23]
    brute = np.sqrt((yy[..., None] - ty) ** 2 + (xx[..., None] - tx) ** 2).min(axis=-1)
    np.testing.assert_allclose(d, brute, atol=1e-12)


@pytest.mark.parametrize("bad, match", [
    (dict(kind="clouds"), "folds must be one of"),
    (dict(kind="gaps", n_folds=0), "n_folds"),
    (dict(kind="gaps", fraction=1.5), "fraction"),
    (dict(kind="random", fraction=0.5, n_folds=3), "disjoint"),
    (dict(kind="blocks", block=100, n_folds=3), "cannot make"),
])
def test_bad_fold_requests_are_refused(bad, match):
    _z, miss = _cloudy()
    kind = bad.pop("kind")
    n = bad.pop("n_folds", 3)
    with pytest.raises(InputError, match=match):
        make_folds(~miss, kind, n, **bad)


def test_gap_folds_need_gaps():
    with pytest.raises(InputError, match="no missing cells"):
        gap_folds(np.ones((10, 10), bool), 2)


# --------------------------------------------------------------------------- scores
def test_scores_by_distance_equal_hand_computed_values():
    y = np.array([1.0, 2.0, 0.0, -1.0, 3.0, 0.5])
    mu = np.array([1.5, 2.0, 1.0, -1.0, 0.0, 0.0])
    s = np.array([1.0, 0.5, 2.0, 1.0, 1.0, 0.25])
    d = np.array([1.0, 1.0, 2.0, 3.0, 10.0, 11.0])   # strata: ≤1 ×2, 1–3 ×2, 3–10 ×1, >10 ×1
    t = metrics.evaluate_by_distance(y, mu, s, d)
    assert list(t.index) == ["≤ 1", "1–3", "3–10", "> 10", "all"]
    assert list(t["n"]) == [2, 2, 1, 1, 6]
    # ≤ 1: errors 0.5, 0 -> RMSE √(0.125); CRPS by its integral definition
    assert t.loc["≤ 1", "rmse"] == pytest.approx(math.sqrt(0.125), rel=1e-14)
    assert t.loc["1–3", "mae"] == pytest.approx(0.5, rel=1e-14)
    z = 3.0
    crps = z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi)
    assert t.loc["3–10", "crps"] == pytest.approx(crps, rel=1e-12)
    # coverage: |z| = 0.5, 0, 0.5, 0, 3, 2 -> inside 95 %: all but the 3 and the 2
    assert t.loc["all", "coverage95"] == pytest.approx(4 / 6)
    assert t.loc["> 10", "coverage95"] == 0.0
    # std_ratio = RMSE / √mean s²
    assert t.loc["≤ 1", "std_ratio"] == pytest.approx(math.sqrt(0.125) / math.sqrt(0.625))


def test_clustered_standard_error_equals_hand_computed_values():
    v = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    # one value per cluster: the sample standard error of the mean
    se = metrics.clustered_standard_error(v, np.arange(6))
    assert se == pytest.approx(np.std(v, ddof=1) / math.sqrt(6), rel=1e-14)
    # clusters {0, 1, 2}, {3, 4}, {5}; mean 2/3, residuals (1/3, −2/3, 1/3, 1/3, −2/3, 1/3)
    # summed per cluster: 0, −1/3, 1/3 -> SE² = 3/2 · (2/9) / 6²
    se = metrics.clustered_standard_error(v, [7, 7, 7, 2, 2, 9])
    assert se == pytest.approx(math.sqrt(1.5 * (2 / 9) / 36), rel=1e-14)
    assert np.isnan(metrics.clustered_standard_error(v, np.zeros(6)))
    with pytest.raises(InputError, match="same number"):
        metrics.clustered_standard_error(v, [1, 2])
    t = metrics.evaluate_by_distance(np.zeros(6), np.zeros(6), np.ones(6), np.ones(6),
                                     clusters=np.arange(6))
    assert t.loc["all", "coverage95_se"] == 0.0  # all covered: no spread


def test_cv_clusters_are_the_held_out_patches():
    z, _ = _cloudy()
    held = np.zeros((2, *z.shape), bool)
    held[0, 1:4, 25:29] = True        # fold 1: two patches, the second touching diagonally
    held[0, 20:22, 30:33] = True
    held[0, 22, 33] = True
    held[1, 32:36, 5:10] = True       # fold 2: one patch
    cv = cross_validate(_raster(z), held,
                        method=lambda train: (np.nan_to_num(train.values), np.ones(z.shape)))
    lab = cv.clusters()
    c = cv.cells
    assert len(np.unique(lab)) == 3
    for k, r0, c0, n in [(1, 1, 25, 12), (1, 20, 30, 7), (2, 32, 5, 20)]:
        first = lab[(c["fold"] == k).to_numpy() & (c["row"] == r0).to_numpy()
                    & (c["col"] == c0).to_numpy()][0]
        assert np.sum(lab == first) == n
    t = cv.by_distance()
    covered = np.abs(c["truth"] - c["mean"]) <= 1.959964 * c["std"]
    assert t.loc["all", "coverage95_se"] == pytest.approx(
        metrics.clustered_standard_error(covered, lab), rel=1e-12)
    assert "±" in cv.summary()
    # random folds: scattered cells, each its own cluster
    rnd = cross_validate(_raster(z), "random", 2, seed=1,
                         method=lambda train: (np.nan_to_num(train.values), np.ones(z.shape)))
    np.testing.assert_array_equal(rnd.clusters(), np.arange(len(rnd.cells)))


def test_empty_stratum_has_no_scores():
    t = metrics.evaluate_by_distance([1.0, 2.0], [1.0, 2.5], [1.0, 1.0], [1.0, 1.0])
    assert t.loc["> 10", "n"] == 0 and np.isnan(t.loc["> 10", "rmse"])


def test_reliability_is_calibrated_for_correct_gaussians():
    rng = np.random.default_rng(5)
    n = 200_000
    s = rng.uniform(0.5, 2.0, n)
    y = rng.normal(0.0, s)
    levels = np.array([0.1, 0.5, 0.9, 0.95])
    emp = metrics.reliability(y, np.zeros(n), s, levels)
    # binomial standard error ≤ √(0.25/n) ≈ 0.0011: 5 of them
    np.testing.assert_allclose(emp, levels, atol=5 * math.sqrt(0.25 / n))
    assert metrics.reliability([0.0, 3.0], [0.0, 0.0], [1.0, 1.0], [0.95])[0] == 0.5


# --------------------------------------------------------------------------- runner
def test_training_never_sees_held_out_cells_and_scores_are_exact():
    z, miss = _cloudy()
    da = _raster(z)
    truth = z.copy()
    seen = []

    def oracle(train):
        tv = train.values
        seen.append(np.isnan(tv))
        # a method that returns the truth + 0.1 with sd 0.2 wherever it is not given the data
        return np.where(np.isnan(tv), np.nan_to_num(truth) + 0.1, tv), np.full(tv.shape, 0.2)

    cv = cross_validate(da, "gaps", 3, seed=2, method=oracle, fold_options={"fraction": 0.1})
    assert len(seen) == 3
    for k, held in enumerate(cv.folds):
        assert np.all(seen[k][held])                          # held-out cells hidden
        assert np.array_equal(seen[k], miss | held)           # and nothing else
    c = cv.cells
    assert len(c) == cv.folds.sum()
    np.testing.assert_allclose(c["truth"], truth[c["row"], c["col"]])
    np.testing.assert_allclose(c["mean"] - c["truth"], 0.1, atol=1e-12)
    s = cv.scores()
    assert s.loc["all", "rmse"] == pytest.approx(0.1, rel=1e-10)
    z01 = 0.5
    crps = 0.2 * (z01 * (2 * norm.cdf(z01) - 1) + 2 * norm.pdf(z01) - 1 / math.sqrt(math.pi))
    assert s.loc["all", "crps"] == pytest.approx(crps, rel=1e-10)
    assert s.loc["all", "coverage95"] == 1.0
    # distances recomputed independently for fold 1
    f1 = c[c["fold"] == 1]
    d = distance_to_observed(~miss & ~cv.folds[0])
    np.testing.assert_allclose(f1["distance"], d[f1["row"], f1["col"]])
    assert (c["distance"] >= 1).all()
    assert "RMSE" in cv.summary()


def test_custom_folds_and_bad_methods():
    z, miss = _cloudy()
    da = _raster(z)
    held = np.zeros((1, *z.shape), bool)
    held[0, 30:35, 20:30] = True
    cv = cross_validate(da, held, method=lambda t: (np.zeros(z.shape), np.ones(z.shape)))
    assert cv.kind == "custom" and len(cv.cells) == 50
    with pytest.raises(InputError, match="observed cells"):
        cross_validate(da, np.broadcast_to(miss, (1, *z.shape)).copy(),
                       method=lambda t: (t.values, t.values))
    with pytest.raises(InputError, match="whole grid"):
        cross_validate(da, held, method=lambda t: (np.zeros(3), np.ones(3)))
    # a two-argument method is told which cells are scored and may leave the rest NaN
    def only_held(train, mask):
        m = np.full(z.shape, np.nan)
        m[mask] = 1.0
        return m, np.where(mask, 2.0, np.nan)

    cv2 = cross_validate(da, held, method=only_held)
    assert (cv2.cells["mean"] == 1.0).all() and (cv2.cells["std"] == 2.0).all()
    with pytest.raises(InputError, match="non-finite mean"):
        cross_validate(da, held, method=lambda t: (np.full(z.shape, np.nan), np.ones(z.shape)))
    with pytest.raises(InputError, match="callable"):
        cross_validate(da, held, method="kriging")
    with pytest.raises(InputError, match="2-D raster"):
        cross_validate(xr.DataArray(np.zeros((2, 3, 4)), dims=("t", "y", "x")))
    with pytest.raises(InputError, match="custom method"):
        cross_validate(da, held, method=lambda t: (t.values, t.values), kernel="se")


def test_geogp_model_cross_validates_and_plots(tmp_path):
    z, _miss = _cloudy(30, 40)
    da = _raster(z)
    cv = geogp.cross_validate(da, "gaps", 2, seed=0, n_features=64, maxiter=15,
                              fold_options={"fraction": 0.1})
    c = cv.cells
    # the scores are those of geogp.core.metrics on the pooled cells
    ref = metrics.evaluate(c["truth"], c["mean"], c["std"])
    assert cv.scores().loc["all", "rmse"] == pytest.approx(ref["rmse"], rel=1e-12)
    assert np.isfinite(c["mean"]).all() and (c["std"] > 0).all()
    # a smooth field: far better than predicting the training mean
    train_mean = np.nanmean(z[~cv.folds[0]])
    assert ref["rmse"] < 0.5 * np.sqrt(np.mean((c["truth"] - train_mean) ** 2))
    out = tmp_path / "cv.png"
    cv.plot(out)
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_cli_cv(tmp_path, capsys):
    from geogp.cli import main

    z, _miss = _cloudy(30, 40)
    path = tmp_path / "in.nc"
    _raster(z).to_dataset(name="v").to_netcdf(path)
    csv = tmp_path / "cells.csv"
    rc = main(["cv", str(path), "--n-folds", "2", "--features", "64", "--maxiter", "10",
               "--csv", str(csv), "--quiet"])
    assert rc == 0
    import pandas as pd

    cells = pd.read_csv(csv)
    assert set(cells["fold"]) == {1, 2}
    assert metrics.rmse(cells["truth"], cells["mean"]) == pytest.approx(
        float(capsys.readouterr().out.split("RMSE ")[1].split()[0]), rel=1e-3)
    assert main(["cv", str(path), "--n-folds", "0"]) == 2
    assert main(["cv", str(path), "--folds", "blocks", "--fraction", "0.2"]) == 2
