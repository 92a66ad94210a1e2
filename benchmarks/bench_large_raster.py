"""``geogp.fit`` on a large simulated raster with a known truth, against the best predictor.

The truth on an NY × NX raster of unit cells (coordinates 0 … N−1, EPSG:3857) is

    z(y, x) = 20 + 0.002·x − 0.001·y + f₁ + f₂,   observed as  z + ε,  ε ~ N(0, 0.15²) iid,

with f₁, f₂ independent zero-mean Gaussian fields, exponential covariance C(d) = sd² exp(−d/ρ):
sd 1.5, ρ = 15 cells and sd 3, ρ = 250 cells (d Euclidean, in cells). Each field is simulated
exactly by circulant embedding: the covariance on a torus of at least max(2(N−1), 16ρ) cells
per axis (grown by 1.25× until its FFT eigenvalues are ≥ −1e-10·max; tiny negatives are
clipped; for ρ = 250 a torus of 3,072² has eigenvalues down to −1.4e-8·max, 4,096² none
negative) and one real FFT of white noise; the peak is about 20 bytes per torus cell (float64):
≈ 0.3 GB for the ρ = 250 field of a 1200² raster (torus 4000²), ≈ 0.8 GB for 3000 × 3300
(torus 6000 × 6600).

Missing cells: the cloud mask of ``/work/shared/data/heaton_satellite_train.nc`` (300 × 500,
NaN = cloud), mirror-tiled over the raster. Test cells: a second copy of the tiled mask shifted
by half a tile in both axes, on the cells the first left observed (held-out gaps shaped like
real clouds). The fit sees the remaining cells only. Skipped when the file is absent.

Measured: wall time (perf_counter) of ``geogp.fit(da, model=..., **options)`` and of
``model.predict()`` (full-grid mean/std), the process's peak RSS (ru_maxrss) after simulation,
fit and prediction (the peak so far, so it includes the simulation's), and scores on a seeded
random subsample of the test cells (``--n-test``) against the noisy value z + ε: RMSE, CRPS and
95 % coverage of N(mean, std²), where geogp's ``std`` is already that of a new observation
(fitted noise included), overall and by distance to the nearest training cell (≤ 1, 1–10,
> 10 cells). The oracle is simple kriging with the true trend and covariance (nugget 0.15²) from
the 100 nearest training cells, predictive variance C(0) − kᵀK⁻¹k + 0.15²; the ratios
model / oracle show what is left to gain (≈ 1 is the best possible; well below 1 is a bug: on
150 × 250 the 100-NN oracle's RMSE is within 0.1 % of a 400-NN one, so ratios of 0.99–1 are
ties). At small sizes the peak RSS after simulation is the ρ = 250 torus (≥ 4000² cells).

Usage::

    .venv/bin/python benchmarks/bench_large_raster.py --shape 1200 1200
    .venv/bin/python benchmarks/bench_large_raster.py --shape 3000 3300 --json benchmarks/out/l.json
    .venv/bin/python benchmarks/bench_large_raster.py --shape 150 250 --n-test 2000 --model afs
    .venv/bin/python benchmarks/bench_large_raster.py --option maxiter=50 --option mean=linear
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_model  # benchmarks/ is on sys.path when run

DATA = Path("/work/shared/data/heaton_satellite_train.nc")
COMPONENTS = ((1.5, 15.0), (3.0, 250.0))  # (sd, range ρ in cells) of the exponential fields
NOISE_SD = 0.15
TREND = (20.0, 0.002, -0.001)  # intercept, per cell in x, per cell in y
N_NEIGHBOURS = 100
BINS = (1.0, 10.0)  # distance strata to the nearest training cell: ≤ 1, 1–10, > 10


def covariance(d):
    """True covariance of f₁ + f₂ at distance d (cells), without the nugget."""
    return sum(sd**2 * np.exp(-np.asarray(d) / rho) for sd, rho in COMPONENTS)


def trend(iy, ix):
    return TREND[0] + TREND[1] * np.asarray(ix, float) + TREND[2] * np.asarray(iy, float)


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB → GiB


def simulate_exponential(shape, sd: float, rho: float, rng, max_growth: int = 3) -> np.ndarray:
    """One exact draw of a zero-mean field with covariance sd² exp(−d/ρ) on a ``shape`` grid.

    Circulant embedding on a torus (my, mx) ≥ max(2(n−1), 16ρ) per axis: its first row is
    C at the minimum-image distance, its eigenvalues the real FFT of that row. The draw is
    irfft2(√λ · rfft2(w)) for white noise w, i.e. C_torus^{1/2} w, cropped to the grid; exact
    because every lag of the grid (< n ≤ m/2 + 1) is represented without wrapping.
    """
    from scipy import fft

    ny, nx = shape
    want = [max(2 * (n - 1), int(np.ceil(16 * rho)), 2) for n in shape]
    for attempt in range(max_growth + 1):
        my, mx = (fft.next_fast_len(int(w), real=True) for w in want)
        ly = np.minimum(np.arange(my), my - np.arange(my)).astype(np.float64)
        lx = np.minimum(np.arange(mx), mx - np.arange(mx)).astype(np.float64)
        row = np.hypot(ly[:, None], lx[None, :])
        row *= -1.0 / rho
        np.exp(row, out=row)
        row *= sd**2
        lam = fft.rfft2(row, overwrite_x=True).real.copy()  # real: the row is even
        del row
        lo, hi = float(lam.min()), float(lam.max())
        if lo >= -1e-10 * hi:
            break
        if attempt == max_growth:
            raise RuntimeError(f"circulant embedding not nonnegative definite for ρ = {rho} on "
                               f"a {my} × {mx} torus: min eigenvalue {lo:.3g}, max {hi:.3g}")
        want = [int(1.25 * w) + 1 for w in want]
    np.maximum(lam, 0.0, out=lam)
    np.sqrt(lam, out=lam)
    spec = fft.rfft2(rng.standard_normal((my, mx)), overwrite_x=True)
    spec *= lam
    del lam
    field = fft.irfft2(spec, s=(my, mx), overwrite_x=True)
    del spec
    return np.ascontiguousarray(field[:ny, :nx])


def tiled_cloud_mask(cloud: np.ndarray, shape, offset=(0, 0)) -> np.ndarray:
    """``cloud`` (True = missing) mirror-tiled (seamless joins) and cropped to ``shape``."""
    block = np.block([[cloud, cloud[:, ::-1]], [cloud[::-1], cloud[::-1, ::-1]]])
    reps = [-(-(n + o) // b) for n, o, b in zip(shape, offset, block.shape, strict=True)]
    big = np.tile(block, reps)
    return big[offset[0]:offset[0] + shape[0], offset[1]:offset[1] + shape[1]].copy()


def oracle_kriging(train_yx, train_resid, target_yx, batch: int = 256):
    """Simple kriging (true trend and covariance) from the N_NEIGHBOURS nearest training cells.

    Returns the predictive mean and std of a new observation (nugget included) at target_yx.
    """
    from scipy.spatial import cKDTree

    _, idx = cKDTree(train_yx).query(target_yx, k=N_NEIGHBOURS)
    mean = np.empty(len(target_yx))
    var = np.empty(len(target_yx))
    c0 = float(covariance(0.0))
    eye = np.eye(N_NEIGHBOURS) * NOISE_SD**2
    for s in range(0, len(target_yx), batch):
        nb = train_yx[idx[s:s + batch]]  # (B, k, 2)
        dy = nb[:, :, None, 0] - nb[:, None, :, 0]
        dx = nb[:, :, None, 1] - nb[:, None, :, 1]
        K = covariance(np.hypot(dy, dx)) + eye
        t = target_yx[s:s + batch, None, :]
        kv = covariance(np.hypot(nb[..., 0] - t[..., 0], nb[..., 1] - t[..., 1]))  # (B, k)
        rhs = np.stack([kv, train_resid[idx[s:s + batch]]], axis=-1)  # (B, k, 2)
        sol = np.linalg.solve(K, rhs)
        mean[s:s + batch] = np.einsum("bk,bk->b", kv, sol[..., 1])
        var[s:s + batch] = c0 - np.einsum("bk,bk->b", kv, sol[..., 0]) + NOISE_SD**2
    return mean + trend(target_yx[:, 0], target_yx[:, 1]), np.sqrt(np.maximum(var, 1e-300))


def parse_options(items) -> dict:
    out = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"--option needs KEY=VALUE; got {item!r}")
        try:
            out[key.strip()] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key.strip()] = raw
    return out


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=2, ensure_ascii=False, default=float)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", type=int, nargs=2, default=(1200, 1200), metavar=("NY", "NX"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-test", type=int, default=30_000,
                    help="test cells scored (seeded random subsample; all if fewer)")
    ap.add_argument("--model", default="auto", help="geogp.fit's model (default 'auto')")
    ap.add_argument("--option", action="append", metavar="KEY=VALUE",
                    help="a geogp.fit option (repeatable; value read by ast.literal_eval, "
                         "else a string), e.g. --option maxiter=50")
    ap.add_argument("--workers", type=int, default=0,
                    help="run the lattice posterior's tiles on a dask LocalCluster of this "
                         "many worker processes (peak RSS is then the main process's only)")
    ap.add_argument("--json", type=Path, help="write all figures to this JSON file")
    ap.add_argument("--data", type=Path, default=DATA, help="raster whose cloud mask is tiled")
    args = ap.parse_args(argv)
    if not args.data.exists():
        print(f"SKIP: {args.data} not found (its cloud mask is the missingness pattern)")
        return 0

    import rioxarray  # noqa: F401  (registers .rio)
    import xarray as xr
    from scipy.ndimage import distance_transform_edt

    import geogp
    from geogp.core.metrics import evaluate_by_distance

    shape = tuple(args.shape)
    options = parse_options(args.option)
    la = os.getloadavg()
    print(f"# bench_large_raster — {time.strftime('%Y-%m-%d %H:%M')} — {cpu_model()} — "
          f"{os.cpu_count()} CPUs — load {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}", flush=True)
    print(f"raster {shape[0]} × {shape[1]}, seed {args.seed}, model={args.model!r}, "
          f"options {options}")

    # ---- truth and observations
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    obs = np.zeros(shape)
    for sd, rho in COMPONENTS:
        obs += simulate_exponential(shape, sd, rho, rng)
    iy, ix = np.mgrid[0:shape[0], 0:shape[1]]
    obs += trend(iy, ix)
    obs += NOISE_SD * rng.standard_normal(shape)
    t_sim = time.perf_counter() - t0
    rss_sim = peak_rss_gb()

    cloud = np.isnan(np.asarray(geogp.open_raster(args.data).values, dtype=np.float64))
    missing = tiled_cloud_mask(cloud, shape)
    half = (cloud.shape[0] // 2, cloud.shape[1] // 2)
    test = tiled_cloud_mask(cloud, shape, half) & ~missing
    train = ~missing & ~test
    print(f"simulated in {t_sim:.1f} s (peak RSS {rss_sim:.2f} GB); cells: {train.sum():,} "
          f"training, {test.sum():,} test (hidden), {missing.sum():,} missing "
          f"({missing.mean():.1%} of {obs.size:,})", flush=True)

    values = np.where(train, obs, np.nan)
    coords = {"y": np.arange(shape[0], dtype=np.float64),
              "x": np.arange(shape[1], dtype=np.float64)}
    da = xr.DataArray(values, dims=("y", "x"), coords=coords, name="z").rio.write_crs(
        "EPSG:3857")

    # ---- fit and predict
    t0 = time.perf_counter()
    if args.workers:  # the lattice posterior's tiles on a local dask cluster
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.workers, threads_per_worker=1,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            model = geogp.fit(da, model=args.model, **options)
            est = model.estimators_[0]
            if hasattr(est, "cost_estimate"):  # the fitted settings' plan, these workers
                cost = est.cost_estimate(shape, args.workers)
                print(f"estimate with the workers: {cost['bytes'] / 2**30:.2f} GiB, "
                      f"{cost['tiles']} tiles on {cost['local_workers']} local workers",
                      flush=True)
            workers_rss = [w["metrics"]["memory"] / 1e9 for w in
                           client.scheduler_info()["workers"].values()]
            worker_peaks = list(client.run(peak_rss_gb).values())  # each process's own peak
        print(f"dask workers: {args.workers}, resident at the end "
              f"{', '.join(f'{v:.2f}' for v in workers_rss)} GB, peak "
              f"{', '.join(f'{v:.2f}' for v in worker_peaks)} GB; with this process's "
              f"{peak_rss_gb():.2f} GB: {peak_rss_gb() + sum(worker_peaks):.2f} GB "
              "(the sum of the peaks)", flush=True)
    else:
        model = geogp.fit(da, model=args.model, **options)
    t_fit = time.perf_counter() - t0
    rss_fit = peak_rss_gb()
    print(f"fit {t_fit:.1f} s (peak RSS {rss_fit:.2f} GB); model_ = "
          f"{getattr(model, 'model_', '?')!r} ({getattr(model, 'model_reason_', '?')})",
          flush=True)
    print(model.summary())
    est = model.estimators_[0]
    if hasattr(est, "cost_estimate"):  # the lattice model's own estimate, before it ran
        cost = est.cost_estimate(shape, max(args.workers, 1))
        print(f"estimate: {cost['bytes'] / 2**30:.2f} GiB, {cost['tiles']} posterior tiles, "
              f"{cost['seconds']:.0f}–{cost['seconds_most']:.0f} s", flush=True)
    t0 = time.perf_counter()
    pred = model.predict()
    t_pred = time.perf_counter() - t0
    rss_pred = peak_rss_gb()
    print(f"predict {t_pred:.1f} s (peak RSS {rss_pred:.2f} GB)", flush=True)
    mean_grid = pred["mean"].transpose("y", "x").values
    std_grid = pred["std"].transpose("y", "x").values  # new observation: fitted noise included
    del pred, da, values

    # ---- scored cells
    ty, tx = np.nonzero(test)
    pick = np.random.default_rng([args.seed, 1]).permutation(ty.size)[:args.n_test]
    ty, tx = ty[pick], tx[pick]
    y_true = obs[ty, tx]
    dist = distance_transform_edt(~train)[ty, tx]
    scores = {"model": evaluate_by_distance(y_true, mean_grid[ty, tx], std_grid[ty, tx], dist,
                                            bins=BINS)}
    gy, gx = np.nonzero(train)
    t0 = time.perf_counter()
    o_mean, o_std = oracle_kriging(np.stack([gy, gx], 1).astype(np.float64),
                                   obs[gy, gx] - trend(gy, gx),
                                   np.stack([ty, tx], 1).astype(np.float64))
    t_oracle = time.perf_counter() - t0
    scores["oracle"] = evaluate_by_distance(y_true, o_mean, o_std, dist, bins=BINS)

    # ---- report
    cols = ["n", "rmse", "crps", "coverage95", "std_mean"]
    print(f"\nscored {ty.size:,} test cells against z + ε (oracle: {N_NEIGHBOURS}-NN simple "
          f"kriging, true covariance, {t_oracle:.1f} s)")
    print(f"{'stratum':>8} {'who':>7} {'n':>7} {'RMSE':>7} {'CRPS':>7} {'cov95':>6} "
          f"{'mean sd':>7} {'RMSE/or':>8} {'CRPS/or':>8}")
    m, o = scores["model"], scores["oracle"]
    for stratum in list(m.index):
        for who, tab in (("model", m), ("oracle", o)):
            r = tab.loc[stratum]
            if r["n"] == 0:
                continue
            ratio = (f"{r['rmse'] / o.loc[stratum, 'rmse']:8.3f} "
                     f"{r['crps'] / o.loc[stratum, 'crps']:8.3f}") if who == "model" else ""
            print(f"{stratum:>8} {who:>7} {int(r['n']):7d} {r['rmse']:7.4f} {r['crps']:7.4f} "
                  f"{r['coverage95']:6.3f} {r['std_mean']:7.4f} {ratio}")
    la = os.getloadavg()
    print(f"# load at the end {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}")

    if args.json:
        def table(df):
            return {str(k): {c: (int(v) if c == "n" else None if np.isnan(v) else float(v))
                             for c, v in df.loc[k, cols].items()} for k in df.index}

        write_json(args.json, {
            "shape": list(shape), "seed": args.seed, "model": args.model, "options": options,
            "model_": getattr(model, "model_", None),
            "model_reason_": getattr(model, "model_reason_", None),
            "truth": {"components_sd_range": [list(c) for c in COMPONENTS],
                      "noise_sd": NOISE_SD, "trend": list(TREND)},
            "cells": {"training": int(train.sum()), "test": int(test.sum()),
                      "missing": int(missing.sum()), "scored": int(ty.size)},
            "time_s": {"simulate": t_sim, "fit": t_fit, "predict": t_pred,
                       "oracle": t_oracle},
            "peak_rss_gb": {"simulate": rss_sim, "fit": rss_fit, "predict": rss_pred},
            "scores": {"model": table(m), "oracle": table(o)},
            "ratio_model_over_oracle": {str(k): {
                "rmse": float(m.loc[k, "rmse"] / o.loc[k, "rmse"]),
                "crps": float(m.loc[k, "crps"] / o.loc[k, "crps"])}
                for k in m.index if m.loc[k, "n"] > 0},
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "load_end": list(la)},
        })
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
