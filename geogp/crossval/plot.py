"""Figures of a cross-validation: is the model calibrated, at the edge of a gap and inside it?

Three panels: a reliability diagram (empirical vs nominal coverage of central predictive
intervals; the diagonal is perfect calibration), the 95 % coverage per distance stratum with
the 0.93–0.97 band, and the RMSE beside the root mean predictive variance per stratum (when
the bars of a stratum differ, its intervals are too narrow or too wide there), plus a map of
the first fold's held-out cells coloured by their distance to the nearest training cell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geogp.frontend.plotting import pretty_units

if TYPE_CHECKING:  # annotations only
    from matplotlib.figure import Figure

    from geogp.crossval.result import CVResult

__all__ = ["plot_cv"]


def plot_cv(result: CVResult) -> Figure:
    """The figure of a :class:`~geogp.crossval.CVResult` (matplotlib)."""
    # lazy: matplotlib loads only when a figure is drawn
    import matplotlib.pyplot as plt  # noqa: PLC0415


    levels, empirical = result.reliability()
    table = result.by_distance().drop(index="all")
    fig, axes = plt.subplots(1, 4, figsize=(17, 4.4), layout="constrained")
    # each stratum's size under its name: always visible, never under a bar or the legend
    ticks = [f"{name}\nn={n}" for name, n in zip(table.index, table["n"], strict=True)]
    ax = axes[0]
    ax.plot([0, 1], [0, 1], color="0.6", lw=1, label="calibrated")
    ax.plot(levels, empirical, "o-", label=result.method)
    ax.set_xlabel("nominal coverage of the central interval")
    ax.set_ylabel("empirical coverage")
    ax.set_title("reliability (all held-out cells)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)

    ax = axes[1]
    pos = np.arange(len(table))
    ax.axhspan(0.93, 0.97, color="tab:green", alpha=0.15)
    ax.axhline(0.95, color="tab:green", lw=1)
    ax.bar(pos, table["coverage95"].fillna(0).to_numpy(), color="tab:blue", width=0.6)
    for p, cov in enumerate(table["coverage95"]):
        if np.isfinite(cov):
            ax.text(p, cov + 0.01, f"{cov:.2f}", ha="center", fontsize=8)
    ax.set_xticks(pos, ticks)
    ax.set_xlabel("distance to the nearest training cell (cells)")
    ax.set_ylabel("95 % interval coverage")
    ax.set_ylim(0, 1.1)
    ax.set_title("coverage by distance (band: 0.93–0.97)", fontsize=10)

    ax = axes[2]
    w = 0.38
    ax.bar(pos - w / 2, table["rmse"].fillna(0).to_numpy(), w, label="RMSE")
    rms_sd = (table["rmse"] / table["std_ratio"]).fillna(0).to_numpy()
    ax.bar(pos + w / 2, rms_sd, w, label="root mean predictive variance")
    ax.set_xticks(pos, ticks)
    ax.set_xlabel("distance to the nearest training cell (cells)")
    ax.set_ylabel(pretty_units(result.units) or "data units")
    ax.set_title("error vs predicted sd by distance", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")

    ax = axes[3]
    first = result.cells[result.cells["fold"] == 1]
    shape = result.folds.shape[1:]
    img = np.full(shape, np.nan)
    img[first["row"].to_numpy(), first["col"].to_numpy()] = first["distance"].to_numpy()
    im = ax.imshow(np.ma.masked_invalid(img), cmap="viridis", interpolation="nearest")
    ax.set_title(f"fold 1 ({result.kind}): held-out cells", fontsize=10)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    fig.colorbar(im, ax=ax, shrink=0.8, label="distance (cells)")
    fig.suptitle(f"cross-validation: {result.method}", fontsize=11)
    return fig
