"""One check of one drill file, run inside a worker process, in three phases.

``run_verdict`` loads the student's module, launches their kernel on fresh
random inputs for every shape and mode the drill asks for, compares each
output with a float64 reference and counts the K/V blocks each launch
visited: the verdict, published as soon as it is known.  A kernel that passed
every case is diagnosed there too (its findings need no further launch).

``run_diagnosis`` then diagnoses a failing kernel: the read-outs, the probes
that re-run a launch with other guard fills, the named mistakes (the problem's
``Correctness.diagnose``).  Its launches reuse the variants the verdict
compiled; the runner gives it its own time budget, not the student's.

``run_performance`` last times full and causal launches (and torch's SDPA on
a GPU) and puts the kernel on a roofline (:mod:`tutor.harness.roofline`).
``run_check`` runs them all, for callers that want one result.  Everything
any phase reports was measured from the student's kernel.  Each phase's
launches, compiles and seconds go into ``result.costs``
(:mod:`tutor.harness.cost`).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from tutor.catalog import Drill, get_drill
from tutor.harness import cost, forked_compile, interpreter_races, timing
from tutor.harness import launch as launching
from tutor.harness.errors import bad_output_error, from_exception, readout_failure_reason, store_race_error, tutor_fault
from tutor.harness.job import CheckJob
from tutor.harness.loader import LAUNCHER, LoadFailed, load_student_module
from tutor.harness.problems import Diagnosed, Problem, TimedLaunches, problem_for
from tutor.harness.read_trace import tracing_reads
from tutor.harness.result import CheckResult, Device, DiagnosisPhase, Performance, Roofline, VisitMap
from tutor.pristine import blob_id

# "0": compile each phase's Triton variants one after another (GPU); by default they are
# compiled concurrently (see compile_concurrently); the interpreter compiles nothing
PARALLEL_COMPILE_ENV = "FLASHTUTOR_PARALLEL_COMPILE"


def parallel_compile(dev: Device) -> bool:
    """Whether this check compiles its variants from threads at once (GPU, not turned off)."""
    return not dev.interpreter and os.environ.get(PARALLEL_COMPILE_ENV, "1") != "0"


def compile_concurrently(launches: list[Callable[[], object]]) -> None:
    """Compile every variant ``launches`` would launch, at once, before the phase's
    own launches need them: each launch runs in compile-only mode
    (:func:`cost.compile_only`: its kernel calls are recorded, nothing launches,
    nothing it returns is meaningful), then every recorded kernel variant compiles
    on a thread of its own.  Triton's compiler holds the GIL for most of its work,
    so on Linux each variant is first compiled in a forked child
    (:mod:`tutor.harness.forked_compile`), which writes Triton's disk cache; the
    threads then mostly load.  A launch that raises, or
    a variant that fails to compile, is left to the phase's own launch, which
    raises it again where it is reported at the student's line."""
    with cost.compiling():
        _compile_concurrently(launches)


def _compile_concurrently(launches: list[Callable[[], object]]) -> None:
    compiles: list[Callable[[], object]] = []
    for launch in launches:
        with cost.compile_only() as calls:
            try:
                launch()
            except cost.LaunchAborted:
                raise  # a spare's warm-up whose job arrived: it stops here, compiling nothing more
            except Exception:  # noqa: BLE001 - the phase's own launch reports it at the student's line
                pass
        compiles.extend(calls)
    stop = cost.stop_event()
    forked_compile.fill_disk_cache(compiles, stop)

    def compile_one(call: Callable[[], object]) -> None:
        if stop is None or not stop.is_set():  # a warm-up gives way to the job that arrived
            call()

    if compiles:
        with ThreadPoolExecutor(max_workers=min(len(compiles), max(2, os.cpu_count() or 2)),
                                thread_name_prefix="compile") as pool:
            for future in [pool.submit(compile_one, call) for call in compiles]:
                future.exception()  # a compile error is the phase's own launch's to report


@dataclass
class VerdictState:
    """What the performance phase reuses from the verdict phase (inside the worker)."""

    drill: Drill
    module: ModuleType | None
    problem: Problem | None
    generator: torch.Generator
    visits_by_mode: dict[str, VisitMap]  # the default shape's counted maps
    diagnose: Callable[[], Diagnosed] | None = None  # the diagnosis still to run (a failing kernel's)
    diagnosis_variants: Callable[[], list[Callable[[], object]]] | None = None  # Correctness.diagnosis_variants


def _read(path: Path) -> bytes | None:
    """The file's bytes, read once: the module is built from them and they are what
    ``result.content_id`` names.  None: unreadable (the loader says why)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def run_verdict(job: CheckJob, dev: Device) -> tuple[CheckResult, VerdictState]:
    """Phase 1: correctness on every shape and the visit maps (and, for a kernel that
    passed, its diagnosis).  Never raises for the student's mistakes: they come back
    in ``result.error`` / ``result.diagnosis``.  ``result.diagnosis_phase`` and
    ``result.performance`` say whether phases 2 and 3 follow."""
    started = time.perf_counter()
    meter = cost.Meter(dev.interpreter)
    drill = get_drill(job.drill)
    result = CheckResult(drill=drill.id, file=job.file, device=dev, tolerance=drill.tolerance)
    seed = job.seed if job.seed is not None else int.from_bytes(os.urandom(4), "little")
    generator = torch.Generator().manual_seed(seed)
    state = VerdictState(drill=drill, module=None, problem=None, generator=generator, visits_by_mode={})
    try:
        data = _read(Path(job.file))
        result.content_id = None if data is None else blob_id(data)
        cost.step("loading and compiling your kernel")
        state.module = load_student_module(Path(job.file), data)
        problem = state.problem = problem_for(drill.problem)
        warmups = problem.compile_warmups
        if warmups is not None and parallel_compile(dev) and job.shape is None:
            variants = warmups(drill, state.module, launching.torch_device_name(dev))
            compile_concurrently(variants)  # each kernel of each variant on a thread of its own
        check = problem.check_correctness
        if job.shape_only:
            if problem.check_one_shape is None:
                raise TypeError(f"the {drill.problem} problem cannot run one shape alone")
            check = problem.check_one_shape
        interpreter_races.take()  # forget any race of an earlier check in this worker
        with tracing_reads(dev.interpreter):  # the interpreter counts loads into the guard bands' margins
            found = check(drill, state.module, dev.interpreter, launching.torch_device_name(dev), generator,
                          shape=job.shape)
        race = interpreter_races.take()
        result.cases, result.shape = found.cases, found.shape
        result.visits = found.visits[0] if found.visits else None
        result.extra_visits = found.visits[1:]
        full_visits = found.full_visits
        result.full_visited_blocks = None if full_visits is None else full_visits.visited_blocks
        if full_visits is not None:
            state.visits_by_mode["full"] = full_visits
        if result.visits is not None:
            state.visits_by_mode["causal" if full_visits is not None else "full"] = result.visits
        errors = [c.max_abs_err for c in result.cases]
        result.max_abs_err = None if None in errors else max(e for e in errors if e is not None)
        result.passed = all(c.passed for c in result.cases)
        if result.passed and race is not None:  # right only in the interpreter's one order of programs
            result.error = store_race_error(race, job.file)
        elif result.passed:  # nothing to read out: the findings come from these launches
            with tracing_reads(dev.interpreter):
                _take_diagnosis(result, found.diagnose())
        else:
            state.diagnose, state.diagnosis_variants = found.diagnose, found.diagnosis_variants
            result.diagnosis_phase = DiagnosisPhase("pending")
    except LoadFailed as failed:
        result.error = failed.error
    except launching.BadOutput as bad:
        result.error = bad_output_error(str(bad), job.file, getattr(state.module, LAUNCHER, None))
    except Exception as exc:  # noqa: BLE001 - the student's kernel raised: report it at their line
        result.error = from_exception(exc, job.file, state.module, during="runtime")
        result.error.during = cost.last_step()  # which case (and shape) raised: a compile error of one head_dim
    cost.step("")
    if result.error is not None:
        result.passed = False
        state.diagnose = None
        result.diagnosis_phase = DiagnosisPhase("skipped", "the check could not run to a verdict")
        result.performance = Performance("skipped", "the check could not run to a verdict")
    elif job.timing:
        result.performance = Performance("pending")
    else:
        result.performance = Performance("skipped", "timing was not asked for (--no-timing)")
    result.duration_s = time.perf_counter() - started
    result.costs["verdict"] = meter.cost()
    return result, state


def _take_diagnosis(result: CheckResult, found: Diagnosed) -> None:
    result.diagnosis, result.guard_findings, result.readout = found.diagnosis, found.guard_findings, found.readout


def run_diagnosis(job: CheckJob, dev: Device, result: CheckResult, state: VerdictState) -> CheckResult:
    """Phase 2: the diagnosis of a failing kernel, into ``result``.  Whatever goes
    wrong here (a read-out launch that raises) fails this phase only: the verdict
    stands, and the report says the tutor could not diagnose it."""
    if state.diagnose is None:
        return result
    started = time.perf_counter()
    meter = cost.Meter(dev.interpreter)
    try:
        if state.diagnosis_variants is not None and parallel_compile(dev):
            _compile_diagnosis_variants(state.diagnosis_variants)
        with tracing_reads(dev.interpreter):
            _take_diagnosis(result, state.diagnose())
        result.diagnosis_phase = DiagnosisPhase("done")
    except Exception as exc:  # noqa: BLE001 - the verdict is already out; say why no diagnosis
        error = from_exception(exc, job.file, state.module, during="runtime")
        error.during = cost.last_step()  # the last probe that named itself (not every probe does)
        result.diagnosis_phase = DiagnosisPhase("failed", readout_failure_reason(error, tutor_fault(exc, job.file)))
    cost.step("")
    state.diagnose = None
    result.diagnosis_phase.duration_s = time.perf_counter() - started
    result.costs["diagnosis"] = meter.cost()
    return result


def _compile_diagnosis_variants(variants: Callable[[], list[Callable[[], object]]]) -> None:
    """The diagnosis's own variants compiled at once, not one after another as its probes
    meet them.  Only a head start: whatever goes wrong here is the probe's own launch's to
    report, inside the diagnosis."""
    try:
        compile_concurrently(variants())
    except cost.LaunchAborted:
        raise
    except Exception:  # noqa: BLE001 - see above
        pass


def _counted_modes(state: VerdictState) -> list[str]:
    """The modes whose maps the roofline counts at the timing shape: every mode the
    verdict mapped, where the problem can record maps there (else none: no roofline)."""
    has_maps = state.problem is not None and state.problem.timing_visit_map is not None
    return list(state.visits_by_mode) if has_maps else []


def _timing_map(state: VerdictState, timed: TimedLaunches, mode: str) -> VisitMap:
    """The map of ``mode`` at the timing shape (the problem's ``timing_visit_map``)."""
    assert state.problem is not None and state.module is not None  # the verdict phase loaded them
    assert state.problem.timing_visit_map is not None  # only the modes it counts (_counted_modes) come here
    return state.problem.timing_visit_map(state.drill, state.module, state.visits_by_mode, timed, mode)


def run_performance(job: CheckJob, dev: Device, result: CheckResult, state: VerdictState) -> CheckResult:
    """Phase 2: the timed launches, torch's SDPA (GPU) and the roofline, into
    ``result``.  A launch that raises here fails this phase only: the verdict stands."""
    started = time.perf_counter()
    meter = cost.Meter(dev.interpreter)
    try:
        problem, drill, module = state.problem, state.drill, state.module
        assert problem is not None and module is not None
        device = launching.torch_device_name(dev)
        timed = problem.timing_launches(drill, module, dev.interpreter, device, state.generator)
        maps = None
        if parallel_compile(dev):
            maps = _compile_timed_concurrently(state, timed)
        result.timing_shape = list(timed.shape)
        result.timing_method = timing.method_label(dev.interpreter)
        # a problem times a "full" launch, a "causal" one, or both (drill 08's is causal only)
        if "full" in timed.student:
            result.full_ms = timing.time_ms(timed.student["full"], dev.interpreter)
        if "causal" in timed.student:
            result.causal_ms = timing.time_ms(timed.student["causal"], dev.interpreter)
        if not dev.interpreter and job.time_sdpa and timed.baseline:
            if "full" in timed.baseline:
                result.sdpa_full_ms = timing.time_ms(timed.baseline["full"], interpreter=False)
            if "causal" in timed.baseline:
                result.sdpa_causal_ms = timing.time_ms(timed.baseline["causal"], interpreter=False)
        result.roofline = _roofline(state, dev, result, timed, maps)
        result.performance = Performance("done")
        # a kernel that passed: its timed configuration must pass too (a failing one is known wrong)
        wrong = timed.verify() if timed.verify is not None and result.passed and not dev.interpreter else None
        if wrong is not None:  # the verdict checked another configuration than the one timed
            result.full_ms = result.causal_ms = None
            result.roofline = None
            result.performance = Performance("failed", wrong)
    except Exception as exc:  # noqa: BLE001 - the verdict is already out; say why no timing
        error = from_exception(exc, job.file, state.module, during="runtime")
        where = f" ({error.location()})" if error.location() else ""
        result.performance = Performance("failed", f"the timed launches raised: {error.message}{where}")
    result.performance.duration_s = time.perf_counter() - started
    result.costs["performance"] = meter.cost()
    return result


def _compile_timed_concurrently(state: VerdictState, timed: TimedLaunches) -> dict[str, VisitMap]:
    """Every timed variant and each mode's counting launch for the roofline,
    compiled at once (:func:`compile_concurrently`); then the counting launches
    run, from their cache; returns the roofline's counted maps."""
    modes = _counted_modes(state)
    counting: list[Callable[[], object]] = [functools.partial(_timing_map, state, timed, mode) for mode in modes]
    problem = state.problem
    if problem is not None and problem.timing_work is not None and state.module is not None:  # its own counting launch
        # (drill 08's): compiled here too, not on its own in the roofline (0.45-0.97 s, H100, run 24)
        counting.append(functools.partial(problem.timing_work, state.drill, state.module, timed))
    compile_concurrently([*counting, *timed.student.values()])
    return {mode: _timing_map(state, timed, mode) for mode in modes}


def _roofline(state: VerdictState, dev: Device, result: CheckResult, timed: TimedLaunches,
              maps: dict[str, VisitMap] | None = None) -> Roofline | None:
    from tutor.harness import roofline  # only here: it reads drill 03's formulas (tutor.quiz)

    assert state.problem is not None and state.module is not None  # the verdict phase loaded them
    counted = None
    if state.problem.timing_work is not None:  # the problem counts its own (one map cannot hold it)
        counted = state.problem.timing_work(state.drill, state.module, timed)
        if not any(c.work.visited_tiles for c in counted.values()):
            return None  # no visit recorded (the diagnosis says so): nothing to count
    else:
        if maps is None:
            maps = {mode: _timing_map(state, timed, mode) for mode in _counted_modes(state)}
        if not maps or not any(m.visited_blocks for m in maps.values()):
            return None  # no visit map recorded (the diagnosis says so): nothing to count
    ms = sdpa = peaks = None
    if not dev.interpreter:  # the interpreter's milliseconds are not a device's rate
        ms = {"full": result.full_ms, "causal": result.causal_ms}
        sdpa = {"full": result.sdpa_full_ms, "causal": result.sdpa_causal_ms}
        from tutor.harness.peaks import device_peaks

        peaks = device_peaks(dev.name, dev.torch)
    if counted is not None:
        return roofline.assemble(result.timing_shape, counted, int(state.module.BLOCK_M),
                                 int(state.module.BLOCK_N), ms=ms, sdpa_ms=sdpa, peaks=peaks,
                                 counted_on="total over sequences × heads")
    assert maps is not None  # counted above
    return roofline.build(result.timing_shape, maps, ms=ms, sdpa_ms=sdpa, peaks=peaks)


def run_check(job: CheckJob, dev: Device) -> CheckResult:
    """Every phase, one result (the performance phase only where it was asked for)."""
    result, state = run_verdict(job, dev)
    run_diagnosis(job, dev, result, state)
    if result.performance.status == "pending":
        run_performance(job, dev, result, state)
    return result
