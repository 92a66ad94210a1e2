"""Maps of a gap-filling result: observations, predictive mean, predictive std, residuals.

:func:`plot_maps` draws the panels side by side with the raster's coordinates on the axes.
Observations and mean share one colour scale, so filled gaps can be compared with the data by
eye; the std has its own. With held-out truth, a fourth panel shows the residuals
(truth − mean) on the held-out cells with a symmetric scale. matplotlib only; the CLI selects
the Agg backend before importing this module.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from geogp.adapters import find_spatial_dims

__all__ = ["plot_maps", "save_maps"]


def _extent(da: xr.DataArray, y_dim: str, x_dim: str):
    """imshow extent (left, right, bottom, top) of cell edges for regular coordinates."""
    x, y = da[x_dim].values.astype(float), da[y_dim].values.astype(float)
    dx = (x[-1] - x[0]) / max(len(x) - 1, 1)
    dy = (y[-1] - y[0]) / max(len(y) - 1, 1)
    return (x[0] - dx / 2, x[-1] + dx / 2, y[-1] + dy / 2, y[0] - dy / 2)


def _label(da, dim) -> str:
    units = da[dim].attrs.get("units")
    return f"{dim} [{units}]" if units else str(dim)


def plot_maps(observed: xr.DataArray, prediction: xr.Dataset, heldout: xr.DataArray | None = None,
              *, title: str | None = None, cmap: str = "viridis", figsize=None):
    """Figure with the observations, the predictive mean and std (and held-out residuals).

    Args:
        observed: the input raster (NaN = missing), 2-D (y, x).
        prediction: output of ``GeoRegressor.predict`` on the same grid (2-D, or the first
            slice of an extra dimension is shown).
        heldout: optional raster of true values at held-out cells (NaN elsewhere); adds a
            residual panel (truth − mean) with its RMSE in the title.
        title: figure title. cmap: colour map of observations and mean.
        figsize: matplotlib figure size; default from the number of panels.

    Returns:
        The :class:`matplotlib.figure.Figure`.
    """
    import matplotlib.pyplot as plt

    def two_d(a):
        extra = [d for d in a.dims if d not in (y_dim, x_dim)]
        return a.isel({d: 0 for d in extra}) if extra else a

    y_dim, x_dim = find_spatial_dims(prediction)
    mean, std = two_d(prediction["mean"]), two_d(prediction["std"])
    obs = observed
    if "band" in obs.dims and obs.sizes["band"] == 1:
        obs = obs.squeeze("band", drop=True)
    oy, ox = find_spatial_dims(obs)
    obs = two_d(obs.rename({oy: y_dim, ox: x_dim}) if (oy, ox) != (y_dim, x_dim) else obs)
    panels = [("observations", obs.values, cmap), ("predictive mean", mean.values, cmap),
              ("predictive std (new observation)", std.values, "magma")]
    if heldout is not None:
        truth = two_d(heldout.rename(dict(zip(find_spatial_dims(heldout), (y_dim, x_dim)))))
        resid = truth.values - mean.values
        ok = np.isfinite(resid)
        rmse = float(np.sqrt(np.mean(resid[ok] ** 2))) if ok.any() else float("nan")
        panels.append((f"held-out residuals (RMSE {rmse:.3g})", resid, "RdBu_r"))
    finite = np.concatenate([p[1][np.isfinite(p[1])] for p in panels[:2]])
    vmin, vmax = (np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0))
    extent = _extent(mean, y_dim, x_dim)
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=figsize or (4.2 * n, 4.0), squeeze=False,
                             constrained_layout=True)
    for ax, (name, data, cm) in zip(axes[0], panels):
        kw = {}
        if name in ("observations", "predictive mean"):
            kw = {"vmin": vmin, "vmax": vmax}
        elif name.startswith("held-out"):
            r = np.nanmax(np.abs(data)) if np.isfinite(data).any() else 1.0
            kw = {"vmin": -r, "vmax": r}
        im = ax.imshow(np.ma.masked_invalid(data), extent=extent, origin="upper", cmap=cm,
                       aspect="auto", interpolation="nearest", **kw)
        if mean[y_dim].values[0] < mean[y_dim].values[-1]:
            ax.invert_yaxis()
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(_label(mean, x_dim))
        ax.set_ylabel(_label(mean, y_dim))
        units = prediction["mean"].attrs.get("units")
        fig.colorbar(im, ax=ax, shrink=0.8, label=units or None)
    if title:
        fig.suptitle(title)
    return fig


def save_maps(path, observed, prediction, heldout=None, *, overwrite: bool = False,
              dpi: int = 110, **kwargs):
    """Draw :func:`plot_maps` and write it atomically to ``path`` (PNG, PDF, SVG...)."""
    import matplotlib.pyplot as plt

    from geogp.io import atomic_path

    fig = plot_maps(observed, prediction, heldout, **kwargs)
    try:
        with atomic_path(path, overwrite) as tmp:
            fig.savefig(tmp, dpi=dpi, format=str(path).rsplit(".", 1)[-1].lower())
    finally:
        plt.close(fig)
    return path
