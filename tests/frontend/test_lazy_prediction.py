"""Lazy predictions (issue 28, item 4): ``predict(lazy=True)``, the default on grids above
``geogp.core.memory.LAZY_CELLS``, returns dask-backed variables computed block by block; the
writers compute them window by window, each block once, without the whole raster in memory.
Every lazy result is compared with the eager one."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import rasterio
import xarray as xr

import geogp
import geogp.core.memory
from geogp.exceptions import InputError, OutsideWindowError
from geogp.families import generic
from geogp.frontend.io import write_geotiff, write_netcdf
from geogp.frontend.plotting import plot_maps, thinned
from geogp.models.lattice.family import LatticeFamily

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

VARIABLES = ("mean", "std", "std_latent", "quantiles")


@pytest.fixture(scope="module")
def lattice_model():
    rng = np.random.default_rng(0)
    y, x = np.arange(40) * 10.0, np.arange(50) * 10.0
    v = np.sin(y[:, None] / 90) + np.cos(x[None, :] / 70) + 0.1 * rng.standard_normal((40, 50))
    v[10:25, 20:30] = np.nan
    da = xr.DataArray(v, dims=("y", "x"), coords={"y": y[::-1], "x": x},
                      attrs={"units": "K", "long_name": "temperature"}).rio.write_crs(32633)
    return geogp.GeoRegressor("lattice", progress=False).fit(da)


@pytest.fixture(scope="module")
def afs_model():
    from _frontend_rasters import make_raster

    return geogp.GeoRegressor("afs", n_features=400, progress=False,
                              options={"optimize": False, "lengthscale": 0.3,
                                       "noise": 0.05}).fit(make_raster())


def _assert_same(lazy: xr.Dataset, eager: xr.Dataset) -> None:
    assert set(lazy.data_vars) == set(eager.data_vars)
    for name in lazy.data_vars:
        assert lazy[name].chunks is not None, name  # dask-backed
        assert eager[name].chunks is None, name
        np.testing.assert_allclose(lazy[name].values, eager[name].values, rtol=1e-13,
                                   atol=1e-13, err_msg=name)
        assert lazy[name].dims == eager[name].dims and lazy[name].attrs == eager[name].attrs
    xr.testing.assert_equal(lazy.coords.to_dataset(), eager.coords.to_dataset())
    assert lazy.rio.crs == eager.rio.crs and lazy.attrs == eager.attrs


@pytest.mark.parametrize("which", ["lattice_model", "afs_model"])
def test_lazy_prediction_equals_the_eager_one(which, request, monkeypatch):
    """Block by block (blocks of a few rows, so that there are many) the lazy moments and
    quantiles equal the eager ones, with the same coordinates, attributes and CRS."""
    model = request.getfixturevalue(which)
    monkeypatch.setattr(generic, "LAZY_BLOCK_CELLS", 200)  # 4 rows a block
    eager = model.predict(quantiles=[0.05, 0.95], lazy=False)
    lazy = model.predict(quantiles=[0.05, 0.95], lazy=True)
    assert len(lazy["mean"].chunks[0]) == -(-eager.sizes["y"] // 4)
    _assert_same(lazy, eager)


@pytest.mark.parametrize("bad", ["yes", 1, 0.5])
def test_lazy_must_be_a_bool_or_none(lattice_model, bad):
    with pytest.raises(InputError, match="lazy must be True, False or None"):
        lattice_model.predict(lazy=bad)


def test_predictions_are_lazy_by_default_above_LAZY_CELLS(lattice_model, monkeypatch):
    cells = 40 * 50
    monkeypatch.setattr(geogp.core.memory, "LAZY_CELLS", cells)
    assert lattice_model.predict()["mean"].chunks is None
    monkeypatch.setattr(geogp.core.memory, "LAZY_CELLS", cells - 1)
    _assert_same(lattice_model.predict(quantiles=[0.5]),
                 lattice_model.predict(quantiles=[0.5], lazy=False))


def test_block_rows_are_powers_of_two_within_the_cell_budget():
    for n_columns in (1, 7, 256, 500, 1000, 3300, 2**18, 10**6):
        rows = generic.lazy_block_rows(n_columns)
        assert rows & (rows - 1) == 0 and 1 <= rows <= generic.LAZY_BLOCK_ROWS
        assert rows * n_columns <= generic.LAZY_BLOCK_CELLS or rows == 1
        assert rows == generic.LAZY_BLOCK_ROWS or 2 * rows * n_columns > generic.LAZY_BLOCK_CELLS


def test_outside_the_window_raises_when_predicting_not_when_writing(lattice_model):
    y = np.linspace(390.0, 0.0, 20)
    with pytest.raises(OutsideWindowError):
        lattice_model.predict(x=np.linspace(0.0, 5000.0, 20), y=y, lazy=True)
    pred = lattice_model.predict(x=np.linspace(0.0, 5000.0, 20), y=y, lazy=True, outside="nan")
    eager = lattice_model.predict(x=np.linspace(0.0, 5000.0, 20), y=y, outside="nan")
    np.testing.assert_array_equal(np.isnan(pred["mean"].values), np.isnan(eager["mean"].values))
    assert np.isnan(eager["mean"].values).any() and np.isfinite(eager["mean"].values).any()


def test_writers_predict_each_block_once_and_write_the_eager_values(lattice_model, tmp_path,
                                                                    monkeypatch):
    """The GeoTIFF (mean, std, std_latent, two quantiles) and the NetCDF of a lazy prediction
    equal those of the eager one; each writer computes every block once (the three moments of
    a block come from one task), plus the corners checked when predicting."""
    monkeypatch.setattr(generic, "LAZY_BLOCK_CELLS", 400)  # 8 rows a block: 5 blocks
    calls = []
    original = LatticeFamily.predict_rows

    def counting(self, est, rows, cols, outside="raise"):
        calls.append(len(rows))
        return original(self, est, rows, cols, outside)

    monkeypatch.setattr(LatticeFamily, "predict_rows", counting)
    eager = lattice_model.predict(quantiles=[0.1, 0.9], lazy=False)
    calls.clear()
    lazy = lattice_model.predict(quantiles=[0.1, 0.9], lazy=True)
    assert calls == [2]  # the corners
    options = {"latent": True, "quantiles": True}
    write_geotiff(lazy, tmp_path / "lazy.tif", **options)
    assert sorted(calls[1:]) == [8] * 5
    write_geotiff(eager, tmp_path / "eager.tif", **options)
    with rasterio.open(tmp_path / "lazy.tif") as a, rasterio.open(tmp_path / "eager.tif") as b:
        assert a.count == b.count == 5 and a.descriptions == b.descriptions
        np.testing.assert_array_equal(a.read(), b.read())
        assert a.transform == b.transform and a.crs == b.crs
    del calls[:]
    write_netcdf(lazy, tmp_path / "lazy.nc")
    assert sorted(calls) == [8] * 5
    with xr.open_dataset(tmp_path / "lazy.nc") as back:
        for name in VARIABLES:
            np.testing.assert_allclose(back[name].values, eager[name].values, rtol=1e-13,
                                       atol=1e-13)
    import h5py

    with h5py.File(tmp_path / "lazy.nc") as f:  # one file chunk per block, written whole
        assert f["mean"].chunks == (8, 50) and f["quantiles"].chunks == (2, 8, 50)


def test_writing_a_lazy_prediction_holds_a_window_not_the_raster(lattice_model, tmp_path):
    """Traced peak of predict + write_geotiff on 500 columns: doubling the rows (1·10⁶ →
    2·10⁶ cells) leaves the lazy peak where it was, well below the eager estimate, which
    bounds the eager peak."""
    x = np.linspace(0.0, 490.0, 500)

    def peak(rows: int, lazy: bool) -> int:
        y = np.linspace(390.0, 0.0, rows)
        tracemalloc.start()
        pred = lattice_model.predict(x=x, y=y, quantiles=[0.05, 0.95], lazy=lazy)
        write_geotiff(pred, tmp_path / "o.tif", quantiles=True, latent=True, overwrite=True)
        out = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return out

    peak(2048, True)  # imports and caches outside the measurement
    small, large = peak(2048, True), peak(4096, True)
    eager_estimate = geogp.core.memory.predict_bytes(4096 * 500, 1, 2)
    assert large <= 1.1 * small
    assert large < 0.4 * eager_estimate
    assert peak(4096, False) <= eager_estimate  # the estimate bounds the eager peak


def test_maps_draw_a_thinned_grid_over_the_whole_extent(lattice_model, monkeypatch):
    """A map of a grid wider than MAX_MAP_CELLS draws every k-th cell of the (lazy)
    prediction over the extent of the whole grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geogp.frontend import plotting

    full = lattice_model.predict(lazy=False)
    fig_full = plot_maps(None, full)
    monkeypatch.setattr(plotting, "MAX_MAP_CELLS", 16)  # 40 × 50 cells: every 4th
    small = thinned(full, "y", "x")
    assert dict(small.sizes) == {"y": 10, "x": 13}
    np.testing.assert_array_equal(small["mean"].values, full["mean"].values[::4, ::4])
    fig = plot_maps(None, lattice_model.predict(lazy=True))
    try:
        image = fig.axes[0].images[0]
        np.testing.assert_allclose(np.ma.getdata(image.get_array()),
                                   full["mean"].values[::4, ::4], rtol=1e-13)
        assert image.get_extent() == fig_full.axes[0].images[0].get_extent()
    finally:
        plt.close(fig)
        plt.close(fig_full)


def test_cli_writes_a_lazy_prediction_equal_to_the_eager_one(tmp_path, monkeypatch):
    """``geogp fit`` on a raster above LAZY_CELLS (lowered here) writes, through the lazy
    path, the GeoTIFF and NetCDF that the saved model's eager prediction gives, and a map."""
    from geogp.cli import main

    from _frontend_rasters import make_raster

    src = tmp_path / "in.tif"
    make_raster().astype("float32").rio.to_raster(src)
    monkeypatch.setattr(geogp.core.memory, "LAZY_CELLS", 0)
    out = {k: tmp_path / f"o.{k}" for k in ("tif", "nc", "png", "npz")}
    assert main(["fit", str(src), "--model", "afs", "--features", "64", "--maxiter", "5",
                 "--out", str(out["tif"]), "--netcdf", str(out["nc"]), "--map", str(out["png"]),
                 "--quantiles", "0.1", "0.9", "--save-model", str(out["npz"]),
                 "--quiet"]) == 0
    eager = geogp.load_model(out["npz"]).predict(like=geogp.open_raster(src),
                                                  quantiles=[0.1, 0.9], lazy=False)
    write_geotiff(eager, tmp_path / "eager.tif", quantiles=True)
    with rasterio.open(out["tif"]) as a, rasterio.open(tmp_path / "eager.tif") as b:
        np.testing.assert_array_equal(a.read(), b.read())
    with xr.open_dataset(out["nc"]) as back:
        for name in VARIABLES:
            np.testing.assert_allclose(back[name].values, eager[name].values, rtol=1e-13,
                                       atol=1e-13)
    assert out["png"].stat().st_size > 10_000
