"""Sensor placement (docs/placement.md, T21) against brute force: every reference below refits the
posterior from scratch (collapsed ``posterior`` on statistics with the sites added, or the exact
GP's formulas) instead of using rank-one updates."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import geogp
from geogp import placement
from geogp.exceptions import InputError, OutputExistsError
from geogp.features.fourier_statistics import SufficientStats, dense_stats
from geogp.models.afs import AFSRegressor
from geogp.models.collapsed import posterior
from geogp.models.exact import regressor as exact
from geogp.placement import Candidates, FeaturePosterior, add_observations, suggest_sites

# small synthetic data: the models' approximation diagnostics warn, beside the point here
pytestmark = pytest.mark.filterwarnings("ignore::geogp.exceptions.ApproximationWarning")

try:  # tiny matrices: threaded BLAS only adds overhead on a shared machine
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None


@pytest.fixture(scope="module", autouse=True)
def _single_threaded_blas():
    if threadpool_limits is None:
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


AXIS = np.linspace(0.05, 0.95, 6)  # 6 × 6 = 36 candidate cells
TARGET_AXIS = np.linspace(0.1, 0.9, 4)  # 16 targets


@pytest.fixture(scope="module")
def afs():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 1, (40, 2))
    y = np.sin(4 * X[:, 0]) + 0.1 * rng.normal(size=40)
    return AFSRegressor(n_features=60, lengthscale=0.3, noise=0.05, optimize=False,
                        margin=0.1).fit(X, y)


@pytest.fixture(scope="module")
def exact_gp():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (30, 2))
    y = np.cos(3 * X[:, 1]) + 0.1 * rng.normal(size=30)
    return exact.ExactGP("matern32", lengthscale=0.3, noise=0.05, optimize=False).fit(X, y)


def _cands():
    return Candidates.grid([AXIS, AXIS])


def _targets():
    return Candidates.grid([TARGET_AXIS, TARGET_AXIS]).coords


# --------------------------------------------------------------------------- references
class AFSReference:
    """Latent covariances of the AFS posterior refitted with extra (noisy) sites.

    Locations are rows of ``P`` (candidates then targets); kernel matrix and features are
    computed once, and every call refits q(u) by ``posterior`` on the data's statistics plus
    the sites' φφᵀ (values do not enter covariances).
    """

    def __init__(self, model, P):
        self.m = model
        ff, sc = model.features_, model.scaler_
        Ps = sc.x(P)
        self.Phi = np.asarray(ff(Ps))
        self.K = np.asarray(model.kernel_(Ps, Ps))
        self.lam = np.exp(np.asarray(ff.log_lambda(model.kernel_)))
        self.kvar0 = float(model.kernel_.variance_at_zero)
        self.noise = model.noise_
        stats = model.stats_
        if stats.diagonal:
            stats = SufficientStats(np.diag(np.asarray(stats.G)), stats.r, stats.yy, stats.n)
        self.stats = stats

    def cov(self, sites, r1, r2, finite_rank=False):
        """C = k − ψᵀψ + ψᵀA⁻¹ψ = k + φᵀQφ (ψᵀA⁻¹ψ = φᵀ(Q + Λ)φ for the finite-rank model)."""
        stats = self.stats
        if len(sites):
            F = self.Phi[list(sites)]
            stats = stats + SufficientStats(F.T @ F, np.zeros(F.shape[1]), 0.0, float(len(F)))
        Q = posterior(np.log(self.lam), self.noise, self.kvar0, stats).quad
        F1, F2 = self.Phi[r1], self.Phi[r2]
        if finite_rank:
            return F1 @ (Q + np.diag(self.lam)) @ F2.T
        return self.K[np.ix_(r1, r2)] + F1 @ Q @ F2.T


class ExactReference:
    """Latent covariances of the exact GP with extra sites appended to its data (numpy)."""

    def __init__(self, model, P):
        sc = model.scaler_
        Xd = np.asarray(model.X_train_)
        self.nd = len(Xd)
        allp = np.vstack([Xd, sc.x(P)])
        self.K = np.asarray(model.kernel_(allp, allp))
        self.noise = model.noise_

    def cov(self, sites, r1, r2, finite_rank=False):
        D = np.concatenate([np.arange(self.nd), self.nd + np.asarray(sites, dtype=int)])
        r1, r2 = self.nd + np.asarray(r1), self.nd + np.asarray(r2)
        L = np.linalg.cholesky(self.K[np.ix_(D, D)] + self.noise * np.eye(len(D)))
        V1 = np.linalg.solve(L, self.K[np.ix_(D, r1)])
        V2 = np.linalg.solve(L, self.K[np.ix_(D, r2)])
        return self.K[np.ix_(r1, r2)] - V1.T @ V2


def brute_scores(ref, strategy, criterion, n_cands, targets, chosen):
    """Score of every candidate (rows 0..n_cands−1) given the chosen ones, from refits."""
    s2 = ref.noise
    out = np.full(n_cands, -np.inf)
    if strategy == "mi":
        base = ref.cov(chosen, targets, targets) + s2 * np.eye(len(targets))
    for a in range(n_cands):
        if a in chosen:
            continue
        if strategy == "variance":
            out[a] = ref.cov(chosen, [a], [a])[0, 0] + s2
        elif strategy == "mi":
            new = ref.cov([*chosen, a], targets, targets) + s2 * np.eye(len(targets))
            if criterion == "marginal":
                out[a] = 0.5 * np.sum(np.log(np.diag(base)) - np.log(np.diag(new)))
            else:
                out[a] = 0.5 * (np.linalg.slogdet(base)[1] - np.linalg.slogdet(new)[1])
        else:  # Krause: H(y_a | A) − H(y_a | V ∖ (A ∪ a))
            rest = [c for c in range(n_cands) if c not in chosen and c != a]
            var_a = ref.cov(chosen, [a], [a], finite_rank=True)[0, 0] + s2
            var_rest = ref.cov(rest, [a], [a], finite_rank=True)[0, 0] + s2
            out[a] = 0.5 * np.log(var_a / var_rest)
    return out


def exhaustive_greedy(ref_cls, model, strategy, criterion, k):
    cands, targets = _cands().coords, _targets()
    ref = ref_cls(model, np.vstack([cands, targets]))
    t_rows = list(range(len(cands), len(cands) + len(targets)))
    chosen, scores = [], []
    for _ in range(k):
        s = brute_scores(ref, strategy, criterion, len(cands), t_rows, chosen)
        chosen.append(int(np.argmax(s)))
        scores.append(s[chosen[-1]])
    return chosen, np.array(scores)


CASES = [("variance", "marginal"), ("mi", "marginal"), ("mi", "joint"), ("krause", "marginal")]


def _unscale(model, strategy, scores):
    return scores * model.scaler_.y_scale**2 if strategy == "variance" else scores


# --------------------------------------------------------------------------- T21: greedy
@pytest.mark.parametrize("strategy,criterion", CASES)
def test_first_pick_is_brute_force_argmax(afs, strategy, criterion):
    (best,), (score,) = exhaustive_greedy(AFSReference, afs, strategy, criterion, 1)
    df = suggest_sites(afs, _cands(), 1, strategy=strategy, criterion=criterion,
                       targets=_targets())
    assert df["index"].iloc[0] == best
    np.testing.assert_allclose(df["score"].iloc[0], _unscale(afs, strategy, score), rtol=1e-9)


@pytest.mark.parametrize("strategy,criterion", CASES)
def test_greedy_matches_exhaustive_greedy(afs, strategy, criterion):
    chosen, scores = exhaustive_greedy(AFSReference, afs, strategy, criterion, 3)
    df = suggest_sites(afs, _cands(), 3, strategy=strategy, criterion=criterion,
                       targets=_targets(), lazy=True)
    assert df["index"].tolist() == chosen
    np.testing.assert_allclose(df["score"], _unscale(afs, strategy, scores), rtol=1e-9)


@pytest.mark.parametrize("strategy,criterion", [("mi", "joint"), ("krause", "marginal")])
def test_exact_gp_matches_exhaustive_greedy(exact_gp, strategy, criterion):
    chosen, scores = exhaustive_greedy(ExactReference, exact_gp, strategy, criterion, 3)
    df = suggest_sites(exact_gp, _cands(), 3, strategy=strategy, criterion=criterion,
                       targets=_targets())
    assert df["index"].tolist() == chosen
    np.testing.assert_allclose(df["score"], scores, rtol=1e-7)


def test_target_std_columns_match_refits(afs):
    """Rank-one C_T updates: mean target std after each site = refitted posterior's, 1e-10."""
    cands, targets = _cands().coords, _targets()
    ref = AFSReference(afs, np.vstack([cands, targets]))
    rows = list(range(len(cands), len(cands) + len(targets)))
    df = suggest_sites(afs, _cands(), 3, strategy="mi", targets=targets)
    ys = afs.scaler_.y_scale
    prev = np.sqrt(np.diag(ref.cov([], rows, rows))) * ys
    for k in range(3):
        picks = df["index"][:k + 1].tolist()
        sd = np.sqrt(np.diag(ref.cov(picks, rows, rows))) * ys
        np.testing.assert_allclose(df["mean_std_after"][k], sd.mean(), rtol=1e-10)
        np.testing.assert_allclose(df["std_reduction"][k], np.mean(prev - sd), rtol=1e-8)
        before = np.sqrt(ref.cov(picks[:-1], picks[-1:], picks[-1:])[0, 0]) * ys
        np.testing.assert_allclose(df["std_before"][k], before, rtol=1e-10)
        prev = sd


# --------------------------------------------------------------------------- rank-one = refit
def _check_posteriors(p1, p2):
    for name in ("weights", "quad", "chol"):
        a, b = np.asarray(getattr(p1, name)), np.asarray(getattr(p2, name))
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-8 * np.abs(b).max(), err_msg=name)


def test_rank_one_update_equals_refit(afs, rng):
    sites = rng.uniform(0.1, 0.9, (3, 2))
    values = rng.normal(size=3)
    ff, sc = afs.features_, afs.scaler_
    fp = FeaturePosterior.from_model(afs)
    Psi = np.asarray(ff(sc.x(sites))) * np.asarray(afs.posterior_.sqrt_lam)
    for psi, v in zip(Psi, sc.y(values), strict=True):
        fp.add(psi, v)
    stats = afs.stats_ + dense_stats(ff, sc.x(sites), sc.y(values))
    ll = np.asarray(ff.log_lambda(afs.kernel_))
    refit = posterior(ll, afs.noise_, afs.kernel_.variance_at_zero, stats)
    _check_posteriors(fp.posterior(), refit)
    # the model-level helper gives the refitted predictions
    updated = add_observations(afs, sites, values)
    P = rng.uniform(0, 1, (5, 2))
    pred = updated.predict(P)
    Phi = np.asarray(ff(sc.x(P)))
    np.testing.assert_allclose(pred.mean, sc.y_mean + sc.y_scale * (Phi @ refit.weights),
                               rtol=1e-9)


def test_rank_one_update_from_diagonal_statistics(rng):
    """Complete grid (G = N·I, Lemma 3.1): the (M,) factor branch, then a scattered site."""
    ax = np.linspace(0, 1, 24)
    z = np.sin(3 * ax)[:, None] + np.cos(2 * ax)[None, :] + 0.05 * rng.normal(size=(24, 24))
    m = AFSRegressor(n_features=40, lengthscale=0.3, noise=0.1, optimize=False,
                     grid_mode="diagonal")
    m.fit_grid([ax, ax], z)
    assert m.stats_.diagonal
    site, value = np.array([[0.33, 0.71]]), np.array([0.4])
    updated = add_observations(m, site, value)
    ff, sc = m.features_, m.scaler_
    G = np.diag(np.asarray(m.stats_.G))
    stats = SufficientStats(G, m.stats_.r, m.stats_.yy, m.stats_.n)
    stats = stats + dense_stats(ff, sc.x(site), sc.y(value))
    refit = posterior(np.asarray(ff.log_lambda(m.kernel_)), m.noise_,
                      m.kernel_.variance_at_zero, stats)
    _check_posteriors(updated.posterior_, refit)


# --------------------------------------------------------------------------- MI properties
def test_krause_gains_nonnegative_nonincreasing_and_lazy_equals_plain(afs):
    cands = Candidates.grid([np.linspace(0.02, 0.98, 15)] * 2)  # 225 candidates
    lazy = suggest_sites(afs, cands, 12, strategy="krause", lazy=True)
    plain = suggest_sites(afs, cands, 12, strategy="krause", lazy=False)
    assert lazy["index"].tolist() == plain["index"].tolist()
    np.testing.assert_allclose(lazy["score"], plain["score"], rtol=1e-9)
    gains = plain["score"].to_numpy()
    assert np.all(gains >= 0)
    assert np.all(np.diff(gains) <= 1e-12)  # submodular: diminishing returns


@pytest.mark.parametrize("criterion", ["marginal", "joint"])
def test_mi_gains_nonnegative_nonincreasing(afs, criterion):
    df = suggest_sites(afs, _cands(), 10, strategy="mi", criterion=criterion, targets=_targets())
    gains = df["score"].to_numpy()
    assert np.all(gains >= 0)
    assert np.all(np.diff(gains) <= 1e-12)


@pytest.mark.parametrize("strategy", ["variance", "mi", "krause"])
def test_batch_equals_sequential_steps(afs, strategy):
    """A batch of q is q greedy steps: one call with n=q = q calls adding the previous picks."""
    cands = _cands()
    batch = suggest_sites(afs, cands, 4, strategy=strategy, targets=_targets())
    seq = []
    for _ in range(4):
        existing = cands.coords[seq] if seq else None
        df = suggest_sites(afs, cands, 1, strategy=strategy, targets=_targets(),
                           existing=existing, exclude=np.isin(np.arange(len(cands)), seq))
        seq.append(int(df["index"].iloc[0]))
    assert batch["index"].tolist() == seq


def test_values_do_not_change_the_picks(afs, rng):
    """Imputing the new values by the predictive mean or using true values: same picks."""
    sites = rng.uniform(0.1, 0.9, (3, 2))
    with_values = add_observations(afs, sites, rng.normal(size=3) * 5)
    imputed = add_observations(afs, sites)
    a = suggest_sites(with_values, _cands(), 4, targets=_targets())
    b = suggest_sites(imputed, _cands(), 4, targets=_targets())
    c = suggest_sites(afs, _cands(), 4, targets=_targets(), existing=sites)
    assert a["index"].tolist() == b["index"].tolist() == c["index"].tolist()
    np.testing.assert_allclose(a["score"], c["score"], rtol=1e-9)
    np.testing.assert_allclose(imputed.predict(sites).mean, afs.predict(sites).mean, rtol=1e-9)


# --------------------------------------------------------------------------- operators
def test_grid_and_point_operators_equal_dense(afs, rng):
    from geogp.placement import operators as placement

    ff, sc = afs.features_, afs.scaler_
    sl = np.asarray(afs.posterior_.sqrt_lam)
    ax0, ax1 = np.linspace(0.05, 0.95, 7), np.linspace(0.1, 0.9, 5)
    mask = rng.uniform(size=(7, 5)) < 0.7
    cands = Candidates.grid([ax0, ax1], mask)
    Xs = sc.x(cands.coords)
    dense = placement._DenseOps(np.asarray(ff(Xs)) * sl)
    saxes = [(a - m) / s for a, m, s in zip([ax0, ax1], sc.x_mean, sc.x_scale, strict=True)]
    M = ff.n_features
    W = rng.normal(size=(M, 3))
    B = rng.normal(size=(M, M))
    B = B @ B.T / M
    omega = rng.uniform(0.5, 2.0, len(Xs))  # target weights of the placement bounds
    for ops in (placement._GridOps(ff, sl, saxes, cands.flat), placement._PointOps(ff, sl, Xs)):
        np.testing.assert_allclose(ops.apply(W[:, 0]), dense.apply(W[:, 0]), atol=1e-11)
        np.testing.assert_allclose(ops.apply(W), dense.apply(W), atol=1e-11)
        np.testing.assert_allclose(ops.quad(B), dense.quad(B), rtol=1e-9)
        np.testing.assert_allclose(ops.sq_norms(), dense.sq_norms(), rtol=1e-11)
        np.testing.assert_allclose(ops.gram(), dense.gram(), atol=1e-9 * len(Xs))
        np.testing.assert_allclose(ops.rows([2, 0]), dense.rows([2, 0]), atol=1e-13)
        np.testing.assert_allclose(ops.apply_t(W), dense.apply_t(W), atol=1e-11)
        np.testing.assert_allclose(ops.wgram(omega), dense.wgram(omega), atol=1e-9 * len(Xs))
    np.testing.assert_allclose(dense.apply_t(W), (dense.Psi @ W).T, atol=1e-13)
    P = dense.Psi
    np.testing.assert_allclose(dense.wgram(omega), P.T @ (omega[:, None] * P), atol=1e-12)


@pytest.mark.parametrize("strategy", ["variance", "mi", "krause"])
def test_fast_operators_give_the_same_picks(afs, strategy):
    cands = _cands()
    a = suggest_sites(afs, cands, 4, strategy=strategy, targets=_targets())
    b = suggest_sites(afs, cands, 4, strategy=strategy, targets=_targets(), dense_limit=0)
    c = suggest_sites(afs, cands.coords, 4, strategy=strategy, targets=_targets(), dense_limit=0)
    assert a["index"].tolist() == b["index"].tolist() == c["index"].tolist()
    np.testing.assert_allclose(b["score"], a["score"], rtol=1e-8)


# --------------------------------------------------------------------------- constraints
@pytest.mark.filterwarnings("ignore::geogp.exceptions.PlacementWarning")
@pytest.mark.parametrize("strategy", ["variance", "mi", "krause"])
def test_exclusion_and_min_distance(afs, strategy):
    cands = _cands()
    exclude = np.zeros((6, 6), dtype=bool)
    exclude[:3] = True  # the whole first half of axis 0
    existing = np.array([[0.95, 0.95]])
    df = suggest_sites(afs, cands, 5, strategy=strategy, exclude=exclude, min_distance=0.3,
                       existing=existing, lazy=True)
    pts = df[["x", "y"]].to_numpy()
    assert np.all(pts[:, 0] > AXIS[2])
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1) + np.eye(len(pts))
    assert d.min() >= 0.3
    assert np.linalg.norm(pts - existing, axis=1).min() >= 0.3
    # without constraints the picks enter the excluded half and come closer (so both bite)
    free = suggest_sites(afs, cands, 5, strategy=strategy).loc[:, ["x", "y"]].to_numpy()
    fd = np.linalg.norm(free[:, None] - free[None], axis=-1) + np.eye(5)
    assert free[:, 0].min() <= AXIS[2] or fd.min() < 0.3


def test_min_distance_can_stop_early(afs):
    import warnings

    from geogp.exceptions import PlacementWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = suggest_sites(afs, _cands(), 10, strategy="variance", min_distance=0.6)
    assert [type(w.message) for w in caught] == [PlacementWarning]
    assert f"only {len(df)} of 10 sites" in str(caught[0].message)
    assert 0 < len(df) < 10
    assert df.attrs["stopped"] == "no candidate left"


def test_cost_and_budget(afs):
    cands = _cands()
    free = suggest_sites(afs, cands, 1, strategy="variance")
    best = int(free["index"].iloc[0])
    cost = np.ones(len(cands))
    cost[best] = 100.0
    df = suggest_sites(afs, cands, 1, strategy="variance", cost=cost)
    assert df["index"].iloc[0] != best  # ranked by score / cost
    cost = np.linspace(1, 3, len(cands))
    with pytest.warns(UserWarning):
        df = suggest_sites(afs, cands, 20, strategy="mi", cost=cost, budget=7.5,
                           targets=_targets())
    assert df["cumulative_cost"].iloc[-1] <= 7.5
    assert df.attrs["stopped"] == "budget exhausted"
    np.testing.assert_allclose(df["cost"], cost[df["index"]])
    with pytest.warns(UserWarning, match="budget exhausted"):
        df = suggest_sites(afs, cands, 5, strategy="krause", budget=3)  # unit costs: 3 sites
    assert len(df) == 3 and df["cumulative_cost"].iloc[-1] == 3


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs,match", [
    ({"n": 37}, "only 36 of 36"),
    ({"n": 0}, "positive integer"),
    ({"strategy": "random"}, "strategy"),
    ({"criterion": "full"}, "criterion"),
    ({"cost": -1.0}, "cost"),
    ({"budget": 0.0}, "budget"),
    ({"min_distance": np.nan}, "min_distance"),
    ({"exclude": np.zeros(5, dtype=bool)}, "exclude"),
    ({"existing": np.array([[np.nan, 0.5]])}, "NaN"),
    ({"targets": np.zeros((3, 3))}, "columns"),
])
def test_bad_arguments_raise_input_error(afs, kwargs, match):
    args = {"n": 2, **kwargs}
    n = args.pop("n")
    with pytest.raises(InputError, match=match):
        suggest_sites(afs, _cands(), n, **args)


def test_bad_candidates_raise_input_error(afs):
    with pytest.raises(InputError, match="NaN"):
        suggest_sites(afs, np.array([[0.5, np.nan], [0.2, 0.2]]), 1)
    with pytest.raises(InputError, match="empty"):
        suggest_sites(afs, np.zeros((0, 2)), 1)
    with pytest.raises(InputError, match="no cell"):
        Candidates.grid([AXIS, AXIS], np.zeros((6, 6), dtype=bool))
    with pytest.raises(InputError, match="columns"):
        suggest_sites(afs, np.zeros((4, 3)), 1)
    with pytest.raises(InputError, match="outside"):
        suggest_sites(afs, np.array([[5.0, 5.0]]), 1)
    with pytest.raises(InputError, match="fitted"):
        suggest_sites(AFSRegressor(), _cands(), 1)
    from geogp.models.lattice import LatticeRegressor

    lattice = LatticeRegressor(margin=1, optimize=False).fit_grid(
        [AXIS, AXIS], np.add.outer(AXIS, AXIS))
    with pytest.raises(InputError, match="not available for the lattice model"):
        suggest_sites(lattice, _cands(), 1, strategy="krause")
    with pytest.raises(InputError, match="strategy 'reduction' is not available for the afs"):
        suggest_sites(afs, _cands(), 1, strategy="reduction")


# --------------------------------------------------------------------------- outputs
def test_geojson_and_csv(afs, tmp_path):
    df = suggest_sites(afs, _cands(), 3, strategy="variance")
    path = placement.write_geojson(df, tmp_path / "sites.geojson", crs=32633)
    doc = json.loads(path.read_text())
    assert doc["type"] == "FeatureCollection" and len(doc["features"]) == 3
    assert doc["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::32633"
    f0 = doc["features"][0]
    assert f0["geometry"] == {"type": "Point", "coordinates": [df["x"][0], df["y"][0]]}
    assert f0["properties"]["order"] == 1
    np.testing.assert_allclose(f0["properties"]["score"], df["score"][0])
    with pytest.raises(OutputExistsError):
        placement.write_geojson(df, path)
    placement.write_geojson(df, path, overwrite=True)
    csv = placement.write_csv(df, tmp_path / "sites.csv")
    back = pd.read_csv(csv)
    np.testing.assert_allclose(back[["x", "y", "score"]], df[["x", "y", "score"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sites.csv", "sites.geojson"]


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    df = pd.DataFrame({"order": [1], "x": [0.0], "y": [1.0]})

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(RuntimeError):
        placement.write_csv(df, tmp_path / "a.csv")
    assert list(tmp_path.iterdir()) == []


def test_plot_sites(afs):
    import matplotlib

    matplotlib.use("Agg")
    df = suggest_sites(afs, _cands(), 3, strategy="variance")
    pred = afs.predict_grid([AXIS, AXIS])
    ax = placement.plot_sites(df, pred.std_latent.T, AXIS, AXIS, existing=np.array([[0.5, 0.5]]))
    assert len(ax.collections) >= 3
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


def test_float64_switch_is_on():
    assert geogp.__version__
    assert np.asarray(placement.FeaturePosterior(np.ones(2), np.eye(2), np.eye(2), np.zeros(2),
                                                 1.0, 1.0).Ainv).dtype == np.float64


# --------------------------------------------------------------------------- CLI
def _raster(path, rng, crs="EPSG:32633"):
    import rioxarray  # noqa: F401
    import xarray as xr

    y, x = 5000.0 - 100.0 * np.arange(18), 300000.0 + 100.0 * np.arange(22)
    z = np.sin(x / 400.0)[None, :] + np.cos(y / 300.0)[:, None] + 0.05 * rng.normal(size=(18, 22))
    z[4:9, 6:12] = np.nan
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="z").rio.write_crs(crs)
    da.rio.to_raster(path)
    return da


def _run_cli(argv):
    import argparse

    from geogp.cli.place import add_place_parser, run_place

    parser = argparse.ArgumentParser(prog="geogp")
    add_place_parser(parser.add_subparsers(dest="command"))
    return run_place(parser.parse_args(argv))


def test_cli_place_end_to_end(tmp_path, rng, capsys):
    da = _raster(tmp_path / "in.tif", rng)
    mask = xr_like(da, 0.0)
    mask[:, :11] = 1.0  # exclude the western half
    mask.rio.to_raster(tmp_path / "mask.tif")
    out, csv, png = tmp_path / "s.geojson", tmp_path / "s.csv", tmp_path / "s.png"
    argv = ["place", str(tmp_path / "in.tif"), "--n", "4", "--out", str(out), "--csv", str(csv),
            "--map", str(png), "--features", "64", "--maxiter", "15", "--min-distance", "250",
            "--exclude", str(tmp_path / "mask.tif"), "--quiet"]
    assert _run_cli(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::32633"
    xy = np.array([f["geometry"]["coordinates"] for f in doc["features"]])
    assert xy.shape == (4, 2)
    assert np.all(xy[:, 0] >= float(da.x[11]))  # exclusion respected, in CRS units
    assert np.all(np.isin(xy[:, 0], da.x.values)) and np.all(np.isin(xy[:, 1], da.y.values))
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + 1e9 * np.eye(4)
    assert d.min() >= 250
    table = pd.read_csv(csv)
    np.testing.assert_allclose(table[["x", "y"]], xy)
    assert png.stat().st_size > 0
    assert capsys.readouterr().out == ""  # --quiet
    # existing outputs are refused without --overwrite (exit 2, one line, file unchanged)
    before = out.read_text()
    assert _run_cli(argv) == 2
    assert "already exists" in capsys.readouterr().err
    assert out.read_text() == before


def test_cli_place_bad_input(tmp_path, capsys):
    code = _run_cli(["place", str(tmp_path / "missing.tif"), "--out", str(tmp_path / "a.geojson")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("geogp: error:") and err.count("\n") == 1
    assert not (tmp_path / "a.geojson").exists()


def xr_like(da, value):
    out = da.copy(data=np.full(da.shape, value))
    out.name = "mask"
    return out


@pytest.mark.parametrize("dims", [1, 3])
def test_grid_operators_other_dimensions(dims, rng):
    """Separable grid products in 1-D and the trigonometric fallback in 3-D equal dense ones."""
    from geogp.features.fourier import FourierFeatures
    from geogp.placement import operators as placement

    ff = FourierFeatures.build(np.zeros(dims), np.full(dims, 2.4), (5,) * dims)
    sl = rng.uniform(0.2, 1.0, ff.n_features)
    axes = [np.linspace(-1.0, 1.0, 6 + d) for d in range(dims)]
    cands = Candidates.grid(axes)
    dense = placement._DenseOps(np.asarray(ff(cands.coords)) * sl)
    ops = placement._GridOps(ff, sl, axes, cands.flat)
    B = rng.normal(size=(ff.n_features, ff.n_features))
    W = rng.normal(size=(ff.n_features, 2))
    np.testing.assert_allclose(ops.quad(B + B.T), dense.quad(B + B.T), atol=1e-10)
    np.testing.assert_allclose(ops.sq_norms(), dense.sq_norms(), rtol=1e-12)
    np.testing.assert_allclose(ops.apply(W), dense.apply(W), atol=1e-12)
