"""Say what the student most likely got wrong, with a stable code per mistake.

The main tool is *mistake fingerprinting*: for a failing launch, compute in
PyTorch what the kernel would output with each known mistake
(:mod:`tutor.harness.reference`) and see which one the student's output
matches.  The visit map adds what no output can show: whether the causal
launch skipped the blocks it should.  Timings are never used to diagnose.
The words for each code live in the drill's TOML file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tutor.catalog import Drill
from tutor.harness import reference
from tutor.harness.result import CaseResult, Diagnosis, VisitMap


@dataclass
class CheckedLaunch:
    """One correctness launch with what is needed to fingerprint it."""

    case: CaseResult
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    expected: torch.Tensor | None = None  # the right answer (computed here when not given)


# drill slug -> (q, k, v, block_m, block_n, causal) -> {code: what that mistake outputs}
Fingerprints = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, int, bool], dict[str, torch.Tensor]]

FINGERPRINTS: dict[str, Fingerprints] = {
    "causal_mask": lambda q, k, v, bm, bn, causal: reference.causal_variants(q, k, v, bm, bn, causal),
    "online_rescale": lambda q, k, v, bm, bn, causal: reference.online_variants(q, k, v, bn),
}


# Relative slack on top of the drill's tolerance when matching a wrong variant: a
# mistake such as a missing final division leaves outputs in the tens, where fp16
# rounding and the fp16 probabilities fed to the second dot alone cost ~0.5%
# (seen at seq 2000); the reference comparison itself stays absolute.
FINGERPRINT_RTOL = 1e-2


def matches(out: torch.Tensor, expected: torch.Tensor, tolerance: float) -> bool:
    """Does ``out`` equal ``expected`` wherever ``expected`` is defined?

    Rows that ``expected`` leaves NaN (a row that saw no key) are ignored, so a
    kernel that writes NaN *or* a guarded 0 there matches either way; ``out``
    may not be NaN anywhere ``expected`` is finite.  A variant that is NaN
    everywhere matches an output that is non-finite everywhere.
    """
    out = out.to(torch.float64)
    defined = torch.isfinite(expected)
    if not defined.any():
        return bool((~torch.isfinite(out)).all())
    if (~torch.isfinite(out) & defined).any():
        return False
    gap = (out - expected)[defined].abs()
    return bool((gap <= tolerance + FINGERPRINT_RTOL * expected[defined].abs()).all())


@dataclass(frozen=True)
class Match:
    code: str
    vacuous: bool  # the variant is NaN everywhere: it matched on nothing but "all NaN"


def fingerprints(drill: Drill, launch: CheckedLaunch, block_m: int, block_n: int) -> list[Match]:
    """Every known mistake whose output the launch reproduces, most specific first.

    Variants that equal the right answer on this shape (on a shape shorter than a
    block, a missing loop bound changes nothing) say nothing and are skipped.  A
    code may come from more than one variant ("mask-reversed/diagonal-only" is
    still "mask-reversed")."""
    if drill.slug not in FINGERPRINTS:  # a new drill of this problem: no mistakes to recognise yet
        return []
    variants = FINGERPRINTS[drill.slug](launch.q, launch.k, launch.v, block_m, block_n, launch.case.causal)
    right = launch.expected
    if right is None:
        right = reference.attention_reference(launch.q, launch.k, launch.v, causal=launch.case.causal)
    found: list[Match] = []
    for name, expected in variants.items():
        code = name.split("/")[0]
        if any(m.code == code for m in found) or matches(expected, right, drill.tolerance):
            continue
        if matches(launch.out, expected, drill.tolerance):
            found.append(Match(code, vacuous=not bool(torch.isfinite(expected).any())))
    return found


def _consensus(per_launch: list[list[Match]]) -> list[str | None]:
    """One code per launch, preferring the code that explains the most launches.

    On a shape shorter than one block several mistakes give the same output (a
    missing diagonal mask *is* full attention there); the longer shapes tell
    them apart, so the code they agree on is said for the short one too.  A
    vacuous match (an all-NaN variant against an all-NaN output) counts only for
    a code that some other launch matched for real.
    """
    support: dict[str, int] = {}
    for found in per_launch:
        for match in found:
            if not match.vacuous:
                support[match.code] = support.get(match.code, 0) + 1
    chosen: list[str | None] = []
    for found in per_launch:
        candidates = [m.code for m in found if m.code in support]
        chosen.append(max(candidates, key=lambda c: support[c]) if candidates else None)
    return chosen


def _describe_rows(launch: CheckedLaunch, block_m: int) -> str:
    bad = ~torch.isfinite(launch.out.to(torch.float32))
    rows = bad.any(dim=-1).reshape(-1, launch.out.shape[-2]).any(dim=0).nonzero().flatten().tolist()
    if len(rows) == launch.out.shape[-2]:
        return "every row is affected"
    blocks = sorted({r // block_m for r in rows})
    return f"rows {rows[0]}..{rows[-1]} are affected (query block{'s' if len(blocks) > 1 else ''} {', '.join(map(str, blocks))})"


def diagnose(
    drill: Drill,
    launches: list[CheckedLaunch],
    visits: VisitMap | None,
    block_m: int,
    block_n: int,
) -> list[Diagnosis]:
    """Everything worth saying about a check that ran, errors first."""
    codes: dict[str, str] = {}  # code -> extra detail; dicts keep the order found

    def say(code: str, detail: str = "") -> None:
        codes.setdefault(code, detail)

    both_modes = "full" in drill.modes and "causal" in drill.modes
    failing = [x for x in launches if not x.case.passed]
    chosen = _consensus([fingerprints(drill, x, block_m, block_n) for x in failing])
    passed_causal = {x.case.name for x in launches if x.case.causal and x.case.passed}
    for launch, code in zip(failing, chosen, strict=True):
        case = launch.case
        mode = (", causal" if case.causal else ", full") if both_modes else ""
        where = f" (seen on the {case.name} shape, seq={case.shape[2]}{mode})"
        if case.unwritten:
            say("unwritten-output", f" {case.unwritten} elements were never written{where}.")
        if case.wrote_out_of_bounds:
            say("store-out-of-bounds", where + ".")
        if code is not None:
            say(code, where + ".")
        elif case.nonfinite:
            if "nan-first-block" in drill.diagnoses and case.nonfinite == launch.out.numel() - case.unwritten:
                say("nan-first-block", where + ".")
            else:
                say("nan-in-output", f" {case.nonfinite} elements; {_describe_rows(launch, block_m)}{where}.")
        elif case.unwritten or case.wrote_out_of_bounds:
            pass  # said above; the rest of the output is not worth guessing at
        elif both_modes and not case.causal and case.name in passed_causal:
            # right when causal, wrong when not: the change reached the full path
            say("full-broken", where + ".")
        else:
            worst = "" if case.worst_row is None else f" The largest error is at row {case.worst_row} (query block {case.worst_row // block_m})"
            say("wrong-output", f"{worst}{where}.")

    if visits is not None and visits.visited_blocks == 0:
        say("no-visits-recorded")
    elif visits is not None and "causal" in drill.modes:
        if visits.visited_blocks == visits.total_blocks and visits.ideal_blocks < visits.total_blocks:
            # PASSED with every block visited is a finding of its own ("todo1-open", which
            # unlocks the loop-bound hint); on a failing kernel it is only said
            say("all-blocks-visited" if failing else "todo1-open",
                f" ({visits.visited_blocks}/{visits.total_blocks} blocks visited; a causal kernel needs {visits.ideal_blocks}.)")
        elif visits.visited_blocks > visits.ideal_blocks:
            extra = visits.visited_blocks - visits.ideal_blocks
            say("extra-blocks", f" ({extra} blocks more than the {visits.ideal_blocks} needed.)")

    found = []
    for code, detail in codes.items():
        text = drill.diagnosis_text(code)
        found.append(Diagnosis(code=code, message=text.message + detail, severity=text.severity))
    order = {"error": 0, "finding": 1, "info": 2}
    return sorted(found, key=lambda d: order.get(d.severity, 3))
