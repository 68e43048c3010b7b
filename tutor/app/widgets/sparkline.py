"""Attempt history as text sparklines: one bar per attempt, newest on the right.

Errors span orders of magnitude (3.2 before the fix, 1e-3 after), so the
error line is drawn on a log scale; the ratio lines are linear.  The counted
work ratio and the timed GPU speed-up are separate lines with their own labels.  Each line
ends with the first and last value in numbers, so it reads without colour
and without guessing the scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from tutor.state.progress import HistorySeries

BARS = "▁▂▃▄▅▆▇█"
NO_VALUE = "·"  # an attempt that produced no number (it could not run)


def spark(values: Sequence[float | None], *, log: bool = False, width: int | None = None) -> str:
    """One bar per value, scaled between the smallest and largest value shown."""
    shown = list(values)[-width:] if width else list(values)

    def scale(v: float) -> float:
        return math.log10(v) if log else v

    finite = [scale(v) for v in shown if v is not None and math.isfinite(v) and (v > 0 or not log)]
    if not finite:
        return NO_VALUE * len(shown)
    low, high = min(finite), max(finite)
    out = []
    for v in shown:
        if v is None or not math.isfinite(v) or (log and v <= 0):
            out.append(NO_VALUE)
            continue
        frac = 0.5 if high == low else (scale(v) - low) / (high - low)
        out.append(BARS[round(frac * (len(BARS) - 1))])
    return "".join(out)


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _first_last(values: list[float | None], fmt: str, unit: str = "") -> str:
    """The first and the last value; a bare "-" when no attempt has one."""
    if all(v is None for v in values):
        return "-"
    return f"{_number(values[0], fmt)} → {_number(values[-1], fmt)}{unit}"


# What each line charts, in words that say how the figure was obtained.
ERROR_LABEL = "error (log)"
WORK_LABEL = "work (counted)"  # K/V blocks visited, full launch over causal launch
SPEEDUP_LABEL = "speed-up (timed, GPU)"  # full/causal wall clock, timed on a GPU only
LABEL_WIDTH = len(SPEEDUP_LABEL) + 2


def history_text(errors: Sequence[float | None], speedups: Sequence[float | None],
                 work_ratios: Sequence[float | None] = (), undecided: int = 0, not_run: int = 0,
                 width: int = 30) -> Text:
    """The attempt chart: max abs error, the counted work ratio and, when any attempt
    was timed on a GPU, the timed speed-up: never one line for both figures."""
    if not errors:
        return Text("no attempts yet: save the drill file to check it", style="dim")
    shown = min(len(errors), width)

    def newest(values: Sequence[float | None]) -> list[float | None]:
        """The last ``shown`` values, aligned on the newest attempt (None where a series is shorter)."""
        return ([None] * shown + list(values))[-shown:]

    errors, speedups, work = newest(errors), newest(speedups), newest(work_ratios)
    skipped = f", {not_run} could not run (no attempt)" if not_run else ""  # tutor.state.progress: no hints
    lines = [Text(f"attempts  {shown} shown{skipped}", style="dim"),
             _line(ERROR_LABEL, spark(errors, log=True), _first_last(errors, ".1e")),
             _line(WORK_LABEL, spark(work), _first_last(work, ".2f", "x"))]
    if any(v is not None for v in speedups):
        lines.append(_line(SPEEDUP_LABEL, spark(speedups), _first_last(speedups, ".2f", "x")))
        if undecided:
            # from a file written before timed and counted were kept apart (tutor.state.progress)
            lines.append(Text(f"({undecided} older record{'s' if undecided != 1 else ''}: "
                              "not known whether timed on a GPU)", style="dim"))
    return Text("\n").join(lines)


def _line(label: str, bars: str, numbers: str) -> Text:
    text = Text(label.ljust(LABEL_WIDTH))
    text.append(bars, style="bold")
    text.append(f"  {numbers}")
    return text


class AttemptHistory(Static):
    """The attempt chart (:func:`history_text`) over recent attempts."""

    WIDTH = 30  # attempts shown; older ones stay in the progress file

    def show(self, history: HistorySeries) -> None:
        self.update(history_text(*history, width=self.WIDTH))
