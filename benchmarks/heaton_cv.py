"""Cross-validation on the MODIS land-surface-temperature grid (Heaton et al. 2019).

Reads ``../shared/data/heaton_satellite_train.nc`` (300×500, ~105k observed cells; skipped if
absent), holds out observed cells, fits on the rest through the public API (``geogp.fit`` on a
DataArray with the held-out cells set to NaN), predicts the full grid and scores the held-out
cells (docs/crossvalidation.md, scores): RMSE, MAE, CRPS, 95% interval score, 95% coverage, NLPD,
with the wall time of fit + full-grid prediction and the peak resident memory.

Folds:
- ``random``: a uniformly random 10% of the observed cells (seeded);
- ``block``: 10 of the 50 (6 × ... ) spatial blocks of a 5×10 partition of the grid, chosen at
  random (seeded): the held-out cells form large gaps, as clouds do.

Baseline on the same folds: 50-nearest-neighbour simple kriging (local exact GP on the 50
nearest training cells, Matérn-3/2 hyperparameters fitted by geogp's exact GP on a random
subsample of 2,000 training cells), in the same cos(latitude)-scaled coordinates.

Usage::

    .venv/bin/python benchmarks/heaton_cv.py                 # default configurations
    .venv/bin/python benchmarks/heaton_cv.py --quick         # two configurations, random fold
    .venv/bin/python benchmarks/heaton_cv.py --write out/    # also GeoTIFF + PNG of the best
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "heaton_satellite_train.nc"


def load():
    import geogp

    if not DATA.exists():
        print(f"SKIP: {DATA} not found (the satellite grid is not shipped with geogp).")
        sys.exit(0)
    return geogp.open_raster(DATA)


def folds(da, kind: str, seed: int = 0):
    obs = np.argwhere(np.isfinite(da.values))
    rng = np.random.default_rng(seed)
    if kind == "random":
        pick = obs[rng.permutation(len(obs))[: len(obs) // 10]]
    else:
        ny, nx = da.shape
        by = np.minimum(obs[:, 0] * 5 // ny, 4)
        bx = np.minimum(obs[:, 1] * 10 // nx, 9)
        chosen = rng.permutation(50)[:10]
        pick = obs[np.isin(by * 10 + bx, chosen)]
    mask = np.zeros(da.shape, dtype=bool)
    mask[pick[:, 0], pick[:, 1]] = True
    return mask


def score(truth, mean, std):
    import geogp

    out = geogp.metrics.evaluate(truth, mean, std)
    return {k: float(v) for k, v in out.items()}


def run_geogp(da, held, config):
    import geogp

    train = da.where(~held)
    t0 = time.perf_counter()
    model = geogp.fit(train, **config)
    t1 = time.perf_counter()
    pred = model.predict(like=da)
    t2 = time.perf_counter()
    res = score(da.values[held], pred["mean"].values[held], pred["std"].values[held])
    res.update(fit_s=t1 - t0, predict_s=t2 - t1)
    return res, model, pred


def _planar(da):
    """(y, x) of every cell with longitude scaled by cos(mean latitude) (as the adapters do)."""
    lat = da["y"].values
    lon = da["x"].values * np.cos(np.deg2rad(lat.mean()))
    Y, X = np.meshgrid(lat, lon, indexing="ij")
    return np.stack([Y.ravel(), X.ravel()], axis=1)


def run_knn_kriging(da, held, k=50, n_sub=2000, seed=0):
    """50-NN simple kriging with a constant mean and Matérn-3/2 from an exact GP on a subsample."""
    t0 = time.perf_counter()
    mean, std = knn_kriging_cells(da, held, k, n_sub, seed)
    res = score(da.values.ravel()[held.ravel()], mean[held], std[held])
    res.update(fit_s=time.perf_counter() - t0, predict_s=0.0)
    return res


def knn_kriging_cells(da, held, k=50, n_sub=2000, seed=0):
    """(mean, std) grids of :func:`run_knn_kriging`, filled at the held-out cells only."""
    from scipy.spatial import cKDTree

    from geogp.models.exact.regressor import ExactGP

    P = _planar(da)
    v = da.values.ravel()
    train = np.isfinite(v) & ~held.ravel()
    Xtr, ytr = P[train], v[train]
    rng = np.random.default_rng(seed)
    sub = rng.choice(Xtr.shape[0], n_sub, replace=False)
    gp = ExactGP("matern32").fit(Xtr[sub], ytr[sub])
    kern, noise, sc = gp.kernel_, gp.noise_, gp.scaler_
    Xs_tr = sc.x(Xtr)
    ys_tr = sc.y(ytr)
    test = held.ravel()
    Xs_te = sc.x(P[test])
    _, idx = cKDTree(Xs_tr).query(Xs_te, k=k)
    means = np.empty(Xs_te.shape[0])
    var = np.empty(Xs_te.shape[0])
    for start in range(0, Xs_te.shape[0], 2000):
        sl = slice(start, start + 2000)
        nb = Xs_tr[idx[sl]]  # (B, k, D)
        K = np.array(kern.evaluate(nb[:, :, None, :] - nb[:, None, :, :]))
        K += noise * np.eye(k)
        ks = np.asarray(kern.evaluate(nb - Xs_te[sl][:, None, :]))  # (B, k)
        sol = np.linalg.solve(K, np.stack([ys_tr[idx[sl]], ks], axis=2))
        means[sl] = np.einsum("bk,bk->b", ks, sol[:, :, 0])
        var[sl] = float(kern.variance_at_zero) - np.einsum("bk,bk->b", ks, sol[:, :, 1])
    mean = np.full(da.shape, np.nan)
    std = np.full(da.shape, np.nan)
    mean[held] = sc.y_mean + sc.y_scale * means
    std[held] = sc.y_scale * np.sqrt(np.maximum(var, 0) + noise)
    return mean, std


CONFIGS = {
    "afs m32 M=1000": dict(kernel="matern32", n_features=1000, mean=None),
    "afs m32 M=2000": dict(kernel="matern32", n_features=2000, mean=None),
    "afs m12 M=1000": dict(kernel="matern12", n_features=1000, mean=None),
    "afs m12 M=2000": dict(kernel="matern12", n_features=2000, mean=None),
    "afs m12 M=2000 linear": dict(kernel="matern12", n_features=2000, mean="linear"),
    "afs m12 M=2000 margin 0.1": dict(kernel="matern12", n_features=2000, mean=None, margin=0.1),
    "afs m32 M=2000 linear": dict(kernel="matern32", n_features=2000, mean="linear"),
    "afs m12+m32 M=2000 linear": dict(kernel="matern12+matern32", n_features=2000, mean="linear"),
    "afs m52 M=2000 linear": dict(kernel="matern52", n_features=2000, mean="linear"),
    # matrix-free solver (solver="auto" switches above 4,096 features), issue #9
    "afs m12 M=10000 linear": dict(kernel="matern12", n_features=10000, mean="linear"),
    "afs m12 M=30000 linear": dict(kernel="matern12", n_features=30000, mean="linear"),
    "afs m32 M=10000 linear": dict(kernel="matern32", n_features=10000, mean="linear"),
}
QUICK = ["afs m32 M=1000", "afs m32 M=2000 linear"]


def machine() -> str:
    from _machine import cpu_model

    cpu = cpu_model(platform.processor() or platform.machine())
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two configurations, random fold only")
    ap.add_argument("--configs", nargs="*", help="subset of configuration names")
    ap.add_argument("--folds", nargs="*", default=["random", "block"])
    ap.add_argument("--no-knn", action="store_true", help="skip the 50-NN kriging baseline")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--write", help="directory for GeoTIFF + PNG of the last configuration")
    args = ap.parse_args(argv)
    da = load()
    names = args.configs or (QUICK if args.quick else list(CONFIGS))
    fold_kinds = ["random"] if args.quick else args.folds
    print(f"# Heaton satellite CV — {time.strftime('%Y-%m-%d %H:%M')} — {machine()}")
    print(f"grid {da.shape}, observed {int(np.isfinite(da.values).sum())} cells")
    rows = []
    header = (f"{'fold':7} {'method':28} {'RMSE':>6} {'MAE':>6} {'CRPS':>6} {'IS95':>7} "
              f"{'cov95':>6} {'NLPD':>6} {'fit s':>7} {'pred s':>7}")
    print(header)
    for fk in fold_kinds:
        held = folds(da, fk)
        runs = [(n, lambda n=n, held=held: run_geogp(da, held, CONFIGS[n])[0]) for n in names]
        if not args.no_knn:
            runs.append(("50-NN kriging (m32)", lambda held=held: run_knn_kriging(da, held)))
        for name, fn in runs:
            r = fn()
            rows.append({"fold": fk, "method": name, **r})
            print(f"{fk:7} {name:28} {r['rmse']:6.3f} {r['mae']:6.3f} {r['crps']:6.3f} "
                  f"{r['is95']:7.3f} {r['coverage95']:6.3f} {r['nlpd']:6.3f} "
                  f"{r['fit_s']:7.1f} {r['predict_s']:7.2f}", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "rows": rows,
                                               "peak_mib": peak}, indent=1))
    if args.write:
        import geogp
        from geogp.frontend.plotting import save_maps

        out = Path(args.write)
        out.mkdir(parents=True, exist_ok=True)
        held = folds(da, "random")
        _, _model, pred = run_geogp(da, held, CONFIGS[names[-1]])
        geogp.write_geotiff(pred, out / "heaton_prediction.tif", overwrite=True)
        save_maps(out / "heaton_map.png", da.where(~held), pred, heldout=da.where(held),
                  overwrite=True)
        print(f"wrote {out / 'heaton_prediction.tif'} and {out / 'heaton_map.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
