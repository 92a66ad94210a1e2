"""Gap-shaped cross-validation on the MODIS satellite grid: geogp against local kriging.

Every method is scored by ``geogp.cross_validate`` on the same folds of
``../shared/data/heaton_satellite_train.nc`` (300×500, ~105k observed cells; skipped when
absent): the raster's own cloud shapes moved onto observed ground (``gaps``, the test that
looks like the real task), and for reference the optimistic ``random`` folds and square
``blocks``. Scores are those of a new observation's predictive distribution (RMSE, MAE, CRPS,
95 % interval score and coverage), pooled over folds and by distance to the nearest training
cell (≤ 1, 1–3, 3–10, > 10 cells), with the wall time of fit + prediction per fold.

Methods:

- geogp configurations (``CONFIGS``; ``default`` is ``geogp.fit(da)`` as shipped, i.e.
  ``model="auto"``, which is the lattice model on this raster; ``afs`` the AFS front-end
  defaults), fitted on the training cells and predicting the full grid;
- ``pykrige``: PyKrige ordinary kriging with a moving window of the 50 nearest training cells
  and an exponential variogram fitted by PyKrige on 2,000 random training cells (as in
  ``peers/run_peers.py``; needs the peers' venv, ``bash benchmarks/peers/setup_peers.sh``),
  predicting the held-out cells only;
- ``knn``: 50-nearest-neighbour simple kriging with a Matérn-3/2 fitted by geogp's exact GP
  on 2,000 training cells (``heaton_cv.run_knn_kriging``; runs in geogp's own venv).

Usage::

    .venv/bin/python benchmarks/gap_cv.py --methods default knn
    benchmarks/peers/.venv/bin/python benchmarks/gap_cv.py --methods default pykrige \\
        --folds gaps random blocks --json benchmarks/out/gap_cv.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

import heaton_cv  # noqa: E402

CONFIGS = {
    "default": {},  # geogp.fit(da): model="auto", the lattice model on this raster
    "afs": dict(model="afs"),  # the AFS front-end defaults (Matérn-1/2, linear, M auto)
    "varying": dict(varying=True),  # the lattice model's range and sd vary, always
    "m12 M=2000 linear": dict(kernel="matern12", n_features=2000, mean="linear"),
    "m32 M=10000 linear": dict(kernel="matern32", n_features=10000, mean="linear"),
    "m12+m32 M=10000 linear": dict(kernel="matern12+matern32", n_features=10000,
                                   mean="linear"),
    "lattice": dict(model="lattice"),  # = default here (α = 2 + 64 large-scale features)
    "lattice local only": dict(model="lattice", large_scale=None),
    "lattice two ranges": dict(model="lattice", second_range=True),
    "lattice α=1": dict(model="lattice", alpha=1),
}


def _planar_z(da, train_mask):
    """Planar (lat, lon·cos lat) coordinates of every cell, z-scored on the training cells."""
    P = heaton_cv._planar(da)
    tr = train_mask.ravel()
    mu, sd = P[tr].mean(0), P[tr].std(0)
    return (P - mu) / sd


def pykrige_method(k: int = 50, model: str = "exponential", fit_n: int = 2000, seed: int = 3):
    """PyKrige moving-window ordinary kriging as a ``cross_validate`` method (held cells only)."""
    from pykrige.ok import OrdinaryKriging
    from run_peers import _LazyKrigingMatrix

    def pykrige(train, held):
        v = train.values.astype(np.float64)
        tr = np.isfinite(v)
        P = _planar_z(train, tr)
        y = v.ravel()[tr.ravel()]
        y_mean, y_sd = y.mean(), y.std()
        ys = (y - y_mean) / y_sd
        Xtr, Xte = P[tr.ravel()], P[held.ravel()]
        rng = np.random.default_rng(seed)
        sub = rng.choice(Xtr.shape[0], fit_n, replace=False)
        ok = OrdinaryKriging(Xtr[sub, 1], Xtr[sub, 0], ys[sub], variogram_model=model)
        ok.X_ORIG, ok.Y_ORIG = Xtr[:, 1].copy(), Xtr[:, 0].copy()
        ok.X_ADJUSTED, ok.Y_ADJUSTED = ok.X_ORIG.copy(), ok.Y_ORIG.copy()
        ok.XCENTER, ok.YCENTER = 0.0, 0.0
        ok.Z = ys.copy()
        xy = np.stack([ok.X_ADJUSTED, ok.Y_ADJUSTED], axis=1)
        ok._get_kriging_matrix = lambda n: _LazyKrigingMatrix(
            xy, ok.variogram_function, ok.variogram_model_parameters)
        z, ss = ok.execute("points", Xte[:, 1], Xte[:, 0], backend="loop", n_closest_points=k)
        mean = np.full(v.shape, np.nan)
        std = np.full(v.shape, np.nan)
        mean[held] = y_mean + y_sd * np.asarray(z)
        std[held] = y_sd * np.sqrt(np.maximum(np.asarray(ss), 1e-12))
        return mean, std

    return pykrige


def knn_method(da_full):
    """heaton_cv's 50-NN Matérn-3/2 simple kriging as a ``cross_validate`` method."""

    def knn(train, held):  # train = da_full with the held-out cells hidden
        return heaton_cv.knn_kriging_cells(da_full, held)

    return knn


def _row(fold_kind, name, cv):
    s = cv.scores().loc["all"]
    t = cv.by_distance()
    strata = [i for i in t.index if i != "all"]
    return {"folds": fold_kind, "method": name, "n": int(s["n"]), "rmse": s["rmse"],
            "mae": s["mae"], "crps": s["crps"], "is95": s["is95"],
            "coverage95": s["coverage95"], "seconds": s["seconds"],
            "coverage_by_distance": {i: float(t.loc[i, "coverage95"]) for i in strata},
            "coverage_se_by_distance": {i: float(t.loc[i, "coverage95_se"]) for i in strata},
            "rmse_by_distance": {i: float(t.loc[i, "rmse"]) for i in strata},
            "n_by_distance": {i: int(t.loc[i, "n"]) for i in strata}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", nargs="+", default=["default", "pykrige"],
                    help=f"geogp configurations {list(CONFIGS)} and/or pykrige, knn")
    ap.add_argument("--folds", nargs="+", default=["gaps"], choices=("gaps", "random", "blocks"))
    ap.add_argument("--n-folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="append the rows to this JSON file")
    args = ap.parse_args(argv)

    import geogp

    da = heaton_cv.load()
    la = os.getloadavg()
    print(f"# gap_cv — {time.strftime('%Y-%m-%d %H:%M')} — {heaton_cv.machine()} — "
          f"load {la[0]:.1f} {la[1]:.1f} {la[2]:.1f} — git {_commit()}")
    rows = []
    for kind in args.folds:
        for name in args.methods:
            if name == "pykrige":
                method, opts = pykrige_method(), {}
            elif name == "knn":
                method, opts = knn_method(da), {}
            elif name in CONFIGS:
                method, opts = None, dict(CONFIGS[name])
            else:
                raise SystemExit(f"unknown method {name!r}")
            model = opts.pop("model", "auto")
            cv = geogp.cross_validate(da, kind, args.n_folds, seed=args.seed, model=model,
                                      method=method, label=name, **opts)
            print(f"\n## {kind} folds — {name}\n{cv.summary()}", flush=True)
            rows.append(_row(kind, name, cv))
    print("\n| folds | method | RMSE | MAE | CRPS | IS95 | cov95 | cov95 ± se (held-out patches "
          "as clusters) by distance (≤1 / 1–3 / 3–10 / >10) | s per fold |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cov = " / ".join(f"{v:.3f} ± {e:.3f}" for v, e in zip(
            r["coverage_by_distance"].values(), r["coverage_se_by_distance"].values(), strict=True))
        print(f"| {r['folds']} | {r['method']} | {r['rmse']:.3f} | {r['mae']:.3f} | "
              f"{r['crps']:.3f} | {r['is95']:.2f} | {r['coverage95']:.3f} | {cov} | "
              f"{r['seconds']:.0f} |")
    if args.json:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(old + rows, indent=1))
    return 0


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


if __name__ == "__main__":
    sys.exit(main())
