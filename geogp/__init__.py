"""geogp: precomputable variational Gaussian processes for gridded geodata.

Importing geogp switches JAX to double precision (``jax_enable_x64``) before any array is
created. Gaussian-process linear algebra (Cholesky factors of kernel matrices, log-determinants,
whitened solves) loses several digits in float32; the spectral densities used by the Fourier
features span hundreds of orders of magnitude. Everything in geogp is float64 (docs/model.md).
"""

from __future__ import annotations

import jax

# float64 everywhere: see the module docstring. This must run before any JAX array exists.
jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"

from geogp import exceptions as exceptions  # noqa: E402
from geogp import kernels as kernels  # noqa: E402
from geogp.kernels import Matern12, Matern32, Matern52, SquaredExponential  # noqa: E402

__all__ = [
    "__version__",
    "exceptions",
    "kernels",
    "SquaredExponential",
    "Matern12",
    "Matern32",
    "Matern52",
]

# --- geodata front end (issue 6): appended block, public names of the xarray/CLI layer -------
# Importing geogp.accessor registers the ``.geogp`` accessor on DataArray and Dataset.
from geogp import accessor as accessor  # noqa: E402,F401
from geogp import metrics as metrics  # noqa: E402
from geogp.api import GeoRegressor as GeoRegressor  # noqa: E402
from geogp.api import fit as fit  # noqa: E402
from geogp.io import open_raster as open_raster  # noqa: E402
from geogp.io import write_geotiff as write_geotiff  # noqa: E402
from geogp.io import write_netcdf as write_netcdf  # noqa: E402

from geogp.crossval import cross_validate as cross_validate  # noqa: E402

load_model = GeoRegressor.load

__all__ += ["GeoRegressor", "fit", "load_model", "open_raster", "write_geotiff",
            "write_netcdf", "metrics", "cross_validate"]
# --- end of the geodata front-end block -------------------------------------------------------
