"""Model files: a fitted :class:`~geogp.frontend.api.GeoRegressor` as one ``.npz``, without pickle.

:mod:`geogp.persist.file` writes and reads the container (:func:`save_model`,
:func:`load_model`; :meth:`GeoRegressor.save <geogp.frontend.api.GeoRegressor.save>` and
:func:`geogp.load_model` call them); each model's ``codec`` module
(:mod:`~geogp.models.afs.codec`, :mod:`~geogp.models.lattice.codec`,
:mod:`~geogp.models.wavelet.codec`) turns one fitted model into arrays and back;
:mod:`~geogp.persist.checks` and :mod:`~geogp.persist.semantics` check untrusted files, and
:mod:`~geogp.persist.sign` signs them with a key.
"""

from geogp.persist.file import FORMAT, FORMAT_VERSION, load_model, save_model

__all__ = ["save_model", "load_model", "FORMAT", "FORMAT_VERSION"]
