"""The geogp command: end to end in a subprocess, error paths in-process (exit codes 0/1/2)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import rasterio

from geogp import __version__
from geogp.cli import main

from _cli_helpers import error_line

pytestmark = [
    # the geogp command runs in-process here; it prints warnings as one line on stderr, where
    # some tests read them: warnings are shown as the command shows them, not raised
    pytest.mark.filterwarnings("default::UserWarning"),
    # test_fit_vector_point_files_like_the_same_csv writes a GeoJSON without a CRS on purpose
    pytest.mark.filterwarnings("ignore:'crs' was not provided:UserWarning:pyogrio"),
]


@pytest.fixture
def tif(raster, tmp_path):
    path = tmp_path / "in.tif"
    raster.astype("float32").rio.write_nodata(np.nan, encoded=True).rio.to_raster(path)
    return path


def _run(*args, cwd):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "geogp.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def test_fit_end_to_end_in_a_subprocess(tif, tmp_path):
    out = tmp_path / "pred.tif"
    res = _run("fit", tif, "--out", out, "--features", 32, "--maxiter", 10, "--netcdf",
               tmp_path / "pred.nc", "--map", tmp_path / "pred.png", "--save-model",
               tmp_path / "model.npz", "--latent", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "lengthscale" in res.stdout and "wrote" in res.stdout
    assert "fitting hyperparameters (L-BFGS" in res.stderr  # progress bars go to stderr
    assert "writing: 100%" in res.stderr and "4/4" in res.stderr  # tif, nc, png, model
    with rasterio.open(out) as src, rasterio.open(tif) as ref:
        assert src.descriptions == ("mean", "std", "std_latent")
        assert src.crs == ref.crs and src.transform == ref.transform
        assert src.shape == ref.shape
        assert np.isfinite(src.read(1)).all()
    for name in ("pred.nc", "pred.png", "model.npz"):
        assert (tmp_path / name).stat().st_size > 0


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"geogp {__version__}"
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--help"])
    assert exc.value.code == 0
    assert "examples:" in capsys.readouterr().out


def test_existing_output_without_overwrite(tif, tmp_path, capsys):
    out = tmp_path / "pred.tif"
    out.write_bytes(b"old")
    assert main(["fit", str(tif), "--out", str(out), "--quiet"]) == 2
    assert "--overwrite" in error_line(capsys) and out.read_bytes() == b"old"


def test_unreadable_input(tmp_path, capsys):
    bad = tmp_path / "bad.tif"
    bad.write_text("not a raster")
    assert main(["fit", str(bad), "--out", str(tmp_path / "o.tif"), "--quiet"]) == 2
    assert "cannot read" in error_line(capsys)
    assert main(["fit", str(tmp_path / "none.nc"), "--out", str(tmp_path / "o.tif")]) == 2
    assert "no such file" in error_line(capsys)
    assert not (tmp_path / "o.tif").exists()


def test_unknown_variable(raster, tmp_path, capsys):
    nc = tmp_path / "in.nc"
    raster.to_dataset(name="h").to_netcdf(nc, engine="h5netcdf")
    assert main(["fit", str(nc), "--var", "t2m", "--out", str(tmp_path / "o.tif")]) == 2
    assert "'t2m' not found" in error_line(capsys)


def test_all_missing_input(raster, tmp_path, capsys):
    path = tmp_path / "nan.tif"
    (raster * np.nan).rio.to_raster(path)
    assert main(["fit", str(path), "--out", str(tmp_path / "o.tif"), "--quiet"]) == 2
    assert "missing" in error_line(capsys)
    assert not (tmp_path / "o.tif").exists()


def test_usage_errors_exit_2(tif, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(tif)])  # --out missing
    assert exc.value.code == 2
    assert main([]) == 2
    same = str(tmp_path / "a.tif")
    assert main(["fit", str(tif), "--out", same, "--map", same]) == 2
    assert "differ" in error_line(capsys)


def test_failure_during_the_run_leaves_no_partial_output(tif, tmp_path, capsys, monkeypatch):
    """An unexpected error while writing: exit code 1, one line, and no output file."""
    import rasterio.io

    def broken(self, *args, **kwargs):
        raise RuntimeError("device failure (injected)")

    monkeypatch.setattr(rasterio.io.DatasetWriter, "write", broken)
    out = tmp_path / "pred.tif"
    code = main(["fit", str(tif), "--out", str(out), "--features", "64", "--maxiter", "3",
                 "--quiet"])
    assert code == 1
    assert "injected" in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["in.tif"]


def test_a_failed_later_output_takes_back_the_earlier_ones(tif, tmp_path, capsys,
                                                            monkeypatch):
    """--out written, then --netcdf fails: nothing of this run is left on disk."""
    import geogp.frontend.io

    def broken(*args, **kwargs):
        raise OSError("disk full (injected)")

    monkeypatch.setattr(geogp.frontend.io, "write_netcdf", broken)
    code = main(["fit", str(tif), "--out", str(tmp_path / "p.tif"), "--netcdf",
                 str(tmp_path / "p.nc"), "--features", "64", "--maxiter", "3", "--quiet"])
    assert code == 1
    assert "injected" in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["in.tif"]
    # with --overwrite, a file the run replaced gets its previous content back
    (tmp_path / "p.tif").write_bytes(b"previous result")
    code = main(["fit", str(tif), "--out", str(tmp_path / "p.tif"), "--netcdf",
                 str(tmp_path / "p.nc"), "--features", "64", "--maxiter", "3", "--quiet",
                 "--overwrite"])
    assert code == 1
    assert (tmp_path / "p.tif").read_bytes() == b"previous result"
    assert sorted(os.listdir(tmp_path)) == ["in.tif", "p.tif"]
    # and a run that succeeds replaces it and leaves no copy behind
    assert main(["fit", str(tif), "--out", str(tmp_path / "p.tif"), "--features", "64",
                 "--maxiter", "3", "--quiet", "--overwrite"]) == 0
    assert (tmp_path / "p.tif").read_bytes()[:2] in (b"II", b"MM")  # a TIFF now
    assert sorted(os.listdir(tmp_path)) == ["in.tif", "p.tif"]


def test_options_that_cannot_work_are_refused_before_the_fit(raster, tif, tmp_path, capsys,
                                                              monkeypatch):
    """Exit 2 at once (the fit is never started): --samples on a raster with bands,
    --maxiter < 1, --max-memory ≤ 0."""
    import geogp.frontend.api

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit should not start")

    monkeypatch.setattr(geogp.frontend.api.GeoRegressor, "fit", no_fit)
    bands = tmp_path / "bands.tif"
    raster.expand_dims(band=[1, 2]).rio.to_raster(bands)
    out = str(tmp_path / "o.tif")
    assert main(["fit", str(bands), "--out", out, "--samples", "2", "--quiet"]) == 2
    assert "--samples" in error_line(capsys)
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(tif), "--out", out, "--maxiter", "-1"])
    assert exc.value.code == 2
    sites = str(tmp_path / "s.geojson")
    assert main(["place", str(tif), "--out", sites, "--max-memory", "-1", "--quiet"]) == 2
    assert "--max-memory" in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["bands.tif", "in.tif"]


def test_missing_crs_is_a_warning_on_stderr(raster, tmp_path, capsys):
    path = tmp_path / "nocrs.nc"
    raster.drop_vars("spatial_ref").to_dataset(name="h").to_netcdf(path, engine="h5netcdf")
    code = main(["fit", str(path), "--out", str(tmp_path / "o.tif"), "--features", "64",
                 "--maxiter", "3", "--quiet"])
    assert code == 0
    assert "geogp: warning: no CRS found; geogp assumed planar" in capsys.readouterr().err


def test_demo_command_small(tmp_path, capsys):
    code = main(["demo", "--out-dir", str(tmp_path), "--features", "64", "--quiet"])
    assert code == 0
    assert (tmp_path / "demo_prediction.tif").exists() and (tmp_path / "demo_map.png").exists()
    with rasterio.open(tmp_path / "demo_prediction.tif") as src:
        assert src.descriptions == ("mean", "std") and src.crs.to_epsg() == 4326
        assert src.shape == (344, 403)


def test_fit_a_point_table_onto_a_grid(tmp_path):
    """geogp fit points.csv --crs --resolution: a GeoTIFF on a grid over the points, whose
    mean follows the measured field; a missing CRS or column is one clear line (exit 2)."""
    import pandas as pd
    import rioxarray

    rng = np.random.default_rng(0)
    x, y = rng.uniform(5e5, 5.1e5, 800), rng.uniform(4e6, 4.008e6, 800)
    truth = lambda a, b: np.sin(a / 2000) + np.cos(b / 1500)   # noqa: E731
    pd.DataFrame({"E": x, "N": y, "temp": truth(x, y) + 0.05 * rng.normal(size=800)}).to_csv(
        tmp_path / "pts.csv", index=False)
    out = tmp_path / "p.tif"
    code = main(["fit", str(tmp_path / "pts.csv"), "--x", "E", "--y", "N", "--value", "temp",
                 "--crs", "EPSG:32633", "--resolution", "250", "--out", str(out),
                 "--features", "400", "--quiet"])
    assert code == 0
    band = rioxarray.open_rasterio(out)
    assert band.rio.crs.to_epsg() == 32633 and band.shape == (2, 32, 40)
    gx, gy = np.meshgrid(band.x.values, band.y.values)
    inside = (gx > 5.01e5) & (gx < 5.09e5) & (gy > 4.001e6) & (gy < 4.007e6)
    err = band.values[0][inside] - truth(gx, gy)[inside]
    assert np.sqrt(np.mean(err**2)) < 0.1
    assert main(["fit", str(tmp_path / "pts.csv"), "--resolution", "250", "--out",
                 str(tmp_path / "q.tif")]) == 2           # no --crs
    assert main(["fit", str(tmp_path / "pts.csv"), "--crs", "EPSG:32633", "--resolution", "250",
                 "--out", str(tmp_path / "q.tif")]) == 2  # columns x, y, value absent
    assert not (tmp_path / "q.tif").exists()


@pytest.mark.parametrize("model", ["lattice", "afs"])
def test_fit_writes_posterior_sample_bands(tif, tmp_path, model, capsys):
    """--samples N: N extra GeoTIFF bands after mean/std and a 'samples' NetCDF variable with
    the same values; each sample lies within 6 std of the mean (a draw of the posterior);
    --seed reproduces them."""
    import xarray as xr

    def run(name, seed):
        out, nc = tmp_path / f"{name}.tif", tmp_path / f"{name}.nc"
        argv = ["fit", str(tif), "--out", str(out), "--netcdf", str(nc), "--model", model,
                "--maxiter", "5", "--samples", "3", "--seed", str(seed), "--quiet"]
        if model == "afs":
            argv += ["--features", "32"]
        assert main(argv) == 0, capsys.readouterr().err
        return out, nc

    out, nc = run("a", 0)
    with rasterio.open(out) as src:
        assert src.descriptions == ("mean", "std", "samples sample=1", "samples sample=2",
                                    "samples sample=3")
        bands = src.read()
    mean, std, draws = bands[0], bands[1], bands[2:]
    assert np.all(np.abs(draws - mean) < 6 * std)
    assert np.all(np.std(draws, axis=0) > 0)   # the draws differ
    with xr.open_dataset(nc) as ds:
        np.testing.assert_allclose(ds["samples"].transpose("sample", "y", "x").values, draws,
                                   rtol=1e-6)
    with rasterio.open(run("b", 0)[0]) as src:
        np.testing.assert_array_equal(src.read()[2:], draws)
    assert main(["fit", str(tif), "--out", str(tmp_path / "c.tif"), "--samples", "-1"]) == 2


def test_fit_vector_point_files_like_the_same_csv(tmp_path):
    """geogp fit stations.gpkg / .geojson (issue #17): the same points as a CSV give the same
    prediction raster (GeoPackage in the grid's CRS; GeoJSON in lon/lat, reprojected with
    --crs); lines or a missing CRS are refused with exit 2 and no file."""
    gpd = pytest.importorskip("geopandas")
    import pandas as pd
    from shapely.geometry import LineString

    rng = np.random.default_rng(1)
    x, y = rng.uniform(5e5, 5.1e5, 300), rng.uniform(4e6, 4.008e6, 300)
    t = np.sin(x / 2000) + np.cos(y / 1500) + 0.05 * rng.normal(size=300)
    pd.DataFrame({"x": x, "y": y, "t": t}).to_csv(tmp_path / "pts.csv", index=False)
    gdf = gpd.GeoDataFrame({"t": t}, geometry=gpd.points_from_xy(x, y), crs="EPSG:32633")
    gdf.to_file(tmp_path / "pts.gpkg")
    gdf.to_crs("EPSG:4326").to_file(tmp_path / "pts.geojson")
    common = ["--value", "t", "--resolution", "500", "--features", "64", "--maxiter", "5",
              "--quiet"]

    def band(name, *extra):
        out = tmp_path / f"{name}.tif"
        assert main(["fit", str(tmp_path / name), "--out", str(out), *common, *extra]) == 0
        with rasterio.open(out) as src:
            return src.read(), src.crs, src.transform

    ref, crs, transform = band("pts.csv", "--crs", "EPSG:32633")
    got, gcrs, gtransform = band("pts.gpkg")
    assert gcrs == crs and gtransform == transform
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    got, gcrs, _ = band("pts.geojson", "--crs", "EPSG:32633")   # lon/lat → UTM 33N
    assert gcrs.to_epsg() == 32633
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)   # reprojection round trip

    gpd.GeoDataFrame({"t": [1.0]}, geometry=[LineString([(0, 0), (1, 1)])],
                     crs="EPSG:32633").to_file(tmp_path / "line.gpkg")
    gpd.GeoDataFrame({"t": t}, geometry=gpd.points_from_xy(x, y)).to_file(tmp_path / "nocrs.gpkg")
    for bad in ("line.gpkg", "nocrs.gpkg"):
        assert main(["fit", str(tmp_path / bad), "--out", str(tmp_path / "bad.tif"),
                     *common]) == 2
    assert not (tmp_path / "bad.tif").exists()


def test_fit_with_the_mid_scale_level(tif, tmp_path, capsys):
    """--mid-scale reaches the lattice model: the saved model has the level and predicts like
    the same model fitted through the API; a bad factor is refused with the reason."""
    import geogp

    model_path = tmp_path / "model.npz"
    assert main(["fit", str(tif), "--out", str(tmp_path / "p.tif"), "--mid-scale", "3",
                 "--maxiter", "3", "--save-model", str(model_path), "--quiet"]) == 0
    est = geogp.load_model(model_path).estimators_[0]
    assert est.mid_scale == 3 and "mid_scale_range" in est.describe()
    ref = geogp.fit(geogp.open_raster(tif), mid_scale=3, maxiter=3).predict()
    with rasterio.open(tmp_path / "p.tif") as src:
        np.testing.assert_allclose(src.read(1), ref["mean"].values, rtol=1e-5, atol=1e-5)
    assert main(["fit", str(tif), "--out", str(tmp_path / "q.tif"), "--mid-scale", "1"]) == 2
    assert "mid_scale" in capsys.readouterr().err
    # "none" turns the level off, "auto" is the front end's default; anything else is refused
    for word, want in (("none", None), ("AUTO", "auto")):
        path = tmp_path / f"{word}.npz"
        assert main(["fit", str(tif), "--out", str(tmp_path / f"{word}.tif"), "--mid-scale",
                     word, "--maxiter", "2", "--save-model", str(path), "--quiet"]) == 0
        assert geogp.load_model(path).estimators_[0].mid_scale == want
    with pytest.raises(SystemExit):
        main(["fit", str(tif), "--out", str(tmp_path / "r.tif"), "--mid-scale", "coarse"])
    assert "expected auto, none or an integer" in capsys.readouterr().err


def test_fit_with_the_alpha_option(tif, tmp_path, capsys):
    """--alpha reaches the lattice model (the saved model used α = 3, and predicts like the
    same model fitted through the API); it is refused with a non-Gaussian likelihood and for
    an order the model does not have."""
    import geogp

    model_path = tmp_path / "model.npz"
    assert main(["fit", str(tif), "--out", str(tmp_path / "p.tif"), "--alpha", "3",
                 "--maxiter", "3", "--save-model", str(model_path), "--quiet"]) == 0
    est = geogp.load_model(model_path).estimators_[0]
    assert est.alpha == 3 and est.alpha_ == 3
    ref = geogp.fit(geogp.open_raster(tif), alpha=3, maxiter=3).predict()
    with rasterio.open(tmp_path / "p.tif") as src:
        np.testing.assert_allclose(src.read(1), ref["mean"].values, rtol=1e-5, atol=1e-5)
    assert main(["fit", str(tif), "--out", str(tmp_path / "q.tif"), "--alpha", "3",
                 "--likelihood", "poisson"]) == 2
    assert "--alpha belongs to the lattice model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", str(tif), "--out", str(tmp_path / "r.tif"), "--alpha", "4"])


def test_max_memory_limits_the_model_before_it_allocates(tif, tmp_path, capsys):
    """--max-memory reaches the model's estimate: with --model lattice a limit below the
    estimate is refused, with the estimate, before any output exists; a bad value is a
    usage error."""
    out = tmp_path / "o.tif"
    code = main(["fit", str(tif), "--out", str(out), "--model", "lattice", "--max-memory",
                 "0.5", "--quiet"])
    line = error_line(capsys)
    assert code != 0 and "GiB, above the limit of 0.50 GiB" in line and not out.exists()
    # the advice names the command's flags, not the Python options (issue 31)
    assert "--max-memory" in line and "--model afs" in line and "--posterior-tile" in line
    assert not any(w in line for w in ("max_bytes", "posterior_tile", "model='afs'",
                                       "MemoryEstimateError"))
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(tif), "--out", str(out), "--max-memory", "-1"])
    assert exc.value.code == 2


def test_fit_with_local_workers_writes_the_in_process_raster(tif, tmp_path):
    """geogp fit --workers 2 runs the lattice posterior's tiles on a dask LocalCluster and
    writes the same raster as the in-process run."""
    import rasterio

    outs = []
    for extra in ([], ["--workers", "2"]):
        out = tmp_path / f"o{len(extra)}.tif"
        assert main(["fit", str(tif), "--out", str(out), "--model", "lattice", "--maxiter",
                     "5", "--posterior-tile", "16", "--quiet", *extra]) == 0
        with rasterio.open(out) as src:
            outs.append(src.read())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_fit_exclude_keeps_nodata_where_the_mask_is_set(raster, tif, tmp_path, capsys):
    """geogp fit --exclude MASK.tif (issue 31; as place --exclude): cells where the mask is
    non-zero (e.g. outside a reprojected raster's footprint) stay nodata in every band, the
    others are filled; a mask on another grid is refused before anything is written."""
    mask = (raster * 0).fillna(0)
    mask[:, :5] = 1                       # a strip "outside the footprint"
    mask[-3:, :] = 1
    mask.rio.to_raster(tmp_path / "mask.tif")
    out = tmp_path / "o.tif"
    argv = ["fit", str(tif), "--out", str(out), "--model", "afs", "--features", "32",
            "--maxiter", "5", "--latent", "--quiet"]
    assert main([*argv, "--exclude", str(tmp_path / "mask.tif")]) == 0
    with rasterio.open(out) as src:
        bands = src.read()
    outside = mask.values != 0
    assert np.isnan(bands[:, outside]).all() and np.isfinite(bands[:, ~outside]).all()
    mask[:, 1:].rio.to_raster(tmp_path / "other.tif")
    bad = tmp_path / "bad.tif"
    assert main(["fit", str(tif), "--out", str(bad), "--exclude",
                 str(tmp_path / "other.tif")]) == 2
    assert "not on the input's grid" in capsys.readouterr().err and not bad.exists()
