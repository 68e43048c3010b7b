"""Says that a check is running (a spinner) while the last result stays on screen,
or that the verdict on screen is in and its performance phase is being timed."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Static

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class CheckIndicator(Static):
    """Hidden while idle; ``start(file)`` shows a spinner, ``stop()`` hides it.

    ``animate=False`` freezes the spinner on its first frame (snapshot tests).
    """

    frame = reactive(0)

    def __init__(self, *, animate: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # not `self.animate`: that name is Widget.animate(), which Textual calls
        self.spinning = animate
        self.file = ""
        self.doing = "checking"  # or "diagnosing"/"timing": the verdict is shown, a later phase runs
        self.step = ""  # what the check does now ("compiling…")
        self._timer: Timer | None = None

    def on_mount(self) -> None:
        self.display = False

    def start(self, file: str, doing: str = "checking") -> None:
        if doing != self.doing or not self.display:
            self.step = ""
        self.file = file
        self.doing = doing
        self.frame = 0
        self.display = True
        if self.spinning and self._timer is None:
            self._timer = self.set_interval(0.1, self._advance)
        self.refresh()

    def show_step(self, step: str) -> None:
        self.step = step
        self.refresh()

    def stop(self) -> None:
        self.display = False
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    @property
    def running(self) -> bool:
        return bool(self.display)

    def _advance(self) -> None:
        self.frame = (self.frame + 1) % len(FRAMES)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{FRAMES[self.frame]} {self.doing} ", style="bold")
        text.append(self.file)
        if self.doing == "timing":
            text.append(" … the verdict below is in; timed launches and roofline follow", style="dim")
        elif self.doing == "diagnosing":
            text.append(" … the verdict below is in; reading out your kernel", style="dim")
        elif self.step:
            text.append(f" … {self.step}; the last result stays below", style="dim")
        else:
            text.append(" … the last result stays below", style="dim")
        return text
