"""The lattice model with a range and sd that vary over the raster
(:mod:`geogp.models.lattice.varying`), against dense algebra written independently."""

from __future__ import annotations

import math
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from geogp.exceptions import InputError, MemoryEstimateError
from geogp.linalg import HAVE_CHOLMOD
from geogp.models import lattice as lm
from geogp.models.lattice.varying import VaryingBasis
from tests.models.test_lattice import (
    BACKENDS,
    _data,
    _params,
    dense_laplacian,
    dense_reml,
    mid_covariance,
)

H = (1.0, 0.7)
MARGIN = 2


def dense_bspline(pos, n, intervals):
    """Uniform cubic B-splines by the Cox–de Boor recursion, over [−0.5, n − 0.5]."""
    z = np.clip((np.asarray(pos, float) + 0.5) / n, 0.0, 1.0)
    t = np.arange(-3, intervals + 4) / intervals
    # degree 0 on half-open spans (the knots run past both ends, so z = 1 has its span)
    b = np.array([[t[i] <= zz < t[i + 1] for i in range(len(t) - 1)] for zz in z], float)
    for k in range(1, 4):
        nb = np.zeros((len(z), len(t) - 1 - k))
        for i in range(len(t) - 1 - k):
            nb[:, i] = ((z - t[i]) / (t[i + k] - t[i]) * b[:, i]
                        + (t[i + k + 1] - z) / (t[i + k + 1] - t[i + 1]) * b[:, i + 1])
        b = nb
    return b


def dense_varying_precision(shape, h, basis, coef_r, coef_s, rho, sd, margin=MARGIN):
    """Q = D (K + L)(K + L) D with per-cell κ² = 8/ρ(s)², c = A/(4π κ² s(s)²)."""
    rows = np.arange(shape[0]) - margin
    cols = np.arange(shape[1]) - margin
    dev = []
    for coef in (coef_r, coef_s):
        total, start = np.zeros(shape), 0
        for (my, mx) in basis.intervals:
            a, b = my + 3, mx + 3
            c = np.reshape(coef[start:start + a * b], (a, b))
            total += dense_bspline(rows, basis.raster_shape[0], my) @ c @ dense_bspline(
                cols, basis.raster_shape[1], mx).T
            start += a * b
        dev.append(total.ravel())
    rho_s = rho * np.exp(dev[0])
    sd_s = sd * np.exp(dev[1])
    k2 = 8 / rho_s**2
    c = h[0] * h[1] / (4 * math.pi * k2 * sd_s**2)
    op = np.diag(k2) + dense_laplacian(shape, h)
    d = np.diag(np.sqrt(c))
    return d @ op @ op @ d, rho_s, sd_s


def _setup(rng, backend, levels=2, mid=None):
    obs, v = _data(rng, shape=(9, 11))
    shape = (obs.shape[0] + 2 * MARGIN, obs.shape[1] + 2 * MARGIN)
    r, c = np.nonzero(obs)
    cells = (r + MARGIN) * shape[1] + c + MARGIN
    y = v[obs]
    X = np.column_stack([np.ones_like(y), r / 4.0, c / 4.0])
    basis = VaryingBasis.auto(obs.shape, levels=levels)
    prob = lm.make_problem(shape, H, 2, cells, y, X, backend=backend, mid_scale=mid,
                           varying=(basis, -MARGIN, -MARGIN))
    return prob, basis, cells, y, X, shape


def _theta(rng, basis, rho=2.5, sd=0.9, noise=0.2, scale=0.4):
    return {**_params(rho, sd, noise),
            "varying_range": scale * rng.standard_normal(basis.n_coef),
            "varying_sd": scale * rng.standard_normal(basis.n_coef)}


def test_basis_is_cubic_bsplines_and_partitions_unity():
    basis = VaryingBasis.auto((30, 70), levels=3)
    assert basis.intervals == ((1, 1), (1, 2), (2, 4))
    pos = np.linspace(-3, 75, 41)
    (by, *_), (bx, *rest) = basis.matrices(np.arange(30), pos)
    assert np.allclose(bx, dense_bspline(pos, 70, 1), atol=1e-13)
    assert np.allclose(rest[1], dense_bspline(pos, 70, 4), atol=1e-13)
    assert np.allclose(by.sum(axis=1), 1.0)
    # 120 cells: knots 120, 60, 30 and 15 cells apart (MIN_SPACING = 12)
    assert VaryingBasis.auto((91, 120)).intervals == ((1, 1), (2, 2), (3, 4), (6, 8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_varying_precision_and_log_det_equal_dense(rng, backend):
    prob, basis, _, _, _, shape = _setup(rng, backend)
    theta = _theta(rng, basis)
    q, logdet_q, _, _ = lm.precision(theta, prob)
    Q, *_ = dense_varying_precision(shape, H, basis, theta["varying_range"],
                                    theta["varying_sd"], 2.5, 0.9)
    r, c = prob.pattern.rows, prob.pattern.cols
    assert np.allclose(np.asarray(q), Q[r, c], rtol=1e-12, atol=1e-12 * np.abs(Q).max())
    # Q has no entries off the pattern
    mask = np.zeros_like(Q, bool)
    mask[r, c] = mask[c, r] = True
    assert np.abs(Q[~mask]).max() < 1e-12 * np.abs(Q).max()
    assert float(logdet_q) == pytest.approx(np.linalg.slogdet(Q)[1], rel=1e-11)


@pytest.mark.parametrize("backend", BACKENDS)
def test_varying_reml_equals_dense_gaussian(rng, backend):
    prob, basis, cells, y, X, shape = _setup(rng, backend)
    for rho, sd, ns in [(3.0, 1.2, 0.3), (1.5, 0.7, 0.05)]:
        theta = {**_theta(rng, basis), **_params(rho, sd, ns)}
        Q, *_ = dense_varying_precision(shape, H, basis, theta["varying_range"],
                                        theta["varying_sd"], rho, sd)
        got = float(lm.log_marginal_likelihood(theta, prob))
        assert got == pytest.approx(dense_reml(Q, cells, y, X, ns**2), rel=1e-10)


def test_zero_deviations_are_the_stationary_model(rng):
    """With every coefficient 0 the varying model is the stationary one, mid level included."""
    prob, basis, cells, y, X, shape = _setup(rng, "dense", mid=2)
    plain = lm.make_problem(shape, H, 2, cells, y, X, backend="dense", mid_scale=2)
    theta = {**_params(2.0, 0.8, 0.3), "log_range_mid": np.log(7.0), "log_sd_mid": np.log(0.6)}
    zero = {**theta, "varying_range": np.zeros(basis.n_coef),
            "varying_sd": np.zeros(basis.n_coef)}
    assert float(lm.log_marginal_likelihood(zero, prob)) == pytest.approx(
        float(lm.log_marginal_likelihood(theta, plain)), rel=1e-12)
    # and with deviations, the mid level adds its own covariance on top
    theta_v = {**theta, **{k: v for k, v in _theta(rng, basis).items() if k.startswith("var")}}
    Q, *_ = dense_varying_precision(shape, H, basis, theta_v["varying_range"],
                                    theta_v["varying_sd"], 2.0, 0.8)
    K_mid = mid_covariance(shape, H, 2, 2.0, 0.8, 2, 7.0, 0.6) - np.linalg.inv(
        _stationary(shape, 2.0, 0.8))
    K = np.linalg.inv(Q) + K_mid
    assert float(lm.log_marginal_likelihood(theta_v, prob)) == pytest.approx(
        dense_reml(None, cells, y, X, 0.09, K=K), rel=1e-10)


def _stationary(shape, rho, sd):
    Q, *_ = dense_varying_precision(shape, H, VaryingBasis.auto((1, 1), 1), np.zeros(16),
                                    np.zeros(16), rho, sd)
    return Q


@pytest.mark.skipif(not HAVE_CHOLMOD, reason="needs CHOLMOD")
def test_varying_gradient_matches_finite_differences(rng):
    prob, basis, *_ = _setup(rng, "cholmod")
    theta = _theta(rng, basis)
    grad = jax.grad(lm.log_marginal_likelihood)(theta, prob)
    eps = 1e-5
    for k in ("log_range", "log_sd", "log_noise"):
        up = float(lm.log_marginal_likelihood(dict(theta, **{k: theta[k] + eps}), prob))
        dn = float(lm.log_marginal_likelihood(dict(theta, **{k: theta[k] - eps}), prob))
        assert float(grad[k]) == pytest.approx((up - dn) / (2 * eps), rel=1e-5, abs=1e-7), k
    for k in ("varying_range", "varying_sd"):
        for i in rng.choice(basis.n_coef, 4, replace=False):
            e = np.zeros(basis.n_coef)
            e[i] = eps
            up = float(lm.log_marginal_likelihood(dict(theta, **{k: theta[k] + e}), prob))
            dn = float(lm.log_marginal_likelihood(dict(theta, **{k: theta[k] - e}), prob))
            assert float(grad[k][i]) == pytest.approx((up - dn) / (2 * eps), rel=1e-5,
                                                      abs=1e-7), (k, i)


def test_varying_needs_alpha_2_and_matching_parameters(rng):
    obs, v = _data(rng)
    shape = (obs.shape[0] + 4, obs.shape[1] + 4)
    r, c = np.nonzero(obs)
    cells = (r + 2) * shape[1] + c + 2
    basis = VaryingBasis.auto(obs.shape, 1)
    with pytest.raises(InputError, match="alpha=2"):
        lm.make_problem(shape, H, 3, cells, v[obs], np.ones((cells.size, 1)),
                        varying=(basis, -2, -2))
    prob = lm.make_problem(shape, H, 2, cells, v[obs], np.ones((cells.size, 1)),
                           varying=(basis, -2, -2))
    with pytest.raises(InputError, match="varying"):
        lm.log_marginal_likelihood(_params(2.0, 1.0, 0.3), prob)
    # a forced varying fit on more than VARYING_MAX_CELLS cells is refused before fitting
    big = np.ones((1001, 1000))
    with pytest.raises(InputError, match="up to 1,000,000 raster cells"):
        lm.LatticeRegressor(varying=True).fit_grid([np.arange(1001.0), np.arange(1000.0)],
                                                   big)
    with pytest.raises(InputError, match="varying must be"):
        lm.LatticeRegressor(varying="yes").fit_grid([np.arange(9.0), np.arange(9.0)],
                                                    np.ones((9, 9)))


def test_the_memory_estimate_counts_the_varying_stage_s_tiles():
    """The varying stage holds every fitting tile at once (700² on 25 tiles peaked at 4.05 GiB
    where the estimate without them said 2.92: docs/lattice.md): a 1000² raster (64 tiles) is
    within the default limit for one range and sd, and refused before any fitting with a
    varying one."""
    axes = [np.arange(1000.0), np.arange(1000.0)]
    big = np.random.default_rng(0).standard_normal((1000, 1000))
    stationary = lm.LatticeRegressor(varying=None)
    varying = lm.LatticeRegressor(varying=True)
    assert stationary.memory_estimate(big.shape) < stationary.max_bytes
    with pytest.raises(MemoryEstimateError, match="64 fitting tiles"):
        varying.fit_grid(axes, big)
    assert not hasattr(varying, "params_")
    # "auto" skips the stage where it would not fit (next test): the fit is not refused
    for shape in ((500, 500), big.shape):
        assert (lm.LatticeRegressor(varying="auto").memory_estimate(shape)
                == stationary.memory_estimate(shape))


def test_auto_skips_the_varying_stage_where_it_would_not_fit(rough_and_smooth, monkeypatch):
    """On the rough-and-smooth field varying="auto" fits a varying range and sd (the next
    tests); with the stage's estimate above the limit it keeps one range and sd, and says so,
    rather than refusing the fit."""
    from geogp.models.lattice import memory

    monkeypatch.setattr(memory, "VARYING_TILE_FACTORS", 1e4)
    est = lm.LatticeRegressor(margin=8, large_scale=20, varying="auto").fit_grid(
        rough_and_smooth.axes, rough_and_smooth.data)
    assert est.varying_basis_ is None
    assert "varying fit's tiles would need" in est.varying_reason_
    assert "although the dispersion" in est.varying_reason_
    monkeypatch.undo()
    chosen = lm.LatticeRegressor(margin=8, large_scale=20, varying="auto").fit_grid(
        rough_and_smooth.axes, rough_and_smooth.data)
    assert chosen.varying_basis_ is not None, chosen.varying_reason_


# --------------------------------------------------------------------------- the fitted model
def _rough_left_smooth_right(seed=0, n=48, margin=12, noise=0.1, rough=(3.0, 1.5),
                             smooth=(20.0, 0.6)):
    """A draw of the non-stationary SPDE (written out here with scipy): range 3 cells and sd
    1.5 on the left, range 20 and sd 0.6 on the right (``rough``, ``smooth``; equal: a
    stationary field), with a margin so that the raster sees
    no boundary; returns (truth, data with 10 % and two 8 × 8 patches hidden, masks, the true
    per-cell (range, sd) on the raster)."""
    import scipy.sparse as sp
    from sksparse.cholmod import cholesky

    from geogp.models.lattice.gmrf import laplacian

    rng = np.random.default_rng(seed)
    big = n + 2 * margin
    xx = np.broadcast_to(np.arange(big) - margin, (big, big))
    s = 1.0 / (1.0 + np.exp(-(xx / (n - 1) - 0.5) * 12.0))
    rho = rough[0] * (smooth[0] / rough[0]) ** s
    sd = rough[1] + (smooth[1] - rough[1]) * s

    def q(rho, sd):
        k2 = 8.0 / rho.ravel() ** 2
        d = sp.diags(np.sqrt(1.0 / (4 * math.pi * k2 * sd.ravel() ** 2)))
        op = sp.diags(k2) + laplacian(rho.shape, (1.0, 1.0))
        return sp.csc_matrix(d @ op @ op @ d)

    factor = cholesky(q(rho, sd))
    f = factor.apply_Pt(factor.solve_Lt(rng.standard_normal(big * big),
                                        use_LDLt_decomposition=False)).reshape(big, big)
    inner = (slice(margin, -margin), slice(margin, -margin))
    f, rho, sd = f[inner], rho[inner], sd[inner]
    y = f + noise * rng.standard_normal(f.shape)
    obs = rng.random(f.shape) > 0.1
    rough = np.zeros_like(obs)
    rough[20:28, 4:12] = True
    smooth = np.zeros_like(obs)
    smooth[20:28, 36:44] = True
    obs &= ~rough & ~smooth
    # the oracle: kriging with the true precision on the raster (mean 0 known)
    b = cholesky(sp.csc_matrix(q(rho, sd) + sp.diags(obs.ravel() / noise**2)))
    hid = np.flatnonzero(~obs.ravel())
    e = sp.csc_matrix((np.ones(hid.size), (hid, np.arange(hid.size))), shape=(f.size, hid.size))
    o_mean = b(np.where(obs, y, 0.0).ravel() / noise**2).reshape(f.shape)
    o_var = np.full(f.size, np.nan)
    o_var[hid] = np.asarray(b(e).multiply(e).sum(axis=0)).ravel()
    return f, np.where(obs, y, np.nan), {"rough": rough, "smooth": smooth}, rho, sd, (
        o_mean, np.sqrt(o_var).reshape(f.shape))


@pytest.fixture(scope="module")
def rough_and_smooth():
    f, data, patches, rho, sd, oracle = _rough_left_smooth_right()
    axes = [np.arange(48.0), np.arange(48.0)]
    fits = {name: lm.LatticeRegressor(margin=8, large_scale=20, **kw).fit_grid(axes, data)
            for name, kw in (("plain", {}), ("varying", {"varying": True}))}
    return SimpleNamespace(f=f, data=data, patches=patches, rho=rho, sd=sd, oracle=oracle,
                           axes=axes, fits=fits)


def test_the_varying_fit_finds_where_the_field_is_rough(rough_and_smooth):
    """The fitted local range is short on the rough side and long on the smooth side, within
    a factor 1.6 of the truth in each patch, and the local sd likewise."""
    case = rough_and_smooth
    patches, rho, sd, axes = case.patches, case.rho, case.sd, case.axes
    est = case.fits["varying"]
    lr, ls = est.local_range(), est.local_sd()
    for name, mk in patches.items():
        assert 1 / 1.6 < lr[mk].mean() / rho[mk].mean() < 1.6, (name, lr[mk].mean())
        assert 1 / 1.6 < ls[mk].mean() / sd[mk].mean() < 1.6, (name, ls[mk].mean())
    assert lr[patches["smooth"]].mean() > 3 * lr[patches["rough"]].mean()
    # the point evaluation agrees with the raster map at the cell centres
    Y, X = np.meshgrid(*axes, indexing="ij")
    at_r, at_s = est.local_scales_at(np.column_stack([Y.ravel(), X.ravel()]))
    np.testing.assert_allclose(at_r.reshape(lr.shape), lr, rtol=1e-12)
    np.testing.assert_allclose(at_s.reshape(ls.shape), ls, rtol=1e-12)


def test_the_varying_fit_scores_near_the_oracle_in_both_patches(rough_and_smooth):
    """In each hidden patch the varying fit's RMSE and CRPS are within 5 % (#45's acceptance)
    of kriging with the true non-stationary precision, while the stationary fit is
    over-dispersed on the smooth side (its CRPS at least 1.3 × the oracle's)."""
    from geogp.core.metrics import crps_gaussian, rmse

    case = rough_and_smooth
    f, patches, (o_mean, o_sd) = case.f, case.patches, case.oracle
    pred = {k: est.predict_grid(case.axes) for k, est in case.fits.items()}
    for name, mk in patches.items():
        oracle = crps_gaussian(f[mk], o_mean[mk], o_sd[mk])
        got = crps_gaussian(f[mk], pred["varying"].mean[mk], pred["varying"].std_latent[mk])
        assert got < 1.05 * oracle, (name, got, oracle)
        assert rmse(f[mk], pred["varying"].mean[mk]) < 1.05 * rmse(f[mk], o_mean[mk]), name
    mk = patches["smooth"]
    plain = crps_gaussian(f[mk], pred["plain"].mean[mk], pred["plain"].std_latent[mk])
    assert plain > 1.3 * crps_gaussian(f[mk], o_mean[mk], o_sd[mk])


def test_a_varying_model_file_round_trips(rough_and_smooth, tmp_path):
    """geogp.fit(da) on a field whose roughness varies lets the range and sd vary and says
    why; its samples have the predicted sd; saved and loaded, the same predictions and maps;
    the summary says over which span the range varies; local_scales() maps them; placement
    follows the roughness."""
    import xarray as xr

    import geogp

    data, axes = rough_and_smooth.data, rough_and_smooth.axes
    da = xr.DataArray(data, dims=("y", "x"), coords={"y": axes[0] * 100.0,
                                                     "x": axes[1] * 100.0}).rio.write_crs(32633)
    model = geogp.fit(da, maxiter=30)  # the default varying="auto" chooses it here
    assert "; range and sd varying: the dispersion" in model.model_reason_
    scales = model.local_scales()
    assert scales["local_range"].attrs["units"] == "metre" and scales.rio.crs.to_epsg() == 32633
    est = model.estimators_[0]
    np.testing.assert_allclose(scales["local_range"].values, est.local_range(), rtol=1e-12)
    assert "range varies over" in model.summary()
    # posterior samples: their sd is the predicted latent sd, in the rough and smooth parts
    sd_ratio = model.sample(300, seed=1).std("sample").values / model.predict()["std_latent"]
    for mk in rough_and_smooth.patches.values():
        assert abs(float(np.median(sd_ratio.values[mk])) - 1.0) < 0.1
    model.save(tmp_path / "m.npz")
    back = geogp.load_model(tmp_path / "m.npz")
    for name in ("mean", "std"):
        np.testing.assert_array_equal(back.predict()[name].values, model.predict()[name].values)
    for name in ("local_range", "local_sd"):
        np.testing.assert_array_equal(back.local_scales()[name].values, scales[name].values)
    # placement through the same contract: the sites go where the field is rough (the left
    # half, where the posterior sd is larger); a stationary fit puts half of them there
    sites = model.suggest_sites(10)
    assert np.mean(np.asarray(sites["x"]) < 2400.0) >= 0.8


def test_geogp_fit_local_range_writes_the_maps_as_bands(rough_and_smooth, tmp_path, capsys):
    import xarray as xr

    import geogp
    from geogp.cli import main

    data, axes = rough_and_smooth.data, rough_and_smooth.axes
    da = xr.DataArray(data[:24, :30], dims=("y", "x"),
                      coords={"y": axes[0][:24] * 100.0, "x": axes[1][:30] * 100.0})
    src = tmp_path / "in.tif"
    da.rio.write_crs(32633).rio.to_raster(src)
    assert main(["fit", str(src), "--out", str(tmp_path / "p.tif"), "--local-range",
                 "--maxiter", "10", "--quiet"]) == 0
    out = geogp.open_raster(tmp_path / "p.tif")
    names = list(out.attrs["long_name"])
    assert {"local_range", "local_sd"} <= set(names)
    r = out.values[names.index("local_range")]
    assert np.all(np.isfinite(r)) and np.all(r > 0)
    capsys.readouterr()
    assert main(["fit", str(src), "--out", str(tmp_path / "q.tif"), "--local-range",
                 "--model", "afs", "--quiet"]) != 0
    assert "--local-range belongs to the lattice model" in capsys.readouterr().err
    assert not (tmp_path / "q.tif").exists()


def test_auto_keeps_one_range_where_the_residuals_are_evenly_dispersed(rough_and_smooth):
    """The decision of varying="auto": the stationary fit's leave-one-out residuals on the
    rough-and-smooth field are unevenly dispersed over the raster (spread above the
    threshold); on a stationary draw of the same size they are not, and the front end keeps
    one range and sd, and says why."""
    import xarray as xr

    import geogp
    from geogp.models.lattice.varying import SPREAD_VARYING, calibration_spread

    plain = rough_and_smooth.fits["plain"]
    obs = np.isfinite(rough_and_smooth.data)
    inner = np.zeros(plain.shape_, dtype=bool)
    inner[8:-8, 8:-8] = obs
    cells = np.flatnonzero(inner)
    ys = plain.scaler_.y(rough_and_smooth.data[obs])
    assert calibration_spread(plain.posterior_.mean[cells], plain.posterior_.var[cells], ys,
                              plain.noise_var_, obs) > 2 * SPREAD_VARYING
    _, data, *_ = _rough_left_smooth_right(seed=3, rough=(8.0, 1.0), smooth=(8.0, 1.0))
    ax = np.arange(48) * 100.0
    da = xr.DataArray(data, dims=("y", "x"), coords={"y": ax, "x": ax}).rio.write_crs(32633)
    model = geogp.fit(da)
    est = model.estimators_[0]
    assert est.varying_basis_ is None and est.varying_spread_ < SPREAD_VARYING
    assert "; one range and sd: the dispersion" in model.model_reason_
