"""The family of #41 item 1 (Trust, round 3): smooth periodic rasters with a block gap, used
by ``test_large_gaps_*.py`` (one file per variant, so that the two test workers share them)
and ``benchmarks/bench_smooth_gaps.py``.

Each raster: 200×200 cells of 100 m, noise sd 0.1, 10 % of the cells missing at random and
one square block gap, fitted by ``geogp.fit`` with its defaults and scored in the gap.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import xarray as xr

import geogp

N = 200
CELL = 100.0


def periodic_case(period: int, gap_side: int, seed: int, kind: str):
    """(DataArray with 10 % random gaps and one block gap, noisy values, latent field, gap)."""
    rng = np.random.default_rng(seed)
    axis = np.arange(N) * CELL
    yy, xx = np.meshgrid(axis, axis, indexing="ij")
    ph = rng.uniform(0, 2 * np.pi, 2)
    p = period * CELL
    wave_x, wave_y = np.sin(2 * np.pi * xx / p + ph[0]), np.cos(2 * np.pi * yy / (0.9 * p) + ph[1])
    f = wave_x * wave_y if kind == "product" else wave_x + wave_y
    z = f + 0.1 * rng.standard_normal(f.shape)
    scattered = rng.random(f.shape) < 0.1
    gap = np.zeros(f.shape, dtype=bool)
    cy, cx = rng.integers(gap_side // 2 + 10, N - gap_side // 2 - 10, 2)
    gap[cy - gap_side // 2:cy + gap_side // 2, cx - gap_side // 2:cx + gap_side // 2] = True
    values = np.where(scattered | gap, np.nan, z)
    da = xr.DataArray(values, dims=("y", "x"), coords={"y": axis, "x": axis}).rio.write_crs(32633)
    return da, z, f, gap


@functools.cache  # each variant is fitted once per test process
def default_scores(period: int, gap_side: int, seed: int, kind: str) -> dict:
    """:func:`gap_scores` of ``geogp.fit``'s defaults."""
    return gap_scores(period, gap_side, seed, kind)


def gap_scores(period: int, gap_side: int, seed: int, kind: str, **options) -> dict:
    """The model's scores in the gap: ``coverage`` of the hidden noisy values by the 95 %
    interval of a new observation, latent ``rmse``, ``rmse_mean`` (predicting the field's
    mean, 0), ``field_sd``; and ``model``, ``alpha`` (the lattice's α)."""
    da, z, f, gap = periodic_case(period, gap_side, seed, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(da, **options)
    pred = model.predict(like=da)
    mean, std = pred["mean"].values[gap], pred["std"].values[gap]
    return {"model": model.model_, "alpha": getattr(model.estimators_[0], "alpha_", None),
            "coverage": float(np.mean(np.abs(z[gap] - mean) <= 1.96 * std)),
            "rmse": float(np.sqrt(np.mean((mean - f[gap]) ** 2))),
            "rmse_mean": float(np.sqrt(np.mean(f[gap] ** 2))), "field_sd": float(f.std())}
