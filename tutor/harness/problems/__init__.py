"""What a kernel drill computes, and how the harness checks and times it.

Each kernel drill names a *problem* in its TOML (``problem = "attention"``, the
default).  A problem is a module here that knows that computation's launcher
contract, inputs, float64 reference, shapes, visit maps and mistakes; the rest
of the harness (loading the student's file, the worker, the result, the
report) is shared.  A new drill of an existing problem needs only data and a
kernel; a new kind of computation needs one module here and a line in
:data:`PROBLEMS`.

A problem module exposes one object, ``PROBLEM``, that implements
:class:`Problem`: the calls the harness makes, each typed by a protocol of its
own below (:class:`CheckCorrectness`, :class:`TimingLaunches`, ...), and the
optional capabilities as attributes that are None where a problem lacks them.
:class:`ModuleProblem` makes one from a module's functions; mypy checks every
``PROBLEM`` against :class:`Problem`, and :func:`problem_for` returns it typed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, ReadOut, VisitMap

if TYPE_CHECKING:
    import torch

    from tutor.catalog import Drill
    from tutor.harness.roofline import Counted

# problems whose PROBLEM.check_one_shape is not None, by name: the runner (which never
# imports a problem module, nor torch) asks it whether a crash on the ragged shapes can be
# re-run at a whole-block length to say where it comes from (tests/test_problems.py checks
# that this set and the problems' own capability agree)
SHAPE_ONLY_PROBLEMS = frozenset({"attention"})

# problem name -> module whose PROBLEM implements it (imported when first needed)
PROBLEMS: dict[str, str] = {
    "attention": "tutor.harness.problems.attention",
    "attention_backward": "tutor.harness.problems.attention_backward",
    "block_sparse": "tutor.harness.problems.block_sparse",
    "sliding_window_gqa": "tutor.harness.problems.sliding_window_gqa",
    "split_kv_decode": "tutor.harness.problems.split_kv_decode",
    "varlen_attention": "tutor.harness.problems.varlen_attention",
    "paged_decode": "tutor.harness.problems.paged_decode",
}


@dataclass
class Diagnosed:
    """What the diagnosis found: the named mistakes and findings, the guard bands a
    launch reached, and the weights read out (per failing mode)."""

    diagnosis: list[Diagnosis] = field(default_factory=list)
    guard_findings: list[GuardFinding] = field(default_factory=list)
    readout: dict[str, ReadOut] = field(default_factory=dict)


@dataclass
class Correctness:
    """What the correctness launches measured, and the diagnosis still to run."""

    cases: list[CaseResult]
    shape: list[int]  # the default case's shape, as reported
    diagnose: Callable[[], Diagnosed]  # the diagnosis phase, over these launches
    # launches of the variants the diagnosis will compile beyond the verdict's own (drill 07's
    # num_splits=1 run), for the check to compile at once before it on a GPU; None: none
    diagnosis_variants: Callable[[], list[Callable[[], object]]] | None = None
    visits: list[VisitMap] = field(default_factory=list)  # the first one is headlined
    # the default shape's full launch, where the drill also runs a causal one: its
    # visited blocks against the causal map's are the counted work ratio
    full_visits: VisitMap | None = None


@dataclass
class TimedLaunches:
    shape: list[int]
    student: Mapping[str, Callable[[], object]]  # mode -> one launch of the student's kernel
    baseline: Mapping[str, Callable[[], object]] = field(default_factory=dict)  # mode -> torch's own (GPU)
    inputs: tuple[torch.Tensor, ...] = ()  # what the student's launches read (the roofline's counting reuses them)
    # on a GPU, once after the timing: run each timed launch again and compare a part of
    # its output with the float64 reference; a message where they differ, else None.  The
    # timed launches record no visits, so a kernel may run another configuration there
    # (an autotuned one) than the one the verdict checked.
    verify: Callable[[], str | None] | None = None


# -- the calls a problem answers ---------------------------------------------------------------
class CheckCorrectness(Protocol):
    def __call__(self, drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                 shape: tuple[int, int, int, int] | None = None) -> Correctness:
        """Launch the student's kernel on every correctness case (fresh random inputs,
        poisoned outputs), compare with the float64 reference and record the visit maps:
        the *verdict*.  Its ``diagnose`` is the *diagnosis*, not yet run: the read-outs,
        the probes that re-run a launch, the named mistakes.  The harness runs it at once
        when every case passed (no probe is needed then) and as its own phase, after the
        verdict is out, when one failed.  Its probe launches reuse the variants the
        correctness launches compiled.  ``shape`` overrides the default case's shape.
        Raises whatever the student's launcher raises; the caller turns it into a report."""
        ...


class CheckOneShape(Protocol):
    def __call__(self, drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                 shape: tuple[int, int, int, int] | None = None) -> Correctness:
        """:class:`CheckCorrectness` on ``shape`` alone (no ragged, short or hostile
        case): a crash on the check's own shapes is re-run at a whole-block length, to
        say whether it comes from the ragged tail."""
        ...


class TimingLaunches(Protocol):
    def __call__(self, drill: Drill, module: ModuleType, interpreter: bool, device: str,
                 generator: torch.Generator) -> TimedLaunches:
        """The zero-argument callables to time (keyed ``"full"``/``"causal"`` or the
        problem's own names), the same for torch's baseline where one exists, the shape
        they run on, and the inputs they read."""
        ...


class TimingVisitMap(Protocol):
    def __call__(self, drill: Drill, module: ModuleType, verdict_maps: dict[str, VisitMap], timed: TimedLaunches,
                 mode: str) -> VisitMap:
        """The visit map of one mode at the timing shape (a visit-recording launch on
        ``timed.inputs``), which the roofline counts FLOPs and bytes from."""
        ...


class TimingWork(Protocol):
    def __call__(self, drill: Drill, module: ModuleType, timed: TimedLaunches) -> dict[str, Counted]:
        """The counted work of each timed mode and its ideal, for a problem whose timed
        launch one visit map cannot count (drill 08: sequences of different lengths, each
        its own grid): a visit-recording launch on ``timed.inputs``, counted there."""
        ...


class CompileWarmups(Protocol):
    def __call__(self, drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
        """One launch of each Triton variant the verdict phase will compile; on a GPU the
        harness runs them from threads at once before the verdict, so the compiles
        overlap instead of queueing (their results are discarded; an exception in one is
        left for the verdict's own launch to report)."""
        ...


@runtime_checkable
class Problem(Protocol):
    """What the harness calls on a problem.  Required: :attr:`check_correctness` and
    :attr:`timing_launches`.  The capabilities are None where a problem lacks them:
    without :attr:`timing_visit_map` or :attr:`timing_work` (which counts the work
    itself, where one map cannot) a check gets no roofline, without
    :attr:`compile_warmups` the verdict's launches compile one after another, without
    :attr:`check_one_shape` a crash is not re-run to say where it comes from."""

    @property
    def check_correctness(self) -> CheckCorrectness: ...

    @property
    def timing_launches(self) -> TimingLaunches: ...

    @property
    def timing_visit_map(self) -> TimingVisitMap | None: ...

    @property
    def timing_work(self) -> TimingWork | None: ...

    @property
    def compile_warmups(self) -> CompileWarmups | None: ...

    @property
    def check_one_shape(self) -> CheckOneShape | None: ...


@dataclass(frozen=True)
class ModuleProblem:
    """A :class:`Problem` made of a problem module's functions (each module's ``PROBLEM``)."""

    check_correctness: CheckCorrectness
    timing_launches: TimingLaunches
    timing_visit_map: TimingVisitMap | None = None
    timing_work: TimingWork | None = None
    compile_warmups: CompileWarmups | None = None
    check_one_shape: CheckOneShape | None = None


class UnknownProblem(LookupError):
    pass


def problem_for(name: str) -> Problem:
    """The problem a drill's TOML names (its module imported when first needed)."""
    try:
        path = PROBLEMS[name]
    except KeyError:
        known = ", ".join(sorted(PROBLEMS))
        raise UnknownProblem(f"unknown problem {name!r} (known: {known})") from None
    found = importlib.import_module(path).PROBLEM
    if not isinstance(found, Problem):
        raise TypeError(f"{path}.PROBLEM is not a Problem")
    return found
