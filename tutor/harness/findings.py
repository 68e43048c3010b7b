"""Findings in words, shared by every problem: the measured facts a diagnosis
says, each under its code, and the comparisons they are measured with.

* :class:`Findings` accumulates them while a diagnosis runs: code -> measured
  detail, in the order found, a code's first detail standing;
* :func:`worded` turns them into diagnoses, each code's words from the drill's
  TOML (``{placeholders}`` filled by :func:`fill`), errors first;
* :func:`visit_findings` is the visit map's verdict (no visit recorded, every
  block visited where fewer are needed, more than needed);
* :func:`drop_explained_nan` drops the NaN codes a read past the end explains;
* :func:`index_runs` says sorted indices (rows, keys, blocks) as runs;
* :func:`matches` compares an output with a known mistake's (a fingerprint).

The guard bands' report, the fourth decision every problem shares, is
:func:`tutor.harness.guarded.guard_report`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence

import torch

from tutor.catalog import SEVERITIES, Drill
from tutor.harness.result import Diagnosis, VisitMap

NO_VISITS = "no-visits-recorded"
READ_PAST_END = "read-past-end"
NAN_IN_OUTPUT = "nan-in-output"


class Findings(dict[str, str]):
    """What a diagnosis measured: code -> the measured detail its words are followed by,
    in the order found.  :meth:`say` keeps a code's first detail; the dict's own methods
    edit one (append to it, pop it).  ``fills``: the codes' words have
    ``{placeholders}``, filled from :attr:`quoted` (see :func:`worded`)."""

    def __init__(self, said: Iterable[tuple[str, str]] = (), fills: bool = False):
        super().__init__(said)
        self.quoted: dict[str, dict[str, str]] | None = {} if fills else None

    def say(self, code: str, detail: str = "", values: dict[str, str] | None = None) -> None:
        """``code`` with ``detail``, unless it was said already (the first detail stands);
        ``values``: the measured numbers its words quote."""
        if code not in self:
            self[code] = detail
            if self.quoted is not None:
                self.quoted[code] = values if values is not None else {}

    def add(self, other: Mapping[str, str]) -> None:
        """Say each of ``other``'s codes, in its order (a step's findings, after the earlier ones)."""
        for code, detail in other.items():
            self.say(code, detail)

    def worded(self, drill: Drill) -> list[Diagnosis]:
        return worded(drill, self, self.quoted)


def worded(drill: Drill, details: dict[str, str], values: dict[str, dict[str, str]] | None = None) -> list[Diagnosis]:
    """Measured facts as diagnoses: each code's words from the drill's TOML (their
    ``{placeholders}`` filled from ``values[code]`` when given) followed by its measured detail,
    errors first, then findings, then notes.  Every problem module says its findings here."""
    said = []
    for code, detail in details.items():
        text = drill.diagnosis_text(code)
        message = text.message if values is None else fill(text.message, values.get(code, {}))
        said.append(Diagnosis(code=code, message=message + detail, severity=text.severity))
    return sorted(said, key=lambda d: SEVERITIES.index(d.severity) if d.severity in SEVERITIES else len(SEVERITIES))


def fill(message: str, values: dict[str, str]) -> str:
    """The TOML words with ``{placeholders}`` filled; a sentence whose numbers were not
    measured is left out rather than shown half-filled."""
    if "{" not in message:
        return message
    sentences = re.split(r"(?<=[.!?])\s+", message)
    kept = []
    for sentence in sentences:
        names = re.findall(r"{(\w+)", sentence)
        if all(values.get(n) for n in names):
            kept.append(sentence.format_map(values))
    return " ".join(kept)


def index_runs(items: list[int]) -> str:
    """Sorted indices (rows, keys, blocks) in words, as runs: "0..63", "3, 7, 9",
    "0..2, 9"; past four runs the first three and how many there are: "3, 7, 9..12,
    ... (14 in all)"."""
    runs: list[list[int]] = []
    for i in items:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    words = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}..{b}" for a, b in runs]
    if len(words) <= 4:
        return ", ".join(words)
    return f"{', '.join(words[:3])}, ... ({len(items)} in all)"


# Relative slack on top of the drill's tolerance when matching a wrong variant: a
# mistake such as a missing final division leaves outputs in the tens, where fp16
# rounding and the fp16 probabilities fed to the second dot alone cost ~0.5%
# (seen at seq 2000); the reference comparison itself stays absolute.
FINGERPRINT_RTOL = 1e-2


def matches(out: torch.Tensor, expected: torch.Tensor, tolerance: float, rtol: float = FINGERPRINT_RTOL,
            slack: torch.Tensor | None = None) -> bool:
    """Does ``out`` equal ``expected`` wherever ``expected`` is defined?

    Rows that ``expected`` leaves NaN (a row that saw no key) are ignored, so a
    kernel that writes NaN *or* a guarded 0 there matches either way; ``out``
    may not be NaN anywhere ``expected`` is finite.  A variant that is NaN
    everywhere matches an output that is non-finite everywhere.  ``rtol``: the slack
    relative to ``expected`` (0: the case's own absolute check, :func:`passes_as_right`).
    ``slack``: more room per element, ``expected``'s shape (a bound on rounding the model omits).
    """
    out = out.to(torch.float64)
    defined = torch.isfinite(expected)
    if not defined.any():
        return bool((~torch.isfinite(out)).all())
    if (~torch.isfinite(out) & defined).any():
        return False
    gap = (out - expected)[defined].abs()
    room = tolerance + rtol * expected[defined].abs()
    if slack is not None:
        room = room + slack[defined]
    return bool((gap <= room).all())


def passes_as_right(variant: torch.Tensor, right: torch.Tensor, tolerance: float) -> bool:
    """Would ``variant`` pass the case's own check against ``right``: every element within
    ``tolerance`` (absolute, as the check holds a student's output) wherever ``right`` is
    defined?  A mistake's variant that would pass says nothing about a failing output, and
    one that would fail is named even where it lies within :func:`matches`'s relative slack
    of the right answer (a small error on a case of small values)."""
    return matches(variant, right, tolerance, rtol=0.0)


def visit_verdict(visits: VisitMap, bounded: bool = True) -> str:
    """What a visit map says of the work: "none" (no visit recorded at all), "all" (every
    block visited, where fewer are needed), "extra" (more than needed), "ideal" (no more
    than needed).  ``bounded``: the problem's loops are bounded (causal): without it only
    "none" or "ideal"."""
    if visits.visited_blocks == 0:
        return "none"
    if not bounded:
        return "ideal"
    if visits.visited_blocks == visits.total_blocks and visits.ideal_blocks < visits.total_blocks:
        return "all"
    return "extra" if visits.visited_blocks > visits.ideal_blocks else "ideal"


def visit_findings(maps: Sequence[tuple[str, VisitMap]], bounded: bool, all_visited: str) -> Findings:
    """The visit maps' verdict as findings: ``no-visits-recorded``, ``all_visited`` (the
    code of every block visited where a causal kernel needs fewer), ``extra-blocks``.
    Each map comes with the loop it records ("" for a check's one map), which names it
    in the detail; a code's details from several maps are said together."""
    per_code: dict[str, list[str]] = {}
    for what, visits in maps:
        verdict = visit_verdict(visits, bounded)
        named = f"{what}: " if what else ""
        if verdict == "none":
            per_code.setdefault(NO_VISITS, []).append(what)
        elif verdict == "all":
            per_code.setdefault(all_visited, []).append(
                f"{named}{visits.visited_blocks}/{visits.total_blocks} blocks visited{_over(visits)};"
                f" a causal kernel needs {visits.ideal_blocks}")
        elif verdict == "extra":
            extra = visits.visited_blocks - visits.ideal_blocks
            per_code.setdefault("extra-blocks", []).append(
                f"{named}{extra} blocks more than the {visits.ideal_blocks} needed{_over(visits)}")
    return Findings((code, f" ({'; '.join(details)}.)" if any(details) else "") for code, details in per_code.items())


def _over(visits: VisitMap) -> str:
    """" in total over its N (batch x head) programs" where a map sums more than one (blind round 23:
    a count that did not say it was over both heads)."""
    return f", in total over {visits.heads} (batch, head)s" if visits.heads > 1 else ""


def nan_explained(codes: Collection[str]) -> bool:
    """Whether the NaN in an output is explained by what the guard bands measured: a load
    past the end of an input read their NaN margin (not the kernel's own arithmetic)."""
    return READ_PAST_END in codes


def drop_explained_nan(codes: dict[str, str], artifacts: Collection[str] = (NAN_IN_OUTPUT,)) -> None:
    """Drop the codes that say NaN in the output (``artifacts``) where a read past the end
    explains it (:func:`nan_explained`)."""
    if nan_explained(codes):
        for code in artifacts:
            codes.pop(code, None)
