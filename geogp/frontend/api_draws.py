"""Maps drawn from a fitted front end: sample rasters, exceedance and effective lengthscale
(docs/afs.md, docs/lattice.md, docs/wavelets.md).

A mixin of :class:`geogp.frontend.api.GeoRegressor`; it uses the fitted state that class sets
(``estimators_``, ``spec_``, ``target_``, ``model_``, ...) and its :meth:`predict`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from scipy.special import ndtr

from geogp.core.memory import check_samples
from geogp.exceptions import InputError
from geogp.families import MODELS, family
from geogp.frontend.adapters import KM_PER_DEGREE

if TYPE_CHECKING:  # annotations only
    from numpy.typing import ArrayLike

__all__ = ["DrawsMixin"]


class DrawsMixin:
    """``sample``, ``exceedance``, ``effective_lengthscale`` and ``observation_weight`` for
    :class:`geogp.frontend.api.GeoRegressor`."""

    def sample(self, n: int = 10, like: xr.DataArray | xr.Dataset | None = None, *,
               seed: int | None = None, latent: bool = True, x: ArrayLike | None = None,
               y: ArrayLike | None = None) -> xr.DataArray:
        """``n`` posterior sample rasters (conditional simulation), for uncertainty propagation.

        Each sample is a draw of the whole field from the posterior, exact under the model
        (lattice models: one sparse factorisation, then a triangular solve per 64 samples,
        :meth:`~geogp.models.lattice.LatticeRegressor.sample`; AFS models: a draw of the
        feature weights and one grid transform per sample, :mod:`geogp.models.afs.sampling`;
        the space-time model: one joint draw over every date, by Matheron's rule on its tiles,
        :meth:`~geogp.models.spacetime.SpaceTimeRegressor.sample`);
        the mean and spread of many samples reproduce :meth:`predict`'s ``mean`` and
        ``std_latent`` (AFS: less the prior variance its features leave out, k(0) − φᵀΛφ).
        A lattice model loaded from a file cannot sample (its file keeps the per-cell moments,
        not the factorisation): refit it.

        Args:
            n: number of samples. like, x, y: the grid (as :meth:`predict`; default the input
                raster). seed: random seed (reproducible samples). latent: samples of the
                field (default) or, with ``False``, of new observations (noise added).

        Returns:
            ``xr.DataArray`` (sample, [extra,] y, x) in the data's units, with the grid's
            coordinates, the input's attributes and CRS.
        """
        self._check_fitted()
        fam = family(self.model_)
        if not fam.can_sample:
            able = ", ".join(repr(m) for m in MODELS if family(m).can_sample)
            each = (" (each date alone)" if fam.fits_series else "")
            raise InputError(f"sample() is not available for model={self.model_!r} yet; fit "
                             f"with model= one of {able}{each} to draw samples.")
        if not (isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1):
            raise InputError(f"n must be an integer ≥ 1; got {n!r}.")
        target, axes = self._grid(like, x, y)
        check_samples(int(n), len(target.y), len(target.x), len(self.estimators_))
        draws = fam.sample_slices(self.estimators_, axes, int(n), seed,
                                  observed=not latent)  # (sample, slice, y, x)
        out = self._raster(draws, ["sample"], target, f"{self.name_ or 'field'}_samples",
                           dict(self.attrs_))
        return out.assign_coords(sample=np.arange(n))

    def exceedance(self, threshold: float, like: xr.DataArray | xr.Dataset | None = None, *,
                   latent: bool = True, **predict_options: Any) -> xr.DataArray:
        """Probability that the field exceeds ``threshold`` at every cell: Φ((μ − t)/σ).

        Args:
            threshold: the level t, in the data's units.
            like: the grid (as :meth:`predict`; default the input raster).
            latent: σ of the field itself (default) or, with ``False``, of a new observation
                (noise included).
            **predict_options: ``x``, ``y``, ``outside``, ``points`` as for :meth:`predict`.

        Returns:
            ``xr.DataArray`` named ``exceedance_probability`` on the prediction's grid, with
            its coordinates and CRS, attrs ``threshold`` and ``latent``. Cells of zero latent
            variance get 0 or 1.
        """
        t = float(threshold)
        if not np.isfinite(t):
            raise InputError(f"threshold must be a finite number; got {threshold!r}.")
        pred = self.predict(like, **predict_options)
        sd = pred["std_latent" if latent else "std"]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = (pred["mean"] - t) / sd
        prob = xr.apply_ufunc(ndtr, z.where(sd > 0, np.sign(pred["mean"] - t) * np.inf))
        prob = prob.where(pred["mean"].notnull())
        prob.name = "exceedance_probability"
        prob.attrs = {"long_name": f"P(field > {t:g})", "threshold": t, "latent": int(latent),
                      "units": "1"}
        return prob

    def effective_lengthscale(self, like: xr.DataArray | xr.Dataset | None = None, *,
                              x: ArrayLike | None = None,
                              y: ArrayLike | None = None) -> xr.DataArray:
        """Map of the wavelet model's local lengthscale (docs/wavelets.md, effective lengthscale).

        The multiresolution prior puts more weight on fine levels where its components say so,
        so its lengthscale varies in space. This is the geometric mean √(ℓ_y ℓ_x) of the
        per-axis effective lengthscales (thesis eqs. 4.33–4.36) at every cell: a qualitative
        map of where the learnt field is rough (short) or smooth (long).

        Args:
            like, x, y: the grid (as :meth:`predict`; default the input raster).

        Returns:
            ``xr.DataArray`` ([extra,] y, x) named ``effective_lengthscale``, in the CRS's
            linear units (km for geographic rasters), with the grid's coordinates and CRS.

        Raises:
            InputError: for models other than ``model="wavelet_basis"`` (their lengthscale is
                the same everywhere: see :meth:`hyperparameters`; the lattice model maps its
                local range with :meth:`local_scales`).
        """
        self._check_fitted()
        if not family(self.model_).maps_lengthscale:
            raise InputError(f"effective_lengthscale() maps the local lengthscale of "
                             f"model='wavelet_basis'; this model is {self.model_!r}, whose "
                             "lengthscale is the same everywhere (see hyperparameters()).")
        target, (my, mx) = self._grid(like, x, y)
        Y, X = np.meshgrid(my, mx, indexing="ij")
        pts = np.column_stack([Y.ravel(), X.ravel()])
        scale, units = ((KM_PER_DEGREE, "km") if self.spec_.geographic
                        else (1.0, self.spec_.units))
        maps = np.stack([np.sqrt(np.prod(est.effective_lengthscale(pts), axis=1)).reshape(Y.shape)
                         for est in self.estimators_]) * scale  # (slice, y, x)
        return self._raster(maps, [], target, "effective_lengthscale",
                            {"units": units, "long_name": "effective lengthscale "
                             "(wavelet prior, geometric mean of the axes)"})

    def local_scales(self, like: xr.DataArray | xr.Dataset | None = None, *,
                     x: ArrayLike | None = None,
                     y: ArrayLike | None = None) -> xr.Dataset:
        """Maps of the lattice model's local range and marginal sd (docs/lattice.md,
        a range and sd that vary).

        Fitted with ``varying="auto"`` (``geogp fit --local-range``) the range and sd vary
        over the raster: short ranges and large sds where the field is rough, long ranges and
        small sds where it is smooth. Without it both maps are constant.

        Args:
            like, x, y: the grid (as :meth:`predict`; default the input raster).

        Returns:
            ``xr.Dataset`` with ``local_range`` (the CRS's linear units; km for geographic
            rasters) and ``local_sd`` (the data's units), ([extra,] y, x), with the grid's
            coordinates and CRS.

        Raises:
            InputError: for models other than the lattice model.
        """
        self._check_fitted()
        fam = family(self.model_)
        if not fam.maps_local_scales:
            fam.local_scales(self.estimators_[0], np.zeros((0, 2)))  # raises, saying why
        target, (my, mx) = self._grid(like, x, y)
        Y, X = np.meshgrid(my, mx, indexing="ij")
        pts = np.column_stack([Y.ravel(), X.ravel()])
        scale, units = ((KM_PER_DEGREE, "km") if self.spec_.geographic
                        else (1.0, self.spec_.units))
        pairs = [fam.local_scales(est, pts) for est in self.estimators_]
        ranges = np.stack([r.reshape(Y.shape) for r, _ in pairs]) * scale
        sds = np.stack([s.reshape(Y.shape) for _, s in pairs])
        return xr.Dataset({
            "local_range": self._raster(ranges, [], target, "local_range", {
                "units": units, "long_name": "local range of the lattice model's field"}),
            "local_sd": self._raster(sds, [], target, "local_sd", {
                "long_name": "local marginal sd of the lattice model's field"})})

    def observation_weight(self, like: xr.DataArray | xr.Dataset | None = None, *,
                           x: ArrayLike | None = None,
                           y: ArrayLike | None = None) -> xr.DataArray:
        """Map of what a robust fit distrusted: each observed cell's weight (docs/gvi.md).

        With ``robust=True`` the lattice and AFS models learn which observations are gross
        errors (cloud-mask leaks, spikes) and give them weights near 0; clean cells keep weights
        near 1. Cells that were not observed are NaN.

        Args:
            like, x, y: the grid (as :meth:`predict`; default the input raster).

        Returns:
            ``xr.DataArray`` ([extra,] y, x) named ``obs_weight``, between 0 and 1, with the
            grid's coordinates and CRS.

        Raises:
            InputError: for a model fitted without ``robust=True``.
        """
        self._check_fitted()
        if not (family(self.model_).fits_robust
                and all(getattr(est, "robust", False) for est in self.estimators_)):
            raise InputError("observation_weight() maps a robust fit's weights; fit with "
                             "robust=True (geogp fit --robust). A plain fit weighs every "
                             "observation 1.")
        target, (my, mx) = self._grid(like, x, y)
        Y, X = np.meshgrid(my, mx, indexing="ij")
        pts = np.column_stack([Y.ravel(), X.ravel()])
        maps = np.stack([est.observation_weight(pts).reshape(Y.shape)
                         for est in self.estimators_])
        return self._raster(maps, [], target, "obs_weight",
                            {"long_name": "weight of each observation in the robust fit "
                             "(near 0: treated as a gross error)"})

    def _raster(self, values, lead: list, target, name: str, attrs: dict) -> xr.DataArray:
        """``values`` (*lead, slice, y, x) as a DataArray (*lead, [extra,] y, x) on the target
        grid: its coordinates, the extra dimension's (or no slice axis without one), the CRS."""
        dims = [*lead, target.y_dim, target.x_dim]
        coords = dict(target.coords)
        if self.extra_dim_ is not None:
            dims.insert(len(lead), self.extra_dim_)
            coords.update(self.extra_coords_ or {})
        else:
            values = np.take(values, 0, axis=len(lead))
        out = xr.DataArray(values, dims=dims, coords=coords, name=name, attrs=attrs)
        crs = self.spec_.crs_wkt or target.crs_wkt
        out = target.in_source_order(out)
        if crs:
            out = out.rio.set_spatial_dims(x_dim=target.x_dim, y_dim=target.y_dim)
            out = out.rio.write_crs(crs)
        return out
