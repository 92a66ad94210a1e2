"""AFS precompute and fit times at scale: 10⁶ scattered points, and a 2048 × 2048 raster.

Three measurements (docs/afs.md (statistics, gridded data)):

1. **Scattered points.** N = 10⁶ points uniform on the unit square, M ≈ 2,000 odd-lattice
   features (spherical mask, W = W_x/0.95). The statistics G = ΦΦᵀ and r = Φy are computed
   - densely, in row chunks (``dense_stats``: O(N M²)). If the projected time for all N exceeds
     ``--dense-budget`` seconds (default 120), the dense route runs on a subset only and its time
     is extrapolated linearly in N (the cost is exactly linear in N); the table says so;
   - by type-1 NUFFTs (``points_stats``: O(N + P² log P + M²)), on all N points.
   On the dense subset both routes are compared: max |G_dense − G_nufft| / max |G_dense|
   (and the same for r).
2. **Complete raster**, 2048 × 2048 cells: ``AFSRegressor(...).fit_grid`` takes the Lemma 3.1
   path (G = N·I, O(M) per L-BFGS step; docs/afs.md (gridded data)). Time of the statistics
   (separable transforms of y) and of L-BFGS.
3. **The same raster with 30 % of the cells missing** (uniformly at random): the exact gappy
   route (G from separable transforms of the observation mask, then the dense O(M³) bound) at a
   moderate M (``--m-gappy``, default 500).

The fields are synthetic, SE-like with ℓ = 0.05 of the square's side, standardised, plus
N(0, 0.3²) noise: random Fourier features at the scattered points, FFT-filtered white noise
(padded, then cropped, so that it does not wrap around) on the raster.

Observed (not a timing): on the complete raster the learnt ℓ falls below the field's 0.05 as M
grows (≈ 0.075, 0.045, 0.028 at M ≈ 500, 1000, 2000 on 2048²), while the gappy/exact route
with W = W_x/0.95 lands near 0.05 once M resolves the field. Lemma 3.1 needs W_d = N_d η_d,
so the odd lattice's sign-flipped aliases sit one cell beyond the opposite edge (k ≈ −σ_f²
there): the model believes f is anti-periodic across the raster, the docs/afs.md (gridded data)
pitfall. On a 128² crop the complete-grid bound is ~1000 nats below the W = W_x/0.95 exact route at
M ≈ 2000. Read the Lemma 3.1 timings as the cost of that path, not as a recommendation for
non-periodic fields.

Run: ``.venv/bin/python benchmarks/bench_afs_precompute.py [--n 1000000] [--grid 2048]``.
The default run takes a few minutes on 2 idle cores and about 1.5 GB of memory. Timings are
wall clock and process CPU time; on a shared, loaded machine they are noisy (the CPU figures
are the steadier ones). Results of a run are quoted in the report of issue 3.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

import jax
import numpy as np

import geogp  # noqa: F401  (switches JAX to float64)
from geogp.features.fourier import DEFAULT_WIDTH_FACTOR, FourierFeatures
from geogp.features.fourier_statistics import dense_stats, points_stats
from geogp.models.afs import AFSRegressor

from _machine import cpu_model  # benchmarks/ is on sys.path when run


def machine() -> str:
    model = cpu_model(platform.processor() or "unknown CPU")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"{datetime.datetime.now().isoformat(timespec='seconds')} | nproc {os.cpu_count()} | "
            f"{model} | load avg {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} | "
            f"jax {jax.__version__}, numpy {np.__version__}")


def timed(fn, *a, **kw):
    w, c = time.perf_counter(), time.process_time()
    out = fn(*a, **kw)
    return out, time.perf_counter() - w, time.process_time() - c


def smooth_field(X, rng, n_waves=64, ell=0.05):
    """A smooth random function at points X (N, 2): random Fourier features of an SE kernel."""
    W = rng.normal(scale=1 / (2 * np.pi * ell), size=(n_waves, 2))
    b = rng.uniform(0, 2 * np.pi, n_waves)
    a = rng.normal(size=n_waves) * np.sqrt(2 / n_waves)
    out = np.zeros(X.shape[0])
    for start in range(0, X.shape[0], 200_000):
        sl = slice(start, start + 200_000)
        out[sl] = np.cos(2 * np.pi * X[sl] @ W.T + b) @ a
    return out


def grid_field(n, rng, ell=0.05, noise_sd=0.3):
    """(n, n) SE-filtered white noise on the unit square plus noise.

    The FFT synthesis is periodic, so it runs on a grid padded by 10ℓ and is cropped: a field
    that wraps around would contradict the odd lattice's sign-alternating aliases at distance W
    and bias the complete-grid fit (W = N_d η_d there).
    """
    m = n + int(np.ceil(10 * ell * n))
    f = np.fft.fftfreq(m, d=1.0 / n)  # cycles per unit side (cell size 1/n)
    f2 = f[:, None] ** 2 + f[None, :] ** 2
    amp = np.exp(-np.pi**2 * ell**2 * f2)  # √S for an SE kernel (up to a constant)
    z = np.fft.fft2(rng.standard_normal((m, m))) * amp
    field = np.fft.ifft2(z).real[:n, :n]
    field /= field.std()
    return field + noise_sd * rng.standard_normal((n, n))


def scattered(args, rng):
    N, M = args.n, args.m
    X = rng.uniform(0, 1, (N, 2))
    y = smooth_field(X, rng) + 0.3 * rng.standard_normal(N)
    lo, hi = X.min(axis=0), X.max(axis=0)
    ff = FourierFeatures.for_budget((lo + hi) / 2, (hi - lo) * DEFAULT_WIDTH_FACTOR, M)
    print(f"\n[1] scattered points: N = {N:,}, {ff.describe()}")

    # dense on a subset first: it sets the projection and the reference for the comparison
    n_sub = min(args.dense_subset, N)
    st_d, w_sub, c_sub = timed(dense_stats, ff, X[:n_sub], y[:n_sub])
    proj_w, proj_c = w_sub * N / n_sub, c_sub * N / n_sub
    if proj_w <= args.dense_budget and n_sub < N:
        _, w_full, c_full = timed(dense_stats, ff, X, y)
        dense_row = (f"{w_full:10.1f}", f"{c_full:10.1f}", f"measured on all {N:,} points")
    elif n_sub == N:
        dense_row = (f"{w_sub:10.1f}", f"{c_sub:10.1f}", f"measured on all {N:,} points")
    else:
        dense_row = (f"{proj_w:10.1f}", f"{proj_c:10.1f}",
                     f"EXTRAPOLATED ×{N / n_sub:g} from {n_sub:,} points "
                     f"({w_sub:.1f} s wall); projected > {args.dense_budget:g} s budget")
    st_n_sub = points_stats(ff, X[:n_sub], y[:n_sub])
    G_d, G_n = np.asarray(st_d.G), np.asarray(st_n_sub.G)
    rel_G = float(np.max(np.abs(G_d - G_n)) / np.max(np.abs(G_d)))
    rel_r = float(np.max(np.abs(np.asarray(st_d.r) - np.asarray(st_n_sub.r)))
                  / np.max(np.abs(np.asarray(st_d.r))))
    _, w_nu, c_nu = timed(points_stats, ff, X, y)

    print(f"  {'route':18s} {'wall [s]':>10s} {'CPU [s]':>10s}   note")
    print(f"  {'dense (chunked)':18s} {dense_row[0]} {dense_row[1]}   {dense_row[2]}")
    print(f"  {'NUFFT':18s} {w_nu:10.1f} {c_nu:10.1f}   all {N:,} points")
    print(f"  speed-up NUFFT vs dense: {float(dense_row[0]) / w_nu:.0f}× (wall)")
    print(f"  on the {n_sub:,}-point subset: max|G_dense − G_nufft|/max|G_dense| = {rel_G:.2e}, "
          f"max|r_dense − r_nufft|/max|r_dense| = {rel_r:.2e}")


def gridded(args, rng):
    n = args.grid
    axes = [np.linspace(0.0, 1.0, n), np.linspace(0.0, 1.0, n)]
    values = grid_field(n, rng)
    print(f"\n[2] complete raster {n} × {n} ({n * n:,} cells)")
    model = AFSRegressor("se", n_features=args.m, maxiter=args.maxiter, grid_mode="diagonal")
    _, wall, cpu = timed(model.fit_grid, axes, values)
    ff, rep = model.features_, model.report_
    print(f"  {ff.describe()}; Lemma 3.1 path (G = N·I): {model.stats_.diagonal}")
    print(f"  statistics {model.stats_time_s_:.2f} s, L-BFGS {rep.time_s:.2f} s "
          f"({rep.n_iter} iterations, {rep.n_eval} evaluations, JIT included), "
          f"fit_grid total {wall:.2f} s wall / {cpu:.2f} s CPU")
    print(f"  learnt ℓ = {np.round(model.lengthscale_[0], 4).tolist()} (field ℓ = 0.05), "
          f"noise sd {np.sqrt(model.noise_variance_):.3f} (0.3 added)")

    gaps = values.copy()
    gaps[rng.uniform(size=gaps.shape) < 0.3] = np.nan
    n_obs = int(np.isfinite(gaps).sum())
    print(f"\n[3] the same raster with 30% gaps ({n_obs:,} observed cells), exact gappy route")
    model = AFSRegressor("se", n_features=args.m_gappy, maxiter=args.maxiter)
    _, wall, cpu = timed(model.fit_grid, axes, gaps)
    ff, rep = model.features_, model.report_
    print(f"  {ff.describe()}; Lemma 3.1 path: {model.stats_.diagonal}")
    print(f"  statistics {model.stats_time_s_:.2f} s, L-BFGS {rep.time_s:.2f} s "
          f"({rep.n_iter} iterations, {rep.n_eval} evaluations, JIT included), "
          f"fit_grid total {wall:.2f} s wall / {cpu:.2f} s CPU")
    print(f"  learnt ℓ = {np.round(model.lengthscale_[0], 4).tolist()}, "
          f"noise sd {np.sqrt(model.noise_variance_):.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="scattered points (default 10⁶)")
    ap.add_argument("--m", type=int, default=2000, help="target M (scattered and complete grid)")
    ap.add_argument("--dense-subset", type=int, default=10_000,
                    help="points for the dense timing/comparison (default 10,000)")
    ap.add_argument("--dense-budget", type=float, default=120.0,
                    help="run dense on all points only if projected below this many seconds")
    ap.add_argument("--grid", type=int, default=2048, help="raster side (default 2048)")
    ap.add_argument("--m-gappy", type=int, default=500, help="target M for the gappy raster")
    ap.add_argument("--maxiter", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-points", action="store_true")
    ap.add_argument("--skip-grid", action="store_true")
    args = ap.parse_args(argv)
    print(machine())
    rng = np.random.default_rng(args.seed)
    if not args.skip_points:
        scattered(args, rng)
    if not args.skip_grid:
        gridded(args, rng)


if __name__ == "__main__":
    main()
