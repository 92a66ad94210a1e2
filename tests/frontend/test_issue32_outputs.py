"""Issue #32, hardening round 2: outputs (item 5) and raw tracebacks of the CLI, each refused
with one line (exit 2) before any fit starts, and legal names that used to fail after it."""

from __future__ import annotations

import os

import numpy as np
import pytest
import rasterio

from geogp.cli import main
from geogp.exceptions import InputError
from geogp.frontend.io import atomic_path, check_writable

from _cli_helpers import error_line

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

FAST = ["--features", "64", "--maxiter", "3", "--quiet"]


@pytest.fixture
def tif(raster, tmp_path):
    path = tmp_path / "in.tif"
    raster.astype("float32").rio.write_nodata(np.nan, encoded=True).rio.to_raster(path)
    return path


# --------------------------------------------------------------------------- item 5: outputs
@pytest.mark.parametrize("kind", ["device_link", "fifo"])
def test_issue32_out_refuses_a_target_that_is_not_a_regular_file(tif, tmp_path, capsys, no_fit,
                                                                  kind):
    """A device (here a link to /dev/null) or a pipe is never replaced, even with --overwrite;
    refused before the fit (a FIFO would also have hung the backup copy of the old output)."""
    target = tmp_path / "o.tif"
    if kind == "device_link":
        os.symlink("/dev/null", target)
    else:
        os.mkfifo(target)
    assert main(["fit", str(tif), "--out", str(target), "--overwrite", "--quiet"]) == 2
    assert "not a regular file" in error_line(capsys)
    assert not target.is_file() and (target.is_symlink() or kind == "fifo")
    assert os.path.realpath(target) == "/dev/null" or kind == "fifo"
    with pytest.raises(InputError, match="not a regular file"):
        check_writable(target, overwrite=True)


def test_issue32_same_output_path_twice_is_refused_before_the_fit(tif, tmp_path, capsys, no_fit,
                                                                  monkeypatch):
    """--out o.tif --save-model ./o.tif: the same file after resolving, with or without
    --overwrite; refused before the fit and nothing is written."""
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--overwrite"]):
        code = main(["fit", str(tif), "--out", "o.tif", "--save-model", "./sub/../o.tif",
                     *extra, "--quiet"])
        assert code == 2
        assert "differ" in error_line(capsys)
    os.symlink(tmp_path / "o.tif", tmp_path / "link.tif")  # a link to the other output
    assert main(["fit", str(tif), "--out", "o.tif", "--netcdf", "link.tif", "--quiet"]) == 2
    assert "differ" in error_line(capsys)
    assert sorted(os.listdir(tmp_path)) == ["in.tif", "link.tif"]


@pytest.mark.parametrize("argv, option", [
    (["--out", "o.nc", "--netcdf", "x.tif"], "--out"),
    (["--out", "o.tif", "--netcdf", "x.tif"], "--netcdf"),
    (["--out", "o.png"], "--out"),
    (["--out", "o.tif", "--save-model", "m.tif"], "--save-model"),
    (["--out", "o.tif", "--map", "m.xyz"], "--map"),
    (["--out", "o.tif", "--map", "m"], "--map"),
])
def test_issue32_output_suffix_of_another_format_is_refused_before_the_fit(
        tif, tmp_path, capsys, no_fit, monkeypatch, argv, option):
    """Each output's suffix must fit its format (--out o.nc wrote a GeoTIFF named .nc); an
    unsupported --map format was found only after the whole fit."""
    monkeypatch.chdir(tmp_path)
    assert main(["fit", str(tif), *argv, "--quiet"]) == 2
    assert error_line(capsys).startswith(f"geogp: error: {option} ")
    assert sorted(os.listdir(tmp_path)) == ["in.tif"]


def test_issue32_duplicate_quantiles_are_refused(pred_model, tif, tmp_path, capsys, no_fit):
    """--quantiles 0.5 0.5 wrote 4 bands for 2: refused before the fit, and by predict()."""
    out = tmp_path / "o.tif"
    assert main(["fit", str(tif), "--out", str(out), "--quantiles", "0.5", "0.5",
                 "--quiet"]) == 2
    assert "repeated" in error_line(capsys) and not out.exists()
    with pytest.raises(InputError, match="repeated"):
        pred_model.predict(quantiles=[0.05, 0.5, 0.05])


@pytest.fixture
def pred_model(raster, fast):
    import geogp

    return geogp.fit(raster, **fast)


# --------------------------------------------------------------------------- raw tracebacks
@pytest.mark.parametrize("crs", ["hello", "EPSG:999999"])
def test_issue32_unknown_crs_is_one_line_before_the_fit(tmp_path, capsys, no_fit, crs):
    (tmp_path / "p.csv").write_text("x,y,value\n0,0,1\n1,1,2\n2,0,3\n")
    out = tmp_path / "o.tif"
    assert main(["fit", str(tmp_path / "p.csv"), "--crs", crs, "--resolution", "0.5",
                 "--out", str(out), "--quiet"]) == 2
    assert f"could not understand the CRS '{crs}'" in error_line(capsys)
    assert not out.exists()


@pytest.mark.parametrize("command", ["fit", "cv", "demo"])
def test_issue32_negative_seed_is_a_usage_error(tif, tmp_path, capsys, no_fit, command):
    argv = {"fit": ["fit", str(tif), "--out", str(tmp_path / "o.tif")],
            "cv": ["cv", str(tif)], "demo": ["demo", "--out-dir", str(tmp_path / "d")]}[command]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--seed", "-1"])
    assert exc.value.code == 2
    assert "expected an integer ≥ 0; got '-1'" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["in.tif"]


def test_issue32_demo_out_dir_that_is_a_file(tmp_path, capsys, no_fit):
    afile = tmp_path / "afile"
    afile.write_text("keep")
    assert main(["demo", "--out-dir", str(afile), "--features", "64"]) == 2
    assert "is an existing file, not a folder" in error_line(capsys)
    assert main(["demo", "--out-dir", str(afile / "sub"), "--features", "64"]) == 2
    assert "cannot create the demo's output folder" in error_line(capsys)
    assert afile.read_text() == "keep"


def test_issue32_long_legal_out_name_is_written(tif, tmp_path, capsys):
    """A 240-character name (legal: the limit is 255 bytes) failed after the fit because of
    the temporary suffix; written now, also replacing an earlier file (--overwrite keeps a
    hidden copy of it meanwhile), and nothing hidden is left beside it."""
    name = "p" * 236 + ".tif"
    assert len(name) == 240
    out = tmp_path / name
    with atomic_path(out) as tmp:  # the temporary name is short
        assert len(tmp.name) < 60 and tmp.parent == tmp_path
        tmp.write_bytes(b"x")
    assert out.read_bytes() == b"x"
    assert main(["fit", str(tif), "--out", str(out), "--overwrite", *FAST]) == 0
    with rasterio.open(out) as src:
        assert src.count == 2
    assert sorted(os.listdir(tmp_path)) == sorted(["in.tif", name])
