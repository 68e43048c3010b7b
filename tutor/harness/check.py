"""One check of one drill file, run inside a worker process.

``run_check`` loads the student's module, launches their kernel on fresh
random inputs for every shape and mode the drill asks for, compares each
output with a float64 reference, counts the K/V blocks the causal launch
visited, times full and causal launches, and diagnoses what went wrong.
Everything it reports was measured from the student's kernel.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from tutor.catalog import Drill, get_drill
from tutor.harness import launch as launching
from tutor.harness import timing
from tutor.harness.errors import bad_output_error, from_exception
from tutor.harness.job import CheckJob
from tutor.harness.loader import LAUNCHER, LoadFailed, load_student_module
from tutor.harness.problems import problem_module
from tutor.harness.result import CheckResult, Device


def _time_launches(
    drill: Drill, module, problem, dev: Device, generator: torch.Generator, result: CheckResult, time_sdpa: bool,
) -> None:
    timed = problem.timing_launches(drill, module, dev.interpreter, launching.torch_device_name(dev), generator)
    result.timing_shape = list(timed.shape)
    result.timing_method = timing.method_label(dev.interpreter)
    result.full_ms = timing.time_ms(timed.student["full"], dev.interpreter)
    if "causal" in timed.student:
        result.causal_ms = timing.time_ms(timed.student["causal"], dev.interpreter)
    if not dev.interpreter and time_sdpa and timed.baseline:
        result.sdpa_full_ms = timing.time_ms(timed.baseline["full"], interpreter=False)
        if "causal" in timed.baseline:
            result.sdpa_causal_ms = timing.time_ms(timed.baseline["causal"], interpreter=False)


def run_check(job: CheckJob, dev: Device) -> CheckResult:
    """Check ``job.file`` as drill ``job.drill`` on ``dev``.  Never raises for the
    student's mistakes: they come back in ``result.error`` / ``result.diagnosis``."""
    started = time.perf_counter()
    drill = get_drill(job.drill)
    result = CheckResult(drill=drill.id, file=job.file, device=dev, tolerance=drill.tolerance)
    seed = job.seed if job.seed is not None else int.from_bytes(os.urandom(4), "little")
    generator = torch.Generator().manual_seed(seed)
    module = None
    try:
        module = load_student_module(Path(job.file))
        problem = problem_module(drill.problem)
        found = problem.check_correctness(
            drill, module, dev.interpreter, launching.torch_device_name(dev), generator, shape=job.shape
        )
        result.cases, result.shape, result.diagnosis = found.cases, found.shape, found.diagnosis
        result.readout = found.readout
        result.visits = found.visits[0] if found.visits else None
        result.extra_visits = found.visits[1:]
        errors = [c.max_abs_err for c in result.cases]
        result.max_abs_err = None if None in errors else max(errors)
        result.passed = all(c.passed for c in result.cases)
        if job.timing:
            _time_launches(drill, module, problem, dev, generator, result, job.time_sdpa)
    except LoadFailed as failed:
        result.error = failed.error
    except launching.BadOutput as bad:
        result.error = bad_output_error(str(bad), job.file, getattr(module, LAUNCHER, None))
    except Exception as exc:  # noqa: BLE001 - the student's kernel raised: report it at their line
        result.error = from_exception(exc, job.file, module, during="runtime")
    if result.error is not None:
        result.passed = False
    result.duration_s = time.perf_counter() - started
    return result
