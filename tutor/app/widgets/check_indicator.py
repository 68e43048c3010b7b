"""Says that a check is running (a spinner) while the last result stays on screen,
or that the verdict on screen is in and its performance phase is being timed."""

from __future__ import annotations

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

    def __init__(self, *, animate: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.animate = animate
        self.file = ""
        self.doing = "checking"  # or "timing": the verdict is shown, the timed launches run
        self._timer: Timer | None = None

    def on_mount(self) -> None:
        self.display = False

    def start(self, file: str, doing: str = "checking") -> None:
        self.file = file
        self.doing = doing
        self.frame = 0
        self.display = True
        if self.animate and self._timer is None:
            self._timer = self.set_interval(0.1, self._advance)
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
        else:
            text.append(" … the last result stays below", style="dim")
        return text
