"""Shared fixtures for the geogp test suite.

``tests/`` is put on ``sys.path`` so that test modules anywhere below it can import the shared,
closed-form references in ``tests/_reference/`` (``from _reference.dense_gp import ...``),
whatever pytest's import mode.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

_TESTS = str(pathlib.Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

import geogp  # noqa: E402,F401  (switches JAX to float64 before any test creates an array)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator: every test sees the same numbers on every run."""
    return np.random.default_rng(20240611)


# the slowest test files, slowest first: the two xdist workers (``--dist loadfile``) take files
# in collection order, so starting with these leaves the short files to even out the end
# (longest-processing-time-first) instead of one worker finishing a long file alone
SLOWEST_FILES = (
    "reliability/test_large_gaps_sum.py", "reliability/test_large_gaps_product.py",
    "models/test_lattice.py", "test_placement_lattice_tiled.py", "models/test_lattice_tiled.py",
    "models/test_afs_iterative.py", "reliability/test_smooth_fields.py", "test_readme.py",
    "models/test_lattice_robust.py", "frontend/test_cli.py", "models/test_lattice_hole.py",
    "frontend/test_model_choice.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the :data:`SLOWEST_FILES` first, each file's tests in their own order."""
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}

    def key(item: pytest.Item) -> int:
        path = pathlib.Path(str(item.path)).resolve().relative_to(_TESTS).as_posix()
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: the other files keep pytest's order
