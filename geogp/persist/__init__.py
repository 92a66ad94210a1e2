"""Model files: a fitted :class:`~geogp.api.GeoRegressor` as one ``.npz``, without pickle.

:mod:`geogp.persist.file` writes and reads the container (:func:`save_model`,
:func:`load_model`; :meth:`GeoRegressor.save <geogp.api.GeoRegressor.save>` and
:func:`geogp.load_model` call them); :mod:`~geogp.persist.afs`, :mod:`~geogp.persist.lattice`
and :mod:`~geogp.persist.wavelet` turn one fitted model into arrays and back;
:mod:`~geogp.persist.checks` and :mod:`~geogp.persist.semantics` check untrusted files, and
:mod:`~geogp.persist.sign` signs them with a key.
"""

from geogp.persist.file import FORMAT, FORMAT_VERSION, load_model, save_model

__all__ = ["save_model", "load_model", "FORMAT", "FORMAT_VERSION"]
