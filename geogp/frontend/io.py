"""Read rasters and write predictions: GeoTIFF (optionally Cloud-Optimized) and CF NetCDF.

Every write is atomic: the file is written under a temporary name in the destination's
directory and moved into place with :func:`os.replace`, so a failure (full disk, interrupted
run, bad argument) never leaves a partial file behind, and an existing file is replaced only by
a complete one (:mod:`geogp.core.io_atomic`). Existing outputs are refused unless
``overwrite=True``; targets that are not regular files (devices, pipes) always are.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import dask
import numpy as np
import rasterio
import rasterio.shutil
import rioxarray  # registers the .rio accessor
import xarray as xr
from rasterio.windows import Window

from geogp.core.io_atomic import atomic_path, check_writable, hidden_sibling, room_for
from geogp.core.memory import LAZY_WINDOW_CELLS, rows_per_block
from geogp.exceptions import InputError, IrregularGridError, ReadError
from geogp.frontend.adapters import check_axis, find_spatial_dims, select_variable

_Raster = TypeVar("_Raster", xr.DataArray, xr.Dataset)

__all__ = ["open_raster", "open_stack", "series_from_bands", "band_names", "date_in_name",
           "atomic_path", "check_writable",
           "check_geotiff_grid", "hidden_sibling", "write_geotiff", "write_netcdf", "GEOTIFF_BANDS",
           "GEOTIFF_SUFFIXES", "NETCDF_SUFFIXES"]

GEOTIFF_BANDS = ("mean", "std")  # band 1, band 2; latent std and quantiles optional after them
GEOTIFF_SUFFIXES = (".tif", ".tiff", ".gtiff")
NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf", ".h5", ".hdf5")


# --------------------------------------------------------------------------- reading
def open_raster(path: str | os.PathLike[str], var: str | None = None) -> xr.DataArray:
    """Open a GeoTIFF or NetCDF raster as a DataArray with missing cells as NaN.

    Args:
        path: ``.tif``/``.tiff`` (read with ``rioxarray.open_rasterio(mask_and_scale=True)``:
            nodata becomes NaN, stored values are unpacked with the file's scale and offset, a
            single band is squeezed) or ``.nc`` (xarray, engine h5netcdf,
            ``decode_coords="all"`` so that ``spatial_ref`` is a coordinate, not a variable).
        var: NetCDF variable; optional when the file has a single data variable.

    Returns:
        The raster, lazily loaded (data are read when used).

    Raises:
        ReadError: the file is missing or cannot be read as a raster.
        InputError: ``var`` is not in the file (the message lists the variables).
    """
    path = Path(path)
    if not path.is_file():
        raise ReadError(f"cannot read {str(path)!r}: no such file.")
    suffix = path.suffix.lower()
    if suffix in NETCDF_SUFFIXES:
        return _open_netcdf(path, var)
    try:
        da = rioxarray.open_rasterio(path, mask_and_scale=True)
    except Exception as err:  # rasterio raises RasterioIOError and friends
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ReadError(
            f"cannot read {str(path)!r} as a raster ({msg}); geogp reads GeoTIFF (.tif) and "
            "NetCDF (.nc) files."
        ) from err
    if isinstance(da, list):
        raise ReadError(f"{str(path)!r} holds several subdatasets; convert the one you need.")
    if isinstance(da, xr.Dataset):
        da = select_variable(da, var)
    elif var is not None:
        names = [da.name] if da.name else []
        long = da.attrs.get("long_name")
        if var not in names and var != long:
            raise InputError(f"variable {var!r} not found; {str(path)!r} is a GeoTIFF with bands "
                             f"{list(np.atleast_1d(long)) if long else names}. Omit --var.")
    if "band" in da.dims and da.sizes["band"] == 1:
        da = da.squeeze("band", drop=True)
    if da.name is None:
        da.name = path.stem
    if suffix in GEOTIFF_SUFFIXES:
        _check_readable(da, path)
    return da


# dates in file names or band descriptions, tried in this order: 2020-06-01 (or 2020_06_01),
# 20200601, and MODIS's A2004145 (year and day of year)
DATE_PATTERNS = (
    (re.compile(r"(?<!\d)(\d{4})[-_.](\d{2})[-_.](\d{2})(?!\d)"), "ymd"),
    (re.compile(r"(?<!\d)(\d{4})(\d{2})(\d{2})(?!\d)"), "ymd"),
    (re.compile(r"(?<![A-Za-z0-9])A(\d{4})(\d{3})(?!\d)"), "yj"),
)


def date_in_name(text: str) -> np.datetime64 | None:
    """The date written in a file name or band description (:data:`DATE_PATTERNS`: 2020-06-01,
    20200601 or MODIS's A2020153), or None when there is none or it is not a real date."""
    for pattern, kind in DATE_PATTERNS:
        found = pattern.findall(str(text))
        if len(found) != 1:  # none, or ambiguous
            continue
        try:
            if kind == "ymd":
                return np.datetime64("-".join(found[0]), "D")
            year, day = found[0]
            if not 1 <= int(day) <= 366:
                continue
            return np.datetime64(f"{year}-01-01", "D") + np.timedelta64(int(day) - 1, "D")
        except ValueError:  # not a calendar date (e.g. 2020-13-45)
            continue
    return None


def _dates(texts: Sequence[str], times: Sequence[str] | None, what: str) -> np.ndarray:
    """One date per ``texts`` item: ``times`` parsed, or the date in each text."""
    if times is not None:
        if len(times) != len(texts):
            raise InputError(f"{len(times)} dates given for {len(texts)} {what}s; give one "
                             "date per " + what + ".")
        try:
            return np.array([np.datetime64(str(t).strip(), "D") for t in times])
        except ValueError as err:
            raise InputError(f"cannot read the dates {list(times)} ({err}); write them as "
                             "YYYY-MM-DD.") from None
    out = [date_in_name(t) for t in texts]
    missing = [t for t, d in zip(texts, out, strict=True) if d is None]
    if missing:
        raise InputError(f"no date found in the {what} {missing[0]!r} (looked for 2020-06-01, "
                         "20200601 or MODIS's A2020153); give the dates with --time (times=).")
    return np.array(out)


def open_stack(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
               times: Sequence[str] | None = None, var: str | None = None) -> xr.DataArray:
    """Open an image series as a (time, y, x) DataArray, in date order.

    Args:
        paths: several single-image rasters on one grid (GeoTIFF or NetCDF), or one
            multi-band GeoTIFF whose bands are the dates.
        times: one date per file (or band), e.g. ``["2020-06-01", ...]``; default: the date in
            each file name (or band description): 2020-06-01, 20200601 or MODIS's A2020153.
        var: NetCDF variable (as :func:`open_raster`).

    Returns:
        The stack with a datetime ``time`` coordinate, sorted by date, CRS kept.

    Raises:
        InputError: a file is not one image, the grids differ, a date is missing or
            unreadable, or two images have the same date.
        ReadError: a file cannot be read.
    """
    single = isinstance(paths, (str, os.PathLike))
    paths = [Path(paths)] if single else [Path(p) for p in paths]
    if not paths:
        raise InputError("open_stack needs at least one file.")
    if len(paths) == 1:
        da = open_raster(paths[0], var=var)
        if "band" not in da.dims:
            raise InputError(f"{str(paths[0])!r} is one image; a stack needs several files, or "
                             "one GeoTIFF whose bands are the dates.")
        return series_from_bands(da, times)
    images = []
    for p in paths:
        da = open_raster(p, var=var)
        if da.ndim != 2:
            raise InputError(f"{str(p)!r} has the dimensions {list(da.dims)}; each file of "
                             "a stack must be one image (y, x).")
        if images:
            _check_same_grid(images[0], da, paths[0], p)
        images.append(da)
    dates = _dates([p.name for p in paths], times, "file")
    stack = xr.concat(images, dim="time", coords="minimal", compat="override",
                      join="override").assign_coords(time=dates)
    stack.name = images[0].name
    return _in_date_order(stack)


def band_names(da: xr.DataArray) -> list[str]:
    """The descriptions of a multi-band raster's bands (their numbers where it has none)."""
    names = np.atleast_1d(da.attrs.get("long_name", ()))
    if len(names) != da.sizes["band"]:
        names = da["band"].values
    return [str(n) for n in names]


def series_from_bands(da: xr.DataArray, times: Sequence[str] | None = None) -> xr.DataArray:
    """A multi-band raster (band, y, x) as a stack (time, y, x) in date order: one date per
    band from ``times``, or from each band's description (:func:`date_in_name`)."""
    dates = _dates(band_names(da), times, "band")
    stack = da.rename({"band": "time"}).assign_coords(time=dates)
    stack.attrs.pop("long_name", None)
    return _in_date_order(stack)


def _in_date_order(stack: xr.DataArray) -> xr.DataArray:
    """``stack`` sorted by its dates; refuses two images of one date."""
    dates = stack["time"].values
    order = np.argsort(dates, kind="stable")
    dup = np.flatnonzero(np.diff(dates[order]) == np.timedelta64(0, "D"))
    if dup.size:
        raise InputError(f"two images have the date {dates[order][dup[0]]}; a stack needs one "
                         "image per date.")
    return stack.isel(time=order)


def _check_same_grid(first: xr.DataArray, other: xr.DataArray, a: Path, b: Path) -> None:
    """Refuse an image of another grid (shape, coordinates or CRS) than the first one's."""
    ya, xa = find_spatial_dims(first)
    yb, xb = find_spatial_dims(other)
    same = (first.shape == other.shape
            and np.allclose(first[ya].values, other[yb].values, rtol=0, atol=1e-9 * (
                1 + float(np.max(np.abs(first[ya].values)))))
            and np.allclose(first[xa].values, other[xb].values, rtol=0, atol=1e-9 * (
                1 + float(np.max(np.abs(first[xa].values))))))
    crs_a, crs_b = first.rio.crs, other.rio.crs
    if not same or (crs_a is not None and crs_b is not None and crs_a != crs_b):
        raise InputError(f"{str(b)!r} is not on the grid of {str(a)!r} ({other.shape} cells "
                         f"against {first.shape}, or other coordinates or CRS); the images of "
                         "a stack must share one grid (gdalwarp -te ... -tr ... to align them).")


_EAGER_BYTES = 256 * 2**20


def _check_readable(da: xr.DataArray, path: Path) -> None:
    """Read the GeoTIFF's cells now (small files) or its first and last rows (large ones), so a
    truncated or corrupted file is refused here with one line, not deep inside a fit."""
    try:
        if da.size * da.dtype.itemsize <= _EAGER_BYTES:
            da.load()
        else:
            y_dim = da.dims[-2]
            da.isel({y_dim: [0, da.sizes[y_dim] - 1]}).values  # noqa: B018 - the read is the check
    except Exception as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ReadError(f"cannot read the cells of {str(path)!r} ({msg}); the file is truncated "
                        "or corrupted.") from None


def _open_netcdf(path: Path, var: str | None) -> xr.DataArray:
    try:
        ds = xr.open_dataset(path, engine="h5netcdf", decode_coords="all")
    except Exception as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ReadError(
            f"cannot read {str(path)!r} as NetCDF-4/HDF5 ({msg}). geogp reads NetCDF-4 files "
            "(engine h5netcdf); convert classic NetCDF-3 files with 'nccopy -k nc4'."
        ) from err
    names = [str(n) for n in ds.data_vars]
    if var is not None and var not in ds.data_vars:
        raise InputError(f"variable {var!r} not found in {str(path)!r}; it has {names}.")
    if var is None:
        rasters = []
        for n in names:
            try:
                find_spatial_dims(ds[n])
                rasters.append(n)
            except InputError:
                pass
        if len(rasters) == 1:
            var = rasters[0]
    return select_variable(ds, var)


# --------------------------------------------------------------------------- GeoTIFF
COMPRESSIONS = ("deflate", "lzw", "zstd", "lzma", "packbits", "none")
# rows of each band written (and read back) at a time
WRITE_ROWS = 1024
_WINDOW_BYTES = 64 * 2**20  # bands written or read back per call: at most this much a window
_DTYPES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32")


def _check_write_options(compress, dtype, nodata) -> tuple[str, np.dtype]:
    comp = "none" if compress is None else str(compress).lower()
    if comp not in COMPRESSIONS:
        raise InputError(f"compress must be one of {list(COMPRESSIONS)}; got {compress!r}.")
    if str(dtype) not in _DTYPES:
        raise InputError(f"dtype must be one of {list(_DTYPES)}; got {dtype!r}.")
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        if nodata is None or not np.isfinite(nodata):
            raise InputError(f"an integer GeoTIFF ({dtype}) cannot hold NaN: pass an integer "
                             "nodata value inside its range, e.g. nodata=-9999 for int16.")
        info = np.iinfo(dt)
        if not (info.min <= nodata <= info.max) or float(nodata) != int(nodata):
            raise InputError(f"nodata={nodata!r} is not an integer inside the range of {dtype} "
                             f"[{info.min}, {info.max}].")
    return comp, dt


def _as_band(values, dt: np.dtype, nodata, name: str) -> np.ndarray:
    """Cast one band to ``dt``, refusing values that the type cannot hold (no silent wrap)."""
    data = np.asarray(values, dtype=np.float64)
    if dt.kind in "iu":
        finite = data[np.isfinite(data)]
        info = np.iinfo(dt)
        if finite.size and (finite.min() < info.min or finite.max() > info.max):
            raise InputError(f"band {name!r} holds values in [{finite.min():.6g}, "
                             f"{finite.max():.6g}], outside the range of {dt.name} "
                             f"[{info.min}, {info.max}]; write float32 (the default), rescale, "
                             "or choose a wider type.")
        if np.isinf(data).any():
            raise InputError(f"band {name!r} holds ±inf, which {dt.name} cannot store.")
        data = np.where(np.isnan(data), nodata, np.rint(data))
    elif nodata is not None and not np.isnan(nodata):
        data = np.where(np.isnan(data), nodata, data)
    return data.astype(dt)


def _digest(h, block: np.ndarray) -> None:
    """Add a window of a band to the hash ``h`` (NaNs in one canonical form)."""
    if block.dtype.kind == "f":
        block = np.where(np.isnan(block), np.nan, block).astype(block.dtype)
    h.update(np.ascontiguousarray(block).tobytes())


def _row_windows(ny: int, nx: int) -> list[tuple[int, int]]:
    """Row ranges of the windows: :data:`WRITE_ROWS` rows, halved (a power of two) until a
    window has at most :data:`~geogp.core.memory.LAZY_WINDOW_CELLS` cells, or one row."""
    rows = rows_per_block(nx, WRITE_ROWS, LAZY_WINDOW_CELLS)
    return [(a, min(a + rows, ny)) for a in range(0, ny, rows)]


# attributes that describe the encoding or the georeferencing, not the data: never tags
_NOT_TAGS = ("scale_factor", "add_offset", "grid_mapping", "coordinates", "AREA_OR_POINT",
             "units", "missing_value", "valid_range", "valid_min", "valid_max")


def _dataset_tags(attrs: dict) -> dict:
    """The input's description kept as GeoTIFF dataset tags: scalar text or number attributes
    (long_name, source, title, history...), minus encoding and georeferencing keys."""
    return {k: str(v) for k, v in attrs.items()
            if not str(k).startswith("_") and k not in _NOT_TAGS
            and isinstance(v, (str, int, float, np.integer, np.floating))}


def _band_group(shape: tuple, dt: np.dtype) -> int:
    """How many bands to write or read per call: as many as fit :data:`_WINDOW_BYTES` per
    window. Each rasterio write or read call costs time in proportion to the band count, so
    one call per band and window was quadratic in the bands (2,000 samples: minutes)."""
    per_band = min(WRITE_ROWS, shape[0]) * shape[1] * np.dtype(dt).itemsize
    return max(1, int(_WINDOW_BYTES // max(per_band, 1)))


def _write_windows(dst, bands: list, dt: np.dtype, nodata) -> list[bytes]:
    """Write the bands window by window (:func:`_row_windows`: dask-backed bands are computed
    one window at a time, all the bands of a window together), a group of bands per call
    (:func:`_band_group`); returns each band's digest."""
    digests = []
    group = _band_group(bands[0][1].shape, dt)
    for first in range(0, len(bands), group):
        part = bands[first:first + group]
        hashes = [hashlib.blake2b(digest_size=16) for _ in part]
        for a, b in _row_windows(*part[0][1].shape):
            values = _window_values([arr[a:b] for _, arr in part])
            block = np.stack([_as_band(v, dt, nodata, name)
                              for (name, _), v in zip(part, values, strict=True)])
            dst.write(block, list(range(first + 1, first + len(part) + 1)),
                      window=Window(0, a, block.shape[2], b - a))
            for h, band in zip(hashes, block, strict=True):
                _digest(h, band)
        digests += [h.digest() for h in hashes]
    for i, (name, arr) in enumerate(bands, start=1):
        dst.set_band_description(i, name)
        units = arr.attrs.get("units")
        if units:
            dst.update_tags(i, units=str(units))
    dst.update_tags(software="geogp")
    return digests


def _in_this_process() -> contextlib.AbstractContextManager:
    """Dask computations in this process, one task at a time (the synchronous scheduler): a
    lazy prediction's tasks hold the model, which a distributed client would have to receive,
    and one block at a time bounds the memory."""
    return dask.config.set(scheduler="synchronous")


def _window_values(arrays: list) -> list:
    """The values of one window of several bands. Dask-backed bands (a lazy prediction) are
    computed together, so that the blocks they share (mean and std come from one prediction
    task) are computed once, in this process (:func:`_in_this_process`)."""
    if not any(is_lazy(a) for a in arrays):
        return [a.values for a in arrays]
    with _in_this_process():
        return list(dask.compute(*(a.data for a in arrays)))


def load_here(obj: _Raster) -> _Raster:
    """``obj`` (DataArray or Dataset) with its dask-backed variables computed together in
    this process (:func:`_in_this_process`); ``obj`` itself when nothing is lazy."""
    if not is_lazy(obj):
        return obj
    with _in_this_process():
        return obj.compute()


def is_lazy(obj: xr.DataArray | xr.Dataset) -> bool:
    """Whether a DataArray or Dataset (any of its variables) is dask-backed."""
    variables = obj.data_vars.values() if isinstance(obj, xr.Dataset) else [obj]
    return any(getattr(v.variable, "chunks", None) is not None for v in variables)


def _verify_geotiff(tmp, digests: list, shape: tuple) -> None:
    """Read the finished file back window by window; any band whose digest differs means the
    write failed.

    Bands are read back in groups (:func:`_band_group`), as they were written.
    """
    try:
        with rasterio.open(tmp) as src:
            if src.count != len(digests) or src.shape != tuple(shape):
                raise OSError(f"{src.count} band(s) of {src.shape} read back, {len(digests)} "
                              f"of {tuple(shape)} written")
            windows = _row_windows(src.height, src.width)
            group = _band_group(src.shape, src.dtypes[0])
            for first in range(1, src.count + 1, group):
                indexes = list(range(first, min(first + group, src.count + 1)))
                hashes = [hashlib.blake2b(digest_size=16) for _ in indexes]
                for a, b in windows:
                    block = src.read(indexes, window=Window(0, a, src.width, b - a))
                    for h, band in zip(hashes, block, strict=True):
                        _digest(h, band)
                for i, h in zip(indexes, hashes, strict=True):
                    if h.digest() != digests[i - 1]:
                        raise OSError(f"band {i} reads back differently")
    except (OSError, rasterio.errors.RasterioError) as err:
        raise OSError(f"the GeoTIFF could not be written completely ({err}; disk full?); "
                      "nothing was kept at the target path.") from None


def _bands(pred: xr.Dataset, latent: bool, quantiles: bool, samples: bool = False,
           extra: tuple = ()):
    """(name, 2-D array) per band, in band order."""
    if not isinstance(pred, xr.Dataset):
        raise InputError(f"expected the Dataset returned by predict() (mean, std, ...); got "
                         f"{type(pred).__name__}. To write a single DataArray, use "
                         "da.rio.to_raster(path).")
    y_dim, x_dim = find_spatial_dims(pred)
    missing = [v for v in GEOTIFF_BANDS if v not in pred.data_vars]
    if missing:
        raise InputError(f"the prediction dataset lacks {missing}; expected the output of "
                         "GeoRegressor.predict().")
    names = list(GEOTIFF_BANDS) + (["std_latent"] if latent else [])
    arrays = [pred[n] for n in names]
    if quantiles and "quantiles" in pred:
        for q in pred["quantile"].values:
            arrays.append(pred["quantiles"].sel(quantile=q))
            names.append(f"q{float(q):g}")
    if samples:
        if "samples" not in pred.data_vars:
            raise InputError("samples=True needs a 'samples' variable (dims sample, y, x), e.g. "
                             "pred['samples'] = model.sample(n).")
        names.append("samples")
        arrays.append(pred["samples"])
    for name in extra:
        if name not in pred.data_vars:
            raise InputError(f"extra band {name!r} is not a variable of the prediction dataset; "
                             f"it has {sorted(pred.data_vars)}.")
        names.append(name)
        arrays.append(pred[name])
    out = []
    for name, a in zip(names, arrays, strict=True):
        extra = [d for d in a.dims if d not in (y_dim, x_dim)]
        if not extra:  # spatial dims set last: transpose() returns an object without them
            out.append((name, a.transpose(y_dim, x_dim).rio.set_spatial_dims(
                x_dim=x_dim, y_dim=y_dim)))
            continue
        if len(extra) > 1:
            raise InputError(f"cannot write dims {extra} to a GeoTIFF; select a slice.")
        for i in range(a.sizes[extra[0]]):
            label = _label(a[extra[0]].values[i]) if extra[0] in a.coords else str(i)
            band = a.isel({extra[0]: i}).transpose(y_dim, x_dim)
            out.append((f"{name} {extra[0]}={label}",
                        band.rio.set_spatial_dims(x_dim=x_dim, y_dim=y_dim)))
    return out


def _label(value) -> str:
    value = np.asarray(value)
    if np.issubdtype(value.dtype, np.datetime64):
        return str(np.datetime_as_string(value, unit="s")).replace("T00:00:00", "")
    return str(value)


def check_geotiff_grid(obj: xr.DataArray | xr.Dataset) -> None:
    """Raise :class:`IrregularGridError` unless the (y, x) coordinates of ``obj`` (DataArray or
    Dataset) are regularly spaced: a GeoTIFF stores one affine transform, so cells of an
    irregular grid would land at the wrong places. NetCDF stores the coordinates themselves."""
    y_dim, x_dim = find_spatial_dims(obj)
    for dim in (y_dim, x_dim):
        if dim not in obj.coords:
            continue  # no coordinates: rioxarray's own transform (if any) is the grid
        values, regular = check_axis(obj[dim].values, dim, min_size=1)
        if not regular:
            step = np.abs(np.diff(values))
            raise IrregularGridError(
                f"cannot write a GeoTIFF of this grid: its {dim!r} coordinates are not "
                f"regularly spaced (steps from {step.min():.6g} to {step.max():.6g}), and a "
                "GeoTIFF holds one regular transform, which would misplace the cells. Write "
                "NetCDF instead (write_netcdf; CLI: --netcdf PRED.nc), which keeps the "
                "coordinates, or resample the input onto a regular grid first.")


def write_geotiff(pred: xr.Dataset, path: str | os.PathLike[str], *, overwrite: bool = False,
                  latent: bool = False,
                  quantiles: bool = False, nodata: float = np.nan, compress: str = "deflate",
                  cog: bool = False, dtype: str = "float32", samples: bool = False,
                  extra: tuple = ()) -> Path:
    """Write a prediction as a GeoTIFF on exactly its grid (CRS, transform, shape).

    Band 1 = predictive mean, band 2 = std of a new observation (noise included); then
    ``std_latent`` (``latent=True``) and one band per quantile (``quantiles=True``). Band
    descriptions are the variable names ("mean", "std", ...). An extra dimension (time) gives one
    band per variable and slice ("mean time=2020-01-01", ...) The Dataset's attributes (the
    input's ``long_name``, ``source``...) become dataset tags; ``units`` tag each band.

    Args:
        pred: output of :meth:`geogp.frontend.api.GeoRegressor.predict`.
        path: destination. overwrite: replace an existing file.
        nodata: value written for cells without prediction (NaN by default; integer types
            need an integer value inside their range).
        compress: GDAL compression (``COMPRESSIONS``: "deflate", "lzw", "zstd", "lzma",
            "packbits", "none"); anything else is refused.
        cog: write a Cloud-Optimized GeoTIFF (GDAL driver "COG", with overviews).
        dtype: band data type ("float32" default, "float64", or an integer type, which is
            refused when a value does not fit: nothing wraps silently).
        samples: append one band per posterior sample of ``pred["samples"]`` (dims sample,
            y, x; :meth:`~geogp.frontend.api.GeoRegressor.sample`), described "samples sample=i".
        extra: names of further variables of ``pred`` on the same grid to append as bands
            (e.g. ``("effective_lengthscale",)``), described by their names.

    The bands are written and read back :data:`WRITE_ROWS` rows at a time, fewer on wide
    grids (a lazy, dask-backed prediction is computed window by window and never held whole;
    the check compares digests), into a tiled GeoTIFF
    (256² blocks) that the COG driver copies block by block.

    Returns:
        The path written. The file is read back before it is moved into place, so a full disk
        or a failed write raises ``OSError`` and leaves nothing at ``path``.

    Raises:
        IrregularGridError: the grid's coordinates are not regularly spaced (see
            :func:`check_geotiff_grid`; write NetCDF instead).
    """
    compress, dt = _check_write_options(compress, dtype, nodata)
    bands = _bands(pred, latent, quantiles, samples, extra)
    check_geotiff_grid(pred)
    tags = _dataset_tags(pred.attrs)
    ref = bands[0][1]
    transform = ref.rio.transform(recalc=True)
    profile = {"driver": "GTiff", "height": ref.shape[0], "width": ref.shape[1],
               "count": len(bands), "dtype": dtype, "crs": pred.rio.crs,
               "transform": transform, "nodata": nodata, "predictor": 1,
               "tiled": ref.shape[0] >= 256 and ref.shape[1] >= 256,
               "interleave": "band"}
    if compress != "none":
        profile["compress"] = compress.upper()
    with atomic_path(path, overwrite) as tmp:
        if not cog:
            with rasterio.open(tmp, "w", **profile) as dst:
                digests = _write_windows(dst, bands, dt, nodata)
                dst.update_tags(**tags)
        else:  # windows into a tiled GeoTIFF, which GDAL's COG driver copies block by block
            plain = tmp.with_name(tmp.name + ".gtiff")
            try:
                with rasterio.open(plain, "w", **{**profile, "tiled": True}) as dst:
                    digests = _write_windows(dst, bands, dt, nodata)
                    dst.update_tags(**tags)
                options = {"compress": compress.upper()} if compress != "none" else {}
                rasterio.shutil.copy(plain, tmp, driver="COG", **options)
            finally:
                with contextlib.suppress(OSError):
                    os.remove(plain)
        _verify_geotiff(tmp, digests, ref.shape)
    return Path(path)


# --------------------------------------------------------------------------- NetCDF
def write_netcdf(pred: xr.Dataset, path: str | os.PathLike[str], *,
                 overwrite: bool = False) -> Path:
    """Write a prediction as CF NetCDF-4 (engine h5netcdf) with its grid mapping.

    The CRS is stored CF-style in the ``spatial_ref`` variable (``grid_mapping_name``,
    ``crs_wkt``, ``GeoTransform``) and every data variable names it in ``grid_mapping``;
    :func:`open_raster` reads it back as a coordinate.
    """
    ds = pred.copy()
    if ds.rio.crs is not None:
        try:  # named spatial dims (lat/lon, rows/cols...): rioxarray only guesses x/y
            y_dim, x_dim = find_spatial_dims(ds)
        except InputError:  # points: no grid
            y_dim = x_dim = None
        ds = ds.rio.write_crs(ds.rio.crs)
        if x_dim is not None:  # after write_crs, which returns an object without them
            ds = ds.rio.set_spatial_dims(x_dim=x_dim, y_dim=y_dim).rio.write_coordinate_system()
            with contextlib.suppress(Exception):  # irregular grids have no affine transform
                ds = ds.rio.write_transform(ds.rio.transform(recalc=True))
    ds.attrs.setdefault("Conventions", "CF-1.8")
    encoding = {}
    for v in ds.data_vars:
        grid_mapping = ds[v].encoding.get("grid_mapping") or ds[v].attrs.pop("grid_mapping", None)
        encoding[v] = {"zlib": True, "complevel": 4}
        if ds[v].chunks is not None:  # lazy: one file chunk per dask block, written whole
            # (HDF5's own chunks would straddle the blocks and be rewritten: 2× slower)
            encoding[v]["chunksizes"] = tuple(int(c[0]) for c in ds[v].chunks)
        if grid_mapping:
            encoding[v]["grid_mapping"] = grid_mapping
    # a lazy prediction is written chunk by chunk, in this process
    with atomic_path(path, overwrite) as tmp, _in_this_process():
        _to_netcdf(ds, tmp, encoding)
    return Path(path)


NETCDF_OVERHEAD = 2**20  # bytes of HDF5 metadata allowed beside the variables' data


def netcdf_bound(ds: xr.Dataset) -> float:
    """An upper bound of the bytes a NetCDF-4 file of ``ds`` takes: the uncompressed data
    (deflate never grows a chunk by more than a few bytes per 16 KiB), 1 % for chunk
    indexes, and :data:`NETCDF_OVERHEAD` for headers and attributes."""
    data = sum(float(v.nbytes) for v in ds.variables.values())
    return 1.01 * data + NETCDF_OVERHEAD


def _to_netcdf(ds: xr.Dataset, tmp: Path, encoding: dict) -> None:
    """Write ``ds`` to ``tmp`` so that a full disk raises one OSError. HDF5 must never meet
    it: when closing a file fails (ENOSPC, EFBIG) it frees the file's state but keeps its
    id, and h5py's next close (at garbage collection or exit) reads the freed memory: a
    segfault (h5py issues 914 and 1775). So a file that might not fit (its bound beyond
    :func:`room_for`) is made in memory and copied with Python's writes, which fail cleanly
    (:func:`atomic_path` names the file)."""
    need, room = netcdf_bound(ds), room_for(tmp)
    if need <= room:
        ds.to_netcdf(tmp, engine="h5netcdf", encoding=encoding)
    elif is_lazy(ds):  # too large to hold in memory as a whole: the point of a lazy write
        raise OSError(errno.ENOSPC, f"the NetCDF file takes up to {need / 2**20:,.1f} MiB and "
                      f"its folder has room for {room / 2**20:,.1f} MiB")
    else:
        data = ds.to_netcdf(engine="h5netcdf", encoding=encoding)
        with open(tmp, "wb") as f:
            f.write(data)
