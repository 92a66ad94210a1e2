"""Numbers and lengths in reports (issue 31: "1.405e+04 metre" reads as "14.05 km")."""

from __future__ import annotations

import pytest

from geogp.core.formatting import lengths, number


@pytest.mark.parametrize(("values", "units", "text"), [
    ([14050.0], "metre", "14.05 km"),
    ([1.405e4, 2.2e4], "metre", "(14.05, 22) km"),
    ([850.0], "metre", "850 m"),
    ([850.0, 1200.0], "m", "(0.85, 1.2) km"),        # one unit for the pair
    ([2.58e7], "metre", "25,800 km"),
    ([0.0753], "degrees of latitude", "0.0753 degrees of latitude"),
    ([2580.4], "km", "2580 km"),
    ([12.5], "US survey foot", "12.5 US survey foot"),
])
def test_lengths(values, units, text):
    assert lengths(values, units) == text


def test_number_keeps_four_digits_and_groups_large_whole_numbers():
    assert number(176824) == "176,824" and number(1234.56) == "1235"
    assert number(0.01234) == "0.01234"
