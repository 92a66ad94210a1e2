"""Semantic checks of a model file: do its parts describe one consistent model?

The digests (:mod:`geogp.persist.checks`) say that the arrays are those that were written;
they cannot say that the file was written by geogp, since anyone can recompute them. The checks
here refuse what geogp never writes, even with consistent digests:

- the grid spec: dimension names, a CRS that parses, ``geographic`` matching the CRS, a
  longitude scale that is a number in (0, 1] (1 for a projected CRS), consistent with the
  target's latitudes;
- the target grid: strictly monotonic, finite coordinates (as every grid geogp accepts), the
  same CRS as the spec;
- lattice slices: the lattice (shape, origin, step, cell size) is the target grid plus the
  estimator's margin, so a transposed shape or a moved origin is refused;
- AFS slices: the target, in the slice's standardised coordinates, lies inside the feature
  window (where the features are valid);
- the per-slice bookkeeping: ``n_observed`` non-negative integers, ``fit_time_s`` numbers.

A consistent edit that keeps all of this (a CRS replaced by another valid one, with every
digest recomputed) cannot be detected without a key: see :mod:`geogp.persist.sign`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from geogp.exceptions import GeogpError, ReadError
from geogp.frontend.adapters import GridSpec, as_crs, check_axis
from geogp.frontend.blocks import MAX_FACTOR, Blocks
from geogp.frontend.outputs import Target
from geogp.persist.checks import require

if TYPE_CHECKING:  # annotations only
    from geogp.persist.checks import Arrays

__all__ = ["load_spec", "load_target", "check_lattice_grid", "check_series_grid", "check_window",
           "check_bookkeeping"]

_RTOL = 1e-9


def _number(d: dict, key: str, where: str) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        raise ReadError(f"model file {where}: {key!r} must be a finite number; got "
                        f"{v!r:.40}.")
    return float(v)


def load_spec(sp: dict) -> GridSpec:
    """The checked :class:`~geogp.frontend.adapters.GridSpec` of the metadata's ``spec``."""
    if not isinstance(sp, dict) or not set(sp) <= {"y_dim", "x_dim", "crs_wkt", "geographic",
                                                    "lon_scale", "assumed"}:
        raise ReadError(f"model file metadata: malformed grid spec {sp!r:.80}.")
    y_dim, x_dim = require(sp, "y_dim", "str", "spec"), require(sp, "x_dim", "str", "spec")
    wkt = require(sp, "crs_wkt", "str", "spec", nullable=True)
    geographic = require(sp, "geographic", "bool", "spec")
    lon_scale = _number(sp, "lon_scale", "spec")
    assumed = sp.get("assumed", "")
    if y_dim == x_dim or not isinstance(assumed, str):
        raise ReadError("model file spec: the dimension names must differ and 'assumed' must "
                        "be text.")
    if wkt is not None:
        try:
            crs = as_crs(wkt)
        except (GeogpError, ValueError) as err:
            raise ReadError(f"model file spec: the CRS does not parse ({err}).") from None
        if bool(crs.is_geographic) != geographic:
            raise ReadError(f"model file spec: 'geographic' is {geographic}, but the CRS is "
                            f"{'geographic' if crs.is_geographic else 'projected'}.")
    elif geographic:
        raise ReadError("model file spec: 'geographic' is true without a CRS.")
    if not (0 < lon_scale <= 1 if geographic else lon_scale == 1):
        raise ReadError(f"model file spec: 'lon_scale' must be in (0, 1] (cos of a latitude) "
                        f"for a geographic CRS and 1 otherwise; got {lon_scale!r}.")
    return GridSpec(y_dim, x_dim, wkt, geographic, lon_scale, assumed)


def _axis(values: np.ndarray, name: str) -> np.ndarray:
    try:
        return check_axis(values, name, min_size=1)[0]
    except (GeogpError, ValueError) as err:
        raise ReadError(f"model file target: {err} geogp writes only monotonic grids; the "
                        "file was changed.") from None


def load_blocks(value: object, target: Target | None) -> Blocks | None:
    """The checked blocks of a raster whose values repeat in them (None: its own cells)."""
    if value is None:
        return None
    try:
        factor = tuple(int(k) for k in value["factor"])  # type: ignore[index]
        phase = tuple(int(p) for p in value["phase"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        raise ReadError(f"model file metadata: malformed 'blocks' {value!r:.60}.") from None
    if (target is None or len(factor) != 2 or len(phase) != 2 or max(factor) < 2
            or not all(1 <= k <= MAX_FACTOR and 0 <= p < k
                       for k, p in zip(factor, phase, strict=True))):
        raise ReadError(f"model file metadata: 'blocks' {value!r:.60} are not the blocks of "
                        "the stored raster.")
    return Blocks((factor[0], factor[1]), (phase[0], phase[1]))


def load_target(meta: dict, arrays: Arrays, spec: GridSpec) -> Target | None:
    """The checked prediction target of the metadata (None when the model has none)."""
    t = require(meta, "target", "dict", nullable=True)
    if t is None:
        return None
    yd, xd = require(t, "y_dim", "str", "target"), require(t, "x_dim", "str", "target")
    y = arrays.get("target/y", ndim=1, kind="iuf")
    x = arrays.get("target/x", ndim=1, kind="iuf")
    _axis(y, yd), _axis(x, xd)
    if (yd, xd) != (spec.y_dim, spec.x_dim):
        raise ReadError(f"model file target: dimensions {(yd, xd)} differ from the spec's "
                        f"{(spec.y_dim, spec.x_dim)}.")
    crs_wkt = require(t, "crs_wkt", "str", "target", nullable=True)
    if crs_wkt != spec.crs_wkt:
        raise ReadError("model file target: its CRS differs from the model's.")
    if spec.geographic:  # lon_scale = cos(mean latitude of the data), inside the target
        lat = np.abs(np.clip(y, -90, 90))
        lo = 0.0 if y.min() <= 0 <= y.max() else lat.min()
        if not np.cos(np.deg2rad(lat.max())) - 1e-9 <= spec.lon_scale \
                <= np.cos(np.deg2rad(lo)) + 1e-9:
            raise ReadError(f"model file spec: lon_scale {spec.lon_scale} is not the cosine "
                            f"of a latitude of the grid ({y.min():.6g} to {y.max():.6g}).")
    coords = {yd: xr.Variable(yd, y, require(t, "y_attrs", "dict", "target")),
              xd: xr.Variable(xd, x, require(t, "x_attrs", "dict", "target"))}
    x_first = t.get("x_first", False)
    if not isinstance(x_first, bool):
        raise ReadError(f"model file target's 'x_first' must be true or false; got "
                        f"{x_first!r}: the file is damaged.")
    return Target(yd, xd, y, x, coords, crs_wkt, x_first)


def _close(a, b) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(float(np.abs(a).max(initial=0)), float(np.abs(b).max(initial=0)), 1.0)
    return bool(np.all(np.abs(a - b) <= _RTOL * scale))


def check_lattice_grid(est: Any, ty: np.ndarray, tx: np.ndarray, where: str) -> None:
    """Refuse a lattice model whose lattice (shape, step, origin; the cell axes of a nearly
    regular raster) does not match the grid (ty, tx) (model coordinates) it was fitted on."""
    m = int(est.margin)
    if len(ty) < 2 or len(tx) < 2:
        raise ReadError(f"model file {where}: a lattice model's grid has at least 2×2 cells.")
    axes = getattr(est, "cell_axes_", None)
    if axes is not None:  # nearly regular: its cells must be the grid's own coordinates
        if tuple(est.shape_) != (len(ty) + 2 * m, len(tx) + 2 * m) or not all(
                _close(a[m:a.size - m], t) for a, t in zip(axes, (ty, tx), strict=True)):
            raise ReadError(f"model file {where}: the lattice's cell axes do not match the "
                            "stored grid; the file was changed.")
        return
    step = (ty[1] - ty[0], tx[1] - tx[0])
    want = {"shape": (len(ty) + 2 * m, len(tx) + 2 * m), "step": step,
            "origin": (ty[0] - m * step[0], tx[0] - m * step[1]),
            "unit": abs(step[0]), "h": (1.0, abs(step[1]) / abs(step[0]))}
    got = {"shape": tuple(est.shape_), "step": est.step_, "origin": est.origin_,
           "unit": est.unit_, "h": est.h_}
    for name, value in want.items():
        if (got[name] != value) if name == "shape" else not _close(got[name], value):
            raise ReadError(f"model file {where}: the lattice {name} {got[name]} does not match "
                            f"the stored grid (expected {value}); the file was changed.")


def check_series_grid(axes: list[np.ndarray], ty: np.ndarray, tx: np.ndarray,
                      where: str) -> None:
    """Refuse a space-time model whose fitted stack's cell axes are not the grid (ty, tx)
    (model coordinates) it was fitted on."""
    if not all(a.shape == t.shape and _close(a, t) for a, t in zip(axes, (ty, tx), strict=True)):
        raise ReadError(f"model file {where}: the space-time model's cells do not match the "
                        "stored grid; the file was changed.")


def check_window(est: Any, ty: np.ndarray, tx: np.ndarray, where: str) -> None:
    """Refuse a Fourier-feature model whose window does not cover the grid (ty, tx) (model
    coordinates) it was fitted on."""
    ff, sc = est.features_, est.scaler_
    if ff.n_dims != 2:
        return
    lo = (np.array([ty.min(), tx.min()]) - sc.x_mean) / sc.x_scale
    hi = (np.array([ty.max(), tx.max()]) - sc.x_mean) / sc.x_scale
    half = ff.width / 2 * (1 + 1e-9)
    if np.any(lo < ff.center - half) or np.any(hi > ff.center + half):
        raise ReadError(f"model file {where}: the stored grid lies outside the features' "
                        "window, where the model was fitted; the file was changed.")


def check_bookkeeping(n_obs: Any, times: Any, n_slices: int) -> None:
    """``n_observed`` (non-negative integers) and ``fit_time_s`` (numbers), one per slice."""
    if len(n_obs) != n_slices or len(times) != n_slices:
        raise ReadError("model file metadata: n_observed / fit_time_s do not match the "
                        "number of slices.")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in n_obs):
        raise ReadError(f"model file metadata: 'n_observed' must be counts of cells; got "
                        f"{n_obs!r:.60}.")
    if not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in times):
        raise ReadError(f"model file metadata: 'fit_time_s' must be numbers; got "
                        f"{times!r:.60}.")
