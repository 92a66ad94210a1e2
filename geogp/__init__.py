"""geogp: precomputable variational Gaussian processes for gridded geodata.

Importing geogp switches JAX to double precision (``jax_enable_x64``) before any array is
created. Gaussian-process linear algebra (Cholesky factors of kernel matrices, log-determinants,
whitened solves) loses several digits in float32; the spectral densities used by the Fourier
features span hundreds of orders of magnitude. Everything in geogp is float64 (docs/model.md).

JAX itself, the models and the I/O layer are imported on first use of a public name
(``geogp.GeoRegressor``, ``geogp.fit``, ...; a module ``__getattr__`` as in optax), so that the
``geogp`` command answers ``--help`` without loading them. Importing geogp registers the
``.geogp`` accessor and rioxarray's ``.rio`` on xarray objects as soon as xarray is imported
(:mod:`geogp.frontend.registration`).
"""

from __future__ import annotations

import importlib
import os
import sys

# float64 everywhere: see the module docstring. This must hold before any JAX array exists:
# JAX already imported → switch it now; not yet → JAX reads JAX_ENABLE_X64 when imported.
if "jax" in sys.modules:
    sys.modules["jax"].config.update("jax_enable_x64", True)
else:
    os.environ["JAX_ENABLE_X64"] = "True"

__version__ = "0.1.0"

from geogp import exceptions as exceptions
from geogp.frontend.registration import register_when_xarray_loads

register_when_xarray_loads()  # .geogp and .rio on DataArray and Dataset

# public name → (module, attribute or None for the module itself), imported on first use
_LAZY = {
    "accessor": ("geogp.frontend.accessor", None),
    "kernels": ("geogp.core.kernels", None),
    "SquaredExponential": ("geogp.core.kernels", "SquaredExponential"),
    "Matern12": ("geogp.core.kernels", "Matern12"),
    "Matern32": ("geogp.core.kernels", "Matern32"),
    "Matern52": ("geogp.core.kernels", "Matern52"),
    "metrics": ("geogp.core.metrics", None),
    "GeoRegressor": ("geogp.frontend.api", "GeoRegressor"),
    "fit": ("geogp.frontend.api", "fit"),
    "open_raster": ("geogp.frontend.io", "open_raster"),
    "open_stack": ("geogp.frontend.io", "open_stack"),
    "write_geotiff": ("geogp.frontend.io", "write_geotiff"),
    "write_netcdf": ("geogp.frontend.io", "write_netcdf"),
    "cross_validate": ("geogp.crossval", "cross_validate"),
}

__all__ = ["__version__", "exceptions", "kernels", "SquaredExponential", "Matern12", "Matern32",
           "Matern52", "GeoRegressor", "fit", "load_model", "open_raster", "open_stack",
           "write_geotiff", "write_netcdf", "metrics", "cross_validate"]


def __getattr__(name: str):
    if name == "load_model":
        value = __getattr__("GeoRegressor").load
    elif name in _LAZY:
        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        value = value if attr is None else getattr(value, attr)
    else:
        raise AttributeError(f"module 'geogp' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
