"""Maps of a gap-filling result: observations, predictive mean, predictive std, residuals.

:func:`plot_maps` draws the panels side by side with the raster's coordinates on the axes.
Observations and mean share one colour scale, so filled gaps can be compared with the data by
eye; the std has its own. With held-out truth, a fourth panel shows the residuals
(truth − mean) on the held-out cells with a symmetric scale. matplotlib only; the CLI selects
the Agg backend before importing this module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import xarray as xr

from geogp.core.io_atomic import atomic_path
from geogp.frontend.adapters import find_spatial_dims
from geogp.frontend.io import load_here

if TYPE_CHECKING:  # annotations only
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from numpy.typing import ArrayLike

_Raster = TypeVar("_Raster", xr.DataArray, xr.Dataset)

__all__ = ["plot_maps", "save_maps", "save_figure", "set_map_axes", "pretty_units",
           "drawn_ratio", "thinned", "MAX_MAP_CELLS"]

MAX_MAP_CELLS = 2048  # cells drawn a side at most (thinned)

_UNIT_SYMBOLS = {"degc": "°C", "deg_c": "°C", "celsius": "°C", "degree_celsius": "°C",
                 "degk": "K", "kelvin": "K", "metre": "m", "meter": "m", "metres": "m",
                 "meters": "m"}


def pretty_units(units: object) -> str | None:
    """A units attribute as an axis label would show it ("degC" → "°C"); None when empty."""
    if units is None or not str(units).strip():
        return None
    return _UNIT_SYMBOLS.get(str(units).strip().lower(), str(units).strip())


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
    with contextlib.suppress(Exception):
        unit = crs.linear_units or unit
    unit = {"metre": "m", "meter": "m", "kilometre": "km", "foot": "ft", "US survey foot":
            "ftUS"}.get(unit, unit)
    return "equal", f"{x_dim} [{unit}]", f"{y_dim} [{unit}]"


def _point_table(points):
    """(x, y, value) float arrays of the finite rows of an (N, 3) array or a table whose
    first three columns are x, y and value."""
    arr = np.asarray(points.to_numpy() if hasattr(points, "to_numpy") else points,
                     dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 3:
        raise ValueError(f"points must be (N, 3): x, y, value; got shape {arr.shape}.")
    arr = arr[np.all(np.isfinite(arr[:, :3]), axis=1)]
    return arr[:, 0], arr[:, 1], arr[:, 2]


def _shared_limits(*arrays):
    """(vmin, vmax) of observations and mean together: their 1st and 99th percentiles."""
    finite = np.concatenate([np.ravel(a)[np.isfinite(np.ravel(a))] for a in arrays])
    if not finite.size:
        return 0.0, 1.0
    lo, hi = np.percentile(finite, [1, 99])
    return (float(lo), float(hi)) if hi > lo else (float(lo) - 0.5, float(hi) + 0.5)


def set_map_axes(ax: Axes, obj: xr.DataArray | xr.Dataset, y_dim: str, x_dim: str) -> float:
    """Give ``ax`` the aspect and axis labels of ``obj``'s CRS (:func:`_geometry`); returns
    the height / width ratio of the drawn map (:func:`drawn_ratio`)."""
    aspect, x_label, y_label = _geometry(obj, y_dim, x_dim)
    ax.set_aspect(aspect)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    return drawn_ratio(_extent(obj, y_dim, x_dim), aspect)


def plot_maps(observed: xr.DataArray | None, prediction: xr.Dataset,
              heldout: xr.DataArray | None = None, *,
              points: ArrayLike | pd.DataFrame | None = None, title: str | None = None,
              cmap: str = "viridis", figsize: tuple[float, float] | None = None) -> Figure:
    """Figure with the observations, the predictive mean and std (and held-out residuals).

    Observations and mean share one colour scale, taken from the observed values and the mean
    together (the 1st to 99th percentiles); std colour bars start at 0. Axes follow the CRS
    (:func:`_geometry`). A prediction holding ``effective_lengthscale`` (wavelet models,
    :meth:`~geogp.frontend.api.GeoRegressor.effective_lengthscale`) gets a panel of it.

    Args:
        observed: the input raster (NaN = missing), 2-D (y, x); None for point data.
        prediction: output of ``GeoRegressor.predict`` on the same grid (2-D, or the first
            slice of an extra dimension is shown).
        heldout: optional raster of true values at held-out cells (NaN elsewhere); adds a
            residual panel (truth − mean) with its RMSE in the title.
        points: point observations instead of a raster: an (N, 3) array, or a table whose
            first three columns are x, y and value, in the prediction's CRS. They are drawn
            coloured by value over a faded mean, and their locations are marked on the std.
        title: figure title. cmap: colour map of observations and mean.
        figsize: matplotlib figure size; default from the number of panels and the aspect.

    Returns:
        The :class:`matplotlib.figure.Figure`.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415 - lazy: the caller chooses the backend first

    def two_d(a):  # the first slice of an extra dimension, rows = y whatever the input order
        extra = [d for d in a.dims if d not in (y_dim, x_dim)]
        return (a.isel({d: 0 for d in extra}) if extra else a).transpose(y_dim, x_dim)

    y_dim, x_dim = find_spatial_dims(prediction)
    full_mean = two_d(prediction["mean"])
    extent = _extent(full_mean, y_dim, x_dim)  # of the whole grid
    prediction = load_here(thinned(prediction, y_dim, x_dim))  # what a panel can show
    mean, std = two_d(prediction["mean"]), two_d(prediction["std"])
    panels = []  # (kind, title, image, colour map)
    if points is not None:
        px, py, pv = _point_table(points)
        panels.append(("points", f"observations ({pv.size} points)",
                       mean.values, cmap))
        limits = _shared_limits(pv, mean.values)
    elif observed is not None:
        obs = observed
        if "band" in obs.dims and obs.sizes["band"] == 1:
            obs = obs.squeeze("band", drop=True)
        oy, ox = find_spatial_dims(obs)
        obs = two_d(obs.rename({oy: y_dim, ox: x_dim}) if (oy, ox) != (y_dim, x_dim) else obs)
        obs = load_here(thinned(obs, y_dim, x_dim))
        panels.append(("shared", "observations", obs.values, cmap))
        limits = _shared_limits(obs.values, mean.values)
    else:
        limits = _shared_limits(mean.values)
    panels += [("shared", "predictive mean", mean.values, cmap),
               ("std", "predictive std (new observation)", std.values, "magma")]
    if "effective_lengthscale" in prediction.data_vars:  # wavelet models
        ell = two_d(prediction["effective_lengthscale"])
        unit = ell.attrs.get("units", "")
        panels.append(("other", f"effective lengthscale ({unit})" if unit else
                       "effective lengthscale", ell.values, "cividis"))
    if heldout is not None:
        names = dict(zip(find_spatial_dims(heldout), (y_dim, x_dim), strict=True))
        truth = two_d(heldout.rename(names))
        resid = load_here(truth - full_mean)  # the RMSE of every held-out cell, not a subgrid
        values = resid.values
        ok = np.isfinite(values)
        rmse = float(np.sqrt(np.mean(values[ok] ** 2))) if ok.any() else float("nan")
        panels.append(("residual", f"held-out residuals (RMSE {rmse:.3g})",
                       thinned(resid, y_dim, x_dim).values, "RdBu_r"))
    aspect, x_label, y_label = _geometry(prediction, y_dim, x_dim)
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=figsize or _figsize(n, extent, aspect),
                             squeeze=False, layout="constrained")
    units = pretty_units(prediction["mean"].attrs.get("units"))
    for ax, (kind, name, data, cm) in zip(axes[0], panels, strict=True):
        kw = {"vmin": limits[0], "vmax": limits[1]} if kind in ("shared", "points") else {}
        if kind == "std":
            kw = {"vmin": 0.0, "vmax": _top(data)}
        elif kind == "residual":
            r = _top(np.abs(data))
            kw = {"vmin": -r, "vmax": r}
        im = ax.imshow(np.ma.masked_invalid(data), extent=extent, origin="upper", cmap=cm,
                       aspect=aspect, interpolation="nearest",
                       alpha=0.35 if kind == "points" else None, **kw)
        if kind == "points":
            im = ax.scatter(px, py, c=pv, cmap=cm, s=14, edgecolors="black", linewidths=0.4,
                            zorder=3, **kw)
        elif kind == "std" and points is not None:
            ax.scatter(px, py, s=3, c="white", edgecolors="none", zorder=3)
        ax.set_xlim(extent[0], extent[1])
        ax.set_ylim(*sorted(extent[2:]))
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        # in the map's own coordinates: the colour bar is as tall as the drawn map
        fig.colorbar(im, cax=ax.inset_axes([1.04, 0.0, 0.05, 1.0]), label=units or None)
    if title:
        fig.suptitle(title)
    return fig


def thinned(obj: _Raster, y_dim: str, x_dim: str) -> _Raster:
    """``obj`` with every k-th cell along y and x, k the smallest step that leaves at most
    :data:`MAX_MAP_CELLS` a side (``obj`` itself when it is that small): a panel is a few
    hundred pixels wide, and a 10⁷-cell raster need not be read whole to be drawn."""
    k = -(-max(obj.sizes[y_dim], obj.sizes[x_dim]) // MAX_MAP_CELLS)
    return obj.isel({y_dim: slice(None, None, k), x_dim: slice(None, None, k)}) if k > 1 else obj


def _top(data) -> float:
    """The largest finite value of ``data`` (1.0 when there is none or it is not > 0)."""
    finite = np.asarray(data)[np.isfinite(data)]
    top = float(finite.max()) if finite.size else 1.0
    return top if top > 0 else 1.0


def drawn_ratio(extent: Sequence[float], aspect: float | str, *, low: float = 0.3,
                high: float = 2.0) -> float:
    """Height / width of a map drawn with ``extent`` (left, right, bottom, top) and matplotlib
    ``aspect`` (a number, "equal" or "auto": 0.8), clipped to [low, high]."""
    width, height = abs(extent[1] - extent[0]), abs(extent[3] - extent[2])
    scale = 1.0 if aspect == "equal" else aspect
    ratio = height / width * scale if isinstance(scale, (int, float)) and width > 0 else 0.8
    if not np.isfinite(ratio) or ratio <= 0:
        ratio = 0.8
    return min(max(ratio, low), high)


def _figsize(n: int, extent, aspect) -> tuple:
    """A figure size whose panels have the map's drawn height / width ratio (within limits),
    with room for the colour bars, labels and titles."""
    ratio = drawn_ratio(extent, aspect)
    panel = 4.2  # inches per panel: the map about 3.2 wide, then tick labels and colour bar
    return (panel * n + 0.3, 3.2 * ratio + 1.2)


def save_figure(fig: Figure, path: str | os.PathLike[str], *, overwrite: bool = False,
                dpi: int = 110) -> str | os.PathLike[str]:
    """Write ``fig`` atomically to ``path`` (format from the suffix), then close it."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 - lazy: the caller chooses the backend first

    try:
        with atomic_path(path, overwrite) as tmp:
            fig.savefig(tmp, dpi=dpi, format=str(path).rsplit(".", 1)[-1].lower(),
                        bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


def save_maps(path: str | os.PathLike[str], observed: xr.DataArray | None,
              prediction: xr.Dataset, heldout: xr.DataArray | None = None, *,
              overwrite: bool = False, dpi: int = 110,
              **kwargs: Any) -> str | os.PathLike[str]:
    """Draw :func:`plot_maps` and write it atomically to ``path`` (PNG, PDF, SVG...)."""
    return save_figure(plot_maps(observed, prediction, heldout, **kwargs), path,
                       overwrite=overwrite, dpi=dpi)
