"""Hardening round 2, item 1: the default model on smooth fields with large gaps.

The reported case (a 200×200 sin/cos raster, one 50×60 block gap) gave predictions of 4.61 in
the gap against a data maximum of 2.36 and 95 % coverage 0.51: the lattice fit had followed
the range → ∞ ridge into a region where its likelihood and posterior lose their digits
(see ``tests/models/test_lattice.py::test_a_fit_running_to_the_intrinsic_limit...``). This
family (smooth and periodic fields, block and disc gaps, two seeds in turn, 64×64 cells of 100 m,
noise sd 0.1) goes through ``geogp.fit`` with its defaults and is scored on the hidden cells
against an exact GP (Matérn-5/2, hyperparameters by maximum likelihood on the observed cells
within 12 cells of the gap) and against the hidden noisy values.

Bounds:
- the latent RMSE within 10 % of the exact GP's, the issue's number (measured 2026-11-28
  before the oscillating operator: 0.70 smooth/block, 0.77 smooth/disc, 0.43 periodic/block,
  1.27 periodic/disc, then an expected failure; the oscillating covariance, chosen on the
  periodic fields, passes it; an earlier version of this test allowed 2.5 ×), and at most
  0.2 × that of predicting zero;
- the 95 % interval of a new observation covers 0.90–0.99 of the hidden noisy values;
- no mean in the gap beyond the data's range by more than 0.25.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from scipy.ndimage import distance_transform_edt

import geogp
from geogp.models.exact.regressor import ExactGP

N = 64
CELL = 100.0


def _raster_with_gap(axis: np.ndarray, z: np.ndarray, gap: np.ndarray):
    """(DataArray of the noisy values ``z`` with the gap cells missing, the hidden values)."""
    z = z.copy()
    hidden = z[gap]
    z[gap] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": axis, "x": axis}).rio.write_crs(32633)
    return da, hidden


def _fit_and_check(da, f: np.ndarray, gap: np.ndarray, hidden: np.ndarray):
    """``geogp.fit`` with its defaults must pick the lattice model and, in the gap, score a
    latent RMSE ≤ 0.2 × predicting zero, cover 0.90–0.99 of the hidden noisy values with the
    95 % interval of a new observation, and keep its mean within the data range ± 0.25.
    Returns (model, latent RMSE in the gap)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(da)
    assert model.model_ == "lattice"
    pred = model.predict(like=da)
    mean = pred["mean"].values[gap]
    rmse = float(np.sqrt(np.mean((mean - f[gap]) ** 2)))
    assert rmse <= 0.2 * float(np.sqrt(np.mean(f[gap] ** 2))), rmse
    covered = np.abs(hidden - mean) <= 1.96 * pred["std"].values[gap]
    assert 0.90 <= covered.mean() <= 0.99, covered.mean()
    observed = da.values[~gap]
    assert mean.max() <= observed.max() + 0.25 and mean.min() >= observed.min() - 0.25
    return model, rmse


def _case(kind: str, gap_kind: str, seed: int):
    """(DataArray with the gap, hidden noisy values, latent truth, gap mask)."""
    rng = np.random.default_rng(seed)
    axis = np.arange(N) * CELL
    yy, xx = np.meshgrid(axis, axis, indexing="ij")
    phase = rng.uniform(0, 2 * np.pi, 2)
    if kind == "smooth":  # about 2/3 of a period across
        scale = N * CELL / 4
        f = np.sin(xx / scale + phase[0]) + np.cos(yy / (0.83 * scale) + phase[1])
    else:  # periodic: about two periods across
        scale = N * CELL / 12
        f = np.sin(xx / scale + phase[0]) * np.cos(yy / (0.9 * scale) + phase[1])
    z = f + 0.1 * rng.standard_normal(f.shape)
    gap = np.zeros(f.shape, dtype=bool)
    cy, cx = rng.integers(N // 4, 3 * N // 4, 2)
    if gap_kind == "block":  # a quarter of the side by 0.3 of it, as 50×60 of 200
        h, w = N // 4, int(0.3 * N)
        gap[cy - h // 2:cy + h // 2, cx - w // 2:cx + w // 2] = True
    else:
        gap[(yy / CELL - cy) ** 2 + (xx / CELL - cx) ** 2 < (0.14 * N) ** 2] = True
    return (*_raster_with_gap(axis, z, gap), f, gap)


# three of the four field and gap kinds (smooth/disc behaved as smooth/block, 0.77 against
# 0.70), the two seeds alternating
@pytest.mark.parametrize(("kind", "gap_kind", "seed"), [
    ("smooth", "block", 0), ("periodic", "block", 1), ("periodic", "disc", 0)])
def test_item1_default_model_on_smooth_fields_with_large_gaps(kind, gap_kind, seed):
    da, hidden, f, gap = _case(kind, gap_kind, seed)
    _, rmse = _fit_and_check(da, f, gap, hidden)

    near = ~gap & (distance_transform_edt(~gap) <= 12)
    yy, xx = np.meshgrid(da.y.values, da.x.values, indexing="ij")
    exact = ExactGP("matern52", lengthscale=1.0, noise=0.01, maxiter=200).fit(
        np.stack([yy[near], xx[near]], axis=1), da.values[near])
    ref = exact.predict(np.stack([yy[gap], xx[gap]], axis=1))
    rmse_exact = float(np.sqrt(np.mean((ref.mean - f[gap]) ** 2)))

    assert rmse <= 1.1 * rmse_exact, (rmse, rmse_exact)


def test_item1_the_reported_size_200x200_with_a_50x60_block_gap():
    """The reported size, where the mid-scale level is on. Before the range bounds the fit
    followed the ridge towards the intrinsic limit: with 2 BLAS threads this field ended in
    "the posterior is numerically singular" (mid range e^16 cells), with 1 thread it happened
    to pass, so the ranges themselves are checked: within 10 lattice extents (the whole raster
    is the one fitting tile here), ℓ_L at least 1/|ω|_max."""
    rng = np.random.default_rng(0)
    axis = np.arange(200) * CELL
    yy, xx = np.meshgrid(axis, axis, indexing="ij")
    f = np.sin(xx / 3000.0) + np.cos(yy / 2490.0)
    z = f + 0.1 * rng.standard_normal(f.shape)
    gap = np.zeros(f.shape, dtype=bool)
    gap[75:125, 70:130] = True
    da, hidden = _raster_with_gap(axis, z, gap)
    model, _ = _fit_and_check(da, f, gap, hidden)
    est = model.estimators_[0]
    top = np.log(10 * 232) + 1e-9
    for key in ("log_range", "log_range_mid", "log_range_large"):
        if key in est.params_:
            assert float(est.params_[key]) <= top, (key, float(est.params_[key]))
    omega_max = np.sqrt(np.max(np.sum(est.freq_**2, axis=1)))
    assert float(est.params_["log_range_large"]) >= -np.log(omega_max) - 1e-9
