"""Findings in words, shared by every problem: the measured facts a diagnosis
says, each under its code, and the comparisons they are measured with.

* :func:`worded` turns ``{code: measured detail}`` into diagnoses, each code's
  words from the drill's TOML (``{placeholders}`` filled by :func:`fill`),
  errors first;
* :func:`index_runs` says sorted indices (rows, keys, blocks) as runs;
* :func:`matches` compares an output with a known mistake's (a fingerprint).
"""

from __future__ import annotations

import re

import torch

from tutor.catalog import SEVERITIES, Drill
from tutor.harness.result import Diagnosis


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
