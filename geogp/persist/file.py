"""Save and load fitted geodata models as one ``.npz`` file, without pickle.

The file holds plain arrays and one JSON document (``__meta__``):

- per slice: the model's arrays and metadata, written and read by its family
  (:meth:`~geogp.families.generic.Family.to_arrays` / ``from_arrays``, :mod:`geogp.families`).
  AFS models store their Fourier features, sufficient statistics, kernel, noise, posterior,
  standardiser and optimisation report (:mod:`geogp.models.afs.codec`);
- the grid: dimension names, CRS (WKT), longitude scaling, target coordinates, the extra
  dimension's coordinates, attributes and name.

Loading rebuilds the estimators from these arrays, so predictions are reproduced bit for bit.
Only numeric, datetime and string arrays are stored; ``np.load(allow_pickle=False)`` reads them.
Lattice models store their per-cell posterior moments (:mod:`geogp.models.lattice.codec`); wavelet
models their basis, θ and sparse statistics, the posterior being recomputed on loading
(:mod:`geogp.models.wavelet.codec`); exact and SGPR models cannot be saved yet.

Files are untrusted on loading (:mod:`geogp.persist.checks`): the declared array sizes are
checked before anything is read (against the memory limit, and against the bytes the file
stores), the SHA-256 digest of every array is computed in streams, then every metadata key
is checked for presence and type, every array for dtype, shape, finiteness and sign, and the
parts for consistency (:mod:`geogp.persist.semantics`: CRS, grid, lattice, window), so a
damaged or tampered file raises :class:`~geogp.exceptions.ReadError` instead of predicting
garbage. Files of format version 1 (no digests) are refused.

A model file is integrity-checked, not signed: the digests are unkeyed, and whoever can write
the file can recompute them, so a consistent edit (a CRS replaced by another valid one) passes
the checks. Pass ``key=`` (bytes) to save and load to sign the file with an HMAC-SHA256 and
refuse any file that was not signed with that key (:mod:`geogp.persist.sign`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from geogp.core.io_atomic import atomic_path
from geogp.exceptions import GeogpError, InputError, ReadError
from geogp.families import AUTO, canonical, family, is_model, savable_models
from geogp.persist.checks import (
    Arrays,
    check_declared_memory,
    clean,
    declared_arrays,
    digest,
    jsonable,
    meta_digest,
    require,
    verify_digests,
)
from geogp.persist.semantics import check_bookkeeping, load_blocks, load_spec, load_target
from geogp.persist.sign import check_key, check_signature, sign

if TYPE_CHECKING:  # annotations only
    from geogp.frontend.api import GeoRegressor

__all__ = ["save_model", "load_model", "FORMAT", "FORMAT_VERSION"]

FORMAT = "geogp-model"
FORMAT_VERSION = 2  # 2: SHA-256 digest of every array (1, without digests, is refused)
# model names that files written before a rename hold → the model those files hold: "wavelet"
# was WaveletRegressor's name until it became the non-stationary lattice model's alias (a file
# never records an alias: it keeps the model fitted, model_)
LEGACY_NAMES = {"wavelet": "wavelet_basis"}


def _storable(a) -> bool:
    return np.asarray(a).dtype.kind in "biufcMmU"


# --------------------------------------------------------------------------- saving
def save_model(model: GeoRegressor, path: str | os.PathLike[str], *, overwrite: bool = False,
               key: bytes | None = None) -> Path:
    """Write a fitted :class:`~geogp.frontend.api.GeoRegressor` to ``path`` (``.npz``), atomically.

    The file holds a SHA-256 digest of every array: it is integrity-checked, not signed.
    With ``key`` (bytes) it is also signed (HMAC-SHA256 over the metadata and digests), and
    :func:`load_model` then needs the same key.
    """
    key = check_key(key)
    if not hasattr(model, "estimators_"):
        raise InputError("the model is not fitted; call fit(...) before save().")
    fam = family(model.model_)
    if not fam.savable:
        raise GeogpError(f"saving model={model.model_!r} is not supported yet; only "
                         f"{' and '.join(map(repr, savable_models()))} models can be saved.")
    arrays: dict = {}
    slices = fam.slices_to_arrays(model.estimators_, arrays)
    target = model.target_
    meta_target = None
    if target is not None:
        arrays["target/y"], arrays["target/x"] = target.y, target.x
        meta_target = {"y_dim": target.y_dim, "x_dim": target.x_dim, "crs_wkt": target.crs_wkt,
                       "x_first": bool(target.x_first),
                       "y_attrs": clean(getattr(target.coords.get(target.y_dim), "attrs", {})),
                       "x_attrs": clean(getattr(target.coords.get(target.x_dim), "attrs", {}))}
    extra = {}
    for name, var in (model.extra_coords_ or {}).items():
        if _storable(var.values):
            arrays[f"extra/{name}"] = np.asarray(var.values)
            extra[name] = {"dims": list(var.dims), "attrs": clean(var.attrs)}
    spec = model.spec_
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "params": {"model": model.model_, "requested": model.model,
                   "reason": getattr(model, "model_reason_", None),
                   "kernel": model.kernel if isinstance(model.kernel, str)
                   or model.kernel is None else None, "n_features": model.n_features,
                   "share_hyperparameters": bool(model.share_hyperparameters),
                   "nodata": jsonable(model.nodata), "options": clean(model.options or {})},
        "spec": {"y_dim": spec.y_dim, "x_dim": spec.x_dim, "crs_wkt": spec.crs_wkt,
                 "geographic": spec.geographic, "lon_scale": spec.lon_scale,
                 "assumed": spec.assumed},
        "target": meta_target, "extra_dim": model.extra_dim_, "extra_coords": extra,
        "blocks": None if model.blocks_ is None else {"factor": list(model.blocks_.factor),
                                                      "phase": list(model.blocks_.phase)},
        "attrs": clean(model.attrs_), "name": jsonable(model.name_),
        "n_observed": list(model.n_observed_), "fit_time_s": list(model.fit_time_s_),
        "slices": slices,
    }
    meta["checksums"] = {k: digest(np.asarray(v)) for k, v in arrays.items()}
    sign(meta, key)
    meta["meta_digest"] = meta_digest(meta)
    arrays["__meta__"] = np.array(json.dumps(meta))
    with atomic_path(path, overwrite) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)
    return Path(path)


# --------------------------------------------------------------------------- loading
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


def load_model(path: str | os.PathLike[str], cls: type[GeoRegressor], *,
               max_bytes: float | None = None, key: bytes | None = None) -> GeoRegressor:
    """Read a model written by :func:`save_model`; returns a fitted ``cls``.

    ``cls`` is the class to build, :class:`~geogp.frontend.api.GeoRegressor`: its
    :meth:`~geogp.frontend.api.GeoRegressor.load` (and :func:`geogp.load_model`) passes itself, so
    that this module needs no import of the front end.

    ``max_bytes`` caps the memory the file's arrays may declare (default 80 % of the
    machine's RAM, see :mod:`geogp.core.memory`); larger files are refused before anything is read.
    Damaged, inconsistent or tampered files raise :class:`~geogp.exceptions.ReadError`.

    The checks establish integrity, not authenticity: a file edited consistently (digests
    recomputed) by someone who can write it loads if it still describes a consistent model.
    ``key`` (bytes, as given to :func:`save_model`) refuses any file not signed with it; a
    signed file loaded without a key is refused.
    """
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
                            f"geogp reads version {FORMAT_VERSION}).")
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
        legacy = LEGACY_NAMES.get(kind)
        kind = legacy or kind
        if not (is_model(kind) and canonical(kind) == kind and family(kind).savable):
            raise ReadError(f"model {kind!r:.30} cannot be loaded; only "
                            f"{' and '.join(map(repr, savable_models()))} models are saved by "
                            "this geogp.")
        fam = family(kind)
        options = require(p, "options", "dict", "params", nullable=True)
        requested = p.get("requested", kind)
        if legacy is not None:  # asked for by the old name, which now means another model
            requested = LEGACY_NAMES.get(requested, requested)
        if canonical(requested) not in (kind, AUTO):
            raise ReadError(f"model file metadata: requested model {requested!r:.30} does not "
                            f"match the fitted {kind!r}.")
        model = cls(requested, kernel=require(p, "kernel", "str", "params", nullable=True),
                             n_features=p.get("n_features"),
                             share_hyperparameters=bool(p.get("share_hyperparameters", False)),
                             nodata=p.get("nodata"), options=options or None)
        reason = p.get("reason")
        model.model_ = kind
        model.model_reason_ = reason if isinstance(reason, str) else "requested"
        slices = require(meta, "slices", "list")
        if not slices or not all(isinstance(m, dict) for m in slices):
            raise ReadError("model file metadata: 'slices' must be a non-empty list of objects.")
        model.estimators_ = fam.slices_from_arrays(slices, arrays)
        spec = load_spec(require(meta, "spec", "dict"))
        target = load_target(meta, arrays, spec)
        model.spec_, model.target_ = spec, target
        model.blocks_ = load_blocks(meta.get("blocks"), target)
        fitted = model.block_grid() or target  # a raster of blocks was fitted on its blocks
        if fitted is not None:  # the slices' geometry against the grid they were fitted on
            axes = spec.to_model(fitted.y, fitted.x)
            for k, est in enumerate(model.estimators_):
                fam.check_grid(est, axes, f"slice s{k}")
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
        model.attrs_ = require(meta, "attrs", "dict")
        model.name_ = meta.get("name")
    return model
