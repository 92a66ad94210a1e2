"""Rasters oversampled by nearest-neighbour resampling (#41 item 2): their values repeat in
blocks; geogp fits the blocks and predicts every cell as the block it copies."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import geogp
from geogp.frontend.blocks import Blocks, block_axis, block_index, find_blocks, snap


def _native(ny: int, nx: int, seed: int) -> np.ndarray:
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(seed)
    return 3.0 * gaussian_filter(rng.standard_normal((ny, nx)), 2.0) + 0.1 * rng.standard_normal(
        (ny, nx))


def _oversample(v: np.ndarray, k: tuple[int, int], phase: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resampling by an integer factor whose block edges fall before
    cells phase + j k (the first and last blocks cut by the raster's edge)."""
    ny, nx = v.shape
    iy = (np.arange(ny * k[0] - phase[0]) + (k[0] - phase[0]) % k[0]) // k[0]
    ix = (np.arange(nx * k[1] - phase[1]) + (k[1] - phase[1]) % k[1]) // k[1]
    keep_y, keep_x = iy < ny, ix < nx
    return v[np.ix_(iy[keep_y], ix[keep_x])]


@pytest.mark.parametrize(("k", "phase"), [((3, 3), (0, 0)), ((2, 4), (1, 3)), ((1, 5), (0, 2))])
def test_find_blocks_recovers_factor_and_phase_and_coarsening_inverts_it(k, phase):
    native = _native(30, 40, 0)
    fine = _oversample(native, k, phase)
    fine[np.random.default_rng(1).random(fine.shape) < 0.3] = np.nan  # cells missing alone
    found = find_blocks(fine[None])
    assert found == Blocks(k, phase)
    iy, by = block_index(fine.shape[0], k[0], phase[0])
    ix, bx = block_index(fine.shape[1], k[1], phase[1])
    seen = np.isfinite(fine)  # every fine cell is a copy of its block's native cell
    np.testing.assert_array_equal(fine[seen], native[np.ix_(iy, ix)][seen])
    assert (by.size, bx.size) == (30, 40)


def test_native_rasters_and_quantised_fields_have_no_blocks():
    native = _native(60, 80, 2)
    assert find_blocks(native[None]) is None
    # an integer DEM: many equal neighbours, but not a whole grid of them
    assert find_blocks(np.round(native * 3)[None]) is None
    assert find_blocks(np.ones((1, 40, 40))) is None  # constant: no evidence of any size
    assert find_blocks(np.full((1, 40, 40), np.nan)) is None


def test_block_axis_and_snap_put_every_cell_at_its_block_centre():
    axis = 10.0 + 2.0 * np.arange(11)  # cells of 2 m; blocks of 3 whose edges fall before 1, 4…
    centres = block_axis(axis, 3, 1)
    # block 0 is cut by the edge (its native cell spans cells −2..0): centre at cell −1
    np.testing.assert_allclose(centres, 10.0 + 2.0 * np.array([-1, 2, 5, 8, 11]))
    of_cell, _ = block_index(axis.size, 3, 1)
    np.testing.assert_allclose(snap(axis, centres), centres[of_cell])
    far = np.array([-100.0, 1000.0])
    np.testing.assert_allclose(snap(far, centres), far)  # beyond the blocks: unchanged


@pytest.fixture(scope="module")
def oversampled():
    native = _native(40, 50, 3)
    fine = _oversample(native, (3, 3), (0, 0)).astype(np.float64)
    rng = np.random.default_rng(4)
    hide = np.zeros(native.shape, bool)
    hide[10:18, 20:30] = True  # a block gap of native cells
    hide |= rng.random(native.shape) < 0.15
    fine[np.kron(hide, np.ones((3, 3), bool))] = np.nan
    h = 30.0  # 30 m cells, a 90 m product
    da = xr.DataArray(fine, dims=("y", "x"), coords={
        "y": 5e5 - h * np.arange(fine.shape[0]), "x": 4e5 + h * np.arange(fine.shape[1])}
    ).rio.write_crs(32633)
    return native, hide, da


def test_item2_oversampled_raster_is_fitted_at_its_blocks_resolution(oversampled):
    _, _, da = oversampled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(da)
        coarse = geogp.fit(da.isel(y=slice(1, None, 3), x=slice(1, None, 3)))
    assert model.blocks_ == Blocks((3, 3), (0, 0))
    assert "3 × 3-cell blocks" in model.model_reason_ and "(40 × 50)" in model.model_reason_
    pred = model.predict()
    assert pred["mean"].shape == da.shape  # the user's grid
    # every cell of a block gets its block's prediction, which is the native raster's own
    ref = coarse.predict()
    for var in ("mean", "std", "std_latent"):
        fine = pred[var].values
        np.testing.assert_array_equal(fine, np.kron(fine[1::3, 1::3], np.ones((3, 3))))
        np.testing.assert_allclose(fine[1::3, 1::3], ref[var].values, rtol=1e-6, atol=1e-9)
    # the noise is the native one, not collapsed by the copies (learnt noise sd 0.1)
    assert 0.05 < model.hyperparameters()["noise_sd"].iloc[0] < 0.2


def test_blocked_model_predicts_points_places_and_round_trips(oversampled, tmp_path):
    _, _, da = oversampled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = geogp.fit(da)
    grid = model.predict()
    ys, xs = da["y"].values[[0, 1, 2, 40]], da["x"].values[[5, 4, 3, 77]]
    at = model.predict(x=xs, y=ys, points=True)
    np.testing.assert_allclose(at["mean"].values.ravel(), grid["mean"].values[[0, 1, 2, 40],
                                                                     [5, 4, 3, 77]])
    draws = model.sample(2, seed=0).values  # samples and exceedance: one value per block
    np.testing.assert_array_equal(draws, np.kron(draws[:, 1::3, 1::3], np.ones((1, 3, 3))))
    above = model.exceedance(0.0).values
    np.testing.assert_array_equal(above, np.kron(above[1::3, 1::3], np.ones((3, 3))))
    sites = model.suggest_sites(5)
    # sites at block centres: the middle cell of a 3 × 3 block
    assert np.all(np.isin(sites["x"], da["x"].values[1::3]))
    assert np.all(np.isin(sites["y"], da["y"].values[1::3]))
    # a measurement at any cell of a block conditions that block (θ kept): its cells move
    # together, and the block's predicted sd drops
    sites["value"] = 5.0
    one = sites.iloc[:1].assign(x=sites["x"].iloc[:1] + 30.0)  # the block's right-hand cell
    after = model.add_observations(one).predict()
    row = int(np.flatnonzero(da["y"].values == sites["y"].iloc[0])[0])
    col = int(np.flatnonzero(da["x"].values == sites["x"].iloc[0])[0])
    block = (slice(row - 1, row + 2), slice(col - 1, col + 2))
    assert np.ptp(after["mean"].values[block]) == 0.0
    assert after["std_latent"].values[row, col] < grid["std_latent"].values[row, col]
    model.save(tmp_path / "m.npz")
    loaded = geogp.load_model(tmp_path / "m.npz")
    assert loaded.blocks_ == model.blocks_
    np.testing.assert_array_equal(loaded.predict()["mean"].values, grid["mean"].values)


@pytest.mark.parametrize("blocks", [{"factor": [3, 0], "phase": [0, 0]},
                                    {"factor": [3, 3], "phase": [3, 0]},
                                    {"factor": [2, 2], "phase": [0, 0]}, "3x3",
                                    {"factor": [1, 1], "phase": [0, 0]}])
def test_model_file_with_altered_blocks_is_refused(oversampled, tmp_path, blocks):
    """Blocks that are malformed, or not those the lattice was fitted on, are refused in one
    line (the digests fixed, as an editor would)."""
    import json

    from geogp.exceptions import ReadError
    from geogp.persist.checks import digest, meta_digest

    _, _, da = oversampled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        geogp.fit(da, maxiter=2).save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files if k != "__meta__"}
        meta = json.loads(str(z["__meta__"]))
    meta["blocks"] = blocks
    meta["checksums"] = {k: digest(np.asarray(v)) for k, v in arrays.items()}
    meta["meta_digest"] = meta_digest(meta)
    with open(tmp_path / "bad.npz", "wb") as f:
        np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
    with pytest.raises(ReadError) as info:
        geogp.load_model(tmp_path / "bad.npz")
    assert "\n" not in str(info.value)
