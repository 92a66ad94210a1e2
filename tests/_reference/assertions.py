"""One shared comparison helper (in the spirit of tinygp's ``test_utils.assert_allclose``)."""

from __future__ import annotations

import numpy as np


def assert_allclose(actual, desired, *, rtol=1e-10, atol=0.0, err_msg=""):
    """numpy's assert_allclose after checking that ``actual`` is float64 (JAX or numpy)."""
    a = np.asarray(actual)
    if np.issubdtype(a.dtype, np.floating):
        assert a.dtype == np.float64, f"expected float64, got {a.dtype} {err_msg}"
    np.testing.assert_allclose(a, np.asarray(desired), rtol=rtol, atol=atol, err_msg=err_msg)
