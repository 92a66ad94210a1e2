"""``geogp fit``: fit a raster or a table of points and write the predicted mean and std.

    geogp fit INPUT.(tif|nc|csv|gpkg|geojson|shp) --out PRED.tif [--model auto|lattice|afs|...
        --netcdf PRED.nc --map PRED.png --samples N --covariate COV.tif --save-model M.npz ...]

Rasters are read with :func:`geogp.frontend.io.open_raster` (NaN or nodata = missing); point tables
need their CRS (``--crs``, or the vector file's own) and a prediction grid (``--like GRID.tif`` or
``--resolution R``). Exit codes as in :mod:`geogp.cli`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from geogp.cli.options import (
    DATE_FIELD,
    add_memory_option,
    add_model_options,
    add_run_options,
    exclusion_mask,
    model_keywords,
    nonnegative_int,
    positive_int,
)
from geogp.cli.runner import EXIT_OK, usage_error
from geogp.core.io_atomic import keep_previous
from geogp.exceptions import InputError
from geogp.families import AUTO, family

__all__ = ["add_fit_parser", "run_fit"]


def add_fit_parser(subparsers: argparse._SubParsersAction, epilog: str) -> argparse.ArgumentParser:
    """Add the ``fit`` sub-command to ``subparsers``; returns its parser."""
    fit = subparsers.add_parser(
        "fit", help="fit a raster and write the predicted mean and std",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog,
        description="Fit a Gaussian process to INPUT (GeoTIFF or NetCDF; NaN/nodata = missing) "
                    "and write the prediction on the same grid: band 1 = mean, band 2 = std "
                    "of a new observation (noise included); wavelet_basis models add a band of "
                    "their effective lengthscale, --robust a band of each observation's "
                    "weight, --local-range bands of the local range and sd. A stack of "
                    "dates (a NetCDF time dimension, several INPUT rasters, or one with dated "
                    "bands) is an image series, filled jointly by the space-time model "
                    "(--model auto picks it).")
    fit.add_argument("input", metavar="INPUT", nargs="+",
                     help="raster to fill (.tif or .nc), or points: a table (.csv) with "
                          "--crs, or a GeoPackage/GeoJSON/shapefile (needs geopandas: pip "
                          "install 'geogp[vector]'); with --like or --resolution. Several "
                          "rasters on one grid are an image series (one date each, from "
                          "--time or from the file names: 2020-06-01, 20200601, A2020153)")
    fit.add_argument("--time", metavar="DATES",
                     help="the dates of an image series, comma-separated (YYYY-MM-DD), one per "
                          "INPUT file, or one per band of a single multi-band GeoTIFF")
    fit.add_argument("--out", required=True, metavar="PRED.tif|PRED.nc",
                     help="output: a GeoTIFF, or a NetCDF file when the suffix says so (.nc); "
                          f"a GeoTIFF name with {DATE_FIELD} gives one GeoTIFF per date of a "
                          f"stack, the date written YYYY-MM-DD (e.g. filled_{DATE_FIELD}.tif)")
    fit.add_argument("--var", metavar="NAME", help="variable of a NetCDF file")
    pts = fit.add_argument_group("points (INPUT.csv, .gpkg, .geojson, .shp)")
    pts.add_argument("--x", default="x", metavar="COL", help="x / longitude column (default x)")
    pts.add_argument("--y", default="y", metavar="COL", help="y / latitude column (default y)")
    pts.add_argument("--value", default="value", metavar="COL",
                     help="column of the measured values (default value)")
    pts.add_argument("--crs", metavar="CRS",
                     help="CRS of a CSV table, e.g. EPSG:4326 (vector files carry their own; "
                          "with --crs they are reprojected to it)")
    pts.add_argument("--like", metavar="GRID.tif",
                     help="predict on this raster's grid (its CRS must match the table's)")
    pts.add_argument("--resolution", type=float, metavar="R",
                     help="or predict on a grid of R × R cells (CRS units) over the points")
    add_model_options(fit)
    add_memory_option(fit)
    fit.add_argument("--likelihood", default="gaussian",
                     choices=("gaussian", "poisson", "bernoulli", "student_t"),
                     help="observation model: gaussian (default) or counts (poisson), 0/1 "
                          "(bernoulli), outliers (student_t): an SVGP on AFS features")
    fit.add_argument("--share-hyperparameters", action="store_true",
                     help="with a time/band dimension: learn on the first slice, reuse for all")
    fit.add_argument("--latent", action="store_true", help="add the latent std as band 3")
    fit.add_argument("--quantiles", type=float, nargs="+", metavar="Q",
                     help="add predictive quantiles as extra bands, e.g. 0.05 0.95")
    fit.add_argument("--covariate", action="append", default=[], metavar="COV.tif",
                     help="a raster on the same grid (e.g. elevation) used as a regressor of the "
                          "mean (external drift); repeat for several. Lattice model only")
    fit.add_argument("--samples", type=int, default=0, metavar="N",
                     help="also write N posterior sample rasters (conditional simulations of "
                          "the field; lattice, AFS, wavelet_basis and space-time models, the last "
                          "drawn jointly over the dates): extra bands 'samples sample=i' after "
                          "the others (of each date's GeoTIFF for a stack), and a 'samples' "
                          "variable in --netcdf")
    fit.add_argument("--seed", type=nonnegative_int, default=0,
                     help="seed of --samples (default 0)")
    fit.add_argument("--posterior-tile", type=positive_int, default=None, metavar="N",
                     help="lattice model: compute the posterior on tiles with cores of N "
                          "cells a side (default: the whole raster up to 4e5 cells within "
                          "--max-memory, else the largest tile that fits it)")
    fit.add_argument("--robust", action="store_true",
                     help="lattice and AFS models: a noise model with gross errors "
                          "(cloud-mask leaks, spikes), learnt by EM and down-weighted; on the "
                          "lattice model 3-4x the time of a plain fit on clean data, "
                          "faster than it on contaminated data (docs/gvi.md)")
    fit.add_argument("--local-range", action="store_true",
                     help="lattice model: let the range and sd vary over the raster (rough "
                          "and smooth terrain alike; varying=True, docs/lattice.md; without "
                          "the option they vary only where the data say so) and write them "
                          "as two more bands, local_range and local_sd")
    where = fit.add_mutually_exclusive_group()
    where.add_argument("--workers", type=positive_int, default=None, metavar="N",
                       help="compute the posterior's tiles (lattice and space-time models) "
                            "on a local dask cluster of N worker processes (one thread each). "
                            "Each holds one tile's work: the lattice model's memory estimate "
                            "and --max-memory count all N (tiles sized to fit; where none "
                            "fit, they run in this process)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="compute them on the dask.distributed cluster at ADDRESS, e.g. "
                            "tcp://10.0.0.1:8786 (start one with dask-scheduler and "
                            "dask-worker --nthreads 1)")
    fit.add_argument("--exclude", metavar="MASK.tif",
                     help="raster on the prediction grid, non-zero where no prediction is "
                          "wanted (e.g. outside a reprojected raster's footprint): those cells "
                          "stay nodata in every output")
    fit.add_argument("--cog", action="store_true", help="write a Cloud-Optimized GeoTIFF")
    fit.add_argument("--netcdf", metavar="PRED.nc", help="also write CF NetCDF")
    fit.add_argument("--map", metavar="PRED.png", help="also draw maps (obs, mean, std)")
    fit.add_argument("--save-model", metavar="MODEL.npz", help="save the fitted model")
    fit.add_argument("--model-key-file", metavar="KEY", help="sign the saved model with the "
                     "bytes of this file (HMAC-SHA256; loading then needs the same key)")
    add_run_options(fit, quiet_help="no progress bars or summary")

    return fit


def _exclusion(args, da):
    """--exclude: a boolean (y, x) DataArray on ``da``'s grid, True where the mask raster is
    non-zero (checked before the fit); None without the option."""
    if not args.exclude:
        return None
    # lazy: keeps geogp --help light
    import xarray as xr

    from geogp.frontend.adapters import find_spatial_dims

    y_dim, x_dim = find_spatial_dims(da)
    grid = SimpleNamespace(y=da[y_dim].values, x=da[x_dim].values)
    mask = exclusion_mask(args.exclude, grid)
    if mask.all():  # before the fit: the output would be NaN everywhere
        raise InputError(f"the exclusion mask {args.exclude!r} is non-zero at every cell, so "
                         "every output cell would be nodata; nothing would be written but "
                         "nodata. Check the mask (sites to keep are 0).")
    return xr.DataArray(mask, dims=(y_dim, x_dim))


def _excluded(pred, mask):
    """``pred`` with NaN wherever ``mask`` is True, attributes kept."""
    for name, var in pred.data_vars.items():
        if set(mask.dims) <= set(var.dims):
            pred[name] = var.where(~mask).assign_attrs(var.attrs)
    return pred


def _keep_previous(outputs) -> dict:
    """{path: copy} of the outputs that exist already (``--overwrite``): hidden copies beside
    them (:func:`keep_previous`), so that a failed run can put them back."""
    kept = {}
    try:
        for path in map(Path, outputs):
            if path.is_file():  # check_writable refused devices and pipes: never read one here
                kept[path] = keep_previous(path)
    except BaseException:
        _discard(kept)
        raise
    return kept


def _discard(kept: dict) -> None:
    for copy in kept.values():
        with contextlib.suppress(OSError):
            copy.unlink()


def _roll_back(written: list, kept: dict) -> None:
    """Take back this run's outputs: a replaced file gets its previous content back, a new
    one is removed; the copies of outputs not yet written go (a hard link onto its own file
    would survive ``os.replace``)."""
    for path in map(Path, written):
        with contextlib.suppress(OSError):  # best effort: the run's own error is the one to tell
            if path in kept:
                os.replace(kept.pop(path), path)
            else:
                path.unlink()
    _discard(kept)


def run_fit(args: argparse.Namespace, echo: Callable[[str], object]) -> int:
    """Run ``geogp fit`` with parsed ``args``; ``echo`` prints unless ``--quiet``. With
    ``--workers`` or ``--scheduler`` a dask client is the default client during the run, and
    the lattice and space-time models' posterior tiles run on its workers."""
    with _dask_client(args, echo):
        return _run_fit(args, echo)


@contextlib.contextmanager
def _dask_client(args, echo):
    if not (args.workers or args.scheduler):
        yield None
        return
    # lazy: keeps geogp --help light
    from distributed import Client, LocalCluster

    if args.workers:
        with _sigint_ignored():  # the workers inherit it: Ctrl-C stops this process alone,
            # which closes them, instead of each printing its own tracebacks
            cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                   processes=True, dashboard_address=None)
        with cluster, Client(cluster) as client:
            echo(f"dask: a local cluster of {args.workers} worker processes")
            yield client
    else:
        with Client(args.scheduler) as client:
            echo(f"dask: the cluster at {args.scheduler} "
                 f"({len(client.scheduler_info()['workers'])} workers)")
            yield client


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while processes are started (they keep it ignored: Python leaves an
    inherited SIG_IGN as it is), then this process's own handler back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _open_input(args, series: bool):
    """The raster of INPUT, or the image series of several INPUTs (or of one multi-band
    GeoTIFF with --time, or whose band descriptions are dates)."""
    # lazy: keeps --help light
    from geogp.frontend.io import (
        band_names,
        date_in_name,
        open_raster,
        open_stack,
        series_from_bands,
    )

    times = None if args.time is None else [t for t in args.time.split(",") if t.strip()]
    if series:
        return open_stack(args.inputs if len(args.inputs) > 1 else args.inputs[0],
                          times=times, var=args.var)
    da = open_raster(args.input, var=args.var)
    if "band" in da.dims and all(date_in_name(n) is not None for n in band_names(da)):
        return series_from_bands(da)  # its bands are dated: a series
    return da


def _run_fit(args, echo) -> int:
    # lazy: keeps geogp --help light
    from geogp.cli.fit_checks import check_fit_arguments, check_output_memory, dated_outputs
    from geogp.cli.fit_points import TABLE_SUFFIXES, points_grid, read_table
    from geogp.core.progress import bar
    from geogp.frontend.adapters import find_spatial_dims
    from geogp.frontend.api import GeoRegressor
    from geogp.frontend.io import check_geotiff_grid, open_raster, write_geotiff, write_netcdf

    args.inputs = list(args.input)  # several files: an image series
    args.input = args.inputs[0]
    outputs = check_fit_arguments(args, usage_error)  # fail before the expensive part
    given = model_keywords(args)  # kernel and n_features go to GeoRegressor itself
    for key, flag in (("mid_scale", "--mid-scale"), ("alpha", "--alpha")):
        if key in given and args.likelihood != "gaussian":
            raise usage_error(f"{flag} belongs to the lattice model (Gaussian likelihood).")
    if args.max_memory is not None:
        if args.likelihood != "gaussian":
            raise usage_error("--max-memory applies to the Gaussian models.")
        given["max_bytes"] = args.max_memory * 2**30
    if args.posterior_tile is not None:
        if args.likelihood != "gaussian" or (
                args.model != AUTO and not family(args.model).posterior_on_tiles):
            raise usage_error("--posterior-tile belongs to the lattice model.")
        given["posterior_tile"] = args.posterior_tile
    if args.robust:
        if args.likelihood != "gaussian" or (
                args.model != AUTO and not family(args.model).fits_robust):
            raise usage_error("--robust belongs to the lattice and AFS models (Gaussian "
                              "likelihood).")
        given["robust"] = True
    if args.local_range:
        if args.likelihood != "gaussian" or (
                args.model != AUTO and not family(args.model).maps_local_scales):
            raise usage_error("--local-range belongs to the lattice model (Gaussian "
                              "likelihood).")
        given["varying"] = True
    options = {k: given[k] for k in ("maxiter", "mid_scale", "alpha", "max_bytes",
                                     "posterior_tile", "robust", "varying")
               if k in given} or None
    gaussian = args.likelihood == "gaussian"  # else an SVGP: --model and sharing not used
    model = GeoRegressor(args.model, likelihood=args.likelihood,
                         kernel=args.kernel, n_features=args.features,
                         share_hyperparameters=args.share_hyperparameters and gaussian,
                         progress=not args.quiet, options=options)
    table, per_date = None, []
    series = len(args.inputs) > 1 or args.time is not None
    if series and str(args.input).lower().endswith(TABLE_SUFFIXES):
        raise usage_error("several inputs and --time make an image series of rasters; a "
                          "table of points is one input.")
    if str(args.input).lower().endswith(TABLE_SUFFIXES):
        if args.covariate:
            raise usage_error("--covariate needs a raster INPUT (the covariates live on its "
                              "cells).")
        table = read_table(args)
        da = points_grid(args, table)
        check_geotiff_grid(da)  # --like: a GeoTIFF needs a regular grid
        mask = _exclusion(args, da)
        check_output_memory(args, da)
        model.crs = args.crs
        model.fit(table, x=args.x, y=args.y, value=args.value, grid=da)
    else:
        da = _open_input(args, series)
        check_geotiff_grid(da)  # --out is a GeoTIFF: refused now, not after the fit
        per_date = dated_outputs(args, da, usage_error)  # before the fit, as the others
        if per_date:
            outputs = [p for p in outputs if p != args.out] + [p for _, p in per_date]
        mask = _exclusion(args, da)
        # refused now, not after the fit: one GeoTIFF's sample bands need one 2-D grid (NetCDF
        # and one GeoTIFF per date take a stack's samples)
        if args.samples and args.out and not per_date:
            others = [d for d in da.dims if d not in find_spatial_dims(da)]
            if others:
                raise usage_error(
                    f"--samples writes one band per sample of a single 2-D raster into a "
                    f"GeoTIFF; {args.input} also has the dimension(s) {others} "
                    f"({', '.join(f'{d}: {da.sizes[d]}' for d in others)}). Write NetCDF "
                    "(--out PRED.nc) or, for a stack, one GeoTIFF per date (--out "
                    "NAME_{date}.tif); or extract one slice first (e.g. gdal_translate -b 1, "
                    "or xarray's isel).")
        check_output_memory(args, da)
        covariates = [open_raster(c) for c in args.covariate] or None
        model.fit(da, covariates=covariates)
    pred = model.predict(like=da, quantiles=args.quantiles)
    if args.samples:
        with bar(f"posterior samples ({args.samples})", 1, not args.quiet, unit="pass") as pb:
            draws = model.sample(args.samples, like=da, seed=args.seed)
            pb.update(1)
        pred["samples"] = draws.assign_coords(sample=np.arange(1, args.samples + 1))
    if mask is not None:
        pred = _excluded(pred, mask)
    extra = ()
    if family(model.model_).maps_lengthscale:  # its local lengthscale: a band, a --map panel
        pred["effective_lengthscale"] = model.effective_lengthscale(like=da)
        extra = ("effective_lengthscale",)
    if args.robust:  # what the fit distrusted: a band
        pred["obs_weight"] = model.observation_weight(like=da)
        extra = (*extra, "obs_weight")
    if args.local_range:  # where the field is rough: two bands
        scales = model.local_scales(like=da)
        pred["local_range"], pred["local_sd"] = scales["local_range"], scales["local_sd"]
        extra = (*extra, "local_range", "local_sd")
    # each write is atomic; a failed later one takes the earlier ones back: files made by this
    # run are removed, files it replaced (--overwrite) get their previous content back
    written, kept = [], _keep_previous(outputs)
    try:
        with bar("writing", len(outputs), not args.quiet, unit="file") as pb:
            tiffs = per_date or ([(None, args.out)] if args.out else [])  # None: .nc --out
            for date, path in tiffs:
                write_geotiff(pred if date is None else pred.isel({date[0]: date[1]}), path,
                              overwrite=args.overwrite, latent=args.latent,
                              quantiles=bool(args.quantiles), cog=args.cog,
                              samples=bool(args.samples), extra=extra)
                written.append(path)
                pb.update(1)
            if args.netcdf:
                write_netcdf(pred, args.netcdf, overwrite=args.overwrite)
                written.append(args.netcdf)
                pb.update(1)
            if args.map:  # lazy: keeps geogp --help light
                import matplotlib

                matplotlib.use("Agg")
                from geogp.frontend.plotting import save_maps

                if table is not None:  # the points are the data; --like is only a grid
                    import pandas as pd

                    pts = table[[args.x, args.y, args.value]].apply(pd.to_numeric,
                                                                   errors="coerce")
                    save_maps(args.map, None, pred, points=pts, overwrite=args.overwrite,
                              title=str(args.value))
                else:
                    save_maps(args.map, da, pred, overwrite=args.overwrite,
                              title=str(da.name or ""))
                written.append(args.map)
                pb.update(1)
            if args.save_model:
                model.save(args.save_model, overwrite=args.overwrite, key=args.model_key)
                written.append(args.save_model)
                pb.update(1)
    except BaseException:
        _roll_back(written, kept)
        raise
    _discard(kept)
    echo(model.summary())
    echo("wrote " + (", ".join(outputs) if len(outputs) <= 6 else
                     f"{len(outputs)} files: {outputs[0]}, {outputs[1]} … {outputs[-1]}"))
    return EXIT_OK
