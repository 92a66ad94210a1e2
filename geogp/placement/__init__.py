"""Active sensor placement: suggest where to measure next (docs/placement.md).

Given a fitted model (hyperparameters fixed), candidate locations V_c and target locations T,
:func:`suggest_sites` picks k sites one at a time (greedy). Covariances of a conjugate Gaussian
model do not depend on the observed values, so no value is needed for a suggested site and a
batch of q suggestions is exactly q greedy steps.

Everything happens in whitened feature space (docs/bound.md). With ψ = λ^{1/2} ⊙ φ and
A = I + σ⁻² Σ_n ψ_n ψ_nᵀ over the data, the latent posterior covariance is

    C(x, x') = k(x, x') − ψ(x)ᵀψ(x') + ψ(x)ᵀ A⁻¹ ψ(x'),

and measuring at x_a adds σ⁻²ψ_aψ_aᵀ to A. With w = A⁻¹ψ_a and d = σ² + ψ_aᵀw, one step is

    A⁻¹ ← A⁻¹ − w wᵀ/d                           (Sherman–Morrison, O(M²))
    C   ← C − g gᵀ/d,     g(x) = ψ(x)ᵀ w          (docs/placement.md, s_a = d)

which reproduces the collapsed posterior recomputed with the site added (tests check it to
1e-10). Candidates are scored in batches from maintained vectors: h_c = ψ_cᵀA⁻¹ψ_c, the
target diagonal C_T,ii and, for the thesis criterion, X = Ψ_Tᵀ A⁻¹ Ψ_c (|T| × |V_c|) while
that matrix is small. Above that size the marginal criterion still counts every target: an
upper bound for all candidates (one quadratic form) and exact values over all targets for the
candidates the bound cannot rule out give the same greedy argmax
(:mod:`~geogp.placement.screen`). Thinning the targets instead (e.g. a regular stride of the
grid) rewards a site next to a kept target when the posterior correlation is shorter than
their spacing, and the picks lock onto the target lattice; only the joint criterion, whose
|T| × |T| determinant cannot be avoided, uses a stratified random subset.

Strategies (standardised units; σ² the noise variance):

==========  ============================================================  =====================
strategy    score of candidate a                                           per step
==========  ============================================================  =====================
variance    var_y(a) = C_aa + σ² (max predictive variance / entropy)        O(M² + |V_c| e)
mi          thesis (§4.4.2.2): ½ log|C_T + σ²I| − ½ log|C_T^{(a)} + σ²I|    O(M² + |V_c|(e + |T|))
            marginal (default): −½ Σ_i log(1 − g_i²/(d (C_ii + σ²)))        large T: O(M²(1 + r)
            joint: −½ log(1 − gᵀ(C_T + σ²I)⁻¹g/d), Y = (C_T + σ²I)⁻¹X kept  + q + k_s(e_T + |T|))
krause      Krause et al. (2008): H(y_a | A) − H(y_a | V∖(A ∪ a))           O(M² + |V_c| e), or
                                                                            O(M² + b M²) lazy
==========  ============================================================  =====================

(e is the cost of evaluating one linear form ψᵀw at all candidates: a dense product for small
problems, separable products of 1-D features on grids, a planned type-2 NUFFT at scattered
points; e_T the same over the targets; q one quadratic form over the candidates; k_s the exact
evaluations a step needs, r the targets whose bound weight is raised; b is the number of lazy
re-evaluations.) The joint criterion keeps Y = (C_T + σ²I)⁻¹X
by the rank-one identity Y ← Y + p (Yᵀu − v)ᵀ/e, p = (C_T + σ²I)⁻¹u, e = d − uᵀp, so it costs
O(|T||V_c|) per step too; it needs C_T + σ²I positive definite, which AFS does not guarantee
(k − k̂ need not be PSD), hence the marginal default.

Krause's mutual information uses the model's finite-rank covariance ψᵀA⁻¹ψ (the AFS implied
kernel conditioned on the data) and the feature-space form of its "rest of V" term:
with E = A + σ⁻² Σ_{c ∈ V∖A} ψ_cψ_cᵀ and q_a = ψ_aᵀE⁻¹ψ_a, σ²_{a|Ā} = σ⁴/(σ² − q_a), and
selecting a downdates E by σ⁻²ψ_aψ_aᵀ. The gain is submodular, so lazy greedy (a heap of
stale upper bounds, docs/placement.md) returns the plain greedy picks.

The exact GP (:class:`geogp.models.exact.ExactGP`) enters the same machinery through
explicit features of its posterior covariance on V_c ∪ T (an eigendecomposition, O(|V_c ∪ T|³)),
for small candidate sets. The wavelet model (:class:`geogp.models.wavelet.WaveletRegressor`)
uses its sparse posterior (:mod:`~geogp.placement.wavelet`, :class:`SparseFeaturePosterior`):
one solve with the model's sparse factorisation per chosen site, Woodbury with the chosen set,
strategies ``"variance"`` and ``"mi"``.

Sites keep a minimum distance, by default ¼ of the model's shortest lengthscale
(:func:`auto_min_distance`; ``min_distance=0`` turns it off).

Modules: :mod:`~geogp.placement.candidates` (locations, stratified thinning, constraints),
:mod:`~geogp.placement.posterior` (rank-one feature posterior),
:mod:`~geogp.placement.observe` (:func:`add_observations`),
:mod:`~geogp.placement.operators` (candidate/target feature operators, AFS and exact-GP
problems), :mod:`~geogp.placement.suggest` (:func:`suggest_sites`),
:mod:`~geogp.placement.greedy` (the greedy state and loop), :mod:`~geogp.placement.screen`
(the marginal criterion over a large target set), :mod:`~geogp.placement.wavelet` (wavelet
models), :mod:`~geogp.placement.output`
(GeoJSON/CSV writers, :func:`plot_sites`).

Example:
    >>> import numpy as np, geogp
    >>> from geogp.models.afs import AFSRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 10, (60, 2)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    >>> model = AFSRegressor(n_features=100, margin=0.2, maxiter=30).fit(X, y)
    >>> grid = Candidates.grid([np.linspace(0, 10, 21), np.linspace(0, 10, 21)])
    >>> sites = suggest_sites(model, grid, 3, strategy="variance")
    >>> list(sites.columns[:4])
    ['order', 'index', 'x', 'y']
"""

from __future__ import annotations

from geogp.placement.candidates import Candidates as Candidates
from geogp.placement.candidates import auto_min_distance as auto_min_distance
from geogp.placement.observe import add_observations as add_observations
from geogp.placement.output import plot_sites as plot_sites
from geogp.placement.output import to_geojson as to_geojson
from geogp.placement.output import write_csv as write_csv
from geogp.placement.output import write_geojson as write_geojson
from geogp.placement.posterior import FeaturePosterior as FeaturePosterior
from geogp.placement.suggest import CRITERIA as CRITERIA
from geogp.placement.suggest import STRATEGIES as STRATEGIES
from geogp.placement.suggest import suggest_sites as suggest_sites
from geogp.placement.wavelet import SparseFeaturePosterior as SparseFeaturePosterior

__all__ = [
    "STRATEGIES",
    "CRITERIA",
    "Candidates",
    "FeaturePosterior",
    "SparseFeaturePosterior",
    "add_observations",
    "auto_min_distance",
    "suggest_sites",
    "to_geojson",
    "write_geojson",
    "write_csv",
    "plot_sites",
]
