"""Uncollapsed (stochastic) variational GP on AFS features, any likelihood (docs/svgp.md).

Model: f(x) = φ(x)ᵀu + b with u ~ N(0, Λ), Λ = diag λ(θ) (docs/afs.md), and a constant mean b.
Whitened: v = Λ^{-1/2}u ~ N(0, I), q(v) = N(m, S), S = LLᵀ, so with ψ(x) = λ^{1/2} ⊙ φ(x)

    q(f(x)) = N(ψᵀm + b,  k(0) − ψᵀψ + ψᵀSψ)
    ELBO    = Σ_n E_q[log p(y_n | f_n)] − KL(q(v) ‖ N(0, I))

(the true k(0) in the variance, as in the AFS collapsed bound, so that with a Gaussian likelihood
the optimum over q is exactly the collapsed bound of :mod:`geogp.models.collapsed`). Minibatches
scale the data term by N/B (unbiased). The objective is pure functions of pytrees
(:mod:`geogp.models.svgp.elbo`); :class:`SVGPRegressor` is a thin shell around it (optax Adam on
minibatches, or full-batch L-BFGS).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import optax
import scipy.special as sps
from jax.flatten_util import ravel_pytree

from geogp.core.kernels import make_kernel
from geogp.core.optimize import constrain, minimize_lbfgs, unconstrain
from geogp.core.validation import as_points, as_targets, check_same_length
from geogp.exceptions import InputError
from geogp.features.fourier import DEFAULT_WIDTH_FACTOR, FourierFeatures, window
from geogp.models.base import Prediction, Standardizer, check_columns, check_fitted
from geogp.models.svgp.elbo import (
    L_raw_from,
    elbo,
    kl_whitened,
    log_lambda,
    negative_elbo_loss,
    q_chol,
)
from geogp.models.svgp.likelihoods import Likelihood, gauss_hermite, make_likelihood
from geogp.models.svgp.newton import LOG_CONCAVE, optimal_q

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

    from geogp.core.kernels import Kernel

__all__ = ["SVGPRegressor", "SVGPPrediction"]

STALL_WINDOW = 20  # L-BFGS iterations over which the ELBO must still move (``tol``)
# the time estimate's constants, fitted on the 2-core reference machine (benchmarks/README.md,
# design measurements)
SECONDS_PER_UNIT = 1.2e-10
SETUP_S = 3.0
ADAM_STEP_FACTOR = 4.0
NEWTON_PASSES = 12
TYPICAL_LBFGS_ITERATIONS = 300  # where the stall rule stops on typical rasters
FREE = ("q", "mean")  # unconstrained top-level keys; the rest (kernel, lik) are positive


class SVGPPrediction(Prediction):
    """:class:`~geogp.models.base.Prediction` of the response (``mean``, ``var_observed``) and of
    the latent f (``var_latent``), with the latent mean in ``mean_latent`` (data units for
    real-valued likelihoods, log-rate for Poisson, probit/logit scale for Bernoulli)."""

    def __new__(cls, mean, var_latent, var_observed, mean_latent):
        self = super().__new__(cls, mean, var_latent, var_observed)
        self.mean_latent = mean_latent
        return self


def _phase(progress, title, total, unit="step"):
    """Announce a phase to a progress object that has bars per phase (``phase``); a plain
    ``progress(step, objective)`` callback gets only the steps."""
    if hasattr(progress, "phase"):
        progress.phase(title, total, unit)


def _done(progress, n):
    if hasattr(progress, "done"):
        progress.done(n)


# ---------------------------------------------------------------------- estimator
class SVGPRegressor:
    """Stochastic variational GP on AFS features with a non-Gaussian (or Gaussian) likelihood.

    Args:
        likelihood: ``"gaussian"``, ``"poisson"`` (log link), ``"bernoulli"`` (probit) or
            ``"student_t"``, or a :mod:`geogp.models.svgp.likelihoods` instance (e.g.
            ``Bernoulli(link="logit")``, ``StudentT(dof=3, learn_dof=True)``).
        kernel: name or Kernel with a spectral density (standardised inputs, docs/model.md).
        n_features: target M (realised: ``features_.n_features``); n_freq: explicit K_d.
        lattice: the feature lattice (docs/afs.md).
        window_factor: the feature window's width factor (docs/afs.md).
        margin: the feature window's margin (docs/afs.md).
        bounds: optional (lo, hi) box in data units that the window must also cover (a
            prediction grid).
        lengthscale: initial lengthscale (standardised units).
        variance: initial signal variance (standardised units).
        batch_size: minibatch size B; None: full batch up to 10,000 points, else 4,096.
        maxiter: Adam steps or L-BFGS iterations. learning_rate: Adam's initial step (decays
            geometrically to a tenth over ``maxiter``).
        tol: L-BFGS also stops, converged, once −ELBO fell by less than ``tol`` (relative)
            over the last :data:`STALL_WINDOW` iterations; 0: only scipy's own (very strict)
            criteria, which let a 60 × 80 raster run for hundreds of flat iterations.
        optimizer: ``"adam"``, ``"lbfgs"`` (full batch only) or ``"auto"`` (L-BFGS on a full
            batch, Adam on minibatches).
        learn_hyperparameters: learn θ and the likelihood's parameters (else only q and b).
        mean: ``"constant"`` (learnt b) or None (b = 0).
        exact_q: after the optimiser, move q(v) (and b) to their optimum at the fitted θ by
            Newton passes over all the data (:mod:`geogp.models.svgp.newton`; Gaussian,
            Poisson and Bernoulli, whose ELBO is concave in q). Without it, q is where Adam
            left it: far from the optimum in the directions that the data hardly constrain,
            such as the inside of a large gap. With it, L-BFGS also starts from q's optimum
            at the initial θ (fewer iterations to the same fit).
        seed: minibatch order. progress: optional callback ``progress(step, -elbo)``; one
            that also has ``phase(title, total, unit)`` and ``done(n)`` (as
            :class:`geogp.core.progress.SVGPProgress`) is told each phase: training, the
            optimal q (``exact_q``), the ELBO on all the data.

    Attributes:
        features_: the AFS feature set.
        kernel_: the fitted kernel (standardised units).
        lik_params_: the likelihood's fitted parameters.
        mean_: the constant mean b.
        q_mean_: q(u)'s mean m.
        q_chol_: q(u)'s Cholesky factor L.
        scaler_: the :class:`~geogp.models.base.Standardizer` of inputs and outputs.
        elbo_: the full-data ELBO at the end (y standardised for real-valued likelihoods).
        history_: the −ELBO estimates during training.
        n_iter_: optimiser steps made.
        q_passes_: data passes of ``exact_q``.
        optimizer_: the optax optimiser used.
        batch_size_: the minibatch size used.
        fit_time_s_: seconds the fit took.
        likelihood_: the fitted likelihood.
    """

    def __init__(self, likelihood: str | Likelihood = "gaussian",
                 kernel: str | Kernel = "matern32", *, n_features: int = 256,
                 n_freq: int | Sequence[int] | None = None, lattice: str = "odd",
                 window_factor: float = DEFAULT_WIDTH_FACTOR, margin: float = 0.0,
                 bounds: tuple[ArrayLike, ArrayLike] | None = None, lengthscale: ArrayLike = 0.2,
                 variance: float = 1.0, batch_size: int | None = None, maxiter: int = 2000,
                 learning_rate: float = 0.02, optimizer: str = "auto", tol: float = 1e-6,
                 learn_hyperparameters: bool = True,
                 mean: str | None = "constant", exact_q: bool = True, seed: int = 0,
                 progress: Callable[[int, float], object] | None = None) -> None:
        self.likelihood = likelihood
        self.kernel = kernel
        self.n_features = n_features
        self.n_freq = n_freq
        self.lattice = lattice
        self.window_factor = window_factor
        self.margin = margin
        self.bounds = bounds
        self.lengthscale = lengthscale
        self.variance = variance
        self.batch_size = batch_size
        self.maxiter = maxiter
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.tol = tol
        self.learn_hyperparameters = learn_hyperparameters
        self.mean = mean
        self.exact_q = exact_q
        self.seed = seed
        self.progress = progress

    # ------------------------------------------------------------------ set-up
    def _offset(self, exposure, n, what="exposure"):
        if exposure is None:
            return np.zeros(n)
        e = np.asarray(exposure, dtype=np.float64).reshape(-1)
        if e.shape != (n,) or not np.all(np.isfinite(e)) or np.any(e <= 0):
            raise InputError(f"{what} must be {n} finite positive values (one per point); got "
                             f"shape {np.shape(exposure)}.")
        if self.likelihood_.name != "poisson":
            raise InputError("exposure is for likelihood='poisson' only.")
        return np.log(e)

    def _setup(self, X, y):
        self.likelihood_ = make_likelihood(self.likelihood)
        X = as_points(X)
        y = as_targets(y)
        check_same_length(X, y)
        y = self.likelihood_.check(y)
        if not isinstance(self.exact_q, (bool, np.bool_)):
            raise InputError(f"exact_q must be True or False; got {self.exact_q!r}.")
        if self.mean not in ("constant", None):
            raise InputError(f"mean must be 'constant' or None; got {self.mean!r}.")
        if self.likelihood_.standardise:
            self.scaler_ = Standardizer.from_data(X, y)
        else:
            s = Standardizer.from_data(X, np.arange(2.0))
            self.scaler_ = Standardizer(s.x_mean, s.x_scale, 0.0, 1.0)
        Xs, ys = self.scaler_.x(X), self.scaler_.y(y)
        lo, hi = Xs.min(axis=0), Xs.max(axis=0)
        if self.bounds is not None:
            b = self.scaler_.x(np.asarray(self.bounds, dtype=np.float64).reshape(2, -1))
            lo, hi = np.minimum(lo, b.min(axis=0)), np.maximum(hi, b.max(axis=0))
        center, width = window(lo, hi, self.window_factor, self.margin)
        if self.n_freq is not None:
            self.features_ = FourierFeatures.build(center, width, self.n_freq, self.lattice)
        else:
            self.features_ = FourierFeatures.for_budget(center, width, int(self.n_features),
                                                        self.lattice)
        return Xs, ys

    def _init_params(self, ys, offset):
        M = self.features_.n_features
        kern = make_kernel(self.kernel, self.features_.n_dims, self.lengthscale, self.variance)
        if not hasattr(kern, "log_spectral_density"):
            raise InputError("SVGPRegressor needs a kernel with a spectral density (SE, Matérn "
                             "or their sums).")
        params = {"q": {"m": jnp.zeros(M), "L": jnp.zeros((M, M))}, "kernel": kern}
        lp = self.likelihood_.init_params(ys)
        if lp:
            params["lik"] = lp
        if self.mean == "constant":
            name, ybar = self.likelihood_.name, float(np.mean(ys))
            if name == "poisson":
                b = np.log(max(np.mean(ys / np.exp(offset)), 1e-3))
            elif name == "bernoulli":
                p = min(max(ybar, 1e-3), 1 - 1e-3)
                b = sps.ndtri(p) if self.likelihood_.link == "probit" else sps.logit(p)
            else:
                b = ybar
            params["mean"] = jnp.asarray(float(b))
        return params

    def _plan(self, N: int) -> tuple[int, str]:
        """(minibatch size, optimiser) for N points."""
        B = self.batch_size if self.batch_size is not None else (N if N <= 10000 else 4096)
        B = int(min(B, N))
        opt = self.optimizer
        if opt == "auto":
            opt = "lbfgs" if B == N else "adam"
        if opt not in ("adam", "lbfgs"):
            raise InputError(f"optimizer must be 'auto', 'adam' or 'lbfgs'; got {opt!r}.")
        if opt == "lbfgs" and B < N:
            raise InputError("optimizer='lbfgs' needs the full batch (batch_size=None or ≥ N).")
        return B, opt

    def _tol(self) -> float:
        tol = self.tol
        if isinstance(tol, bool) or not isinstance(tol, (int, float, np.integer, np.floating)) \
                or not 0 <= tol < 1:
            raise InputError(f"tol must be a number in [0, 1); got {tol!r}.")
        return float(tol)

    def cost_estimate(self, n_points: int) -> dict:
        """What a fit on ``n_points`` points will take, before it starts: ``optimizer``,
        ``batch``, ``steps`` (at most), ``step_s`` (seconds per step) and ``setup_s``
        (compilation and the Newton passes), at :data:`SECONDS_PER_UNIT`, the rate measured
        on the 2-core reference machine (the cost of a step grows as batch · M²)."""
        B, opt = self._plan(max(int(n_points), 1))
        M = float(self.n_features if self.n_freq is None
                  else np.prod(np.asarray(self.n_freq, dtype=float)))
        step = SECONDS_PER_UNIT * B * M**2 * (1.0 if opt == "lbfgs" else ADAM_STEP_FACTOR)
        newton = NEWTON_PASSES * SECONDS_PER_UNIT * n_points * M**2
        return {"optimizer": opt, "batch": B, "steps": int(self.maxiter), "step_s": step,
                "setup_s": SETUP_S + newton}

    # ------------------------------------------------------------------ fitting
    def fit(self, X: ArrayLike, y: ArrayLike, exposure: ArrayLike | None = None) -> SVGPRegressor:
        """Fit on points X (N, D), observations y (N,); ``exposure`` (N,) for Poisson."""
        t0 = time.perf_counter()
        Xs, ys = self._setup(X, y)
        offset = self._offset(exposure, Xs.shape[0])
        N = Xs.shape[0]
        params = self._init_params(ys, offset)
        B, opt = self._plan(N)
        tol = self._tol()
        self.optimizer_, self.batch_size_ = opt, B
        fixed = () if self.learn_hyperparameters else ("kernel", "lik")
        ff = self.features_
        consts = (jnp.asarray(ff.frequencies), jnp.asarray(ff.log_norm))
        exact_q = self.exact_q and self.likelihood_.name in LOG_CONCAVE
        self.q_passes_ = 0
        if opt == "lbfgs" and exact_q:  # q's optimum at the initial θ: a start near the joint one
            params = self._optimal_q(params, Xs, ys, offset, "optimal q at the initial "
                                     "hyperparameters")
        if opt == "lbfgs":
            _phase(self.progress, f"training (L-BFGS on all {N} points until the ELBO levels "
                   f"off, at most {int(self.maxiter)} iterations)", None, "iter")
            args = (jnp.asarray(ff(Xs)), jnp.asarray(ys), jnp.asarray(offset), float(N), *consts)
            params, rep = minimize_lbfgs(negative_elbo_loss(self.likelihood_), params, args=args,
                                         unconstrained=FREE, fixed=fixed, maxiter=self.maxiter,
                                         gtol=1e-9, ftol=1e-14, progress=self.progress,
                                         stall=(STALL_WINDOW, tol) if tol > 0 else None)
            self.history_ = [h * N for h in rep.history]
            self.n_iter_ = rep.n_iter
        else:
            params = self._adam(params, Xs, ys, offset, B, fixed, consts)
        self.kernel_ = params["kernel"]
        self.lik_params_ = params.get("lik", {})
        _done(self.progress, self.n_iter_)
        if exact_q:
            params = self._optimal_q(params, Xs, ys, offset)
        self.mean_ = float(params.get("mean", 0.0))
        self.q_mean_ = np.asarray(params["q"]["m"])
        self.q_chol_ = np.asarray(q_chol(params["q"]["L"]))
        self._params = params
        _phase(self.progress, "ELBO on all the data", 1, "pass")
        self.elbo_ = self.elbo(Xs, ys, offset)
        _done(self.progress, 1)
        self.fit_time_s_ = time.perf_counter() - t0
        return self

    def _optimal_q(self, params, Xs, ys, offset,
                   title: str = "optimal q at these hyperparameters", chunk: int = 8192):
        """q (and b) at their optimum for the fitted θ: Newton passes over all the data
        (:func:`geogp.models.svgp.newton.optimal_q`)."""
        ff, kern = self.features_, params["kernel"]
        sl = np.exp(0.5 * np.asarray(log_lambda(kern, ff.frequencies, ff.log_norm)))
        N = Xs.shape[0]

        def chunks():
            for s in range(0, N, chunk):
                yield ff(Xs[s:s + chunk]) * sl, slice(s, s + chunk)

        _phase(self.progress, f"{title} (Newton on all {N} points)", None, "pass")
        m, L, b, _, n = optimal_q(chunks, ys, offset, params["q"]["m"],
                                  q_chol(params["q"]["L"]), float(params.get("mean", 0.0)),
                                  float(kern.variance_at_zero), self.likelihood_,
                                  params.get("lik", {}), learn_mean=self.mean == "constant",
                                  progress=self.progress)
        _done(self.progress, n)
        self.q_passes_ += n
        out = {**params, "q": {"m": jnp.asarray(m), "L": jnp.asarray(L_raw_from(L))}}
        if "mean" in params:
            out["mean"] = jnp.asarray(b)
        return out

    def _adam(self, params, Xs, ys, offset, B, fixed, consts):
        N = Xs.shape[0]
        ff, lik = self.features_, self.likelihood_
        free = {k: v for k, v in params.items() if k not in fixed}
        held = {k: v for k, v in params.items() if k in fixed}
        T = int(self.maxiter)
        # Adam whose step decays geometrically to a tenth over the run
        opt = optax.adam(optax.exponential_decay(float(self.learning_rate),
                                                 transition_steps=max(T - 1, 1), decay_rate=0.1))

        def objective(u, Xb, yb, ob):
            p = {**constrain(u, FREE), **held}
            return -elbo(p, ff(Xb), yb, ob, N, *consts, lik) / N

        @jax.jit
        def step(u, state, Xb, yb, ob):
            val, g = jax.value_and_grad(objective)(u, Xb, yb, ob)
            updates, state = opt.update(g, state, u)
            return optax.apply_updates(u, updates), state, val

        _phase(self.progress, f"training (Adam, {T} steps on minibatches of {B} of {N} "
               "points)", T)
        u = unconstrain(free, FREE)
        state = opt.init(u)
        rng = np.random.default_rng(self.seed)
        order, pos, hist = rng.permutation(N), 0, []
        for t in range(T):
            if pos + B > N:
                order, pos = rng.permutation(N), 0
            idx = np.sort(order[pos:pos + B])
            pos += B
            u, state, val = step(u, state, Xs[idx], ys[idx], offset[idx])
            if t % 50 == 0 or t == T - 1:
                hist.append(float(val) * N)
                if self.progress is not None:
                    self.progress(t, hist[-1])
        self.history_, self.n_iter_ = hist, T
        return {**constrain(u, FREE), **held}

    # ------------------------------------------------------------------ results
    def elbo(self, Xs: ArrayLike, ys: ArrayLike, offset: ArrayLike, chunk: int = 65536) -> float:
        """Full-data ELBO at the fitted parameters, on standardised data (in chunks)."""
        ff, lik, p = self.features_, self.likelihood_, self._params
        N = Xs.shape[0]
        consts = (jnp.asarray(ff.frequencies), jnp.asarray(ff.log_norm))
        kl = float(kl_whitened(p["q"]["m"], q_chol(p["q"]["L"])))
        data = 0.0
        fn = jax.jit(lambda P, y, o: elbo(p, P, y, o, y.shape[0], *consts, lik))
        for s in range(0, N, chunk):
            sl = slice(s, s + chunk)
            data += float(fn(jnp.asarray(ff(Xs[sl])), jnp.asarray(ys[sl]),
                             jnp.asarray(offset[sl]))) + kl
        return data - kl

    def _latent(self, X, outside="raise", chunk: int = 8192):
        check_fitted(self, "q_mean_")
        X = as_points(X, "X (prediction points)")
        check_columns(X, self.scaler_.x_mean.size)
        Xs = self.scaler_.x(X)
        inside = self.features_.check_inside(Xs, outside, self.scaler_)
        sl = np.exp(0.5 * np.asarray(log_lambda(self.kernel_, self.features_.frequencies,
                                                self.features_.log_norm)))
        k0 = float(self.kernel_.variance_at_zero)
        mu = np.full(X.shape[0], np.nan)
        var = np.full(X.shape[0], np.nan)
        idx = np.flatnonzero(inside)
        for s in range(0, idx.size, chunk):
            i = idx[s:s + chunk]
            Psi = self.features_(Xs[i]) * sl
            mu[i] = Psi @ self.q_mean_ + self.mean_
            var[i] = np.maximum(k0 - np.sum(Psi**2, 1) + np.sum((Psi @ self.q_chol_) ** 2, 1),
                                0.0)
        return mu, var

    def predict(self, X: ArrayLike, exposure: ArrayLike | None = None,
                outside: str = "raise") -> SVGPPrediction:
        """Latent and response moments at X (N*, D): ``mean``/``var_observed`` of a new
        observation (counts or rates for Poisson — rates with exposure 1 —, probabilities for
        Bernoulli), ``var_latent`` and ``mean_latent`` of f. Real-valued likelihoods are in
        data units. Points outside the window raise, or are NaN with ``outside='nan'``."""
        mu, var = self._latent(X, outside)
        off = self._offset(exposure, mu.size)
        m, v = self.likelihood_.predict(jnp.asarray(mu), jnp.asarray(var), self.lik_params_,
                                        jnp.asarray(off))
        s, c = self.scaler_.y_scale, self.scaler_.y_mean
        if self.likelihood_.standardise:
            return SVGPPrediction(c + s * np.asarray(m), s**2 * var, s**2 * np.asarray(v),
                                  c + s * mu)
        return SVGPPrediction(np.asarray(m), var, np.asarray(v), mu)

    def interval(self, X: ArrayLike, level: float = 0.95,
                 exposure: ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Central predictive interval (lower, upper): of the rate exp(f + offset) (Poisson),
        of the probability p(y = 1 | f) (Bernoulli), of a new observation (Gaussian, Student-t:
        quantiles of the t–normal mixture by bisection)."""
        mu, var = self._latent(X)
        off = self._offset(exposure, mu.size)
        z = sps.ndtri(0.5 + level / 2)
        sd = np.sqrt(var)
        name, lp = self.likelihood_.name, self.lik_params_
        if name == "poisson":
            return np.exp(mu + off - z * sd), np.exp(mu + off + z * sd)
        if name == "bernoulli":
            g = sps.ndtr if self.likelihood_.link == "probit" else sps.expit
            return g(mu - z * sd), g(mu + z * sd)
        s, c = self.scaler_.y_scale, self.scaler_.y_mean
        if name == "gaussian":
            h = z * np.sqrt(var + float(lp["noise"]))
            return c + s * (mu - h), c + s * (mu + h)
        nu, sc = float(self.likelihood_.nu(lp)), float(lp["scale"])
        x, w = gauss_hermite()

        def cdf(q):
            return np.sum(w * sps.stdtr(nu, (q[:, None] - mu[:, None] - sd[:, None] * x) / sc),
                          axis=1)

        out = []
        for p in (0.5 - level / 2, 0.5 + level / 2):
            a = mu - 10 * (sd + sc) - 50 * sc
            b = mu + 10 * (sd + sc) + 50 * sc
            for _ in range(80):
                mid = 0.5 * (a + b)
                low = cdf(mid) < p
                a, b = np.where(low, mid, a), np.where(low, b, mid)
            out.append(c + s * 0.5 * (a + b))
        return tuple(out)

    def log_predictive_density(self, X: ArrayLike, y: ArrayLike,
                               exposure: ArrayLike | None = None) -> np.ndarray:
        """log p(y* | data) = log E_q[p(y* | f)] per point, by Gauss–Hermite quadrature
        (data units: real-valued likelihoods include the −log y_scale Jacobian)."""
        mu, var = self._latent(X)
        lik = self.likelihood_
        y = lik.check(as_targets(y, "y (held-out)"))
        if y.size != mu.size:
            raise InputError(f"y has {y.size} values for {mu.size} points.")
        off = self._offset(exposure, mu.size)
        x, w = gauss_hermite()
        f = mu[:, None] + np.sqrt(var)[:, None] * x
        lp = np.asarray(lik.log_prob(jnp.asarray(self.scaler_.y(y))[:, None], jnp.asarray(f),
                                     self.lik_params_, jnp.asarray(off)[:, None]))
        out = sps.logsumexp(lp + np.log(w), axis=1)
        return out - np.log(self.scaler_.y_scale) if lik.standardise else out

    def n_params(self) -> int:
        return int(ravel_pytree(self._params)[0].size)

    def describe(self) -> dict:
        """The fitted hyperparameters that this model has, in data units: ``lengthscale`` (P, D)
        (one row per kernel part), ``latent_mean`` (b) and ``signal_sd`` (√k(0)) of the latent
        f (data units for Gaussian and Student-t; log rate for Poisson; probit/logit scale for
        Bernoulli), the likelihood's own parameters (``noise_sd`` for Gaussian, ``t_scale`` and
        ``t_dof`` for Student-t; none for Poisson and Bernoulli), ``n_features``, ``n_iter``,
        ``optimizer`` and ``objective`` (−ELBO)."""
        check_fitted(self, "q_mean_")
        sc, lik, lp = self.scaler_, self.likelihood_, self.lik_params_
        s = float(sc.y_scale)
        parts = getattr(self.kernel_, "parts", (self.kernel_,))
        out = {"likelihood": lik.name,
               "lengthscale": np.stack([np.broadcast_to(np.asarray(p.lengthscale),
                                                        sc.x_scale.shape) * sc.x_scale
                                        for p in parts]),
               "latent_mean": float(sc.y_mean) + s * self.mean_,
               "signal_sd": s * float(np.sqrt(float(self.kernel_.variance_at_zero))),
               "n_features": int(self.features_.n_features), "n_iter": int(self.n_iter_),
               "optimizer": self.optimizer_, "objective": -float(self.elbo_)}
        if lik.name == "gaussian":
            out["noise_sd"] = s * float(np.sqrt(float(lp["noise"])))
        elif lik.name == "student_t":
            out["t_scale"], out["t_dof"] = s * float(lp["scale"]), float(lik.nu(lp))
        return out
