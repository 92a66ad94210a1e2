"""The result of a cross-validation (:func:`geogp.crossval.cross_validate`): per-cell
held-out predictions and their scores, pooled, per fold and by distance to data."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import ndimage

from geogp.core import metrics
from geogp.crossval.plot import plot_cv
from geogp.frontend.plotting import save_figure

if TYPE_CHECKING:  # annotations only
    from matplotlib.figure import Figure

__all__ = ["CVResult"]


@dataclass
class CVResult:
    """Held-out predictions of a cross-validation, and their scores.

    Attributes:
        cells: one row per scored cell and fold: ``fold`` (1-based), ``row``, ``col``, the
            cell's coordinates (the raster's dimension names), ``truth``, ``mean``, ``std``
            (of a new observation) and ``distance`` (cells to the nearest training cell).
        folds: (n_folds, ny, nx) boolean held-out masks.
        seconds: wall time of fit + full-grid prediction per fold.
        kind: the fold kind (``"gaps"``, ``"random"``, ``"blocks"`` or ``"custom"``).
        method: a label of the method scored.
        units: the raster's ``units`` attribute (None when it has none): the axis label of
            errors and standard deviations in :meth:`plot`.
    """

    cells: pd.DataFrame
    folds: np.ndarray
    seconds: list
    kind: str
    method: str
    bins: tuple = field(default=metrics.DISTANCE_BINS)
    units: str | None = None

    def scores(self) -> pd.DataFrame:
        """Scores per fold (``fold k``) and of all held-out cells pooled (``all``)."""
        rows = {}
        c = self.cells
        for k in range(1, self.folds.shape[0] + 1):
            f = c[c["fold"] == k]
            rows[f"fold {k}"] = {**metrics.evaluate(f["truth"], f["mean"], f["std"]),
                                 "seconds": self.seconds[k - 1]}
        rows["all"] = {**metrics.evaluate(c["truth"], c["mean"], c["std"]),
                       "seconds": float(np.mean(self.seconds))}
        return pd.DataFrame.from_dict(rows, orient="index")

    def clusters(self) -> np.ndarray:
        """Per scored cell, the held-out patch it belongs to: a connected component (8
        neighbours) of its fold's held-out cells, as one integer label over all folds.
        Random folds are scattered cells, whose components would merge into one web per
        fold at high held-out densities: there every cell is its own cluster."""
        if self.kind == "random":
            return np.arange(len(self.cells))
        labels = np.zeros(self.folds.shape, dtype=np.int64)
        offset = 0
        for k, held in enumerate(self.folds):
            lab, n = ndimage.label(held, structure=np.ones((3, 3)))
            labels[k] = np.where(lab > 0, lab + offset, 0)
            offset += n
        c = self.cells
        return labels[c["fold"].to_numpy() - 1, c["row"].to_numpy(), c["col"].to_numpy()]

    def by_distance(self) -> pd.DataFrame:
        """Pooled scores per distance stratum (cells to the nearest training cell).

        ``coverage95_se`` is the standard error of the coverage with each held-out patch
        (:meth:`clusters`) as one cluster: the cells of one gap share its errors, so a
        stratum of thousands of cells may hold only tens of independent gaps.
        """
        c = self.cells
        return metrics.evaluate_by_distance(c["truth"], c["mean"], c["std"], c["distance"],
                                            self.bins, clusters=self.clusters())

    def reliability(self, levels: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9,
                                                     0.95, 0.99)) -> tuple[np.ndarray, np.ndarray]:
        """(levels, empirical coverage of the central intervals), pooled over folds."""
        c = self.cells
        return np.asarray(levels), metrics.reliability(c["truth"], c["mean"], c["std"], levels)

    def summary(self) -> str:
        """The overall scores and the table by distance, as text."""
        s = self.scores().loc["all"]
        lines = [f"{self.method}: {self.folds.shape[0]} {self.kind} fold(s), "
                 f"{int(s['n'])} held-out cells, {s['seconds']:.1f} s per fold (fit + predict)",
                 f"  RMSE {s['rmse']:.4g}  MAE {s['mae']:.4g}  CRPS {s['crps']:.4g}  "
                 f"IS95 {s['is95']:.4g}  coverage95 {s['coverage95']:.3f}  NLPD {s['nlpd']:.4g}",
                 "  by distance to the nearest training cell (cells):",
                 f"  {'stratum':>8} {'n':>7} {'RMSE':>8} {'CRPS':>8} {'cov95 ± se':>13} "
                 f"{'RMSE/sd':>8}"]
        for name, r in self.by_distance().iterrows():
            if r["n"] == 0:
                lines.append(f"  {name:>8} {0:>7}")
                continue
            lines.append(f"  {name:>8} {int(r['n']):>7} {r['rmse']:8.4g} {r['crps']:8.4g} "
                         f"{r['coverage95']:6.3f} ± {r['coverage95_se']:.3f} "
                         f"{r['std_ratio']:8.3f}")
        lines.append("  (se: standard error of the coverage with each held-out patch as one "
                     "cluster)")
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike[str] | None = None, *,
             overwrite: bool = False) -> Figure:
        """Reliability diagram, coverage and error vs sd by distance (saved if ``path``)."""
        fig = plot_cv(self)
        if path is not None:
            save_figure(fig, path, overwrite=overwrite)
        return fig
