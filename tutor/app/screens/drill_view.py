"""The drill view: the live result of the latest check of one drill."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from tutor.app.widgets.check_indicator import CheckIndicator
from tutor.app.widgets.result_view import Verdict, diagnosis_text, error_text, has_diagnosis_text, metrics_text
from tutor.app.widgets.roofline_view import RooflineView
from tutor.app.widgets.sparkline import AttemptHistory
from tutor.app.widgets.status_bar import StatusBar
from tutor.app.widgets.visit_map import VisitMapView
from tutor.app.widgets.weight_map import WeightMapView
from tutor.catalog import Drill
from tutor.harness.result import CheckResult
from tutor.report import step_words
from tutor.state.progress import HistorySeries

METRICS_WIDTH = 48  # the numbers column, its padding included
MAP_FRAME = 8  # the map's border and padding, the body's padding and scroll bar


class DrillScreen(Screen[None]):
    """Shows one drill: verdict, numbers, visit map, diagnosis, history.

    The app calls :meth:`show_result`, :meth:`show_running` and
    :meth:`show_history` (before or after the screen is mounted); the screen
    only draws what it is handed, and its keys are the app's actions.
    """

    BINDINGS = [
        Binding("r", "app.recheck", "Re-run", tooltip="check the drill file again now"),
        Binding("h", "app.hints", "Hints", tooltip="the hints: unlocked ones in full, what unlocks the rest"),
        Binding("e", "app.edit", "Edit", tooltip="open the drill in your editor (--edit-cmd, $VISUAL or $EDITOR), "
                "at the error's line; the app suspends, then resumes"),
        Binding("x", "app.reset", "Reset", tooltip="restore the pristine drill after a backup (asks first)"),
        Binding("s", "app.solution", "Solution", tooltip="show the solution (after a pass, or once you confirm)"),
        Binding("n", "app.next_drill", "Next", tooltip="the next drill"),
        Binding("m", "app.quiz", "Quiz", tooltip="the math quiz of drill 03"),
        Binding("escape,l", "app.drill_list", "List", show=False, tooltip="back to the drill list"),
        Binding("question_mark", "app.help", "Help", key_display="?", tooltip="this help"),
        Binding("q", "app.quit", "Quit", tooltip="quit (progress is saved after every check)"),
    ]

    def __init__(
        self,
        drill: Drill,
        workspace: Path,
        *,
        result: CheckResult | None = None,
        history: HistorySeries | None = None,
        running: bool = False,
        animate: bool = True,
    ) -> None:
        super().__init__()
        self.drill = drill
        self.workspace = workspace
        self.result = result
        self.history = history if history is not None else HistorySeries([], [], [])
        self.running = running
        self._animate_spinner = animate  # not `_animate`: Textual keeps its animator there

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusBar()
        yield Verdict(id="verdict")
        yield CheckIndicator(id="running", animate=self._animate_spinner)
        with VerticalScroll(id="body"):
            with Horizontal(id="numbers"):
                yield Static(id="metrics")
                yield VisitMapView(id="visit-map")
            yield RooflineView(id="roofline")
            yield Static(id="error")
            yield Static(id="diagnosis")
            yield WeightMapView(id="weight-map")
            with Vertical(id="history-box"):
                yield AttemptHistory(id="history")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = f"{self.drill.id} {self.drill.title}"
        self.sub_title = self.file_label
        self.query_one("#history-box").border_title = "attempts"
        self.query_one(VisitMapView).border_title = "visited blocks, per head"
        self.query_one(RooflineView).border_title = "roofline"
        self._draw_result()
        self._draw_history()
        self._draw_running()

    @property
    def file_label(self) -> str:
        return f"drills/{self.drill.file}"

    # -- what the app calls (before or after mounting) ------------------------------
    def show_running(self, running: bool) -> None:
        self.running = running
        if self.is_mounted:
            self._draw_running()

    def show_step(self, step: str) -> None:
        """What the running check does now ("compiling…", the launch it runs)."""
        if self.is_mounted and self.running:
            self.query_one(CheckIndicator).show_step(step_words(step))

    def show_result(self, result: CheckResult | None) -> None:
        self.result = result
        if self.is_mounted:
            self._draw_result()
            self._draw_running()

    def show_history(self, history: HistorySeries) -> None:
        """The attempt history (:meth:`tutor.state.progress.DrillProgress.history_series`)."""
        self.history = history
        if self.is_mounted:
            self._draw_history()

    def on_resize(self) -> None:
        self._fit_numbers()

    # -- drawing --------------------------------------------------------------------
    def _fit_numbers(self) -> None:
        """The numbers and the map side by side when both fit, else the map below."""
        needed = METRICS_WIDTH + self.query_one(VisitMapView).drawn_width + MAP_FRAME
        self.query_one("#numbers").set_class(needed > self.size.width, "stacked")

    def _draw_running(self) -> None:
        indicator = self.query_one(CheckIndicator)
        if self.running:
            indicator.start(self.file_label)
        elif self.result is not None and self.result.diagnosis_phase.status == "pending":
            indicator.start(self.file_label, "diagnosing")  # the verdict is shown; its diagnosis follows
        elif self.result is not None and self.result.performance.status == "pending":
            indicator.start(self.file_label, "timing")  # the verdict is shown; its timing follows
        else:
            indicator.stop()

    def _draw_history(self) -> None:
        self.query_one(AttemptHistory).show(self.history)

    def _draw_result(self) -> None:
        result = self.result
        self.query_one(Verdict).show(result)
        metrics = self.query_one("#metrics", Static)
        visit_map = self.query_one(VisitMapView)
        error = self.query_one("#error", Static)
        diagnosis = self.query_one("#diagnosis", Static)
        numbers = self.query_one("#numbers")
        roofline = self.query_one(RooflineView)
        roofline.show(None if result is None or result.error is not None else result.roofline,
                      bool(result and result.device and result.device.interpreter))
        if result is None:
            self.query_one(WeightMapView).show(None)
            numbers.display = False
            error.display = True
            error.update(Text(f"Save {self.file_label} in your editor (or press r) to check it.", style="dim"))
            diagnosis.display = False
            return
        could_not_run = result.error is not None
        numbers.display = not could_not_run
        error.display = could_not_run
        if could_not_run:
            error.update(error_text(result, self.workspace))
        else:
            metrics.update(metrics_text(result))
            visit_map.show(result.visits)
            self._fit_numbers()
        diagnosis.display = has_diagnosis_text(result)
        diagnosis.update(diagnosis_text(result))
        self.query_one(WeightMapView).show(None if could_not_run else result.readout)
