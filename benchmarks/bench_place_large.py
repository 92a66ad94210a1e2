"""Sensor placement with the lattice model on a raster that needs a tiled posterior (#29).

The raster, truth and cloud mask are those of ``bench_large_raster.py`` (NY × NX unit cells,
two exponential fields plus a trend, noise sd 0.15, the satellite raster's cloud mask
mirror-tiled; default 1200 × 1200). ``geogp.fit(da)`` with its defaults (4 GiB limit: the
posterior on tiles), then ``suggest_sites`` with the default strategy of ``geogp place``
(``reduction``) for ``--n`` sites over every cell (the tiled greedy,
geogp.placement.lattice_tiled). Measured: wall times of the fit and of the placement, the peak
RSS, the tiles built and rebuilt, and how many sites fall in the gaps.

Then the value of the sites on this one field: the truth plus noise is "measured" at the sites
and added to the model without refitting (``add_observations``, tile by tile), and the RMSE of
the unmeasured missing cells (a seeded subsample of ``--n-score``) is compared with the same
number of random missing cells measured instead, over ``--random`` draws.

Usage::

    .venv/bin/python benchmarks/bench_place_large.py --shape 1200 1200 --n 20
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model  # benchmarks/ is on sys.path when run
from bench_large_raster import (
    COMPONENTS,
    DATA,
    NOISE_SD,
    peak_rss_gb,
    simulate_exponential,
    tiled_cloud_mask,
    trend,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=int, nargs=2, default=(1200, 1200), metavar=("NY", "NX"))
    ap.add_argument("--n", type=int, default=20, help="sites (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-score", type=int, default=200_000)
    ap.add_argument("--random", type=int, default=3, help="random-site draws (default 3)")
    args = ap.parse_args(argv)

    import xarray as xr

    import geogp
    from geogp.placement import Candidates, add_observations, suggest_sites

    shape = tuple(args.shape)
    la = os.getloadavg()
    print(f"# bench_place_large — {time.strftime('%Y-%m-%d %H:%M')} — {cpu_model()} — "
          f"{os.cpu_count()} CPUs — load {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}", flush=True)
    rng = np.random.default_rng(args.seed)
    truth = np.zeros(shape)
    for sd, rho in COMPONENTS:
        truth += simulate_exponential(shape, sd, rho, rng)
    iy, ix = np.mgrid[0:shape[0], 0:shape[1]]
    truth += trend(iy, ix)
    del iy, ix
    noisy = truth + NOISE_SD * rng.standard_normal(shape)
    cloud = np.isnan(np.asarray(geogp.open_raster(DATA).values, dtype=np.float64))
    missing = tiled_cloud_mask(cloud, shape)
    da = xr.DataArray(np.where(missing, np.nan, noisy), dims=("y", "x"), name="z",
                      coords={"y": np.arange(shape[0], dtype=np.float64),
                              "x": np.arange(shape[1], dtype=np.float64)}
                      ).rio.write_crs("EPSG:3857")
    print(f"raster {shape[0]} × {shape[1]}, {missing.mean():.1%} missing", flush=True)

    t0 = time.perf_counter()
    geo = geogp.fit(da)
    t_fit = time.perf_counter() - t0
    est = geo.estimators_[0]
    print(f"fit {t_fit:.1f} s, model {geo.model_!r}, posterior tiles "
          f"{getattr(est, 'posterior_tiles_', 1)}, peak RSS {peak_rss_gb():.2f} GB", flush=True)
    my, mx = geo.spec_.to_model(geo.target_.y, geo.target_.x)
    cands = Candidates.grid([my, mx])
    t0 = time.perf_counter()
    sites = suggest_sites(est, cands, args.n, strategy="reduction")  # geogp place's default
    t_place = time.perf_counter() - t0
    sy, sx = np.unravel_index(sites["index"].to_numpy(), shape)
    in_gap = missing[sy, sx].mean()
    print(f"placement ({sites.attrs['strategy']}) {t_place:.1f} s, peak RSS "
          f"{peak_rss_gb():.2f} GB; {in_gap:.0%} of the sites in gaps", flush=True)

    gy, gx = np.nonzero(missing)
    score = np.random.default_rng([args.seed, 2]).permutation(gy.size)[:args.n_score]

    def rmse_after(ry, rx) -> float:
        model = (add_observations(est, np.stack([my[ry], mx[rx]], axis=1), noisy[ry, rx])
                 if ry.size else est)
        keep = ~np.isin(gy[score] * shape[1] + gx[score], ry * shape[1] + rx)
        ty, tx = gy[score][keep], gx[score][keep]
        mean = model.predict(np.stack([my[ty], mx[tx]], axis=1)).mean
        return float(np.sqrt(np.mean((np.asarray(mean) - truth[ty, tx]) ** 2)))

    t0 = time.perf_counter()
    base = rmse_after(np.array([], dtype=int), np.array([], dtype=int))
    placed = rmse_after(sy, sx)
    t_value = time.perf_counter() - t0
    draws = []
    for k in range(args.random):
        pick = np.random.default_rng([args.seed, 3, k]).choice(gy.size, args.n, replace=False)
        draws.append(rmse_after(gy[pick], gx[pick]))
    print(f"RMSE of {args.n_score:,} missing cells: none {base:.4f}, placed {placed:.4f} "
          f"({base - placed:+.4f}), random {np.mean(draws):.4f} ± "
          f"{np.std(draws, ddof=1) / np.sqrt(len(draws)) if len(draws) > 1 else 0:.4f} "
          f"({base - np.mean(draws):+.4f}); value part {t_value:.1f} s", flush=True)
    la = os.getloadavg()
    print(f"# load at the end {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
