"""Front end for non-Gaussian likelihoods: ``geogp.fit(da, likelihood=...)`` (docs/svgp.md).

:class:`SVGPGeoRegressor` is a :class:`geogp.api.GeoRegressor` whose estimator is an
:class:`~geogp.models.svgp.SVGPRegressor` (Poisson, Bernoulli or Student-t observations), fitted
on the observed cells with a window that covers the whole raster. Its report lists the
hyperparameters that the model has (a Poisson or Bernoulli model has no noise term), and its
progress bars follow the SVGP's phases (:class:`SVGPProgress`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geogp._format import lengths, number
from geogp._progress import bar
from geogp.adapters import KM_PER_DEGREE, GridData
from geogp.api import GeoRegressor

__all__ = ["SVGPGeoRegressor", "SVGPProgress"]

# the latent f in words, per likelihood (what b and √k(0) are the mean and sd of)
_LATENT = {"poisson": "log rate", "bernoulli": "latent (link scale)", "gaussian": "signal",
           "student_t": "signal"}


class SVGPProgress:
    """Progress bars of one SVGP fit, one per phase: the optimisation (Adam steps on
    minibatches, a known total; or L-BFGS iterations, open-ended), then the ELBO on all the
    data. Use as the estimator's ``progress`` callback; the estimator announces each phase
    through :meth:`phase`."""

    def __init__(self, label: str, enabled: bool):
        self.label, self.enabled, self._bar = label, enabled, None

    def start(self) -> None:  # the bars open when the estimator announces its first phase
        pass

    def phase(self, title: str, total: int | None, unit: str = "step") -> None:
        self._close()
        self._bar = bar(self.label + title, total, self.enabled, unit=unit)

    def __call__(self, step: int, objective: float) -> None:
        if self._bar is None:
            self.phase("training", None)
        self._bar.set_postfix(objective=f"{objective:.6g}", refresh=False)
        self._bar.update(max(int(step) - self._bar.n, 0))

    def done(self, step: int) -> None:
        """The current phase is complete after ``step`` steps."""
        if self._bar is not None:
            self._bar.update(max(int(step) - self._bar.n, 0))
            self._close()

    def _close(self) -> None:
        if self._bar is not None:
            if self._bar.total is None:
                self._bar.total = self._bar.n
                self._bar.refresh()
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        self._close()


class SVGPGeoRegressor(GeoRegressor):
    """``fit(da, likelihood="poisson"|"bernoulli"|"student_t")``: an SVGP (docs/svgp.md)."""

    def __init__(self, likelihood, **kw):
        super().__init__("auto", **kw)
        self.likelihood = likelihood

    def _resolve(self, raster_shape, regular: bool) -> None:  # model="svgp", whatever the data
        self.model_, self.model_reason_ = "svgp", f"likelihood={self.likelihood!r}"

    def _fit_raster(self, g: GridData, covariates=None) -> GeoRegressor:
        self._bounds = [[a.min() for a in g.axes], [a.max() for a in g.axes]]
        return super()._fit_raster(g, covariates)

    def _estimator(self, label: str, overrides: dict | None = None):
        from geogp.models.svgp import SVGPRegressor
        own = {k: v for k, v in (("kernel", self.kernel), ("n_features", self.n_features)) if v}
        tracker = SVGPProgress(label, bool(self.progress))
        est = SVGPRegressor(self.likelihood, bounds=getattr(self, "_bounds", None), **own,
                            **{"progress": tracker, **(self.options or {}), **(overrides or {})})
        return est, tracker

    # ------------------------------------------------------------------ reports
    def hyperparameters(self) -> pd.DataFrame:
        """One row per slice: lengthscales (y, x) in the input's units (and km for geographic
        inputs), the latent field's mean and sd (``latent_mean``, ``signal_sd``: log rate for
        Poisson, link scale for Bernoulli, data units otherwise), the likelihood's own
        parameters (``noise_sd`` for Gaussian, ``t_scale`` and ``t_dof`` for Student-t; a
        Poisson or Bernoulli model has none), M, iterations, optimizer, time."""
        self._check_fitted()
        rows = []
        for s, est in enumerate(self.estimators_):
            d = est.describe()
            row = {"slice": s}
            ell = d["lengthscale"]
            for p in range(ell.shape[0]):
                sfx = "" if ell.shape[0] == 1 else f"_{p + 1}"
                row[f"lengthscale_y{sfx}"], row[f"lengthscale_x{sfx}"] = ell[p]
                if self.spec_.geographic:
                    row[f"lengthscale_y_km{sfx}"] = ell[p, 0] * KM_PER_DEGREE
                    row[f"lengthscale_x_km{sfx}"] = ell[p, 1] * KM_PER_DEGREE
            row.update({k: d[k] for k in ("latent_mean", "signal_sd", "noise_sd", "t_scale",
                                          "t_dof") if k in d})
            row.update(n_observed=self.n_observed_[s], n_features=d["n_features"],
                       n_iter=d["n_iter"], optimizer=d["optimizer"],
                       fit_time_s=self.fit_time_s_[s])
            rows.append(row)
        return pd.DataFrame(rows).set_index("slice")

    def summary(self) -> str:
        """A short report: the likelihood, lengthscales, the latent field's mean and sd, the
        likelihood's parameters (or that it has none), the data and the optimisation."""
        table = self.hyperparameters()
        spec = self.spec_
        crs = spec.crs.to_string() if spec.crs is not None else "none"
        name = getattr(self.estimators_[0], "likelihood_", None)
        name = getattr(name, "name", str(self.likelihood))
        lines = [f"geogp svgp model (likelihood={name!r}), CRS {crs}"
                 + (f" ({spec.assumed})" if spec.assumed else "")]
        for s, row in table.iterrows():
            est = self.estimators_[s]
            head = f"  slice {s}: " if len(table) > 1 else "  "
            parts = []
            ells = [c for c in table.columns if c.startswith("lengthscale_") and "_km" not in c]
            for c_y, c_x in zip(ells[0::2], ells[1::2]):
                txt = lengths([row[c_y], row[c_x]], spec.units)
                if spec.geographic:
                    txt += " ≈ " + lengths([row[c_y.replace("_y", "_y_km", 1)],
                                            row[c_x.replace("_x", "_x_km", 1)]], "km")
                parts.append(f"lengthscale (y, x) = {txt}")
            parts.append(_latent_text(name, row, getattr(est.likelihood_, "link", None)))
            parts.append(_likelihood_text(name, row))
            how = (f"{int(row['n_iter'])} Adam steps on minibatches of "
                   f"{number(est.batch_size_)}" if row["optimizer"] == "adam"
                   else f"{int(row['n_iter'])} L-BFGS iterations")
            parts.append(f"{int(row['n_observed'])} observations, "
                         f"{number(int(row['n_features']))} Fourier features, {how}, fit in "
                         f"{row['fit_time_s']:.1f} s")
            lines.append(head + "; ".join(parts))
        return "\n".join(lines)


def _latent_text(name: str, row, link) -> str:
    what = _LATENT.get(name, "latent")
    if name == "bernoulli":
        what = f"latent ({link} scale)"
    text = f"{what}: mean {row['latent_mean']:.4g}"
    if name == "poisson":
        text += f" (rate {np.exp(row['latent_mean']):.4g})"
    return text + f", sd {row['signal_sd']:.4g}"


def _likelihood_text(name: str, row) -> str:
    if name == "gaussian":
        return f"noise sd {row['noise_sd']:.4g}"
    if name == "student_t":
        return f"Student-t noise: scale {row['t_scale']:.4g}, {row['t_dof']:.4g} degrees of freedom"
    if name == "poisson":
        return "Poisson counts: no noise term (the count's variance is its rate)"
    return "Bernoulli 0/1 values: no noise term"
