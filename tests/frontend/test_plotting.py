"""Maps: lon/lat grids drawn with the equal-area aspect at their latitude, axes with units."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from geogp.plotting import plot_maps  # noqa: E402


def _pred(y, x, crs):
    z = np.add.outer(np.sin(y), np.cos(x))
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x})
    pred = xr.Dataset({"mean": da, "std": 0 * da + 1.0})
    return da.rio.write_crs(crs), pred.rio.write_crs(crs)


def _box_ratio(ax):
    """Height / width of the drawn data area, in display units."""
    bb = ax.get_window_extent()
    return bb.height / bb.width


def test_lon_lat_map_has_equal_area_aspect_and_degree_labels():
    # 4.6° of longitude by 2.8° of latitude at 35.7° N: 3.73° × 2.8° on the ground, wider
    # than tall (the case was drawn taller than wide)
    y = np.linspace(37.1, 34.3, 60)
    x = np.linspace(-95.9, -91.3, 100)
    obs, pred = _pred(y, x, "EPSG:4326")
    fig = plot_maps(obs, pred)
    ax = fig.axes[0]
    ax.figure.canvas.draw()
    want = (2.8 + 2.8 / 59) / ((4.6 + 4.6 / 99) * np.cos(np.deg2rad(35.7)))
    assert ax.get_aspect() == pytest.approx(1 / np.cos(np.deg2rad(y.mean())))
    assert _box_ratio(ax) == pytest.approx(want, rel=0.03)
    assert _box_ratio(ax) < 1
    assert "°E" in ax.get_xlabel() and "°N" in ax.get_ylabel()


def test_projected_map_is_equal_and_labelled_in_metres():
    y = np.arange(40.0, 0, -1) * 100
    x = np.arange(80.0) * 100
    obs, pred = _pred(y, x, 32633)
    fig = plot_maps(obs, pred)
    ax = fig.axes[0]
    ax.figure.canvas.draw()
    assert _box_ratio(ax) == pytest.approx(0.5, rel=0.03)
    assert ax.get_xlabel() == "x [m]" and ax.get_ylabel() == "y [m]"


def test_x_first_rasters_are_drawn_with_rows_along_y():
    """Inputs and predictions stored (x, y) are drawn as (y, x) images: the same pixels as the
    (y, x) versions."""
    y, x = np.linspace(0, 2, 6), np.linspace(0, 3, 9)
    da, pred = _pred(y, x, 32633)
    ref = plot_maps(da, pred)
    got = plot_maps(da.transpose("x", "y"), pred.transpose("x", "y"))
    for a, b in zip(ref.axes[:2], got.axes[:2]):
        np.testing.assert_array_equal(a.images[0].get_array(), b.images[0].get_array())
        assert b.images[0].get_array().shape == (6, 9)
