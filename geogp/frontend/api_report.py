"""Reports on a fitted front end: the hyperparameters table, the summary and the evidence.

A mixin of :class:`geogp.frontend.api.GeoRegressor`; it uses the fitted state that class sets
(``estimators_``, ``spec_``, ``model_``, ``n_observed_``, ``fit_time_s_``, ...). An SVGP
(``likelihood`` other than Gaussian) reports the hyperparameters its model has: a Poisson or
Bernoulli model has no noise term.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geogp.core.formatting import lengths, number
from geogp.exceptions import InputError
from geogp.families import GAUSSIAN, family
from geogp.frontend.adapters import KM_PER_DEGREE

__all__ = ["ReportMixin"]

# the latent f in words, per likelihood (what b and √k(0) are the mean and sd of)
_LATENT = {"poisson": "log rate", "bernoulli": "latent (link scale)", "gaussian": "signal",
           "student_t": "signal"}


class ReportMixin:
    """``hyperparameters``, ``lengthscale_``, ``summary`` and ``score`` for
    :class:`geogp.frontend.api.GeoRegressor`."""

    def hyperparameters(self) -> pd.DataFrame:
        """One row per slice: lengthscales (y, x) in the input's units (and km for geographic
        inputs, whose lengthscales are in degrees of latitude), signal and noise sd, M, time.

        For an SVGP (``likelihood`` other than Gaussian): the latent field's mean and sd
        (``latent_mean``, ``signal_sd``: log rate for Poisson, link scale for Bernoulli, data
        units otherwise) and the likelihood's own parameters (``noise_sd`` for Gaussian,
        ``t_scale`` and ``t_dof`` for Student-t; a Poisson or Bernoulli model has none)
        instead of signal and noise sd, and the optimizer."""
        self._check_fitted()
        if self.likelihood != GAUSSIAN:
            return self._svgp_hyperparameters()
        rows = []
        fam = family(self.model_)
        for s, est in enumerate(self.estimators_):
            d = fam.describe(est)
            row = {"slice": s}
            ell = d["lengthscale"]
            for p in range(0 if ell is None else ell.shape[0]):
                sfx = "" if ell.shape[0] == 1 else f"_{p + 1}"
                row[f"lengthscale_y{sfx}"], row[f"lengthscale_x{sfx}"] = ell[p]
                if self.spec_.geographic:
                    row[f"lengthscale_y_km{sfx}"] = ell[p, 0] * KM_PER_DEGREE
                    row[f"lengthscale_x_km{sfx}"] = ell[p, 1] * KM_PER_DEGREE
            if "mid_scale_range" in d:   # lattice: the mid-scale level
                row["mid_scale_range"] = d["mid_scale_range"]
                if self.spec_.geographic:
                    row["mid_scale_range_km"] = d["mid_scale_range"] * KM_PER_DEGREE
                row["mid_scale_sd"] = d["mid_scale_sd"]
            if "wavelength" in d:   # lattice: the oscillating covariance's spectral peak
                row["wavelength"] = d["wavelength"]
                if self.spec_.geographic:
                    row["wavelength_km"] = d["wavelength"] * KM_PER_DEGREE
            if "large_scale_lengthscale" in d:   # lattice: the large-scale features' part
                row["large_scale_lengthscale"] = d["large_scale_lengthscale"]
                if self.spec_.geographic:
                    row["large_scale_lengthscale_km"] = d["large_scale_lengthscale"] * KM_PER_DEGREE
                row["large_scale_sd"] = d["large_scale_sd"]
            row.update(signal_sd=d["signal_sd"], noise_sd=d["noise_sd"],
                       n_observed=self.n_observed_[s], n_features=d["n_features"],
                       n_iter=d["n_iter"], converged=d["converged"],
                       fit_time_s=self.fit_time_s_[s])
            rows.append(row)
        return pd.DataFrame(rows).set_index("slice")

    @property
    def lengthscale_(self) -> np.ndarray:
        """Lengthscales (y, x) of the first slice's first kernel part, in the input's units
        (degrees of latitude for geographic inputs)."""
        self._check_fitted()
        ell = family(self.model_).describe(self.estimators_[0])["lengthscale"]
        if ell is None:
            raise InputError(f"model={self.model_!r} has no single lengthscale.")
        return ell[0]

    def summary(self) -> str:
        """A short human-readable report of the fit."""
        if self.likelihood != GAUSSIAN:
            return self._svgp_summary()
        table = self.hyperparameters()
        fam = family(self.model_)
        spec = self.spec_
        crs = spec.crs.to_string() if spec.crs is not None else "none"
        reason = getattr(self, "model_reason_", "requested")
        chosen = f" (model='auto': {reason})" if self.model == "auto" else ""
        lines = [f"geogp {self.model_} model{chosen}, CRS {crs}"
                 + (f" ({spec.assumed})" if spec.assumed else "")]
        if fam.fits_series:  # one joint model over the dates: one line
            words = fam.series_words(self.estimators_[0], lambda v: lengths([v], spec.units))
            lines.append(f"  {words}; {sum(self.n_observed_):,} observations on "
                         f"{len(self.estimators_)} dates, fit in {sum(self.fit_time_s_):.1f} s")
            return "\n".join(lines)
        for s, row in table.iterrows():
            head = f"  slice {s}: " if len(table) > 1 else "  "
            ell = [c for c in table.columns if c.startswith("lengthscale_") and "_km" not in c]

            # in the CRS's unit (metres from 1 km up in km), ≈ km on lon/lat
            def length(*cols, row=row):
                txt = lengths([row[c] for c in cols], spec.units)
                km = [c.replace("_y", "_y_km", 1).replace("_x", "_x_km", 1)
                      if c.startswith("lengthscale_") else c + "_km" for c in cols]
                return txt + (f" ≈ {lengths([row[c] for c in km], 'km')}"
                              if spec.geographic else "")

            parts = [f"lengthscale (y, x) = {length(c_y, c_x)}"
                     for c_y, c_x in zip(ell[0::2], ell[1::2], strict=True)]
            if fam.single_range and ell:  # isotropic SPDE: one range
                parts[0] = f"range ρ = {length(ell[0])}"
            if "mid_scale_range" in row and pd.notna(row["mid_scale_range"]):
                parts.append(f"mid scales: range {length('mid_scale_range')}, "
                             f"sd {row['mid_scale_sd']:.4g}")
            desc = fam.describe(self.estimators_[s])
            if desc.get("mid_scale_dropped") is not None:
                parts.append(_mid_dropped(desc["mid_scale_dropped"], spec))
            if "local_range_span" in desc:  # varying="auto": a range and sd per cell
                parts.append(f"range varies over {lengths(desc['local_range_span'], spec.units)}"
                             f" (min, max), sd over ({desc['local_sd_span'][0]:.4g}, "
                             f"{desc['local_sd_span'][1]:.4g})")
            if "wavelength" in row and pd.notna(row["wavelength"]):
                parts.append("oscillating covariance (hole effect), " + (
                    f"wavelength {length('wavelength')}" if np.isfinite(row["wavelength"])
                    else "no spectral peak"))
            if "large_scale_lengthscale" in row:
                parts.append(f"large scales: lengthscale {length('large_scale_lengthscale')}, "
                             f"sd {row['large_scale_sd']:.4g}")
            parts.append(f"signal sd {row['signal_sd']:.4g}, noise sd {row['noise_sd']:.4g}")
            parts.append(f"{int(row['n_observed'])} observations"
                         f"{fam.describe(self.estimators_[s])['unknowns']}, fit in "
                         f"{row['fit_time_s']:.1f} s")
            lines.append(head + "; ".join(parts))
        return "\n".join(lines)

    def _svgp_hyperparameters(self) -> pd.DataFrame:
        """:meth:`hyperparameters` of an SVGP (``likelihood`` other than Gaussian)."""
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

    def _svgp_summary(self) -> str:
        """:meth:`summary` of an SVGP: the likelihood, lengthscales, the latent field's mean
        and sd, the likelihood's parameters (or that it has none), the data and the
        optimisation."""
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
            for c_y, c_x in zip(ells[0::2], ells[1::2], strict=True):
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

    def score(self) -> float:
        """Model evidence for comparing fits of the same data, in nats, on the data's scale.

        The collapsed variational bound (AFS; a lower bound of the log marginal likelihood) or
        the exact log marginal likelihood (``model="exact"``, ``"wavelet_basis"``), summed over
        slices. Each is computed on standardised values and brought back to the data's units
        by subtracting N·log(y_scale) (the Jacobian of the standardisation), so that fits
        with different settings of the same raster compare directly: higher is better.
        """
        self._check_fitted()
        fam = family(self.model_)
        total = 0.0
        for est, n in zip(self.estimators_, self.n_observed_, strict=True):
            value = fam.evidence(est)
            total += float(value) - n * float(np.log(est.scaler_.y_scale))
        return total


def _mid_dropped(ranges, spec) -> str:
    """Why ``mid_scale="auto"`` dropped the mid-scale field: ``ranges``, the first fit's
    (local, mid-scale) ranges in model units (NaN: not recorded, a model saved before)."""
    if not np.all(np.isfinite(ranges)):
        why = "the first fit gave the local field the longer range"
    else:
        def length(v):
            return lengths([v], spec.units) + (f" ≈ {lengths([v * KM_PER_DEGREE], 'km')}"
                                               if spec.geographic else "")
        why = (f"the first fit gave the local field a longer range ({length(ranges[0])}) "
               f"than the mid-scale field ({length(ranges[1])})")
    return f"mid-scale field dropped: {why}, so it was not identified; refitted without it"


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
