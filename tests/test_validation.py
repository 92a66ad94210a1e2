"""Bad input is refused early with a ValueError (geogp.exceptions.InputError) naming the problem.

Also: the package-wide float64 switch, the exception hierarchy and the Standardizer's checks.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from geogp import exceptions
from geogp.core.validation import as_points, as_targets, check_positive, check_same_length
from geogp.exceptions import InputError
from geogp.models.base import Prediction, Standardizer
from geogp.models.exact.regressor import ExactGP

from _reference.assertions import assert_allclose


@pytest.fixture
def xy(rng):
    X = rng.uniform(size=(12, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    return X, y


# ---------------------------------------------------------------------------------------------
# float64
# ---------------------------------------------------------------------------------------------


def test_import_geogp_enables_float64_in_a_fresh_interpreter():
    code = (
        "import jax\n"
        "assert not jax.config.jax_enable_x64, 'x64 already on before geogp'\n"
        "import geogp, jax.numpy as jnp, numpy as np\n"
        "assert jax.config.jax_enable_x64\n"
        "assert jnp.zeros(3).dtype == jnp.float64\n"
        "assert jnp.asarray(np.float32(1.0)).dtype == jnp.float32  # explicit float32 stays\n"
        "assert geogp.Matern32(0.5)(np.zeros((2, 1)), np.ones((2, 1))).dtype == jnp.float64\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "JAX_ENABLE_X64"}
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr


def test_float32_input_is_upcast_with_a_warning():
    with pytest.warns(UserWarning, match="X has dtype float32; geogp works in float64"):
        X = as_points(np.ones((3, 2), dtype=np.float32))
    assert X.dtype == np.float64
    assert as_targets(np.arange(3)).dtype == np.float64  # integers: silently exact


# ---------------------------------------------------------------------------------------------
# The named checks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("X, match", [
    (np.array([[0.0, 1.0], [np.nan, 2.0], [1.0, 1.0]]),
     r"X contains 1 NaN/inf value\(s\) \(first at row 1\)"),
    (np.array([[0.0, np.inf], [1.0, 2.0]]), r"X contains 1 NaN/inf value\(s\) \(first at row 0\)"),
    (np.zeros((0, 2)), r"X is empty \(0 points\)"),
    (np.zeros((0,)), r"X is empty \(0 points\)"),
    (np.zeros((2, 3, 2)), r"X must have shape \(N, D\).*got ndim=3"),
    (np.zeros((5, 4)), r"X must have 1 to 3 columns \(dimensions\); got 4"),
    (np.array([["a", "b"]]), r"X must be numeric; got an array of dtype <U1"),
])
def test_as_points_rejects(X, match):
    with pytest.raises(InputError, match=match):
        as_points(X)


def test_as_points_reads_a_vector_as_one_dimensional_points():
    X = as_points([0.0, 1.0, 2.0])
    assert X.shape == (3, 1) and X.dtype == np.float64


@pytest.mark.parametrize("y, match", [
    (np.array([0.0, 1.0, np.nan]), r"y contains 1 NaN/inf value\(s\) \(first at index 2\)"),
    (np.array([-np.inf, 1.0, np.inf]), r"y contains 2 NaN/inf value\(s\) \(first at index 0\)"),
    (np.zeros(0), r"y is empty"),
    (np.zeros((4, 2)), r"y must be a vector of shape \(N,\); got shape \(4, 2\)"),
])
def test_as_targets_rejects(y, match):
    with pytest.raises(InputError, match=match):
        as_targets(y)


def test_as_targets_accepts_a_column():
    assert as_targets(np.ones((4, 1))).shape == (4,)


def test_check_same_length():
    check_same_length(np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(InputError, match="X has 3 rows but y has 4 values; they must match"):
        check_same_length(np.zeros((3, 2)), np.zeros(4))


@pytest.mark.parametrize("value", [0.0, -1.0, np.nan, np.inf, [1.0, 0.0]])
def test_check_positive_rejects(value):
    with pytest.raises(InputError, match="noise must be finite and > 0"):
        check_positive(value, "noise")


def test_check_positive_accepts():
    assert_allclose(check_positive([0.5, 2], "lengthscale"), [0.5, 2.0])


# ---------------------------------------------------------------------------------------------
# Through the estimator: every bad input is a ValueError naming the problem
# ---------------------------------------------------------------------------------------------


def test_exact_gp_rejects_nan_and_inf(xy):
    X, y = xy
    Xbad = X.copy()
    Xbad[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"X contains 1 NaN/inf value\(s\) \(first at row 4\)"):
        ExactGP(optimize=False).fit(Xbad, y)
    ybad = y.copy()
    ybad[7] = np.inf
    with pytest.raises(ValueError, match=r"y contains 1 NaN/inf value\(s\) \(first at index 7\)"):
        ExactGP(optimize=False).fit(X, ybad)


def test_exact_gp_rejects_mismatched_shapes(xy):
    X, y = xy
    with pytest.raises(ValueError, match="X has 12 rows but y has 11 values"):
        ExactGP(optimize=False).fit(X, y[:-1])
    with pytest.raises(ValueError, match=r"y must be a vector of shape \(N,\)"):
        ExactGP(optimize=False).fit(X, np.stack([y, y], axis=1))


def test_exact_gp_rejects_empty_data():
    with pytest.raises(ValueError, match="X is empty"):
        ExactGP(optimize=False).fit(np.zeros((0, 2)), np.zeros(0))


def test_exact_gp_rejects_constant_targets(xy):
    X, _ = xy
    with pytest.raises(ValueError, match=r"targets are constant \(all equal to 2\.5\)"):
        ExactGP(optimize=False).fit(X, np.full(len(X), 2.5))


def test_exact_gp_rejects_a_degenerate_input_axis(xy):
    X, y = xy
    X = X.copy()
    X[:, 1] = 3.0
    with pytest.raises(ValueError, match=r"input dimension\(s\) \[1\] have a single value"):
        ExactGP(optimize=False).fit(X, y)


@pytest.mark.parametrize("kwargs, match", [
    ({"noise": 0.0}, "noise must be finite and > 0; got 0.0"),
    ({"noise": -0.1}, "noise must be finite and > 0"),
    ({"lengthscale": -1.0}, "lengthscale must be finite and > 0"),
    ({"lengthscale": [0.2, 0.0]}, "lengthscale must be finite and > 0"),
    ({"variance": 0.0}, "variance must be finite and > 0"),
    ({"variance": np.nan}, "variance must be finite and > 0"),
    ({"lengthscale": [0.1, 0.2, 0.3]}, r"one value per input dimension \(D=2\)"),
])
def test_exact_gp_rejects_bad_hyperparameters(xy, kwargs, match):
    X, y = xy
    with pytest.raises(ValueError, match=match):
        ExactGP("matern32", optimize=False, **kwargs).fit(X, y)


def test_exact_gp_rejects_unknown_kernel(xy):
    X, y = xy
    with pytest.raises(ValueError, match="unknown kernel name"):
        ExactGP("gaussian", optimize=False).fit(X, y)


def test_exact_gp_predict_rejects_bad_points(xy):
    X, y = xy
    gp = ExactGP(optimize=False).fit(X, y)
    with pytest.raises(ValueError, match=r"X \(prediction points\) contains 1 NaN/inf"):
        gp.predict(np.array([[0.1, np.nan]]))


def test_exact_gp_init_only_stores_arguments():
    """scikit-learn manners: nothing is validated before fit."""
    gp = ExactGP("nonsense", noise=-1.0)
    assert gp.kernel == "nonsense" and gp.noise == -1.0


# ---------------------------------------------------------------------------------------------
# Exceptions, Standardizer, Prediction
# ---------------------------------------------------------------------------------------------


def test_exception_hierarchy():
    for cls in (exceptions.InputError, exceptions.MissingCRSError,
                exceptions.IrregularGridError, exceptions.AllMissingError,
                exceptions.OutsideWindowError):
        assert issubclass(cls, ValueError) and issubclass(cls, exceptions.GeogpError)
    assert issubclass(exceptions.NotPositiveDefiniteError, exceptions.GeogpError)
    assert not issubclass(exceptions.NotPositiveDefiniteError, ValueError)
    err = exceptions.MemoryEstimateError("G", 3 * 2**30, 2**30, hint="Use chunks.")
    assert isinstance(err, MemoryError)
    assert err.needed_bytes == 3 * 2**30
    assert str(err) == "G would need about 3.00 GiB, above the limit of 1.00 GiB. Use chunks."


def test_standardizer_round_trip(rng):
    X = rng.normal(loc=[5.0, -2.0], scale=[10.0, 0.1], size=(50, 2))
    y = 3.0 + 7.0 * rng.standard_normal(50)
    s = Standardizer.from_data(X, y)
    assert_allclose(s.x(X).mean(axis=0), 0.0, atol=1e-13)
    assert_allclose(s.x(X).std(axis=0), 1.0, rtol=1e-13)
    assert_allclose(s.y(y).std(), 1.0, rtol=1e-13)
    pred = s.unscale(np.array([0.0, 1.0]), np.array([0.5, 0.25]), noise=0.1)
    assert_allclose(pred.mean, [y.mean(), y.mean() + y.std()], rtol=1e-14)
    assert_allclose(pred.var_latent, np.array([0.5, 0.25]) * y.var(), rtol=1e-13)
    assert_allclose(pred.var_observed, (np.array([0.5, 0.25]) + 0.1) * y.var(), rtol=1e-13)


def test_prediction_std_clips_tiny_negative_variances():
    p = Prediction(np.zeros(2), np.array([4.0, -1e-18]), np.array([9.0, 1.0]))
    assert_allclose(p.std_latent, [2.0, 0.0])
    assert_allclose(p.std_observed, [3.0, 1.0])
