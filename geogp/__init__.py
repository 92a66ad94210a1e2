"""geogp: precomputable variational Gaussian processes for gridded geodata.

Importing geogp switches JAX to double precision (``jax_enable_x64``) before any array is
created. Gaussian-process linear algebra (Cholesky factors of kernel matrices, log-determinants,
whitened solves) loses several digits in float32; the spectral densities used by the Fourier
features span hundreds of orders of magnitude. Everything in geogp is float64 (SPEC.md §1).
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
