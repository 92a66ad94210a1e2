"""The registry of model families (geogp.families) and the Family contract (issue 30)."""

from __future__ import annotations

import pytest

from geogp.exceptions import InputError
from geogp.families import MODELS, family, family_of, is_model, savable_models
from geogp.families.generic import Family
from geogp.models.wavelet import WaveletRegressor

ALL = (*MODELS, "svgp")


@pytest.mark.parametrize("name", ALL)
def test_every_family_fulfils_the_contract_and_builds_its_model(name):
    fam = family(name)
    # a Family subclass, from the model's own package, of the registry's model class
    assert isinstance(fam, Family) and fam.name == name
    assert type(fam).__module__ == f"{fam.model_class.__module__.rsplit('.', 1)[0]}.family"
    if name != "svgp":  # built by the likelihood front end
        est = fam.make()
        assert family_of(est) is fam


def test_family_of_follows_subclasses_and_unknown_names_are_refused():
    class Timed(WaveletRegressor):
        pass

    assert family_of(Timed()).name == "wavelet"
    assert family_of(object()).name == "other"
    assert not is_model("gp") and not is_model(None)
    with pytest.raises(InputError, match="model must be one of"):
        family("gp")
    assert savable_models() == ("afs", "lattice", "wavelet", "spacetime")


def test_make_refuses_unknown_options_and_keeps_the_front_end_defaults():
    with pytest.raises(InputError, match="unknown option"):
        family("lattice").make({"n_features": 10})
    est = family("afs").make()
    assert (est.kernel, est.n_features, est.mean) == ("matern12", "auto", "linear")
