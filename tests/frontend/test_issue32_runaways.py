"""Issue #32, hardening round 2: hangs and runaways. Each request that used to loop forever,
run for minutes or exhaust the memory is refused at once, with one line that states the
reason (and, for memory, the estimate), or now runs in linear time."""

from __future__ import annotations

import numpy as np
import pytest

import geogp
from geogp.exceptions import InputError
from geogp.features.fourier import FourierFeatures


# --------------------------------------------------------------------------- AFS window
@pytest.mark.parametrize("margin", [-1.0, -0.1, float("nan"), "abc"])
def test_issue32_afs_negative_margin_refused_not_a_hang(raster, margin):
    """margin=-1 gave a negative window, and FourierFeatures.for_budget doubled its bandwidth
    for ever; a window that would not cover the data is now refused before any data pass."""
    with pytest.raises(InputError, match="margin"):
        geogp.fit(raster, model="afs", n_features=64, margin=margin)


@pytest.mark.parametrize("width", [-1.0, 0.0, float("inf")])
def test_issue32_for_budget_refuses_a_bad_window(width):
    with pytest.raises(InputError, match="window width"):
        FourierFeatures.for_budget(np.zeros(2), np.array([1.0, width]), 64)
