"""Issue #43: the space-time model on image stacks.

``sim``: simulated stacks with a known truth and cloud-shaped gaps, scored on the hidden
cells against the oracle (universal kriging with the true space-time covariance, dense), and
against geogp fitted image by image. Two truths: ``separable`` (the model's own form:
persistent field + AR(1) anomalies + dates' offsets) and ``sum`` (anomalies the sum of a
short-range fast and a long-range slow separable field: not separable, not the model's form).
Coverage is reported by stratum: distance in space to the nearest observed cell of the same
date, and dates since the cell was last observed.

``sst``: the AVHRR sea-surface-temperature example of the DINEOF repository
(aida-alvera/DINEOF, SmallExample/alboranSST_small.nc, GPL-2.0; 10 days, 201 × 301 cells,
80 % missing), fetched into benchmarks/out/ (or ``--data PATH``), never shipped. Gap-shaped
folds: each date's cloud shape moved onto the observed cells of another date.

``ndvi``: the validation design of the R package gapfill (Gerber et al. 2018, IEEE TGRS): a
MODIS NDVI stack (MOD13A1, 500 m, 16-day composites, 100 × 100 cells, day of year 145–257 in
2004–2009: 48 images) with 20 % and 50 % of the cells masked by real cloud shapes, scored on
the masked cells. The data are the package's tests-local/maskstudy.rda (florafauna/gapfill,
GPL ≥ 2), fetched into benchmarks/out/ (or ``--data PATH``) and read with the ``rdata``
package (``pip install rdata`` in the benchmarks' environment; a .npz with the arrays
``data``, ``masked20``, ``masked50``, ``year``, ``doy`` also works), never shipped.

Usage: .venv/bin/python benchmarks/bench_spacetime.py sim [--shape 32 32 --dates 16]
       .venv/bin/python benchmarks/bench_spacetime.py sst [--data PATH]
       .venv/bin/python benchmarks/bench_spacetime.py ndvi [--data PATH] [--masks 20 50]
       .venv/bin/python benchmarks/bench_spacetime.py cost [--dates 48]
       .venv/bin/python benchmarks/bench_spacetime.py speed [--shape 100 100 --dates 48] [--cli]
       .venv/bin/python benchmarks/bench_spacetime.py tiles [--layouts 16:3 15:2 14:2]
       .venv/bin/python benchmarks/bench_spacetime.py residuals [--data PATH]   (NDVI)
       .venv/bin/python benchmarks/bench_spacetime.py two-stage [sst|ndvi|sim] [--block 4]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import urllib.request
import warnings

import numpy as np
import pandas as pd
import scipy.linalg as sla
import xarray as xr
from scipy.ndimage import distance_transform_edt, gaussian_filter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import geogp
from geogp.core.metrics import crps_gaussian
from geogp.crossval.stack import since_last_seen
from geogp.models.lattice.gmrf import laplacian

from _machine import cpu_model

SST_URL = ("https://raw.githubusercontent.com/aida-alvera/DINEOF/master/SmallExample/"
           "alboranSST_small.nc")
NDVI_URL = ("https://raw.githubusercontent.com/florafauna/gapfill/master/tests-local/"
            "maskstudy.rda")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def machine() -> str:
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[0]
    return f"{cpu_model()}, {os.cpu_count()} cores, load {load}, {time.strftime('%Y-%m-%d')}"


# ---------------------------------------------------------------- simulated stacks
def matern_cov(shape, rng_range, sd):
    """The lattice's α = 2 field's covariance, densely (unit cells; as the model's)."""
    n = shape[0] * shape[1]
    k2 = 8.0 / rng_range**2
    c = 1.0 / (4 * math.pi * k2 * sd**2)
    op = k2 * np.eye(n) + laplacian(shape, (1.0, 1.0)).toarray()
    return np.linalg.inv(c * op @ op)


def exp_time(times, tau):
    return np.exp(-np.abs(times[:, None] - times[None, :]) / tau)


TRUTHS = {
    "separable": {"mean": (4.0, 1.0), "anomalies": [(6.0, 0.6, 16.0)], "offset": (0.5, 40.0),
                  "noise": 0.1},
    "sum": {"mean": (4.0, 1.0), "anomalies": [(2.5, 0.45, 8.0), (12.0, 0.5, 64.0)],
            "offset": (0.5, 40.0), "noise": 0.1},
}


def truth_cov(shape, times, truth):
    """Cov f over (date, cell), date-major."""
    n, t = shape[0] * shape[1], times.size
    c = np.kron(np.ones((t, t)), matern_cov(shape, *truth["mean"]))
    for rng_range, sd, tau in truth["anomalies"]:
        c += np.kron(exp_time(times, tau), matern_cov(shape, rng_range, sd))
    sd_g, tau_g = truth["offset"]
    c += np.kron(sd_g**2 * exp_time(times, tau_g), np.ones((n, n)))
    return c


def cloud_masks(shape, t, frac, rng, scale=3.0):
    """Cloud-like masks: smoothed noise above a threshold, covering a varying share per date."""
    out = np.empty((t, *shape), bool)
    for k in range(t):
        share = float(np.clip(frac * rng.uniform(0.2, 1.8), 0.0, 0.97))
        z = gaussian_filter(rng.standard_normal(shape), scale, mode="wrap")
        out[k] = z > np.quantile(z, 1 - share)
    return out


def strata(mask):
    """(distance in cells to the nearest observed cell of the same date, dates since the cell
    was last observed: 1, 2, … or −1 never) for every (date, cell)."""
    dist = np.stack([distance_transform_edt(m) for m in mask])
    return dist, since_last_seen(~mask)


def oracle(y, mask, cov, noise):
    """Universal kriging (intercept) with the true covariance: mean and sd of a new
    observation at every (date, cell)."""
    obs = ~mask.ravel()
    k = cov[:, obs]
    chol = sla.cho_factor(cov[np.ix_(obs, obs)] + noise**2 * np.eye(int(obs.sum())))
    ones = np.ones(int(obs.sum()))
    si1 = sla.cho_solve(chol, ones)
    beta = si1 @ y.ravel()[obs] / (ones @ si1)
    resid = sla.cho_solve(chol, y.ravel()[obs] - beta)
    mean = beta + k @ resid
    kinv = sla.cho_solve(chol, k.T)
    r = 1.0 - k @ si1
    var = np.diag(cov) - np.einsum("ij,ji->i", k, kinv) + r**2 / (ones @ si1)
    return mean.reshape(y.shape), np.sqrt(var + noise**2).reshape(y.shape)


def as_stack(values, times):
    _, ny, nx = values.shape
    return xr.DataArray(values, dims=("time", "y", "x"), coords={
        "time": np.datetime64("2020-01-01") + times.astype("timedelta64[D]"),
        "y": 1000.0 * np.arange(ny)[::-1], "x": 1000.0 * np.arange(nx)}).rio.write_crs(32633)


def scores(name, y, f, mean, sd, hidden, dist, since, seconds):
    err = mean[hidden] - f[hidden]
    row = {"method": name, "rmse": float(np.sqrt(np.mean(err**2))),
           "crps": float(crps_gaussian(y[hidden], mean[hidden], sd[hidden])),
           "cov95": float(np.mean(np.abs(y[hidden] - mean[hidden]) <= 1.96 * sd[hidden])),
           "seconds": seconds}
    inside = np.abs(y - mean) <= 1.96 * sd
    for lo, hi in ((0, 1.5), (1.5, 4), (4, 8), (8, np.inf)):
        sel = hidden & (dist > lo) & (dist <= hi)
        row[f"cov d{lo:g}-{hi:g}"] = float(inside[sel].mean()) if sel.any() else np.nan
    for label, when in (("seen 1", since == 1), ("seen 2-3", (since >= 2) & (since <= 3)),
                        ("seen 4+", since >= 4), ("never", since < 0)):
        sel = hidden & when
        row[f"cov {label}"] = float(inside[sel].mean()) if sel.any() else np.nan
    return row


def run_sim(args):
    shape, times = tuple(args.shape), np.arange(args.dates) * args.step
    rows = []
    for truth_name in args.truths:
        for seed in range(args.seeds):
            rng = np.random.default_rng(seed)
            truth = TRUTHS[truth_name]
            cov = truth_cov(shape, times, truth)
            f = 10.0 + (np.linalg.cholesky(cov + 1e-9 * np.eye(cov.shape[0]))
                        @ rng.standard_normal(cov.shape[0])).reshape(args.dates, *shape)
            y = f + truth["noise"] * rng.standard_normal(f.shape)
            mask = cloud_masks(shape, args.dates, args.frac, rng)
            dist, since = strata(mask)
            t0 = time.perf_counter()
            m_or, s_or = oracle(y, mask, cov, truth["noise"])
            found = [scores("oracle", y, f, m_or, s_or, mask, dist, since,
                            time.perf_counter() - t0)]
            da = as_stack(np.where(mask, np.nan, y), times)
            for method, kw in (("spacetime", {"model": "spacetime"}),
                               ("per image", {"model": "lattice"})):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t0 = time.perf_counter()
                    pred = geogp.fit(da, **kw).predict()
                    secs = time.perf_counter() - t0
                found.append(scores(method, y, f, pred["mean"].values, pred["std"].values,
                                    mask, dist, since, secs))
            for r in found:
                r.update(truth=truth_name, seed=seed)
            rows += found
            print(pd.DataFrame(found).set_index("method").round(4).to_string(), flush=True)
    table = pd.DataFrame(rows)
    print(f"\n# sim {shape[0]}×{shape[1]}×{args.dates} dates every {args.step:g} d, "
          f"~{args.frac:.0%} clouded; {machine()}")
    mean = table.groupby(["truth", "method"]).mean(numeric_only=True).drop(columns="seed")
    print(mean.round(4).to_string())
    for truth_name in args.truths:
        ref = mean.loc[(truth_name, "oracle")]
        got = mean.loc[(truth_name, "spacetime")]
        print(f"{truth_name}: spacetime / oracle RMSE {got.rmse / ref.rmse:.3f}, "
              f"CRPS {got.crps / ref.crps:.3f}")


# ---------------------------------------------------------------- the SST stack
def fetched(path, url, name):
    """``path``, or the copy of ``url`` in benchmarks/out/``name`` (fetched once)."""
    if path is not None:
        return path
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    if not os.path.exists(path):
        print(f"fetching {url}", flush=True)
        urllib.request.urlretrieve(url, path + ".part")
        os.replace(path + ".part", path)
    return path


def sst_stack(path):
    path = fetched(path, SST_URL, "alboranSST_small.nc")
    ds = xr.open_dataset(path, decode_times=False).rename({"lat": "y", "lon": "x"})
    ds = ds.sortby("y", ascending=False)  # north up, as rasters are
    sea = ds["mask"].values > 0
    sst = ds["SST"].astype("float64").where(sea)
    days = (sst.time.values - sst.time.values[0]).astype("int64")
    sst = sst.assign_coords(time=np.datetime64("2015-01-01") + days.astype("timedelta64[D]"))
    return sst.rio.write_crs(4326), sea


def timed_fit(train: xr.DataArray, **kw):
    """(``geogp.fit(train, **kw).predict()``, its wall time in seconds), warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        pred = geogp.fit(train, **kw).predict()
        return pred, time.perf_counter() - t0


def layout(args) -> dict:
    """The space-time model's tile and halo when given (``--tile``, ``--halo``)."""
    return {k: getattr(args, k) for k in ("tile", "halo") if getattr(args, k) is not None}


def sst_hidden(v, sea):
    """The SST folds' hidden cells: on each date, another date's clouds (over the sea) inside
    a box of 40 % × 40 % of the raster, onto this date's observed cells (most dates are 80 %
    clouded, so the whole shape would hide most of the data)."""
    t, ny, nx = v.shape
    observed = np.isfinite(v)
    rng = np.random.default_rng(0)
    hidden = np.zeros_like(observed)
    for k in range(t):
        other = (k + 1 + int(rng.integers(t - 1))) % t
        box = np.zeros((ny, nx), bool)
        y0, x0 = int(rng.integers(0, ny - int(0.4 * ny))), int(rng.integers(0, nx - int(0.4 * nx)))
        box[y0:y0 + int(0.4 * ny), x0:x0 + int(0.4 * nx)] = True
        hidden[k] = observed[k] & sea & ~observed[other] & box
    return hidden


def run_sst(args):
    da, sea = sst_stack(args.data)
    v = da.values
    observed = np.isfinite(v)
    hidden = sst_hidden(v, sea)
    print(f"# SST stack {v.shape}, observed {observed.mean():.3f}, hidden {hidden.sum()} "
          f"({hidden.sum() / observed.sum():.2f} of the observed); {machine()}", flush=True)
    train = da.where(~hidden)
    dist, since = strata(~np.isfinite(train.values) | ~sea)
    rows = []
    for method, kw in (("spacetime", {"model": "spacetime", **layout(args)}),
                       ("per image", {"model": "lattice"})):
        if method not in args.methods:
            continue
        pred, secs = timed_fit(train, **kw)
        rows.append(scores(method, v, v, pred["mean"].values, pred["std"].values, hidden,
                           dist, since, secs))
        print(pd.DataFrame(rows[-1:]).set_index("method").round(4).to_string(), flush=True)
    print(pd.DataFrame(rows).set_index("method").round(4).to_string())


def run_cost(args):
    """Time of one tile's exact posterior (factorisation + selected inversion) by tile side."""
    from geogp.linalg.solvers import Solver
    from geogp.models.spacetime.gmrf import make_problem, posterior

    times = np.arange(args.dates) * 8.0
    params = {"log_range": math.log(5.0), "log_sd": math.log(0.5), "log_tau": math.log(16.0),
              "log_range_mean": math.log(4.0), "log_sd_mean": math.log(0.7),
              "log_sd_offset": math.log(0.3), "log_tau_offset": math.log(40.0),
              "log_noise": math.log(0.1)}
    print(f"# one tile's posterior, {args.dates} dates; {machine()}")
    for side in args.sides:
        n = side * side
        keep = np.flatnonzero(np.random.default_rng(0).uniform(size=n * args.dates) < 0.7)
        steps, cells = np.divmod(keep, n)
        y = np.random.default_rng(1).standard_normal(keep.size)
        t0 = time.perf_counter()
        prob = make_problem((side, side), (1.0, 1.0), times, cells, steps, y,
                            np.ones((keep.size, 1)), Solver("cholmod", ordering=args.ordering))
        t1 = time.perf_counter()
        posterior(params, prob, ordering=args.ordering)
        t2 = time.perf_counter()
        # other values: the factor and its selected inverse are cached by B's values
        posterior({**params, "log_noise": math.log(0.11)}, prob, ordering=args.ordering)
        t3 = time.perf_counter()
        print(f"side {side}: setup {t1 - t0:.2f} s, first posterior {t2 - t1:.2f} s, "
              f"again {t3 - t2:.2f} s ({(t3 - t2) / n * 1e3:.2f} ms per cell)", flush=True)


def field_draws(shape, rng_range, sd, rng, k):
    """k draws of the lattice's α = 2 field (unit cells) by its sparse Cholesky factor."""
    import scipy.sparse as sp
    from sksparse.cholmod import cholesky

    n = shape[0] * shape[1]
    k2 = 8.0 / rng_range**2
    op = k2 * sp.eye(n) + laplacian(shape, (1.0, 1.0))
    factor = cholesky(sp.csc_matrix(op @ op / (4 * math.pi * k2 * sd**2)))
    z = factor.apply_Pt(factor.solve_Lt(rng.standard_normal((n, k)),
                                        use_LDLt_decomposition=False))
    return z.T.reshape(k, *shape)


def speed_stack(shape, dates):
    """(truth f, noisy y, cloud mask, times): a stack of the separable truth (sparse draws)
    every 8 days, ~35 % clouded."""
    times = np.arange(dates) * 8.0
    rng = np.random.default_rng(0)
    truth = TRUTHS["separable"]
    (rng_range, sd, tau), = truth["anomalies"]
    a = field_draws(shape, rng_range, sd, rng, dates)
    for k in range(1, dates):
        phi = math.exp(-8.0 / tau)
        a[k] = phi * a[k - 1] + math.sqrt(1 - phi**2) * a[k]
    f = 10.0 + field_draws(shape, *truth["mean"], rng, 1)[0] + a
    y = f + truth["noise"] * rng.standard_normal(f.shape)
    return f, y, cloud_masks(shape, dates, 0.35, rng), times


def run_tiles(args):
    """The posterior's tile side and halo against its cost: θ fitted once (the first
    ``tile:halo``), then fixed; each layout's hidden-cell scores (latent field) and the time
    of its folds and posterior."""
    from geogp.models.spacetime.regressor import SpaceTimeRegressor, windows

    f, y, mask, times = speed_stack(tuple(args.shape), args.dates)
    print(f"# tiles on {args.shape[0]}×{args.shape[1]}×{args.dates}; {machine()}", flush=True)
    params = None
    for spec in args.layouts:
        tile, halo = (int(v) for v in spec.split(":"))
        model = SpaceTimeRegressor(tile=tile, halo=halo, fit_size=args.fit_size,
                                   params=params, optimize=params is None)
        t0 = time.perf_counter()
        model.fit(np.where(mask, np.nan, y), times)
        secs = time.perf_counter() - t0
        params = model.params_
        e, sd = (model.mean_ - f)[mask], model.sd_latent_[mask]
        n_tiles = len(windows(tuple(args.shape), model.tile_, model.halo_))
        print(f"tile {tile}, halo {halo} ({n_tiles} tiles): RMSE {np.sqrt(np.mean(e**2)):.4f}, "
              f"CRPS {crps_gaussian(f[mask], model.mean_[mask], sd):.4f}, cov95 "
              f"{np.mean(np.abs(e) < 1.96 * sd):.3f}; {secs:.1f} s"
              f"{' (with the fit of θ)' if spec == args.layouts[0] else ''}", flush=True)


def run_speed(args):
    """Wall time and peak memory of geogp.fit(stack, model="spacetime") + predict on a
    simulated stack of the separable truth (sparse draws), ~35 % clouded."""
    import resource

    shape = tuple(args.shape)
    f, y, mask, times = speed_stack(shape, args.dates)
    if args.cli:
        return run_speed_cli(args, f, np.where(mask, np.nan, y).astype(np.float32), mask, times)
    da = as_stack(np.where(mask, np.nan, y), times)
    cluster = client = None
    if args.workers:  # the posterior's tiles on worker processes (the fit stays here)
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = geogp.fit(da, model="spacetime")
        t1 = time.perf_counter()
        pred = model.predict()
        t2 = time.perf_counter()
    if client is not None:
        client.close()
        cluster.close()
    err = pred["mean"].values[mask] - f[mask]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"# speed {shape[0]}×{shape[1]}×{args.dates}: fit {t1 - t0:.0f} s, predict "
          f"{t2 - t1:.1f} s, peak RSS {peak:.2f} GiB, hidden RMSE "
          f"{np.sqrt(np.mean(err**2)):.3f}; {machine()}")
    print(model.summary())
    if args.samples:
        t3 = time.perf_counter()
        draws = model.sample(args.samples, seed=0)
        t4 = time.perf_counter()
        ratio = draws.var("sample", ddof=1).values[mask] / pred["std_latent"].values[mask] ** 2
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"# {args.samples} joint samples: {t4 - t3:.1f} s, peak RSS {peak:.2f} GiB; "
              f"their variance / std_latent² on the hidden cells: mean {ratio.mean():.3f}")
    if args.place:
        run_place(model, args.place)


def run_speed_cli(args, f, y, mask, times):
    """The user's path: the stack written as a float32 NetCDF (as products are), filled by
    ``geogp fit stack.nc --out filled.nc --model spacetime`` in a process of its own, whose
    peak resident memory is read back (RUSAGE_CHILDREN); the output scored date by date."""
    import resource
    import subprocess

    os.makedirs(OUT, exist_ok=True)
    tag = f"{y.shape[1]}x{y.shape[2]}x{y.shape[0]}"
    src, dst = (os.path.join(OUT, f"speed_{tag}_{k}.nc") for k in ("stack", "filled"))
    as_stack(y, times).rename("value").to_netcdf(src)
    del y
    cmd = [os.path.join(os.path.dirname(sys.executable), "geogp"), "fit", src, "--out", dst,
           "--model", "spacetime", "--overwrite"]
    print("#", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    sq, n = 0.0, 0
    with xr.open_dataset(dst) as out:
        for k in range(f.shape[0]):
            err = out["mean"].isel(time=k).values[mask[k]] - f[k][mask[k]]
            sq, n = sq + float(np.sum(err**2)), n + err.size
    print(f"# speed (CLI) {tag}: {seconds:.0f} s, peak RSS {peak:.2f} GiB, hidden RMSE "
          f"{math.sqrt(sq / n):.3f}; {machine()}", flush=True)


def run_place(model, n):
    """Sites for the next date (total variance reduction) and what they do to the mean latent
    std there, against as many random cells conditioned the same way (3 draws)."""
    import resource

    from geogp.models.spacetime.forecast import ForecastCovariance

    t0 = time.perf_counter()
    sites = model.suggest_sites(n, strategy="reduction")
    t1 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    forecast = model.estimators_[0].model.forecast(
        float(model.estimators_[0].model.times_[-1] + 8.0))
    scale = forecast.model.scale_
    before = float(np.mean(forecast.sd_latent))
    after_random = []
    for seed in range(3):
        cov = ForecastCovariance(forecast)
        for cell in np.random.default_rng(seed).choice(cov.n, n, replace=False):
            cov.add(int(cell))
        after_random.append(float(np.mean(np.sqrt(np.maximum(cov.variance(), 0)))) * scale)
        cov.release()
    print(f"# {n} sites for {sites.attrs['time']}: {t1 - t0:.1f} s, peak RSS {peak:.2f} GiB; "
          f"mean latent std at that date {before:.4f} → {sites['mean_std_after'].iloc[-1]:.4f} "
          f"(random cells: {np.mean(after_random):.4f})")


def ndvi_arrays(path):
    """{data, masked20, masked50: (48, 100, 100) date-major, year, doy} of gapfill's study."""
    path = fetched(path, NDVI_URL, "maskstudy.rda")
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    try:
        import rdata  # a reader for the benchmark only
    except ImportError:
        sys.exit("the ndvi benchmark reads an .rda file: pip install rdata (in a benchmark "
                 "environment), or pass --data FILE.npz")
    r = rdata.conversion.convert(rdata.parser.parse_file(path))

    def stack(a):  # R's (x, y, doy, year) → (date, y, x), dates in time order
        a = np.asarray(a, dtype=np.float64)
        return a.transpose(3, 2, 1, 0).reshape(-1, a.shape[1], a.shape[0])

    info = r["target.fi"]
    return {"data": stack(r["data_array"]), "masked20": stack(r["data_array_masked20"]),
            "masked50": stack(r["data_array_masked50"]),
            "year": info["year"].to_numpy(int), "doy": info["doy"].to_numpy(int)}


def ndvi_stack(a, values):
    """``values`` (48, 100, 100) as the study's stack: dated by year and day of year, 500 m
    cells in an equal-area projection in metres (the study's own grid is not given)."""
    times = (pd.to_datetime([f"{y}-01-01" for y in a["year"]])
             + pd.to_timedelta(a["doy"] - 1, unit="D")).values
    ny, nx = values.shape[1:]
    coords = {"time": times, "y": 500.0 * np.arange(ny)[::-1], "x": 500.0 * np.arange(nx)}
    return xr.DataArray(values, dims=("time", "y", "x"), coords=coords).rio.write_crs(6933)


def run_ndvi(args):
    a = ndvi_arrays(args.data)
    truth = a["data"]
    rows = []
    for pct in args.masks:
        masked = a[f"masked{pct}"]
        hidden = np.isfinite(truth) & ~np.isfinite(masked)
        train = ndvi_stack(a, masked)
        dist, since = strata(~np.isfinite(masked))
        print(f"# NDVI stack {masked.shape}, {pct} % masked: {int(hidden.sum())} hidden "
              f"cells; {machine()}", flush=True)
        joint = {"model": "spacetime", **layout(args)}
        if args.fit_windows is not None:
            joint["fit_windows"] = args.fit_windows
        for method, kw in (("spacetime", joint), ("per image", {"model": "lattice"})):
            if method not in args.methods:
                continue
            pred, secs = timed_fit(train, **kw)
            rows.append(scores(f"{method} {pct}%", truth, truth, pred["mean"].values,
                               pred["std"].values, hidden, dist, since, secs))
            print(pd.DataFrame(rows[-1:]).set_index("method").round(4).to_string(), flush=True)
    print(pd.DataFrame(rows).set_index("method").round(4).to_string())


def run_residuals(args):
    """What the joint model leaves on the NDVI stack (20 % masked): how heavy-tailed its hidden
    errors are, what a per-cell seasonal term could add (each hidden cell corrected by the
    fit's residuals at the same day of year in the other years, and at the same year's other
    dates, weight chosen on the hidden cells themselves: an upper bound), and what dropping
    the observations whose leave-one-out z exceeds 3.5 does."""
    from geogp.core.robust import cavity

    a = ndvi_arrays(args.data)
    truth, masked = a["data"], a["masked20"]
    hidden = np.isfinite(truth) & ~np.isfinite(masked)
    print(f"# NDVI residuals, 20 % masked; {machine()}", flush=True)

    def fit(values):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pred = geogp.fit(ndvi_stack(a, values), model="spacetime").predict()
        return pred["mean"].values, pred["std"].values, pred["std_latent"].values

    mean, sd, latent = fit(masked)
    e = (truth - mean)[hidden]
    top = np.sort(e**2)[::-1]
    print(f"joint model: RMSE {np.sqrt(np.mean(e**2)):.4f}, CRPS "
          f"{crps_gaussian(truth[hidden], mean[hidden], sd[hidden]):.4f}; the largest 1 % of "
          f"the hidden errors carry {top[:top.size // 100].sum() / top.sum():.0%} of the "
          f"squared error", flush=True)
    with np.errstate(invalid="ignore"):
        residual = masked - mean  # NaN where masked
    for name, key in (("same day of year, other years", a["doy"]), ("same year", a["year"])):
        total, count = np.zeros_like(mean), np.zeros_like(mean)
        for k in range(key.size):
            others = [j for j in range(key.size) if key[j] == key[k] and j != k]
            total[k] = np.nansum(residual[others], axis=0)
            count[k] = np.isfinite(residual[others]).sum(axis=0)
        shift = np.where(count > 0, total / np.maximum(count, 1), 0.0)
        best = min((float(np.sqrt(np.mean((truth - mean - w * shift)[hidden] ** 2))), w)
                   for w in np.linspace(0.0, 3.0, 31))
        print(f"  corrected by the residuals at the {name}: RMSE {best[0]:.4f} (weight "
              f"{best[1]:.1f})", flush=True)
    obs = np.isfinite(masked)
    noise = sd**2 - latent**2
    loo_mean, loo_var = cavity(mean[obs], latent[obs] ** 2, masked[obs], noise[obs])
    z = (masked[obs] - loo_mean) / np.sqrt(loo_var + noise[obs])
    kept = masked.copy()
    values = kept[obs]
    values[np.abs(z) > 3.5] = np.nan
    kept[obs] = values
    mean2, sd2, _ = fit(kept)
    e2 = (truth - mean2)[hidden]
    print(f"  refitted without the {np.mean(np.abs(z) > 3.5):.1%} of observations whose "
          f"leave-one-out |z| > 3.5: RMSE {np.sqrt(np.mean(e2**2)):.4f}, CRPS "
          f"{crps_gaussian(truth[hidden], mean2[hidden], sd2[hidden]):.4f}", flush=True)


def two_stages(train: xr.DataArray, k: int):
    """The large scales first, the cascade tried before the model's own large scales (both
    stages without them; θ refitted on the residuals): the joint model on ``train``'s
    ``k`` × ``k`` block means (a
    block with a quarter of its cells observed), its mean and latent sd interpolated
    bilinearly to the cells, then the joint model on the residuals. Returns (coarse mean,
    coarse latent sd, both stages' mean, both stages' sd of a new observation: the second
    stage's and the coarse latent sd in quadrature), (T, n_y, n_x) each."""
    from scipy.ndimage import map_coordinates

    values = train.values
    t, ny, nx = values.shape
    cy, cx = ny // k, nx // k
    blocks = values[:, :cy * k, :cx * k].reshape(t, cy, k, cx, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        coarse = np.nanmean(blocks, axis=(2, 4))
    coarse[np.isfinite(blocks).sum(axis=(2, 4)) < max(1, k * k // 4)] = np.nan
    ys = train.y.values[:cy * k].reshape(cy, k).mean(1)
    xs = train.x.values[:cx * k].reshape(cx, k).mean(1)
    pc, _ = timed_fit(xr.DataArray(coarse, dims=("time", "y", "x"), coords={
        "time": train.time.values, "y": ys, "x": xs}).rio.write_crs(train.rio.crs),
        model="spacetime", large_scales=None)
    rows, cols = np.meshgrid((np.arange(ny) - (k - 1) / 2) / k, (np.arange(nx) - (k - 1) / 2) / k,
                             indexing="ij")

    def up(a):
        return np.stack([map_coordinates(a[i], [rows, cols], order=1, mode="nearest")
                         for i in range(t)])

    big, big_sd = up(pc["mean"].values), up(pc["std_latent"].values)
    fine, _ = timed_fit(train - big, model="spacetime", large_scales=None)
    return big, big_sd, big + fine["mean"].values, np.hypot(fine["std"].values, big_sd)


def run_two_stage(args):
    """The large scales first (:func:`two_stages`) against the joint model without large
    scales and the default (with them), the sds in quadrature, on a study's hidden cells:
    ``sst`` (the ``sst`` benchmark's folds), ``ndvi`` (20 % and 50 % masked) or ``sim`` (the
    ``speed`` benchmark's simulated stack, the model's own form: RMSE against the true field,
    CRPS and coverage against the noisy values, as the sd is a new observation's). Also
    scored: the hidden cells deeper than 8 cells inside the date's gaps."""
    studies = []
    if args.study == "sst":
        da, sea = sst_stack(args.data)
        hidden = sst_hidden(da.values, sea)
        studies.append(("SST", da.values, da.values, da.where(~hidden), hidden))
    elif args.study == "ndvi":
        a = ndvi_arrays(args.data)
        for pct in (20, 50):
            masked = a[f"masked{pct}"]
            studies.append((f"NDVI {pct} %", a["data"], a["data"], ndvi_stack(a, masked),
                            np.isfinite(a["data"]) & ~np.isfinite(masked)))
    else:
        f, y, mask, times = speed_stack((100, 100), 48)
        studies.append(("simulated 100 × 100 × 48", f, y,
                        as_stack(np.where(mask, np.nan, y), times), mask))
    print(f"# two stages, {args.block} × {args.block} blocks; {machine()}", flush=True)
    for name, truth, observed, train, hidden in studies:
        dist, _ = strata(~np.isfinite(train.values))
        deep = hidden & (dist > 8)
        joint, t_joint = timed_fit(train, model="spacetime", large_scales=None)
        default, t_default = timed_fit(train, model="spacetime")
        t0 = time.perf_counter()
        big, big_sd, mean2, sd2 = two_stages(train, args.block)
        t_two = time.perf_counter() - t0
        for method, mean, sd, secs in (
                ("joint model, no large scales", joint["mean"].values, joint["std"].values,
                 t_joint),
                ("default (large scales)", default["mean"].values, default["std"].values,
                 t_default),
                ("coarse stage alone", big, big_sd, np.nan),
                ("two stages", mean2, sd2, t_two)):
            e, o = (truth - mean)[hidden], (observed - mean)[hidden]
            print(f"{name}, {method}: RMSE {np.sqrt(np.mean(e**2)):.4f}, CRPS "
                  f"{crps_gaussian(observed[hidden], mean[hidden], sd[hidden]):.4f}, cov95 "
                  f"{np.mean(np.abs(o) < 1.96 * sd[hidden]):.3f}; deeper than 8 cells "
                  f"({int(deep.sum())}): RMSE {np.sqrt(np.mean((truth - mean)[deep] ** 2)):.4f}"
                  f"; {secs:.0f} s", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sim")
    s.add_argument("--shape", type=int, nargs=2, default=[32, 32])
    s.add_argument("--dates", type=int, default=16)
    s.add_argument("--step", type=float, default=8.0)
    s.add_argument("--frac", type=float, default=0.35)
    s.add_argument("--seeds", type=int, default=2)
    s.add_argument("--truths", nargs="+", default=list(TRUTHS))
    s = sub.add_parser("sst")
    s.add_argument("--data", default=None)
    s.add_argument("--methods", nargs="+", default=["spacetime", "per image"])
    s.add_argument("--tile", type=int, default=None)
    s.add_argument("--halo", type=int, default=None)
    s = sub.add_parser("ndvi")
    s.add_argument("--data", default=None)
    s.add_argument("--tile", type=int, default=None)
    s.add_argument("--halo", type=int, default=None)
    s.add_argument("--masks", type=int, nargs="+", default=[20, 50], choices=[20, 50])
    s.add_argument("--methods", nargs="+", default=["spacetime", "per image"])
    s.add_argument("--fit-windows", type=int, default=None)
    s = sub.add_parser("cost")
    s.add_argument("--dates", type=int, default=48)
    s.add_argument("--sides", type=int, nargs="+", default=[16, 24, 32, 40])
    s.add_argument("--ordering", default="metis")
    s = sub.add_parser("residuals")
    s.add_argument("--data", default=None)
    s = sub.add_parser("two-stage")
    s.add_argument("study", nargs="?", default="sst", choices=["sst", "ndvi", "sim"])
    s.add_argument("--data", default=None)
    s.add_argument("--block", type=int, default=4)
    s = sub.add_parser("tiles")
    s.add_argument("--shape", type=int, nargs=2, default=[100, 100])
    s.add_argument("--dates", type=int, default=48)
    s.add_argument("--fit-size", type=int, default=16)
    s.add_argument("--layouts", nargs="+", default=["16:3", "16:2", "15:2", "14:2", "12:2"],
                   help="tile:halo pairs; θ is fitted with the first")
    s = sub.add_parser("speed")
    s.add_argument("--shape", type=int, nargs=2, default=[100, 100])
    s.add_argument("--dates", type=int, default=48)
    s.add_argument("--samples", type=int, default=0, help="also time N joint samples")
    s.add_argument("--place", type=int, default=0,
                   help="also time N sites for the next date (and against random cells)")
    s.add_argument("--workers", type=int, default=0,
                   help="run the posterior's tiles on a LocalCluster of N processes "
                        "(started before the clock)")
    s.add_argument("--cli", action="store_true",
                   help="fit through `geogp fit stack.nc` in its own process (peak RSS of "
                        "that process)")
    args = p.parse_args(argv)
    {"sim": run_sim, "sst": run_sst, "ndvi": run_ndvi, "cost": run_cost,
     "speed": run_speed, "tiles": run_tiles, "residuals": run_residuals,
     "two-stage": run_two_stage}[args.cmd](args)


if __name__ == "__main__":
    main()
