"""Numbers with units as a reader expects them in reports: 14.05 km, not 1.405e+04 metre."""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = ["duration", "duration_range", "lengths", "number"]

_METRES = ("m", "metre", "meter", "metres", "meters")


def number(value: float) -> str:
    """Four significant digits; whole numbers with thousands separators from 10,000 up."""
    value = float(value)
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"


def lengths(values: Iterable[float], units: str) -> str:
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


def duration(seconds: float) -> str:
    """Seconds below 90, whole minutes from there (never "0 min")."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def duration_range(seconds: float, load: float | None = None, cores: int | None = None,
                   most: float | None = None) -> str:
    """An estimate at the reference machine's idle rate as a range: from it to what the
    machine's load makes of it (at least 2×: other jobs come and go during a fit), or of
    ``most``, the estimate when everything the fit may do runs. ``load``: the 1-minute load
    average (default the machine's); ``cores``: its CPUs.

    >>> duration_range(30, load=0.0, cores=2), duration_range(30, load=4.0, cores=2)
    ('30–60 s', '30 s–2 min')
    """
    load = os.getloadavg()[0] if load is None else float(load)
    cores = (os.cpu_count() or 1) if cores is None else int(cores)
    slow = max(2.0, 1.5 * (1.0 + load) / cores)  # a fit's share of the cores under that load
    low, high = duration(seconds), duration(max(seconds, most or 0.0) * slow)
    if low.split()[1] == high.split()[1]:
        return f"{low.split()[0]}–{high}"
    return f"{low}–{high}"
