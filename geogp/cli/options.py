"""Command-line options shared by the sub-commands that fit a model (fit, cv, place)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

import numpy as np

from geogp.core.grid_checks import spacing
from geogp.families import ALIASES, AUTO, AUTO_RULE, MODELS

if TYPE_CHECKING:  # annotations only

    from geogp.frontend.outputs import Target

__all__ = ["DATE_FIELD", "add_model_options", "add_memory_option", "add_run_options",
           "model_keywords", "positive_int", "nonnegative_int", "MODEL_CHOICES", "exclusion_mask",
           "spacing"]

MODEL_CHOICES = (AUTO, *MODELS, *ALIASES)  # the registry's names and their aliases

# argparse formats help with %: the rule's "10 %" is escaped
# in an --out GeoTIFF name: one file per date of a stack
DATE_FIELD = "{date}"
_MODEL_HELP = (f"model: auto (default: {AUTO_RULE.replace('%', '%%')}), "
               "lattice (SPDE/GMRF on the cells + large-scale Fourier features), nonstationary "
               "(the lattice model with a range and sd that vary in space on a "
               "multiresolution basis: varying=True, for fields rough in places and smooth "
               "in others), afs (approximate Fourier series; any size), wavelet_basis (the "
               "thesis's wavelet-basis covariance), exact (small data), spacetime (a stack "
               "with a time dimension, fitted jointly over its dates); "
               + "; ".join(f"{alias}: an alias of {target}"
                           for alias, target in ALIASES.items()))


def add_model_options(parser: argparse.ArgumentParser, *, models: bool = True,
                      features_help: str | None = None,
                      lattice: bool = True) -> None:
    """Add --model (unless ``models`` is False), --kernel, --features, --mid-scale, --alpha and
    --maxiter (--mid-scale and --alpha only when ``lattice``: the commands that may fit a
    lattice model)."""
    if models:
        parser.add_argument("--model", default="auto", choices=MODEL_CHOICES, help=_MODEL_HELP)
    parser.add_argument("--kernel", default=None, metavar="NAME",
                        help="AFS kernel: matern12 (default), matern32, matern52, se, or a sum "
                             "a+b (implies --model afs under auto)")
    parser.add_argument("--features", type=int, default=None, metavar="M",
                        help=features_help or (
                            "number of Fourier features for afs (default: observed cells / 8, "
                            "between 2000 and 10000; implies --model afs under auto); above "
                            "4096 a matrix-free solver is used (M up to ~10^5: minutes)"))
    if lattice:
        parser.add_argument("--mid-scale", type=_mid_scale, default=None, metavar="R",
                            help="lattice model: the mid-scale field on a lattice R times "
                                 "coarser, more accurate deep inside large gaps (docs/"
                                 "lattice.md). auto (default): R = 12 when both sides of the "
                                 "raster have at least 128 cells; none: no mid-scale field "
                                 "(about 1.5x faster)")
        parser.add_argument("--alpha", choices=("auto", "1", "2", "3"), default=None,
                            help="lattice model: the SPDE operator's order. 2: Matérn nu = 1; "
                                 "3: nu = 2, for smooth fields; 1: rough. auto (default): 2, "
                                 "or 3 where the nu = 1 range runs beyond the fitting tiles and "
                                 "nu = 2 is more likely; there an oscillating (hole-effect) "
                                 "covariance is fitted too and kept where likelier, for "
                                 "periodic fields (docs/lattice.md)")
    parser.add_argument("--maxiter", type=positive_int, default=None, metavar="N",
                        help="L-BFGS iterations (default 300 for afs, 100 for lattice)")


def add_memory_option(parser: argparse.ArgumentParser) -> None:
    """Add --max-memory (GiB; the model's ``max_bytes``)."""
    parser.add_argument("--max-memory", type=_positive_float, default=None, metavar="GIB",
                        help="memory limit in GiB (default 4): the model estimates its peak "
                             "before allocating and refuses above it; under auto, a raster "
                             "whose lattice estimate passes it gets afs")


def _positive_float(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number > 0; got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer ≥ 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 1; got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer ≥ 0 (argparse type), e.g. a random seed."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 0; got {text!r}")
    return value


def _mid_scale(text: str):
    """``--mid-scale``: "auto", "none" (kept as the string until the options are built) or an
    integer factor."""
    low = text.strip().lower()
    if low in ("auto", "none"):
        return low
    try:
        return int(low)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected auto, none or an integer factor ≥ 2; got {text!r}") from None


def mid_scale_option(value: int | str | None) -> int | str | None:
    """The ``mid_scale`` keyword for a parsed ``--mid-scale`` ("none" → None)."""
    return None if value == "none" else value


def add_run_options(parser: argparse.ArgumentParser, *, quiet_help: str = "no progress bars",
                    overwrite: bool = True) -> None:
    """Add --overwrite (when the command writes files), --quiet and the hidden --traceback."""
    if overwrite:
        parser.add_argument("--overwrite", action="store_true",
                            help="replace existing outputs (regular files only; a symbolic "
                                 "link is replaced itself, its target is left unchanged)")
    parser.add_argument("--quiet", "-q", action="store_true", help=quiet_help)
    parser.add_argument("--traceback", action="store_true", help=argparse.SUPPRESS)


def model_keywords(args: argparse.Namespace) -> dict:
    """``kernel``, ``n_features``, ``mid_scale``, ``alpha`` and ``maxiter`` given on the
    command line, as keywords."""
    given = {k: v for k, v in (("kernel", args.kernel), ("n_features", args.features),
                               ("mid_scale", getattr(args, "mid_scale", None)),
                               ("alpha", getattr(args, "alpha", None)),
                               ("maxiter", args.maxiter)) if v is not None}
    if "mid_scale" in given:
        given["mid_scale"] = mid_scale_option(given["mid_scale"])
    if given.get("alpha", "auto") != "auto":
        given["alpha"] = int(given["alpha"])
    return given


def exclusion_mask(path: str, target: Target) -> np.ndarray:
    """(N_y, N_x) boolean: True where the mask raster is non-zero (NaN counts as zero)."""
    # lazy: keeps geogp --help light
    from geogp.frontend.api_placement import mask_on_target
    from geogp.frontend.io import open_raster

    return mask_on_target(open_raster(path), target, f"the exclusion mask {str(path)!r}")


