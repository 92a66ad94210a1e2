"""Sparse symmetric linear algebra: ``(log|B|, B⁻¹b)`` with derivatives (docs/sparse_vjp.md).

Three backends share one contract, ``logdet_and_solve(pattern, values, rhs)``:

- :mod:`geogp.linalg.cholmod`: CHOLMOD (scikit-sparse) behind a custom JAX VJP with a selected
  inverse; memory ``O(nnz(L))``. Used when scikit-sparse imports (``HAVE_CHOLMOD``).
- :mod:`geogp.linalg.dense`: dense Cholesky in pure JAX; the test oracle, and the fallback
  when scikit-sparse is missing (``O(n³)``: fine for a few thousand rows, not beyond).
- :mod:`geogp.linalg.lapack`: dense LAPACK on the host behind the same VJP, for patterns
  that are nearly full (the wavelet model's coarse levels).

The custom VJP of the two host backends is :mod:`geogp.linalg.host_vjp`.

The models hold a :class:`~geogp.linalg.solvers.Solver` (``Solver("cholmod")``, ...) that names
its backend and says whether it can factorise several systems in one host call.
``geogp.linalg.logdet_and_solve`` is the CHOLMOD one when available, else the dense one.
"""

from __future__ import annotations

from geogp.exceptions import NotPositiveDefiniteError as NotPositiveDefiniteError
from geogp.linalg import dense as dense
from geogp.linalg.pattern import SparsePattern as SparsePattern
from geogp.linalg.solvers import Solver as Solver

# scikit-sparse is optional: it needs SuiteSparse headers to build (docs/sparse_vjp.md, backends)
try:
    import sksparse.cholmod  # noqa: F401
except ImportError:  # pragma: no cover - depends on the installation
    HAVE_CHOLMOD = False
else:
    HAVE_CHOLMOD = True

if HAVE_CHOLMOD:
    from geogp.linalg import cholmod as cholmod
    from geogp.linalg.cholmod import analyze as analyze
    from geogp.linalg.cholmod import check_positive_definite as check_positive_definite
    from geogp.linalg.cholmod import logdet_and_solve as logdet_and_solve
    from geogp.linalg.cholmod import selected_inverse as selected_inverse
else:  # pragma: no cover - depends on the installation
    from geogp.linalg.dense import logdet_and_solve as logdet_and_solve

__all__ = [
    "HAVE_CHOLMOD",
    "NotPositiveDefiniteError",
    "Solver",
    "SparsePattern",
    "dense",
    "logdet_and_solve",
]
if HAVE_CHOLMOD:
    __all__ += ["analyze", "check_positive_definite", "cholmod", "selected_inverse"]
