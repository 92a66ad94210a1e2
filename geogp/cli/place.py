"""``geogp place``: suggest where to measure next on a raster (docs/placement.md).

:mod:`geogp.cli` wires :func:`add_place_parser` and :func:`place_sites` into the command
(:func:`run_place` runs it with the command's conventions)::

    geogp place INPUT.(tif|nc) --n 20 --out sites.geojson [--time DATE
        --model auto|lattice|nonstationary|afs|wavelet_basis|spacetime
        --strategy auto|reduction|mi|variance|krause --criterion marginal|joint
        --features 500 --min-distance D --exclude MASK.tif --csv sites.csv --map sites.png
        --measured POINTS.(csv|gpkg) [--refit] --var NAME --overwrite --quiet]

INPUT is read and fitted exactly as by ``geogp fit`` (:func:`geogp.frontend.io.open_raster`,
:class:`geogp.frontend.api.GeoRegressor`: NaN/nodata = missing, CRS kept, longitude scaled by
cos(latitude) on lon/lat rasters). Every cell of the grid is a candidate (gaps included) unless
the exclusion raster is non-zero there, and every cell is a target. By default (``--model
auto``) the model is the one ``geogp fit`` would choose: the lattice model on regular rasters,
placed on its whole-lattice posterior (:mod:`geogp.placement.lattice`: strategies reduction,
the default there, mi and variance; mi scores every cell to first order through random
probes), or tile by tile where its posterior needs tiles (:mod:`geogp.placement.lattice_tiled`).
A stack of dates (a time dimension) is fitted jointly (the space-time model) and the sites
are for the next date (``--time`` for another), from the posterior at that date
(:mod:`geogp.placement.spacetime`). ``--model afs`` (or ``--kernel``/``--features``) fits a
dense AFS model (mi, the default
there, variance and krause; marginal mi is evaluated over all cells by bounds + exact re-ranking,
:mod:`geogp.placement.screen`). ``--model nonstationary`` (alias ``wavelet``) fits the
lattice model with a range and sd that vary in space and places as with the lattice model.
``--model wavelet_basis`` fits the thesis's multiresolution wavelet-basis model and places on
its sparse posterior (:mod:`geogp.placement.wavelet`: strategies mi, variance and krause; mi
scores a stratified random subset of ``--max-targets`` cells). ``--criterion
joint`` scores a stratified random subset of ``--max-targets`` cells. Distances
(``--min-distance``) are in the raster's CRS units (degrees of latitude on lon/lat rasters);
by default ¼ of the shortest learnt lengthscale (at most half the spacing of the sites spread
evenly over the candidates), stated in the summary. Outputs are written
atomically (temp file + os.replace).

Exit codes as in :mod:`geogp.cli`: 0 ok; 2 bad input or usage (one line, no traceback);
1 other errors.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numpy as np

from geogp.cli.options import MODEL_CHOICES, add_model_options, add_run_options, spacing
from geogp.cli.runner import run_command
from geogp.core.io_atomic import atomic_path, check_writable
from geogp.exceptions import InputError
from geogp.families import AUTO, FALLBACK, family

__all__ = ["add_place_parser", "run_place", "place_sites"]

_EPILOG = """\
examples:
  geogp place dem.tif --n 20 --out sites.geojson
  geogp place sst.nc --var sst --n 10 --out sites.geojson --csv sites.csv --map sites.png
  geogp place dem.tif --n 30 --out sites.geojson --strategy variance --min-distance 500
  geogp place dem.tif --n 5 --out sites.geojson --exclude lakes.tif --overwrite
  geogp place dem.tif --n 10 --out next.geojson --measured new.csv   # after measuring
  geogp place ndvi_stack.nc --n 10 --out next.geojson   # a stack: sites for the next date

Strategies: auto (default: reduction with the lattice model, mi with the others), reduction
(lattice model: the largest expected drop of the summed variance over every cell), mi (thesis
log-determinant criterion over all cells, marginal form), variance (largest predictive
variance), krause (Krause et al. 2008 mutual information between the sites and the rest of
the grid; AFS and wavelet_basis models). Sites keep a minimum distance of 1/4 of the
shortest learnt lengthscale unless --min-distance says otherwise (0: none).
exit codes: 0 ok, 2 usage or bad input, 1 other errors.
"""


def add_place_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``place`` sub-command to an argparse ``subparsers`` object; returns its parser."""
    p = subparsers.add_parser(
        "place", help="suggest where to measure next (GeoJSON of sites)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="Fit a Gaussian process to INPUT (GeoTIFF or NetCDF; NaN/nodata = missing) "
                    "and suggest the next N measurement sites on its grid, greedily, with the "
                    "hyperparameters fixed; on a stack of dates, for its next date (--time). "
                    "Writes a GeoJSON FeatureCollection of points.")
    p.add_argument("input", metavar="INPUT",
                   help="raster (.tif or .nc), or a stack of dates (.nc with a time dimension)")
    p.add_argument("--n", type=int, default=10, metavar="N", help="number of sites (default 10)")
    p.add_argument("--out", required=True, metavar="SITES.geojson", help="output GeoJSON")
    p.add_argument("--strategy", default="auto",
                   choices=("auto", "mi", "variance", "krause", "reduction"),
                   help="acquisition. auto (default): reduction with the lattice model (the "
                        "largest expected drop of the summed variance over every cell: it "
                        "reduced the error in gaps more than mi in benchmarks/"
                        "bench_placement_value.py) and the space-time model, mi with the "
                        "others")
    p.add_argument("--criterion", default="marginal", choices=("marginal", "joint"),
                   help="for mi: marginal (default) or joint log-determinant")
    p.add_argument("--var", metavar="NAME", help="variable of a NetCDF file")
    p.add_argument("--model", default="auto", choices=MODEL_CHOICES,
                   help="auto (default): the model geogp fit chooses, the lattice model on "
                        "regular rasters (its whole-lattice posterior; strategies reduction, "
                        "mi and variance; mi scores every cell to first order, through 128 "
                        "random probes); afs (dense posterior with --features, rank-one "
                        "updates; mi, variance and krause; implied by --kernel or --features); "
                        "nonstationary, or its alias wavelet (the lattice model with a range "
                        "and sd that vary in space; as the lattice model); wavelet_basis "
                        "(the thesis's wavelet-basis model; sparse posterior; mi, variance and "
                        "krause); "
                        "exact (dense exact GP, for small rasters); spacetime (a stack of "
                        "dates, fitted jointly, the default there: sites for --time)")
    add_model_options(p, models=False, lattice=False, features_help=(
        "number of Fourier features of an AFS placement model (implies --model afs under "
        "auto; default 2000, with the dense solver, at most 4096)"))
    p.add_argument("--min-distance", type=_distance, default="auto", metavar="D",
                   help="minimum distance between sites, in CRS units (degrees of latitude "
                        "on lon/lat rasters); default auto: 1/4 of the shortest learnt "
                        "lengthscale, at most half the spacing of the sites spread evenly over "
                        "the uncertain cells; 0 allows neighbouring cells")
    p.add_argument("--exclude", metavar="MASK.tif",
                   help="raster on the same grid: sites are not placed where it is non-zero")
    p.add_argument("--max-targets", type=int, default=1000, metavar="T",
                   help="mi: largest target set scored through one explicit matrix (default "
                        "1000); above it the marginal criterion still scores every cell "
                        "(bounds + exact re-ranking), the joint one a stratified random subset "
                        "of T cells")
    p.add_argument("--max-memory", type=float, default=4.0, metavar="GIB",
                   help="refuse, with the estimate, a lattice fit or a placement that would "
                        "need more than this many GiB (default 4; placement about 400 bytes per "
                        "cell). A lattice posterior that passes it on the whole raster is "
                        "computed, and placed, tile by tile")
    p.add_argument("--measured", metavar="POINTS.csv|.gpkg",
                   help="measurements made since the raster (the active loop: place, measure, "
                        "place again): a CSV with columns x, y (the raster's CRS) and value, "
                        "or a GeoPackage/GeoJSON/shapefile of points with a value column "
                        "(reprojected to the raster's CRS; needs geopandas). Each is taken at "
                        "its nearest cell; the posterior is updated with them without "
                        "refitting the hyperparameters (add --refit to refit with them as data)")
    p.add_argument("--x", default="x", metavar="COL",
                   help="x column of the --measured CSV (default x)")
    p.add_argument("--y", default="y", metavar="COL",
                   help="y column of the --measured CSV (default y)")
    p.add_argument("--value", default="value", metavar="COL",
                   help="value column of the --measured points (default value)")
    p.add_argument("--refit", action="store_true",
                   help="with --measured: write the measurements into the raster and refit")
    p.add_argument("--time", metavar="DATE",
                   help="with a stack of dates (a time dimension, fitted jointly): the date to "
                        "measure at, e.g. 2024-06-01 (default: the next date, the last plus the "
                        "median step); the sites are chosen on the posterior at that date")
    p.add_argument("--csv", metavar="SITES.csv", help="also write the table as CSV")
    p.add_argument("--map", metavar="SITES.png", help="also draw the sites over the std map")
    add_run_options(p, quiet_help="no progress bars or summary")
    return p


def _distance(text: str):
    """--min-distance: 'auto' or a number (checked to be ≥ 0 later, with a clear message)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a distance or 'auto'; got {text!r}") from None


def run_place(args: argparse.Namespace) -> int:
    """Run ``geogp place`` with parsed ``args``; returns the exit code (0, 1 or 2)."""
    return run_command(place_sites, args, quiet=bool(getattr(args, "quiet", False)))


def _check_args(args) -> None:
    """What only the command checks (its output paths, --n, --max-targets) before the
    raster is read; :func:`geogp.frontend.api_placement.place` checks the rest."""
    outputs = [p for p in (args.out, args.csv, args.map) if p]
    if len(set(outputs)) != len(outputs):
        raise InputError("the output paths must differ from each other.")
    for path in outputs:  # fail before the expensive part
        check_writable(path, args.overwrite)
    if args.n < 1:
        raise InputError(f"--n must be ≥ 1; got {args.n}.")
    if not (np.isfinite(args.max_memory) and args.max_memory > 0):
        raise InputError(f"--max-memory must be a positive number of GiB; got {args.max_memory}.")
    most = family(FALLBACK).max_placement_features
    if args.features is not None and not 4 <= args.features <= most:
        raise InputError(f"--features must be between 4 and {most} (placement uses the dense "
                         f"posterior); got {args.features}.")
    md = args.min_distance
    if md != "auto" and (not np.isfinite(md) or md < 0):
        raise InputError(f"--min-distance must be ≥ 0 or 'auto'; got {md}.")
    model = getattr(args, "model", AUTO)
    if model != AUTO and not family(model).takes_features and (args.features is not None
                                                             or args.kernel is not None):
        raise InputError(f"--features and --kernel are AFS options; --model {model} takes "
                         "neither.")
    if args.refit and not args.measured:
        raise InputError("--refit refits with the --measured points; pass --measured too.")
    if args.max_targets < 1:
        raise InputError(f"--max-targets must be ≥ 1; got {args.max_targets}.")


def place_sites(args: argparse.Namespace, echo: Callable[[str], object]) -> int:
    """Run ``geogp place`` with parsed ``args``: read the inputs, place the sites
    (:func:`geogp.frontend.api_placement.place`), write them; ``echo`` prints unless ``--quiet``.
    Returns 0; errors are raised (:func:`run_place` reports them)."""
    # lazy: keeps geogp --help light
    from geogp.frontend.api_placement import is_stack, place
    from geogp.frontend.io import open_raster
    from geogp.placement import write_csv, write_geojson

    _check_args(args)
    da = open_raster(args.input, var=args.var)
    if da.ndim != 2 and not (da.ndim == 3 and is_stack(da)):
        raise InputError(f"geogp place works on one 2-D raster or a stack of dates (a time "
                         f"dimension); {args.input!r} has dimensions {list(da.dims)}. Select "
                         "one (e.g. with --var, or cut the file).")
    measured = _read_measured(args, da) if args.measured else None
    exclude = _exclusion(args.exclude) if args.exclude else None
    options = {"maxiter": args.maxiter} if args.maxiter is not None else None
    done = place(da, args.n, model=getattr(args, "model", AUTO), kernel=args.kernel,
                 n_features=args.features, measured=measured, refit=args.refit, x=args.x,
                 y=args.y, value=args.value,
                 strategy=args.strategy, criterion=args.criterion, exclude=exclude,
                 min_distance=args.min_distance, max_targets=args.max_targets,
                 max_memory=args.max_memory * 2**30, progress=not args.quiet, options=options,
                 time=args.time)
    for note in done.notes:
        echo(note.replace("(hyperparameters kept).", f"from {args.measured} (hyperparameters "
                          "kept; --refit refits with them)."))
    geo, out = done.model, done.sites
    strategy = out.attrs["strategy"]
    write_geojson(out, args.out, crs=geo.spec_.crs, overwrite=args.overwrite)
    if args.csv:
        write_csv(out, args.csv, overwrite=args.overwrite)
    if args.map:
        _save_map(geo, out, strategy, args.map, args.overwrite)
    a = out.attrs
    echo(f"{len(out)} site(s) by {strategy}"
         + (f" ({args.criterion})" if strategy == "mi" else "")
         + f" among {a['n_candidates']} cells; uncertainty scored on {a['n_targets']} target "
         f"cell(s){' (stratified random subset)' if a['targets_thinned'] else ''}.")
    if a.get("exact_evaluations"):
        ev = a["exact_evaluations"]
        gap = a["criterion_gap"]
        echo(f"each pick is the best over all cells: {min(ev)}–{max(ev)} exact evaluations per "
             "site" + (" (every pick certified by the bounds)." if gap == 0 else
                       f"; the bounds leave a relative gap of at most {gap:.2%}."))
    echo(_distance_note(a, *geo.spec_.to_model(geo.target_.y, geo.target_.x)))
    if len(out):
        before = out["mean_std_after"].iloc[0] + out["std_reduction"].iloc[0]
        echo(f"mean latent std over the targets: {before:.4g} → "
             f"{out['mean_std_after'].iloc[-1]:.4g}")
    echo("wrote " + ", ".join(p for p in (args.out, args.csv, args.map) if p))
    return 0


def _exclusion(path: str):
    """The --exclude raster, named by its path (for the message if it is off the grid)."""
    from geogp.frontend.io import open_raster

    mask = open_raster(path)
    mask.name = path
    return mask


def _read_measured(args, da):
    """The measurements in ``args.measured`` as a table with columns ``args.x``, ``args.y``,
    ``args.value`` in the raster's CRS: a CSV, or a vector file of points reprojected to it."""
    # lazy: keeps geogp --help light
    import rioxarray  # noqa: F401  (the .rio accessor)

    from geogp.cli.fit_points import read_table

    path = args.measured
    crs = da.rio.crs
    table = read_table(argparse.Namespace(input=path, x=args.x, y=args.y, value=args.value,
                                          crs=None if crs is None else crs.to_wkt()))
    if len(table) == 0:
        raise InputError(f"the measurements {path!r} hold no rows.")
    return table


def _distance_note(attrs, my, mx) -> str:
    """One line: the minimum distance used, in CRS units and cells, and where it comes from."""
    md = float(attrs["min_distance"])
    if md == 0:
        return "minimum distance between sites: none (--min-distance 0)."
    cells = [md / spacing(a) for a in (my, mx)]
    text = (f"minimum distance between sites: {md:.4g} CRS units (≈ {cells[0]:.1f} cells along "
            f"y, {cells[1]:.1f} along x)")
    if attrs.get("min_distance_auto"):
        text += (": ¼ of the shortest learnt lengthscale, at most half the spacing of the sites "
                 "spread evenly over the uncertain candidates; --min-distance sets it, 0 turns "
                 "it off")
    return text + "."


def _save_map(geo, sites, strategy: str, path: str, overwrite: bool) -> None:
    """The sites over the latent std, with the raster's true aspect and the CRS's units."""
    # lazy: keeps geogp --help light
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geogp.frontend.plotting import set_map_axes
    from geogp.placement import plot_sites

    target = geo.target_
    when = sites.attrs.get("time")  # a stack's sites are for one date: its std there
    pred = geo.predict() if when is None else geo.predict(time=when).squeeze(geo.extra_dim_)
    std = np.asarray(pred["std_latent"].transpose(..., target.y_dim, target.x_dim).values)
    fig, ax = plt.subplots()
    ratio = set_map_axes(ax, pred, target.y_dim, target.x_dim)  # before the labels are placed
    fig.set_size_inches(7.5, 1.5 + 5.6 * ratio)  # the map as wide as the axes allow
    plot_sites(sites, std, target.x, target.y, ax=ax, label="latent predictive std",
               title=f"next {len(sites)} site(s): {strategy}"
               + ("" if when is None else f", {when}"),
               xlabel=ax.get_xlabel(), ylabel=ax.get_ylabel())
    try:
        with atomic_path(path, overwrite) as tmp:
            fig.savefig(tmp, dpi=120, bbox_inches="tight", format="png")
    finally:
        plt.close(fig)
