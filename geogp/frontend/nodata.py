"""Missing cells of a raster: NaN, declared nodata values, and a warning for undeclared ones.

:func:`masked_values` turns a DataArray into float64 with every missing cell NaN: NaN itself and
the cells equal to the nodata value (given, or read from rioxarray, CF attributes or the
encoding; not the *stored* nodata of values already unpacked with a scale/offset). When a raster
declares no nodata value, cells equal to a common sentinel (-9999, an integer type's extreme...)
are fitted as data, and :class:`~geogp.exceptions.NodataWarning` says so at the caller's line.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import xarray as xr

from geogp.core.validation import user_stacklevel
from geogp.exceptions import InputError, NodataWarning

__all__ = ["masked_values"]


def masked_values(da: xr.DataArray, nodata: float | None = None) -> xr.DataArray:
    """``da`` as float64 with every missing cell set to NaN (lazy for dask-backed arrays).

    Missing cells: NaN, and cells equal to the nodata value, taken from ``nodata`` or else from
    ``da.rio.nodata`` / ``da.rio.encoded_nodata`` / the ``_FillValue``, ``missing_value`` or
    ``nodata`` attributes. Integer rasters with a nodata value are supported this way. Float32
    values are upcast exactly (no precision is lost).

    Raises:
        InputError: ``nodata`` is not a single number (text, a list), or a nodata value (given
            or declared) cannot occur in the raster's type (e.g. ``_FillValue=1e10`` on int16):
            it would mask nothing and hide the cells that hold a real sentinel.
    """
    if da.dtype == bool:
        raise InputError("the raster is boolean (a mask?), not a field of numbers; geogp models "
                         "real values. Cast it explicitly if 0/1 is meant: da.astype(float).")
    if np.issubdtype(da.dtype, np.complexfloating):
        raise InputError(f"the raster is complex ({da.dtype}); geogp models real values. Pass "
                         "the part you mean explicitly: da.real, da.imag or abs(da).")
    if not np.issubdtype(da.dtype, np.number):
        raise InputError(f"raster values must be real numbers; got dtype {da.dtype}.")
    candidates = [("nodata", _user_nodata(nodata))]
    # values unpacked with a scale/offset (open_raster, xarray's CF decoding) were masked while
    # decoding; the encoded nodata is a *stored* value and would hit valid decoded cells
    unpacked = any(k in da.encoding for k in ("scale_factor", "add_offset"))
    if nodata is None:
        with contextlib.suppress(Exception):
            candidates += [("the rioxarray nodata", da.rio.nodata)] + (
                [] if unpacked else [("the encoded nodata", da.rio.encoded_nodata)])
        candidates += [(f"attribute {k}", da.attrs.get(k))
                       for k in ("_FillValue", "missing_value", "nodata")]
        if not unpacked:
            candidates += [(f"encoding {k}", da.encoding.get(k))
                           for k in ("_FillValue", "missing_value")]
    out = da.astype(np.float64)
    seen = set()
    for source, declared in candidates:
        for value in _declared_values(declared):
            if np.isnan(value) or value in seen:
                continue
            _check_representable(value, da.dtype, source, user=nodata is not None)
            seen.add(value)
            out = out.where(da != value)
    if not seen:
        _warn_sentinels(da)
    return out


def _user_nodata(nodata):
    """``nodata=`` as one float (NaN allowed), or None; a list, text or bool is refused."""
    if nodata is None:
        return None
    if isinstance(nodata, (bool, np.bool_)) or np.ndim(nodata) != 0:
        raise InputError(f"nodata must be a single number; got {nodata!r}. To mark several "
                         "values as missing, set them to NaN first "
                         "(da.where(~da.isin([...]))).")
    try:
        return float(nodata)
    except (TypeError, ValueError):
        raise InputError(f"nodata must be a number, e.g. nodata=-9999; got {nodata!r}.") from None


def _declared_values(declared) -> list:
    """The numbers of a declared nodata (a scalar, or a vector: CF allows several
    missing_value); text that is not a number is ignored as before."""
    if declared is None:
        return []
    try:
        return [float(v) for v in np.asarray(declared).ravel()]
    except (TypeError, ValueError):
        return []


def _check_representable(value: float, dtype, source: str, user: bool) -> None:
    """Refuse a nodata value that no cell of ``dtype`` can hold (e.g. 1e10 in int16): it would
    mask nothing, and would also silence the warning about undeclared sentinels."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        if float(value).is_integer() and info.min <= value <= info.max:
            return
        cells = f"integers in [{info.min}, {info.max}]"
    elif kind.kind == "f":
        if not np.isfinite(value) or abs(value) <= float(np.finfo(kind).max):
            return
        cells = f"values within ±{float(np.finfo(kind).max):.4g}"
    else:
        return
    if user:
        raise InputError(f"nodata={value:g} cannot occur in a raster of type {kind.name} "
                         f"({cells}); pass a value that its cells can hold.")
    raise InputError(f"the raster declares the nodata value {value:g} ({source}), which cannot "
                     f"occur in its {kind.name} cells ({cells}): it would mask nothing. Fix the "
                     "file's nodata value, or pass the right one with nodata=... "
                     "(geogp.fit(..., nodata=...)).")


# values that files use for "missing" when they declare no nodata (ESRI, GDAL, NetCDF defaults)
_SENTINELS = (-9999.0, -999.0, -32768.0, -3.4028234663852886e38, 9.969209968386869e36, -1e30)


def _warn_sentinels(da: xr.DataArray) -> None:
    """Warn when a raster with no declared nodata holds a common sentinel or, for integer
    rasters, its type's extreme value: those cells would be fitted as data."""
    values = list(_SENTINELS)
    if np.issubdtype(da.dtype, np.integer):
        info = np.iinfo(da.dtype)
        values += [float(info.min), float(info.max)]
    values = [v for v in values if _representable(v, da.dtype)]
    hits = da.isin(values)
    count = int(hits.sum())  # one pass over the data (lazy arrays compute here)
    if count:
        found = np.unique(np.asarray(da.where(hits).stack(cell=da.dims).dropna("cell")))[:3]
        shown = ", ".join(f"{v:g}" for v in found)
        warnings.warn(
            f"{count} cell(s) equal {shown}, a common nodata sentinel, but the raster declares "
            "no nodata value: they are fitted as data. If they are missing, pass "
            f"nodata={found[0]:g} (geogp.fit(..., nodata=...)) or set the file's nodata.",
            NodataWarning, stacklevel=user_stacklevel())


def _representable(value: float, dtype) -> bool:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return float(value).is_integer() and info.min <= value <= info.max
    return True
