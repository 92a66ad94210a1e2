"""``geogp demo``: fill holes cut into a real elevation model and report how well it did.

The raster is the Jacksboro fault DEM that ships with matplotlib (:mod:`geogp.frontend.demo`). Exit
codes as in :mod:`geogp.cli`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from geogp.cli.options import add_run_options, nonnegative_int
from geogp.cli.runner import EXIT_OK

__all__ = ["add_demo_parser", "run_demo"]


def add_demo_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``demo`` sub-command to ``subparsers``; returns its parser."""
    demo = subparsers.add_parser(
        "demo", help="run the demo on a real elevation model",
        description="Cut holes in the Jacksboro fault elevation model (matplotlib sample data), "
                    "fill them, and report the hold-out RMSE and 95% coverage. Writes "
                    "demo_prediction.tif and demo_map.png (replacing earlier demo files).")
    demo.add_argument("--out-dir", default="geogp-demo", metavar="DIR",
                      help="output folder (default: ./geogp-demo)")
    demo.add_argument("--model", default="auto", choices=("auto", "lattice", "afs"),
                      help="model: auto (default: the lattice model here, ≈ 2 min on 2 "
                           "cores) or afs")
    demo.add_argument("--features", type=int, default=None, metavar="M",
                      help="fit AFS with M Fourier features instead (800: ≈ 10 s)")
    demo.add_argument("--seed", type=nonnegative_int, default=0,
                      help="seed of the held-out cells")
    add_run_options(demo, overwrite=False)
    return demo


def run_demo(args: argparse.Namespace, echo: Callable[[str], object]) -> int:
    """Run ``geogp demo`` with parsed ``args``."""
    # lazy: keeps geogp --help light
    import matplotlib

    matplotlib.use("Agg")
    from geogp.frontend.demo import run_demo as demo

    demo(args.out_dir, model=args.model, n_features=args.features, seed=args.seed,
         progress=not args.quiet, echo=echo)
    return EXIT_OK
