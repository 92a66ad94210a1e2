"""Trust, round 3, item 1 (#41): honest intervals deep inside a gap larger than a period; the
sum variant (period 30 cells, a 60 × 60-cell gap). The family is in ``_large_gaps.py``.

Before the fix the default lattice model (Matérn ν = 1 only) covered 0.85 (product) and 0.65
(sum) of the hidden values: the ν = 1 field imitated the field's smoothness with a range
running to the intrinsic limit. The issue's acceptance numbers, unchanged:
- the 95 % interval of a new observation covers 0.85–0.99 of the hidden noisy values in the gap;
- the latent RMSE in the gap is no worse than predicting the field's mean. Not met yet (an
  exact Matérn-5/2 GP does not meet it either, ``benchmarks/bench_smooth_gaps.py``): marked
  as an expected failure, strict, so that it is noticed when it starts to pass.
"""

from __future__ import annotations

import pytest

from reliability._large_gaps import default_scores

VARIANT = (30, 60, 1, "sum")


def test_item1_intervals_cover_the_hidden_values_deep_in_a_gap_larger_than_a_period():
    s = default_scores(*VARIANT)
    assert s["model"] == "lattice"
    assert 0.85 <= s["coverage"] <= 0.99, s


@pytest.mark.xfail(strict=True, reason="#41 item 1: the smooth stationary fit overshoots in "
                   "gaps larger than a period (see benchmarks/README.md)")
def test_item1_rmse_in_a_gap_larger_than_a_period_is_no_worse_than_the_mean():
    s = default_scores(*VARIANT)
    assert s["rmse"] <= s["rmse_mean"], s
