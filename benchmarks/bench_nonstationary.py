"""Fields whose roughness varies: the lattice model with a varying range and sd (#45).

Two studies, each scored per region (RMSE / CRPS / 95 % coverage of the latent field):

``simulated``: fields drawn from a non-stationary SPDE with a known truth, (κ(s)² − Δ)(τ(s) g)
= W on a lattice with a 20-cell margin, range 3 cells where the field is rough and 25 where it
is smooth, sd 1.5 and 0.6 (three warps: ``ramp``, a steady change left to right; ``step``, a
sharp one in the middle; ``disc``, a rough disc in a smooth field), noise sd 0.1, 10 % of the
cells hidden at random and two square patches (one in the rough part, one in the smooth part).
The oracle is kriging with the true precision on the raster (known mean 0), the best any model
can do. Compared: the lattice model with one range and sd (``varying=None``, the default
before #45) and with a varying range and sd (``varying=True``).

``topobathy``: matplotlib's sample topography-and-bathymetry raster (91 × 120 cells, 0.02° ×
0.03°, a smooth shelf beside mountains; shipped with matplotlib), with 10 % of the cells and
three 12 × 12 patches hidden: on the shelf (the smoothest fifth of the cells, below −100 m), in
the mountains (the roughest fifth, above 500 m) and across the coast. ``geogp.fit(da,
varying=None)`` (one range and sd) against ``geogp.fit(da)`` (the default, ``varying="auto"``,
which lets them vary here, and says so), with their wall times.

``active``: the thesis's active-learning protocol (§4.4.2), in 2-D and on the lattice. On
draws of the ``step`` and ``disc`` warps (48², the truth above), half of the cells are a test
set, 15 % are measured at first and the rest are where sites may go. Each model (one range and
sd, ``varying=True``) is fitted to the first measurements through ``geogp.fit``, places 60
sites with its default criterion (``suggest_sites``: total variance reduction), and the sites'
values are added with ``add_observations`` (the hyperparameters kept, the posterior updated
exactly). The test cells' latent RMSE and NLPD are printed after 0, 20, 40 and 60 sites, for
each model with its own sites and with random ones, with the share of sites in the rough half
of the field. The thesis learnt the hyperparameters on a separate draw of the process; here
each model learns them from its first measurements, as a user's would.

``memory``: peak resident memory and time of ``varying=True`` (or ``--stationary``; with
``--levels`` the front end's mid-scale level and large scales) on an n × n smoothed-noise
raster, 30 % missing, in a fresh process of its own (VmHWM), against the estimate made before
the fit (the varying stage holds all its fitting tiles at once).

Usage::

    .venv/bin/python benchmarks/bench_nonstationary.py simulated --seeds 0 1 2
    .venv/bin/python benchmarks/bench_nonstationary.py topobathy
    .venv/bin/python benchmarks/bench_nonstationary.py memory --n 500 700
    .venv/bin/python benchmarks/bench_nonstationary.py active [--kinds step disc --seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import scipy.sparse as sp

from geogp.core.metrics import coverage, crps_gaussian, rmse
from geogp.models.lattice.gmrf import laplacian

NOISE = 0.1
ROUGH, SMOOTH = (3.0, 1.5), (25.0, 0.6)  # (range in cells, sd)


def ns_precision(shape, rho, sd):
    """Q = D (K + L)² D of the non-stationary SPDE, written out here (not geogp's code)."""
    k2 = 8.0 / np.ravel(rho) ** 2
    c = 1.0 / (4.0 * math.pi * k2 * np.ravel(sd) ** 2)
    op = sp.diags(k2) + laplacian(shape, (1.0, 1.0))
    d = sp.diags(np.sqrt(c))
    return sp.csc_matrix(d @ op @ op @ d)


def warp(kind: str, yy, xx, n: int) -> np.ndarray:
    """Smoothness s in [0, 1] per cell (0: rough, 1: smooth)."""
    t = np.clip(xx / (n - 1), 0.0, 1.0)
    if kind == "ramp":
        return t
    if kind == "step":
        return 1.0 / (1.0 + np.exp(-(t - 0.5) * 20.0))
    r = np.hypot(yy - n / 2, xx - n / 2) / n
    return 1.0 - 1.0 / (1.0 + np.exp((r - 0.25) * 30.0))


def simulate(n: int, seed: int, kind: str):
    """(field, noisy data, smoothness, range, sd) on the n × n raster."""
    from sksparse.cholmod import cholesky

    rng = np.random.default_rng(seed)
    m = 20
    big = n + 2 * m
    yy, xx = np.meshgrid(np.arange(big) - m, np.arange(big) - m, indexing="ij")
    s = warp(kind, yy, xx, n)
    rho = ROUGH[0] * (SMOOTH[0] / ROUGH[0]) ** s
    sd = ROUGH[1] + (SMOOTH[1] - ROUGH[1]) * s
    factor = cholesky(ns_precision((big, big), rho, sd))
    f = factor.apply_Pt(factor.solve_Lt(rng.standard_normal(big * big),
                                        use_LDLt_decomposition=False))
    inner = (slice(m, -m), slice(m, -m))
    f = f.reshape(big, big)[inner]
    return f, f + NOISE * rng.standard_normal(f.shape), s[inner], rho[inner], sd[inner]


def oracle(rho, sd, y, obs):
    """Kriging with the true precision (on the raster, mean 0): (mean, latent sd)."""
    from sksparse.cholmod import cholesky

    n = obs.size
    b = ns_precision(obs.shape, rho, sd) + sp.diags(obs.ravel() / NOISE**2)
    factor = cholesky(sp.csc_matrix(b))
    mean = factor(np.where(obs, y, 0.0).ravel() / NOISE**2)
    hid = np.flatnonzero(~obs.ravel())
    e = sp.csc_matrix((np.ones(hid.size), (hid, np.arange(hid.size))), shape=(n, hid.size))
    var = np.full(n, np.nan)
    var[hid] = np.asarray(factor(e).multiply(e).sum(axis=0)).ravel()
    return mean.reshape(obs.shape), np.sqrt(var).reshape(obs.shape)


def scores(truth, mean, std, regions: dict) -> str:
    return " | ".join(
        f"{name}: {rmse(truth[r], mean[r]):.4g}/{crps_gaussian(truth[r], mean[r], std[r]):.4g}/"
        f"{coverage(truth[r], mean[r], std[r]):.3f}" for name, r in regions.items())


def patch(shape, centre, side):
    cy = int(np.clip(centre[0], side, shape[0] - side))
    cx = int(np.clip(centre[1], side, shape[1] - side))
    out = np.zeros(shape, bool)
    out[cy - side // 2:cy + side // 2, cx - side // 2:cx + side // 2] = True
    return out


def simulated(args) -> None:
    from geogp.models.lattice import LatticeRegressor

    pooled = {}  # (method, region) -> [truth, mean, std] over every field
    for kind in args.kinds:
        for seed in args.seeds:
            f, y, s, rho, sd = simulate(args.n, seed, kind)
            rng = np.random.default_rng(100 + seed)
            obs = rng.random(f.shape) > 0.1
            side = max(6, args.n // 8)
            regions = {}
            for name, where in (("rough", s < 0.05), ("smooth", s > 0.95)):
                centre = np.unravel_index(np.argmax(np.where(where, rng.random(s.shape), -1)),
                                          s.shape)
                regions[name] = patch(f.shape, centre, side)
                obs &= ~regions[name]
            regions["cells"] = ~obs & ~regions["rough"] & ~regions["smooth"]
            data = np.where(obs, y, np.nan)
            print(f"{kind} seed {seed} ({args.n}²): region RMSE/CRPS/cov95")
            results = {"oracle": oracle(rho, sd, y, obs)}
            axes = [np.arange(args.n, dtype=float)] * 2
            for name, kw in (("stationary", {}), ("varying", {"varying": True})):
                t0 = time.perf_counter()
                est = LatticeRegressor(alpha="auto", large_scale="auto", mid_scale="auto",
                                       **kw).fit_grid(axes, data)
                pred = est.predict_grid(axes)
                results[name] = (pred.mean, pred.std_latent)
                print(f"  {name:<11} {scores(f, pred.mean, pred.std_latent, regions)}"
                      f"  ({time.perf_counter() - t0:.1f} s)")
            print(f"  {'oracle':<11} {scores(f, *results['oracle'], regions)}")
            for method, (mean, std) in results.items():
                for region, r in regions.items():
                    acc = pooled.setdefault((method, region), [[], [], []])
                    for a, v in zip(acc, (f[r], mean[r], std[r]), strict=True):
                        a.append(v)
    print("pooled over every field: RMSE/CRPS/cov95 (RMSE and CRPS as ratios to the oracle's)")
    for method in ("oracle", "stationary", "varying"):
        parts = []
        for region in ("rough", "smooth", "cells"):
            t, m, s = (np.concatenate(a) for a in pooled[(method, region)])
            to, mo, so = (np.concatenate(a) for a in pooled[("oracle", region)])
            parts.append(f"{region}: {rmse(t, m):.4g} ({rmse(t, m) / rmse(to, mo):.3f})/"
                         f"{crps_gaussian(t, m, s):.4g} "
                         f"({crps_gaussian(t, m, s) / crps_gaussian(to, mo, so):.3f})/"
                         f"{coverage(t, m, s):.3f}")
        print(f"  {method:<11} " + " | ".join(parts))


def topobathy(args) -> None:
    import xarray as xr
    from matplotlib import cbook
    from scipy import ndimage

    import geogp

    d = cbook.get_sample_data("topobathy.npz")
    z = d["topo"].astype(float)
    rough = np.sqrt(ndimage.uniform_filter(ndimage.laplace(z) ** 2, 12))
    side = 12
    candidates = {
        "shelf": (z < -100) & (rough < np.quantile(rough, 0.2)),
        "mountain": (z > 500) & (rough > np.quantile(rough, 0.8)),
        "coast": (np.abs(ndimage.uniform_filter(z, 12)) < 100) & (rough > np.median(rough)),
    }
    rng = np.random.default_rng(args.seed)
    obs = rng.random(z.shape) > 0.1
    regions = {}
    for name, where in candidates.items():
        cells = np.argwhere(where[side:-side, side:-side]) + side
        regions[name] = patch(z.shape, cells[len(cells) // 2], side)
        obs &= ~regions[name]
    regions["cells"] = ~obs & ~regions["shelf"] & ~regions["mountain"] & ~regions["coast"]
    da = xr.DataArray(np.where(obs, z, np.nan), dims=("lat", "lon"),
                      coords={"lat": d["latitude"].astype(float),
                              "lon": d["longitude"].astype(float)}).rio.write_crs("EPSG:4326")
    print("topobathy 91 × 120: region RMSE/CRPS/cov95 (m)")
    for name, kw in (("stationary", {"varying": None}), ("default", {})):
        t0 = time.perf_counter()
        model = geogp.fit(da, nodata=None, **kw)
        pred = model.predict(da)
        mean, std = np.asarray(pred["mean"]), np.asarray(pred["std"])
        print(f"  {name:<10} {scores(z, mean, std, regions)}  ({time.perf_counter() - t0:.1f} s)")
        print(f"    model_reason_: {model.model_reason_}")


def active(args) -> None:
    """The thesis's active-learning protocol (§4.4.2) in 2-D: each model places sites on a
    warped field from its own posterior, and the test cells' scores are tracked as the
    sites' values are added (hyperparameters kept)."""
    import warnings

    import pandas as pd
    import xarray as xr

    import geogp

    n, k_max = args.n, args.sites
    checkpoints = sorted({0, *range(args.every, k_max + 1, args.every)})
    pooled: dict = {}  # (model, picks, k) -> [(truth, mean, sd)] over the fields
    share: dict = {}  # (model) -> [fraction of its sites in the rough half]
    fit_s: dict = {}
    for kind in args.kinds:
        for seed in args.seeds:
            f, y, s, _, _ = simulate(n, seed, kind)
            rng = np.random.default_rng(200 + seed)
            test = rng.random(f.shape) < 0.5  # scored, never measured
            start = ~test & (rng.random(f.shape) < args.initial / 0.5)  # measured at first
            pool = ~test & ~start  # where sites may go
            coords = {"y": 1000.0 * (n - 1 - np.arange(n)), "x": 1000.0 * np.arange(n)}
            da = xr.DataArray(np.where(start, y, np.nan)[::-1], dims=("y", "x"),
                              coords=coords).rio.write_crs("EPSG:32633")

            def on_raster(a):  # the field's (row = y index) array on da's grid
                return a[::-1]

            picks = {"random": np.flatnonzero(on_raster(pool).ravel())}
            rng.shuffle(picks["random"])
            models = {}
            for name, kw in (("stationary", {"varying": None}), ("varying", {"varying": True})):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    models[name] = geogp.fit(da, **kw)
                    sites = models[name].suggest_sites(k_max, exclude=~on_raster(pool))
                fit_s.setdefault(name, []).append(time.perf_counter() - t0)
                picks[name] = sites["index"].to_numpy()
                share.setdefault(name, []).append(float(np.mean(
                    on_raster(s).ravel()[picks[name]] < 0.5)))
            share.setdefault("random", []).append(float(np.mean(
                on_raster(s).ravel()[picks["random"][:k_max]] < 0.5)))
            truth, values = on_raster(f), on_raster(y)
            cell_y, cell_x = np.meshgrid(coords["y"], coords["x"], indexing="ij")
            for name, model in models.items():
                for which in (name, "random"):
                    for k in checkpoints:
                        at = picks[which][:k]
                        m = model if k == 0 else model.add_observations(pd.DataFrame({
                            "x": cell_x.ravel()[at], "y": cell_y.ravel()[at],
                            "value": values.ravel()[at]}))
                        pred = m.predict()
                        r = on_raster(test)
                        pooled.setdefault((name, which, k), []).append(
                            (truth[r], pred["mean"].values[r], pred["std_latent"].values[r]))
            print(f"{kind} seed {seed}: sites in the rough half: " + ", ".join(
                f"{key} {share[key][-1]:.2f}" for key in ("stationary", "varying", "random")),
                flush=True)
    print(f"pooled over {len(args.kinds) * len(args.seeds)} fields ({n}², {args.initial:.0%} "
          f"of the cells measured at first, sites from the other unmeasured half): test "
          f"RMSE / NLPD of the latent field after k sites")
    for name in ("stationary", "varying"):
        for which in (name, "random"):
            row = []
            for k in checkpoints:
                t, mu, sd = (np.concatenate(a) for a in zip(*pooled[(name, which, k)], strict=True))
                nlpd = float(np.mean(0.5 * np.log(2 * np.pi * sd**2) + 0.5 * ((t - mu) / sd)**2))
                row.append(f"{k}: {rmse(t, mu):.4f} / {nlpd:.3f}")
            label = f"{name} model, {'its own' if which == name else 'random'} sites"
            print(f"  {label:<28} " + " | ".join(row))
    print("  sites in the rough half (s < 0.5): " + ", ".join(
        f"{key} {np.mean(v):.2f}" for key, v in share.items()))
    print("  fit and placement per field: " + ", ".join(
        f"{key} {np.mean(v):.1f} s" for key, v in fit_s.items()))


_MEMORY = r"""
import json, sys, time
import numpy as np
from scipy.ndimage import gaussian_filter
from geogp.models.lattice import LatticeRegressor

n, varying, levels = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1"
rng = np.random.default_rng(0)
y = 10 * gaussian_filter(rng.standard_normal((n, n)), 4) + 0.1 * rng.standard_normal((n, n))
y[rng.random((n, n)) < 0.3] = np.nan
kw = {"mid_scale": "auto", "large_scale": "auto"} if levels else {}  # the front end's
est = LatticeRegressor(varying=True if varying else None, max_bytes=64 * 2**30, **kw)
estimate = est.memory_estimate((n, n))
t0 = time.perf_counter()
est.fit_grid((np.arange(n) * 1.0, np.arange(n) * 1.0), y)
peak = 1024.0 * int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
print(json.dumps({"estimate": estimate, "peak": peak, "seconds": time.perf_counter() - t0}))
"""


def memory(args) -> None:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    for n in args.n:
        out = subprocess.run([sys.executable, "-c", _MEMORY, str(n), str(int(not args.stationary)),
                              str(int(args.levels))],
                             check=False, capture_output=True, text=True, env=env)
        if out.returncode:
            sys.exit(f"{n}²: the fit failed:\n{out.stderr}")
        got = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{n}² {'stationary' if args.stationary else 'varying=True'}"
              f"{' with the mid and large scales' if args.levels else ''}: peak "
              f"{got['peak'] / 2**30:.2f} GiB, estimate {got['estimate'] / 2**30:.2f} GiB, "
              f"{got['seconds']:.0f} s; load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d')}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="study", required=True)
    a = sub.add_parser("simulated")
    a.add_argument("--kinds", nargs="+", default=["ramp", "step", "disc"])
    a.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    a.add_argument("--n", type=int, default=64)
    b = sub.add_parser("topobathy")
    b.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("memory")
    c.add_argument("--n", type=int, nargs="+", default=[500, 700])
    c.add_argument("--stationary", action="store_true")
    c.add_argument("--levels", action="store_true",
                   help="the front end's mid-scale level and large scales (mid_scale and "
                        "large_scale 'auto')")
    d = sub.add_parser("active")
    d.add_argument("--kinds", nargs="+", default=["step", "disc"])
    d.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    d.add_argument("--n", type=int, default=48)
    d.add_argument("--initial", type=float, default=0.15,
                   help="fraction of the cells measured at first")
    d.add_argument("--sites", type=int, default=60)
    d.add_argument("--every", type=int, default=20)
    args = ap.parse_args()
    {"simulated": simulated, "topobathy": topobathy, "memory": memory,
     "active": active}[args.study](args)


if __name__ == "__main__":
    main()
