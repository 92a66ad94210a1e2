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
