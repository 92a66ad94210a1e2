"""A named solver object for the models' sparse systems (docs/sparse_vjp.md, contract).

The models hold one :class:`Solver` in their problem pytrees instead of a bare function, so
that the code reading a problem asks the solver what it is (``backend``) and whether it can
factorise several systems in one host call (``batches``), instead of recognising functions by
identity or looking inside a ``functools.partial``. Equal solvers compare equal and hash alike
(a frozen dataclass), as static pytree data must.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> from geogp.linalg import SparsePattern
    >>> a = sp.csc_matrix(np.array([[4.0, 1.0], [1.0, 3.0]]))
    >>> p = SparsePattern.from_scipy(a)
    >>> solver = Solver("dense")
    >>> logdet, x = solver(p, p.values_from_scipy(a), np.ones(2))
    >>> round(float(logdet), 6) == round(float(np.log(11.0)), 6), solver.batches
    (True, False)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from geogp.exceptions import InputError
from geogp.linalg import cholmod, cholmod_many, dense, lapack

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.linalg.pattern import SparsePattern

__all__ = ["SOLVER_BACKENDS", "Solver", "solve_all"]

#: ``"cholmod"``: CHOLMOD and a selected inversion (:mod:`geogp.linalg.cholmod`);
#: ``"lapack"``: dense LAPACK on the host (:mod:`geogp.linalg.lapack`); ``"dense"``: dense
#: Cholesky in JAX, the test oracle (:mod:`geogp.linalg.dense`). Same contract for all three.
SOLVER_BACKENDS = ("cholmod", "lapack", "dense")


@dataclass(frozen=True)
class Solver:
    """``(pattern, values, rhs) -> (log|B|, B⁻¹ rhs)`` of one backend, with a custom VJP.

    Attributes:
        backend: one of :data:`SOLVER_BACKENDS`.
        ordering: CHOLMOD's fill-reducing ordering (``"cholmod"`` only).
    """

    backend: str
    ordering: str = "amd"

    def __post_init__(self):
        if self.backend not in SOLVER_BACKENDS:
            raise InputError(f"solver backend must be one of {SOLVER_BACKENDS}; "
                             f"got {self.backend!r}.")

    def __call__(self, pattern, values, rhs):
        if self.backend == "cholmod":
            return cholmod.logdet_and_solve(pattern, values, rhs, ordering=self.ordering)
        if self.backend == "lapack":
            return lapack.logdet_and_solve(pattern, values, rhs)
        return dense.logdet_and_solve(pattern, values, rhs)

    def host_solve(self, pattern: SparsePattern, values: ArrayLike, rhs: ArrayLike) -> np.ndarray:
        """B⁻¹ rhs on the host, without JAX (no gradient): for many right-hand sides at once
        (conditional simulation). CHOLMOD reuses the factor it already holds at ``values``.

        Raises:
            NotPositiveDefiniteError: ``B`` is not positive definite."""
        values = np.asarray(values, dtype=np.float64)
        rhs = np.asarray(rhs, dtype=np.float64)
        if self.backend == "cholmod":
            state = cholmod.analyze(pattern, ordering=self.ordering)
            _, solution = state.host_forward(values, rhs)
            if not np.all(np.isfinite(solution)):
                state.check_positive_definite(values)  # raises where B is not SPD
                raise InputError("B⁻¹ rhs is not finite: values or rhs contain NaN or inf.")
            return solution
        return np.asarray(self(pattern, values, rhs)[1])  # the dense references, eagerly

    @property
    def batches(self) -> bool:
        """Whether :meth:`solve_many` factorises all systems in one host call (CHOLMOD: the
        selected inversions of the gradient overlap with the next factorisation)."""
        return self.backend == "cholmod"

    def solve_many(self, items: Sequence[tuple]) -> list:
        """[(log|B_t|, B_t⁻¹ rhs_t)] for ``items`` = [(pattern, values, rhs)]: batched through
        :func:`geogp.linalg.cholmod_many.logdet_and_solve_many` when :attr:`batches` and there
        are several, each on a pattern of its own (a pattern holds one factor), else one call
        each. Same values and gradients either way."""
        distinct = len({id(item[0]) for item in items}) == len(items)
        if self.batches and len(items) > 1 and distinct:
            return cholmod_many.logdet_and_solve_many(list(items), ordering=self.ordering)
        return [self(*item) for item in items]


def solve_all(problems: Sequence, systems: Sequence[tuple]) -> list:
    """[(log|B_t|, B_t⁻¹ rhs_t)] for problems (each with ``pattern`` and its ``solve``r) and
    their ``systems`` (B's values, rhs, …): in one batch when they share a solver
    (:meth:`Solver.solve_many`), else problem by problem."""
    items = [(p.pattern, sys[0], sys[1]) for p, sys in zip(problems, systems, strict=True)]
    solver = problems[0].solve
    if all(p.solve == solver for p in problems):
        return solver.solve_many(items)
    return [p.solve(*item) for p, item in zip(problems, items, strict=True)]
