"""GVI's losses and divergences (#44, item 1) against numerical integration and independent
implementations, and NLL + KL against the exact GP's evidence (the negative ELBO at the exact
posterior is −log p(y))."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.integrate as si
import scipy.linalg as sla
from scipy import stats

from geogp.exceptions import InputError
from geogp.gvi import DIVERGENCES, divergence, expected_loss, projected

Q1, P1 = (0.4, 0.7), (-0.3, 1.6)  # (mean, variance) of q and p, one dimension
MQ, CQ = np.array([0.3, -0.5]), np.array([[0.8, 0.3], [0.3, 0.5]])
MP, CP = np.array([-0.2, 0.4]), np.array([[1.5, -0.4], [-0.4, 1.1]])


def _pdf(mean, cov):
    return stats.multivariate_normal(mean, cov).pdf


def _integrand(kind, q, p, alpha):
    """The divergence's defining integrand in q(x), p(x) (and the integral's outer map)."""
    if kind == "kl":
        return lambda a, b: a * (math.log(a) - math.log(b)), lambda s: s
    if kind in ("bhattacharyya", "hellinger"):
        outer = (lambda s: -math.log(s)) if kind == "bhattacharyya" else (lambda s: 1 - s)
        return lambda a, b: math.sqrt(a * b), outer
    if kind == "renyi":
        return (lambda a, b: a**alpha * b ** (1 - alpha),
                lambda s: math.log(s) / (alpha - 1))
    return lambda a, b: (a - b) ** 2, lambda s: s


@pytest.mark.parametrize(("kind", "alpha"), [
    ("kl", None), ("bhattacharyya", None), ("hellinger", None), ("renyi", 0.3),
    ("renyi", 2.0), ("sqdiff", None)])
def test_one_dimensional_divergences_equal_their_integrals(kind, alpha):
    alpha = alpha or 0.5
    q, p = stats.norm(Q1[0], math.sqrt(Q1[1])), stats.norm(P1[0], math.sqrt(P1[1]))
    f, outer = _integrand(kind, q, p, alpha)
    # Rényi of order α is (1/(α − 1)) log ∫ q^α p^{1−α}
    value = outer(si.quad(lambda x: f(q.pdf(x), p.pdf(x)), -30, 30, limit=200)[0])
    got = divergence(kind, Q1[0], Q1[1], P1[0], P1[1], alpha=alpha)
    assert float(got) == pytest.approx(value, rel=1e-8)
    assert float(projected(kind, [Q1[0]], [Q1[1]], [P1[0]], [P1[1]], alpha=alpha)) == (
        pytest.approx(value, rel=1e-8))


@pytest.mark.parametrize("kind", ["kl", "bhattacharyya", "hellinger", "renyi", "sqdiff"])
def test_two_dimensional_divergences_equal_their_integrals(kind):
    q, p = _pdf(MQ, CQ), _pdf(MP, CP)
    f, outer = _integrand(kind, q, p, 0.3)
    inner = si.dblquad(lambda y, x: f(q([x, y]), p([x, y])), -8, 8, -8, 8,
                       epsabs=1e-10, epsrel=1e-8)[0]
    assert float(divergence(kind, MQ, CQ, MP, CP, alpha=0.3)) == pytest.approx(
        outer(inner), rel=1e-6)


def test_wasserstein_against_quantiles_and_an_independent_matrix_square_root():
    """1-D: W₂² = ∫₀¹ (F_q⁻¹(u) − F_p⁻¹(u))² du. 2-D: scipy's Schur-based sqrtm in
    |Δ|² + tr Σ_q + tr Σ_p − 2 tr (Σ_p^{1/2} Σ_q Σ_p^{1/2})^{1/2}."""
    q, p = stats.norm(Q1[0], math.sqrt(Q1[1])), stats.norm(P1[0], math.sqrt(P1[1]))
    want = si.quad(lambda u: (q.ppf(u) - p.ppf(u)) ** 2, 0, 1, limit=200)[0]
    assert float(divergence("wasserstein", Q1[0], Q1[1], P1[0], P1[1])) == pytest.approx(
        want, rel=1e-7)
    root = np.real(sla.sqrtm(CP))
    want = (np.sum((MQ - MP) ** 2) + np.trace(CQ) + np.trace(CP)
            - 2 * np.trace(np.real(sla.sqrtm(root @ CQ @ root))))
    assert float(divergence("wasserstein", MQ, CQ, MP, CP)) == pytest.approx(want, rel=1e-10)


def test_projected_forms_are_sums_of_the_marginal_divergences():
    rng = np.random.default_rng(0)
    mq, mp = rng.normal(size=5), rng.normal(size=5)
    vq, vp = rng.uniform(0.2, 2, 5), rng.uniform(0.2, 2, 5)
    for kind in DIVERGENCES:
        want = sum(float(divergence(kind, mq[i], vq[i], mp[i], vp[i], alpha=0.7))
                   for i in range(5))
        assert float(projected(kind, mq, vq, mp, vp, alpha=0.7)) == pytest.approx(
            want, rel=1e-12), kind


def test_renyi_tends_to_the_kl_and_half_order_is_twice_bhattacharyya():
    kl = float(divergence("kl", MQ, CQ, MP, CP))
    assert float(divergence("renyi", MQ, CQ, MP, CP, alpha=1 - 1e-6)) == pytest.approx(
        kl, rel=1e-5)
    assert float(divergence("renyi", MQ, CQ, MP, CP, alpha=0.5)) == pytest.approx(
        2 * float(divergence("bhattacharyya", MQ, CQ, MP, CP)), rel=1e-12)


def _expected_by_quadrature(loss, y, m, v):
    q = stats.norm(m, math.sqrt(v))
    return si.quad(lambda f: loss(y, f) * q.pdf(f), m - 30 * math.sqrt(v),
                   m + 30 * math.sqrt(v), limit=200)[0]


@pytest.mark.parametrize("kind", ["nll", "beta", "gamma", "huber"])
def test_expected_losses_equal_their_integrals_over_q(kind):
    """Each closed form against direct quadrature of the loss written from its definition,
    at an inlier and an outlier."""
    noise, power, c = 0.3, 0.4, 1.345

    def density(y, f):
        return stats.norm(f, math.sqrt(noise)).pdf(y)

    # ∫ p(z|f)^{1+β} dz by quadrature too (the same for every f: a location family)
    integral = si.quad(lambda z: density(z, 0.0) ** (1 + power), -20, 20)[0]

    def loss(y, f):
        if kind == "nll":
            return -math.log(density(y, f))
        if kind == "beta":
            return -density(y, f) ** power / power + integral / (1 + power)
        if kind == "gamma":
            return (-(1 + power) / power * density(y, f) ** power
                    / integral ** (power / (1 + power)))
        r = abs(y - f) / math.sqrt(noise)
        return (0.5 * r**2 if r <= c else c * r - 0.5 * c**2) + 0.5 * math.log(noise)

    for y in (0.2, 4.0):
        want = _expected_by_quadrature(loss, y, 0.1, 0.25)
        got = float(expected_loss(kind, np.array(y), np.array(0.1), np.array(0.25), noise,
                                  beta=power, gamma=power, c=c))
        assert got == pytest.approx(want, rel=1e-6), (kind, y)


def test_robust_losses_bound_an_outliers_pull_and_the_nll_does_not():
    """The gradient in q's mean of the β loss vanishes for a far outlier; the NLL's grows."""
    import jax

    def pull(kind):
        return [abs(float(jax.grad(lambda m, y=y: expected_loss(kind, y, m, 0.1, 0.2))(0.0)))
                for y in (1.0, 10.0, 100.0)]

    nll, beta = pull("nll"), pull("beta")
    assert nll[0] < nll[1] < nll[2]
    assert beta[2] < 1e-10 < beta[0]


def test_nll_plus_kl_at_the_exact_posterior_is_minus_the_log_evidence():
    """GVI with the NLL and the KL is the negative ELBO: at q = the exact posterior of a small
    GP it equals −log p(y) (to 1e-10)."""
    rng = np.random.default_rng(1)
    x = np.sort(rng.uniform(0, 5, 12))
    k = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + 1e-9 * np.eye(12)
    noise = 0.15
    y = rng.normal(size=12)
    gain = k @ np.linalg.inv(k + noise * np.eye(12))
    mean, cov = gain @ y, k - gain @ k
    objective = (float(np.sum(expected_loss("nll", y, mean, np.diag(cov), noise)))
                 + float(divergence("kl", mean, cov, np.zeros(12), k)))
    evidence = stats.multivariate_normal(np.zeros(12), k + noise * np.eye(12)).logpdf(y)
    assert objective == pytest.approx(-evidence, rel=1e-10)


def test_bad_names_and_orders_are_refused():
    with pytest.raises(InputError, match="divergence must be one of"):
        divergence("tv", 0.0, 1.0, 0.0, 1.0)
    with pytest.raises(InputError, match="alpha"):
        projected("renyi", [0.0], [1.0], [0.0], [1.0], alpha=1.0)
    with pytest.raises(InputError, match="loss must be one of"):
        expected_loss("l1", 0.0, 0.0, 1.0, 1.0)
    with pytest.raises(InputError, match="beta"):
        expected_loss("beta", 0.0, 0.0, 1.0, 1.0, beta=0)
