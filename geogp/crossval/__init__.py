"""Cross-validation that looks like the real task: gap-shaped folds, scores by distance.

- :func:`cross_validate`: hold out folds of a raster, refit, score (geogp or any method);
- :func:`make_folds`: ``"gaps"`` (the raster's own missing-data shapes moved onto observed
  areas), ``"random"``, ``"blocks"``;
- :class:`CVResult`: per-cell predictions, scores per fold, by distance to the nearest
  training cell, reliability diagram.

Why gap-shaped folds: a random hold-out leaves every hidden cell one pixel from data, so it
rewards local interpolation and says nothing about the centre of a cloud. The docs
(``docs/crossvalidation.md``) explain the protocol.
"""

from geogp.core.folds import (
    FOLD_KINDS,
    block_folds,
    distance_to_observed,
    gap_folds,
    make_folds,
    random_folds,
    transplant,
)
from geogp.crossval.result import CVResult
from geogp.crossval.run import cross_validate
from geogp.crossval.stack import StackCVResult, stack_gap_folds

__all__ = ["CVResult", "StackCVResult", "stack_gap_folds", "cross_validate", "make_folds",
           "gap_folds", "random_folds", "block_folds", "distance_to_observed", "transplant",
           "FOLD_KINDS"]
