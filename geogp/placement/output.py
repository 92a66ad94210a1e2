"""Outputs of sensor placement: GeoJSON and CSV writers and a map of the suggested sites.

Writes are atomic (:func:`geogp.frontend.io.atomic_path`: a temporary file beside the destination,
moved into place on success) and refuse to replace an existing file unless
``overwrite=True``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from geogp.core.io_atomic import atomic_path
from geogp.exceptions import InputError

if TYPE_CHECKING:  # annotations only
    from matplotlib.axes import Axes
    from numpy.typing import ArrayLike


def _crs_member(crs) -> dict | None:
    """GeoJSON (2008) "crs" member for an EPSG code, an "EPSG:n" string, or a rasterio CRS."""
    if crs is None:
        return None
    code = None
    if isinstance(crs, (int, np.integer)):
        code = int(crs)
    elif hasattr(crs, "to_epsg"):
        code = crs.to_epsg()
        if code is None:
            return {"type": "name", "properties": {"name": crs.to_string()}}
    elif isinstance(crs, str) and crs.upper().startswith("EPSG:"):
        code = int(crs.split(":")[1])
    else:
        return {"type": "name", "properties": {"name": str(crs)}}
    return {"type": "name", "properties": {"name": f"urn:ogc:def:crs:EPSG::{code}"}}


def _json_value(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not np.isfinite(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def to_geojson(sites: pd.DataFrame, *, x: str = "x", y: str = "y", crs: Any = None) -> dict:
    """A GeoJSON FeatureCollection of Point features; the other columns become properties."""
    for col in (x, y):
        if col not in sites.columns:
            raise InputError(f"column {col!r} not found; the table has {list(sites.columns)}.")
    props = [c for c in sites.columns if c not in (x, y)]
    features = []
    for row in sites.to_dict("records"):  # per-column dtypes kept (iterrows upcasts to float)
        features.append({
            "type": "Feature",
            "geometry": {"type": "Point", "coordinates": [float(row[x]), float(row[y])]},
            "properties": {c: _json_value(row[c]) for c in props},
        })
    out: dict[str, Any] = {"type": "FeatureCollection", "features": features}
    member = _crs_member(crs)
    if member is not None:
        out["crs"] = member
    return out


def write_geojson(sites: pd.DataFrame, path: str | os.PathLike[str], *, x: str = "x", y: str = "y",
                  crs: Any = None,
                  overwrite: bool = False) -> Path:
    """Write ``sites`` as GeoJSON (atomic: temp file + os.replace). Returns the path."""
    text = json.dumps(to_geojson(sites, x=x, y=y, crs=crs), indent=1)
    with atomic_path(path, overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_csv(sites: pd.DataFrame, path: str | os.PathLike[str], *,
              overwrite: bool = False) -> Path:
    """Write ``sites`` as CSV (atomic: temp file + os.replace). Returns the path."""
    with atomic_path(path, overwrite) as tmp:
        sites.to_csv(tmp, index=False)
    return Path(path)


def plot_sites(sites: pd.DataFrame, std: ArrayLike | None = None,
               x_coords: ArrayLike | None = None, y_coords: ArrayLike | None = None, *,
               ax: Axes | None = None,
               x: str = "x", y: str = "y", existing: ArrayLike | None = None,
               title: str | None = None,
               annotate: bool = True, label: str = "predictive std", xlabel: str | None = None,
               ylabel: str | None = None) -> Axes:
    """Suggested sites (numbered triangles) over a map of the predictive std.

    The order numbers are placed so that they overlap neither each other nor the markers
    (:func:`_place_labels`; a thin leader line joins a label pushed away from its site), and
    the legend sits below the axes, outside the map.

    Args:
        sites: output of :func:`suggest_sites`.
        std: optional (N_y, N_x) std map with axis coordinates ``x_coords`` (N_x,) and
            ``y_coords`` (N_y,).
        existing: optional (N, 2) existing sensors (x, y), drawn as circles.
        label: colour-bar label (the colour bar starts at 0).
        xlabel, ylabel: axis labels (default: the column names ``x`` and ``y``).

    Returns:
        The matplotlib Axes.
    """
    # lazy: matplotlib loads only when a figure is drawn
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5.5))
    if std is not None:
        std = np.asarray(std)
        if x_coords is None or y_coords is None:
            raise InputError("plot_sites needs x_coords and y_coords with a std map.")
        finite = std[np.isfinite(std)]
        mesh = ax.pcolormesh(np.asarray(x_coords), np.asarray(y_coords), std, shading="auto",
                             cmap="viridis", vmin=0.0,
                             vmax=float(finite.max()) if finite.size else 1.0)
        # the colour bar in the map's own coordinates: exactly as tall as the drawn map,
        # whatever its aspect
        ax.figure.colorbar(mesh, cax=ax.inset_axes((1.03, 0.0, 0.035, 1.0)), label=label)
    points = [np.column_stack([sites[x], sites[y]]).astype(np.float64)]
    if existing is not None:
        e = np.asarray(existing)
        ax.scatter(e[:, 0], e[:, 1], s=14, facecolors="none", edgecolors="white",
                   label="existing")
        points.append(e[:, :2].astype(np.float64))
    ax.scatter(sites[x], sites[y], marker="^", s=60, c="red", edgecolors="black",
               label="suggested", zorder=3)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    if annotate and len(sites):
        texts = [str(int(o)) for o in sites["order"]]
        _place_labels(ax, points[0], texts, np.vstack(points))
    _legend_below(ax)
    return ax


# label placement: offsets tried in this order (points), nearest ring first
_DIRECTIONS = [(1, 1), (1, 0), (0, 1), (-1, 1), (1, -1), (-1, 0), (0, -1), (-1, -1)]
_RADII = (5.0, 9.0, 14.0, 20.0, 28.0, 38.0, 50.0)
_MARKER_HALF = 5.0  # half the size of a site marker (s = 60 → about 7.7 pt), with a margin
_PAD = 2.0  # points between two labels


def _place_labels(ax, xy, texts, obstacles, fontsize: float = 8.0):
    """Annotate ``xy`` (N, 2, data units) with ``texts`` so that no two labels overlap and no
    label covers a marker (``obstacles``), greedily in order: for each site, the first offset
    (nearest ring first) whose box is free; failing that, the least-overlapping one."""
    import matplotlib.patheffects as pe  # noqa: PLC0415 - lazy: as above

    to_pt = 72.0 / ax.figure.dpi
    pts = ax.transData.transform(xy) * to_pt  # display points
    obst = ax.transData.transform(obstacles) * to_pt
    frame = ax.get_window_extent()
    fx0, fy0, fx1, fy1 = (frame.x0 * to_pt, frame.y0 * to_pt, frame.x1 * to_pt,
                          frame.y1 * to_pt)
    boxes = [(ox - _MARKER_HALF, oy - _MARKER_HALF, ox + _MARKER_HALF, oy + _MARKER_HALF)
             for ox, oy in obst]
    taken: list[tuple[float, float, float, float]] = []
    for site, (px, py), text in zip(xy, pts, texts, strict=True):
        w, h = 0.64 * fontsize * len(text) + 2.0, fontsize + 1.0  # digits ≈ 0.64 em wide
        best: tuple | None = None
        best_cost = np.inf
        for r in _RADII:
            for dx, dy in _DIRECTIONS:
                cx, cy = px + dx * r, py + dy * r  # anchor point of the label
                x0 = cx if dx > 0 else (cx - w if dx < 0 else cx - w / 2)
                y0 = cy if dy > 0 else (cy - h if dy < 0 else cy - h / 2)
                box = (x0, y0, x0 + w, y0 + h)
                pad = (x0 - _PAD, y0 - _PAD, x0 + w + _PAD, y0 + h + _PAD)  # keep labels apart
                cost = (sum((_overlap(box, b) for b in boxes), 0.0)
                        + sum((_overlap(pad, b) for b in taken), 0.0))
                if box[0] < fx0 or box[2] > fx1 or box[1] < fy0 or box[3] > fy1:
                    cost += 0.5 * w * h  # outside the map: allowed, but only as a last resort
                if cost < best_cost:
                    best, best_cost = (box, dx, dy, r), cost
                if cost == 0:
                    break
            if best_cost == 0:
                break
        assert best is not None  # every cost is finite: the first try sets it
        box, dx, dy, r = best
        taken.append(box)
        ha = "left" if dx > 0 else ("right" if dx < 0 else "center")
        va = "bottom" if dy > 0 else ("top" if dy < 0 else "center")
        arrow = {"arrowstyle": "-", "color": "white", "lw": 0.6} if r > _RADII[1] else None
        ax.annotate(text, xy=site, xytext=(dx * r, dy * r), textcoords="offset points",
                    ha=ha, va=va, color="white", fontsize=fontsize, zorder=4, arrowprops=arrow,
                    path_effects=[pe.withStroke(linewidth=1.5, foreground="black")])


def _overlap(a: tuple, b: tuple) -> float:
    """Area of the intersection of two boxes (x0, y0, x1, y1)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _legend_below(ax):
    """The legend in one row under the axes (below the tick labels and the x label)."""
    y = -0.12
    try:
        renderer = ax.figure.canvas.get_renderer()
        tight = ax.get_tightbbox(renderer)
        y = float(ax.transAxes.inverted().transform((0.0, tight.y0))[1]) - 0.01
    except Exception:  # pragma: no cover (backends without a renderer)
        pass
    handles, _ = ax.get_legend_handles_labels()
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, y), ncol=max(1, len(handles)),
                     fontsize=8, frameon=False, borderaxespad=0.0)
