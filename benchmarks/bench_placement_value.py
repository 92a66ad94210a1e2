"""Do the suggested sites improve the map? (issue #29, item 4)

Simulated fields with a known truth on the satellite raster's grid (300 × 500), under its real
cloud mask: two exponential components (sd 1.5, range 15 cells; sd 3, range 250 cells), a
trend and noise sd 0.15, as in ``bench_large_raster.py``. For each field the lattice model is
fitted once (``geogp.fit``, the default), then each strategy picks 20 and 50 sites:

- ``lattice mi`` / ``lattice variance`` / ``lattice reduction``: ``suggest_sites`` on the
  lattice posterior (what ``geogp place`` now does; ``reduction`` is the total variance
  reduction);
- ``afs-2000 mi``: the old ``geogp place`` (an AFS model with 2,000 features, marginal mi);
- ``random``: cells drawn at random in the gaps;
- ``grid``: the gap cells nearest to a regular grid laid over the raster;
- ``gap centres``: the cells farthest from data, one per gap neighbourhood.

The truth is "measured" at the chosen sites (latent field plus noise) and the same lattice
posterior is conditioned on them (``add_observations``: θ kept, an exact update, so every
strategy's sites are judged by the same map-maker). Scores: RMSE and CRPS of the latent truth
at the gap cells that were not measured, mean ± standard error over the fields.

By default the map is updated with θ fixed (an exact update, cheap); ``--refit`` follows the
issue's protocol and refits the lattice model, θ included, with the measured sites as data
(one fit per strategy and site count: slow, so run it on fewer strategies or site counts).

Usage: ``python benchmarks/bench_placement_value.py [--fields 10] [--strategies ...]
[--sites 20 50] [--refit] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_large_raster import COMPONENTS, DATA, NOISE_SD, simulate_exponential, trend

SITES = (20, 50)
STRATEGIES = ("none", "lattice mi", "lattice variance", "lattice reduction", "afs-2000 mi",
              "random", "grid", "gap centres")


def gap_centres(missing: np.ndarray, n: int) -> np.ndarray:
    """Flat raster cells of the ``n`` gap centres: repeatedly the cell farthest from data,
    then its neighbourhood (that distance) is no longer eligible."""
    from scipy.ndimage import distance_transform_edt

    dist = distance_transform_edt(missing)
    yy, xx = np.mgrid[0:missing.shape[0], 0:missing.shape[1]]
    free = missing.copy()
    out = []
    for _ in range(n):
        score = np.where(free, dist, -1.0)
        c = int(np.argmax(score))
        if score.flat[c] <= 0:
            break
        out.append(c)
        r, q = divmod(c, missing.shape[1])
        free &= np.hypot(yy - r, xx - q) > max(dist.flat[c], 2.0)
    return np.array(out, dtype=np.int64)


def regular_grid(missing: np.ndarray, n: int) -> np.ndarray:
    """The gap cells nearest to a regular grid over the raster, refined until at least n
    grid points fall in gaps; n of them, evenly spread in grid order."""
    ny, nx = missing.shape
    for k in range(int(np.sqrt(n)), 400):
        gy = np.linspace(0, ny - 1, k).round().astype(int)
        gx = np.linspace(0, nx - 1, round(k * nx / ny)).round().astype(int)
        cells = (gy[:, None] * nx + gx[None, :]).ravel()
        cells = cells[missing.ravel()[cells]]
        if cells.size >= n:
            return cells[np.linspace(0, cells.size - 1, n).round().astype(int)]
    raise RuntimeError("no regular grid reaches the gaps")


def _rules(est, afs, grid, cloud, rng):
    """Strategy name → function of n giving n cells (flat indices of the raster)."""
    from geogp.placement import suggest_sites

    gaps = np.flatnonzero(cloud.ravel())
    return {"lattice mi": lambda n: suggest_sites(est, grid, n)["index"].to_numpy(),
            "lattice variance": lambda n: suggest_sites(
                est, grid, n, strategy="variance")["index"].to_numpy(),
            "lattice reduction": lambda n: suggest_sites(
                est, grid, n, strategy="reduction")["index"].to_numpy(),
            "afs-2000 mi": lambda n: suggest_sites(afs, grid, n)["index"].to_numpy(),
            "random": lambda n: rng.choice(gaps, n, replace=False),
            "grid": lambda n: regular_grid(cloud, n),
            "gap centres": lambda n: gap_centres(cloud, n)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fields", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES,
                    help="which to run ('none', the map without new sites, always runs)")
    ap.add_argument("--sites", type=int, nargs="+", default=list(SITES),
                    help="site counts (default 20 50)")
    ap.add_argument("--refit", action="store_true",
                    help="refit the lattice model (θ too) with the measured sites as data, "
                         "the issue's protocol, instead of conditioning with θ kept")
    args = ap.parse_args(argv)
    sites_counts = tuple(args.sites)
    if not DATA.exists():
        print(f"SKIP: {DATA} not found (its cloud mask is the missingness pattern)")
        return 0

    import rioxarray  # noqa: F401
    import xarray as xr

    import geogp
    from geogp.core.metrics import crps_gaussian, rmse
    from geogp.placement import Candidates, add_observations

    la = os.getloadavg()
    print(f"# bench_placement_value — {time.strftime('%Y-%m-%d %H:%M')} — {os.cpu_count()} "
          f"CPUs — load {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}", flush=True)
    cloud = np.isnan(np.asarray(geogp.open_raster(DATA).values, dtype=np.float64))
    shape = cloud.shape
    strategies = ("none", *(s for s in args.strategies if s != "none"))
    scores = {s: {n: {"rmse": [], "crps": []} for n in sites_counts} for s in strategies}
    t_all = time.perf_counter()
    for field in range(args.fields):
        rng = np.random.default_rng([args.seed, field])
        latent = sum(simulate_exponential(shape, sd, rho, rng) for sd, rho in COMPONENTS)
        iy, ix = np.mgrid[0:shape[0], 0:shape[1]]
        latent = latent + trend(iy, ix)
        noisy = latent + NOISE_SD * rng.standard_normal(shape)
        values = np.where(cloud, np.nan, noisy)
        da = xr.DataArray(values, dims=("y", "x"),
                          coords={"y": np.arange(shape[0]) * 1.0,
                                  "x": np.arange(shape[1]) * 1.0}).rio.write_crs("EPSG:3857")
        t0 = time.perf_counter()
        geo = geogp.fit(da, posterior_tile=None)
        est = geo.estimators_[0]
        my, mx = geo.spec_.to_model(geo.target_.y, geo.target_.x)
        grid = Candidates.grid([my, mx])
        afs = (geogp.fit(da, model="afs", n_features=2000).estimators_[0]
               if "afs-2000 mi" in strategies else None)
        rule = _rules(est, afs, grid, cloud, rng)
        picks = {(s, n): rule[s](n) for n in sites_counts for s in strategies if s != "none"}
        m = int(est.margin)
        lattice_cells = ((iy + m) * est.shape_[1] + ix + m).ravel()
        for n in sites_counts:
            for s in strategies:
                cells = np.array([], dtype=np.int64) if s == "none" else picks[(s, n)]
                model = est
                if cells.size and args.refit:  # the sites become data; θ is fitted again
                    measured = values.copy()
                    measured.ravel()[cells] = noisy.ravel()[cells]
                    model = geogp.fit(da.copy(data=measured),
                                      posterior_tile=None).estimators_[0]
                elif cells.size:
                    r, c = np.divmod(cells, shape[1])
                    model = add_observations(est, np.stack([my[r], mx[c]], 1),
                                             noisy.ravel()[cells])
                pred = model.scaler_.unscale(model._mean[lattice_cells],
                                             model._var[lattice_cells], model.noise_var_)
                hidden = cloud.ravel().copy()
                hidden[cells] = False
                sd = np.sqrt(pred.var_latent[hidden])
                truth = latent.ravel()[hidden]
                scores[s][n]["rmse"].append(rmse(truth, pred.mean[hidden]))
                scores[s][n]["crps"].append(crps_gaussian(truth, pred.mean[hidden], sd))
        last = sites_counts[-1]
        print(f"field {field}: {time.perf_counter() - t0:.0f} s; RMSE at {last} sites: "
              + ", ".join(f"{s} {scores[s][last]['rmse'][-1]:.4f}" for s in strategies),
              flush=True)
    print(f"\n{args.fields} fields, {time.perf_counter() - t_all:.0f} s; hidden gap cells not "
          "measured; mean ± standard error (and the mean paired difference to 'none')")
    print(f"{'strategy':>18} {'sites':>5} {'RMSE':>16} {'CRPS':>16}")
    out = {}
    for n in sites_counts:
        base = {k: np.array(scores["none"][n][k]) for k in ("rmse", "crps")}
        for s in strategies:
            row = {}
            for k in ("rmse", "crps"):
                v = np.array(scores[s][n][k])
                diff = v - base[k]
                row[k] = {"mean": float(v.mean()), "se": float(v.std(ddof=1) / np.sqrt(v.size))
                          if v.size > 1 else 0.0, "gain_vs_none": float(-diff.mean()),
                          "gain_se": float(diff.std(ddof=1) / np.sqrt(v.size))
                          if v.size > 1 else 0.0}
            out[f"{s} {n}"] = row
            print(f"{s:>18} {n:>5} {row['rmse']['mean']:.4f} ± {row['rmse']['se']:.4f} "
                  f"{row['crps']['mean']:.4f} ± {row['crps']['se']:.4f}   gain "
                  f"{row['rmse']['gain_vs_none']:.4f} ± {row['rmse']['gain_se']:.4f}")
    if "afs-2000 mi" in strategies:  # paired on the same fields: the comparison's own SE
        print("\npaired against afs-2000 mi (mean difference of RMSE ± its standard error; "
              "negative: better than the old AFS placement)")
        for n in sites_counts:
            ref = np.array(scores["afs-2000 mi"][n]["rmse"])
            for s in strategies:
                if s in ("none", "afs-2000 mi"):
                    continue
                diff = np.array(scores[s][n]["rmse"]) - ref
                se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0
                out[f"{s} {n}"]["rmse"]["vs_afs"] = {"mean": float(diff.mean()), "se": se}
                print(f"{s:>18} {n:>5} {diff.mean():+.4f} ± {se:.4f}")
    la = os.getloadavg()
    print(f"# load at the end {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"fields": args.fields, "scores": out,
                                         "refit": args.refit,
                                         "raw": {s: {str(n): scores[s][n] for n in sites_counts}
                                                 for s in strategies}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
