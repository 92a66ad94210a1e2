"""The space-time model's memory estimate (#43): made before the model allocates, it bounds
the peak a fit measures in a fresh interpreter (VmHWM, as in test_lattice_memory.py) and is
not absurdly loose; a stack over the limit is refused in one line before any work."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from geogp.exceptions import MemoryEstimateError
from geogp.models.spacetime import SpaceTimeRegressor

_SCRIPT = r"""
import json
import numpy as np
from geogp.models.spacetime import SpaceTimeRegressor

rng = np.random.default_rng(0)
t, ny, nx = 48, 24, 24
yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
base = np.sin(xx / 7.0) + np.cos(yy / 5.0)
v = np.stack([base + 0.3 * rng.standard_normal((ny, nx)) for _ in range(t)])
v[rng.random(v.shape) < 0.35] = np.nan
est = SpaceTimeRegressor(maxiter=3)
estimate = est.memory_estimate(v.shape)
est.fit(v, np.arange(t) * 8.0)
status = open("/proc/self/status").read()
peak = 1024.0 * int(status.split("VmHWM:")[1].split()[0])
print(json.dumps({"estimate": estimate, "peak": peak, "tile": est.tile_}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_estimate_bounds_the_measured_peak_of_a_stack_fit():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         check=True, env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin"})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["tile"] < 24  # several windows, each over every date
    assert got["peak"] <= got["estimate"], got
    assert got["peak"] >= 0.5 * got["estimate"], got


def test_a_stack_over_the_limit_is_refused_before_the_fit():
    est = SpaceTimeRegressor(max_bytes=2**30)
    shape = (46, 1200, 1200)  # a MODIS tile over a year: one float64 copy is 0.5 GiB
    assert est.memory_estimate(shape) > 8.0 * 46 * 1200 * 1200
    with pytest.raises(MemoryEstimateError, match=r"46 dates × 1200 × 1200 cells .* need"):
        est.fit(np.broadcast_to(np.float32(0.0), shape), np.arange(46) * 8.0)  # no memory
    assert not hasattr(est, "values_")


def test_the_front_end_passes_the_limit_and_refuses_in_one_line():
    import pandas as pd
    import xarray as xr

    import geogp

    v = np.random.default_rng(1).standard_normal((4, 10, 12))
    da = xr.DataArray(v, dims=("time", "y", "x"), coords={
        "time": pd.date_range("2024-01-01", periods=4, freq="8D"),
        "y": 1000.0 - 100 * np.arange(10), "x": 100.0 * np.arange(12)}).rio.write_crs(32633)
    with pytest.raises(MemoryEstimateError, match="space-time model on 4 dates"):
        geogp.fit(da, model="spacetime", max_bytes=1e6)


def test_a_fit_allocates_three_stacks_of_its_own(monkeypatch):
    """What the estimate's STACK_COPIES counts beyond the caller's stack: the standardised
    copy, and the posterior's mean and variance filled in place (the sd of a new observation
    is a 2-D map), measured with tracemalloc (numpy's allocations) and the tiles' solves
    replaced by a stand-in, so that only the stack-sized arrays remain."""
    import math
    import tracemalloc

    from geogp.models.spacetime import regressor

    def stand_in(params, h, times, ordering, prior, block, solver=None, slot=0):
        return np.zeros(block.shape), np.full(block.shape, prior), 1.0

    monkeypatch.setattr(regressor, "tile_task", stand_in)
    rng = np.random.default_rng(0)
    v = rng.standard_normal((46, 160, 160))
    v[rng.random(v.shape) < 0.35] = np.nan
    stack = v.nbytes
    theta = {k: math.log(2.0) for k in regressor.PARAMS}
    # the cells' model's own stacks (the large scales' model holds window-sized structures,
    # which the estimate's window term counts, and stacks a block's area smaller)
    est = SpaceTimeRegressor(optimize=False, params=theta, calibrate=False, large_scales=None)
    est.fit(v[:, :40, :40], np.arange(46) * 8.0)  # the modules it imports, before tracing
    tracemalloc.start()
    try:
        est.fit(v, np.arange(46) * 8.0)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 3.25 * stack, peak / stack
    assert 2.9 * stack <= held <= 3.1 * stack, held / stack
    assert regressor.STACK_COPIES >= 1 + peak / stack
