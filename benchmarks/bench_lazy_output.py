"""Writing a prediction of 10⁷ cells: lazy (window by window) against eager (whole arrays).

The lattice default is fitted on the MODIS satellite raster (300 × 500,
``/work/shared/data/heaton_satellite_train.nc``; skipped when absent), then predicted on a grid
``--factor`` times finer along each axis over the same extent (factor 10: 3000 × 5000 =
1.5·10⁷ cells, bilinear between the lattice's cells) with two quantiles, and written as a
GeoTIFF (mean, std, std_latent, 2 quantiles, float32, deflate) and a NetCDF.

Measured in one process per mode (``--mode lazy`` or ``eager``; run each in its own process,
so that one mode's freed memory does not hide the other's): the wall time of the fit, of
``predict()`` and of each write, and the peak resident memory (RSS, sampled every 20 ms from
/proc/self/statm) of the output phase (predict + writes), above the RSS before it (the
fitted model, the input and the interpreter). The eager mode's estimate
(``geogp.core.memory.predict_bytes``) is printed beside it.

Usage::

    .venv/bin/python benchmarks/bench_lazy_output.py --mode lazy --factor 10
    .venv/bin/python benchmarks/bench_lazy_output.py --mode eager --factor 10 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model  # benchmarks/ is on sys.path when run

DATA = Path("/work/shared/data/heaton_satellite_train.nc")


def rss() -> int:
    """Resident bytes of this process now."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """The largest RSS seen while the block runs (sampled every 20 ms)."""

    def __enter__(self):
        self.peak, self._stop = rss(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("lazy", "eager"), default="lazy")
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} is absent")
        return {}
    import geogp
    from geogp.core.memory import predict_bytes

    da = geogp.open_raster(DATA)
    t0 = time.perf_counter()
    model = geogp.fit(da, progress=False)
    fit_s = time.perf_counter() - t0
    y, x = da[da.rio.y_dim].values, da[da.rio.x_dim].values
    ny, nx = len(y) * args.factor, len(x) * args.factor
    fine_y, fine_x = np.linspace(y[0], y[-1], ny), np.linspace(x[0], x[-1], nx)
    base = rss()
    out = {"mode": args.mode, "shape": [ny, nx], "cells": ny * nx, "fit_s": round(fit_s, 1),
           "eager_estimate_gib": round(predict_bytes(ny * nx, 1, 2) / 2**30, 2),
           "cpu": cpu_model(), "load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp, PeakRSS() as peak:
        t0 = time.perf_counter()
        pred = model.predict(x=fine_x, y=fine_y, quantiles=[0.05, 0.95],
                             lazy=args.mode == "lazy")
        out["predict_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        geogp.write_geotiff(pred, Path(tmp) / "p.tif", latent=True, quantiles=True)
        out["geotiff_s"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        geogp.write_netcdf(pred, Path(tmp) / "p.nc")
        out["netcdf_s"] = round(time.perf_counter() - t0, 1)
        out["geotiff_mb"] = round((Path(tmp) / "p.tif").stat().st_size / 2**20, 1)
    out["output_peak_above_model_gib"] = round((peak.peak - base) / 2**30, 2)
    out["model_rss_gib"] = round(base / 2**30, 2)
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
