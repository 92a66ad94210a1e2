"""The numerical models behind the geodata front end, one small contract for all of them.

The front end (:mod:`geogp.api`) speaks xarray; the models speak numpy. This module is the glue,
in numpy only: build an estimator by name, fit it on a raster or on points so that its window
covers the prediction grid, predict in row blocks, and describe the fitted hyperparameters.

Models (``"auto"``, the front end's default, picks ``"lattice"`` or ``"afs"``:
:func:`resolve_model`):
    ``"afs"``: :class:`~geogp.models.afs.AFSRegressor`. Regular rasters take the grid
    path (``fit_grid``: statistics by separable transforms, O(M) per step on complete grids);
    irregular coordinates and scattered points take ``fit``.
    ``"wavelet"``: :class:`~geogp.models.wavelet.WaveletRegressor`, when that module is
    installed; rasters are fitted on their observed cells as scattered points.
    ``"exact"``: :class:`~geogp.models.exact.ExactGP`, for small data (≤ 5,000 points).
    ``"lattice"``: :class:`~geogp.models.lattice.LatticeRegressor`, an SPDE/GMRF on the cells
    of a regular raster (sparse Cholesky) plus large-scale Fourier features (200 from the
    front end); rasters only.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np

from geogp.exceptions import GeographicCoordinatesWarning, InputError
from geogp.extrapolation import record_data_box, warn_if_far
from geogp.models.base import Prediction

__all__ = ["MODELS", "make_estimator", "resolve_model", "fit_grid", "fit_points",
           "predict_grid", "predict_points", "describe", "EXACT_MAX_POINTS"]

MODELS = ("afs", "wavelet", "exact", "lattice")
AUTO = "auto"
EXACT_MAX_POINTS = 5000
DEFAULT_KERNEL, DEFAULT_FEATURES, DEFAULT_MEAN = "matern12", "auto", "linear"  # see make_estimator
DEFAULT_LARGE_SCALE = "auto"  # model="lattice" from the front end: 64 large-scale features
# and the mid-scale level on rasters with ≥ 128 cells a side (LatticeRegressor(mid_scale="auto"))
DEFAULT_MID_SCALE = "auto"
_CLASSES = {
    "afs": ("geogp.models.afs", "AFSRegressor"),
    "wavelet": ("geogp.models.wavelet", "WaveletRegressor"),
    "exact": ("geogp.models.exact", "ExactGP"),
    "lattice": ("geogp.models.lattice", "LatticeRegressor"),
}


def _estimator_class(model: str):
    if model not in MODELS:
        raise InputError(f"model must be one of {list(MODELS)}; got {model!r}.")
    module, name = _CLASSES[model]
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as err:
        raise InputError(
            f"model={model!r} needs {module}.{name}, which is not available in this "
            f"installation ({err}). Use model='afs'."
        ) from err


def make_estimator(model: str = "afs", kernel=None, n_features=None, options: dict | None = None,
                   progress=None):
    """An unfitted estimator of the named model.

    Args:
        model: one of :data:`MODELS`.
        kernel: kernel name (``afs``, ``exact``); default ``"matern12"``.
        n_features: number of Fourier features M (``afs`` only); default ``"auto"``:
            N_obs/8 clipped to [2,000, 10,000] (:func:`geogp.models.afs.auto_features`).

    The front end's AFS defaults (Matérn-1/2, linear trend, M from the data size) were chosen by
    cross-validation on a real satellite raster (``benchmarks/heaton_cv.py``, issue #9): among
    the kernels and trends at M = 2,000 this one had the best block-fold CRPS and was within 1%
    of the best random-fold RMSE; at M = 10,000 (matrix-free solver) it beats 50-nearest-
    neighbour kriging on both folds (RMSE 0.93 vs 1.08 random, 1.64 vs 1.84 block) in 48 s.
        options: further keyword arguments of the estimator (validated against its signature).
        progress: ``progress(iteration, objective)`` callback (``afs`` only).
    """
    cls = _estimator_class(model)
    params = dict(options or {})
    accepted = _option_names(model)
    if kernel is not None:
        params["kernel"] = kernel
    elif "kernel" in accepted and model != "wavelet":
        params.setdefault("kernel", DEFAULT_KERNEL)
    if n_features is not None:
        params["n_features"] = n_features
    if model == "afs":
        params.setdefault("n_features", DEFAULT_FEATURES)
        params.setdefault("mean", DEFAULT_MEAN)
    if model == "lattice":  # the multi-resolution model: local GMRF + large-scale features
        params.setdefault("large_scale", DEFAULT_LARGE_SCALE)
        params.setdefault("mid_scale", DEFAULT_MID_SCALE)
    if progress is not None and "progress" in accepted:
        params["progress"] = progress
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise InputError(
            f"unknown option(s) {unknown} for model={model!r}; it accepts {sorted(accepted)}."
        )
    return cls(**params)


def resolve_model(model: str, *, raster_shape=None, regular: bool = True,
                  afs_only: bool = False, options: dict | None = None) -> tuple[str, str]:
    """The model ``model="auto"`` (the front end's default) stands for, and why.

    ``"lattice"`` (SPDE/GMRF on the cells plus large-scale Fourier features) for regular 2-D
    rasters whose memory estimate fits its limit (large rasters get a posterior on tiles, so
    the estimate grows with the tile, not the raster): on gap-shaped folds of a real
    satellite raster it beat the AFS default in accuracy, calibration and time (see the README
    and ``benchmarks/``). ``"afs"`` otherwise: scattered points, irregular coordinates, rasters
    whose per-cell arrays alone pass the limit, and whenever
    ``afs_only`` (AFS options such as ``kernel=``, ``n_features=`` or shared hyperparameters
    were asked for). Any other name is returned unchanged.
    """
    if model != AUTO:
        return model, "requested"
    if raster_shape is None:
        return "afs", "scattered points"
    if afs_only:
        return "afs", "AFS options given"
    if len(raster_shape) != 2 or not regular:
        return "afs", "irregular raster"
    from geogp.exceptions import MemoryEstimateError

    try:
        est = make_estimator("lattice", options=_lattice_options(options))
        est._check_args()
        est._memory(tuple(raster_shape))
    except MemoryEstimateError:
        return "afs", "raster too large for the lattice model's memory limit, even in tiles"
    except InputError:
        if set(options or {}) - _option_names("afs"):
            raise  # a lattice-only option is wrong: say so, rather than fall back to AFS
        return "afs", "options not accepted by the lattice model"
    return "lattice", "regular raster"


def lattice_option_names() -> set:
    """Keyword arguments the lattice model accepts."""
    return _option_names("lattice")


def _option_names(model: str) -> set:
    """Keyword arguments the estimator of ``model`` accepts."""
    return set(inspect.signature(_estimator_class(model).__init__).parameters) - {"self"}


def _lattice_options(options: dict | None) -> dict:
    accepted = lattice_option_names()
    return {k: v for k, v in (options or {}).items() if k in accepted}


_KINDS = {"AFSRegressor": "afs", "WaveletRegressor": "wavelet", "ExactGP": "exact",
          "LatticeRegressor": "lattice"}


def _kind(est) -> str:
    """The model family of ``est``, subclasses included (a subclass of WaveletRegressor is
    routed as a wavelet model; by name, so that the model modules load lazily)."""
    for cls in type(est).__mro__:
        if cls.__name__ in _KINDS:
            return _KINDS[cls.__name__]
    return "other"


def _cover_margin(est, lo, hi, t_lo, t_hi, scale=None) -> None:
    """Widen the estimator's window so that it covers the target box [t_lo, t_hi] (model units).

    AFS: window width = extent·window_factor + 2·margin·extent, centred on the data's box.
    Wavelet: window = data box ± margin in standardised units (``scale`` = x standard deviations).
    """
    if t_lo is None:
        return
    extent = np.maximum(hi - lo, 1e-300)
    if _kind(est) == "afs":
        half = np.maximum((lo + hi) / 2 - t_lo, t_hi - (lo + hi) / 2)
        need = (2 * half * (1 + 1e-9) - extent * est.window_factor) / (2 * extent)
        est.margin = float(max(est.margin, need.max(), 0.0))
    elif _kind(est) == "wavelet":
        need = np.maximum(lo - t_lo, t_hi - hi) / scale
        est.margin = float(max(est.margin, need.max() * (1 + 1e-9) + 1e-12, 0.0))


def fit_points(est, X: np.ndarray, y: np.ndarray, target_axes=None,
               units: str = "coordinate units"):
    """Fit on scattered points X (N, 2) (model coordinates), y (N,); window covers target_axes.
    The data's box (and ``units``, of model coordinates) is kept for :func:`warn_if_far`."""
    if _kind(est) == "exact" and X.shape[0] > EXACT_MAX_POINTS:
        raise InputError(
            f"model='exact' costs O(N³) and is limited to {EXACT_MAX_POINTS} points; got "
            f"{X.shape[0]}. Use model='afs'."
        )
    _cover_target(est, X, target_axes)
    with warnings.catch_warnings():  # model coordinates: longitude already scaled by cos φ̄
        warnings.simplefilter("ignore", GeographicCoordinatesWarning)
        est.fit(X, y)
    record_data_box(est, X[np.isfinite(np.asarray(y, dtype=np.float64))], units)
    return est


def _cover_target(est, X: np.ndarray, target_axes) -> None:
    """Widen the window of a model fitted on X (N, 2) to the target grid ``target_axes``."""
    if target_axes is None:
        return
    t_lo = np.array([min(a.min(), b) for a, b in zip(target_axes, X.min(axis=0))])
    t_hi = np.array([max(a.max(), b) for a, b in zip(target_axes, X.max(axis=0))])
    _cover_margin(est, X.min(axis=0), X.max(axis=0), t_lo, t_hi, X.std(axis=0))


def fit_grid(est, axes: list, values, regular: bool, covariates=None):
    """Fit on one raster slice: ``values`` (N_y, N_x) numpy or dask, NaN = missing.

    ``axes`` are the model coordinates of the rows and columns. Regular rasters go to the AFS,
    lattice and wavelet grid paths; otherwise (or for other models) the observed cells are
    fitted as scattered points. Both keep a window that covers the whole raster.
    ``covariates`` (k, N_y, N_x): regressors of the lattice model (refused by the others).
    """
    if covariates is not None and _kind(est) != "lattice":
        raise InputError(f"covariates are supported by the lattice model only; got "
                         f"model={_kind(est)!r}.")
    if _kind(est) == "afs" and regular:
        return est.fit_grid(axes, values)
    if _kind(est) == "lattice":  # SPDE/GMRF on the raster's own cells (regular rasters only)
        return est.fit_grid(axes, values, covariates)
    v = np.asarray(values, dtype=np.float64)
    if np.isinf(v).any():
        raise InputError("the raster contains infinite values; replace them by NaN (missing) "
                         "or finite numbers.")
    obs = np.isfinite(v)
    iy, ix = np.nonzero(obs)
    X = np.stack([axes[0][iy], axes[1][ix]], axis=1)
    if _kind(est) == "wavelet" and regular and obs.any():  # per-axis statistics
        _cover_target(est, X, axes)
        return est.fit_grid(axes, v)
    return fit_points(est, X, v[obs], axes)


def predict_grid(est, axes: list, outside: str = "raise", block_cells: int = 2**20,
                 on_block=None) -> Prediction:
    """Predict on the tensor grid ``axes`` (model coordinates) in blocks of rows.

    Returns a :class:`Prediction` of arrays (N_y, N_x). ``on_block(n_rows)`` is called after
    each block (progress). Cost per block: AFS O(M² + cells·P); others as their ``predict``.
    """
    warn_if_far(est, axes=axes)
    ny, nx = len(axes[0]), len(axes[1])
    step = max(1, int(block_cells // max(nx, 1)))
    parts = []
    for start in range(0, ny, step):
        rows = axes[0][start:start + step]
        if _kind(est) in ("afs", "lattice"):
            p = est.predict_grid([rows, axes[1]], outside=outside)
        elif _kind(est) == "wavelet" and est.posterior_.grid_ready():
            p = est.predict_grid(rows, axes[1])  # separable, per axis (raises outside)
        else:
            Y, X = np.meshgrid(rows, axes[1], indexing="ij")
            p = _predict_points(est, np.stack([Y.ravel(), X.ravel()], axis=1), outside)
            p = Prediction(*(np.reshape(a, Y.shape) for a in p))
        parts.append(p)
        if on_block is not None:
            on_block(len(rows))
    return Prediction(*(np.concatenate([getattr(p, f) for p in parts], axis=0)
                        for f in Prediction._fields))


def sample_grid(est, axes: list, n: int, seed=None, observed: bool = False) -> np.ndarray:
    """``n`` posterior samples on the tensor grid ``axes`` (model coordinates), (n, N_y, N_x)
    in data units: AFS by one grid transform per sample, lattice by its sparse sampler."""
    kind = _kind(est)
    if kind in ("afs", "wavelet"):
        return est.sample_grid(axes, n, seed=seed, observed=observed)
    if kind == "lattice":
        Y, X = np.meshgrid(axes[0], axes[1], indexing="ij")
        pts = np.stack([Y.ravel(), X.ravel()], axis=1)
        return est.sample(pts, n, seed=seed, observed=observed).reshape(n, *Y.shape)
    raise InputError(f"posterior samples are available for model='afs', 'lattice' and "
                     f"'wavelet'; this model is {kind!r}.")


def predict_points(est, X: np.ndarray, outside: str = "raise") -> Prediction:
    """Predict at points X (N*, 2) in model coordinates (warns far outside the data)."""
    warn_if_far(est, points=X)
    return _predict_points(est, X, outside)


def _predict_points(est, X: np.ndarray, outside: str = "raise") -> Prediction:
    if _kind(est) == "afs":
        return est.predict(X, outside=outside)
    if _kind(est) == "exact":
        parts = [est.predict(X[i:i + 2048]) for i in range(0, X.shape[0], 2048)]
        return Prediction(*(np.concatenate([getattr(p, f) for p in parts])
                            for f in Prediction._fields))
    return est.predict(X)


def describe(est) -> dict:
    """Fitted hyperparameters on the data's scale.

    Returns a dict: ``lengthscale`` ((P, 2) array in model units, rows = kernel parts, columns
    = (y, x); None for wavelet models), ``signal_sd`` (wavelet models: at the window's
    centre), ``noise_sd``, ``n_features``,
    ``n_iter``, ``converged``, ``objective``.
    """
    sc = est.scaler_
    rep = getattr(est, "report_", None)
    out = {"lengthscale": None, "signal_sd": np.nan, "noise_sd": np.nan, "n_features": None,
           "n_iter": getattr(rep, "n_iter", None), "converged": getattr(rep, "converged", None),
           "objective": getattr(rep, "objective", None)}
    kind = _kind(est)
    if kind in ("afs", "exact"):
        parts = getattr(est.kernel_, "parts", (est.kernel_,))
        out["lengthscale"] = np.stack(
            [np.broadcast_to(np.asarray(p.lengthscale), sc.x_scale.shape) * sc.x_scale
             for p in parts])
        out["signal_sd"] = float(np.sqrt(float(est.kernel_.variance_at_zero)) * sc.y_scale)
        out["noise_sd"] = float(np.sqrt(est.noise_) * sc.y_scale)
        if kind == "afs":
            out["n_features"] = est.features_.n_features
    elif kind == "lattice":
        out.update(est.describe())
    elif kind == "wavelet":  # k(x, x) varies in space: the value at the window's centre
        centre = np.array([[0.5 * (b.lo + b.hi) for b in est.basis_.dims]])
        x0 = sc.x_mean + sc.x_scale * centre
        out["signal_sd"] = float(np.sqrt(est.prior_variance(x0)[0]))
        out["noise_sd"] = float(np.sqrt(float(est.params_["noise"])) * sc.y_scale)
        out["n_features"] = int(est.n_features_)
    return out
