"""The lattice model: an SPDE / GMRF Gaussian process on the raster's own grid (docs/lattice.md).

Modules: :mod:`~geogp.models.lattice.regressor` (:class:`LatticeRegressor`, the model and its
docstring), :mod:`~geogp.models.lattice.gmrf` (precision, likelihood), :mod:`~.mid` (the
mid-scale level), :mod:`~.settings` (option checks), :mod:`~.tiles` (the composite likelihood
of stage 1), :mod:`~.posterior` (stage 2 and the posterior), :mod:`~.tiled` (the posterior on
tiles), :mod:`~.workers` (tiles on a dask cluster), :mod:`~.memory` (memory and time
estimates), :mod:`~.outputs` (predictions and samples).
"""

from geogp.models.lattice.gmrf import (
    ALPHAS,
    LARGE_SCALE_LOSSES,
    PARAMS,
    PARAMS_LARGE,
    PARAMS_MID,
    RANGE_MAX_EXTENTS,
    LatticeProblem,
    dense_likelihood,
    log_marginal_likelihood,
    make_problem,
    precision,
    sparse_statistics,
    spectral_weights,
)
from geogp.models.lattice.memory import POSTERIOR_CORE, POSTERIOR_HALO, WHOLE_LATTICE_MAX_CELLS
from geogp.models.lattice.mid import MID_MARGIN
from geogp.models.lattice.regressor import LatticeRegressor
from geogp.models.lattice.settings import (
    LARGE_SCALE_ALONE,
    LARGE_SCALE_AUTO,
    MID_SCALE_AUTO,
    MID_SCALE_MIN_CELLS,
)

__all__ = [
    "ALPHAS",
    "LatticeProblem",
    "make_problem",
    "precision",
    "spectral_weights",
    "log_marginal_likelihood",
    "sparse_statistics",
    "dense_likelihood",
    "LARGE_SCALE_LOSSES",
    "PARAMS",
    "PARAMS_LARGE",
    "PARAMS_MID",
    "MID_MARGIN",
    "MID_SCALE_AUTO",
    "MID_SCALE_MIN_CELLS",
    "LARGE_SCALE_AUTO",
    "LARGE_SCALE_ALONE",
    "RANGE_MAX_EXTENTS",
    "WHOLE_LATTICE_MAX_CELLS",
    "POSTERIOR_CORE",
    "POSTERIOR_HALO",
    "LatticeRegressor",
]
