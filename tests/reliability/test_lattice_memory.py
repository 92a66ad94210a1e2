"""The lattice model's memory estimate bounds the peak it measures (issue #28).

A fit with its posterior on tiles runs in a fresh interpreter, so that its peak resident
memory is its own: VmHWM of /proc/self/status, the high-water mark of the new process's
memory (ru_maxrss would not do: Linux carries the parent's maximum across fork and exec, and
a pytest worker's parent had passed 5 GB). The estimate, made before anything is allocated,
must be above it and not absurdly loose.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_SCRIPT = r"""
import json
import numpy as np
from scipy.ndimage import gaussian_filter
from geogp.models.lattice import LatticeRegressor

rng = np.random.default_rng(0)
shape = (200, 250)
z = 10 * gaussian_filter(rng.standard_normal(shape), 3) + 0.1 * rng.standard_normal(shape)
z[rng.random(shape) < 0.3] = np.nan
z[80:130, 100:170] = np.nan
est = LatticeRegressor(large_scale="auto", mid_scale="auto", maxiter=3, posterior_tile=96)
estimate = est.memory_estimate(shape)
est.fit_grid((np.arange(shape[0]) * 1.0, np.arange(shape[1]) * 1.0), z)
status = open("/proc/self/status").read()
peak = 1024.0 * int(status.split("VmHWM:")[1].split()[0])
print(json.dumps({"estimate": estimate, "peak": peak, "tiles": est.posterior_tiles_}))
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_estimate_bounds_the_measured_peak_of_a_tiled_fit():
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         check=True, env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin"})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["tiles"] > 1
    assert got["peak"] <= got["estimate"], got
    assert got["peak"] >= 0.4 * got["estimate"], got
