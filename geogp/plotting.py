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

__all__ = ["plot_maps", "save_maps", "save_figure"]


def _extent(da: xr.DataArray, y_dim: str, x_dim: str):
    """imshow extent (left, right, bottom, top) of cell edges for regular coordinates."""
    x, y = da[x_dim].values.astype(float), da[y_dim].values.astype(float)
    dx = (x[-1] - x[0]) / max(len(x) - 1, 1)
    dy = (y[-1] - y[0]) / max(len(y) - 1, 1)
    return (x[0] - dx / 2, x[-1] + dx / 2, y[-1] + dy / 2, y[0] - dy / 2)


def _label(da, dim) -> str:
    units = da[dim].attrs.get("units")
    return f"{dim} [{units}]" if units else str(dim)


def _geometry(da, y_dim: str, x_dim: str):
    """(aspect, x label, y label) from the CRS: equal-area aspect on lon/lat grids.

    On a geographic CRS a degree of longitude is cos(latitude) times shorter than a degree of
    latitude, so the axes get aspect 1/cos(mean latitude) (a region looks as on an equal-area
    map at its centre); projected grids get equal axes, labelled with the CRS's linear unit.
    Without a CRS the aspect follows the figure ("auto") and the coordinates' own units.
    """
    try:
        crs = da.rio.crs
    except Exception:
        crs = None
    if crs is None:
        return "auto", _label(da, x_dim), _label(da, y_dim)
    if crs.is_geographic:
        lat = float(np.nanmean(da[y_dim].values))
        return (1.0 / max(np.cos(np.deg2rad(lat)), 1e-6), f"longitude [°E] ({x_dim})",
                f"latitude [°N] ({y_dim})")
    unit = "m"
    try:
        unit = crs.linear_units or unit
    except Exception:
        pass
    unit = {"metre": "m", "meter": "m", "kilometre": "km", "foot": "ft", "US survey foot":
            "ftUS"}.get(unit, unit)
    return "equal", f"{x_dim} [{unit}]", f"{y_dim} [{unit}]"


def plot_maps(observed: xr.DataArray, prediction: xr.Dataset, heldout: xr.DataArray | None = None,
              *, title: str | None = None, cmap: str = "viridis", figsize=None):
    """Figure with the observations, the predictive mean and std (and held-out residuals).

    A prediction holding ``effective_lengthscale`` (wavelet models,
    :meth:`~geogp.api.GeoRegressor.effective_lengthscale`) gets a panel of it.

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

    def two_d(a):  # the first slice of an extra dimension, rows = y whatever the input order
        extra = [d for d in a.dims if d not in (y_dim, x_dim)]
        return (a.isel({d: 0 for d in extra}) if extra else a).transpose(y_dim, x_dim)

    y_dim, x_dim = find_spatial_dims(prediction)
    mean, std = two_d(prediction["mean"]), two_d(prediction["std"])
    obs = observed
    if "band" in obs.dims and obs.sizes["band"] == 1:
        obs = obs.squeeze("band", drop=True)
    oy, ox = find_spatial_dims(obs)
    obs = two_d(obs.rename({oy: y_dim, ox: x_dim}) if (oy, ox) != (y_dim, x_dim) else obs)
    panels = [("observations", obs.values, cmap), ("predictive mean", mean.values, cmap),
              ("predictive std (new observation)", std.values, "magma")]
    if "effective_lengthscale" in prediction.data_vars:  # wavelet models
        ell = two_d(prediction["effective_lengthscale"])
        unit = ell.attrs.get("units", "")
        panels.append((f"effective lengthscale ({unit})" if unit else "effective lengthscale",
                       ell.values, "cividis"))
    if heldout is not None:
        truth = two_d(heldout.rename(dict(zip(find_spatial_dims(heldout), (y_dim, x_dim)))))
        resid = truth.values - mean.values
        ok = np.isfinite(resid)
        rmse = float(np.sqrt(np.mean(resid[ok] ** 2))) if ok.any() else float("nan")
        panels.append((f"held-out residuals (RMSE {rmse:.3g})", resid, "RdBu_r"))
    finite = np.concatenate([p[1][np.isfinite(p[1])] for p in panels[:2]])
    vmin, vmax = (np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0))
    extent = _extent(mean, y_dim, x_dim)
    aspect, x_label, y_label = _geometry(prediction, y_dim, x_dim)
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
                       aspect=aspect, interpolation="nearest", **kw)
        if mean[y_dim].values[0] < mean[y_dim].values[-1]:
            ax.invert_yaxis()
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        units = prediction["mean"].attrs.get("units")
        fig.colorbar(im, ax=ax, shrink=0.8, label=units or None)
    if title:
        fig.suptitle(title)
    return fig


def save_figure(fig, path, *, overwrite: bool = False, dpi: int = 110):
    """Write ``fig`` atomically to ``path`` (format from the suffix), then close it."""
    import matplotlib.pyplot as plt

    from geogp.io import atomic_path

    try:
        with atomic_path(path, overwrite) as tmp:
            fig.savefig(tmp, dpi=dpi, format=str(path).rsplit(".", 1)[-1].lower())
    finally:
        plt.close(fig)
    return path


def save_maps(path, observed, prediction, heldout=None, *, overwrite: bool = False,
              dpi: int = 110, **kwargs):
    """Draw :func:`plot_maps` and write it atomically to ``path`` (PNG, PDF, SVG...)."""
    return save_figure(plot_maps(observed, prediction, heldout, **kwargs), path,
                       overwrite=overwrite, dpi=dpi)
