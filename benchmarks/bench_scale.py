"""Scale: time and peak memory of AFS on gappy rasters from 1024² to 8192² cells.

Data: a synthetic field on the unit square, a seeded sum of plane waves (amplitudes decaying
with frequency, up to ~24 cycles across the square) plus N(0, 0.1²) noise, with 30 % of the
cells missing: a few elliptical "clouds" (about 10 % of the square) and uniformly random cells
(the rest). The field is closed-form, so any block of rows can be generated on its own, from
seeds that depend on the block only: the same raster in memory (numpy) or lazily (dask).

**In-memory sizes** (default 1024², 2048², 4096²): each size runs in a fresh subprocess
(``--worker``), which generates the raster as a numpy array, fits
``AFSRegressor(kernel="matern32", n_features=M).fit_grid`` (exact gappy route: G from separable
transforms of the observation mask, then L-BFGS on the O(M³) collapsed bound) and predicts
mean and std (of a new observation) on the full grid with ``geogp.families.predict_grid`` (row
blocks of 2²⁰ cells, as ``GeoRegressor.predict`` does). Phases:

- ``data``: generating the raster;
- ``stats``: the observed-cell moments and the sufficient statistics (one pass each);
- ``fit``: L-BFGS (JAX compilation included) and the posterior;
- ``predict``: full-grid mean, latent and observed variance.

**Dask size** (default 8192²): the raster is a ``dask.array`` built with ``map_blocks`` (row
chunks of the full width), never held in memory; ``fit_grid`` reads it chunk by chunk (twice:
moments, then statistics, summed over chunks); prediction runs by row tiles and writes mean and
std into two float64 ``numpy.memmap`` files (1 GB together at 8192²; written, flushed and
unmapped tile by tile so they do not stay resident), then reduces them per tile. Target: peak
RSS ≤ 8 GB.

Memory: ``peak RSS`` is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the worker process at
the end (it includes the Python + JAX baseline, reported as ``base``); the per-phase peaks come
from a thread that samples ``/proc/self/statm`` every 10 ms (a short spike between two samples
can be missed: ``ru_maxrss`` is the authoritative total). Times are wall clock; the machine's
load average is printed with each row (the reference machine has 2 cores shared with others).

Accuracy check (not the point of the benchmark, but it shows the fit is sensible): RMSE of the
predictive mean against the noiseless field at the missing cells, and the 95 % coverage of the
noiseless field by mean ± 1.96 std_latent there (for the dask run: accumulated over tiles).

Run::

    .venv/bin/python benchmarks/bench_scale.py                       # 1024..4096 + dask 8192
    .venv/bin/python benchmarks/bench_scale.py --sizes 1024 2048 --dask-size 0 --m 500
    .venv/bin/python benchmarks/bench_scale.py --quick               # 1024, 2048; dask 4096

The default run took 2 min on 2 cores at load ≈ 1 and 8 min at load ≈ 6 (peak RSS 1.9 GB,
at 4096² in memory). It is a script, not a test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

MAX_RSS_GB = 8.0
GAP_FRACTION = 0.30
NOISE_SD = 0.1


# =========================================================================== the synthetic field
class Field:
    """Closed-form gappy field on an n × n grid over [0, 1]²; ``rows(a, b)`` makes rows a..b."""

    def __init__(self, n: int, seed: int = 0, n_waves: int = 24, n_clouds: int = 12):
        self.n, self.seed = n, seed
        rng = np.random.default_rng(seed)
        k = rng.normal(size=(n_waves, 2))
        k *= (rng.uniform(0.5, 8.0, n_waves) / np.linalg.norm(k, axis=1))[:, None]
        self.kvec = 2 * np.pi * k  # angular wave vectors
        self.amp = 1.0 / (1.0 + (np.linalg.norm(k, axis=1) / 3.0) ** 2) * rng.normal(size=n_waves)
        self.phase = rng.uniform(0, 2 * np.pi, n_waves)
        # clouds: ellipses (centre, semi-axes in units of the side), about 10 % of the square
        self.clouds = [(rng.uniform(0.1, 0.9, 2), rng.uniform(0.03, 0.08, 2))
                       for _ in range(n_clouds)]
        cloud_frac = self._cloud_mask(np.linspace(0, 1, 512), np.linspace(0, 1, 512)).mean()
        self.cloud_fraction = float(cloud_frac)
        # random cells outside the clouds bring the total to GAP_FRACTION
        self.p_random = max(0.0, (GAP_FRACTION - cloud_frac) / (1.0 - cloud_frac))
        self.axis = np.linspace(0.0, 1.0, n)

    def _cloud_mask(self, y, x):
        m = np.zeros((y.size, x.size), dtype=bool)
        for (cy, cx), (ay, ax) in self.clouds:
            rows = np.nonzero(np.abs(y - cy) <= ay)[0]
            if rows.size:
                dy = ((y[rows] - cy) / ay) ** 2
                m[rows] |= dy[:, None] + ((x[None, :] - cx) / ax) ** 2 <= 1.0
        return m

    def truth(self, a: int, b: int) -> np.ndarray:
        """Noiseless field on rows a..b (separable: sin(u + v) = sin u cos v + cos u sin v)."""
        y, x = self.axis[a:b], self.axis
        out = np.zeros((b - a, self.n))
        for (ky, kx), A, ph in zip(self.kvec, self.amp, self.phase, strict=True):
            u = ky * y + ph
            v = kx * x
            out += np.outer(A * np.sin(u), np.cos(v))
            out += np.outer(A * np.cos(u), np.sin(v))
        return out

    def rows(self, a: int, b: int, with_truth: bool = False):
        """Noisy observations (NaN = missing) on rows a..b; seeds depend on (seed, a, b) only."""
        f = self.truth(a, b)
        rng = np.random.default_rng([self.seed, a, b])
        obs = f + NOISE_SD * rng.standard_normal(f.shape)
        gap = rng.random(f.shape) < self.p_random
        gap |= self._cloud_mask(self.axis[a:b], self.axis)
        obs[gap] = np.nan
        return (obs, f) if with_truth else obs

    def numpy(self, step: int = 256):
        obs = np.empty((self.n, self.n))
        truth = np.empty((self.n, self.n))
        for a in range(0, self.n, step):
            b = min(self.n, a + step)
            obs[a:b], truth[a:b] = self.rows(a, b, with_truth=True)
        return obs, truth

    def dask(self, chunk_rows: int = 256):
        import dask.array as da

        n = self.n
        chunks = (tuple(min(chunk_rows, n - a) for a in range(0, n, chunk_rows)), (n,))

        def block(block_info=None):
            (a, b), _ = block_info[None]["array-location"]
            return self.rows(a, b)

        return da.map_blocks(block, chunks=chunks, dtype=np.float64,
                             meta=np.empty((0, 0), dtype=np.float64))


# =========================================================================== memory sampling
class RSSMonitor:
    """Samples the resident set size every ``interval`` s and keeps the peak of each phase."""

    def __init__(self, interval: float = 0.01):
        self.interval = interval
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.phase = "start"
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * self.page

    def _record(self):
        r = self.rss()
        if r > self.peaks.get(self.phase, 0):
            self.peaks[self.phase] = r

    def _run(self):
        while not self._stop.is_set():
            self._record()
            time.sleep(self.interval)

    def start(self):
        self._thread.start()
        return self

    def mark(self, phase: str):
        self._record()
        self.phase = phase
        self._record()

    def stop(self):
        self._record()
        self._stop.set()
        self._thread.join()


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def _load() -> str:
    la = os.getloadavg()
    return f"{la[0]:.1f}"


# =========================================================================== one size (worker)
def worker(n: int, m: int, maxiter: int, use_dask: bool, chunk_rows: int, seed: int,
           out_dir: str | None) -> dict:
    mon = RSSMonitor().start()
    import jax

    import geogp  # noqa: F401  (float64)
    from geogp import families
    from geogp.models.afs import AFSRegressor

    base = mon.rss()
    timer = {}
    load = {"start": _load()}

    class Timed(AFSRegressor):
        """AFSRegressor that marks the start of the L-BFGS phase (after the statistics)."""

        def _learn(self, d, *args):
            timer["stats_end"] = time.perf_counter()
            mon.mark("fit")
            return super()._learn(d, *args)

    field = Field(n, seed)
    axes = [field.axis, field.axis]
    t0 = time.perf_counter()
    mon.mark("data")
    if use_dask:
        values, truth = field.dask(chunk_rows), None
    else:
        values, truth = field.numpy()
    t1 = time.perf_counter()
    mon.mark("stats")
    est = Timed("matern32", n_features=m, maxiter=maxiter)
    est.fit_grid(axes, values)
    t2 = time.perf_counter()
    mon.mark("predict")
    res = {"n": n, "cells": n * n, "dask": use_dask, "M": est.features_.n_features,
           "K": [int(k) for k in est.features_.n_freq], "n_obs": int(float(est.stats_.n)),
           "n_iter": int(est.report_.n_iter), "base_gb": base / 1e9,
           "lengthscale": [float(v) for v in est.lengthscale_[0]],
           "signal_sd": float(np.sqrt(float(est.kernel_.variance_at_zero))) * est.scaler_.y_scale,
           "noise_sd": float(np.sqrt(est.noise_variance_)),
           "trace_frac": est.trace_diagnostic() / (float(est.stats_.n)
                                                   * float(est.kernel_.variance_at_zero)),
           "cloud_fraction": field.cloud_fraction}
    if not use_dask:
        pred = families.predict_grid(est, axes)
        std = np.sqrt(pred.var_observed)
        t3 = time.perf_counter()
        gap = ~np.isfinite(values)
        err = pred.mean[gap] - truth[gap]
        half = 1.959964 * np.sqrt(pred.var_latent[gap])
        res.update(rmse_gap=float(np.sqrt(np.mean(err**2))),
                   cover95_gap=float(np.mean(np.abs(err) <= half)),
                   mean_std=float(std.mean()))
        del pred, std
    else:
        res.update(_predict_tiles(est, field, axes, out_dir))
        t3 = time.perf_counter()
    mon.stop()
    res.update(data_s=t1 - t0, stats_s=timer["stats_end"] - t1, fit_s=t2 - timer["stats_end"],
               predict_s=t3 - t2, total_s=t3 - t0,
               peak_gb={k: v / 1e9 for k, v in mon.peaks.items()},
               maxrss_gb=_maxrss_bytes() / 1e9, load_start=load["start"], load_end=_load(),
               jax=jax.__version__)
    return res


def _predict_tiles(est, field: Field, axes, out_dir: str | None, tile_rows: int = 512) -> dict:
    """Predict by row tiles into memory-mapped mean/std files; reduce as we go."""
    from geogp import families

    n = field.n
    tmp = None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_scale_")
        out_dir = tmp.name
    os.makedirs(out_dir, exist_ok=True)
    paths = {k: os.path.join(out_dir, f"pred_{n}_{k}.f64") for k in ("mean", "std")}
    for p in paths.values():
        with open(p, "wb") as fh:
            fh.truncate(n * n * 8)
    sse, cover, n_gap, std_sum = 0.0, 0, 0, 0.0
    for a in range(0, n, tile_rows):
        b = min(n, a + tile_rows)
        p = families.predict_grid(est, [axes[0][a:b], axes[1]])
        std = np.sqrt(p.var_observed)
        for key, arr in (("mean", p.mean), ("std", std)):
            mm = np.memmap(paths[key], dtype=np.float64, mode="r+", offset=a * n * 8,
                           shape=(b - a, n))
            mm[:] = arr
            mm.flush()
            del mm
        obs, f = field.rows(a, b, with_truth=True)
        gap = ~np.isfinite(obs)
        err = p.mean[gap] - f[gap]
        sse += float(np.sum(err**2))
        cover += int(np.sum(np.abs(err) <= 1.959964 * np.sqrt(p.var_latent[gap])))
        n_gap += int(gap.sum())
        std_sum += float(std.sum())
    out = {"rmse_gap": float(np.sqrt(sse / n_gap)), "cover95_gap": cover / n_gap,
           "mean_std": std_sum / (n * n), "written": None if tmp else list(paths.values())}
    if tmp is not None:
        tmp.cleanup()
    return out


# =========================================================================== driver
from _machine import cpu_model  # noqa: E402  (benchmarks/ is on sys.path when run)


def machine() -> str:
    model = cpu_model(platform.processor() or "unknown CPU")
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    la = os.getloadavg()
    return (f"{datetime.datetime.now().isoformat(timespec='seconds')} | {os.cpu_count()} cores | "
            f"{model} | {mem:.0f} GiB RAM | load avg {la[0]:.1f} {la[1]:.1f} {la[2]:.1f}")


def run_subprocess(n, args, use_dask) -> dict | None:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(n), "--m", str(args.m),
           "--maxiter", str(args.maxiter), "--chunk-rows", str(args.chunk_rows),
           "--seed", str(args.seed)]
    if use_dask:
        cmd.append("--worker-dask")
    if args.out:
        cmd += ["--out", args.out]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"  size {n}: worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}",
              flush=True)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def print_row(r: dict) -> None:
    pk = r["peak_gb"]
    kind = "dask" if r["dask"] else "numpy"
    print(f"{r['n']:>5}² {kind:5} {r['n_obs'] / 1e6:7.2f} {r['M']:5d} {r['n_iter']:4d} "
          f"{r['data_s']:7.1f} {r['stats_s']:7.1f} {r['fit_s']:7.1f} {r['predict_s']:7.1f} "
          f"{pk.get('stats', 0):6.2f} {pk.get('fit', 0):6.2f} {pk.get('predict', 0):6.2f} "
          f"{r['maxrss_gb']:6.2f} {r['rmse_gap']:6.3f} {r['cover95_gap']:5.3f} "
          f"{r['load_start']:>4}/{r['load_end']:<4}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 2048, 4096],
                    help="in-memory raster sides (default 1024 2048 4096)")
    ap.add_argument("--dask-size", type=int, default=8192,
                    help="side of the dask-chunked run (default 8192; 0 to skip)")
    ap.add_argument("--m", type=int, default=1000, help="target number of features M")
    ap.add_argument("--maxiter", type=int, default=300, help="L-BFGS iterations (default 300)")
    ap.add_argument("--chunk-rows", type=int, default=256, help="dask chunk rows (full width)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="keep the dask run's memory-mapped mean/std files here")
    ap.add_argument("--json", help="write all rows as JSON here")
    ap.add_argument("--quick", action="store_true",
                    help="sizes 1024 2048 and a dask run at 4096 (~1 min at low load)")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker-dask", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        res = worker(args.worker, args.m, args.maxiter, args.worker_dask, args.chunk_rows,
                     args.seed, args.out)
        print(json.dumps(res))
        return 0

    sizes, dask_size = args.sizes, args.dask_size
    if args.quick:
        sizes, dask_size = [1024, 2048], 4096
    print(f"# AFS scale benchmark — {machine()}")
    print(f"matern32, target M = {args.m}, maxiter {args.maxiter}, {GAP_FRACTION:.0%} gaps "
          f"(clouds + random cells), noise sd {NOISE_SD}; one fresh process per size; "
          f"peak RSS limit for the dask run {MAX_RSS_GB:.0f} GB")
    print(f"{'size':>6} {'kind':5} {'obs(M)':>7} {'M':>5} {'iter':>4} {'data s':>7} "
          f"{'stats s':>7} {'fit s':>7} {'pred s':>7} {'pk st':>6} {'pk fit':>6} {'pk prd':>6} "
          f"{'maxRSS':>6} {'RMSEgp':>6} {'cov95':>5} load(s/e)")
    print("(peaks in GB: sampled RSS per phase and ru_maxrss of the whole worker process)")
    rows = []
    runs = [(n, False) for n in sizes] + ([(dask_size, True)] if dask_size else [])
    for n, use_dask in runs:
        r = run_subprocess(n, args, use_dask)
        if r is not None:
            rows.append(r)
            print_row(r)
    for r in rows:
        if r["dask"]:
            verdict = "within" if r["maxrss_gb"] <= MAX_RSS_GB else "EXCEEDS"
            print(f"dask {r['n']}² run: peak RSS {r['maxrss_gb']:.2f} GB ({verdict} the "
                  f"{MAX_RSS_GB:.0f} GB limit; Python+JAX baseline {r['base_gb']:.2f} GB); "
                  f"a dense float64 copy of the raster alone would be "
                  f"{r['cells'] * 8 / 1e9:.2f} GB")
    if rows:
        print(f"realised M = {rows[0]['M']} (K = {rows[0]['K']}), JAX {rows[0]['jax']}")
        print("fitted hyperparameters (data units): size, lengthscale (y, x), signal sd, noise "
              "sd (true 0.1), trace term t/(N k(0)) = prior variance the features miss")
        for r in rows:
            ell = r["lengthscale"]
            print(f"  {r['n']:>5}²  ({ell[0]:.4f}, {ell[1]:.4f})  {r['signal_sd']:.3f}  "
                  f"{r['noise_sd']:.4f}  {r['trace_frac']:.2e}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine(), "rows": rows}, fh, indent=1)
    return 0 if len(rows) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
