"""Command-line interface: ``geogp fit``, ``geogp cv``, ``geogp place``, ``geogp demo``,
``--version``.

Each sub-command lives in its own module (``fit.py``, ``cv.py``, ``place.py``, ``demo.py``, with
the options they share in ``options.py``); this one builds the parser and runs the handlers
(``runner.py``: exit codes, one-line errors). The sub-command modules import JAX, xarray and
the front end inside their handlers, so that ``geogp --help`` loads none of them.

Exit codes: 0 success; 2 usage errors and bad input (unreadable file, unknown variable, all
missing, output exists without ``--overwrite``...), reported as one line without traceback;
1 any other error (one line too; ``--traceback`` shows the details); 130 on Ctrl-C (one line,
also when JAX wraps the interrupt in a callback error).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from geogp import __version__
from geogp.cli.cv import add_cv_parser, run_cv
from geogp.cli.demo import add_demo_parser, run_demo
from geogp.cli.fit import add_fit_parser, run_fit
from geogp.cli.place import add_place_parser, place_sites
from geogp.cli.runner import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    install_interrupt,
    run_command,
    usage_error,
)

__all__ = ["main", "build_parser", "run_command", "usage_error"]

_EPILOG = """\
examples:
  geogp demo                                  fill holes in a real elevation model (≈ 2 min)
  geogp fit dem.tif --out filled.tif          mean (band 1) and std (band 2) GeoTIFF
  geogp fit sst.nc --var sst --out sst_gp.tif --netcdf sst_gp.nc --map sst_gp.png
  geogp fit dem.tif --out filled.tif --model afs --kernel matern52 --features 2000
  geogp fit dem.tif --out filled.tif --save-model dem_model.npz --quiet
  geogp fit obs.csv --x lon --y lat --value t --crs EPSG:4326 --resolution 0.01 --out t.tif
  geogp fit stations.gpkg --value t --like grid.tif --out t.tif     (needs geopandas)
  geogp fit warped.tif --out filled.tif --exclude outside.tif     nodata where the mask is set
  geogp cv dem.tif --plot cv.png              cross-validate on gap-shaped folds
  geogp place dem.tif --n 20 --out sites.geojson --map sites.png   where to measure next

Every sub-command has its own options and examples: geogp COMMAND --help.

Missing cells are NaN or the raster's nodata value. Lengthscales of geographic (lon/lat)
rasters are reported in degrees of latitude and in km.
exit codes: 0 ok, 2 usage or bad input, 1 other errors.
"""


def _version_text() -> str:
    return f"geogp {__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``geogp`` command."""
    parser = argparse.ArgumentParser(
        prog="geogp", description="Gaussian-process gap filling and uncertainty maps for rasters.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=_version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    add_fit_parser(sub, _EPILOG)
    add_demo_parser(sub)
    add_cv_parser(sub)
    add_place_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``geogp`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    handler = {"fit": run_fit, "demo": run_demo, "place": place_sites, "cv": run_cv}[args.command]
    # cv and demo always print their results
    return run_command(handler, args, quiet=args.command in ("fit", "place") and args.quiet)


def command() -> None:
    """The ``geogp`` command (the console script and ``python -m geogp.cli``): :func:`main`,
    then exit with its code. Ctrl-C raises KeyboardInterrupt where Python would not drop it
    (:func:`~geogp.cli.runner.interrupt`). After it (the outputs already rolled back, the cluster
    closed) it exits at once: XLA's threads can still be inside a Python host callback, and
    the interpreter's shutdown around them aborted the process (SIGABRT and a fatal-error
    dump) instead of exiting 130."""
    install_interrupt()
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    command()
