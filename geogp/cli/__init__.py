"""Command-line interface: ``geogp fit``, ``geogp cv``, ``geogp place``, ``geogp demo``, ``--version``.

Each sub-command lives in its own module (``fit.py``, ``cv.py``, ``place.py``, ``demo.py``, with
the options they share in ``options.py``); this one builds the parser and runs the handlers.

Exit codes: 0 success; 2 usage errors and bad input (unreadable file, unknown variable, all
missing, output exists without ``--overwrite``...), reported as one line without traceback;
1 any other error (one line too; ``--traceback`` shows the details); 130 on Ctrl-C (one line,
also when JAX wraps the interrupt in a callback error).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
import warnings

__all__ = ["main", "build_parser", "run_command", "usage_error"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

_EPILOG = """\
examples:
  geogp demo                                  fill holes in a real elevation model (≈ 1.5 min)
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
    from geogp import __version__

    return f"geogp {__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``geogp`` command."""
    from geogp.cli.cv import add_cv_parser
    from geogp.cli.demo import add_demo_parser
    from geogp.cli.fit import add_fit_parser
    from geogp.cli.place import add_place_parser

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


class _UsageError(Exception):
    pass


def usage_error(msg: str) -> _UsageError:
    """An error that the CLI reports as one line with exit code 2 (wrong use of options)."""
    return _UsageError(msg)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"geogp: warning: {message}", file=sys.stderr)


_INTERRUPT_LINE = re.compile(r"(^|\n)\s*KeyboardInterrupt\b")


def _is_interrupt(err: BaseException) -> bool:
    """Ctrl-C, also where JAX wraps it: a KeyboardInterrupt raised inside a host callback
    (``jax.pure_callback``: the sparse Cholesky of the lattice model) reaches the caller as a
    RuntimeError (``JaxRuntimeError``/``XlaRuntimeError``, "CpuCallback error") whose message
    ends with the callback's traceback, "KeyboardInterrupt". Follows the exception chain."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, KeyboardInterrupt):
            return True
        if isinstance(err, RuntimeError) and _INTERRUPT_LINE.search(str(err)):
            return True
        err = err.__cause__ or err.__context__
    return False


class _DropInterruptLogs(logging.Filter):
    """Drop JAX's "jax.pure_callback failed" log (with its traceback) of a KeyboardInterrupt:
    the command reports the interrupt itself, in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and _is_interrupt(exc))


@contextlib.contextmanager
def _quiet_callback_interrupts():
    loggers = [logging.getLogger(name) for name in ("jax._src.callback", "jax._src.ffi")]
    drop = _DropInterruptLogs()
    for lg in loggers:
        lg.addFilter(drop)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(drop)


def _interrupted() -> int:
    print("geogp: interrupted; no partial output was kept.", file=sys.stderr)
    return 130


def main(argv=None) -> int:
    """Entry point of the ``geogp`` command; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    from geogp.cli.cv import run_cv
    from geogp.cli.demo import run_demo
    from geogp.cli.fit import run_fit
    from geogp.cli.place import _place

    handler = {"fit": run_fit, "demo": run_demo, "place": _place, "cv": run_cv}[args.command]
    # cv and demo always print their results
    return run_command(handler, args, quiet=args.command in ("fit", "place") and args.quiet)


def run_command(handler, args, quiet: bool = False) -> int:
    """Run ``handler(args, echo)`` with the CLI's conventions: warnings as one line, bad input
    as one line and exit 2, other errors as one line and exit 1 (``--traceback`` re-raises)."""
    from geogp.exceptions import InputError, MemoryEstimateError

    def echo(text: str) -> None:
        if not quiet:
            print(text, flush=True)

    traceback = bool(getattr(args, "traceback", False))
    try:
        with warnings.catch_warnings(), _quiet_callback_interrupts():  # restores showwarning
            warnings.showwarning = _show_warning
            return handler(args, echo)
    except (InputError, _UsageError) as err:
        if traceback:
            raise
        print(f"geogp: error: {' '.join(str(err).split())}", file=sys.stderr)
        return EXIT_USAGE
    except MemoryEstimateError as err:  # the advice in command-line flags
        if traceback:
            raise
        print(f"geogp: error: {' '.join(err.cli_message().split())}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as err:
        if _is_interrupt(err):  # Ctrl-C inside a JAX host callback (lattice fit)
            return _interrupted()
        if traceback:
            raise
        msg = str(err).splitlines()[0] if str(err) else ""
        print(f"geogp: error: {type(err).__name__}: {msg} (run with --traceback for details)",
              file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
