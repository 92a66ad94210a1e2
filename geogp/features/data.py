"""The data a feature family reads once: scattered points or a regular raster, in model units.

Every feature family turns one of these into its sufficient statistics with the same call,
``features.statistics(data)`` (:meth:`geogp.features.fourier.FourierFeatures.statistics`,
:meth:`geogp.features.wavelet.WaveletBasis.statistics`); the estimators then never touch the
data again. The containers only check shapes: the adapters (:mod:`geogp.frontend.adapters`) have
already refused NaN/inf coordinates and infinite values, and standardised the units.

Example:
    >>> import numpy as np
    >>> pts = Points(np.zeros((3, 2)), np.ones(3))
    >>> pts.n_dims, pts.n_obs
    (2, 3)
    >>> Grid((np.arange(4.0), np.arange(5.0)), np.full((4, 5), np.nan)).shape
    (4, 5)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from geogp.exceptions import InputError

__all__ = ["Points", "Grid"]


@dataclass(frozen=True)
class Points:
    """Scattered observations: ``X`` (N, D) coordinates and ``y`` (N,) values, numpy or dask
    arrays (read in chunks), every value observed."""

    X: Any
    y: Any

    def __post_init__(self):
        if len(self.X.shape) != 2:
            raise InputError(f"Points.X must have shape (N, D); got shape {tuple(self.X.shape)}.")
        if tuple(self.y.shape) != (self.X.shape[0],):
            raise InputError(f"Points.y must have shape ({self.X.shape[0]},) to match X; got "
                             f"{tuple(self.y.shape)}.")

    @property
    def n_dims(self) -> int:
        return int(self.X.shape[1])

    @property
    def n_obs(self) -> int:
        return int(self.X.shape[0])


@dataclass(frozen=True)
class Grid:
    """A regular raster: ``axes`` (one coordinate vector per dimension, in the order of the
    array's axes) and ``values`` (N_1, ..., N_D), numpy or dask, with NaN for missing cells."""

    axes: tuple
    values: Any

    def __post_init__(self):
        axes = tuple(np.asarray(a, dtype=np.float64).ravel() for a in self.axes)
        object.__setattr__(self, "axes", axes)
        want = tuple(a.size for a in axes)
        if tuple(int(s) for s in self.values.shape) != want:
            raise InputError(f"Grid.values must have shape {want} (one entry per axis "
                             f"coordinate); got {tuple(self.values.shape)}.")

    @property
    def n_dims(self) -> int:
        return len(self.axes)

    @property
    def shape(self) -> tuple:
        return tuple(a.size for a in self.axes)
