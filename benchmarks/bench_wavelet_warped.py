"""Wavelet model on a 2-D field whose roughness varies in space (issue #14, thesis §4.4 in 2-D).

Data: an n × n raster on [0, 1]² (cell centres), f(u, v) = h(g(u), g(v)) with the thesis's
warping g(u) = 0.3u + 0.7/(1 + e^{−21(u − 0.7)}) (eq. 4.32) in each coordinate and
h ~ GP(0, SE, ℓ) drawn with 3,000 random Fourier features (seeded). g is steep around
u = 0.7, so the field is rough there and smooth elsewhere. Noise sd 0.05. A square patch of
n/8 × n/8 cells in the rough part (from u = v = 0.62) is censored; the models are fitted on the
other cells and scored on the patch against the noise-free f: RMSE, and the 95 % coverage of
a new observation (the model's predictive std of a new observation, its learnt noise
included). Also the RMSE over the whole raster.

Models: stationary AFS (SE and Matérn-3/2, 2,000 features), the wavelet model with its
defaults (db4 and Haar; levels from the pixel size) and the lattice (SPDE) model; and two exact
GPs as references: ``exact-se``, a stationary SE GP whose ℓ, σ_f², σ² are learnt, and
``oracle``, the data-generating prior itself (SE with the true ℓ on the true warped
coordinates g(u), g(v), the true variance and noise), i.e. the best any model can do on
average over draws of the field.

Run: ``.venv/bin/python benchmarks/bench_wavelet_warped.py [--n 64] [--ell 0.1] [--seeds 0]
[--models afs-se afs-m32 wavelet-db4 wavelet-haar lattice exact-se oracle]``. With several
seeds, each model's patch RMSE and coverage are also given as mean ± standard error over the
seeds (one patch per seed: a single draw says little). No assertions; prints a table.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

import geogp  # noqa: F401  (float64)
from geogp.models.afs import AFSRegressor
from geogp.models.exact.regressor import ExactGP
from geogp.models.lattice import LatticeRegressor
from geogp.models.wavelet import WaveletRegressor

from _machine import cpu_model  # benchmarks/ is on sys.path when run

NOISE = 0.05


def warp(u):
    """g(u) = 0.3u + 0.7/(1 + e^{−21(u − 0.7)}) (thesis eq. 4.32)."""
    return 0.3 * u + 0.7 / (1.0 + np.exp(-21.0 * (u - 0.7)))


def field(n: int, ell: float, seed: int):
    """(axis, f, y, patch mask): the warped field on an n × n raster, noisy values, patch."""
    rng = np.random.default_rng(seed)
    ax = (np.arange(n) + 0.5) / n
    U, V = np.meshgrid(ax, ax, indexing="ij")
    W = np.stack([warp(U), warp(V)], -1)
    m = 3000
    omega = rng.normal(size=(m, 2)) / ell
    phase = rng.uniform(0.0, 2 * np.pi, m)
    f = np.sqrt(2.0 / m) * np.cos(W @ omega.T + phase).sum(-1)
    y = f + NOISE * rng.normal(size=f.shape)
    patch = np.zeros_like(f, dtype=bool)
    i0, w = int(0.62 * n), max(4, n // 8)
    patch[i0:i0 + w, i0:i0 + w] = True
    return ax, f, y, patch


def make(name: str):
    return {
        "afs-se": lambda: AFSRegressor("se", n_features=2000),
        "afs-m32": lambda: AFSRegressor("matern32", n_features=2000),
        "wavelet-db4": lambda: WaveletRegressor("db4"),
        "wavelet-haar": lambda: WaveletRegressor("haar"),
        "lattice": lambda: LatticeRegressor(large_scale=200),
    }[name]()


def exact(name: str, ax, y, patch, ell: float):
    """Prediction of an exact GP on the grid: learnt stationary SE, or the true prior."""
    U, V = np.meshgrid(ax, ax, indexing="ij")
    X = np.stack([U.ravel(), V.ravel()], axis=1)
    if name == "oracle":
        X = warp(X)
        est = ExactGP("se", lengthscale=ell, variance=1.0, noise=NOISE**2, standardize=False,
                      optimize=False)
    else:
        est = ExactGP("se", lengthscale=0.2, noise=0.1)
    keep = ~patch.ravel()
    return est.fit(X[keep], y.ravel()[keep]).predict(X)


def run(name: str, ax, f, y, patch, ell: float):
    values = np.where(patch, np.nan, y)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in ("exact-se", "oracle"):
            est, pred = None, exact(name, ax, y, patch, ell)
        else:
            est = make(name)
            est.fit_grid([ax, ax], values)
            pred = (est.predict_grid(ax, ax) if name.startswith("wavelet")
                    else est.predict_grid([ax, ax]))
    dt = time.perf_counter() - t0
    n = ax.size
    mean = np.asarray(pred.mean).reshape(n, n)
    sd = np.sqrt(np.asarray(pred.var_observed).reshape(n, n))  # the model's own noise
    err = (mean - f)[patch]
    cover = np.mean(np.abs(y[patch] - mean[patch]) <= 1.959964 * sd[patch])
    extra = ""
    if name.startswith("wavelet"):
        extra = f"levels ι={est.iota_}..{est.j_max_}, M={est.n_features_}"
    return dict(method=name, rmse=float(np.sqrt(np.mean(err**2))), cover=float(cover),
                rmse_all=float(np.sqrt(np.mean((mean - f) ** 2))), time=dt, extra=extra)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--ell", type=float, default=0.1)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--models", nargs="+",
                    default=["afs-se", "afs-m32", "wavelet-db4", "wavelet-haar", "lattice"])
    args = ap.parse_args(argv)
    print(f"{cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d')}")
    results = {name: [] for name in args.models}
    print("| seed | method | patch RMSE | patch cov95 | RMSE (all cells) | time [s] | |")
    print("|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        ax, f, y, patch = field(args.n, args.ell, seed)
        print(f"<!-- {args.n}×{args.n} raster, ℓ = {args.ell}, seed {seed}; patch of "
              f"{patch.sum()} cells at u, v ∈ [{ax[patch.any(1)][0]:.3f}, "
              f"{ax[patch.any(1)][-1]:.3f}] -->")
        for name in args.models:
            try:
                r = run(name, ax, f, y, patch, args.ell)
            except Exception as exc:  # report and go on with the other models
                print(f"| {seed} | {name} | failed: {type(exc).__name__}: {str(exc)[:120]} "
                      "| | | | |")
                continue
            results[name].append((r["rmse"], r["cover"]))
            print(f"| {seed} | {r['method']} | {r['rmse']:.4f} | {r['cover']:.3f} | "
                  f"{r['rmse_all']:.4f} | {r['time']:.1f} | {r['extra']} |", flush=True)
    if len(args.seeds) > 1:
        print("\n| method | seeds | patch RMSE (mean ± se) | patch cov95 (mean ± se) |")
        print("|---|---|---|---|")
        for name, rows in results.items():
            if len(rows) > 1:
                a = np.asarray(rows)
                m, se = a.mean(0), a.std(0, ddof=1) / np.sqrt(len(a))
                print(f"| {name} | {len(a)} | {m[0]:.3f} ± {se[0]:.3f} | "
                      f"{m[1]:.3f} ± {se[1]:.3f} |")


if __name__ == "__main__":
    main()
