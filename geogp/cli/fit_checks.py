"""Checks of ``geogp fit``'s arguments that run before the fit: every output path and format,
the quantiles, the CRS and the seed, so that a run that cannot write its results fails at once
(one line, exit 2) instead of after minutes of fitting. :mod:`geogp.cli.fit` imports this
module when it runs, not for ``--help``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.backend_bases import FigureCanvasBase

from geogp.cli.options import DATE_FIELD
from geogp.core.io_atomic import check_writable
from geogp.core.memory import check_prediction, check_samples
from geogp.frontend.adapters import as_crs, find_spatial_dims
from geogp.frontend.io import GEOTIFF_SUFFIXES, NETCDF_SUFFIXES
from geogp.frontend.outputs import check_quantiles
from geogp.persist.sign import read_key_file

if TYPE_CHECKING:  # annotations only
    import argparse

    import xarray as xr

__all__ = ["check_fit_arguments", "check_output_memory", "dated_outputs", "output_paths"]

_MODEL = (".npz",)


def _image_suffixes() -> tuple:
    return tuple("." + s for s in FigureCanvasBase.get_supported_filetypes())


def output_paths(args: argparse.Namespace) -> list[str]:
    """The output paths of ``args`` (--out, --netcdf, --map, --save-model), given ones only."""
    return [p for p in (args.out, args.netcdf, args.map, args.save_model) if p]


def _check_suffixes(args, usage_error) -> None:
    """Each output's suffix must not name another output's format (``--out o.nc`` would be a
    GeoTIFF named .nc); --map takes its format from its suffix, which must be an image one."""
    images = _image_suffixes()
    families = {"--out": (GEOTIFF_SUFFIXES, "a GeoTIFF"),
                "--netcdf": (NETCDF_SUFFIXES, "a NetCDF file"),
                "--map": (images, "an image"), "--save-model": (_MODEL, "a model file")}
    known = set(GEOTIFF_SUFFIXES) | set(NETCDF_SUFFIXES) | set(images) | set(_MODEL)
    for option, path in (("--out", args.out), ("--netcdf", args.netcdf), ("--map", args.map),
                         ("--save-model", args.save_model)):
        if not path:
            continue
        own, what = families[option]
        suffix = os.path.splitext(str(path))[1].lower()
        if suffix in own:
            continue
        if option == "--map":
            raise usage_error(f"--map {path}: the image format is taken from the suffix, and "
                              f"{suffix or 'no suffix'!s} is not one matplotlib writes; use one "
                              f"of {', '.join(s[1:] for s in images)} (e.g. PRED.png).")
        if suffix in known:
            hint = {"--out": " (NetCDF goes to --netcdf PRED.nc)",
                    "--netcdf": " (a GeoTIFF goes to --out PRED.tif)"}.get(option, "")
            raise usage_error(f"{option} {path} writes {what}, but its suffix {suffix} names "
                              f"another format; give it a {own[0]} name{hint}.")


def _refuse_inputs(args: argparse.Namespace, outputs: list[str],
                   usage_error: Callable[[str], Exception]) -> None:
    """Refuse an output that is one of the command's inputs (INPUT, --like, --exclude,
    --covariate), compared after resolving ``.``, ``..`` and links."""
    inputs = {os.path.realpath(str(p)) for p in (getattr(args, name, None) for name in (
        "input", "like", "exclude")) if isinstance(p, str)}
    inputs |= {os.path.realpath(str(p)) for p in (getattr(args, "covariate", None) or ())}
    inputs |= {os.path.realpath(str(p)) for p in (getattr(args, "inputs", None) or ())}
    for path in outputs:
        if os.path.realpath(path) in inputs:
            raise usage_error(f"{path} is one of this command's inputs; writing it would "
                              "replace the data being read (also with --overwrite). Write "
                              "elsewhere, then move the file if that is what you want.")


def check_fit_arguments(args: argparse.Namespace,
                        usage_error: Callable[[str], Exception]) -> list[str]:
    """Refuse, before anything is read or fitted, the arguments of ``geogp fit`` that cannot
    work; returns the output paths.

    - the outputs must be different files (compared after resolving ``.``, ``..`` and links),
      carry suffixes of their own formats, and be writable
      (:func:`geogp.frontend.io.check_writable`:
      no existing file without ``--overwrite``, never a device, pipe or folder);
    - ``--quantiles`` strictly between 0 and 1, without duplicates;
    - ``--crs`` a CRS that PROJ knows; ``--samples`` ≥ 0; ``--features`` ≥ 4;
    - ``--model-key-file`` readable and not empty (its bytes go to ``args.model_key``).
    """
    if args.out and os.path.splitext(str(args.out))[1].lower() in NETCDF_SUFFIXES:
        if args.netcdf:  # GDAL's habit: the suffix picks the format
            raise usage_error(f"--out {args.out} is a NetCDF file already; drop --netcdf "
                              f"{args.netcdf}, or give --out a GeoTIFF name.")
        args.netcdf, args.out = args.out, None
    outputs = output_paths(args)
    resolved = [os.path.realpath(p) for p in outputs]
    _refuse_inputs(args, outputs, usage_error)
    if len(set(resolved)) != len(resolved):
        same = sorted({p for p, r in zip(outputs, resolved, strict=True) if resolved.count(r) > 1})
        raise usage_error(f"the output paths must differ from each other; {same} are the same "
                          "file.")
    _check_suffixes(args, usage_error)
    for path in outputs:
        check_writable(path, args.overwrite)
    if args.quantiles is not None:
        check_quantiles(args.quantiles, name="--quantiles")
    if args.crs is not None:
        as_crs(args.crs)
    if args.features is not None and args.features < 4:
        raise usage_error(f"--features must be ≥ 4; got {args.features}.")
    if args.samples < 0:
        raise usage_error(f"--samples must be ≥ 0; got {args.samples}.")
    args.model_key = None
    if getattr(args, "model_key_file", None) is not None:
        if not args.save_model:
            raise usage_error("--model-key-file signs the model of --save-model; give both.")
        args.model_key = read_key_file(args.model_key_file)
    return outputs


def check_output_memory(args: argparse.Namespace, da: xr.DataArray) -> None:
    """Refuse, before the fit, a prediction (and ``--samples``) on ``da``'s grid whose
    arrays would not fit in memory (:mod:`geogp.core.memory`: the estimate is in the message)."""
    y, x = find_spatial_dims(da)
    slices = int(np.prod([da.sizes[d] for d in da.dims if d not in (y, x)], dtype=np.int64))
    check_prediction(da.sizes[y], da.sizes[x], slices, len(args.quantiles or ()))
    if args.samples:
        check_samples(args.samples, da.sizes[y], da.sizes[x], slices)


def dated_outputs(args: argparse.Namespace, da: xr.DataArray,
                  usage_error: Callable[[str], Exception]
                  ) -> list[tuple[tuple[str, int], str]]:
    """[((time dimension, index), path)] of an ``--out`` GeoTIFF name holding ``{date}``: one
    file per date of the stack ``da``, the date as YYYY-MM-DD, each checked as the other
    outputs are (writable, not an input); [] for any other ``--out``."""
    if not args.out or DATE_FIELD not in str(args.out):
        return []
    others = [d for d in da.dims if d not in find_spatial_dims(da)]
    coord = da[others[0]].values if len(others) == 1 and others[0] in da.coords else None
    if coord is None or not np.issubdtype(coord.dtype, np.datetime64):
        raise usage_error(f"--out {args.out}: {DATE_FIELD} names one GeoTIFF per date, and "
                          f"{args.input} has no dates (a time dimension with dates); name one "
                          "file.")
    names = [str(args.out).replace(DATE_FIELD, str(np.datetime_as_string(t, unit="D")))
             for t in coord]
    if len(set(names)) < len(names):
        raise usage_error(f"--out {args.out}: two dates of the stack fall on one day, so "
                          f"{DATE_FIELD} would name one file twice; write NetCDF (.nc).")
    _refuse_inputs(args, names, usage_error)
    for name in names:
        check_writable(name, args.overwrite)
    return [((others[0], k), name) for k, name in enumerate(names)]
