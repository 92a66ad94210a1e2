"""Writes under faults: a full disk, a kill mid-write, values a type cannot hold, bad options.

The promise (geogp.frontend.io): the target path holds either nothing, the previous complete file,
or the new complete file; never a partial or wrong one, and a failed write raises.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import rasterio
import xarray as xr

from geogp.exceptions import InputError
from geogp.frontend.io import write_geotiff, write_netcdf

pytestmark = [
    # small synthetic data: the models' approximation diagnostics warn, beside the point here
    pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning"),
    # small planar coordinates in a projected CRS look like degrees: a warning beside the point
    pytest.mark.filterwarnings("ignore::geogp.exceptions.GeographicCoordinatesWarning"),
]


def _prediction(ny=60, nx=80, offset=0.0, scale=1.0):
    y, x = np.arange(ny, 0, -1.0) * 100.0, np.arange(nx) * 100.0
    mean = offset + scale * np.sin(np.arange(ny * nx).reshape(ny, nx) / 50.0)
    da = xr.DataArray(mean, dims=("y", "x"), coords={"y": y, "x": x})
    ds = xr.Dataset({"mean": da, "std": np.abs(da) + 0.5}).rio.write_crs(32633)
    return ds


_CHILD_PRELUDE = textwrap.dedent("""
    import sys, numpy as np, xarray as xr
    sys.path.insert(0, {tests!r})
    from reliability.test_writes import _prediction
    from geogp.frontend.io import write_geotiff, write_netcdf
""")


def _run_child(code: str, **kw) -> subprocess.CompletedProcess:
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = _CHILD_PRELUDE.format(tests=tests) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                          timeout=240, check=False, **kw)


@pytest.mark.parametrize("fmt", ["tif", "nc"])
def test_full_disk_raises_and_leaves_no_file(tmp_path, fmt):
    """RLIMIT_FSIZE makes every write past 64 KiB fail with EFBIG, as a full disk would."""
    target = tmp_path / f"pred.{fmt}"
    writer = "write_geotiff" if fmt == "tif" else "write_netcdf"
    res = _run_child(f"""
        import resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        try:
            {writer}(_prediction(400, 600), {str(target)!r}, **({{"compress": "none"}}
                     if {fmt!r} == "tif" else {{}}))
        except Exception as err:
            print("RAISED", type(err).__name__, err)
        else:
            print("RETURNED")
    """)
    assert "RAISED" in res.stdout, res.stdout + res.stderr
    assert not target.exists()
    assert not [p for p in tmp_path.iterdir()], list(tmp_path.iterdir())   # no temp left


def test_kill_during_write_keeps_the_previous_complete_file(tmp_path):
    target = tmp_path / "pred.tif"
    old = _prediction(500, 700, offset=0.0)
    write_geotiff(old, target)
    new = _prediction(500, 700, offset=100.0)
    proc = subprocess.Popen([sys.executable, "-c", _CHILD_PRELUDE.format(
        tests=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + textwrap.dedent(f"""
        p = _prediction(500, 700, offset=100.0)
        print("ready", flush=True)
        while True:
            write_geotiff(p, {str(target)!r}, overwrite=True, compress="deflate",
                          dtype="float64")
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        seen = set()
        for delay in (0.05, 0.2, 0.4, 0.7, 1.1):
            time.sleep(delay)
            with rasterio.open(target) as src:
                band = src.read(1)
            if np.allclose(band, old["mean"].values.astype(np.float32)):
                seen.add("old")
            else:
                np.testing.assert_array_equal(band, new["mean"].values)   # complete new file
                seen.add("new")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    with rasterio.open(target) as src:   # after the kill: a complete file, old or new
        band = src.read(1)
        assert src.count == 2
    assert (np.allclose(band, old["mean"].values.astype(np.float32))
            or np.array_equal(band, new["mean"].values))
    assert seen   # the reader never met a partial file (it would have raised above)


def test_integer_output_refuses_overflow_instead_of_wrapping(tmp_path):
    pred = _prediction(30, 40, offset=0.0, scale=50_000.0)
    with pytest.raises(InputError, match="outside the range of int16"):
        write_geotiff(pred, tmp_path / "p.tif", dtype="int16", nodata=-9999)
    assert not (tmp_path / "p.tif").exists()
    ok = _prediction(30, 40, offset=0.0, scale=1000.0)
    write_geotiff(ok, tmp_path / "q.tif", dtype="int16", nodata=-9999)
    with rasterio.open(tmp_path / "q.tif") as src:
        np.testing.assert_array_equal(src.read(1), np.rint(ok["mean"].values).astype(np.int16))
    with pytest.raises(InputError, match="cannot hold NaN"):
        write_geotiff(ok, tmp_path / "r.tif", dtype="int16")


@pytest.mark.parametrize("kw, match", [
    (dict(compress="zip"), "compress must be one of"),
    (dict(dtype="complex64"), "dtype must be one of"),
    (dict(dtype="uint8", nodata=300), "not an integer inside the range"),
])
def test_bad_write_options_are_refused(tmp_path, kw, match):
    with pytest.raises(InputError, match=match):
        write_geotiff(_prediction(10, 12), tmp_path / "p.tif", **kw)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("compress", ["lzw", "zstd", "none"])
def test_known_compressions_are_applied(tmp_path, compress):
    write_geotiff(_prediction(20, 30), tmp_path / "p.tif", compress=compress)
    with rasterio.open(tmp_path / "p.tif") as src:
        assert (src.compression.name.lower() if src.compression else "none") == compress


def test_netcdf_round_trip_after_fsync(tmp_path):
    pred = _prediction(20, 30)
    write_netcdf(pred, tmp_path / "p.nc")
    back = xr.open_dataset(tmp_path / "p.nc", engine="h5netcdf")
    np.testing.assert_array_equal(back["mean"].values, pred["mean"].values)


def _small_prediction():
    import geogp

    rng = np.random.default_rng(0)
    da = xr.DataArray(rng.normal(size=(8, 9)), dims=("y", "x"),
                      coords={"y": np.arange(8.0)[::-1], "x": np.arange(9.0)}).rio.write_crs(32633)
    return geogp.fit(da, n_features=16, optimize=False, lengthscale=2.0, noise=0.5)


@pytest.mark.parametrize("writer", ["geotiff", "netcdf", "model"])
def test_output_path_that_is_a_folder_is_refused_clearly(tmp_path, writer):
    model = _small_prediction()
    folder = tmp_path / "out.tif"
    folder.mkdir()
    write = {"geotiff": lambda p, **k: write_geotiff(model.predict(), p, **k),
             "netcdf": lambda p, **k: write_netcdf(model.predict(), p, **k),
             "model": model.save}[writer]
    for overwrite in (False, True):
        with pytest.raises(InputError, match="it is a folder") as err:
            write(folder, overwrite=overwrite)
        assert "\n" not in str(err.value)
    assert folder.is_dir() and not any(folder.iterdir())


def test_folder_without_write_permission_is_refused_clearly(tmp_path, monkeypatch):
    """As root every folder is writable, so the refusal of the OS is injected (mkstemp)."""
    import tempfile

    model = _small_prediction()

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    with pytest.raises(InputError, match="no permission to create files"):
        write_geotiff(model.predict(), tmp_path / "p.tif")
    assert not (tmp_path / "p.tif").exists()
