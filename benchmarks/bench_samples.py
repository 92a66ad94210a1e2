"""Posterior sample rasters (issue #16): 10 samples of a 1000 × 1000 raster.

An AFS model (Matérn-3/2, linear trend) is fitted to a synthetic 1000² raster with 30 %
missing cells (a smooth field plus noise), then ``model.sample(10)`` draws ten posterior
sample rasters of the whole grid: one draw of the feature weights and one separable grid
transform per sample (``geogp.models.afs.sampling``). Printed: fit time, sample time, and a
check that the sample mean over the draws is within 5 standard errors of the predicted mean at
99 % or more of the cells (a sanity check, not a test). The lattice model does not take a
1000² raster at its default memory limit, so only AFS is timed here.

Usage::

    .venv/bin/python benchmarks/bench_samples.py [--side 1000] [--n 10] [--features 4096]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import xarray as xr


def main() -> None:
    import geogp

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", type=int, default=1000)
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--features", type=int, default=4096)
    p.add_argument("--maxiter", type=int, default=30)
    args = p.parse_args()
    la = os.getloadavg()
    print(f"# bench_samples — {time.strftime('%Y-%m-%d %H:%M')} — {os.cpu_count()} CPUs — "
          f"load {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}", flush=True)
    rng = np.random.default_rng(0)
    s = args.side
    y = np.linspace(0.0, 100.0, s)
    x = np.linspace(0.0, 100.0, s)
    yy, xx = np.meshgrid(y, x, indexing="ij")
    z = np.sin(xx / 9.0) * np.cos(yy / 13.0) + 0.02 * yy + 0.1 * rng.standard_normal((s, s))
    z[rng.random((s, s)) < 0.3] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="z")
    da = da.rio.write_crs(32633)
    t0 = time.perf_counter()
    model = geogp.fit(da, model="afs", kernel="matern32", n_features=args.features,
                      maxiter=args.maxiter)
    t1 = time.perf_counter()
    draws = model.sample(args.n, seed=0)
    t2 = time.perf_counter()
    pred = model.predict()
    sd = pred["std_latent"].values
    mean_ok = np.mean(np.abs(draws.mean("sample").values - pred["mean"].values)
                      < 5 * sd / np.sqrt(args.n) + 1e-12)
    print(f"raster {s} × {s} ({int(np.isfinite(z).sum())} observed), AFS M = "
          f"{model.estimators_[0].features_.n_features}: fit {t1 - t0:.1f} s")
    print(f"{args.n} posterior sample rasters: {t2 - t1:.1f} s "
          f"({(t2 - t1) / args.n:.2f} s each); sample mean within 5 s.e. of the predicted "
          f"mean at {mean_ok:.1%} of the cells")


if __name__ == "__main__":
    main()
