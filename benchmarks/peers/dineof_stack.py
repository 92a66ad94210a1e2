"""DINEOF (pyDINEOF from PyPI) on a stack, for stack_peers.py: run in its own venv
(``setup_stack_peers.sh`` makes benchmarks/peers/.venv-dineof; pyDINEOF is never a geogp
dependency). Reads ``values`` (T, n_y, n_x; NaN = missing) and ``time`` (datetime64) from an
.npz, writes ``fill`` (the reconstruction) and ``seconds`` to another::

    benchmarks/peers/.venv-dineof/bin/python dineof_stack.py in.npz out.npz --nev 10 --ncv 20
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import numpy as np
import xarray as xr
from pydineof.main import run_2D


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inp")
    ap.add_argument("out")
    ap.add_argument("--nev", type=int, default=10, help="most EOF modes (chosen by its own CV)")
    ap.add_argument("--ncv", type=int, default=20, help="Krylov subspace (> nev + 5, < dates)")
    args = ap.parse_args()
    with np.load(args.inp) as z:
        values, times = z["values"], z["time"]
    ny, nx = values.shape[1:]
    # days since the first date: pyDINEOF turns datetimes into seconds and casts them to
    # uint16, which wraps after 18 hours; numbers it only shifts
    days = (times - times[0]) / np.timedelta64(1, "D")
    da = xr.DataArray(values, dims=("time", "y", "x"),
                      coords={"time": days, "y": np.arange(ny), "x": np.arange(nx)})
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # its progress table
        out = run_2D(da, nev=args.nev, ncv=args.ncv, seed=0)
    secs = time.perf_counter() - t0
    fill = out.transpose("time", "y", "x").values.astype(np.float64)
    np.savez(args.out, fill=fill, seconds=secs)


if __name__ == "__main__":
    main()
