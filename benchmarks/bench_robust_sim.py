"""Robust fits on simulated fields with a known truth (#44 item 4): three kinds of
contamination, against an oracle.

Each field is a draw of the lattice's α = 2 Matérn field (range 8 cells, sd 1) on 128 × 128
cells, plus noise of sd 0.1, under cloud-shaped gaps (smoothed noise above a threshold,
about 30 % of the cells). The observed cells are then contaminated:

- ``edge``: cells within 2 cells of a gap, with probability ``--rate``, made U(2, 6) colder
  (in units of the field's sd: a leaky cloud mask);
- ``spikes``: 1 % of the observed cells anywhere, off by ±U(3, 6) (salt-and-pepper);
- ``stripe``: a failed scan line, 3 rows across the raster, off by +2.

The gap cells are scored against the true field (RMSE, CRPS and 95 % coverage of the latent
field) for the default lattice model (``plain``), ``robust=True``, and the ``oracle``: kriging
at the true θ on the observed cells with the contaminated ones removed (the model's own
covariance, which the robust fit can only approach). Pooled over ``--seeds``.

``--points N`` scores robust AFS on scattered data instead: N stations at random cells of
the same field (no clouds), 5 % of them off by ±U(3, 6) sd (gross errors: a broken sensor,
a unit slip), and 3,000 other cells as targets; ``afs``, ``afs robust``, ``afs clean`` (the
plain fit without the bad stations: what the robust fit aims at) and the oracle (kriging at
the true θ on the clean stations, with the truth's covariance).

Usage::

    .venv/bin/python benchmarks/bench_robust_sim.py --seeds 0 1 2
    .venv/bin/python benchmarks/bench_robust_sim.py --points 2000 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np
import xarray as xr
from _pooled import Pooled  # benchmarks/ is on sys.path when run
from scipy import ndimage

from bench_spacetime import field_draws

SHAPE = (128, 128)
RANGE, SD, NOISE = 8.0, 1.0, 0.1


def clouds(rng) -> np.ndarray:
    """True where a cloud hides the cell: smoothed noise's top 30 %."""
    z = ndimage.gaussian_filter(rng.standard_normal(SHAPE), 6.0, mode="wrap")
    return z > np.quantile(z, 0.7)


def contaminate(values: np.ndarray, kind: str, rng, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """(contaminated copy, mask of the cells changed)."""
    obs = np.isfinite(values)
    out = values.copy()
    if kind == "edge":
        near = ndimage.binary_dilation(~obs, np.ones((5, 5), bool)) & obs
        hit = near & (rng.random(SHAPE) < rate)
        out[hit] -= rng.uniform(2.0, 6.0, int(hit.sum())) * SD
    elif kind == "spikes":
        hit = obs & (rng.random(SHAPE) < 0.01)
        out[hit] += rng.choice([-1.0, 1.0], int(hit.sum())) * rng.uniform(3.0, 6.0,
                                                                          int(hit.sum())) * SD
    elif kind == "stripe":
        hit = np.zeros(SHAPE, dtype=bool)
        row = int(rng.integers(10, SHAPE[0] - 13))
        hit[row:row + 3] = True
        hit &= obs
        out[hit] += 2.0 * SD
    else:
        raise SystemExit(f"unknown contamination {kind!r}")
    return out, hit


def oracle(values: np.ndarray, hit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, latent sd) of kriging with the true precision Q = c (κ² + L)² and noise, on the
    observed cells less the contaminated ones (the truth's own model: zero mean): one sparse
    factorisation and a selected inversion for the variances."""
    import scipy.sparse as sp
    from sksparse.cholmod import cholesky

    from geogp.linalg import SparsePattern
    from geogp.linalg.cholmod import selected_inverse
    from geogp.models.lattice.gmrf import laplacian

    n = SHAPE[0] * SHAPE[1]
    k2 = 8.0 / RANGE**2
    op = k2 * sp.eye(n) + laplacian(SHAPE, (1.0, 1.0))
    q = op @ op / (4 * math.pi * k2 * SD**2)
    use = (np.isfinite(values) & ~hit).ravel()
    b = sp.csc_matrix(q + sp.diags(use / NOISE**2))
    rhs = np.where(use, np.nan_to_num(values.ravel()), 0.0) / NOISE**2
    pattern = SparsePattern.from_scipy(b)
    vals = pattern.values_from_scipy(b)
    z = selected_inverse(pattern, vals, ordering="metis")
    diag = z[pattern.positions_of_keys(np.arange(n, dtype=np.int64) * (n + 1))]
    mean = cholesky(b)(rhs)
    return mean.reshape(SHAPE), np.sqrt(diag).reshape(SHAPE)


def _precision():
    import scipy.sparse as sp

    from geogp.models.lattice.gmrf import laplacian

    n = SHAPE[0] * SHAPE[1]
    k2 = 8.0 / RANGE**2
    op = k2 * sp.eye(n) + laplacian(SHAPE, (1.0, 1.0))
    return sp.csc_matrix(op @ op / (4 * math.pi * k2 * SD**2))


def points_oracle(cells: np.ndarray, y: np.ndarray, targets: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(mean, latent sd) at the flat cells ``targets`` of simple kriging with the truth's
    covariance Q⁻¹ from the clean stations (flat ``cells``, values ``y``): dense in the
    stations, Q⁻¹'s columns by sparse solves."""
    from sksparse.cholmod import cholesky

    factor = cholesky(_precision())
    n = SHAPE[0] * SHAPE[1]
    e = np.zeros((n, cells.size))
    e[cells, np.arange(cells.size)] = 1.0
    cols = factor(e)  # Q⁻¹ E: (n, stations)
    k_ss = cols[cells] + NOISE**2 * np.eye(cells.size)
    k_ts = cols[targets]
    alpha = np.linalg.solve(k_ss, y)
    e_t = np.zeros((n, targets.size))
    e_t[targets, np.arange(targets.size)] = 1.0
    prior = np.einsum("ij,ij->j", e_t, factor(e_t))
    var = prior - np.einsum("ij,ji->i", k_ts, np.linalg.solve(k_ss, k_ts.T))
    return k_ts @ alpha, np.sqrt(np.maximum(var, 0.0))


def run_points(args) -> None:
    """Robust AFS on scattered stations with gross errors (module docstring)."""
    import pandas as pd

    import geogp

    pooled = Pooled()
    for seed in args.seeds:
        rng = np.random.default_rng(seed)
        f = field_draws(SHAPE, RANGE, SD, rng, 1)[0].ravel()
        order = rng.permutation(f.size)
        cells, targets = order[:args.points], order[args.points:args.points + 3000]
        y = f[cells] + NOISE * rng.standard_normal(cells.size)
        hit = rng.random(cells.size) < 0.05
        y[hit] += rng.choice([-1.0, 1.0], int(hit.sum())) * rng.uniform(3.0, 6.0,
                                                                         int(hit.sum())) * SD
        rows, cols = np.divmod(cells, SHAPE[1])
        table = pd.DataFrame({"x": 1000.0 * cols, "y": 1000.0 * rows, "value": y})
        trow, tcol = np.divmod(targets, SHAPE[1])
        print(f"points, seed {seed}: {int(hit.sum())} of {cells.size} stations with gross "
              "errors", flush=True)
        for name in ("afs", "afs robust", "afs clean", "oracle"):
            t0 = time.perf_counter()
            if name == "oracle":
                mean, std = points_oracle(cells[~hit], y[~hit], targets)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = geogp.fit(table[~hit] if name.endswith("clean") else table,
                                      model="afs", robust=name.endswith("robust"), crs=32633)
                    pred = model.predict(x=1000.0 * tcol, y=1000.0 * trow, points=True)
                mean, std = pred["mean"].values, pred["std_latent"].values
            wall = time.perf_counter() - t0
            s = geogp.metrics.evaluate(f[targets], mean, std)
            extra = ""
            if name.endswith("robust"):
                w = model.estimators_[0].obs_weight_
                flagged = w < 0.5
                extra = f"  flagged {int(flagged.sum())}: {int((flagged & hit).sum())} gross"
            print(f"  {name:10s} RMSE {s['rmse']:.4f}  CRPS {s['crps']:.4f}  cov95 "
                  f"{s['coverage95']:.3f}  {wall:5.1f} s{extra}", flush=True)
            pooled.add(name, s, targets.size, wall)
    pooled.print(len(args.seeds), 10, "seeds")


def as_da(values: np.ndarray) -> xr.DataArray:
    ny, nx = values.shape
    return xr.DataArray(values, dims=("y", "x"), coords={
        "y": 1000.0 * np.arange(ny)[::-1], "x": 1000.0 * np.arange(nx)}).rio.write_crs(32633)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--kinds", nargs="+", default=["edge", "spikes", "stripe"])
    ap.add_argument("--rate", type=float, default=0.3, help="edge: probability per edge cell")
    ap.add_argument("--points", type=int, default=0,
                    help="robust AFS on this many scattered stations instead (docstring)")
    args = ap.parse_args()
    if args.points:
        return run_points(args)
    import geogp

    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f}; {SHAPE[0]}×"
          f"{SHAPE[1]} cells, range {RANGE} cells, sd {SD}, noise {NOISE}")
    for kind in args.kinds:
        pooled = Pooled()
        for seed in args.seeds:
            rng = np.random.default_rng(seed)
            f = field_draws(SHAPE, RANGE, SD, rng, 1)[0]
            gaps = clouds(rng)
            clean = np.where(gaps, np.nan, f + NOISE * rng.standard_normal(SHAPE))
            dirty, hit = contaminate(clean, kind, rng, args.rate)
            n_obs = int(np.isfinite(clean).sum())
            print(f"{kind}, seed {seed}: {int(hit.sum())} of {n_obs} observed cells "
                  f"contaminated ({hit.sum() / n_obs:.1%})", flush=True)
            for name in ("plain", "robust", "oracle"):
                t0 = time.perf_counter()
                model = None
                if name == "oracle":
                    mean, std = oracle(dirty, hit)
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = geogp.fit(as_da(dirty), robust=name == "robust")
                        pred = model.predict()
                    mean, std = pred["mean"].values, pred["std_latent"].values
                wall = time.perf_counter() - t0
                s = geogp.metrics.evaluate(f[gaps], mean[gaps], std[gaps])
                extra = ""
                if model is not None and name == "robust":
                    g = model.estimators_[0].gross_errors()
                    w = model.estimators_[0].obs_weight_
                    flagged = np.isfinite(w) & (w < 0.5)
                    extra = (f"  flagged {int(flagged.sum())}: {int((flagged & hit).sum())} "
                             f"contaminated; temperature {g['temperature']:.3f}")
                print(f"  {name:7s} RMSE {s['rmse']:.4f}  CRPS {s['crps']:.4f}  cov95 "
                      f"{s['coverage95']:.3f}  {wall:5.1f} s{extra}", flush=True)
                pooled.add(name, s, int(gaps.sum()), wall)
        print(f"{kind}, ", end="")
        pooled.print(len(args.seeds), 7, "seeds")


if __name__ == "__main__":
    main()
