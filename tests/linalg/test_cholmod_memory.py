"""Value and gradient for M = 200,000 without a dense M × M array (docs/sparse_vjp.md, selected
inversion).

One dense 200,000² float64 matrix is 320 GB; the assertion is a 2 GB ceiling on the peak. The
peak RSS is measured in a fresh child process running the same computation, so that it does
not depend on what earlier tests left in the pytest process.
The numbers are checked against closed forms for the shifted five-point Laplacian
(eigenvalues ``λ_pq``): ``log|B| = Σ log λ_pq``, ``tr(B⁻¹) = Σ 1/λ_pq`` (the diagonal part of
the gradient), and Euler's identity ``Σ_e v_e ∂log|B|/∂v_e = tr(B⁻¹B) = M``.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap
import tracemalloc

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _reference.sparse_spd import grid_laplacian, grid_laplacian_eigenvalues

pytest.importorskip("sksparse.cholmod")

from geogp.linalg import SparsePattern, cholmod

NX, NY, SHIFT = 500, 400, 0.5  # M = 200,000
LIMIT = 2 * 2**30


_CHILD = textwrap.dedent(f"""
    import resource, sys
    sys.path.insert(0, {str(pathlib.Path(__file__).resolve().parents[1])!r})
    import jax, jax.numpy as jnp, numpy as np
    import geogp
    from _reference.sparse_spd import grid_laplacian
    from geogp.linalg import SparsePattern, cholmod
    a = grid_laplacian({NX}, {NY}, {SHIFT})
    pattern = SparsePattern.from_scipy(a)
    values = jnp.asarray(pattern.values_from_scipy(a))
    rhs = jnp.ones(pattern.n)
    def objective(v):
        logdet, x = cholmod.logdet_and_solve(pattern, v, rhs)
        return logdet + jnp.sum(x)
    value, grad = jax.jit(jax.value_and_grad(objective))(values)
    np.asarray(grad)
    try:  # VmHWM: this image's own peak (ru_maxrss would include the forking parent's)
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")][0]
        print(int(hwm.split()[1]) * 1024)
    except OSError:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(rss if sys.platform == "darwin" else rss * 1024)
""")


def _child_peak_rss_bytes() -> int:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip().splitlines()[-1])


def test_value_and_gradient_at_m_200000_stay_far_below_dense_memory():
    a = grid_laplacian(NX, NY, SHIFT)
    pattern = SparsePattern.from_scipy(a)
    values = jnp.asarray(pattern.values_from_scipy(a))
    rhs = jnp.ones(pattern.n)
    assert pattern.n == 200_000

    def objective(v):
        logdet, x = cholmod.logdet_and_solve(pattern, v, rhs)
        return logdet + jnp.sum(x)

    tracemalloc.start()
    try:
        value, grad = jax.jit(jax.value_and_grad(objective))(values)
        grad = np.asarray(grad)
        _, peak_traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_traced < LIMIT, f"numpy/Python peak {peak_traced / 2**30:.2f} GiB"
    rss = _child_peak_rss_bytes()
    assert rss < LIMIT, f"process peak RSS {rss / 2**30:.2f} GiB"

    x = np.asarray(cholmod.logdet_and_solve(pattern, values, rhs)[1])  # cached factor
    assert np.abs(a @ x - 1.0).max() < 1e-10
    eig = grid_laplacian_eigenvalues(NX, NY, SHIFT)
    np.testing.assert_allclose(float(value), np.sum(np.log(eig)) + x.sum(), rtol=1e-12)
    # ∂(1ᵀB⁻¹1)/∂v is −(2 x_i x_j, x_i²) on the pattern; add it back to isolate ∂log|B|/∂v.
    r, c = pattern.rows, pattern.cols
    g_logdet = grad + np.where(r == c, x[r] * x[c], 2 * x[r] * x[c])
    np.testing.assert_allclose(g_logdet[pattern.diag_index].sum(), np.sum(1 / eig), rtol=1e-10)
    np.testing.assert_allclose(g_logdet @ np.asarray(values), pattern.n, rtol=1e-10)
