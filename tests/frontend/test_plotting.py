"""Maps: lon/lat grids drawn with the equal-area aspect at their latitude, axes with units."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import xarray as xr

from geogp.frontend.plotting import plot_maps


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
    for a, b in zip(ref.axes[:2], got.axes[:2], strict=True):
        np.testing.assert_array_equal(a.images[0].get_array(), b.images[0].get_array())
        assert b.images[0].get_array().shape == (6, 9)


# ------------------------------------------------------------------ maps read back (issue 31)
def _texts_outside(fig) -> list:
    """Visible, non-empty texts whose drawn box leaves the figure (clipped labels)."""
    import matplotlib.text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    out = []
    for t in fig.findobj(matplotlib.text.Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        bb = t.get_window_extent(renderer)
        if bb.x0 < box.x0 - 1 or bb.x1 > box.x1 + 1 or bb.y0 < box.y0 - 1 or bb.y1 > box.y1 + 1:
            out.append(t.get_text())
    return out


def _utm_raster(ny=30, nx=50, step=100.0):
    """A ny × nx raster in UTM 33N, y descending, cell centres ``step`` apart."""
    y = 4.0e6 + step * np.arange(ny, 0, -1.0)
    x = 5.0e5 + step * np.arange(nx, dtype=float)
    return _pred(y, x, 32633)


def test_a_300_by_500_projected_map_has_its_true_aspect_extent_and_units():
    obs, pred = _utm_raster(30, 50)   # 30 × 50 cells: the 300 × 500 shape at a tenth
    fig = plot_maps(obs, pred)
    fig.canvas.draw()
    x, y = pred.x.values, pred.y.values
    for ax in fig.axes[:3]:   # observations, mean, std (the others are colour bars)
        assert ax.get_xlim() == pytest.approx((x[0] - 50, x[-1] + 50))
        assert ax.get_ylim() == pytest.approx((y[-1] - 50, y[0] + 50))   # north up
        assert _box_ratio(ax) == pytest.approx(30 / 50, rel=0.02)
        assert ax.get_xlabel() == "x [m]" and ax.get_ylabel() == "y [m]"
    assert _texts_outside(fig) == []


def _std_colorbar(fig):
    ax = next(a for a in fig.axes if a.get_title().startswith("predictive std"))
    return ax.images[0].get_clim()


def test_std_colour_bar_starts_at_zero():
    obs, pred = _utm_raster(8, 10)
    pred["std"] = pred["std"] * 0 + np.linspace(1.0, 1.07, 10)   # a 7 % contrast
    assert _std_colorbar(plot_maps(obs, pred)) == pytest.approx((0.0, 1.07))


def test_point_data_are_drawn_as_points_with_the_mean_on_one_scale():
    """Points: the observations panel is a scatter of every finite point, coloured by value
    on the mean's scale; the limits come from the points and the mean only."""
    _obs, pred = _utm_raster(20, 30)
    rng = np.random.default_rng(0)
    pts = np.column_stack([rng.uniform(5.0e5, 5.029e5, 40), rng.uniform(4.0e6, 4.002e6, 40),
                           rng.normal(10.0, 1.0, 40)])
    pts[3, 2] = np.nan   # a missing value is not drawn
    pred["mean"] = pred["mean"] + 10.0
    fig = plot_maps(None, pred, points=pts)
    ax = fig.axes[0]
    assert ax.get_title() == "observations (39 points)"
    (scatter,) = ax.collections
    assert len(scatter.get_offsets()) == 39
    np.testing.assert_allclose(scatter.get_array(), np.delete(pts[:, 2], 3))
    both = np.concatenate([np.delete(pts[:, 2], 3), pred["mean"].values.ravel()])
    want = tuple(np.percentile(both, [1, 99]))
    assert scatter.get_clim() == pytest.approx(want)
    mean_ax = next(a for a in fig.axes if a.get_title() == "predictive mean")
    assert mean_ax.images[0].get_clim() == pytest.approx(want)
    assert _texts_outside(fig) == []


def test_cli_point_fit_with_a_template_draws_the_points_not_the_template(tmp_path,
                                                                         monkeypatch):
    """geogp fit points.csv --like grid.tif --map: the points are the data (40 of them on the
    first panel), the template's values (500–1000 m) set neither the colours nor the title,
    and its units do not label the mean."""
    import pandas as pd

    import geogp.frontend.plotting
    from geogp.cli import main

    grid, _ = _utm_raster(12, 16)
    grid = (grid * 0 + np.linspace(500, 1000, 16)).rename("elevation_template")
    grid.attrs.update(units="m", long_name="a template DEM")
    grid.rio.to_raster(tmp_path / "grid.tif")
    rng = np.random.default_rng(1)
    x, y = rng.uniform(5.0e5, 5.015e5, 40), rng.uniform(4.0e6, 4.0012e6, 40)
    pd.DataFrame({"E": x, "N": y, "t": 20 + np.sin(x / 400)}).to_csv(tmp_path / "p.csv",
                                                                     index=False)
    figures = []
    draw = geogp.frontend.plotting.plot_maps
    monkeypatch.setattr(geogp.frontend.plotting, "plot_maps",
                        lambda *a, **k: figures.append(draw(*a, **k)) or figures[-1])
    code = main(["fit", str(tmp_path / "p.csv"), "--x", "E", "--y", "N", "--value", "t",
                 "--crs", "EPSG:32633", "--like", str(tmp_path / "grid.tif"), "--model",
                 "exact", "--maxiter", "5", "--out", str(tmp_path / "t.tif"), "--map",
                 str(tmp_path / "t.png"), "--quiet"])
    assert code == 0 and (tmp_path / "t.png").stat().st_size > 0
    (fig,) = figures
    assert fig._suptitle.get_text() == "t"
    assert len(fig.axes[0].collections[0].get_offsets()) == 40
    lo, hi = fig.axes[0].collections[0].get_clim()
    assert 18 < lo < hi < 22
    bars = [a.images[0].colorbar for a in fig.axes[1:3]]   # mean, std
    assert all(cb.ax.get_ylabel() == "" for cb in bars)     # no "m" from the template


def test_cv_figure_shows_every_n_and_the_raster_units(tmp_path):
    """cv.png: the n= of each distance stratum is a visible tick label that no legend covers,
    the error axis says °C for a raster in degC, and no text leaves the figure."""
    import xarray as xr

    from geogp.crossval import cross_validate

    rng = np.random.default_rng(0)
    da = xr.DataArray(rng.normal(20, 2, (24, 30)), dims=("y", "x"),
                      coords={"y": np.arange(24.0), "x": np.arange(30.0)},
                      attrs={"units": "degC"})
    da.values[5:9, 5:12] = np.nan

    def flat(train):
        v = train.values
        return np.full(v.shape, np.nanmean(v)), np.full(v.shape, np.nanstd(v))

    result = cross_validate(da, "gaps", 2, method=flat, fold_options={"fraction": 0.2})
    fig = result.plot()
    fig.canvas.draw()
    cover = next(a for a in fig.axes if a.get_title().startswith("coverage by distance"))
    labels = [t for t in cover.get_xticklabels() if "n=" in t.get_text()]
    assert len(labels) == len(result.by_distance()) - 1   # every stratum, "all" excluded
    covering = [a.get_legend().get_window_extent() for a in fig.axes if a.get_legend()]
    assert not any(t.get_window_extent().overlaps(bb) for t in labels for bb in covering)
    err = next(a for a in fig.axes if a.get_title().startswith("error vs"))
    assert err.get_ylabel() == "°C"
    assert _texts_outside(fig) == []


def test_place_map_has_the_rasters_aspect_units_and_a_std_bar_from_zero():
    """The sites map of geogp place: the 300 × 500 raster drawn wider than tall (0.6), the
    axes in metres, the std colour bar from 0, every site drawn."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from geogp.frontend.plotting import set_map_axes
    from geogp.placement import plot_sites

    _obs, pred = _utm_raster(30, 50)
    x, y = pred.x.values, pred.y.values
    sites = pd.DataFrame({"order": [1, 2, 3], "x": x[[3, 20, 40]], "y": y[[2, 15, 28]]})
    fig, ax = plt.subplots()
    ratio = set_map_axes(ax, pred, "y", "x")
    assert ratio == pytest.approx(0.6)
    plot_sites(sites, 1.0 + 0.05 * pred["std"].values, x, y, ax=ax,
               xlabel=ax.get_xlabel(), ylabel=ax.get_ylabel())
    fig.canvas.draw()
    assert _box_ratio(ax) == pytest.approx(0.6, rel=0.02)
    assert ax.get_xlabel() == "x [m]" and ax.get_ylabel() == "y [m]"
    assert ax.collections[0].get_clim()[0] == 0.0
    assert len(ax.collections[1].get_offsets()) == 3
