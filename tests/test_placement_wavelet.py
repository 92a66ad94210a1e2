"""Sensor placement with wavelet models (geogp/placement/wavelet.py, docs/placement.md).

Every reference is independent of the code under test: the dense posterior of the finite
wavelet prior, B = diag(1/λ) + σ⁻² Φ Φᵀ over all M basis functions (dense Φ from the basis,
λ from the prior module, numpy solves), refitted with the added sites; or a WaveletRegressor
fitted on the data plus the sites at the same fixed hyperparameters.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from geogp import linalg
from geogp.exceptions import InputError, MemoryEstimateError
from geogp.models.wavelet import WaveletRegressor
from geogp.models.wavelet.prior import log_precisions
from geogp.placement import Candidates, suggest_sites
from geogp.placement import wavelet as pw

BACKENDS = ["dense"] + (["cholmod"] if linalg.HAVE_CHOLMOD else [])


# --------------------------------------------------------------------------- references
class DenseReference:
    """Dense posterior of a fitted wavelet model: B = diag(1/λ) + σ⁻² Φ_D Φ_Dᵀ (all M functions)."""

    def __init__(self, model, X_data):
        b, pr = model.basis_, model.problem_
        m = b.n_features
        idx = b.unravel(np.arange(m))
        log_lam = np.asarray(log_precisions(model.params_, b.dims, idx, pr.normalisation,
                                            pr.location))
        self.lam = np.exp(log_lam) * float(model.params_["amplitude"])
        self.noise = float(model.params_["noise"])
        self.model = model
        Phi = self.phi(X_data)
        self.B = np.diag(1.0 / self.lam) + Phi @ Phi.T / self.noise

    def phi(self, X):
        """Dense Φ (M, N) at X in the model's input units (the last one cached)."""
        X = np.asarray(X, dtype=np.float64)
        cache = self.__dict__.setdefault("_phi_cache", {})
        key = (X.shape, X.tobytes())
        if key not in cache:
            cache.clear()
            cache[key] = self.model.basis_.feature_matrix(self.model.scaler_.x(X)).toarray()
        return cache[key]

    def with_sites(self, S):
        out = object.__new__(DenseReference)
        out.__dict__.update(self.__dict__)
        P = self.phi(S)
        out.B = self.B + P @ P.T / self.noise
        return out

    def cov(self, X, Z=None):
        P = self.phi(X)
        Q = P if Z is None else self.phi(Z)
        return P.T @ np.linalg.solve(self.B, Q)

    def var(self, X):
        V = np.linalg.solve(np.linalg.cholesky(self.B), self.phi(X))  # B = LLᵀ: ‖L⁻¹φ‖²
        return np.sum(V**2, axis=0)


def _data_1d(rng, n=70):
    X = np.sort(rng.uniform(0.0, 1.0, n))[:, None]
    X = X[(X[:, 0] < 0.4) | (X[:, 0] > 0.65)]  # a gap
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=X.shape[0])
    return X, y


def _raster(rng, ny=40, nx=60):
    ay, ax = np.linspace(0.0, 2.0, ny), np.linspace(0.0, 3.0, nx)
    Y, Xg = np.meshgrid(ay, ax, indexing="ij")
    v = np.sin(2 * Y) + np.cos(1.5 * Xg) + 0.05 * rng.normal(size=Y.shape)
    v[10:22, 25:45] = np.nan  # a large gap
    v[rng.uniform(size=v.shape) < 0.3] = np.nan  # and scattered missing cells
    return ay, ax, v


def _fit_raster(rng, backend="auto", **kw):
    ay, ax, v = _raster(rng)
    m = WaveletRegressor("db2", iota=-2, j_max=0, noise=0.05, optimize=False, backend=backend,
                         **kw).fit_grid([ay, ax], v)
    Y, Xg = np.meshgrid(ay, ax, indexing="ij")
    obs = np.isfinite(v)
    cells = np.stack([Y.ravel(), Xg.ravel()], axis=1)
    return m, np.stack([Y[obs], Xg[obs]], axis=1), cells, (ay, ax, v)


# --------------------------------------------------------------------------- 1. rank-one = refit
@pytest.mark.parametrize("backend", BACKENDS)
def test_rank_one_updates_equal_dense_refit_1d(rng, backend):
    X, y = _data_1d(rng)
    m = WaveletRegressor("db2", iota=0, j_max=4, noise=0.05, optimize=False,
                         backend=backend).fit(X, y)
    assert pw._uses_cholmod(m.problem_) == (backend == "cholmod")
    ref = DenseReference(m, X)
    T = np.linspace(0.0, 1.0, 57)[:, None]
    np.testing.assert_allclose(m.posterior_.predict(m.scaler_.x(T))[1], ref.var(T), rtol=1e-9)
    post = pw.SparseFeaturePosterior(m, dense_max=0)  # CHOLMOD solves even for small M_a
    assert pw._sparse_solves(m.problem_, 0) == (backend == "cholmod")
    P = post.features(m.scaler_.x(T))
    S = np.array([[0.5], [0.45], [0.62], [0.1], [0.5]])  # in the gap, twice at one place
    for k in range(1, S.shape[0] + 1):
        post.add(post.features(m.scaler_.x(S[k - 1:k])))
        refk = ref.with_sites(S[:k])
        np.testing.assert_allclose(post.var_latent(P), refk.var(T), rtol=1e-8)
    np.testing.assert_allclose(post.covariance(P, P), refk.cov(T), rtol=1e-8,
                               atol=1e-10 * refk.var(T).max())
    assert post.W.shape[1] == S.shape[0]  # one stored solve vector per site


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank_one_updates_equal_dense_refit_2d_raster(rng, backend):
    m, Xobs, cells, _ = _fit_raster(rng, backend)
    assert m.n_features_ <= 400  # small: the dense reference is cheap
    ref = DenseReference(m, Xobs)
    T = cells[::7]
    post = pw.SparseFeaturePosterior(m, dense_max=0)
    P = post.features(m.scaler_.x(T))
    S = np.array([[0.8, 1.6], [0.75, 1.7], [1.9, 0.1], [0.0, 3.0]])  # gap, corners
    for k in range(1, S.shape[0] + 1):
        post.add(post.features(m.scaler_.x(S[k - 1:k])))
    refk = ref.with_sites(S)
    np.testing.assert_allclose(post.var_latent(P), refk.var(T), rtol=1e-8)


def test_rank_one_updates_equal_refitted_model(rng):
    """A WaveletRegressor fitted on the data plus the sites (any y) at the same fixed θ."""
    X, y = _data_1d(rng)
    kw = dict(iota=0, j_max=4, noise=0.05, optimize=False, standardize=False, margin=0.1)
    m = WaveletRegressor("db2", **kw).fit(X, y)
    S = np.array([[0.5], [0.55], [0.6], [0.2]])  # inside the data's box: same window
    X2 = np.vstack([X, S])
    m2 = WaveletRegressor("db2", **kw).fit(X2, np.concatenate([y, rng.normal(size=4)]))
    np.testing.assert_array_equal(m2.basis_.window, m.basis_.window)
    assert m2.n_active_features_ > m.n_active_features_  # the sites wake pruned features
    post = pw.SparseFeaturePosterior(m)
    T = np.linspace(X.min(), X.max(), 61)[:, None]
    P = post.features(T)
    for s in S:
        post.add(post.features(s[None]))
    np.testing.assert_allclose(post.var_latent(P), m2.posterior_.predict(T)[1], rtol=1e-8)


# ------------------------------------------------------------------------- 2. greedy = brute force
@pytest.mark.parametrize("strategy", ["variance", "mi"])
def test_greedy_equals_brute_force(rng, strategy):
    X, y = _data_1d(rng, 40)
    m = WaveletRegressor("db2", iota=0, j_max=3, noise=0.05, optimize=False,
                         standardize=False).fit(X, y)
    ref = DenseReference(m, X)
    C = np.linspace(0.02, 0.98, 25)[:, None]
    T = np.linspace(0.0, 1.0, 31)[:, None]
    k = 4
    got = suggest_sites(m, Candidates.points(C), k, strategy=strategy, targets=T,
                        min_distance=0.0)
    assert got.attrs["model"] == "wavelet_basis"
    chosen = []
    for step in range(k):
        cur = ref.with_sites(C[chosen]) if chosen else ref
        base = cur.var(T) + ref.noise
        scores = np.full(C.shape[0], -np.inf)
        for c in range(C.shape[0]):
            if c in chosen:
                continue
            if strategy == "variance":  # predictive variance of a new measurement
                scores[c] = cur.var(C[c:c + 1])[0] + ref.noise
            else:  # ½ Σ_i log((C_ii + σ²)/(C_ii^{(c)} + σ²)), by a dense refit with c added
                after = ref.with_sites(C[[*chosen, c]]).var(T) + ref.noise
                scores[c] = 0.5 * np.sum(np.log(base / after))
        best = int(np.argmax(scores))
        assert got["index"].iloc[step] == best
        np.testing.assert_allclose(got["score"].iloc[step], scores[best], rtol=1e-8)
        chosen.append(best)
    # the reported std after the last site is the refit's mean target std
    after = np.sqrt(ref.with_sites(C[chosen]).var(T))
    np.testing.assert_allclose(got["mean_std_after"].iloc[-1], after.mean(), rtol=1e-8)


@pytest.mark.parametrize("with_existing", [False, True])
def test_krause_greedy_equals_brute_force(rng, with_existing):
    """Krause et al. (2008): δ_a = ½ log(σ²_{a|A} / σ²_{a|V∖(A∪a)}), each conditional variance
    from a dense refit of the finite prior with the sites it conditions on; existing sensors
    (one of them on a candidate) belong to A."""
    X, y = _data_1d(rng, 40)
    m = WaveletRegressor("db2", iota=0, j_max=3, noise=0.05, optimize=False,
                         standardize=False).fit(X, y)
    ref = DenseReference(m, X)
    C = np.linspace(0.02, 0.98, 21)[:, None]
    E = np.vstack([C[[10]], [[0.31]]]) if with_existing else np.zeros((0, 1))
    taken = [10] if with_existing else []
    k = 3
    exclude = np.isin(np.arange(C.shape[0]), taken)  # the sensor already there
    got = suggest_sites(m, Candidates.points(C), k, strategy="krause", min_distance=0.0,
                        existing=E if with_existing else None, exclude=exclude)
    chosen = []
    for step in range(k):
        scores = np.full(C.shape[0], -np.inf)
        for c in range(C.shape[0]):
            if c in chosen or c in taken:
                continue
            given_a = ref.with_sites(np.vstack([E, C[chosen]]))
            rest = [i for i in range(C.shape[0]) if i not in chosen + taken + [c]]
            given_rest = ref.with_sites(C[rest])
            v_a = given_a.var(C[c:c + 1])[0] + ref.noise
            v_rest = given_rest.var(C[c:c + 1])[0] + ref.noise
            scores[c] = 0.5 * np.log(v_a / v_rest)
        best = int(np.argmax(scores))
        assert got["index"].iloc[step] == best
        np.testing.assert_allclose(got["score"].iloc[step], scores[best], rtol=1e-8)
        chosen.append(best)


def test_existing_sensors_and_joint_criterion(rng):
    X, y = _data_1d(rng, 40)
    m = WaveletRegressor("db2", iota=0, j_max=3, noise=0.05, optimize=False,
                         standardize=False).fit(X, y)
    ref = DenseReference(m, X)
    C = np.linspace(0.02, 0.98, 25)[:, None]
    E = np.array([[0.5]])
    got = suggest_sites(m, Candidates.points(C), 2, strategy="mi", criterion="joint",
                        existing=E, min_distance=0.0)
    cur = ref.with_sites(E)
    R = cur.cov(C) + ref.noise * np.eye(C.shape[0])
    _, logdet0 = np.linalg.slogdet(R)
    scores = []
    for c in range(C.shape[0]):  # thesis criterion: ½ log|C_T + σ²I| − ½ log|C_T^{(c)} + σ²I|
        Rc = ref.with_sites(np.vstack([E, C[[c]]])).cov(C) + ref.noise * np.eye(C.shape[0])
        scores.append(0.5 * (logdet0 - np.linalg.slogdet(Rc)[1]))
    assert got["index"].iloc[0] == int(np.argmax(scores))
    np.testing.assert_allclose(got["score"].iloc[0], max(scores), rtol=1e-7)


# --------------------------------------------------------------------------- 3. memory refusal
def test_memory_refusal_before_allocating(rng, monkeypatch):
    X, y = _data_1d(rng, 40)
    m = WaveletRegressor("db2", iota=0, j_max=3, noise=0.05, optimize=False).fit(X, y)
    C = Candidates.points(np.linspace(0.0, 1.0, 500)[:, None])
    need = pw.wavelet_memory_estimate(500, 500, m, n_sites=3, strategy="mi")

    def boom(*args, **kw):
        raise AssertionError("allocated before refusing")

    monkeypatch.setattr(pw.SparseFeaturePosterior, "__init__", boom)
    with pytest.raises(MemoryEstimateError) as info:
        suggest_sites(m, C, 3, strategy="mi", max_memory=need / 2)
    assert info.value.needed_bytes == pytest.approx(need)
    assert f"{need / 2**30:.2f} GiB" in str(info.value)
    assert info.value.limit_bytes == need / 2
    # the |V_c| × |T| matrix of "mi" is in the estimate: more targets, more bytes
    assert pw.wavelet_memory_estimate(500, 5000, m, n_sites=3, same=False) > need + 8 * 500 * 4000


def test_memory_estimate_bounds_measured_peak(rng):
    import tracemalloc

    m, _, cells, _ = _fit_raster(rng)
    cands = Candidates.points(cells)
    need = pw.wavelet_memory_estimate(len(cands), len(cands), m, n_sites=5, strategy="mi")
    tracemalloc.start()
    try:
        suggest_sites(m, cands, 5, strategy="mi", min_distance=0.0, max_targets=len(cands),
                      max_bytes=2**40)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= need, (peak, need)


# --------------------------------------------------------------------------- 4. suggest_sites
def _mean_var_after(ref, sites, T):
    return float(np.mean(ref.with_sites(sites).var(T)))


@pytest.mark.parametrize("backend", BACKENDS[-1:])  # the sparse route (dense: tests above)
def test_suggest_sites_raster(rng, backend, monkeypatch):
    monkeypatch.setattr(pw, "_DENSE_SOLVE_MAX", 0)  # CHOLMOD solves even for small M_a
    m, Xobs, cells, (ay, ax, _v) = _fit_raster(rng, backend)
    ref = DenseReference(m, Xobs)
    cands = Candidates.grid([ay, ax])
    k, md = 8, 0.3
    T = cells  # the targets are the candidates (every cell)
    before = float(np.mean(ref.var(T)))
    reductions = {}
    for strategy in ("variance", "mi"):
        s = suggest_sites(m, cands, k, strategy=strategy, min_distance=md, names=("y", "x"),
                          max_targets=len(cells))  # every cell a target: no thinning
        assert len(s) == k and s.attrs["model"] == "wavelet_basis"
        xy = s[["y", "x"]].to_numpy()
        np.testing.assert_array_equal(xy, cells[s["index"].to_numpy()])
        assert np.all((xy >= [ay.min(), ax.min()]) & (xy <= [ay.max(), ax.max()]))
        dist = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + 1e9 * np.eye(k)
        assert dist.min() >= md
        # the reported mean std after the sites is the dense refit's
        after = np.sqrt(ref.with_sites(xy).var(T)) * m.scaler_.y_scale
        np.testing.assert_allclose(s["mean_std_after"].iloc[-1], after.mean(), rtol=1e-7)
        reductions[strategy] = before - _mean_var_after(ref, xy, T)
    random = []
    pick = np.random.default_rng(1)
    for _ in range(12):
        idx = pick.choice(cells.shape[0], size=k, replace=False)
        random.append(before - _mean_var_after(ref, cells[idx], T))
    for strategy, red in reductions.items():
        assert red > np.max(random), (strategy, red, np.max(random))
    # mutual information aims at the targets' variance: at least as good as max-variance here
    assert reductions["mi"] >= 0.95 * reductions["variance"]


@pytest.mark.parametrize("strategy", ["variance", "mi"])
def test_raster_candidates_per_axis_equal_the_sparse_route(rng, strategy, monkeypatch):
    """Candidates on a raster are applied per axis (_GridOps, never formed); the same cells
    given as points go through the sparse features. Same sites, scores and stds, with an
    existing sensor absorbed first."""
    m, _, cells, (ay, ax, _) = _fit_raster(rng)
    built = []
    real = pw._GridOps.__init__
    monkeypatch.setattr(pw._GridOps, "__init__",
                        lambda self, *a: built.append(1) or real(self, *a))
    T, E = cells[::7], cells[[123]]
    kw = dict(strategy=strategy, targets=T, existing=E, min_distance=0.0)
    grid = suggest_sites(m, Candidates.grid([ay, ax]), 5, **kw)
    assert built == [1]
    pts = suggest_sites(m, Candidates.points(cells), 5, **kw)
    assert built == [1]
    assert list(grid["index"]) == list(pts["index"])
    np.testing.assert_allclose(grid["score"], pts["score"], rtol=1e-8)
    np.testing.assert_allclose(grid["mean_std_after"], pts["mean_std_after"], rtol=1e-8)
    # a masked subset of the cells, on decreasing axes: the per-axis route indexes the kept
    # cells by their flat positions, and agrees with the same cells as points
    mask = np.zeros((ay.size, ax.size), bool)
    mask[::2, 5:50] = True
    sub = Candidates.grid([ay[::-1], ax], mask)
    a = suggest_sites(m, sub, 4, **kw)
    b = suggest_sites(m, Candidates.points(sub.coords), 4, **kw)
    assert built == [1, 1]
    assert list(a["index"]) == list(b["index"])
    np.testing.assert_allclose(a["score"], b["score"], rtol=1e-8)
    built.clear()
    built.append(1)
    # a grid reaching beyond the window, with the outside cells masked out: the sparse
    # route takes over (the per-axis one would evaluate every row and column)
    wide = np.concatenate([ay, [ay[-1] + 50.0]])
    mask = np.ones((wide.size, ax.size), bool)
    mask[-1] = False
    masked = suggest_sites(m, Candidates.grid([wide, ax], mask), 5, **kw)
    assert built == [1]
    assert list(masked["score"]) == pytest.approx(list(pts["score"]), rel=1e-8)
    # and the memory estimate of the per-axis route is far below the sparse one's
    args = (len(cells), len(T), m)
    assert (pw.wavelet_memory_estimate(*args, n_sites=6, same=False, grid=True)
            < pw.wavelet_memory_estimate(*args, n_sites=6, same=False))


def test_suggest_sites_refusals(rng):
    m, _, cells, (ay, ax, _) = _fit_raster(rng)
    cands = Candidates.grid([ay, ax])
    # Krause's dense E over the F columns is counted before anything is allocated
    args = (len(cells), len(cells), m)
    krause = pw.wavelet_memory_estimate(*args, n_sites=2, strategy="krause")
    f = m.problem_.stats.n_active
    assert krause >= pw.wavelet_memory_estimate(*args, n_sites=2, strategy="variance") + 24.0 * f**2
    with pytest.raises(MemoryEstimateError, match="wavelet placement"):
        suggest_sites(m, cands, 2, strategy="krause", max_memory=0.5 * krause)
    with pytest.raises(InputError, match="outside"):
        suggest_sites(m, Candidates.points([[0.5, 100.0]]), 1)
    with pytest.raises(InputError, match="columns"):
        suggest_sites(m, Candidates.points([[0.5]]), 1)
    # default minimum distance: ¼ of the shortest effective lengthscale over the candidates
    s = suggest_sites(m, cands, 3, strategy="variance")
    ell = m.effective_lengthscale(cells).min()
    assert s.attrs["min_distance_auto"] and s.attrs["min_distance"] == pytest.approx(ell / 4)


# --------------------------------------------------------------------------- CLI
def test_cli_place_model_wavelet_basis(tmp_path, rng, monkeypatch, capsys):
    import argparse

    import rioxarray  # noqa: F401
    import xarray as xr

    import geogp.frontend.api
    from geogp.cli.place import add_place_parser, run_place

    y, x = 5000.0 - 100.0 * np.arange(18), 300000.0 + 100.0 * np.arange(22)
    z = np.sin(x / 400.0)[None, :] + np.cos(y / 300.0)[:, None] + 0.05 * rng.normal(size=(18, 22))
    z[4:9, 6:12] = np.nan
    xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": x}, name="z").rio.write_crs(
        "EPSG:32633").rio.to_raster(tmp_path / "in.tif")
    seen = []
    original = geogp.frontend.api.GeoRegressor

    class Small(original):  # small fixed levels: the automatic ones make this test slow
        def __init__(self, model="auto", **kw):
            seen.append(model)
            kw["options"] = {**(kw.get("options") or {}), "iota": -2, "j_max": 0,
                             "optimize": False, "noise": 0.05}
            super().__init__(model, **kw)

    monkeypatch.setattr(geogp.frontend.api, "GeoRegressor", Small)
    parser = argparse.ArgumentParser(prog="geogp")
    add_place_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "s.geojson"
    argv = ["place", str(tmp_path / "in.tif"), "--model", "wavelet_basis", "--n", "3", "--out",
            str(out), "--min-distance", "250", "--strategy", "variance", "--quiet"]
    assert run_place(parser.parse_args(argv)) == 0
    assert seen == ["wavelet_basis"]
    xy = np.array([f["geometry"]["coordinates"] for f in json.loads(out.read_text())["features"]])
    assert xy.shape == (3, 2)
    assert np.all(np.isin(xy[:, 0], x)) and np.all(np.isin(xy[:, 1], y))
    d = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + 1e9 * np.eye(3)
    assert d.min() >= 250
    bad = ["place", str(tmp_path / "in.tif"), "--model", "wavelet_basis", "--features", "64",
           "--out", str(tmp_path / "t.geojson")]
    assert run_place(parser.parse_args(bad)) == 2
    assert "AFS options" in capsys.readouterr().err
