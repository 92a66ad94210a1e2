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
Lattice models store their per-cell posterior moments (:mod:`geogp.persist_lattice`); wavelet
models their basis, θ and sparse statistics, the posterior being recomputed on loading
(:mod:`geogp.persist_wavelet`); exact and SGPR models cannot be saved yet.

Files are untrusted on loading (:mod:`geogp.persist_checks`): the declared array sizes are
checked before anything is read (against the memory limit, and against the bytes the file
stores), the SHA-256 digest of every array is computed in streams, then every metadata key
is checked for presence and type, every array for dtype, shape, finiteness and sign, and the
parts for consistency (:mod:`geogp.persist_semantics`: CRS, grid, lattice, window), so a
damaged or tampered file raises :class:`~geogp.exceptions.ReadError` instead of predicting
garbage. Files of format version 1 (no digests) are refused.

A model file is integrity-checked, not signed: the digests are unkeyed, and whoever can write
the file can recompute them, so a consistent edit (a CRS replaced by another valid one) passes
the checks. Pass ``key=`` (bytes) to save and load to sign the file with an HMAC-SHA256 and
refuse any file that was not signed with that key (:mod:`geogp.persist_sign`).
"""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import xarray as xr

from geogp import kernels as _kernels
from geogp.exceptions import GeogpError, InputError, ReadError
from geogp.io import atomic_path
from geogp.persist_checks import (Arrays, check_declared_memory, declared_arrays, digest,
                                  meta_digest, require, scaler_and_report, verify_digests)
from geogp.persist_semantics import check_bookkeeping, check_slice_grid, load_spec, load_target
from geogp.persist_sign import check_key, check_signature, sign

__all__ = ["save_model", "load_model", "FORMAT", "FORMAT_VERSION"]

FORMAT = "geogp-model"
SAVABLE = ("afs", "lattice", "wavelet")
FORMAT_VERSION = 2  # 2: SHA-256 digest of every array (1, without digests, is refused)
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


def save_model(model, path, *, overwrite: bool = False, key: bytes | None = None) -> Path:
    """Write a fitted :class:`~geogp.api.GeoRegressor` to ``path`` (``.npz``), atomically.

    The file holds a SHA-256 digest of every array: it is integrity-checked, not signed.
    With ``key`` (bytes) it is also signed (HMAC-SHA256 over the metadata and digests), and
    :func:`load_model` then needs the same key.
    """
    key = check_key(key)
    if not hasattr(model, "estimators_"):
        raise InputError("the model is not fitted; call fit(...) before save().")
    if model.model_ not in SAVABLE:
        raise GeogpError(f"saving model={model.model_!r} is not supported yet; only "
                         f"{' and '.join(map(repr, SAVABLE))} models can be saved.")
    arrays: dict = {}
    if model.model_ == "lattice":
        from geogp.models.lattice import LatticeRegressor
        from geogp.persist_lattice import save_lattice

        slices = [save_lattice(est, f"s{k}/", arrays, _clean(
            {n: getattr(est, n) for n in _init_names(LatticeRegressor)}))
                  for k, est in enumerate(model.estimators_)]
    elif model.model_ == "wavelet":
        from geogp.models.wavelet import WaveletRegressor
        from geogp.persist_wavelet import save_wavelet

        slices = [save_wavelet(est, f"s{k}/", arrays, _clean(
            {n: getattr(est, n) for n in _init_names(WaveletRegressor)}))
                  for k, est in enumerate(model.estimators_)]
    else:
        slices = [_save_afs(est, f"s{k}/", arrays) for k, est in enumerate(model.estimators_)]
    target = model.target_
    meta_target = None
    if target is not None:
        arrays["target/y"], arrays["target/x"] = target.y, target.x
        meta_target = {"y_dim": target.y_dim, "x_dim": target.x_dim, "crs_wkt": target.crs_wkt,
                       "x_first": bool(target.x_first),
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
        "params": {"model": model.model_, "requested": model.model,
                   "reason": getattr(model, "model_reason_", None), "kernel": model.kernel if isinstance(model.kernel, str)
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
    meta["checksums"] = {k: digest(np.asarray(v)) for k, v in arrays.items()}
    sign(meta, key)
    meta["meta_digest"] = meta_digest(meta)
    arrays["__meta__"] = np.array(json.dumps(meta))
    with atomic_path(path, overwrite) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
    return Path(path)


# --------------------------------------------------------------------------- loading
def _load_afs(meta: dict, pre: str, z: Arrays) -> object:
    from geogp.features.fourier import FourierFeatures
    from geogp.features.gram_operator import GramOperator
    from geogp.models.afs import AFSRegressor
    from geogp.models.collapsed import Posterior
    from geogp.models.collapsed_iterative import IterativePosterior
    from geogp.features.fourier_statistics import SufficientStats

    where = f"slice {pre[:-1]}"
    names = require(meta, "kernel_parts", "list", where)
    if not names or not all(isinstance(n, str) and n in _KERNELS for n in names):
        raise ReadError(f"model file {where}: unknown kernel parts {names!r:.80}; expected "
                        f"names among {sorted(_KERNELS)}.")
    center = z.get(f"{pre}features/center", ndim=1)
    D = center.shape[0]
    parts = []
    for i, cls_name in enumerate(names):
        parts.append(getattr(_kernels, cls_name)(
            lengthscale=z.get(f"{pre}kernel/{i}/lengthscale", shape=(D,), positive=True),
            variance=z.get(f"{pre}kernel/{i}/variance", ndim=0, positive=True)))
    kernel = parts[0] if len(parts) == 1 else _kernels.SumKernel(parts)
    init = dict(require(meta, "init", "dict", where))
    accepted = set(_init_names(AFSRegressor))
    kname = init.pop("kernel", None)
    try:
        est = AFSRegressor(kernel=kname if isinstance(kname, str) else kernel,
                           **{k: v for k, v in init.items() if k in accepted})
    except (TypeError, ValueError) as err:
        raise ReadError(f"model file {where}: invalid estimator options ({err}).") from None
    n_freq = require(meta, "n_freq", "list", where)
    lattice = require(meta, "lattice", "str", where)
    if len(n_freq) != D or not all(isinstance(k, int) and k >= 1 for k in n_freq) \
            or lattice not in ("odd", "full"):
        raise ReadError(f"model file {where}: n_freq {n_freq!r:.60} / lattice {lattice!r} do "
                        f"not describe a {D}-D feature set.")
    rows = z.get(f"{pre}features/rows", ndim=2, kind="iu")
    M = rows.shape[0]
    est.features_ = FourierFeatures(
        center, z.get(f"{pre}features/width", shape=(D,), positive=True), tuple(n_freq),
        lattice, rows, z.get(f"{pre}features/numerators", shape=(M, D)),
        z.get(f"{pre}features/kinds", shape=(M, D), kind="iu"))
    optional = {k: jnp.asarray(z.get(f"{pre}stats/{k}")) for k in _OPTIONAL_STATS
                if f"{pre}stats/{k}" in z}
    matrix_free = require(meta, "matrix_free", "bool", where)
    diagonal = require(meta, "diagonal", "bool", where)
    if matrix_free:
        G = GramOperator(*(jnp.asarray(z.get(f"{pre}stats/G/{k}", kind="iufc"))
                           if f"{pre}stats/G/{k}" in z else None for k in _OPERATOR_FIELDS))
    else:
        G = jnp.asarray(z.get(f"{pre}stats/G", shape=(M,) if diagonal else (M, M)))
    est.stats_ = SufficientStats(G, jnp.asarray(z.get(f"{pre}stats/r", shape=(M,))),
                                 jnp.asarray(z.get(f"{pre}stats/yy", ndim=0)),
                                 jnp.asarray(z.get(f"{pre}stats/n", ndim=0, positive=True)),
                                 diagonal, **optional)
    est.solver_ = "iterative" if matrix_free else "dense"
    for name in ("beta_", "powers_"):
        setattr(est, name, z.get(f"{pre}{name}", kind="iuf") if f"{pre}{name}" in z else None)
    est.kernel_ = kernel
    est.noise_ = require(meta, "noise", "float", where, positive=True)
    post_noise = require(meta, "posterior_noise", "float", where, positive=True)
    kvar0 = require(meta, "kvar0", "float", where, positive=True)
    if matrix_free:
        got = {k: (z.get(f"{pre}posterior/{k}", kind="iuf") if f"{pre}posterior/{k}" in z
                   else None)
               for k in _ITERATIVE_POSTERIOR_ARRAYS}
        if got["weights"] is None or got["weights"].shape != (M,):
            raise ReadError(f"model file {where}: the posterior weights are missing or not "
                            f"of shape ({M},).")
        its = require(meta, "cg_iterations", "list", where)
        try:
            cg = (int(its[0]), tuple(int(i) for i in its[1]))
        except (TypeError, ValueError, IndexError):
            raise ReadError(f"model file {where}: 'cg_iterations' is malformed.") from None
        est.posterior_ = IterativePosterior(**got, noise=post_noise, kvar0=kvar0,
                                            cg_iterations=cg)
    else:
        square = (M,) if diagonal else (M, M)
        est.posterior_ = Posterior(z.get(f"{pre}posterior/sqrt_lam", shape=(M,), positive=True),
                                   z.get(f"{pre}posterior/weights", shape=(M,)),
                                   z.get(f"{pre}posterior/quad", shape=square),
                                   z.get(f"{pre}posterior/chol", shape=square),
                                   post_noise, kvar0)
    est.scaler_, est.report_ = scaler_and_report(meta, pre, z, D, where)
    est.stats_time_s_ = meta.get("stats_time_s", float("nan"))
    return est


_KERNELS = {"SquaredExponential", "Matern12", "Matern32", "Matern52"}


def _read_meta(path: Path, max_bytes) -> tuple:
    declared = declared_arrays(path)
    check_declared_memory(declared, max_bytes)
    if "__meta__" not in declared or declared["__meta__"][0] != () \
            or declared["__meta__"][1].kind != "U":
        raise ReadError(f"{str(path)!r} is not a geogp model file (no metadata).")
    try:
        z = np.load(path, allow_pickle=False)
        meta = json.loads(str(z["__meta__"]))
    except Exception as err:
        raise ReadError(f"{str(path)!r} is not a geogp model file ({err}).") from None
    if not isinstance(meta, dict):
        z.close()
        raise ReadError(f"{str(path)!r}: the metadata must be a JSON object; got "
                        f"{type(meta).__name__}.")
    return z, meta


def load_model(path, *, max_bytes: float | None = None, key: bytes | None = None):
    """Read a model written by :func:`save_model`; returns a fitted GeoRegressor.

    ``max_bytes`` caps the memory the file's arrays may declare (default 80 % of the
    machine's RAM, see :mod:`geogp.memory`); larger files are refused before anything is read.
    Damaged, inconsistent or tampered files raise :class:`~geogp.exceptions.ReadError`.

    The checks establish integrity, not authenticity: a file edited consistently (digests
    recomputed) by someone who can write it loads if it still describes a consistent model.
    ``key`` (bytes, as given to :func:`save_model`) refuses any file not signed with it; a
    signed file loaded without a key is refused.
    """
    from geogp.api import GeoRegressor

    key = check_key(key)
    path = Path(path)
    if not path.is_file():
        raise ReadError(f"cannot read {str(path)!r}: no such file.")
    z, meta = _read_meta(path, max_bytes)
    with z:
        version = meta.get("format_version")
        if meta.get("format") != FORMAT or isinstance(version, bool) \
                or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
            raise ReadError(f"{str(path)!r} is not a geogp model file of a supported version "
                            f"(format {meta.get('format')!r:.40}, version {version!r:.20}; this "
                            f"geogp reads versions 1 to {FORMAT_VERSION}).")
        if version < FORMAT_VERSION:  # no silent downgrade to a file without digests
            raise ReadError(f"{str(path)!r} is a model file of format version {version}, which "
                            "has no digests and cannot be checked; this geogp refuses it. Refit "
                            "and save the model again.")
        checksums = require(meta, "checksums", "dict")
        if meta.get("meta_digest") != meta_digest(meta):
            raise ReadError("the model file's metadata does not match its digest: the file "
                            "was changed after it was written.")
        check_signature(meta, key)
        verify_digests(z, checksums)
        arrays = Arrays(z)
        p = require(meta, "params", "dict")
        kind = require(p, "model", "str", "params")
        if kind not in SAVABLE:
            raise ReadError(f"model {kind!r:.30} cannot be loaded; only "
                            f"{' and '.join(map(repr, SAVABLE))} models are saved by this geogp.")
        options = require(p, "options", "dict", "params", nullable=True)
        requested = p.get("requested", kind)
        if requested not in (kind, "auto"):
            raise ReadError(f"model file metadata: requested model {requested!r:.30} does not "
                            f"match the fitted {kind!r}.")
        model = GeoRegressor(requested, kernel=require(p, "kernel", "str", "params", nullable=True),
                             n_features=p.get("n_features"),
                             share_hyperparameters=bool(p.get("share_hyperparameters", False)),
                             nodata=p.get("nodata"), options=options or None)
        reason = p.get("reason")
        model.model_ = kind
        model.model_reason_ = reason if isinstance(reason, str) else "requested"
        slices = require(meta, "slices", "list")
        if not slices or not all(isinstance(m, dict) for m in slices):
            raise ReadError("model file metadata: 'slices' must be a non-empty list of objects.")
        if kind == "lattice":
            from geogp.models.lattice import LatticeRegressor
            from geogp.persist_lattice import load_lattice

            names = set(_init_names(LatticeRegressor))
            model.estimators_ = [load_lattice(m, f"s{k}/", arrays, names)
                                 for k, m in enumerate(slices)]
        elif kind == "wavelet":
            from geogp.models.wavelet import WaveletRegressor
            from geogp.persist_wavelet import load_wavelet

            names = set(_init_names(WaveletRegressor))
            model.estimators_ = [load_wavelet(m, f"s{k}/", arrays, names)
                                 for k, m in enumerate(slices)]
        else:
            model.estimators_ = [_load_afs(m, f"s{k}/", arrays) for k, m in enumerate(slices)]
        spec = load_spec(require(meta, "spec", "dict"))
        target = load_target(meta, arrays, spec)
        for k, est in enumerate(model.estimators_):
            check_slice_grid(kind, est, target, spec, f"slice s{k}")
        model.extra_dim_ = require(meta, "extra_dim", "str", nullable=True)
        extra = require(meta, "extra_coords", "dict")
        try:
            model.extra_coords_ = {
                n: xr.Variable(tuple(e["dims"]), arrays.get(f"extra/{n}", kind="biufcMmU",
                                                             finite=False), e["attrs"])
                for n, e in extra.items()}
        except (KeyError, TypeError, ValueError) as err:
            raise ReadError(f"model file metadata: malformed extra coordinates ({err}).") \
                from None
        n_obs = require(meta, "n_observed", "list")
        times = require(meta, "fit_time_s", "list")
        check_bookkeeping(n_obs, times, len(slices))
        arrays.check_all_read()
        model.n_observed_, model.fit_time_s_ = n_obs, times
        model.spec_, model.target_ = spec, target
        model.attrs_ = require(meta, "attrs", "dict")
        model.name_ = meta.get("name")
    return model
