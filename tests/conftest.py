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


# the slowest test files, slowest first (measured per-file times): with ``--dist loadfile
# --no-loadscope-reorder`` (scripts/test.sh) xdist gives a worker the next file in this order
# whenever it is nearly done, so the long files start first and the short ones even out the end
# (longest-processing-time-first). Without the flag xdist reorders files by their number of
# tests, and a long file of two tests started last, alone.
SLOWEST_FILES = (
    "models/test_lattice.py", "reliability/test_large_gaps_sum.py",
    "models/test_lattice_tiled.py", "reliability/test_smooth_fields.py",
    "test_placement_lattice_tiled.py", "models/test_lattice_robust.py",
    "models/test_afs_iterative.py", "reliability/test_large_gaps_product.py",
    "test_readme.py", "frontend/test_cli.py", "models/test_lattice_hole.py", "models/test_afs.py",
    "models/test_lattice_varying.py", "frontend/test_api.py", "reliability/test_trust_round3.py",
    "models/test_svgp.py", "frontend/test_model_choice.py", "reliability/test_lattice_memory.py",
    "reliability/test_spacetime_memory.py", "test_placement_lattice.py", "models/test_exact.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the :data:`SLOWEST_FILES` first, each file's tests in their own order."""
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}

    def key(item: pytest.Item) -> int:
        path = pathlib.Path(str(item.path)).resolve().relative_to(_TESTS).as_posix()
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: the other files keep pytest's order
