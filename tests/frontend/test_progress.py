"""Honest progress (issue 31 item 5): one bar per phase, each ending at a true count; a refit
or a second optimiser run announced in words; the posterior's steps shown; and ``summary()``
naming a dropped component.

The bars are read back from stderr (tqdm writes each state of a bar, separated by carriage
returns or newlines, when stderr is not a terminal).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import geogp
from geogp.core.progress import FitProgress, advance, announce_fit, start_phase
from geogp.models import lattice as lm
from geogp.models.lattice import settings as lattice_settings
from tests.frontend._frontend_rasters import make_raster

_COUNT = re.compile(r"(\d+)/(\d+) \[")


def _states(err: str) -> list[str]:
    """Every state written to stderr, in order (bars' redraws and plain lines)."""
    return [s.strip() for s in re.split(r"[\r\n]", err) if s.strip()]


def _final(states: list[str], desc: str) -> tuple[int, int]:
    """(count, total) of the last drawing of the bar whose description starts with ``desc``."""
    last = [s for s in states if s.startswith(desc) and _COUNT.search(s)][-1]
    n, total = _COUNT.search(last).groups()
    return int(n), int(total)


def _bars(states: list[str]) -> list[str]:
    """The descriptions of the fit's bars (L-BFGS runs and posterior), in order."""
    out = []
    for desc in (s.split(": ")[0] for s in states):
        if ("(L-BFGS" in desc or desc.startswith("posterior")) and desc not in out:
            out.append(desc)
    return out


# --------------------------------------------------------------------------- the tracker
def test_each_optimiser_run_has_its_own_bar_ending_at_its_own_iterations(capsys):
    t = FitProgress("", 50, True)
    t.start()
    for i in range(1, 6):
        t(i, -float(i))
    announce_fit(t, "refit without the mid-scale field", "mid-scale field dropped: because")
    for i in range(1, 4):
        t(i, -float(i))
    start_phase(t, "posterior on the whole lattice", ["factorisation", "moments"])
    advance(t)
    advance(t)
    t.close()
    states = _states(capsys.readouterr().err)
    assert _final(states, "fitting hyperparameters (L-BFGS, at most 50") == (5, 5)
    assert _final(states, "refit without the mid-scale field (L-BFGS") == (3, 3)
    assert _final(states, "posterior on the whole lattice") == (2, 2)
    # the reason comes after the first run's last drawing and before the refit's first
    why = states.index("mid-scale field dropped: because")
    assert max(i for i, s in enumerate(states) if s.startswith("fitting hyper")) < why
    assert why < min(i for i, s in enumerate(states) if s.startswith("refit without"))
    # the step under way is named while it runs
    assert any("0/2" in s and "factorisation" in s for s in states)
    assert any("1/2" in s and "moments" in s for s in states)


def test_an_unannounced_restart_gets_a_bar_of_its_own(capsys):
    t = FitProgress("slice 1/2 ", 9, True)
    t.start()
    for i in range(1, 5):
        t(i, 0.0)
    for i in range(1, 3):  # the count goes back to 1: another L-BFGS run
        t(i, 0.0)
    t.close()
    states = _states(capsys.readouterr().err)
    assert _final(states, "slice 1/2 fitting hyperparameters") == (4, 4)
    assert _final(states, "slice 1/2 another L-BFGS run") == (2, 2)


def test_a_run_announced_before_any_iteration_renames_the_bar(capsys):
    t = FitProgress("", 9, True)
    t.start()
    announce_fit(t, "pilot fit of matern12 alone")
    t(1, 0.0)
    t.close()
    states = _states(capsys.readouterr().err)
    assert _final(states, "pilot fit of matern12 alone") == (1, 1)
    assert not any(_COUNT.search(s) and s.startswith("fitting hyper") for s in states)


def test_plain_callbacks_and_disabled_trackers_stay_silent(capsys):
    calls = []
    for progress in (None, calls.append, FitProgress("", 9, False)):
        announce_fit(progress, "refit", "why")
        start_phase(progress, "posterior", ["a"])
        advance(progress)
    t = FitProgress("", 9, False, optimize=True)
    t.start()
    t(1, 0.0)
    t.close()
    assert calls == [] and capsys.readouterr().err == ""


# --------------------------------------------------------------------------- real fits
@pytest.fixture
def forced_drop(monkeypatch):
    """Lattice fits in which stage 1 gives the local field the longer range (as on the
    Jacksboro DEM), so that ``mid_scale="auto"`` drops the level and refits; the mid-scale
    level is allowed on small rasters. Yields the reports of the stage-1 runs."""
    monkeypatch.setattr(lattice_settings, "MID_SCALE_MIN_CELLS", 24)
    real, reports = lm.LatticeRegressor._stage1, []

    def switched(self, params, problems, tiles):
        local, report = real(self, params, problems, tiles)
        reports.append(report)
        if "log_range_mid" in local:
            local = {**local, "log_range": local["log_range_mid"] + 1.0}
        return local, report

    monkeypatch.setattr(lm.LatticeRegressor, "_stage1", switched)
    return reports


def test_a_dropped_mid_scale_field_is_announced_counted_and_summarised(forced_drop, capsys,
                                                                         tmp_path):
    model = geogp.fit(make_raster(30, 40, seed=4), model="lattice", maxiter=6, margin=2,
                      mean="constant", progress=True)
    states = _states(capsys.readouterr().err)
    est = model.estimators_[0]
    assert est.mid_dropped_ and len(forced_drop) == 2
    first, refit = (r.n_iter for r in forced_drop)
    # one bar per run, each ending at the iterations that run made (not a shared count)
    assert _final(states, "fitting hyperparameters (L-BFGS") == (first, first)
    assert _final(states, "refit without the mid-scale field (L-BFGS") == (refit, refit)
    assert _final(states, "posterior on the whole lattice") == (5, 5)
    assert _bars(states) == ["fitting hyperparameters (L-BFGS, at most 6 iterations)",
                             "refit without the mid-scale field (L-BFGS, at most 6 iterations)",
                             "posterior on the whole lattice"]
    said = [s for s in states if s.startswith("mid-scale field dropped")]
    assert len(said) == 1 and "longer range" in said[0] and "cells" in said[0]
    # the posterior names its steps: the factorisation, then the selected inversion ...
    assert any("factorisation + solves" in s for s in states)
    assert any("selected inversion" in s for s in states)
    # summary(): the field, why, with the first fit's ranges (their ratio is e: forced)
    local, mid = est.mid_dropped_ranges_
    assert local / mid == pytest.approx(math.e, rel=1e-12)
    text = model.summary()
    assert "mid-scale field dropped: the first fit gave the local field a longer range" in text
    assert f"({local / 1000:.4g} km)" in text and f"({mid / 1000:.4g} km)" in text
    assert "refitted without it" in text and "mid scales:" not in text
    # a saved model says the same
    model.save(tmp_path / "m.npz")
    assert geogp.GeoRegressor.load(tmp_path / "m.npz").summary() == text


def test_a_kept_mid_scale_field_is_not_reported_dropped(monkeypatch, capsys):
    monkeypatch.setattr(lattice_settings, "MID_SCALE_MIN_CELLS", 24)
    model = geogp.fit(make_raster(30, 40, seed=4), model="lattice", maxiter=3, margin=2,
                      mean="constant", mid_scale=12, progress=True)
    err = capsys.readouterr().err
    assert not model.estimators_[0].mid_dropped_
    assert "dropped" not in err and "dropped" not in model.summary()
    assert "mid scales: range" in model.summary()


def test_a_summary_without_the_recorded_ranges_still_says_why():
    from types import SimpleNamespace

    from geogp.frontend.api_report import _mid_dropped

    spec = SimpleNamespace(units="metre", geographic=False)
    assert _mid_dropped((np.nan, np.nan), spec) == (
        "mid-scale field dropped: the first fit gave the local field the longer range, so it "
        "was not identified; refitted without it")


def test_afs_window_refits_are_announced_and_the_bars_add_up_to_the_iterations(capsys):
    model = geogp.fit(make_raster(40, 50, seed=1), model="afs", kernel="se", n_features=400,
                      maxiter=40, progress=True)
    states = _states(capsys.readouterr().err)
    est = model.estimators_[0]
    refits = est.diagnostics_["window_refits"]
    assert refits >= 1  # this raster's SE lengthscales outgrow the first window
    said = [s for s in states if s.startswith("AFS refit")]
    assert len(said) == refits
    assert re.match(r"AFS refit 1 \(of at most 3\): the learnt lengthscales alias on a window "
                    r"[\d.]+× the data's extent; new statistics on [\d.]+×", said[0])
    runs = ["fitting hyperparameters"] + [f"refit {k} on a wider window"
                                          for k in range(1, refits + 1)]
    counts = [_final(states, run) for run in runs]
    assert all(n == total for n, total in counts)
    assert sum(n for n, _ in counts) == est.report_.n_iter  # every iteration, counted once
    assert _final(states, "posterior") == (1, 1)


def test_the_cli_says_the_mid_scale_field_was_dropped(forced_drop, capsys, tmp_path):
    from geogp.cli import main

    tif = tmp_path / "in.tif"
    make_raster(30, 40, seed=4).astype("float32").rio.write_nodata(
        np.nan, encoded=True).rio.to_raster(tif)
    assert main(["fit", str(tif), "--out", str(tmp_path / "o.tif"), "--model", "lattice",
                 "--maxiter", "4"]) == 0
    out, err = capsys.readouterr()
    states = _states(err)
    assert len(forced_drop) == 2
    assert any(s.startswith("mid-scale field dropped: the first fit") for s in states)
    assert _final(states, "refit without the mid-scale field") == (forced_drop[1].n_iter,) * 2
    assert _final(states, "writing") == (1, 1)
    (summary,) = [ln for ln in out.splitlines() if "range ρ" in ln]
    assert "mid-scale field dropped: the first fit gave the local field a longer range" in summary
    assert "refitted without it" in summary
