"""Placement through the family contract (#42 item 1).

A new family that supports placement plugs in with its own module and one registry entry
(``tests/_reference/plugin_family.py``): :func:`suggest_sites` and :func:`add_observations`
then work on its model without knowing it, and agree with a brute-force reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from geogp import families
from geogp.exceptions import InputError
from geogp.placement import add_observations, suggest_sites


@pytest.fixture
def plugged(monkeypatch):
    """The test family, registered by one entry."""
    import _reference.plugin_family as plugin

    monkeypatch.setitem(families._REGISTRY, "dense-kriging",
                        (plugin.__name__, plugin.__name__, "DenseKriging"))
    return plugin


def _brute_force_variance_picks(model, cands, n):
    """Greedy by the variance of a new measurement, each step refitting from scratch with the
    picks added as observations (their values are irrelevant to the covariance)."""
    X, picks = model.X_.copy(), []
    for _ in range(n):
        K = model.kernel(X, X) + model.noise**2 * np.eye(len(X))
        kc = model.kernel(cands, X)
        var = model.sd**2 - np.einsum("ij,ji->i", kc, np.linalg.solve(K, kc.T))
        var[picks] = -np.inf
        a = int(np.argmax(var))
        picks.append(a)
        X = np.vstack([X, cands[a]])
    return picks, var


def test_a_plugged_family_places_sites_as_the_brute_force_greedy(plugged, rng):
    X = rng.uniform(0, 6, (25, 2))
    model = plugged.DenseKriging(lengthscale=1.2, sd=1.5, noise=0.2).fit(
        X, np.sin(X[:, 0]) + rng.normal(0, 0.2, 25))
    cands = rng.uniform(0, 6, (120, 2))
    assert families.family_of(model) is plugged.FAMILY
    sites = suggest_sites(model, cands, 5, strategy="variance", min_distance=0.0)
    want, _ = _brute_force_variance_picks(model, cands, 5)
    assert sites["index"].tolist() == want
    assert sites.attrs["model"] == "dense kriging"
    # the first score: the variance of a new measurement at the first pick
    first = model.predict(cands[want[:1]])
    assert sites["score"].iloc[0] == pytest.approx(first.var_observed[0], rel=1e-10)
    with pytest.raises(InputError, match="strategy 'mi' is not available for the dense "
                       "kriging model; use 'variance'"):
        suggest_sites(model, cands, 2, strategy="mi")


def test_a_plugged_family_conditions_through_the_contract(plugged, rng):
    X = rng.uniform(0, 6, (20, 2))
    y = np.cos(X[:, 1])
    model = plugged.DenseKriging().fit(X, y)
    new, vals = rng.uniform(0, 6, (3, 2)), np.array([0.3, -0.2, 1.0])
    grid = rng.uniform(0, 6, (10, 2))
    before = model.predict(grid).mean.copy()
    out = add_observations(model, new, vals)
    ref = plugged.DenseKriging().fit(np.vstack([X, new]), np.concatenate([y, vals]))
    np.testing.assert_allclose(out.predict(grid).mean, ref.predict(grid).mean, rtol=1e-12)
    np.testing.assert_array_equal(model.predict(grid).mean, before)  # the old model unchanged


def test_models_without_the_capability_are_refused_in_one_line(rng):
    class Other:  # the generic family: no placement, no conditioning
        def predict(self, X):
            return X

    with pytest.raises(InputError, match="sensor placement needs a fitted afs, exact, lattice"):
        suggest_sites(Other(), rng.uniform(0, 1, (5, 2)), 1)
    with pytest.raises(InputError, match="adding observations without refitting is not "
                       "available for a Other"):
        add_observations(Other(), rng.uniform(0, 1, (2, 2)), [1.0, 2.0])
