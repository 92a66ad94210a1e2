"""Numbers with units as a reader expects them in reports: 14.05 km, not 1.405e+04 metre."""

from __future__ import annotations

__all__ = ["lengths", "number"]

_METRES = ("m", "metre", "meter", "metres", "meters")


def number(value: float) -> str:
    """Four significant digits; whole numbers with thousands separators from 10,000 up."""
    value = float(value)
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def lengths(values, units: str) -> str:
    """One length, or a tuple of them, with their unit: metres from 1,000 m up in km.

    >>> lengths([14050.0], "metre"), lengths([850.0, 1200.0], "metre"), lengths([0.07], "degrees")
    ('14.05 km', '(0.85, 1.2) km', '0.07 degrees')
    """
    vals = [float(v) for v in values]
    if str(units).lower() in _METRES:
        big = max(abs(v) for v in vals) >= 1000
        vals, units = ([v / 1000 for v in vals], "km") if big else (vals, "m")
    text = ", ".join(number(v) for v in vals)
    return (f"({text})" if len(vals) > 1 else text) + f" {units}"
