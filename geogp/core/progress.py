"""Progress bars (tqdm, on stderr) for the phases of a geodata fit; silent when disabled.

A fit shows one bar per phase, and every bar ends at a true count:

- each hyperparameter fit (one L-BFGS run) is a counter of its iterations, open-ended while
  it runs (L-BFGS stops long before ``maxiter``, so an ETA against it would be wrong), whose
  total is set to the iterations it made when it ends. A second run (a refit, another start)
  gets a bar of its own, named in words by the model (:func:`announce_fit`, with the reason
  on a line above it), or "another L-BFGS run" when a model restarts without saying why;
- the posterior counts named steps of a known total (:func:`start_phase`, :func:`advance`);
- the front end adds "prediction" (rows) and the CLI "writing" (files);
- an SVGP fit (non-Gaussian likelihoods) has a bar per phase of its own
  (:class:`SVGPProgress`).

Models report through their ``progress`` callback, ``progress(iteration, objective)``, and,
where that callback is a :class:`FitProgress`, through the functions below, which do nothing
for a plain callback (or None).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from tqdm import tqdm  # not tqdm.auto: no ipywidgets warning in notebooks

__all__ = ["bar", "FitProgress", "SVGPProgress", "TrainingBar", "announce_fit", "start_phase",
           "advance"]


# a phase's steps differ in cost (on the satellite raster the posterior's first step takes
# half its time): no rate and no ETA, which would extrapolate one step's time to the others
STEPS_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def bar(desc: str, total: int | None, enabled: bool, unit: str = "it",
        bar_format: str | None = None) -> tqdm:
    """A tqdm bar, or a disabled one (same methods, no output) when ``enabled`` is False."""
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, file=sys.stderr,
                leave=True, dynamic_ncols=True, bar_format=bar_format)


def announce_fit(progress: object, title: str, why: str | None = None, note: str = "") -> None:
    """A model is about to run L-BFGS again (``title``, e.g. "refit without the mid-scale
    field"): ``why`` is said on a line of its own, and the run gets a bar of its own
    (``note``: what it does before its first iteration, e.g. "statistics + compile")."""
    fit = getattr(progress, "fit", None)
    if fit is not None:
        fit(title, why, note)


def start_phase(progress: object, title: str, steps: Iterable[str]) -> None:
    """A phase of ``len(steps)`` named steps starts (the bar shows the step under way)."""
    phase = getattr(progress, "phase", None)
    if phase is not None:
        phase(title, steps)


def advance(progress: object) -> None:
    """The current step of the phase is done."""
    step = getattr(progress, "advance", None)
    if step is not None:
        step()


class FitProgress:
    """The bars of one fit (see the module docstring), and its estimator's ``progress``
    callback. ``label`` prefixes every bar (e.g. "slice 2/5 "); ``note`` is what the first
    fit does before its first iteration; ``optimize`` False: :meth:`start` opens no bar."""

    def __init__(self, label: str, maxiter: int, enabled: bool,
                 note: str = "statistics + compile", optimize: bool = True) -> None:
        self.label, self.maxiter, self.enabled = label, int(maxiter), enabled
        self.note, self.optimize = note, optimize
        self._bar, self._lbfgs, self._steps = None, False, ()

    def start(self) -> None:
        """The fit starts: open its first bar (none when θ is not optimised)."""
        if self.optimize:
            self.fit("fitting hyperparameters", None, self.note)

    # ------------------------------------------------------------------ L-BFGS runs
    def fit(self, title: str, why: str | None = None, note: str = "") -> None:
        """A hyperparameter fit (an L-BFGS run) starts; see :func:`announce_fit`."""
        desc = f"{self.label}{title} (L-BFGS, at most {self.maxiter} iterations)"
        if self._lbfgs and self._bar.n == 0:  # nothing ran under the old name: rename it
            self._bar.set_description_str(desc, refresh=False)
            if why:
                self.say(why)
        else:
            self._close()  # the previous bar ends before the reason is given
            if why:
                self.say(why)
            self._open(desc, None, "iter")
            self._lbfgs = True
        self._bar.set_postfix_str(note)

    def __call__(self, iteration: int, objective: float) -> None:
        if not self._lbfgs:
            self.fit("fitting hyperparameters")
        elif iteration <= self._bar.n:  # the count went back: a new run nobody announced
            self.fit("another L-BFGS run")
        self._bar.set_postfix(objective=f"{objective:.6g}", refresh=False)
        self._bar.update(iteration - self._bar.n)

    # ------------------------------------------------------------------ counted phases
    def phase(self, title: str, steps: Iterable[str]) -> None:
        """A phase of named steps starts: a bar of ``len(steps)`` showing the step under way."""
        self._steps = tuple(steps)
        self._open(self.label + title, len(self._steps), "step", STEPS_FORMAT)
        self._lbfgs = False
        if self._steps:
            self._bar.set_postfix_str(self._steps[0])

    def advance(self) -> None:
        """The current step is done; the phase's bar closes after its last step."""
        if self._bar is None or self._lbfgs:
            return
        self._bar.update(1)
        if self._bar.n < len(self._steps):
            self._bar.set_postfix_str(self._steps[self._bar.n])
        else:
            self._bar.set_postfix_str("done", refresh=False)
            self._close()

    def tile(self, phase: str, done: int, total: int) -> None:
        """The lattice model's posterior tiles (``est.tile_progress``): a tile is done."""
        self.advance()

    # ------------------------------------------------------------------ lines and closing
    def say(self, text: str) -> None:
        """A line on stderr above the bars."""
        if self.enabled:
            tqdm.write(self.label + text, file=sys.stderr)

    def _open(self, desc: str, total, unit: str, bar_format=None) -> None:
        self._close()
        self._bar = bar(desc, total, self.enabled, unit=unit, bar_format=bar_format)

    def _close(self) -> None:
        """Close the current bar; an open-ended counter gets its count as its total. A counted
        phase that did not finish (an error) keeps the count it reached."""
        if self._bar is None:
            return
        if self._bar.total is None:
            self._bar.total = self._bar.n
            self._bar.refresh()
        self._bar.close()
        self._bar, self._lbfgs = None, False

    def close(self) -> None:
        self._close()


class SVGPProgress:
    """Progress bars of one SVGP fit, one per phase: the optimisation (Adam steps on
    minibatches, a known total; or L-BFGS iterations, open-ended), then the ELBO on all the
    data. Use as the estimator's ``progress`` callback; the estimator announces each phase
    through :meth:`phase`."""

    def __init__(self, label: str, enabled: bool) -> None:
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


TrainingBar = FitProgress  # the earlier name
