"""Attempt history as text sparklines: one bar per attempt, newest on the right.

Errors span orders of magnitude (3.2 before the fix, 1e-3 after), so the
error line is drawn on a log scale; the speed-up line is linear.  Each line
ends with the first and last value in numbers, so it reads without colour
and without guessing the scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

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


class AttemptHistory(Static):
    """Two sparklines — max abs error and causal speed-up — over recent attempts."""

    WIDTH = 30  # attempts shown; older ones stay in the progress file

    def show(self, errors: Sequence[float | None], speedups: Sequence[float | None]) -> None:
        if not errors:
            self.update(Text("no attempts yet: save the drill file to check it", style="dim"))
            return
        errors, speedups = list(errors)[-self.WIDTH:], list(speedups)[-self.WIDTH:]
        text = Text()
        text.append(f"attempts  {len(errors)} shown\n", style="dim")
        text.append("error     ")
        text.append(spark(errors, log=True).ljust(len(errors)), style="bold")
        text.append(f"  {_number(errors[0], '.1e')} → {_number(errors[-1], '.1e')} (log)\n")
        text.append("speed-up  ")
        text.append(spark(speedups).ljust(len(errors)), style="bold")
        text.append(f"  {_number(speedups[0], '.2f')} → {_number(speedups[-1], '.2f')}x")
        self.update(text)
