"""Issue #32, raw tracebacks: the lattice posterior's ``LinAlgError`` (a Cholesky of A⁻¹ that
only samples need) on a noise-free raster, on 10 observed cells in 100 × 100, and with a
covariate equal to the x coordinate."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.exceptions import InputError


def _da(v):
    ny, nx = v.shape
    return xr.DataArray(v, dims=("y", "x"), coords={"y": 5e6 - 100.0 * np.arange(ny),
                                                   "x": 5e5 + 100.0 * np.arange(nx)}
                        ).rio.write_crs(32633)


@pytest.mark.parametrize("case", ["noise-free", "10 cells"])
def test_issue32_lattice_posterior_fits_and_samples_without_linalg_error(case):
    rng = np.random.default_rng(0)
    if case == "noise-free":
        yy, xx = np.meshgrid(np.arange(40), np.arange(50), indexing="ij")
        v = np.sin(yy / 9.0) + np.cos(xx / 11.0)
        v[15:25, 20:30] = np.nan
    else:
        v = np.full((100, 100), np.nan)
        v.ravel()[rng.choice(v.size, 10, replace=False)] = rng.normal(size=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(_da(v), model="lattice")
        pred = model.predict()
        draws = model.sample(3, seed=0)
    std = pred["std"].values
    assert np.all(np.isfinite(std)) and np.all(std > 0)
    assert np.all(np.isfinite(draws.values))
    # the draws are centred on the mean: within 6 sd everywhere
    assert np.all(np.abs(draws.values - pred["mean"].values) < 6 * std + 1e-9)


def test_issue32_lattice_covariate_equal_to_x_is_refused_naming_it():
    rng = np.random.default_rng(1)
    yy, xx = np.meshgrid(np.arange(40), np.arange(50), indexing="ij")
    v = np.sin(yy / 9.0) + np.cos(xx / 11.0) + 0.1 * rng.normal(size=yy.shape)
    v[15:25, 20:30] = np.nan
    da = _da(v)
    cov = xr.DataArray(5e5 + 100.0 * xx, dims=("y", "x"), coords=da.coords)
    with pytest.raises(InputError, match=r"covariate\(s\) \[1\] can be written with the other"):
        geogp.fit(da, model="lattice", covariates=[cov])
