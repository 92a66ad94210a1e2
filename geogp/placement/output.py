"""Outputs of sensor placement: GeoJSON and CSV writers and a map of the suggested sites.

Writes are atomic (:func:`geogp.io.atomic_path`: a temporary file beside the destination,
moved into place on success) and refuse to replace an existing file unless
``overwrite=True``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from geogp.exceptions import InputError
from geogp.io import atomic_path


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


def to_geojson(sites: pd.DataFrame, *, x: str = "x", y: str = "y", crs=None) -> dict:
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
    out = {"type": "FeatureCollection", "features": features}
    member = _crs_member(crs)
    if member is not None:
        out["crs"] = member
    return out


def write_geojson(sites: pd.DataFrame, path, *, x: str = "x", y: str = "y", crs=None,
                  overwrite: bool = False) -> Path:
    """Write ``sites`` as GeoJSON (atomic: temp file + os.replace). Returns the path."""
    text = json.dumps(to_geojson(sites, x=x, y=y, crs=crs), indent=1)
    with atomic_path(path, overwrite) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_csv(sites: pd.DataFrame, path, *, overwrite: bool = False) -> Path:
    """Write ``sites`` as CSV (atomic: temp file + os.replace). Returns the path."""
    with atomic_path(path, overwrite) as tmp:
        sites.to_csv(tmp, index=False)
    return Path(path)


def plot_sites(sites: pd.DataFrame, std=None, x_coords=None, y_coords=None, *, ax=None,
               x: str = "x", y: str = "y", existing=None, title: str | None = None,
               annotate: bool = True, label: str = "predictive std"):
    """Suggested sites (numbered triangles) over a map of the predictive std.

    Args:
        sites: output of :func:`suggest_sites`.
        std: optional (N_y, N_x) std map with axis coordinates ``x_coords`` (N_x,) and
            ``y_coords`` (N_y,).
        existing: optional (N, 2) existing sensors (x, y), drawn as circles.
        label: colour-bar label.

    Returns:
        The matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 5.5))
    if std is not None:
        std = np.asarray(std)
        if x_coords is None or y_coords is None:
            raise InputError("plot_sites needs x_coords and y_coords with a std map.")
        mesh = ax.pcolormesh(np.asarray(x_coords), np.asarray(y_coords), std, shading="auto",
                             cmap="viridis")
        ax.figure.colorbar(mesh, ax=ax, label=label)
    if existing is not None:
        e = np.asarray(existing)
        ax.scatter(e[:, 0], e[:, 1], s=14, facecolors="none", edgecolors="white",
                   label="existing")
    ax.scatter(sites[x], sites[y], marker="^", s=60, c="red", edgecolors="black",
               label="suggested", zorder=3)
    if annotate:
        for row in sites.to_dict("records"):
            ax.annotate(str(int(row["order"])), (row[x], row[y]), xytext=(4, 4),
                        textcoords="offset points", color="white", fontsize=8)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(loc="upper right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax
