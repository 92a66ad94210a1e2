"""Cross-validation of image series (#43 item 4): other dates' clouds moved onto each date's
observed cells, scores by distance in space and by time since the cell was last seen."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import ndimage

import geogp
from geogp.crossval import StackCVResult, stack_gap_folds
from geogp.crossval.stack import since_last_seen
from geogp.exceptions import InputError
from tests.models.test_spacetime_estimator import THETA, _as_da, _stack, _standardised


@pytest.fixture(scope="module")
def stack():
    return _stack(shape=(14, 16))


def test_stack_folds_are_other_dates_clouds_on_observed_cells(stack):
    _, y, _ = stack
    observed = np.isfinite(y)
    folds = stack_gap_folds(observed, 3, fraction=0.15, seed=1)
    assert folds.shape == (3, *y.shape) and not np.any(folds & ~observed)
    assert np.array_equal(folds, stack_gap_folds(observed, 3, fraction=0.15, seed=1))
    cloud_somewhere = (~observed).any(axis=0)
    for fold in folds:
        assert fold.any(axis=(1, 2)).sum() >= y.shape[0] - 1  # (almost) every date
        for k, held in enumerate(fold):
            assert not np.any(held & ~cloud_somewhere)  # each cell: another date's cloud
            # whole patches of "clear here, cloud on one other date", never cropped
            def whole_patches(other, held=held, k=k):
                lab, _ = ndimage.label(observed[k] & ~observed[other], np.ones((3, 3)))
                return (np.all(lab[held] > 0)
                        and all(held[lab == p].all() for p in np.unique(lab[held])))

            assert any(whole_patches(o) for o in range(y.shape[0]) if o != k)


def test_time_since_last_seen_matches_a_naive_count():
    rng = np.random.default_rng(4)
    obs = rng.random((7, 5, 6)) < 0.4
    got = since_last_seen(obs)
    for k in range(7):
        for i in range(5):
            for j in range(6):
                seen = [q for q in range(k) if obs[q, i, j]]
                assert got[k, i, j] == (k - seen[-1] if seen else -1)


def test_a_stack_is_cross_validated_by_distance_and_time_since_seen(stack):
    _, y, times = stack
    scale = float(np.nanstd(y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cv = geogp.cross_validate(_as_da(y, times), n_folds=2, seed=0, model="spacetime",
                                  optimize=False, tile=64, params=_standardised(THETA, scale))
    assert isinstance(cv, StackCVResult) and cv.folds.shape == (2, *y.shape)
    c = cv.cells
    assert {"date", "since"} <= set(c.columns)
    np.testing.assert_array_equal(c["truth"], y[c["date"], c["row"], c["col"]])
    table = cv.by_time_since()
    assert int(table["n"].sum()) == len(c)
    pooled = cv.scores().loc["all"]
    assert pooled["rmse"] == pytest.approx(math.sqrt(np.mean((c["truth"] - c["mean"]) ** 2)))
    assert 0.85 < pooled["coverage95"] <= 1.0
    # better than the cell's own mean over the other dates, on the same folds
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        naive = geogp.cross_validate(_as_da(y, times), folds=cv.folds, method=_climatology)
    assert pooled["rmse"] < 0.8 * naive.scores().loc["all", "rmse"]
    assert "by dates since the cell was last seen" in cv.summary()


def _climatology(train):
    """Each cell's mean over the dates it was seen (the stack's mean where never)."""
    v = train.values
    mean = np.nanmean(v, axis=0)
    mean = np.where(np.isfinite(mean), mean, np.nanmean(v))
    std = np.full(v.shape, np.nanstd(v))
    return train.to_dataset(name="mean").assign(
        mean=(train.dims, np.broadcast_to(mean, v.shape).copy()), std=(train.dims, std))


def test_a_custom_method_is_scored_on_the_same_cells(stack):
    """The cell's own mean over the other dates (a naive baseline) against its own cells."""
    _, y, times = stack
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns in nanmean
        cv = geogp.cross_validate(_as_da(y, times), n_folds=1, seed=2, method=_climatology)
    c = cv.cells
    held = cv.folds[0]
    train = np.where(held, np.nan, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanmean(train, axis=0)[c["row"], c["col"]]
    np.testing.assert_allclose(c["mean"], np.where(np.isfinite(want), want, np.nanmean(train)))


def test_bad_stack_folds_are_refused(stack):
    _, y, times = stack
    da = _as_da(y, times)
    with pytest.raises(InputError, match="folds='gaps'"):
        geogp.cross_validate(da, folds="random", model="spacetime")
    with pytest.raises(InputError, match="boolean array"):
        geogp.cross_validate(da, folds=np.zeros((2, 3, 4), bool), model="spacetime")


def test_geogp_cv_on_a_stack_file_reports_time_since_seen(stack, tmp_path, capsys):
    from geogp.cli import main

    _, y, times = stack
    path = tmp_path / "stack.nc"
    _as_da(y, times).rename("ndvi").to_netcdf(path)
    assert main(["cv", str(path), "--model", "spacetime", "--n-folds", "1", "--maxiter", "3",
                 "--csv", str(tmp_path / "cells.csv"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "by dates since the cell was last seen" in out and "never" in out
    assert "since" in (tmp_path / "cells.csv").read_text().splitlines()[0]
