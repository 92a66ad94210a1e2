"""Validation of model files before and while they are loaded (see :mod:`geogp.persist`).

A model file is untrusted input. Before any array is read, the sizes that the file *declares*
(the ``.npy`` headers inside the ``.npz`` zip) are checked against a memory limit; then the
JSON metadata is checked key by key (presence and type); then every array read is checked for
its dtype, shape, finiteness and, where the model needs it, its sign; and files of format
version 2 carry a SHA-256 digest of every array and of the metadata, which must match. Any failure
raises :class:`~geogp.exceptions.ReadError` with one line saying what is wrong, never a ``KeyError``
from deep inside the loader and never a model that predicts NaN.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import zipfile
from collections.abc import Collection
from typing import Any, TypeVar

import numpy as np

from geogp.core.memory import memory_limit
from geogp.core.optimize import FitReport
from geogp.exceptions import ReadError
from geogp.models.base import Standardizer

__all__ = ["declared_arrays", "check_declared_memory", "verify_digests", "require", "Arrays",
           "digest", "meta_digest", "scaler_and_report", "init_names", "jsonable", "clean"]


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def declared_arrays(path: str | os.PathLike[str]) -> dict:
    """{name: (shape, dtype)} of every array in an ``.npz``, read from the headers only.

    Each member must hold the data its header declares: the declared bytes may not exceed
    the bytes the archive stores for it (geogp writes members uncompressed), and the stored
    bytes together may not exceed the file. A small file declaring gigabytes (compressed zeros)
    is refused here, before anything is decompressed or allocated.
    """
    out = {}
    try:
        size = os.path.getsize(path)
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if sum(i.compress_size for i in infos) > size:
                raise ReadError(f"the model file's members claim more bytes than its "
                                f"{size} bytes; it is damaged.")
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise ReadError(f"unexpected member {info.filename!r} in the model file.")
                with zf.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                    elif version in ((2, 0), (3, 0)):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                    else:
                        raise ReadError(f"array {info.filename!r} has an unknown .npy version "
                                        f"{version}.")
                if dtype.hasobject:
                    raise ReadError(f"array {info.filename!r} holds Python objects; geogp model "
                                    "files never do (refusing to unpickle).")
                out[info.filename[:-4]] = (tuple(int(s) for s in shape), dtype,
                                           int(info.compress_size))
    except ReadError:
        raise
    except Exception as err:  # zipfile raises many types on damaged archives
        raise ReadError(f"the model file is damaged or not a .npz archive "
                        f"({type(err).__name__}: {err}).") from None
    return out


def _nbytes(shape, dtype) -> float:
    return float(np.prod(shape, dtype=np.float64)) * dtype.itemsize


def _memory_limit() -> float:  # one name to patch in tests
    return memory_limit()


def check_declared_memory(declared: dict, max_bytes: float | None = None) -> float:
    """Refuse a file whose arrays would need more memory than allowed, or whose members
    declare more data than the file stores for them; returns the declared bytes."""
    total = sum(_nbytes(shape, dt) for shape, dt, _ in declared.values())
    limit = _memory_limit() if max_bytes is None else float(max_bytes)
    if total > limit:
        big = max(declared, key=lambda k: _nbytes(*declared[k][:2]))
        raise ReadError(f"the model file declares arrays of {_gib(total)} in all (largest "
                        f"{big!r}, shape {declared[big][0]}), more than the {_gib(limit)} "
                        "allowed; it is damaged or not a geogp model. Refused before reading.")
    for name, (shape, dt, stored) in declared.items():
        if _nbytes(shape, dt) > stored:
            raise ReadError(f"array {name!r} declares {_gib(_nbytes(shape, dt))} (shape "
                            f"{shape}) but the file stores {stored} bytes for it (geogp writes "
                            "model files uncompressed); it is damaged or not a geogp model. "
                            "Refused before reading.")
    return float(total)


_CHUNK = 2**20  # bytes hashed at a time


def verify_digests(z: Any, checksums: dict) -> None:
    """Check every array of the open ``.npz`` ``z`` against its SHA-256 in ``checksums``,
    hashing the stored bytes in chunks of :data:`_CHUNK` (no array is loaded for this).

    The digest is that of :func:`digest`: dtype, shape, then the bytes in C order, which are
    the stored bytes of a C-ordered member; a Fortran-ordered one (bounded by the file's
    size, see :func:`check_declared_memory`) is loaded and hashed whole.
    """
    for key in z.files:
        if key == "__meta__":
            continue
        want = checksums.get(key)
        if not isinstance(want, str):
            raise ReadError(f"the model file holds the array {key!r} without a checksum; it "
                            "was changed after it was written.")
        try:
            with z.zip.open(key + ".npy") as f:
                version = np.lib.format.read_magic(f)
                shape, fortran, dtype = (np.lib.format.read_array_header_1_0(f)
                                         if version == (1, 0) else
                                         np.lib.format.read_array_header_2_0(f))
                if fortran and len(shape) > 1:
                    got = digest(z[key])
                else:
                    h = hashlib.sha256()
                    shape = tuple(int(s) for s in shape) or (1,)  # as ascontiguousarray
                    h.update(f"{dtype.str}{shape}".encode())
                    left = int(_nbytes(shape, dtype))
                    while left > 0:
                        chunk = f.read(min(_CHUNK, left))
                        if not chunk:
                            raise ReadError(f"the array {key!r} is truncated; the model file "
                                            "is damaged.")
                        h.update(chunk)
                        left -= len(chunk)
                    got = h.hexdigest()
        except ReadError:
            raise
        except Exception as err:  # zipfile, zlib and numpy raise many types on damage
            raise ReadError(f"the array {key!r} cannot be read ({err}); the model file is "
                            "damaged.") from None
        if got != want:
            raise ReadError(f"the array {key!r} does not match its checksum: the model "
                            "file was changed after it was written.")


_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "dict": dict,
          "list": list}


def require(d: dict, key: str, kind: str, where: str = "metadata", *, nullable: bool = False,
            positive: bool = False) -> Any:
    """``d[key]`` checked for presence and type (and sign); a one-line ReadError otherwise."""
    if not isinstance(d, dict):
        raise ReadError(f"model file {where} must be a JSON object; got {type(d).__name__}.")
    if key not in d:
        raise ReadError(f"model file {where} lacks {key!r}; the file is damaged or was not "
                        "written by geogp.")
    value = d[key]
    if value is None and nullable:
        return None
    ok = isinstance(value, _TYPES[kind]) and not (kind in ("int", "float")
                                                   and isinstance(value, bool))
    if not ok:
        raise ReadError(f"model file {where}: {key!r} must be {kind}; got "
                        f"{type(value).__name__} {value!r:.60}.")
    if kind == "float" and not np.isfinite(value):
        raise ReadError(f"model file {where}: {key!r} must be finite; got {value!r}.")
    if positive and not value > 0:
        raise ReadError(f"model file {where}: {key!r} must be > 0; got {value!r}.")
    return value


def digest(a: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (C order)."""
    a = np.ascontiguousarray(a)
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def meta_digest(meta: dict) -> str:
    """SHA-256 of the metadata (canonical JSON) without its own ``meta_digest`` entry."""
    body = {k: v for k, v in meta.items() if k != "meta_digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class Arrays:
    """Checked access to the arrays of an open ``.npz`` (``np.load`` result) whose digests
    were verified (:func:`verify_digests`); records which arrays the loader read, so that
    members it never reads can be refused (:meth:`check_all_read`)."""

    def __init__(self, z: Any) -> None:
        self.z, self.read = z, set()

    def __contains__(self, key: str) -> bool:
        return key in self.z.files

    def check_all_read(self) -> None:
        unread = sorted(set(self.z.files) - self.read - {"__meta__"})
        if unread:
            raise ReadError(f"the model file holds {len(unread)} array(s) that no geogp model "
                            f"reads ({', '.join(map(repr, unread[:3]))}); it was changed after "
                            "it was written.")

    def get(self, key: str, *, ndim: int | None = None, shape: tuple | None = None,
            kind: str = "f", finite: bool = True, positive: bool = False) -> np.ndarray:
        if key not in self.z.files:
            raise ReadError(f"the model file lacks the array {key!r}; it is damaged or was not "
                            "written by geogp.")
        try:
            a = self.z[key]
        except Exception as err:  # zipfile, zlib and numpy raise many types on damage
            raise ReadError(f"the array {key!r} cannot be read ({err}); the model file is "
                            "damaged.") from None
        self.read.add(key)
        if a.dtype.kind not in kind:
            raise ReadError(f"array {key!r} has dtype {a.dtype}; expected kind {kind!r}.")
        if ndim is not None and a.ndim != ndim:
            raise ReadError(f"array {key!r} has {a.ndim} dimension(s); expected {ndim}.")
        if shape is not None and (len(shape) != a.ndim or any(
                w is not None and w != s for w, s in zip(shape, a.shape, strict=True))):
            raise ReadError(f"array {key!r} has shape {a.shape}; expected {shape} "
                            "(None = any).")
        if finite and a.dtype.kind in "fc" and not np.isfinite(a).all():
            raise ReadError(f"array {key!r} holds NaN or inf; the model file is damaged.")
        if positive and not np.all(a > 0):
            raise ReadError(f"array {key!r} must be > 0 everywhere; the model file is damaged.")
        return a


def scaler_and_report(meta: dict, pre: str, z: Arrays, n_dims: int,
                      where: str) -> tuple[Standardizer, FitReport]:
    """The checked Standardizer and FitReport of one slice of a model file."""
    scaler = Standardizer(z.get(f"{pre}scaler/x_mean", shape=(n_dims,)),
                          z.get(f"{pre}scaler/x_scale", shape=(n_dims,), positive=True),
                          require(meta, "y_mean", "float", where),
                          require(meta, "y_scale", "float", where, positive=True))
    rep = require(meta, "report", "dict", where)
    try:
        report = FitReport(**rep, history=z.get(f"{pre}report/history", finite=False).tolist())
    except TypeError as err:
        raise ReadError(f"model file {where}: malformed fit report ({err}).") from None
    return scaler, report


T = TypeVar("T")  # the estimator class a slice rebuilds


def estimator_from_init(cls: type[T], meta: dict, where: str, accepted: Collection[str]) -> T:
    """``cls(**init)`` from a slice's stored options (unknown keys dropped), checked."""
    init = dict(require(meta, "init", "dict", where))
    try:
        est = cls(**{k: v for k, v in init.items() if k in accepted})
        est.check_args()
    except (TypeError, ValueError) as err:
        raise ReadError(f"model file {where}: invalid estimator options ({err}).") from None
    return est


def init_names(cls: type) -> list:
    """The constructor options of ``cls`` stored in a model file (not the kernel object or the
    progress callback)."""
    return [n for n in inspect.signature(cls.__init__).parameters
            if n not in ("self", "kernel", "progress")]


def jsonable(value: Any) -> Any:
    """A JSON-safe copy of ``value`` or None when it has no faithful JSON form."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value.tolist()
    if isinstance(value, (list, tuple)):
        items = [jsonable(v) for v in value]
        lost = any(i is None and v is not None for i, v in zip(items, value, strict=True))
        return None if lost else items
    return None


def clean(d: dict) -> dict:
    """The entries of ``d`` that have a faithful JSON form, as JSON."""
    out = {}
    for k, v in (d or {}).items():
        j = jsonable(v)
        if j is not None or v is None:
            out[str(k)] = j
    return out
