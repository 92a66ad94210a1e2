"""The space-time lattice model for image stacks (docs/spacetime.md): :mod:`~.gmrf` (the
precision of a persistent field plus AR(1) anomalies, and its REML likelihood)."""
