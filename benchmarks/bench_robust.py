"""Robust fits under cloud-mask leaks: the satellite raster's gap folds, clean and contaminated.

Each gap fold of ``../shared/data/heaton_satellite_train.nc`` (``geogp.crossval.gap_folds``,
seed 0; skipped when the file is absent) hides a set of the raster's own cloud shapes. The
training raster is then contaminated as a leaky cloud mask would: every observed cell within
``--within`` cells (chessboard) of a missing cell — the real clouds and the held-out ones —
is made U(``--low``, ``--high``) °C colder with probability ``--rate``. The hidden cells are
scored against their true values (RMSE, CRPS and 95 % coverage of a new observation), for:

- ``plain``: ``geogp.fit(da)``, the default lattice model (``--model afs``: AFS);
- ``robust``: ``geogp.fit(da, robust=True)`` (docs/gvi.md);
- ``drop``: the default on the training raster with the contaminated cells removed (an
  oracle that knows which cells are bad: the best any robust fit could hope for);

on the contaminated raster, and ``plain`` / ``robust`` on the clean one (nothing may get
worse there). With the robust fit it prints how many contaminated cells were flagged.

Usage::

    .venv/bin/python benchmarks/bench_robust.py --folds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from _pooled import Pooled  # benchmarks/ is on sys.path when run
from scipy import ndimage

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "heaton_satellite_train.nc"


def contaminate(train: np.ndarray, rng, within: int, rate: float, low: float, high: float):
    """(contaminated copy, mask of the cells made colder)."""
    obs = np.isfinite(train)
    near = ndimage.binary_dilation(~obs, np.ones((2 * within + 1,) * 2, bool)) & obs
    hit = near & (rng.random(train.shape) < rate)
    dirty = train.copy()
    dirty[hit] -= rng.uniform(low, high, int(hit.sum()))
    return dirty, hit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--within", type=int, default=2)
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--low", type=float, default=2.0)
    ap.add_argument("--high", type=float, default=10.0)
    ap.add_argument("--cases", nargs="+", default=["dirty plain", "dirty robust", "dirty drop",
                                                    "clean plain", "clean robust"])
    ap.add_argument("--model", default="auto",
                    help="geogp.fit's model for every case (auto: the lattice model here)")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"SKIP: {DATA} not found (the satellite grid is not shipped with geogp).")
        return
    import geogp
    from geogp.core.folds import gap_folds

    da = geogp.open_raster(DATA)
    truth = da.values
    folds = gap_folds(np.isfinite(truth), 5, seed=0)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f}; cold bias "
          f"U({args.low}, {args.high}) with probability {args.rate} within {args.within} "
          f"cells of a gap; model={args.model!r}")
    pooled = Pooled()
    for k in args.folds:
        held = folds[k]
        train = np.where(held, np.nan, truth)
        dirty, hit = contaminate(train, np.random.default_rng(k), args.within, args.rate,
                                 args.low, args.high)
        n_obs = int(np.isfinite(train).sum())
        print(f"fold {k}: {int(held.sum())} hidden cells, {int(hit.sum())} of {n_obs} "
              f"observed cells contaminated ({hit.sum() / n_obs:.1%})", flush=True)
        for case in args.cases:
            data, method = case.split()
            values = train if data == "clean" else dirty
            if method == "drop":
                values = np.where(hit, np.nan, dirty)
            t0 = time.perf_counter()
            model = geogp.fit(da.copy(data=values), model=args.model,
                              robust=method == "robust")
            pred = model.predict(like=da)
            wall = time.perf_counter() - t0
            mean, std = pred["mean"].values[held], pred["std"].values[held]
            s = geogp.metrics.evaluate(truth[held], mean, std)
            extra = ""
            if method == "robust":
                w = model.observation_weight().values  # NaN where nothing was observed
                flagged = np.isfinite(w) & (w < 0.5)
                extra = (f"  flagged {int(flagged.sum())}: {int((flagged & hit).sum())} "
                         f"contaminated, {int((flagged & ~hit).sum())} not")
            print(f"  {case:13s} RMSE {s['rmse']:.3f}  CRPS {s['crps']:.3f}  cov95 "
                  f"{s['coverage95']:.3f}  {wall:5.1f} s{extra}", flush=True)
            pooled.add(case, s, int(held.sum()), wall)
    pooled.print(len(args.folds), 13)


if __name__ == "__main__":
    main()
