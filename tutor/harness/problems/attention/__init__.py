"""Forward attention (drills 01 and 02): ``attention(q, k, v[, causal], out=, visits=)``.

Correctness runs three shapes (see :mod:`tutor.harness.shapes`), each in
every mode the drill lists, on fresh standard-normal fp16 inputs into a
poisoned output, against a float64 reference; the visit map comes from the
default shape's causal launch (or its only launch).  A fourth, "hostile" case
runs its own shape on inputs built to break unsafe numerics
(:mod:`.hostile`); when only it fails, its own diagnosis says why.

This package is the attention problem's one home: the problem itself here,
:mod:`.cases` (a launch's case and visit map, shared with the backward and
sliding-window problems), :mod:`.reference` (float64 attention and what each
known mistake outputs), :mod:`.readout` (the weights a kernel applies),
:mod:`.diagnose` (the read-out and the fingerprints as named mistakes) and
:mod:`.hostile` (the inputs that break unsafe numerics, and that case's launches).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from types import ModuleType

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.findings import nan_explained, worded
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention.cases import evaluate, launch_modes, mode_words, visit_map
from tutor.harness.problems.attention.diagnose import CheckedLaunch, diagnose
from tutor.harness.problems.attention.hostile import hostile_diagnosis, hostile_launches
from tutor.harness.problems.attention.reference import attention_reference
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, ReadOut, VisitMap
from tutor.harness.shapes import plan_for


def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One launch of each variant the verdict compiles: every mode, visits
    recorded, at the default shape (the ragged and short lengths share its
    specialisation) and at the whole case's (its length and head_dim are specialised apart).  Run concurrently before the verdict on a GPU, so the
    compiles overlap; their outputs are not looked at.  Own seed: the check's
    random stream stays the same with or without them."""
    plan = plan_for(interpreter=False)
    warmups: list[Callable[[], object]] = []
    for shape in (plan.default, plan.whole):  # the whole case's head_dim 128 is a variant of its own
        q, k, v = launching.random_inputs(shape, device, torch.Generator().manual_seed(0))
        warmups += [functools.partial(launching.run_launcher, module, (q, k, v), causal, record_visits=True)
                    for causal in launch_modes(drill)]
    return warmups


def check_correctness(
    drill: Drill,
    module: ModuleType,
    interpreter: bool,
    device: str,
    generator: torch.Generator,
    shape: tuple[int, int, int, int] | None = None,
    shape_only: bool = False,
) -> Correctness:
    """``shape_only``: run ``shape`` alone (no ragged, short or hostile case)."""
    plan = plan_for(interpreter)
    if shape is not None:
        plan = dataclasses.replace(plan, default=(shape[0], shape[1], shape[2], shape[3]))
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    launches: list[CheckedLaunch] = []
    modes: list[bool | None] = []
    cases: list[CaseResult] = []
    visits: list[VisitMap] = []
    full_visits: VisitMap | None = None
    runs: list[tuple[bool | None, launching.Launch]] = []
    other: tuple[CaseResult, dict[str, int]] | None = None  # the first launch run with other tile sizes
    for name, case_shape in (plan.cases()[:1] if shape_only else [*plan.cases(), ("whole", plan.whole)]):
        q, k, v = launching.random_inputs(case_shape, device, generator)
        if name == "ragged":  # a last block of one row: its own key carries most of its weight
            k = launching.heavy_last_key(q, k)
        for causal in launch_modes(drill):
            cost.step(f"the {name} case, shape {cost.shape_words(case_shape)}{mode_words(drill, causal)}")
            run = launching.run_launcher(module, (q, k, v), causal, record_visits=True)
            expected = attention_reference(q, k, v, causal=bool(causal))
            case = evaluate(name, bool(causal), run, expected, drill.tolerance)
            cases.append(case)
            launches.append(CheckedLaunch(case=case, q=q, k=k, v=v, out=run.out, expected=expected))
            runs.append((causal, run))
            modes.append(causal)
            # the map comes from the default shape's causal launch (or its only launch), sized by the
            # module's BLOCK_M / BLOCK_N: a kernel launched with other tile sizes indexes another grid
            ran_with = run.other_blocks(module)
            if ran_with and other is None:
                other = (case, ran_with)
            if name == "default" and not ran_with:
                if causal is False:
                    full_visits = visit_map(run, case_shape[2], block_m, block_n, False)
                else:
                    visits.append(visit_map(run, case_shape[2], block_m, block_n, bool(causal)))
    standard_passed = all(c.passed for c in cases)
    hostile_runs = [] if shape_only else hostile_launches(drill, module, plan.hostile, device, generator, cases)

    def diagnose_launches() -> Diagnosed:
        readouts = read_failing_modes(module, launches, modes, generator)
        findings, said = guard_report(drill, module, launches, runs, device, generator)
        # a map store landed outside it: the map's indexing is measurably not the tutor's (a loop past its
        # bound, a wrong row), so no block count comes from it; nor where the kernel ran with other tile
        # sizes than the module's BLOCK_M / BLOCK_N (measured at its launch: ``other``), another grid
        trusted = not shared.visit_map_overrun(findings) and other is None
        if other is not None:
            said = [d for d in said if not (d.code == "write-past-end" and _only_map_written(runs))]
            said += worded(drill, {"launch-blocks-differ": _other_blocks_words(module, *other)})
        diagnosis = diagnose(drill, launches, visits[0] if visits and trusted else None, block_m, block_n, readouts)
        if not trusted:
            said = [dataclasses.replace(d, message=d.message + shared.MAP_UNTRUSTED) if d.code == "write-past-end"
                    else d for d in said]
        if nan_explained([d.code for d in said]):  # the NaN is explained: not the kernel's own arithmetic
            artifacts = {"nan-in-output", "nan-first-block"}
            if any(r.nan_rows for r in readouts.values()):  # NaN weights read out: their row sums say nothing more
                artifacts.add("rows-not-normalised")
            diagnosis = [d for d in diagnosis if d.code not in artifacts]
        if any(f.tensor == "K" and f.access == "read" for f in findings):
            # keys from past K's end reached the scores: the read-out's weights leave out a key the kernel
            # weighed, so what they say of block scales and row sums is that key's doing, not a rescale's
            diagnosis = [d for d in diagnosis if d.code not in SCALE_CODES]
        flag_off = _causal_flag_off(drill, launches, runs)
        if flag_off and any(d.code == "todo2-open" for d in diagnosis):
            # the mask never ran because the kernel was never asked for it: not an open TODO
            dropped = {"todo2-open", "todo1-open", "all-blocks-visited"}
            diagnosis = worded(drill, {"causal-flag-off": flag_off}) + [d for d in diagnosis if d.code not in dropped]
        diagnosis = said + ragged_nan(drill, module, launches, modes, diagnosis, device, generator)
        if hostile_runs:
            found = hostile_diagnosis(drill, hostile_runs, standard_passed, block_n, findings)
            diagnosis = found + diagnosis
        return Diagnosed(diagnosis=diagnosis, guard_findings=findings, readout=readouts)

    return Correctness(cases=cases, shape=list(plan.default), visits=visits, diagnose=diagnose_launches,
                       full_visits=full_visits)


def _causal_flag_off(drill: Drill, launches: list[CheckedLaunch],
                     runs: list[tuple[bool | None, launching.Launch]]) -> str:
    """``causal-flag-off``'s detail where a causal launch ran the kernel with CAUSAL false
    (measured at the kernel's launch), else ""."""
    if "causal-flag-off" not in drill.diagnoses:
        return ""
    for checked, (causal, run) in zip(launches, runs, strict=True):
        if causal and run.ran_without_causal():
            return (f" Measured at the launch: attention(..., causal=True) ran the kernel with CAUSAL = False"
                    f" (seq={checked.case.shape[2]}).")
    return ""


def _only_map_written(runs: list[tuple[bool | None, launching.Launch]]) -> bool:
    """Did every store past a tensor's end land in the visit map (none in Q, K or V)?"""
    return all(name == "visit map" for _, r in runs for name, _, _ in r.writes_past_the_end() if name != "output")


def _other_blocks_words(module: ModuleType, case: CaseResult, other: dict[str, int]) -> str:
    """``launch-blocks-differ``'s detail: the tile sizes measured at the launch beside the module's."""
    ran = ", ".join(f"{k} = {v}" for k, v in other.items())
    says = ", ".join(f"{k} = {getattr(module, k)}" for k in other)
    return (f" On the {case.name} case (shape {cost.shape_words(case.shape)}) your launcher ran the kernel with"
            f" {ran}; the module says {says}.")


# codes said from how the read-out's weights scale from block to block or sum in a row
SCALE_CODES = frozenset({"blocks-inconsistent", "rows-not-normalised", "sum-not-rescaled", "acc-not-rescaled",
                         "never-rescaled", "not-rescaled", "no-final-division"})

READ_WHERE = {"Q": "The last query block's load of Q", "K": "The last K/V block's load of K",
              "V": "The last K/V block's load of V"}
# measured: the read past the end happens at a ragged length and not at whole blocks; a missing mask and
# offsets that outrun a short tensor (K's strides swapped: blind round 12, w16) both do that
READ_AFTER = {t: f"{where} has no mask (or one that lets rows past N_CTX through), or its offsets"
                 " run past the tensor's end at this length (strides swapped, a wrong base)."
              for t, where in READ_WHERE.items()}


def guard_report(drill: Drill, module: ModuleType, launches: list[CheckedLaunch], runs: list[tuple[bool | None, launching.Launch]],
                 device: str, generator: torch.Generator) -> tuple[list[GuardFinding], list[Diagnosis]]:
    """What the guard bands saw (:func:`tutor.harness.guarded.guard_report`): stores into a
    margin (every launch) and, for the first launch with NaN in its output, which input's
    margin that NaN came from (re-running it with finite margins, then NaN on one side of
    one tensor), and whether the same launch at a block-multiple length is clean."""
    banded = [shared.Banded.of(run.bands, c.case, f" (seq={c.case.shape[2]}{_mode(drill, c.case)})")
              for c, (_, run) in zip(launches, runs, strict=True)]
    nan: shared.NanProbe | None = None
    nan_launch = next(((c, r) for c, r in zip(launches, runs, strict=True) if c.case.nonfinite), None)
    if nan_launch is not None:
        checked, (causal, _) = nan_launch
        case = checked.case

        def again(fills: dict[str, str],
                  inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] = (checked.q, checked.k, checked.v)) -> torch.Tensor:
            return launching.run_launcher(module, inputs, causal, record_visits=True, fills=fills).out

        def clean() -> list[int] | None:
            return finite_at_whole_blocks(module, case.shape, causal, device, generator)

        nan = shared.NanProbe(case, again, f"seq = {case.shape[2]}{_mode(drill, case)}", where_after=READ_AFTER,
                              clean=clean)
    findings, said = shared.guard_report(banded, nan)
    return findings, worded(drill, said)


def finite_at_whole_blocks(module: ModuleType, shape: list[int], causal: bool | None, device: str,
                           generator: torch.Generator) -> list[int] | None:
    """The same launch on fresh inputs at the next length that is a multiple of both block
    sizes: the shape where its output is free of computed NaN, or None (NaN there too, or
    the length already is one)."""
    block = max(int(module.BLOCK_M), int(module.BLOCK_N))
    batch, heads, seq, head_dim = shape
    whole = (batch, heads, -(-seq // block) * block, head_dim)
    if whole[2] == seq:
        return None
    out = launching.run_launcher(module, launching.random_inputs(whole, device, generator), causal,
                                 record_visits=True).out
    return list(whole) if guarding.computed_nans(out, launching.POISON_BITS) == 0 else None


def ragged_nan(drill: Drill, module: ModuleType, launches: list[CheckedLaunch], modes: list[bool | None],
               diagnosis: list[Diagnosis], device: str, generator: torch.Generator) -> list[Diagnosis]:
    """``nan-first-block`` says every row turns NaN from its scores alone, from the first
    block on.  Where the same launch at a length of whole blocks is finite, the NaN comes
    with the ragged last block instead (what the keys or rows past N_CTX bring in): said as
    ``nan-in-output``, with that measurement, in its place."""
    if not any(d.code == "nan-first-block" for d in diagnosis):
        return diagnosis
    found = next(((c, m) for c, m in zip(launches, modes, strict=True)
                  if c.case.nonfinite and c.case.nonfinite == c.out.numel() - c.case.unwritten), None)
    if found is None:
        return diagnosis
    checked, causal = found
    whole = finite_at_whole_blocks(module, checked.case.shape, causal, device, generator)
    if whole is None:
        return diagnosis
    seq = checked.case.shape[2]
    detail = (f" Every row is NaN at seq = {seq}{_mode(drill, checked.case)}, but at seq = {whole[2]}, a multiple of"
              f" the block sizes, the output is finite: the NaN comes with a length that is no multiple of the block."
              f" Look at the block only partly inside the sequence: what its keys (or rows) outside the sequence bring"
              f" into the scores, the maximum or the sums (a load's other= value of -inf or NaN, -inf - (-inf),"
              f" inf * 0).")
    said = [d for d in diagnosis if d.code not in ("nan-first-block", "nan-in-output")]
    return worded(drill, {"nan-in-output": detail}, {"nan-in-output": {}}) + said


def _mode(drill: Drill, case: CaseResult) -> str:
    return mode_words(drill, case.causal)


def read_failing_modes(module: ModuleType, launches: list[CheckedLaunch], modes: list[bool | None],
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
                                              generator=generator, known_dependence=known,
                                              values=(launch.v, launch.out))
        except Exception:  # noqa: BLE001 - the launches already reported what they could
            continue
    return readouts


def timing_visit_map(drill: Drill, module: ModuleType, verdict_maps: dict[str, VisitMap], timed: TimedLaunches,
                     mode: str) -> VisitMap:
    """The counted map of ``mode`` that the roofline turns into FLOPs and bytes, at the
    timing shape: the verdict's own where the shapes are the same (the interpreter),
    else one visit-recording launch on the timed launches' inputs (every map is
    measured).  One mode a call: each mode is its own Triton variant, and the
    harness compiles them at once."""
    verdict = verdict_maps[mode]
    seq, heads = timed.shape[2], timed.shape[0] * timed.shape[1]
    if verdict.seq == seq and verdict.heads == heads:
        return verdict
    causal = mode == "causal"
    q, k, v = timed.inputs
    run = launching.run_launcher(module, (q, k, v), causal if "causal" in drill.modes else None, record_visits=True)
    return visit_map(run, seq, verdict.block_m, verdict.block_n, causal)


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator) -> TimedLaunches:
    shape = plan_for(interpreter).timing
    q, k, v = launching.timing_tensors([shape] * 3, device, generator)
    out = torch.empty_like(q)
    launch = module.attention
    sdpa = torch.nn.functional.scaled_dot_product_attention
    student: dict[str, Callable[[], object]]
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

    def verify() -> str | None:
        """Each timed launch once more, its first and last head against float64."""
        for mode, run in student.items():
            run()
            for b, h in ((0, 0), (shape[0] - 1, shape[1] - 1)):
                one = (slice(b, b + 1), slice(h, h + 1))
                expected = attention_reference(q[one], k[one], v[one], causal=mode == "causal")
                err = float((out[one].to(torch.float64) - expected).abs().nan_to_num(nan=float("inf")).max())
                if not err <= drill.tolerance:
                    return (f"the timed {mode} launch (no visit map passed: the kernel's own configuration, e.g."
                            f" an autotuned one) is wrong at shape {cost.shape_words(shape)}: batch {b}, head {h}"
                            f" is off by up to {err:.3g} (tolerance {drill.tolerance:g}); its times are not shown")
        return None

    return TimedLaunches(shape=list(shape), student=student, baseline=baseline, inputs=(q, k, v), verify=verify)


def check_one_shape(drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                    shape: tuple[int, int, int, int] | None = None) -> Correctness:
    """:func:`check_correctness` on ``shape`` alone (no ragged, short or hostile case)."""
    return check_correctness(drill, module, interpreter, device, generator, shape=shape, shape_only=True)


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 timing_visit_map=timing_visit_map, compile_warmups=compile_warmups,
                                 check_one_shape=check_one_shape)
