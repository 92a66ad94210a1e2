"""Cross-validation of image series (#43 item 4): another date's real clouds moved onto the
observed cells of each date, and coverage by distance in space *and* by time since the cell
was last seen.

A fold hides, on every date, the cells observed there that another date of the series had
under cloud (whole cloud patches, never cropped, in random order until about ``fraction`` of
the date's observed cells): the gaps have the shapes and places real clouds have in this
series. The model is fitted on the stack without them and scored on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from scipy import ndimage

from geogp.core import metrics
from geogp.core.folds import distance_to_observed
from geogp.core.progress import bar
from geogp.crossval.result import CVResult
from geogp.exceptions import InputError
from geogp.frontend.adapters import find_spatial_dims
from geogp.models.spacetime.calibration import stack_gap_folds

__all__ = ["StackCVResult", "stack_gap_folds", "since_last_seen", "cross_validate_stack",
           "SINCE_BINS"]

# strata of the time since a cell was last seen, in dates of the series: the previous
# date, 2–3 dates back, 4 or more, never
SINCE_BINS = (("1", 1, 1), ("2-3", 2, 3), ("4+", 4, None))


def since_last_seen(observed: np.ndarray) -> np.ndarray:
    """(T, ny, nx) dates since each cell was last observed before each date (1: the previous
    date), −1 where it never was."""
    obs = np.asarray(observed, dtype=bool)
    since = np.full(obs.shape, -1)
    last = np.full(obs.shape[1:], -1)
    for k in range(obs.shape[0]):
        since[k] = np.where(last >= 0, k - last, -1)
        last = np.where(obs[k], k, last)
    return since


@dataclass
class StackCVResult(CVResult):
    """:class:`~geogp.crossval.result.CVResult` of a series: ``cells`` also has ``date`` (the
    date's index) and ``since`` (dates since the cell was last seen in the training stack,
    −1: never); ``folds`` is (n_folds, T, ny, nx)."""

    def clusters(self) -> np.ndarray:
        """Per scored cell, its held-out patch: a connected component of its fold's held-out
        cells on its date."""
        labels = np.zeros(self.folds.shape, dtype=np.int64)
        offset = 0
        for f, fold in enumerate(self.folds):
            for k, held in enumerate(fold):
                lab, n = ndimage.label(held, structure=np.ones((3, 3)))
                labels[f, k] = np.where(lab > 0, lab + offset, 0)
                offset += n
        c = self.cells
        return labels[c["fold"].to_numpy() - 1, c["date"].to_numpy(), c["row"].to_numpy(),
                      c["col"].to_numpy()]

    def by_time_since(self) -> pd.DataFrame:
        """Pooled scores per stratum of the time since the cell was last seen
        (:data:`SINCE_BINS`, and ``never``), with the clustered standard error of coverage."""
        c = self.cells
        clusters = self.clusters()
        rows = {}
        since = c["since"].to_numpy()
        for name, lo, hi in (*SINCE_BINS, ("never", -1, -1)):
            sel = (since >= lo) & (since <= (hi if hi is not None else np.inf))
            sub = c[sel]
            if not len(sub):
                rows[name] = {"n": 0}
                continue
            inside = (np.abs(sub["truth"] - sub["mean"]) <= 1.959964 * sub["std"]).to_numpy()
            rows[name] = {**metrics.evaluate(sub["truth"], sub["mean"], sub["std"]),
                          "coverage95_se": metrics.clustered_standard_error(inside,
                                                                            clusters[sel])}
        return pd.DataFrame.from_dict(rows, orient="index")

    def summary(self) -> str:
        """:meth:`CVResult.summary` with the table by time since the cell was last seen."""
        lines = [super().summary(), "  by dates since the cell was last seen:",
                 f"  {'stratum':>8} {'n':>7} {'RMSE':>8} {'CRPS':>8} {'cov95 ± se':>13}"]
        for name, r in self.by_time_since().iterrows():
            if r["n"] == 0:
                lines.append(f"  {name:>8} {0:>7}")
                continue
            lines.append(f"  {name:>8} {int(r['n']):>7} {r['rmse']:8.4g} {r['crps']:8.4g} "
                         f"{r['coverage95']:6.3f} ± {r['coverage95_se']:.3f}")
        return "\n".join(lines)


def cross_validate_stack(da: xr.DataArray, values: np.ndarray, held_all: np.ndarray,
                         method: Callable[[xr.DataArray], Any], label: str, kind: str,
                         progress: bool = False) -> StackCVResult:
    """Score ``method(train) -> Dataset of mean, std (time, y, x)`` on each fold of
    ``held_all`` (n_folds, T, ny, nx) of the stack ``da`` (time, y, x) with ``values``."""
    t_dim = da.dims[0]
    y_dim, x_dim = find_spatial_dims(da)
    ys, xs = da[y_dim].values, da[x_dim].values
    observed = np.isfinite(values)
    frames, seconds = [], []
    with bar("cross-validation", len(held_all), progress, unit="fold") as pbar:
        for f, held in enumerate(held_all, start=1):
            train = da.where(~held)
            t0 = time.perf_counter()
            out = method(train)
            mean = out["mean"].transpose(t_dim, y_dim, x_dim).values
            std = out["std"].transpose(t_dim, y_dim, x_dim).values
            seconds.append(time.perf_counter() - t0)
            kept = observed & ~held
            since = since_last_seen(kept)
            k, r, c = np.nonzero(held)
            dist = np.stack([distance_to_observed(m) for m in kept])
            bad = ~(np.isfinite(mean[k, r, c]) & np.isfinite(std[k, r, c]) & (std[k, r, c] > 0))
            if bad.any():
                raise InputError(f"{label} returned a non-finite mean or a std ≤ 0 at "
                                 f"{int(bad.sum())} held-out cell(s) of fold {f}.")
            frames.append(pd.DataFrame({
                "fold": f, "date": k, "row": r, "col": c, y_dim: ys[r], x_dim: xs[c],
                "truth": values[k, r, c], "mean": mean[k, r, c], "std": std[k, r, c],
                "distance": dist[k, r, c], "since": since[k, r, c]}))
            pbar.update(1)
    return StackCVResult(pd.concat(frames, ignore_index=True), held_all, seconds, kind, label,
                         units=da.attrs.get("units"))
