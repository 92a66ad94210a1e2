"""The registry of model families: the one place where a model's name is looked up.

The front end, persistence, cross-validation, placement and the command line know a model
only by its family, an :class:`~geogp.families.generic.Family` (one object per family, in
:mod:`geogp.models.afs.family`, ``lattice``, ``wavelet``, ``exact``, ``svgp``): they ask it to
build, fit, predict, sample, describe, score, save and load. This module maps names to
families (:func:`family`; aliases, :data:`ALIASES`, to the names they stand for), models to
their family (:func:`family_of`) and resolves ``model="auto"`` (:func:`resolve_model`). A
family's module, and its model's, are imported on first use, so that ``import geogp`` and
``geogp --help`` stay light.

Models (``"auto"``, the front end's default: :data:`AUTO_RULE`, :func:`resolve_model`):
    ``"afs"``: :class:`~geogp.models.afs.AFSRegressor`; regular rasters take its grid path,
    irregular coordinates and scattered points its point path.
    ``"nonstationary"`` (alias ``"wavelet"``): the lattice model with a range and sd that
    vary in space on a multiresolution basis (``varying=True``), the toolkit's model for
    fields whose roughness varies.
    ``"wavelet_basis"``: :class:`~geogp.models.wavelet.WaveletRegressor`, the thesis's
    wavelet-basis covariance (``"wavelet"`` until the name went to the non-stationary model).
    ``"exact"``: :class:`~geogp.models.exact.ExactGP`, for small data (≤ 5,000 points).
    ``"lattice"``: :class:`~geogp.models.lattice.LatticeRegressor`, an SPDE/GMRF on the cells
    of a regular raster plus large-scale Fourier features; rasters only.
    ``"svgp"``: :class:`~geogp.models.svgp.SVGPRegressor`, chosen by a non-Gaussian
    ``likelihood=``, not by name.
    ``"spacetime"``: :class:`~geogp.models.spacetime.SpaceTimeRegressor`, one model for a
    stack of dates on a regular raster (persistent field, AR(1) anomalies, dates' offsets).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from geogp.core.grid_checks import NEARLY_REGULAR_TOLERANCE
from geogp.exceptions import InputError, MemoryEstimateError

if TYPE_CHECKING:  # annotations only
    import numpy as np
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel
    from geogp.families.generic import Family
    from geogp.models.base import Prediction

__all__ = ["AUTO", "MODELS", "ALIASES", "FALLBACK", "EXACT_AUTO_POINTS", "POINTS_MODEL",
           "SERIES_MODEL", "AUTO_RULE", "GRID_MODEL", "GAUSSIAN", "SVGP_FEATURES", "family",
           "family_of", "is_model", "canonical", "alias_words", "savable_models", "resolve_model",
           "make_estimator", "fit_grid", "fit_points", "predict_grid", "predict_points",
           "sample_grid", "describe"]

AUTO = "auto"
# what GeoRegressor(model=...) accepts, besides "auto" and the ALIASES
MODELS = ("afs", "wavelet_basis", "exact", "lattice", "nonstationary", "spacetime")
# another name → the model it stands for: "wavelet" is the toolkit's model for fields whose
# roughness varies (issue #45), which is the lattice model with varying range and sd
ALIASES = {"wavelet": "nonstationary"}
FALLBACK = "afs"  # "auto" for points, irregular rasters, or what the lattice cannot hold
GRID_MODEL = "lattice"  # "auto" for a regular raster within the lattice model's memory limit
# scattered points up to this many get the exact GP under "auto": at 2,000 points its fit
# took as long as AFS's and scored a lower RMSE (benchmarks/bench_points_model.py)
EXACT_AUTO_POINTS = 2000
POINTS_MODEL = "exact"  # "auto" for up to EXACT_AUTO_POINTS scattered points
SERIES_MODEL = "spacetime"  # "auto" for a stack of dates on a regular raster (a time dimension)
# what "auto" stands for, in words, for --help and the docs (resolve_model is the rule)
_TOLERANCE_WORDS = f"{100 * NEARLY_REGULAR_TOLERANCE:.0f} %"
AUTO_RULE = (f"{SERIES_MODEL} on stacks of dates (a time dimension) on a regular raster within "
             f"its memory limit, "
             f"{GRID_MODEL} on regular 2-D rasters (also nearly regular ones, whose steps are "
             f"within {_TOLERANCE_WORDS} of their mean; on posterior tiles where the whole raster "
             f"passes the memory limit), {POINTS_MODEL} for up to {EXACT_AUTO_POINTS:,} "
             f"scattered points, {FALLBACK} otherwise (more points, irregular rasters, "
             f"{FALLBACK} options)")
GAUSSIAN = "gaussian"  # GeoRegressor(likelihood=...): any other likelihood fits an "svgp"
SVGP_FEATURES = "afs"  # the model whose features a non-Gaussian likelihood's SVGP uses
# name → (module of the family, module and class of its model, or a tuple of its classes)
_REGISTRY = {
    "afs": ("geogp.models.afs.family", "geogp.models.afs", "AFSRegressor"),
    "lattice": ("geogp.models.lattice.family", "geogp.models.lattice", "LatticeRegressor"),
    # after "lattice": a LatticeRegressor's family (family_of) is the lattice family, which
    # predicts, saves and places it the same way ("module:ATTRIBUTE" names a family object)
    "nonstationary": ("geogp.models.lattice.family:NONSTATIONARY", "geogp.models.lattice",
                      "LatticeRegressor"),
    "wavelet_basis": ("geogp.models.wavelet.family", "geogp.models.wavelet", "WaveletRegressor"),
    "exact": ("geogp.models.exact.family", "geogp.models.exact.regressor", "ExactGP"),
    "svgp": ("geogp.models.svgp.family", "geogp.models.svgp.regressor", "SVGPRegressor"),
    # the joint model, what the front end keeps per date of it, its posterior at a new date
    "spacetime": ("geogp.models.spacetime.family", "geogp.models.spacetime.regressor",
                  ("SpaceTimeRegressor", "SpaceTimeDate", "SpaceTimeForecast")),
}
_GENERIC = "geogp.families.generic"


def canonical(name: str) -> str:
    """The registered name that ``name`` stands for (itself unless it is one of
    :data:`ALIASES`)."""
    return ALIASES.get(name, name) if isinstance(name, str) else name


def alias_words(name: str) -> str:
    """What the alias ``name`` stands for, in words ("" for a registered name)."""
    if name not in ALIASES:
        return ""
    target = ALIASES[name]
    return f"model={name!r} is an alias of model={target!r}: {_MEANING.get(target, target)}"


# what an alias's model is, for model_reason_ and --help
_MEANING = {"nonstationary": "the lattice model with a range and sd that vary in space on a "
                             "multiresolution basis"}


def is_model(name: str) -> bool:
    """Whether ``name`` is a registered model family (``"svgp"`` included) or an alias of one."""
    return isinstance(name, str) and canonical(name) in _REGISTRY


def family(name: str) -> Family:
    """The :class:`~geogp.families.generic.Family` of the model called ``name`` (or of the
    model an alias stands for)."""
    if not is_model(name):
        raise InputError(f"model must be one of {list(MODELS)} or an alias "
                         f"({_alias_list()}); got {name!r}.")
    module, model_module, cls = _REGISTRY[canonical(name)]
    module, _, attribute = module.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute or "FAMILY")
    except (ImportError, AttributeError) as err:
        raise InputError(
            f"model={name!r} needs {model_module}.{_classes(cls)[0]}, which is not available "
            f"in this installation ({err}). Use model='afs'."
        ) from err


def family_of(est: Any) -> Family:
    """The family of the model object ``est`` (subclasses included): the first registered
    family whose model class ``est`` is an instance of. Only model modules already imported
    are looked at (``est``'s class is in one of them). Other objects get the generic family
    (fitted on points, predicted by ``est.predict``)."""
    for name, (_, model_module, cls) in _REGISTRY.items():
        module = sys.modules.get(model_module)
        if module is not None and isinstance(
                est, tuple(getattr(module, c) for c in _classes(cls) if hasattr(module, c))):
            return family(name)
    return importlib.import_module(_GENERIC).FAMILY


def _alias_list() -> str:
    return ", ".join(f"{a!r} for {t!r}" for a, t in ALIASES.items())


def _classes(cls: str | Sequence[str]) -> tuple[str, ...]:
    return (cls,) if isinstance(cls, str) else tuple(cls)


def savable_models() -> tuple:
    """Names of the families whose fitted models can be saved."""
    return tuple(name for name in _REGISTRY if family(name).savable)


def make_estimator(model: str = FALLBACK, kernel: str | Kernel | None = None,
                   n_features: int | str | None = None,
                   options: dict | None = None,
                   progress: Callable[[int, float], object] | None = None) -> Any:
    """An unfitted model of the family ``model`` with the front end's defaults
    (:meth:`~geogp.families.generic.Family.make`)."""
    return family(model).make(options, kernel=kernel, n_features=n_features, progress=progress)


def resolve_model(model: str, *, raster_shape: tuple[int, int] | None = None, regular: bool = True,
                  afs_only: bool | str = False, options: dict | None = None,
                  n_points: int | None = None,
                  spacing: tuple[float, float] | None = None,
                  n_dates: int | None = None, covariates: bool = False) -> tuple[str, str]:
    """The model ``model="auto"`` (the front end's default) stands for, and why.

    ``"lattice"`` (SPDE/GMRF on the cells plus large-scale Fourier features) for regular 2-D
    rasters whose memory estimate fits its limit (large rasters get a posterior on tiles, so
    the estimate grows with the tile, not the raster): on gap-shaped folds of a real
    satellite raster it beat the AFS default in accuracy, calibration and time (docs/results.md
    and ``benchmarks/``). ``"afs"`` otherwise: scattered points, irregular coordinates, rasters
    whose per-cell arrays alone pass the limit, and whenever ``afs_only`` (AFS options such as
    ``kernel=``, ``n_features=`` or shared hyperparameters were asked for; a string names
    them in the reason). Scattered points
    (``n_points`` of them) get the exact GP up to :data:`EXACT_AUTO_POINTS`, where it is as
    fast as AFS and more accurate (``benchmarks/bench_points_model.py``), AFS beyond. Any
    other name is returned unchanged.

    A raster that is not ``regular`` but whose ``spacing`` (per axis, the largest relative
    deviation of a step from the mean step: :func:`~geogp.core.grid_checks.spacing_variation`) is
    within :data:`~geogp.core.grid_checks.NEARLY_REGULAR_TOLERANCE` is nearly regular (Mercator-like
    or Gaussian latitudes): it gets the lattice model too, fitted on its cells with the mean
    step, and the reason says by how much the steps vary.

    A stack of ``n_dates`` ≥ 2 dates (a time dimension) on a regular raster gets the
    space-time model (:data:`SERIES_MODEL`), fitted jointly over the dates, when its memory
    estimate fits the limit, the options are its own and no ``covariates`` are given: on the
    MODIS NDVI stack of the R
    package gapfill's study its RMSE was 11–32 % below fitting each date alone
    (``benchmarks/bench_spacetime.py``). Otherwise each date is fitted alone, as above, and
    the reason says why.

    An alias (:data:`ALIASES`) gives the model it stands for, and the reason says so.
    """
    if model in ALIASES:
        return canonical(model), f"requested ({alias_words(model)})"
    if model != AUTO:
        return model, "requested"
    if raster_shape is None:
        small = n_points is not None and n_points <= EXACT_AUTO_POINTS
        if small and not afs_only:
            return POINTS_MODEL, f"{n_points} scattered points (≤ {EXACT_AUTO_POINTS:,})"
        return FALLBACK, f"scattered points; {_afs_options(afs_only)}" if small else (
            "scattered points")
    if afs_only:
        return FALLBACK, _afs_options(afs_only)
    if len(raster_shape) != 2:
        return FALLBACK, "irregular raster"
    per_date = "; one date along time: the 2-D model" if n_dates == 1 else ""
    if n_dates is not None and n_dates >= 2:
        joint, why = _series_model(tuple(raster_shape), regular, options, n_dates, covariates)
        if joint:
            return SERIES_MODEL, why
        per_date = f"; each of the {n_dates} dates alone: {why}"
    model, why = _single_raster_model(raster_shape, regular, options, spacing)
    return model, why + per_date


def _afs_options(afs_only: bool | str) -> str:
    """The reason's words for AFS options, named when given as a string."""
    return f"AFS options given ({afs_only})" if isinstance(afs_only, str) else "AFS options given"


def _series_model(raster_shape: tuple[int, ...], regular: bool, options: dict | None,
                  n_dates: int, covariates: bool) -> tuple[bool, str]:
    """(whether the space-time model takes this stack, the reason)."""
    if not regular:
        return False, f"the {SERIES_MODEL} model needs a regular raster"
    if covariates:
        return False, f"covariates given, which the {SERIES_MODEL} model does not take"
    series = family(SERIES_MODEL)
    other = sorted(set(options or {}) - series.option_names())
    if other:
        return False, f"options the {SERIES_MODEL} model does not take ({', '.join(other)})"
    try:
        est = series.make(dict(options or {}))
        series.check_memory(est, (n_dates, *raster_shape))
    except MemoryEstimateError:
        return False, f"the stack passes the {SERIES_MODEL} model's memory limit"
    return True, f"a stack of {n_dates} dates on a regular raster, fitted jointly"


def _single_raster_model(raster_shape, regular: bool, options: dict | None,
                         spacing: tuple[float, float] | None) -> tuple[str, str]:
    """What "auto" stands for on one 2-D raster, and why."""
    if not regular:
        if spacing is None:
            return FALLBACK, "irregular raster"
        if max(spacing) > NEARLY_REGULAR_TOLERANCE:
            return FALLBACK, (f"irregular raster: {_spacing_words(spacing)}, beyond the "
                              f"{_TOLERANCE_WORDS} the {GRID_MODEL} model takes")
    try:
        grid = family(GRID_MODEL)
        accepted = grid.option_names()
        est = grid.make({k: v for k, v in (options or {}).items() if k in accepted})
        grid.check_memory(est, tuple(raster_shape))
    except MemoryEstimateError:
        return FALLBACK, "raster too large for the lattice model's memory limit, even in tiles"
    except InputError:
        if set(options or {}) - family(FALLBACK).option_names():
            raise  # a lattice-only option is wrong: say so, rather than fall back to AFS
        return FALLBACK, "options not accepted by the lattice model"
    if not regular:
        return GRID_MODEL, (f"nearly regular raster: {_spacing_words(spacing)}, within the "
                            f"{_TOLERANCE_WORDS} the {GRID_MODEL} model takes; "
                            "fitted on its cells with the mean step, so distances are off by "
                            "at most as much")
    return GRID_MODEL, "regular raster"


def _spacing_words(spacing: tuple[float, float] | None) -> str:
    """'its steps differ from their mean by up to 3.8 % along y' (axes with any variation)."""
    parts = [f"{100 * v:.3g} % along {name}"
             for name, v in zip("yx", spacing or (0.0, 0.0), strict=True) if v]
    return "its steps differ from their mean by up to " + " and ".join(parts)


# the contract on a bare model object (tests, benchmarks): its family does the work
def fit_grid(est: Any, axes: list, values: ArrayLike, regular: bool,
             covariates: np.ndarray | None = None) -> Any:
    """:meth:`~geogp.families.generic.Family.fit_grid` of ``est``'s family."""
    return family_of(est).fit_grid(est, axes, values, regular, covariates)


def fit_points(est: Any, X: np.ndarray, y: np.ndarray, target_axes: list[np.ndarray] | None = None,
               units: str = "coordinate units") -> Any:
    """:meth:`~geogp.families.generic.Family.fit_points` of ``est``'s family."""
    return family_of(est).fit_points(est, X, y, target_axes, units)


def predict_grid(est: Any, axes: list, outside: str = "raise", block_cells: int = 2**20,
                 on_block: Callable[[int], object] | None = None) -> Prediction:
    """:meth:`~geogp.families.generic.Family.predict_grid` of ``est``'s family."""
    return family_of(est).predict_grid(est, axes, outside, block_cells, on_block)


def predict_points(est: Any, X: np.ndarray, outside: str = "raise") -> Prediction:
    """:meth:`~geogp.families.generic.Family.predict_points` of ``est``'s family."""
    return family_of(est).predict_points(est, X, outside)


def sample_grid(est: Any, axes: list, n: int, seed: int | np.random.SeedSequence | None = None,
                observed: bool = False) -> np.ndarray:
    """:meth:`~geogp.families.generic.Family.sample_grid` of ``est``'s family."""
    return family_of(est).sample_grid(est, axes, n, seed, observed)


def describe(est: Any) -> dict:
    """:meth:`~geogp.families.generic.Family.describe` of ``est``'s family."""
    return family_of(est).describe(est)
