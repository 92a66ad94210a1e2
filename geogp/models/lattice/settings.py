"""The settings of :class:`~geogp.models.lattice.LatticeRegressor`: their checks, and what
``"auto"`` resolves to on a given raster (the mid-scale level's factor, the number of
large-scale features)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geogp.core.trend import monomial_powers
from geogp.exceptions import InputError
from geogp.models.lattice.gmrf import ALPHAS, BACKENDS, KERNELS_LARGE

if TYPE_CHECKING:  # annotations only
    from geogp.models.lattice.regressor import LatticeRegressor

__all__ = ["MID_SCALE_AUTO", "MID_SCALE_MIN_CELLS", "LARGE_SCALE_AUTO", "LARGE_SCALE_ALONE",
           "check_settings", "mid_factor", "n_large"]

# mid_scale="auto": the coarsening factor, and the smallest raster side (cells) that gets the
# level. On the satellite raster (300×500) r = 12 learns a mid range of ≈ 100 cells between the
# local range (≈ 7) and the large-scale features (wavelengths ≥ 60); r = 4 scored the same at
# twice the cost. Below 128 cells a side the features already reach ~20-cell wavelengths.
MID_SCALE_AUTO = 12
MID_SCALE_MIN_CELLS = 128
# large_scale="auto": the number of large-scale Fourier features (cos/sin pairs of the lowest
# frequencies). Beside the mid-scale level 64: it scored the same as 200 on the satellite
# raster's gap folds and on a simulated 1200² raster against the oracle, with a third of the
# per-cell columns in the posterior's solves. Without the level (small rasters, or
# mid_scale=None) 200, whose shortest wavelengths (~20 cells below 128 a side) it replaces.
LARGE_SCALE_AUTO = 64
LARGE_SCALE_ALONE = 200


def mid_factor(mid_scale: int | str | None, sides: Sequence[int]) -> int | None:
    """The mid-scale level's coarsening factor on a raster with ``sides`` (cells; None: no
    level). ``"auto"``: :data:`MID_SCALE_AUTO` when both sides have at least
    :data:`MID_SCALE_MIN_CELLS` cells, else none."""
    if not isinstance(mid_scale, str):
        return None if mid_scale is None else int(mid_scale)
    return MID_SCALE_AUTO if min(sides) >= MID_SCALE_MIN_CELLS else None


def n_large(large_scale: int | str | None, mid_scale: int | str | None,
            sides: Sequence[int]) -> int:
    """The large-scale feature columns on a raster with ``sides``. ``"auto"``:
    :data:`LARGE_SCALE_AUTO` where the mid-scale level is requested there (a level that the
    fit drops keeps them), :data:`LARGE_SCALE_ALONE` where it is not."""
    if large_scale is None:
        return 0
    if large_scale != "auto":
        return 2 * (int(large_scale) // 2)
    return LARGE_SCALE_ALONE if mid_factor(mid_scale, sides) is None else LARGE_SCALE_AUTO


def check_settings(est: LatticeRegressor) -> None:
    """Raise :class:`~geogp.exceptions.InputError` naming every invalid setting of ``est``."""
    problems = []
    if est.alpha not in ALPHAS and est.alpha != "auto":
        problems.append(f"alpha must be one of {ALPHAS} or 'auto' (got {est.alpha!r})")
    if est.second_range not in (True, False):
        problems.append(f"second_range must be True or False (got {est.second_range!r})")
    elif est.second_range and est.alpha != 2:
        problems.append("second_range=True needs alpha=2")
    hole = getattr(est, "hole_effect", False)
    if hole not in (True, False, "auto"):
        problems.append(f"hole_effect must be True, False or 'auto' (got {hole!r})")
    elif hole is True and (est.alpha != 2 or est.second_range):
        problems.append("hole_effect=True needs alpha=2 without second_range")
    vy = getattr(est, "varying", None)
    if not (vy is None or isinstance(vy, bool) or vy == "auto" or (
            isinstance(vy, (int, np.integer)) and vy >= 1)):
        problems.append(f"varying must be None, False, True, 'auto' or a number of levels ≥ 1 "
                        f"(got {vy!r})")
    elif vy not in (None, False, "auto") and (est.alpha not in (2, "auto") or est.second_range
                                               or hole is True):
        problems.append("varying needs alpha=2 (or 'auto') without second_range or "
                        "hole_effect=True")
    if getattr(est, "robust", False) not in (True, False):
        problems.append(f"robust must be True or False (got {est.robust!r})")
    ms = est.mid_scale
    if not (ms is None or ms == "auto" or (isinstance(ms, (int, np.integer))
                                            and not isinstance(ms, bool) and ms >= 2)):
        problems.append(f"mid_scale must be None, 'auto' or an integer factor ≥ 2 (got "
                        f"{ms!r})")
    if not (isinstance(est.margin, (int, np.integer)) and est.margin >= 0):
        problems.append(f"margin must be an integer number of cells ≥ 0 (got {est.margin!r})")
    for name in ("range", "sd", "noise"):
        v = getattr(est, name)
        if v is not None and not (np.isfinite(v) and v > 0):
            problems.append(f"{name} must be a finite positive number or None (got {v!r})")
    if not (isinstance(est.maxiter, (int, np.integer)) and est.maxiter >= 1):
        problems.append(f"maxiter must be an integer ≥ 1 (got {est.maxiter!r})")
    if est.fit_cells is not None and not (
            isinstance(est.fit_cells, (int, np.integer)) and est.fit_cells >= 1):
        problems.append(f"fit_cells must be a positive integer or None (got {est.fit_cells!r})")
    if not (isinstance(est.tile, (int, np.integer)) and est.tile >= 2):
        problems.append(f"tile must be an integer ≥ 2 (got {est.tile!r})")
    if est.backend not in BACKENDS:
        problems.append(f"backend must be one of {BACKENDS} (got {est.backend!r})")
    ls = est.large_scale
    if not (ls is None or ls == "auto" or (isinstance(ls, (int, np.integer))
                                             and not isinstance(ls, bool) and ls >= 2)):
        problems.append(f"large_scale must be None, 'auto' or an integer ≥ 2 (got {ls!r})")
    if est.large_scale_kernel not in KERNELS_LARGE:
        problems.append(f"large_scale_kernel must be one of {KERNELS_LARGE} (got "
                        f"{est.large_scale_kernel!r})")
    if not (np.isfinite(est.large_scale_window) and est.large_scale_window >= 1):
        problems.append("large_scale_window must be a number ≥ 1 (got "
                        f"{est.large_scale_window!r})")
    for name in ("posterior_tile", "posterior_halo"):
        v = getattr(est, name)
        least = 0 if name == "posterior_halo" else 8
        if not (v == "auto" or (name == "posterior_tile" and v is None) or (
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= least)):
            problems.append(f"{name} must be 'auto'{', None' if least else ''} or an integer "
                            f"number of cells ≥ {least} (got {v!r})")
    if problems:
        raise InputError("invalid LatticeRegressor settings: " + "; ".join(problems) + ".")
    monomial_powers(est.mean, 2)  # raises for an unknown mean
