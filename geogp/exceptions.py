"""Exceptions raised by geogp.

Every error about bad input subclasses :class:`ValueError` (via :class:`InputError`), so
``except ValueError`` keeps working, as in scikit-learn. Messages state what was expected, what
arrived, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "GeogpError",
    "InputError",
    "NotFittedError",
    "MissingCRSError",
    "IrregularGridError",
    "AllMissingError",
    "MemoryEstimateError",
    "NotPositiveDefiniteError",
    "OutsideWindowError",
    "OutputExistsError",
    "ReadError",
    "MissingCRSWarning",
    "NodataWarning",
    "ApproximationWarning",
    "GeographicCoordinatesWarning",
    "ExtrapolationWarning",
    "AntimeridianWarning",
    "ConvergenceWarning",
    "PlacementWarning",
]


class GeogpError(Exception):
    """Base class of all geogp errors."""


class InputError(GeogpError, ValueError):
    """Input data or arguments that geogp cannot use (NaN, shapes, units...)."""


class NotFittedError(GeogpError, ValueError, AttributeError):
    """A model was used (predict, save, place...) before ``fit``; as scikit-learn's, it is both
    a ValueError and an AttributeError."""


class MissingCRSError(InputError):
    """A raster has no coordinate reference system where one is required."""


class IrregularGridError(InputError):
    """Coordinates are not monotonic, duplicated, or not regularly spaced."""


class AllMissingError(InputError):
    """Every cell of the input is missing (NaN or nodata)."""


class OutsideWindowError(InputError):
    """Prediction points lie outside the window in which the features are valid."""


class MemoryEstimateError(GeogpError, MemoryError):
    """A computation would need more memory than allowed; carries the estimate in bytes.

    ``hint`` names the Python options that help; ``cli_hint``, when given, the ``geogp``
    command's flags instead (:meth:`cli_message`, which the command prints).
    """

    def __init__(self, what: str, needed_bytes: float, limit_bytes: float, hint: str = "",
                 cli_hint: str | None = None) -> None:
        self.needed_bytes = float(needed_bytes)
        self.limit_bytes = float(limit_bytes)
        self.cli_hint = cli_hint
        self._base = (
            f"{what} would need about {needed_bytes / 2**30:.2f} GiB, above the limit of "
            f"{limit_bytes / 2**30:.2f} GiB."
        )
        super().__init__(f"{self._base} {hint}".strip())

    def cli_message(self) -> str:
        """The message with the command-line advice (the Python one without a CLI hint)."""
        return f"{self._base} {self.cli_hint}".strip() if self.cli_hint else str(self)


class NotPositiveDefiniteError(GeogpError, ArithmeticError):
    """A matrix that must be symmetric positive definite is not (Cholesky failed)."""


class OutputExistsError(InputError, FileExistsError):
    """An output file already exists and overwriting was not asked for."""


class ReadError(InputError):
    """A file could not be read as a raster (missing, unreadable, or not a GeoTIFF/NetCDF)."""


class MissingCRSWarning(UserWarning):
    """A raster has no CRS; the warning says what geogp assumed instead."""


class NodataWarning(UserWarning):
    """A raster without a nodata value holds a common nodata sentinel (e.g. −9999, or its
    integer type's extreme), which would be fitted as data."""


class ApproximationWarning(UserWarning):
    """A fitted approximation is measurably off (aliasing, truncation); the warning gives the
    numbers and the setting that fixes it (``n_features``, the window)."""


class GeographicCoordinatesWarning(UserWarning):
    """Coordinates passed to an array estimator look like longitude/latitude in degrees, which
    the estimator would treat as planar (a degree of longitude counted as a degree of latitude)."""


class ExtrapolationWarning(UserWarning):
    """Prediction locations lie far outside the data (farther than the data's own extent):
    there the mean is the extrapolated trend, and its uncertainty dominates ``std``."""


class AntimeridianWarning(UserWarning):
    """Geographic points cross the antimeridian (179.5 ... -179.5) and ``geogp fit --resolution``
    shifted their longitudes to 0..360, so that the grid spans their real extent rather than
    360°; the warning gives both spans and the grid's longitude range."""


class ConvergenceWarning(UserWarning):
    """An iterative solver stopped at its iteration limit without the requested tolerance (the
    conjugate gradients of the matrix-free posterior): the result is approximate; the warning
    names the limit, the tolerance and the setting that helps."""


class PlacementWarning(UserWarning):
    """Fewer sites than requested could be placed (site placement): the budget was exhausted, or
    no candidate was left (all placed or within ``min_distance`` of a placed site); the warning
    says how many sites were placed and why it stopped."""
