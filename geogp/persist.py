"""Save and load fitted geodata models as one ``.npz`` file, without pickle.

The file holds plain arrays and one JSON document (``__meta__``):

- per slice: the Fourier features (window, lattice, rows), the sufficient statistics
  (G, r, yᵀy, N), the fitted kernel and noise, the posterior (λ^{1/2}, weights, Q, chol), the
  standardiser and the optimisation report; for matrix-free models (large M) the FFT operator
  instead of G, and the posterior as vectors and samples
  (:class:`~geogp.models.collapsed_iterative.IterativePosterior`);
- the grid: dimension names, CRS (WKT), longitude scaling, target coordinates, the extra
  dimension's coordinates, attributes and name.

Loading rebuilds the estimators from these arrays, so predictions are reproduced bit for bit.
Only numeric, datetime and string arrays are stored; ``np.load(allow_pickle=False)`` reads them.
Models other than ``afs`` cannot be saved yet.
"""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import xarray as xr

from geogp import kernels as _kernels
from geogp.adapters import GridSpec
from geogp.exceptions import GeogpError, InputError, ReadError
from geogp.io import atomic_path
from geogp.outputs import Target

__all__ = ["save_model", "load_model", "FORMAT", "FORMAT_VERSION"]

FORMAT = "geogp-model"
FORMAT_VERSION = 1
_OPTIONAL_STATS = ("F", "HH", "Hy")  # mean-function statistics, when the model has one
# matrix-free models (solver="iterative"): GramOperator fields, IterativePosterior arrays
_OPERATOR_FIELDS = ("chat", "coef", "index", "diag", "low", "G_low")
_ITERATIVE_POSTERIOR_ARRAYS = ("weights", "diag_quad", "low", "quad_low", "sample_a", "sample_b")


def _init_names(cls) -> list:
    import inspect

    return [n for n in inspect.signature(cls.__init__).parameters
            if n not in ("self", "kernel", "progress")]


def _jsonable(value):
    """A JSON-safe copy of ``value`` or None when it has no faithful JSON form."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.tolist()
    if isinstance(value, (list, tuple)):
        items = [_jsonable(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value)) else items
    return None


def _clean(d: dict) -> dict:
    out = {}
    for k, v in (d or {}).items():
        j = _jsonable(v)
        if j is not None or v is None:
            out[str(k)] = j
    return out


def _storable(a) -> bool:
    return np.asarray(a).dtype.kind in "biufcMmU"


# --------------------------------------------------------------------------- saving
def _kernel_parts(kernel) -> list:
    parts = getattr(kernel, "parts", (kernel,))
    return [type(p).__name__ for p in parts]


def _save_afs(est, pre: str, arrays: dict) -> dict:
    ff, st, post, sc = est.features_, est.stats_, est.posterior_, est.scaler_
    arrays.update({
        f"{pre}features/center": ff.center, f"{pre}features/width": ff.width,
        f"{pre}features/rows": ff.rows, f"{pre}features/numerators": ff.numerators,
        f"{pre}features/kinds": ff.kinds,
        f"{pre}stats/r": np.asarray(st.r),
        f"{pre}stats/yy": np.asarray(st.yy), f"{pre}stats/n": np.asarray(st.n),
        f"{pre}scaler/x_mean": sc.x_mean, f"{pre}scaler/x_scale": sc.x_scale,
        f"{pre}report/history": np.asarray(est.report_.history, dtype=np.float64),
    })
    if st.matrix_free:  # the FFT operator and the vector-form posterior (no M × M array)
        for name in _OPERATOR_FIELDS:
            if getattr(st.G, name) is not None:
                arrays[f"{pre}stats/G/{name}"] = np.asarray(getattr(st.G, name))
        for name in _ITERATIVE_POSTERIOR_ARRAYS:
            if getattr(post, name) is not None:
                arrays[f"{pre}posterior/{name}"] = np.asarray(getattr(post, name))
    else:
        arrays.update({f"{pre}stats/G": np.asarray(st.G),
                       f"{pre}posterior/sqrt_lam": post.sqrt_lam,
                       f"{pre}posterior/weights": post.weights,
                       f"{pre}posterior/quad": post.quad, f"{pre}posterior/chol": post.chol})
    for name in _OPTIONAL_STATS:
        if getattr(st, name, None) is not None:
            arrays[f"{pre}stats/{name}"] = np.asarray(getattr(st, name))
    for name in ("beta_", "powers_"):
        if getattr(est, name, None) is not None:
            arrays[f"{pre}{name}"] = np.asarray(getattr(est, name))
    for i, p in enumerate(getattr(est.kernel_, "parts", (est.kernel_,))):
        arrays[f"{pre}kernel/{i}/lengthscale"] = np.asarray(p.lengthscale)
        arrays[f"{pre}kernel/{i}/variance"] = np.asarray(p.variance)
    rep = est.report_
    return {
        "init": {**_clean({k: getattr(est, k) for k in _init_names(type(est))}),
                 "kernel": est.kernel if isinstance(est.kernel, str) else None},
        "n_freq": list(ff.n_freq), "lattice": ff.lattice, "diagonal": bool(st.diagonal),
        "matrix_free": bool(st.matrix_free),
        "cg_iterations": (list(post.cg_iterations[:1]) + [list(post.cg_iterations[1])]
                          if st.matrix_free else None),
        "kernel_parts": _kernel_parts(est.kernel_), "noise": float(est.noise_),
        "posterior_noise": float(post.noise), "kvar0": float(post.kvar0),
        "y_mean": float(sc.y_mean), "y_scale": float(sc.y_scale),
        "report": {"objective": rep.objective, "n_iter": rep.n_iter, "n_eval": rep.n_eval,
                   "converged": rep.converged, "message": rep.message, "time_s": rep.time_s},
        "stats_time_s": float(getattr(est, "stats_time_s_", float("nan"))),
    }


def save_model(model, path, *, overwrite: bool = False) -> Path:
    """Write a fitted :class:`~geogp.api.GeoRegressor` to ``path`` (``.npz``), atomically."""
    if not hasattr(model, "estimators_"):
        raise InputError("the model is not fitted; call fit(...) before save().")
    if model.model != "afs":
        raise GeogpError(f"saving model={model.model!r} is not supported yet; only 'afs' models "
                         "can be saved.")
    arrays: dict = {}
    slices = [_save_afs(est, f"s{k}/", arrays) for k, est in enumerate(model.estimators_)]
    target = model.target_
    meta_target = None
    if target is not None:
        arrays["target/y"], arrays["target/x"] = target.y, target.x
        meta_target = {"y_dim": target.y_dim, "x_dim": target.x_dim, "crs_wkt": target.crs_wkt,
                       "y_attrs": _clean(getattr(target.coords.get(target.y_dim), "attrs", {})),
                       "x_attrs": _clean(getattr(target.coords.get(target.x_dim), "attrs", {}))}
    extra = {}
    for name, var in (model.extra_coords_ or {}).items():
        if _storable(var.values):
            arrays[f"extra/{name}"] = np.asarray(var.values)
            extra[name] = {"dims": list(var.dims), "attrs": _clean(var.attrs)}
    spec = model.spec_
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "params": {"model": model.model, "kernel": model.kernel if isinstance(model.kernel, str)
                   or model.kernel is None else None, "n_features": model.n_features,
                   "share_hyperparameters": bool(model.share_hyperparameters),
                   "nodata": _jsonable(model.nodata), "options": _clean(model.options or {})},
        "spec": {"y_dim": spec.y_dim, "x_dim": spec.x_dim, "crs_wkt": spec.crs_wkt,
                 "geographic": spec.geographic, "lon_scale": spec.lon_scale,
                 "assumed": spec.assumed},
        "target": meta_target, "extra_dim": model.extra_dim_, "extra_coords": extra,
        "attrs": _clean(model.attrs_), "name": _jsonable(model.name_),
        "n_observed": list(model.n_observed_), "fit_time_s": list(model.fit_time_s_),
        "slices": slices,
    }
    arrays["__meta__"] = np.array(json.dumps(meta))
    with atomic_path(path, overwrite) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    return Path(path)


# --------------------------------------------------------------------------- loading
def _load_afs(meta: dict, pre: str, z) -> object:
    from geogp.features.fourier import FourierFeatures
    from geogp.optimize import FitReport
    from geogp.models.afs import AFSRegressor
    from geogp.models.base import Standardizer
    from geogp.features.gram_operator import GramOperator
    from geogp.models.collapsed import Posterior
    from geogp.models.collapsed_iterative import IterativePosterior
    from geogp.stats import SufficientStats

    parts = []
    for i, cls_name in enumerate(meta["kernel_parts"]):
        cls = getattr(_kernels, cls_name)
        parts.append(cls(lengthscale=z[f"{pre}kernel/{i}/lengthscale"],
                         variance=z[f"{pre}kernel/{i}/variance"]))
    kernel = parts[0] if len(parts) == 1 else _kernels.SumKernel(parts)
    init = dict(meta["init"])
    accepted = set(_init_names(AFSRegressor))
    est = AFSRegressor(kernel=init.pop("kernel") or kernel,
                       **{k: v for k, v in init.items() if k in accepted})
    est.features_ = FourierFeatures(
        z[f"{pre}features/center"], z[f"{pre}features/width"], tuple(meta["n_freq"]),
        meta["lattice"], z[f"{pre}features/rows"], z[f"{pre}features/numerators"],
        z[f"{pre}features/kinds"])
    optional = {k: jnp.asarray(z[f"{pre}stats/{k}"]) for k in _OPTIONAL_STATS
                if f"{pre}stats/{k}" in z.files}
    matrix_free = bool(meta.get("matrix_free", False))
    if matrix_free:
        G = GramOperator(*(jnp.asarray(z[f"{pre}stats/G/{k}"]) if f"{pre}stats/G/{k}" in z.files
                           else None for k in _OPERATOR_FIELDS))
    else:
        G = jnp.asarray(z[f"{pre}stats/G"])
    est.stats_ = SufficientStats(G, jnp.asarray(z[f"{pre}stats/r"]),
                                 jnp.asarray(z[f"{pre}stats/yy"]), jnp.asarray(z[f"{pre}stats/n"]),
                                 meta["diagonal"], **optional)
    est.solver_ = "iterative" if matrix_free else "dense"
    for name in ("beta_", "powers_"):
        setattr(est, name, z[f"{pre}{name}"] if f"{pre}{name}" in z.files else None)
    est.kernel_, est.noise_ = kernel, float(meta["noise"])
    if matrix_free:
        got = {k: (z[f"{pre}posterior/{k}"] if f"{pre}posterior/{k}" in z.files else None)
               for k in _ITERATIVE_POSTERIOR_ARRAYS}
        its = meta.get("cg_iterations") or [0, []]
        est.posterior_ = IterativePosterior(**got, noise=float(meta["posterior_noise"]),
                                            kvar0=float(meta["kvar0"]),
                                            cg_iterations=(int(its[0]), tuple(its[1])))
    else:
        est.posterior_ = Posterior(z[f"{pre}posterior/sqrt_lam"], z[f"{pre}posterior/weights"],
                                   z[f"{pre}posterior/quad"], z[f"{pre}posterior/chol"],
                                   float(meta["posterior_noise"]), float(meta["kvar0"]))
    est.scaler_ = Standardizer(z[f"{pre}scaler/x_mean"], z[f"{pre}scaler/x_scale"],
                               float(meta["y_mean"]), float(meta["y_scale"]))
    est.report_ = FitReport(**meta["report"], history=z[f"{pre}report/history"].tolist())
    est.stats_time_s_ = meta["stats_time_s"]
    return est


def load_model(path):
    """Read a model written by :func:`save_model`; returns a fitted GeoRegressor."""
    from geogp.api import GeoRegressor

    path = Path(path)
    if not path.is_file():
        raise ReadError(f"cannot read {str(path)!r}: no such file.")
    try:
        z = np.load(path, allow_pickle=False)
        meta = json.loads(str(z["__meta__"]))
    except Exception as err:
        raise ReadError(f"{str(path)!r} is not a geogp model file ({err}).") from err
    if meta.get("format") != FORMAT or meta.get("format_version", 0) > FORMAT_VERSION:
        raise ReadError(f"{str(path)!r} is not a geogp model file of a supported version "
                        f"(format {meta.get('format')!r}, version {meta.get('format_version')}).")
    with z:
        p = meta["params"]
        model = GeoRegressor(p["model"], kernel=p["kernel"], n_features=p["n_features"],
                             share_hyperparameters=p["share_hyperparameters"],
                             nodata=p["nodata"], options=p["options"] or None)
        model.estimators_ = [_load_afs(m, f"s{k}/", z) for k, m in enumerate(meta["slices"])]
        spec = GridSpec(**meta["spec"])
        t = meta["target"]
        target = None
        if t is not None:
            y, x = z["target/y"], z["target/x"]
            coords = {t["y_dim"]: xr.Variable(t["y_dim"], y, t["y_attrs"]),
                      t["x_dim"]: xr.Variable(t["x_dim"], x, t["x_attrs"])}
            target = Target(t["y_dim"], t["x_dim"], y, x, coords, t["crs_wkt"])
        model.extra_dim_ = meta["extra_dim"]
        model.extra_coords_ = {n: xr.Variable(tuple(e["dims"]), z[f"extra/{n}"], e["attrs"])
                               for n, e in meta["extra_coords"].items()}
        model.n_observed_, model.fit_time_s_ = meta["n_observed"], meta["fit_time_s"]
        model.spec_, model.target_ = spec, target
        model.attrs_, model.name_ = meta["attrs"], meta["name"]
    return model
