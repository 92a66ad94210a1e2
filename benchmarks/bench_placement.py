"""Sensor placement (docs/placement.md): speed of the greedy loop, thesis-style active learning.

Part 1, ``timing``: an AFS model with M ≈ 2,000 features on a 316 × 316 raster with gaps;
every cell (99,856) is a candidate; 100 sites are chosen with each strategy, on the grid
(separable transforms) and at 10⁵ scattered points (NUFFT; for ``mi`` the targets are then the
raster's cells: an exact evaluation over 10⁵ scattered targets is a NUFFT, about 10× the cost
of a separable grid product). Hyperparameters are fixed (no L-BFGS: the figure is about
placement). For ``mi`` every cell is a target: ``--targets`` is the
largest target set kept as the explicit |T| × |V_c| matrix; above it (the default here) the
marginal criterion is evaluated over all targets by bounds and exact re-ranking
(geogp.placement.screen), and the printout gives the mean number of exact evaluations per site.
The set-up (one A⁻¹, one quadratic form over the candidates, the bound matrix for ``mi``, the
candidates' Gram matrix for ``krause``) and the steps are timed together, as wall-clock and CPU
seconds (all threads); the 1-minute load average is printed with each row: the reference
machine has 2 cores shared with other jobs, so wall times vary with the load. The default
minimum distance (¼ of the lengthscale) applies.

Part 2, ``loop`` (docs/placement.md "thesis protocol", adapted to 2-D): a non-stationary field
f(x) = h(g(x₁), g(x₂)) with g(u) = 0.3u + 0.7/(1 + e^{−21(u − 0.7)}) (the warping of the thesis
toy, §4.4.0.4) and h ~ GP(0, SE, ℓ = 0.15): short lengthscales along the bands x_d ≈ 0.7, long
ones elsewhere; 40 × 40 inputs on [0, 1]², noise sd 0.05. Hyperparameters are learnt once on a
pretraining draw (all 1,600 points) and then fixed. For three new draws of the same process:
test set = a random half, action pool = the other half, initial data = 30 random pool points;
60 sites are added one at a time by each strategy (and at random), nothing is refitted, and the
test RMSE and NLPD are recorded after each addition (rank-one updates with the true values).
With fixed hyperparameters the picks do not depend on the values, so one batch of 60 equals 60
sequential re-selections (tests/test_placement.py checks that identity).

Run: ``.venv/bin/python benchmarks/bench_placement.py [timing|loop|all] [--targets 100]
[--quick]`` (``--quick``: 20 sites in the timing part, 30 steps in the loop).
Writes ``benchmarks/out/placement_loop.{csv,png}`` (not committed). It is a script, not a test.
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path

import numpy as np

import geogp  # noqa: F401  (float64)
from geogp.core import metrics
from geogp.features.fourier_statistics import dense_stats
from geogp.models.afs import AFSRegressor
from geogp.models.collapsed import posterior
from geogp.placement import Candidates, FeaturePosterior, suggest_sites

OUT = Path(__file__).resolve().parent / "out"


# =========================================================================== part 1: timing
def _raster(n=316, seed=0):
    rng = np.random.default_rng(seed)
    ax = np.linspace(0.0, 1.0, n)
    X1, X2 = np.meshgrid(ax, ax, indexing="ij")
    z = (np.sin(9 * X1) * np.cos(7 * X2) + 0.5 * np.sin(23 * (X1 + X2))
         + 0.05 * rng.normal(size=X1.shape))
    for _ in range(25):  # rectangular gaps, about 20 % of the cells
        i, j = rng.integers(0, n - 40, 2)
        z[i:i + int(rng.integers(10, 40)), j:j + int(rng.integers(10, 40))] = np.nan
    return ax, z


def timing(n_targets: int, n_sites: int = 100) -> None:
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ax, z = _raster()
    t0 = time.perf_counter()
    model = AFSRegressor(n_features=2000, lengthscale=0.05, noise=0.01, optimize=False,
                         margin=0.02).fit_grid([ax, ax], z)
    print(f"model: M = {model.features_.n_features}, {np.isfinite(z).sum()} observed of "
          f"{z.size} cells; statistics + posterior {time.perf_counter() - t0:.1f} s (not counted)")
    grid = Candidates.grid([ax, ax])
    rng = np.random.default_rng(1)
    points = Candidates.points(rng.uniform(0.0, 1.0, (100_000, 2)))
    runs = [
        ("grid", grid, "variance", {}),
        ("grid", grid, "mi", {"max_targets": n_targets}),
        ("grid", grid, "krause", {}),
        ("points", points, "variance", {}),
        ("points", points, "mi", {"max_targets": n_targets, "targets": grid}),
    ]
    suggest_sites(model, Candidates.grid([ax[:20], ax[:20]]), 2, strategy="mi")  # numba warm-up
    print(f"\n{'candidates':>10} {'|V_c|':>7} {'strategy':>9} {'|T|':>7} {'sites':>5} "
          f"{'evals':>6} {'wall s':>7} {'CPU s':>7} {'load':>5}")
    for kind, cands, strategy, kw in runs:
        t0, c0 = time.perf_counter(), time.process_time()
        df = suggest_sites(model, cands, n_sites, strategy=strategy, **kw)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        ev = df.attrs["exact_evaluations"]
        evals = f"{np.mean(ev):.0f}" if ev else "-"
        print(f"{kind:>10} {len(cands):>7} {strategy:>9} {df.attrs['n_targets']:>7} "
              f"{len(df):>5} {evals:>6} {dt:>7.1f} {dc:>7.1f} {os.getloadavg()[0]:>5.1f}",
              flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


# =========================================================================== part 2: loop
def _warp(u):
    return 0.3 * u + 0.7 / (1.0 + np.exp(-21.0 * (u - 0.7)))


def _draw(X, rng, ell=0.15, noise_sd=0.05):
    W = _warp(X)
    d2 = np.sum((W[:, None, :] - W[None, :, :]) ** 2, axis=-1)
    K = np.exp(-0.5 * d2 / ell**2)
    e, Q = np.linalg.eigh(K)
    f = Q @ (np.sqrt(np.clip(e, 0.0, None)) * rng.normal(size=len(X)))
    return f + noise_sd * rng.normal(size=len(X))


def _on_data(pre: AFSRegressor, X, y) -> AFSRegressor:
    """The pretrained model (features, scaling, θ fixed) with the data replaced by (X, y)."""
    m = copy.copy(pre)
    ff, sc = pre.features_, pre.scaler_
    m.stats_ = dense_stats(ff, sc.x(X), sc.y(y))
    m.posterior_ = posterior(ff.log_lambda(pre.kernel_), pre.noise_,
                             pre.kernel_.variance_at_zero, m.stats_)
    return m


def _trace(m: AFSRegressor, picks, X_pool, y_pool, X_test, y_test):
    """Test RMSE and NLPD before and after each added site (rank-one updates, no refit)."""
    sc, sl = m.scaler_, np.asarray(m.posterior_.sqrt_lam)
    fp = FeaturePosterior.from_model(m)
    P_test = np.asarray(m.features_(sc.x(X_test))) * sl
    P_pool = np.asarray(m.features_(sc.x(X_pool))) * sl
    var = fp.var_latent(P_test)
    rmse, nlpd = [], []

    def record():
        mean = sc.y_mean + sc.y_scale * fp.mean(P_test)
        std = sc.y_scale * np.sqrt(np.maximum(var, 0.0) + fp.noise)
        rmse.append(metrics.rmse(y_test, mean))
        nlpd.append(metrics.nlpd(y_test, mean, std))

    record()
    for a in picks:
        w, d = fp.add(P_pool[a], sc.y(y_pool[a]))
        var -= (P_test @ w) ** 2 / d  # C_T,ii ← C_T,ii − g_i²/d
        record()
    return np.array(rmse), np.array(nlpd)


def loop(n_steps: int = 60, n_sets: int = 3, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    ax = np.linspace(0.0, 1.0, 40)
    X = np.stack(np.meshgrid(ax, ax, indexing="ij"), axis=-1).reshape(-1, 2)
    t0 = time.perf_counter()
    pre = AFSRegressor(kernel="se", n_features=400, margin=0.05, maxiter=150).fit(X, _draw(X, rng))
    ell = [np.round(v, 3).tolist() for v in pre.lengthscale_]
    print(f"pretraining on {len(X)} points: ℓ = {ell}, noise sd = "
          f"{np.sqrt(pre.noise_variance_):.3f}, M = {pre.features_.n_features} "
          f"({time.perf_counter() - t0:.0f} s)")
    strategies = ["random", "variance", "mi", "krause"]
    curves = {s: {"rmse": [], "nlpd": []} for s in strategies}
    seconds = {s: 0.0 for s in strategies}
    for k in range(n_sets):
        y = _draw(X, rng)
        perm = rng.permutation(len(X))
        test, pool = perm[: len(X) // 2], perm[len(X) // 2:]
        init = rng.choice(len(pool), 30, replace=False)
        m = _on_data(pre, X[pool[init]], y[pool[init]])
        excluded = np.isin(np.arange(len(pool)), init)
        for s in strategies:
            t0 = time.perf_counter()
            if s == "random":
                picks = rng.permutation(np.flatnonzero(~excluded))[:n_steps]
            else:
                picks = suggest_sites(m, X[pool], n_steps, strategy=s,
                                      exclude=excluded)["index"].to_numpy()
            seconds[s] += time.perf_counter() - t0
            r, n = _trace(m, picks, X[pool], y[pool], X[test], y[test])
            curves[s]["rmse"].append(r)
            curves[s]["nlpd"].append(n)
        print(f"dataset {k + 1}/{n_sets} done", flush=True)
    _report(curves, seconds, n_steps, n_sets)


def _mean_se(a):
    a = np.asarray(a)
    se = a.std(0, ddof=1) / np.sqrt(len(a)) if len(a) > 1 else np.zeros(a.shape[1])
    return a.mean(0), se


def _report(curves, seconds, n_steps, n_sets) -> None:
    import pandas as pd

    steps = [s for s in (0, 5, 10, 20, 30, 40, 50, 60) if s <= n_steps]
    print(f"\ntest RMSE / NLPD after k added sites, mean ± 2 s.e. over {n_sets} datasets")
    print(f"{'':>15}" + "".join(f"{'k=' + str(s):>16}" for s in steps))
    rows = []
    for metric in ("rmse", "nlpd"):
        for name, c in curves.items():
            mean, se = _mean_se(c[metric])
            print(f"{name + ' ' + metric:>15}"
                  + "".join(f"{mean[s]:>9.4f}±{2 * se[s]:<6.4f}" for s in steps))
            rows += [{"strategy": name, "metric": metric, "k": k, "mean": mean[k], "se": se[k]}
                     for k in range(n_steps + 1)]
    print(f"seconds spent choosing the sites ({n_sets} datasets): "
          + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    OUT.mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(OUT / "placement_loop.csv", index=False)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric in zip(axes, ("rmse", "nlpd"), strict=True):
        for name, c in curves.items():
            mean, se = _mean_se(c[metric])
            k = np.arange(len(mean))
            ax.plot(k, mean, label=name)
            ax.fill_between(k, mean - 2 * se, mean + 2 * se, alpha=0.2)
        ax.set_xlabel("sites added")
        ax.set_ylabel(f"test {metric.upper()}")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("active learning on a non-stationary 2-D field (AFS, θ fixed, no refit)")
    fig.tight_layout()
    fig.savefig(OUT / "placement_loop.png", dpi=110)
    print(f"wrote {OUT / 'placement_loop.csv'}, {OUT / 'placement_loop.png'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", nargs="?", default="all", choices=("timing", "loop", "all"))
    p.add_argument("--targets", type=int, default=100, help="max |T| for mi in the timing part")
    p.add_argument("--sites", type=int, default=None, help="timing part (default 100)")
    p.add_argument("--quick", action="store_true",
                   help="20 sites in the timing part, 30 steps in the loop")
    args = p.parse_args()
    if args.part in ("timing", "all"):
        timing(args.targets, args.sites or (20 if args.quick else 100))
    if args.part in ("loop", "all"):
        loop(n_steps=30 if args.quick else 60)


if __name__ == "__main__":
    main()
