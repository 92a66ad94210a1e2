"""Value + gradient of the CHOLMOD ``logdet_and_solve`` against one numeric factorisation.

For a 2-D five-point-stencil pattern (plus diagonal) with M = 10⁴, 10⁵ (and 10⁶ with
``--large``), it times:

- ``factor``: one CHOLMOD numeric factorisation (``cholesky_inplace``) on the analysed pattern;
- ``value``: the jitted forward pass (factorisation + log-determinant + solve);
- ``value+grad``: ``jax.value_and_grad`` of ``log|B| + Σ B⁻¹b`` w.r.t. the values: the forward
  factorisation, reused by the backward pass, two solves, the factor copy and the selected
  inverse (docs/sparse_vjp.md, selected inversion);
- ``selinv``: the Takahashi kernel alone, and ``L()``: the factor copy it reads.

Each figure is the minimum over ``--repeat`` runs with fresh values (no cache hit), after a
warm-up call (JIT compilation, numba cache load). The target is value+grad ≤ 3 × factor.

Run: ``.venv/bin/python benchmarks/bench_cholmod.py [--large] [--repeat 3]``. It is a script,
not a test; M = 10⁶ takes about a minute per repeat on 2 cores and ~3 GB of memory.

Measured (2 cores shared with other jobs at load ≈ 8, so CPU seconds are the meaningful
figures; ``--large --repeat 2``, AMD, scikit-sparse 0.4.16 on SuiteSparse 5.12):

=========  ==========  ==============  ==================  ==========  ===========
M          nnz(L)      factor CPU [s]  value+grad CPU [s]  ratio CPU   selinv [s]
=========  ==========  ==============  ==================  ==========  ===========
10⁴        330,951     0.023           0.031               1.3 – 3.0   0.006
10⁵        4,545,948   0.279           0.509               1.8 – 1.9   0.145
10⁶        58,105,499  9.0             15.9                1.8         5.2
=========  ==========  ==============  ==================  ==========  ===========

At 10⁴ fixed costs (factor copy, callbacks) weigh most and runs vary between 1.3 and 3.0.
Peak RSS for the whole script with M = 10⁶: 3.5 GB (factor, its LLᵀ copy and Z, each
``O(nnz(L))``). sparsax 0.9.0 (throwaway venv, same grids, CPU): factor 0.012 / 0.207 s and
value+grad 0.064 / 2.21 s at M = 10⁴ / 10⁵, ratios 5.2 / 10.7.

Notes:
- Debian's CHOLMOD links the reference BLAS, while the selected inverse calls OpenBLAS (through
  numba's ``np.dot``), limited to one thread (see :mod:`geogp.linalg.selinv`). With an
  optimised BLAS under CHOLMOD the factorisation gets faster and the ratio grows.
- Times are wall clock and process CPU time (all threads). On a busy machine the CPU figures
  are the stable ones; on an idle one the two agree (everything here is single-threaded).
- sparsax (bundled CHOLMOD with XLA custom calls and a built-in selected inverse, see
  docs/sparse_vjp.md) is not a geogp dependency (licence review pending; its metadata says BSD-3).
  To compare, install it in a throwaway venv (``pip install sparsax numpy scipy jax``) and run
  ``python benchmarks/bench_cholmod.py --sparsax-only`` there: that path imports neither geogp
  nor scikit-sparse, and times sparsax's ``factor`` against ``value_and_grad`` of
  ``logdet + Σ solve`` (upper-triangle COO input) on the same grids.
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

jax.config.update("jax_enable_x64", True)  # as `import geogp` does (docs/model.md)

SIZES = {10**4: (100, 100), 10**5: (400, 250), 10**6: (1000, 1000)}


def grid_matrix(nx: int, ny: int, shift: float = 0.5) -> sp.csc_matrix:
    """Shifted five-point Laplacian (SPD), size ``nx·ny``."""

    def path(m: int) -> sp.csc_matrix:
        return sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])

    a = sp.kron(path(nx), sp.identity(ny)) + sp.kron(sp.identity(nx), path(ny))
    return sp.csc_matrix(a + shift * sp.identity(nx * ny))


def _best(fn, repeat: int) -> tuple[float, float]:
    """(best wall, best CPU) seconds over ``repeat`` calls ``fn(k)``."""
    walls, cpus = [], []
    for k in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn(k)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def bench(m: int, repeat: int, ordering: str) -> dict[str, float]:
    """Time one size with geogp's CHOLMOD path; returns the figures of the table row."""
    import geogp  # noqa: F401 - not needed by --sparsax-only
    from geogp.linalg import SparsePattern, cholmod
    from geogp.linalg.selinv import takahashi

    a = grid_matrix(*SIZES[m])
    pattern = SparsePattern.from_scipy(a)
    values = pattern.values_from_scipy(a)
    rhs = jnp.ones(pattern.n)
    start = time.perf_counter()
    state = cholmod.analyze(pattern, ordering=ordering)
    t_analyze = time.perf_counter() - start  # wall only: it runs once
    backend = state.backend

    def fresh(k: int) -> np.ndarray:  # different values each call: no cache hits
        return values * (1.0 + 0.01 * (k + 1))

    t_factor = _best(lambda k: backend.factorize(fresh(k)), repeat)
    lfac, _ = backend.factor_and_perm()
    t_l = _best(lambda k: backend.factor_and_perm(), repeat)
    t_selinv = _best(lambda k: takahashi(lfac.indptr, lfac.indices, lfac.data), repeat)

    def objective(v: jax.Array) -> jax.Array:
        logdet, x = cholmod.logdet_and_solve(pattern, v, rhs, ordering=ordering)
        return logdet + jnp.sum(x)

    value = jax.jit(objective)
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    jax.block_until_ready(value_and_grad(jnp.asarray(values)))  # warm-up
    jax.block_until_ready(value(jnp.asarray(values)))
    t_value = _best(lambda k: jax.block_until_ready(value(jnp.asarray(fresh(k + 10)))), repeat)
    t_vg = _best(
        lambda k: jax.block_until_ready(value_and_grad(jnp.asarray(fresh(k + 20)))), repeat
    )
    return {
        "M": pattern.n,
        "nnz(L)": lfac.nnz,
        "analyze": t_analyze,
        "factor": t_factor,
        "value": t_value,
        "value+grad": t_vg,
        "L()": t_l,
        "selinv": t_selinv,
    }


def bench_sparsax(m: int, repeat: int) -> dict[str, float]:
    """Same measurements with sparsax (upper-triangle COO; its own factor cache)."""
    import sparsax  # optional, throwaway venv only

    a = sp.triu(grid_matrix(*SIZES[m])).tocoo()
    ai, aj = jnp.asarray(a.row, jnp.int32), jnp.asarray(a.col, jnp.int32)
    values, n = np.asarray(a.data), a.shape[0]
    rhs = jnp.ones(n)

    def fresh(k: int) -> jax.Array:
        return jnp.asarray(values * (1.0 + 0.01 * (k + 1)))

    def objective(v: jax.Array) -> jax.Array:
        return sparsax.logdet(ai, aj, v, n) + jnp.sum(sparsax.solve(ai, aj, v, rhs))

    factor = jax.jit(lambda v: sparsax.factor(ai, aj, v, n))
    value = jax.jit(objective)
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    jax.block_until_ready(factor(fresh(-1)))
    jax.block_until_ready(value(fresh(-1)))
    jax.block_until_ready(value_and_grad(fresh(-1)))
    return {
        "M": n,
        "nnz(L)": -1,
        "analyze": float("nan"),
        "factor": _best(lambda k: jax.block_until_ready(factor(fresh(k))), repeat),
        "value": _best(lambda k: jax.block_until_ready(value(fresh(k + 10))), repeat),
        "value+grad": _best(lambda k: jax.block_until_ready(value_and_grad(fresh(k + 20))), repeat),
        "L()": float("nan"),
        "selinv": float("nan"),
    }


def _cell(x: object) -> str:
    if isinstance(x, tuple):
        return f"{x[0]:.3f} / {x[1]:.3f}"
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def main() -> None:
    """Parse arguments, run the sizes, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also run M = 10^6 (slow)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (minimum kept)")
    parser.add_argument("--ordering", default="amd", help="amd (default), metis, natural...")
    parser.add_argument(
        "--sparsax-only", action="store_true", help="time sparsax instead (throwaway venv)"
    )
    args = parser.parse_args()
    sizes = [10**4, 10**5] + ([10**6] if args.large else [])
    header = ("M", "nnz(L)", "analyze", "factor", "value", "value+grad", "ratio", "L()", "selinv")
    which = "sparsax" if args.sparsax_only else f"geogp CHOLMOD, ordering={args.ordering}"
    print(f"{which}; repeat={args.repeat}; seconds as wall / CPU (best of each)")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] * len(header)) + "|")
    for m in sizes:
        if args.sparsax_only:
            row = bench_sparsax(m, args.repeat)
        else:
            row = bench(m, args.repeat, args.ordering)
        vg, fac = row["value+grad"], row["factor"]
        row["ratio"] = (vg[0] / fac[0], vg[1] / fac[1])
        print("| " + " | ".join(_cell(row[h]) for h in header) + " |", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"ratio = value+grad / factor, wall / CPU (target ≤ 3). Peak RSS {peak:.2f} GiB.")


if __name__ == "__main__":
    main()
