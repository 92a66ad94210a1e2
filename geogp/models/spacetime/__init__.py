"""The space-time lattice model for image stacks (docs/spacetime.md)."""

from geogp.models.spacetime.regressor import SpaceTimeDate, SpaceTimeRegressor

__all__ = ["SpaceTimeDate", "SpaceTimeRegressor"]
