"""The space-time lattice model's algebra (geogp.models.spacetime, #43), against dense algebra
on small stacks: the precision against the covariance it claims, REML against the dense
likelihood, its gradient against finite differences, the posterior mean against kriging."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from geogp.linalg.solvers import Solver
from geogp.models.lattice.gmrf import laplacian
from geogp.models.spacetime.gmrf import (
    ar1_precision,
    composite_log_likelihood,
    kriging_means,
    log_marginal_likelihood,
    make_problem,
    posterior,
    posterior_mean,
    precision,
    prior_draws,
)

SHAPE, H = (4, 5), (1.0, 1.5)
TIMES = np.array([0.0, 1.0, 3.0, 3.5, 6.0])  # irregular steps: a missing date, a half step
PARAMS = {"log_range": np.log(3.0), "log_sd": np.log(0.8), "log_tau": np.log(2.5),
          "log_range_mean": np.log(5.0), "log_sd_mean": np.log(1.3),
          "log_sd_offset": np.log(0.7), "log_tau_offset": np.log(4.0), "log_noise": np.log(0.3)}


def _matern_cov(log_range, log_sd):
    """The α = 2 lattice field's covariance, densely: (c (κ² I + L)²)⁻¹."""
    n = SHAPE[0] * SHAPE[1]
    kappa2 = 8.0 / np.exp(2 * log_range)
    c = H[0] * H[1] / (4 * np.pi * kappa2 * np.exp(2 * log_sd))
    op = kappa2 * np.eye(n) + laplacian(SHAPE, H).toarray()
    return np.linalg.inv(c * op @ op)


def _dense_prior(params=PARAMS):
    """Cov (m, a_0, …, a_{T−1}, g) = diag(C_m, R_T(τ) ⊗ C_a, s_g² R_T(τ_g)),
    R_T(τ) = exp(−|t_i − t_j|/τ)."""
    c_m = _matern_cov(params["log_range_mean"], params["log_sd_mean"])
    c_a = _matern_cov(params["log_range"], params["log_sd"])
    lag = np.abs(TIMES[:, None] - TIMES[None, :])
    r_t = np.exp(-lag / np.exp(params["log_tau"]))
    c_g = np.exp(2 * params["log_sd_offset"]) * np.exp(-lag / np.exp(params["log_tau_offset"]))
    return sla.block_diag(c_m, np.kron(r_t, c_a), c_g)


def _stack(seed=0, frac=0.6, trend=True):
    """Observations at a random ``frac`` of (date, cell) pairs, with a constant and a slope."""
    rng = np.random.default_rng(seed)
    n, t = SHAPE[0] * SHAPE[1], TIMES.size
    keep = np.flatnonzero(rng.uniform(size=n * t) < frac)
    steps, cells = np.divmod(keep, n)
    X = (np.column_stack([np.ones(keep.size), cells % SHAPE[1]]) if trend
         else np.ones((keep.size, 1)))
    y = 0.5 + rng.standard_normal(keep.size)
    return cells, steps, y, X


def _problem(backend="cholmod", **kw):
    cells, steps, y, X = _stack(**kw)
    return make_problem(SHAPE, H, TIMES, cells, steps, y, X, Solver(backend)), (cells, steps, y, X)


def _observation_matrix(cells, steps):
    n = SHAPE[0] * SHAPE[1]
    a = np.zeros((cells.size, n * (TIMES.size + 1) + TIMES.size))
    a[np.arange(cells.size), cells] = 1.0
    a[np.arange(cells.size), n * (1 + steps) + cells] = 1.0
    a[np.arange(cells.size), n * (1 + TIMES.size) + steps] = 1.0
    return a


def _every_value():
    """A of f(s, t) = m(s) + a(s, t) + g(t) at every (date, cell), date-major."""
    n = SHAPE[0] * SHAPE[1]
    steps, cells = np.divmod(np.arange(n * TIMES.size), n)
    return _observation_matrix(cells, steps)


def test_the_precision_is_the_inverse_of_the_covariance_it_claims():
    problem, _ = _problem()
    q, logdet = precision(PARAMS, problem)
    dense = problem.pattern.to_scipy(np.asarray(q)).toarray()
    cov = _dense_prior()
    np.testing.assert_allclose(dense @ cov, np.eye(cov.shape[0]), atol=1e-8)
    assert float(logdet) == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-10)


def test_the_ar1_precision_inverts_the_exponential_correlation_of_irregular_dates():
    tau = 1.7
    diag, off, logdet = ar1_precision(np.diff(TIMES), tau)
    q = np.diag(np.asarray(diag)) + np.diag(np.asarray(off), 1) + np.diag(np.asarray(off), -1)
    r = np.exp(-np.abs(TIMES[:, None] - TIMES[None, :]) / tau)
    np.testing.assert_allclose(q @ r, np.eye(TIMES.size), atol=1e-12)
    assert float(logdet) == pytest.approx(-np.linalg.slogdet(r)[1], rel=1e-12)


@pytest.mark.parametrize("backend", ["cholmod", "dense"])
def test_reml_equals_the_dense_restricted_likelihood(backend):
    problem, (cells, steps, y, X) = _problem(backend)
    a = _observation_matrix(cells, steps)
    sigma = a @ _dense_prior() @ a.T + np.exp(2 * PARAMS["log_noise"]) * np.eye(y.size)
    si = np.linalg.inv(sigma)
    xsx = X.T @ si @ X
    proj = si - si @ X @ np.linalg.solve(xsx, X.T @ si)
    want = -0.5 * (np.linalg.slogdet(sigma)[1] + np.linalg.slogdet(xsx)[1] + y @ proj @ y
                   + (y.size - X.shape[1]) * np.log(2 * np.pi))
    assert float(log_marginal_likelihood(PARAMS, problem)) == pytest.approx(want, rel=1e-9)


def test_the_variance_scale_is_the_dense_reml_maximiser_of_a_factor_on_every_variance():
    """scale2 = (y − Xβ̂)ᵀΣ⁻¹(y − Xβ̂)/(N − p) densely, and the restricted likelihood of θ with
    every variance times scale2 beats it times 0.9 or 1.1."""
    problem, (cells, steps, y, X) = _problem()
    a = _observation_matrix(cells, steps)
    sigma = a @ _dense_prior() @ a.T + np.exp(2 * PARAMS["log_noise"]) * np.eye(y.size)
    si = np.linalg.inv(sigma)
    proj = si - si @ X @ np.linalg.solve(X.T @ si @ X, X.T @ si)
    got = posterior(PARAMS, problem).scale2
    assert got == pytest.approx(y @ proj @ y / (y.size - X.shape[1]), rel=1e-9)

    def scaled(c2):
        half = 0.5 * np.log(c2)
        return float(log_marginal_likelihood(
            {k: v + (half if k in ("log_sd", "log_sd_mean", "log_sd_offset", "log_noise")
                     else 0.0) for k, v in PARAMS.items()}, problem))

    assert scaled(got) > max(scaled(0.9 * got), scaled(1.1 * got))


def test_the_gradient_through_cholmod_matches_finite_differences():
    import jax

    problem, _ = _problem()
    grad = jax.grad(log_marginal_likelihood)(PARAMS, problem)
    for key, value in PARAMS.items():
        eps = 1e-5
        up, down = dict(PARAMS), dict(PARAMS)
        up[key], down[key] = value + eps, value - eps
        fd = (float(log_marginal_likelihood(up, problem))
              - float(log_marginal_likelihood(down, problem))) / (2 * eps)
        assert float(grad[key]) == pytest.approx(fd, rel=1e-5, abs=1e-7), key


def test_windows_in_their_own_slots_sum_to_their_likelihoods_value_and_gradient():
    """Three windows of one shape: in slots 0, 1, 2 they are factorised in one batch (each
    its own factor), in one slot one after another; both equal the sum of the single-window
    likelihoods, value and gradient."""
    import jax

    stacks = [_stack(seed=k) for k in range(3)]

    def problems(slots):
        return tuple(make_problem(SHAPE, H, TIMES, *st, Solver("cholmod"), slot=k)
                     for st, k in zip(stacks, slots, strict=True))

    batched, shared = problems([0, 1, 2]), problems([0, 0, 0])
    assert len({id(p.pattern) for p in batched}) == 3
    want = sum(float(log_marginal_likelihood(PARAMS, p)) for p in shared)
    want_grad = [jax.grad(log_marginal_likelihood)(PARAMS, p) for p in shared]
    for probs in (batched, shared):
        value, grad = jax.value_and_grad(composite_log_likelihood)(PARAMS, probs)
        assert float(value) == pytest.approx(want, rel=1e-12)
        for key in PARAMS:
            assert float(grad[key]) == pytest.approx(
                sum(float(g[key]) for g in want_grad), rel=1e-9, abs=1e-10), key


def test_the_posterior_mean_is_universal_kriging_with_the_dense_covariance():
    problem, (cells, steps, y, X) = _problem()
    a = _observation_matrix(cells, steps)
    prior = _dense_prior()
    sigma = a @ prior @ a.T + np.exp(2 * PARAMS["log_noise"]) * np.eye(y.size)
    si = np.linalg.inv(sigma)
    beta = np.linalg.solve(X.T @ si @ X, X.T @ si @ y)
    x = prior @ a.T @ si @ (y - X @ beta)
    want = (_every_value() @ x).reshape(TIMES.size, -1)
    got, got_beta = posterior_mean(PARAMS, problem)
    np.testing.assert_allclose(got_beta, beta, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)


def test_the_posterior_mean_and_variance_are_universal_kriging():
    """Mean and variance of xᵀβ + f at every (date, cell), trend uncertainty included, against
    universal kriging with the dense covariance (x: an intercept and the column index)."""
    problem, (cells, steps, y, X) = _problem()
    a, e = _observation_matrix(cells, steps), _every_value()
    prior = _dense_prior()
    sigma = a @ prior @ a.T + np.exp(2 * PARAMS["log_noise"]) * np.eye(y.size)
    si = np.linalg.inv(sigma)
    xsx = X.T @ si @ X
    beta = np.linalg.solve(xsx, X.T @ si @ y)
    k = e @ prior @ a.T  # Cov(f, y)
    n = SHAPE[0] * SHAPE[1]
    x_new = np.column_stack([np.ones(n * TIMES.size), np.tile(np.arange(n) % SHAPE[1],
                                                               TIMES.size)])
    mean = x_new @ beta + k @ si @ (y - X @ beta)
    r = x_new - k @ si @ X
    var = (np.diag(e @ prior @ e.T) - np.einsum("ij,jk,ik->i", k, si, k)
           + np.einsum("ij,jk,ik->i", r, np.linalg.inv(xsx), r))
    got_mean, got_var, *_ = posterior(PARAMS, problem, x_new.reshape(TIMES.size, n, 2))
    np.testing.assert_allclose(got_mean.ravel(), mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_var.ravel(), var, rtol=1e-7, atol=1e-10)


def _whitened(draws, cov):
    """L⁻¹(draws) with cov = LLᵀ: independent standard normals if the draws have ``cov``."""
    return sla.solve_triangular(np.linalg.cholesky(cov), draws.T, lower=True).T


def _standard_normal_within_bounds(w):
    """Mean 0 and covariance I to within 5 Monte-Carlo sds in every entry."""
    n = w.shape[0]
    err = w.T @ w / n - np.eye(w.shape[1])
    assert np.abs(w.mean(axis=0)).max() < 5 / np.sqrt(n)
    assert np.abs(np.diag(err)).max() < 5 * np.sqrt(2 / n)  # a variance's MC sd: √(2/n)
    assert np.abs(err - np.diag(np.diag(err))).max() < 5 / np.sqrt(n)


@pytest.mark.parametrize("backend", ["cholmod", "dense"])
def test_prior_draws_have_the_covariance_of_the_precision(backend):
    """f = m + a + g at every (date, cell), whitened by the dense prior covariance E C Eᵀ:
    independent standard normals (20,000 draws, every entry of their covariance)."""
    n = 20_000
    f = prior_draws(PARAMS, SHAPE, H, TIMES, n, np.random.default_rng(1), Solver(backend))
    assert f.shape == (n, TIMES.size, *SHAPE)
    e = _every_value()
    _standard_normal_within_bounds(_whitened(f.reshape(n, -1), e @ _dense_prior() @ e.T))


def test_kriging_means_of_several_data_vectors_are_universal_kriging():
    """Each column of Y as data: the universal-kriging mean with the dense covariance (trend
    an intercept and a slope, x_new the same columns), and the problem's own y gives
    posterior()'s mean."""
    problem, (cells, steps, y, X) = _problem()
    a, e = _observation_matrix(cells, steps), _every_value()
    prior = _dense_prior()
    sigma = a @ prior @ a.T + np.exp(2 * PARAMS["log_noise"]) * np.eye(y.size)
    si = np.linalg.inv(sigma)
    n = SHAPE[0] * SHAPE[1]
    x_new = np.column_stack([np.ones(n * TIMES.size), np.tile(np.arange(n) % SHAPE[1],
                                                               TIMES.size)])
    Y = np.column_stack([y, np.random.default_rng(3).standard_normal((y.size, 2))])
    beta = np.linalg.solve(X.T @ si @ X, X.T @ si @ Y)
    want = x_new @ beta + e @ prior @ a.T @ si @ (Y - X @ beta)
    got = kriging_means(PARAMS, problem, cells, steps, X, Y,
                        x_new.reshape(TIMES.size, n, 2))
    np.testing.assert_allclose(got.reshape(-1, 3), want, rtol=1e-7, atol=1e-9)
    own = posterior(PARAMS, problem, x_new.reshape(TIMES.size, n, 2)).mean
    np.testing.assert_allclose(got[..., 0], own, rtol=1e-9, atol=1e-11)


def test_matheron_draws_have_the_dense_posterior_covariance():
    """A prior draw f and its data y* = f + noise where y is observed give posterior draws
    mean + (f − K y*), K the universal-kriging predictor (Matheron's rule): whitened by the
    dense universal-kriging covariance (the trend's share included), standard normals."""
    problem, (cells, steps, y, X) = _problem(trend=False)
    a, e = _observation_matrix(cells, steps), _every_value()
    prior = _dense_prior()
    noise = np.exp(2 * PARAMS["log_noise"])
    sigma = a @ prior @ a.T + noise * np.eye(y.size)
    si = np.linalg.inv(sigma)
    k = e @ prior @ a.T
    r = 1.0 - k @ si @ X
    cov = (e @ prior @ e.T - k @ si @ k.T + r @ np.linalg.solve(X.T @ si @ X, r.T))
    n, rng = 20_000, np.random.default_rng(2)
    f = prior_draws(PARAMS, SHAPE, H, TIMES, n, rng).reshape(n, -1)
    y_star = f[:, steps * SHAPE[0] * SHAPE[1] + cells] + np.sqrt(noise) * rng.standard_normal(
        (n, y.size))
    deviation = f - kriging_means(PARAMS, problem, cells, steps, X, y_star.T).reshape(-1, n).T
    _standard_normal_within_bounds(_whitened(deviation, cov))


def test_dates_must_increase():
    cells, steps, y, X = _stack()
    for times in (TIMES[::-1], np.array([0.0, 1.0, 1.0, 2.0, 3.0]), np.array([0.0])):
        with pytest.raises(Exception, match="strictly increasing"):
            make_problem(SHAPE, H, times, cells, np.minimum(steps, times.size - 1), y, X,
                         Solver("dense"))
