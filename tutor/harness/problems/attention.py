"""Forward attention (drills 01 and 02): ``attention(q, k, v[, causal], out=, visits=)``.

Correctness runs three shapes (see :mod:`tutor.harness.shapes`), each in
every mode the drill lists, on fresh standard-normal fp16 inputs into a
poisoned output, against a float64 reference; the visit map comes from the
default shape's causal launch (or its only launch).
"""

from __future__ import annotations

import dataclasses

import torch

from tutor.catalog import Drill
from tutor.harness import launch as launching
from tutor.harness import readout as reading
from tutor.harness.diagnose import CheckedLaunch, diagnose
from tutor.harness.problems import Correctness, TimedLaunches
from tutor.harness.reference import attention_reference
from tutor.harness.result import CaseResult, ReadOut, VisitMap
from tutor.harness.shapes import plan_for


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


def launch_modes(drill: Drill) -> list[bool | None]:
    """The ``causal`` argument of each launch; None: the launcher takes none."""
    if "causal" not in drill.modes:
        return [None]
    return [mode == "causal" for mode in drill.modes]


def check_correctness(
    drill: Drill,
    module,
    interpreter: bool,
    device: str,
    generator: torch.Generator,
    shape: tuple[int, int, int, int] | None = None,
) -> Correctness:
    plan = plan_for(interpreter)
    if shape is not None:
        plan = dataclasses.replace(plan, default=tuple(shape))
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    launches: list[CheckedLaunch] = []
    modes: list[bool | None] = []
    cases: list[CaseResult] = []
    visits: list[VisitMap] = []
    for name, case_shape in plan.cases():
        q, k, v = launching.random_inputs(case_shape, device, generator)
        for causal in launch_modes(drill):
            run = launching.run_launcher(module, (q, k, v), causal, record_visits=True)
            expected = attention_reference(q, k, v, causal=bool(causal))
            case = evaluate(name, bool(causal), run, expected, drill.tolerance)
            cases.append(case)
            launches.append(CheckedLaunch(case=case, q=q, k=k, v=v, out=run.out, expected=expected))
            modes.append(causal)
            # the map comes from the default shape's causal launch (or its only launch)
            if name == "default" and (causal or causal is None):
                visits.append(visit_map(run, case_shape[2], block_m, block_n, bool(causal)))
    readouts = read_failing_modes(module, launches, modes, generator)
    return Correctness(
        cases=cases,
        shape=list(plan.default),
        visits=visits,
        diagnosis=diagnose(drill, launches, visits[0] if visits else None, block_m, block_n, readouts),
        readout=readouts,
    )


def read_failing_modes(module, launches: list[CheckedLaunch], modes: list[bool | None],
                       generator: torch.Generator) -> dict[str, ReadOut]:
    """Read out the weights of each mode that failed, on the first failing case's Q, K
    (cases run in plan order, the default shape first).  A read-out that itself
    raises is left out: the verdict and the fingerprints still stand."""
    readouts: dict[str, ReadOut] = {}
    for launch, causal in zip(launches, modes, strict=True):
        mode = "causal" if causal else "full"
        if launch.case.passed or mode in readouts:
            continue
        known = next(((r.moves_with, r.crosstalk) for r in readouts.values() if r.moves_with), None)
        try:
            readouts[mode] = reading.read_out(module, launch.q, launch.k, causal, case=launch.case.name,
                                              generator=generator, known_dependence=known)
        except Exception:  # noqa: BLE001 - the launches already reported what they could
            continue
    return readouts


def timing_launches(drill: Drill, module, interpreter: bool, device: str, generator: torch.Generator) -> TimedLaunches:
    shape = plan_for(interpreter).timing
    q, k, v = launching.random_inputs(shape, device, generator)
    out = torch.empty_like(q)
    launch = module.attention
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if "causal" in drill.modes:
        student = {
            "full": lambda: launch(q, k, v, causal=False, out=out),
            "causal": lambda: launch(q, k, v, causal=True, out=out),
        }
        baseline = {
            "full": lambda: sdpa(q, k, v, is_causal=False),
            "causal": lambda: sdpa(q, k, v, is_causal=True),
        }
    else:
        student = {"full": lambda: launch(q, k, v, out=out)}
        baseline = {"full": lambda: sdpa(q, k, v, is_causal=False)}
    return TimedLaunches(shape=list(shape), student=student, baseline=baseline)
