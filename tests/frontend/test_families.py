"""The registry of model families (geogp.families) and the Family contract (issue 30)."""

from __future__ import annotations

import pytest

from geogp.exceptions import InputError
from geogp.families import (
    ALIASES,
    MODELS,
    canonical,
    family,
    family_of,
    is_model,
    resolve_model,
    savable_models,
)
from geogp.families.generic import Family
from geogp.models.lattice import LatticeRegressor
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
        # a family that only builds its model otherwise (nonstationary: varying=True) leaves
        # the fitted model to the family it derives from, which predicts and saves it alike
        owner = family_of(est)
        assert owner is fam or (isinstance(fam, type(owner)) and owner.name != "other")


def test_family_of_follows_subclasses_and_unknown_names_are_refused():
    class Timed(WaveletRegressor):
        pass

    assert family_of(Timed()).name == "wavelet_basis"
    assert family_of(LatticeRegressor(varying=True)).name == "lattice"
    assert family_of(object()).name == "other"
    assert not is_model("gp") and not is_model(None)
    with pytest.raises(InputError, match="model must be one of"):
        family("gp")
    assert savable_models() == ("afs", "lattice", "nonstationary", "wavelet_basis", "spacetime")


def test_wavelet_is_an_alias_of_the_nonstationary_lattice_model():
    """issue #45: "wavelet" names the model for fields whose roughness varies, the lattice
    model with a varying range and sd; the thesis's wavelet basis is "wavelet_basis"."""
    assert ALIASES == {"wavelet": "nonstationary"}
    assert is_model("wavelet") and canonical("wavelet") == "nonstationary"
    assert canonical("lattice") == "lattice" and "wavelet" not in MODELS
    assert family("wavelet") is family("nonstationary")
    assert family("nonstationary").model_class is LatticeRegressor
    assert family("wavelet_basis").model_class is WaveletRegressor
    model, reason = resolve_model("wavelet", raster_shape=(40, 48))
    assert model == "nonstationary"
    assert reason == ("requested (model='wavelet' is an alias of model='nonstationary': the "
                      "lattice model with a range and sd that vary in space on a "
                      "multiresolution basis)")
    assert resolve_model("nonstationary", raster_shape=(40, 48)) == ("nonstationary",
                                                                     "requested")
    for name in ("wavelet", "nonstationary"):
        est = family(name).make()
        assert isinstance(est, LatticeRegressor) and est.varying is True
        assert family(name).make({"varying": 3}).varying == 3  # a number of levels varies too
    assert family("lattice").make().varying == "auto"  # the lattice default is unchanged


@pytest.mark.parametrize("varying", [False, None, "auto", 0])
def test_nonstationary_refuses_a_range_that_does_not_vary_in_one_line(varying):
    with pytest.raises(InputError, match=r"model='nonstationary' always lets the range and sd "
                       r"vary \(varying=True\); for varying=.* use model='lattice'\.") as info:
        family("wavelet").make({"varying": varying})
    assert "\n" not in str(info.value)


def test_make_refuses_unknown_options_and_keeps_the_front_end_defaults():
    with pytest.raises(InputError, match="unknown option"):
        family("lattice").make({"n_features": 10})
    est = family("afs").make()
    assert (est.kernel, est.n_features, est.mean) == ("matern12", "auto", "linear")
