"""One check of one drill file, run inside a worker process.

``run_check`` loads the student's module, launches their kernel on fresh
random inputs for every shape and mode the drill asks for, compares each
output with a float64 reference, counts the K/V blocks the causal launch
visited, times full and causal launches, and diagnoses what went wrong.
Everything it reports was measured from the student's kernel.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import torch

from tutor.catalog import Drill, get_drill
from tutor.harness import launch as launching
from tutor.harness import timing
from tutor.harness.diagnose import CheckedLaunch, diagnose
from tutor.harness.errors import bad_output_error, from_exception
from tutor.harness.job import CheckJob
from tutor.harness.loader import LAUNCHER, LoadFailed, load_student_module
from tutor.harness.reference import attention_reference
from tutor.harness.result import CaseResult, CheckResult, Device, VisitMap
from tutor.harness.shapes import ShapePlan, plan_for


def evaluate(name: str, causal: bool, run: launching.Launch, expected: torch.Tensor, tolerance: float) -> CaseResult:
    """Compare one launch's output with the reference."""
    out = run.out.to(torch.float64)
    poisoned = run.out.view(torch.int16) == launching.POISON_BITS
    unwritten = int(poisoned.sum())
    nonfinite = int((~torch.isfinite(out) & ~poisoned).sum())
    error = (out - expected).abs().nan_to_num(nan=float("inf"))
    worst_flat = int(error.argmax())
    worst_row = (worst_flat // out.shape[-1]) % out.shape[-2]
    max_err = None if unwritten or nonfinite else float(error.max())
    oob = run.wrote_out_of_bounds
    return CaseResult(
        name=name,
        causal=causal,
        shape=list(out.shape),
        max_abs_err=max_err,
        passed=max_err is not None and max_err <= tolerance and not oob,
        nonfinite=nonfinite,
        unwritten=unwritten,
        wrote_out_of_bounds=oob,
        worst_row=worst_row,
    )


def ideal_visits(seq: int, block_m: int, block_n: int, causal: bool) -> list[list[bool]]:
    """Which key blocks a query block must visit: for causal attention, those whose
    first key is not after the block's last existing row."""
    n_m, n_n = launching.visit_grid(seq, block_m, block_n)
    return [
        [not causal or j * block_n <= min((i + 1) * block_m, seq) - 1 for j in range(n_n)]
        for i in range(n_m)
    ]


def visit_map(run: launching.Launch, seq: int, block_m: int, block_n: int, causal: bool) -> VisitMap:
    assert run.visits is not None
    counts = (run.visits != 0).sum(dim=0).cpu().tolist()
    return VisitMap(
        block_m=block_m,
        block_n=block_n,
        seq=seq,
        heads=run.visits.shape[0],
        counts=counts,
        ideal=ideal_visits(seq, block_m, block_n, causal),
    )


def _launch_modes(drill: Drill) -> list[bool | None]:
    """The ``causal`` argument of each launch; None: the launcher takes none."""
    if "causal" not in drill.modes:
        return [None]
    return [mode == "causal" for mode in drill.modes]


def _check_correctness(
    drill: Drill, module, plan: ShapePlan, device: str, generator: torch.Generator, result: CheckResult
) -> None:
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    launches: list[CheckedLaunch] = []
    for name, shape in plan.cases():
        q, k, v = launching.random_inputs(shape, device, generator)
        for causal in _launch_modes(drill):
            run = launching.run_launcher(module, (q, k, v), causal, record_visits=True)
            expected = attention_reference(q, k, v, causal=bool(causal))
            case = evaluate(name, bool(causal), run, expected, drill.tolerance)
            result.cases.append(case)
            launches.append(CheckedLaunch(case=case, q=q, k=k, v=v, out=run.out, expected=expected))
            # the map comes from the default shape's causal launch (or its only launch)
            if name == "default" and (causal or causal is None):
                result.visits = visit_map(run, shape[2], block_m, block_n, bool(causal))
    result.shape = list(plan.default)
    errors = [c.max_abs_err for c in result.cases]
    result.max_abs_err = None if None in errors else max(errors)
    result.passed = all(c.passed for c in result.cases)
    result.diagnosis = diagnose(drill, launches, result.visits, block_m, block_n)


def _time_launches(
    drill: Drill, module, plan: ShapePlan, dev: Device, generator: torch.Generator, result: CheckResult,
    time_sdpa: bool,
) -> None:
    device = launching.torch_device_name(dev)
    q, k, v = launching.random_inputs(plan.timing, device, generator)
    out = torch.empty_like(q)
    launch = module.attention
    result.timing_shape = list(plan.timing)
    result.timing_method = timing.method_label(dev.interpreter)
    if "causal" in drill.modes:
        result.full_ms = timing.time_ms(lambda: launch(q, k, v, causal=False, out=out), dev.interpreter)
        result.causal_ms = timing.time_ms(lambda: launch(q, k, v, causal=True, out=out), dev.interpreter)
    else:
        result.full_ms = timing.time_ms(lambda: launch(q, k, v, out=out), dev.interpreter)
    if not dev.interpreter and time_sdpa:
        result.sdpa_full_ms = timing.sdpa_ms(q, k, v, causal=False)
        if "causal" in drill.modes:
            result.sdpa_causal_ms = timing.sdpa_ms(q, k, v, causal=True)


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
        plan = plan_for(dev.interpreter)
        if job.shape is not None:
            plan = dataclasses.replace(plan, default=tuple(job.shape))
        _check_correctness(drill, module, plan, launching.torch_device_name(dev), generator, result)
        if job.timing:
            _time_launches(drill, module, plan, dev, generator, result, job.time_sdpa)
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
