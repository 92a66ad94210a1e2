"""Issue #32, hardening round 2: hangs and runaways. Each request that used to loop forever,
run for minutes or exhaust the memory is refused at once, with one line that states the
reason (and, for memory, the estimate), or now runs in linear time."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import geogp
from geogp.exceptions import InputError
from geogp.features.fourier import FourierFeatures

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

sys.path.insert(0, os.path.dirname(__file__))  # _frontend_rasters


# --------------------------------------------------------------------------- AFS window
@pytest.mark.parametrize("margin", [-1.0, -0.1, float("nan"), "abc"])
def test_issue32_afs_negative_margin_refused_not_a_hang(raster, margin):
    """margin=-1 gave a negative window, and FourierFeatures.for_budget doubled its bandwidth
    for ever; a window that would not cover the data is now refused before any data pass."""
    with pytest.raises(InputError, match="margin"):
        geogp.fit(raster, model="afs", n_features=64, margin=margin)


@pytest.mark.parametrize("width", [-1.0, 0.0, float("inf")])
def test_issue32_for_budget_refuses_a_bad_window(width):
    with pytest.raises(InputError, match="window width"):
        FourierFeatures.for_budget(np.zeros(2), np.array([1.0, width]), 64)


# --------------------------------------------------------------------------- CV folds
def _cv_raster(ny=30, nx=35):
    """About 1,000 observed cells with one cloud."""
    import xarray as xr

    yy, xx = np.mgrid[0:ny, 0:nx]
    z = np.sin(xx / 7.0) + np.cos(yy / 5.0)
    z[5:10, 8:15] = np.nan
    return xr.DataArray(z, dims=("y", "x"), coords={"y": np.arange(ny, 0, -1.0),
                                                    "x": np.arange(nx) * 1.0}).rio.write_crs(32633)


@pytest.mark.parametrize("kind", ["random", "gaps", "blocks"])
def test_issue32_cv_refuses_more_folds_than_cells(kind, no_fit):
    """n_folds=10⁴ on ~1,000 observed cells was accepted (random folds: mostly empty, each
    refitted); now refused before the folds are built or anything is fitted."""
    import tracemalloc

    da = _cv_raster()
    n_obs = int(np.isfinite(da.values).sum())
    with pytest.raises(InputError):  # once untraced: the modules it imports on first use
        geogp.cross_validate(da, kind, 10**4)
    tracemalloc.start()
    with pytest.raises(InputError, match=f"n_folds=10000 .*the raster has {n_obs}"):
        geogp.cross_validate(da, kind, 10**4)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20  # the 10⁴ × ny × nx masks (10 MB) were never built


def test_issue32_cv_refuses_folds_without_cells(no_fit):
    """A fraction below one cell per fold would give empty random folds: refused."""
    with pytest.raises(InputError, match="hold out no observed cell"):
        geogp.cross_validate(_cv_raster(), "random", 5, fold_options={"fraction": 1e-4})


def test_issue32_cli_cv_refuses_more_folds_than_cells(tmp_path, capsys, no_fit):
    from geogp.cli import main

    path = tmp_path / "in.nc"
    _cv_raster().to_dataset(name="v").to_netcdf(path)
    assert main(["cv", str(path), "--n-folds", "10000", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "n_folds=10000" in err and "Traceback" not in err


def test_issue32_cv_folds_memory_estimate_before_allocation(monkeypatch):
    """The folds' memory is estimated from the raster's shape before the masks are built;
    the estimate bounds the traced peak of building them."""
    import tracemalloc

    from geogp.core.folds import fold_bytes, make_folds
    from geogp.exceptions import MemoryEstimateError

    obs = np.isfinite(_cv_raster().values)
    need = fold_bytes(obs.shape, 50)
    monkeypatch.setenv("GEOGP_MAX_MEMORY", str(need / 2 / 2**30))
    tracemalloc.start()
    with pytest.raises(MemoryEstimateError, match="50 random folds") as err:
        make_folds(obs, "random", 50)
    assert tracemalloc.get_traced_memory()[1] < need / 10
    tracemalloc.stop()
    assert err.value.needed_bytes == need
    monkeypatch.delenv("GEOGP_MAX_MEMORY")
    tracemalloc.start()
    make_folds(obs, "random", 50)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak <= need


# --------------------------------------------------------------------------- GeoTIFF bands
def test_issue32_geotiff_many_bands_written_in_few_calls(tmp_path, monkeypatch):
    """--samples 20000 on 40×50 cells: one rasterio write and one read-back call per band and
    window, each costing time in proportion to the band count, made writing quadratic in the
    bands (114 s for 2,000). Bands now go in groups (one call per window for a small grid), and
    the file still holds every sample."""
    import rasterio
    import rasterio.io
    import xarray as xr

    from geogp.frontend.io import write_geotiff

    calls = {"write": 0, "read": 0}
    for cls, name in ((rasterio.io.DatasetWriter, "write"), (rasterio.io.DatasetReader, "read")):
        original = getattr(cls, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, counted)
    ny, nx, n = 40, 50, 300
    rng = np.random.default_rng(0)
    pred = xr.Dataset(
        {"mean": (("y", "x"), rng.random((ny, nx))), "std": (("y", "x"), 1 + rng.random((ny, nx))),
         "samples": (("sample", "y", "x"), rng.standard_normal((n, ny, nx)))},
        coords={"y": 5e6 - 100 * (np.arange(ny) + 0.5), "x": 3e5 + 100 * (np.arange(nx) + 0.5)},
    ).rio.write_crs(32633)
    path = write_geotiff(pred, tmp_path / "s.tif", samples=True)
    assert calls["write"] <= 2 and calls["read"] <= 2, calls
    monkeypatch.undo()
    with rasterio.open(path) as src:
        assert src.count == n + 2 and src.descriptions[-1] == f"samples sample={n - 1}"
        np.testing.assert_array_equal(src.read(n + 2), pred["samples"][-1].values.astype("f4"))


# --------------------------------------------------------------------------- memory estimates
@pytest.fixture(scope="module")
def afs_model():
    from _frontend_rasters import make_raster

    return geogp.fit(make_raster(), model="afs", n_features=36, optimize=False,
                     lengthscale=0.3, noise=0.05)


def _traced(fn):
    """(result or exception, traced peak in bytes) of ``fn()``."""
    import tracemalloc

    tracemalloc.start()
    try:
        out = fn()
    except Exception as err:  # returned for the caller's assertions
        out = err
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, peak


def test_issue32_sample_million_refused_before_allocating(afs_model):
    """model.sample(10**6) ran for minutes into a MemoryError; now refused with the estimate
    (10⁶ × 1,200 cells × 4 doubles = 35.8 GiB) before anything is allocated."""
    from geogp.exceptions import MemoryEstimateError

    err, peak = _traced(lambda: afs_model.sample(10**6))
    assert isinstance(err, MemoryEstimateError), err
    assert "1000000 posterior samples of 30 × 40 cells would need about 35.76 GiB" in str(err)
    assert peak < 2**20


def test_issue32_predict_huge_grid_refused_before_allocating(afs_model):
    """predict(lazy=False) on a 20000² grid: refused with its estimate before the prediction
    starts. By default so large a grid is predicted lazily (dask blocks, computed when
    written or read), and nothing of its size is allocated."""
    from geogp.exceptions import MemoryEstimateError

    y0, x0 = afs_model.target_.y, afs_model.target_.x
    y = np.linspace(y0.max(), y0.min(), 20000)
    x = np.linspace(x0.min(), x0.max(), 20000)
    err, peak = _traced(lambda: afs_model.predict(x=x, y=y, lazy=False))
    assert isinstance(err, MemoryEstimateError), err
    assert "a prediction on 20000 × 20000 cells would need about 59.60 GiB" in str(err)
    assert peak < 8 * 2**20  # the coordinate vectors and their checks, not the grid
    pred, peak = _traced(lambda: afs_model.predict(x=x, y=y))
    assert pred["std"].chunks is not None and pred["std"].shape == (20000, 20000)
    assert peak < 64 * 2**20  # the blocks' task graph, not the 3.2 GB of a band


def test_issue32_estimates_bound_the_traced_peaks(afs_model):
    """The estimates, made before allocating, bound the traced peaks of what they estimate."""
    from geogp.core.memory import predict_bytes, sample_bytes

    y0, x0 = afs_model.target_.y, afs_model.target_.x
    y, x = np.linspace(y0.max(), y0.min(), 300), np.linspace(x0.min(), x0.max(), 400)
    afs_model.predict(x=x, y=y, quantiles=[0.1, 0.9])  # compile first
    pred, peak = _traced(lambda: afs_model.predict(x=x, y=y, quantiles=[0.1, 0.9]))
    assert pred["mean"].shape == (300, 400)
    assert peak <= predict_bytes(300 * 400, 1, 2)
    afs_model.sample(100)
    draws, peak = _traced(lambda: afs_model.sample(100))
    assert draws.shape == (100, 30, 40)
    assert peak <= sample_bytes(100, 30 * 40)


def test_issue32_cli_samples_and_resolution_refused_before_the_fit(raster, tmp_path, capsys,
                                                                   no_fit, monkeypatch):
    """--samples 1000000 and a --resolution of 9.6·10⁷ cells are refused with the estimate
    before the fit (the grid of --resolution is not even built)."""
    import pandas as pd

    from geogp.cli import main

    src = tmp_path / "in.tif"
    raster.astype("float32").rio.to_raster(src)
    assert main(["fit", str(src), "--out", str(tmp_path / "o.tif"), "--samples", "1000000",
                 "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "1000000 posterior samples of 30 × 40 cells would need about" in err
    assert "Traceback" not in err
    table = tmp_path / "pts.csv"
    pd.DataFrame({"x": [0.0, 98_000.0, 50_000.0], "y": [0.0, 98_000.0, 20_000.0],
                  "value": [1.0, 2.0, 3.0]}).to_csv(table, index=False)
    # 9.6·10⁷ cells: the grid (0.72 GiB) and a window of its lazy prediction (0.62 GiB)
    monkeypatch.setenv("GEOGP_MAX_MEMORY", "1")
    import tracemalloc

    tracemalloc.start()
    rc = main(["fit", str(table), "--crs", "EPSG:32633", "--resolution", "10",
               "--out", str(tmp_path / "p.tif"), "--quiet"])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert rc != 0 and peak < 64 * 2**20  # the 9801 × 9801 grid (0.77 GB) was never built
    assert "a prediction on 9801 × 9801 cells would need about 1.34 GiB" in capsys.readouterr().err
