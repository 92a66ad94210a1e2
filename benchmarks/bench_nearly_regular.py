"""Nearly regular rasters (#41 item 2): a latitude step that varies by a few % (Mercator-like
or Gaussian latitude grids) gets the lattice model under ``model="auto"``, not AFS.

The Jacksboro DEM (matplotlib's sample data, ``geogp.frontend.demo.load_elevation``) every 3rd cell:
91 × 120 cells; its latitudes are then respaced so that the step grows linearly from
``1 − v`` to ``1 + v`` times the mean (v = 3.8 %, as the product grid of the issue). 20 % of
the cells are hidden at random (seeded). Scored on the hidden cells: RMSE, CRPS and 95 %
coverage, and the fit's wall time, for ``model="auto"`` (now the lattice model with the mean
step), ``model="afs"`` (what ``auto`` chose before) and the lattice model on the same values
placed on an exactly regular grid (what regridding gives).

Run: ``.venv/bin/python benchmarks/bench_nearly_regular.py [--variation 0.038]``.
"""

from __future__ import annotations

import argparse
import datetime
import time
import warnings

import numpy as np
from scipy.stats import norm

import geogp
from geogp.frontend.demo import load_elevation


def raster(variation: float, seed: int = 0, regular: bool = False):
    """(observed raster, hidden mask, truth) on the respaced (or exactly regular) latitudes."""
    da = load_elevation().isel(lat=slice(0, 273, 3), lon=slice(0, 360, 3))
    lat = da.lat.values
    mean_step = (lat[-1] - lat[0]) / (lat.size - 1)
    steps = mean_step * (1 + variation * np.linspace(-1, 1, lat.size - 1))
    if not regular:
        da = da.assign_coords(lat=lat[0] + np.concatenate([[0.0], np.cumsum(steps)]))
    hidden = np.random.default_rng(seed).uniform(size=da.shape) < 0.2
    return da.where(~hidden), hidden, da.values


def crps(mu, sd, z):
    w = (z - mu) / sd
    return float(np.mean(sd * (w * (2 * norm.cdf(w) - 1) + 2 * norm.pdf(w) - 1 / np.sqrt(np.pi))))


def run(variation: float, model: str, regular: bool = False) -> dict:
    obs, hidden, truth = raster(variation, regular=regular)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        m = geogp.fit(obs, model=model)
        wall = time.perf_counter() - t0
        pred = m.predict()
    mu, sd, z = pred["mean"].values[hidden], pred["std"].values[hidden], truth[hidden]
    return {"model": model, "chosen": m.model_, "wall_s": wall,
            "rmse": float(np.sqrt(np.mean((mu - z) ** 2))), "crps": crps(mu, sd, z),
            "cov95": float(np.mean(np.abs(z - mu) <= 1.96 * sd))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variation", type=float, default=0.038)
    args = ap.parse_args()
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    print(f"# {datetime.date.today()}, load {load}, latitude steps ±{100 * args.variation:.1f} %")
    print("| grid | model | RMSE m | CRPS m | cov95 | fit s |")
    print("|---|---|---|---|---|---|")
    for grid, model, regular in (("nearly regular", "auto", False),
                                 ("nearly regular", "afs", False),
                                 ("regular (same values)", "lattice", True)):
        r = run(args.variation, model, regular)
        print(f"| {grid} | {model} ({r['chosen']}) | {r['rmse']:.1f} | {r['crps']:.1f} | "
              f"{r['cov95']:.3f} | {r['wall_s']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
