"""``geogp cv``: cross-validate gap filling on a raster, with folds shaped like its real gaps.

    geogp cv INPUT.(tif|nc) [--folds gaps|random|blocks --n-folds 5 --fraction 0.15 --seed 0
        --model auto --kernel K --features M --maxiter N --csv cells.csv --plot cv.png]

Prints the overall scores (RMSE, MAE, CRPS, 95 % interval score and coverage, NLPD) and the
table by distance to the nearest training cell; writes the per-cell predictions (CSV) and the
figure (reliability diagram, coverage by distance) when asked. See :mod:`geogp.crossval`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from geogp.cli.options import add_model_options, add_run_options, model_keywords, nonnegative_int
from geogp.core.io_atomic import atomic_path, check_writable
from geogp.exceptions import InputError

__all__ = ["add_cv_parser", "run_cv"]

_EPILOG = """\
examples:
  geogp cv lst.nc                                  5 gap-shaped folds, the default model
  geogp cv lst.nc --plot cv.png --csv cv_cells.csv figure + every held-out prediction
  geogp cv lst.nc --folds random --n-folds 10      the optimistic random hold-out
  geogp cv dem.tif --kernel matern32 --features 3000 --maxiter 100

Folds:
  gaps    the raster's own missing-data shapes (connected NaN regions: clouds, swaths),
          moved onto observed areas, rotated or mirrored; their observed cells are hidden.
          This is the test that looks like filling real gaps (default).
  random  a random share of the observed cells (every hidden cell is next to data:
          optimistic for gap filling).
  blocks  squares of a regular partition.
Scores are those of a new observation's predictive distribution, pooled over folds, and
by distance (in cells) to the nearest cell used for training: <= 1, 1-3, 3-10, > 10. A
calibrated model covers about 0.95 in every stratum.
exit codes: 0 ok, 2 usage or bad input, 1 other errors.
"""


def add_cv_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``cv`` sub-command to an argparse ``subparsers`` object; returns its parser."""
    p = subparsers.add_parser(
        "cv", help="cross-validate on gap-shaped folds (scores by distance to data)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG,
        description="Hide folds of INPUT's observed cells, fit on the rest, predict the grid "
                    "and score the hidden cells: overall and by distance to the nearest "
                    "training cell.")
    p.add_argument("input", metavar="INPUT", help="raster (.tif or .nc)")
    p.add_argument("--var", metavar="NAME", help="variable of a NetCDF file")
    p.add_argument("--folds", default="gaps", choices=("gaps", "random", "blocks"),
                   help="fold kind (default: gaps)")
    p.add_argument("--n-folds", type=int, default=5, metavar="K", help="folds (default 5)")
    p.add_argument("--fraction", type=float, default=None, metavar="F",
                   help="share of observed cells hidden per fold (gaps: default 0.15; "
                        "random: default 1/K)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the folds (default 0)")
    add_model_options(p)
    p.add_argument("--csv", metavar="CELLS.csv", help="write every held-out prediction")
    p.add_argument("--plot", metavar="CV.png", help="reliability + coverage-by-distance figure")
    add_run_options(p)
    return p


def run_cv(args: argparse.Namespace, echo: Callable[[str], object]) -> int:
    """Run ``geogp cv`` (see the module docstring); returns the exit code."""
    # lazy: keeps geogp --help light
    from geogp.crossval import cross_validate
    from geogp.frontend.io import open_raster

    outputs = [p for p in (args.csv, args.plot) if p]
    if len(set(outputs)) != len(outputs):
        raise InputError("--csv and --plot must be different files.")
    for path in outputs:  # fail before the expensive part
        check_writable(path, args.overwrite)
    if args.n_folds < 1:
        raise InputError(f"--n-folds must be ≥ 1; got {args.n_folds}.")
    if args.features is not None and args.features < 4:
        raise InputError(f"--features must be ≥ 4; got {args.features}.")
    fold_options = {} if args.fraction is None or args.folds == "blocks" else {
        "fraction": args.fraction}
    if args.fraction is not None and args.folds == "blocks":
        raise InputError("--fraction applies to gaps and random folds; blocks partition the "
                         "grid.")
    fit_options = model_keywords(args)
    da = open_raster(args.input, var=args.var)
    result = cross_validate(da, args.folds, args.n_folds, seed=args.seed, model=args.model,
                            fold_options=fold_options, progress=not args.quiet, **fit_options)
    echo(result.summary())
    if args.csv:
        with atomic_path(args.csv, args.overwrite) as tmp:
            result.cells.to_csv(tmp, index=False)
    if args.plot:  # lazy: keeps geogp --help light
        import matplotlib

        matplotlib.use("Agg")
        result.plot(args.plot, overwrite=args.overwrite)
    if outputs:
        echo("wrote " + ", ".join(outputs))
    return 0
