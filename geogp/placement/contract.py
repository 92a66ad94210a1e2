"""What a model family offers sensor placement: the contract behind
:func:`~geogp.placement.suggest.suggest_sites`.

A family that supports placement returns a :class:`Placement` from
:meth:`~geogp.families.generic.Family.placement`. It states the strategies it supports and how
it treats a large target set (capabilities as flags), checks the model, gives the default
minimum distance between sites, and builds the greedy state over its posterior (variances,
covariance columns, conditioning on a site), with its own memory estimate and refusal before
anything is allocated. :func:`suggest_sites` does the checks common to every model, asks the
family for its :class:`Placement`, runs the greedy and writes the table: it never asks which
model it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # annotations only
    import numpy as np

    from geogp.placement.candidates import Candidates
    from geogp.placement.greedy import Greedy

__all__ = ["Placement", "PlacementRequest"]


@dataclass(frozen=True)
class PlacementRequest:
    """One placement's inputs after the common checks (model units).

    Attributes:
        candidates: the candidate sites. targets: where predictions should improve (None:
            the candidates). existing: (N_e, D) existing sensors or None. taken: indices of
            the candidates that existing sensors sit on. strategy, criterion: as
            :func:`~geogp.placement.suggest.suggest_sites`. n_sites: sites asked for.
        screened: a large target set whose marginal criterion is evaluated over all targets
            by bounds or probes (:attr:`Placement.screens_targets`). max_memory: bytes.
        lazy: lazy greedy for ``"krause"`` (None: the model's choice). dense_limit,
            max_evaluations, seed: as :func:`~geogp.placement.suggest.suggest_sites`.
    """

    candidates: Candidates
    targets: Candidates | None
    existing: np.ndarray | None
    taken: tuple[int, ...]
    strategy: str
    criterion: str
    n_sites: int
    screened: bool
    max_memory: float
    lazy: bool | None
    dense_limit: int
    max_evaluations: int
    seed: int


class Placement:
    """A fitted model's placement posterior (subclassed once per family).

    Class attributes (capabilities):
        strategies: the strategies the model supports.
        screens_targets: a target set above the explicit limit keeps every target, through
            bounds or probes of the marginal criterion; False: it is thinned.
        thins_explicit_targets: explicit targets beyond ``max_targets`` are thinned for every
            strategy (the exact GP, whose cost grows with them cubically).
    """

    strategies: ClassVar[tuple[str, ...]] = ()
    screens_targets: ClassVar[bool] = True
    thins_explicit_targets: ClassVar[bool] = False
    label: ClassVar[str] = ""  # the model's name in the result's attrs

    def __init__(self, model: Any) -> None:
        self.model = model

    @property
    def n_dims(self) -> int:
        """Coordinate columns of the model's inputs."""
        raise NotImplementedError

    def check(self, strategy: str, criterion: str) -> None:
        """Refuse an unfitted model, or a strategy or criterion it does not support."""
        raise NotImplementedError

    def min_distance(self, coords: np.ndarray, n_sites: int) -> float:
        """The default minimum distance between sites over candidates at ``coords``."""
        raise NotImplementedError

    def greedy(self, request: PlacementRequest) -> Greedy:
        """The greedy state over the posterior (after its memory check)."""
        raise NotImplementedError
