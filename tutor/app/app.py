"""``FlashTutorApp``: the Textual front end on :class:`tutor.engine.TutorEngine`.

Everything on screen comes from core objects: the engine's events (check
results, device, watcher mode), its progress store and hint states, the
catalog, and the quiz engine.  The app adds no judgement of its own.

Threads: the engine calls :meth:`FlashTutorApp.engine_event` from its own
threads; that only posts a message (thread-safe), and the handlers below run
on the UI thread.  Slow work (starting the engine, building the quiz, which
may import torch) runs in thread workers; their failures all land in
:meth:`FlashTutorApp._worker_changed`.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from textual import on, work
from textual.app import App, SuspendNotSupported
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tutor import links
from tutor.app.messages import (
    CheckAbandoned,
    CheckBegan,
    CheckDone,
    DeviceKnown,
    EngineNotice,
    PerformanceDone,
    WatcherChanged,
    message_for,
)
from tutor.app.screens.confirm import ConfirmScreen
from tutor.app.screens.drill_list import DrillListScreen, DrillRow
from tutor.app.screens.drill_view import DrillScreen
from tutor.app.screens.help import HelpPage
from tutor.app.screens.hints import HintsScreen
from tutor.app.screens.quiz import QuizScreen
from tutor.app.screens.text_page import TextPage, solution_markdown
from tutor.app.widgets.result_view import display_path
from tutor.app.widgets.status_bar import DEVICE_PENDING, short_path
from tutor.catalog import Drill, all_drills, get_drill, kernel_drills, next_drill, solution_path
from tutor.engine import EngineError, Event, TutorEngine
from tutor.harness.device import DeviceChoice
from tutor.harness.result import CheckResult, Device
from tutor.hints import hint_states
from tutor.progress import drill_summaries
from tutor.quiz import QuizSession, build_questions, gpu_for_checks
from tutor.runner import DEFAULT_TIMEOUT_S
from tutor.workspace import WorkspaceError, reset_drill

_S = TypeVar("_S", bound="Screen[Any]")


class FlashTutorApp(App[int]):
    """The drill list, the live drill view, hints, the quiz and help.

    ``live=False`` builds the app on an engine that is never started: nothing
    is watched or checked, and events come only from :meth:`engine_event`
    (the snapshot tests feed it recorded results that way).
    """

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "flashtutor"
    ENABLE_COMMAND_PALETTE = False  # every action has a key; the palette would only take footer room
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
    ]

    device_label = reactive(DEVICE_PENDING)
    watcher_label = reactive("watch: starting")
    workspace_label = reactive("")

    def __init__(
        self,
        engine: TutorEngine,
        *,
        live: bool = True,
        first_drill: Drill | None = None,
        workspace_label: str | None = None,
        animate: bool = True,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.workspace = engine.workspace
        self.live = live
        self.first_drill = first_drill
        # not `self.animate`: that name is the App's animate() method, which Textual calls
        self.animations = animate
        self.latest: dict[str, CheckResult] = {}  # drill id -> newest result this session
        self.running: set[str] = set()  # drill ids with a check in flight
        self._workspace_text = workspace_label or short_path(self.workspace)

    @classmethod
    def with_engine(
        cls,
        workspace: Path,
        *,
        device: DeviceChoice = "auto",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        force_polling: bool = False,
        timing: bool = True,
        first_drill: Drill | None = None,
        **options: Any,
    ) -> FlashTutorApp:
        """An app on a fresh engine whose events come back to it."""
        relay: list[FlashTutorApp] = []  # the engine needs its callback before the app exists
        engine = TutorEngine(
            workspace,
            device=device,
            timeout_s=timeout_s,
            force_polling=force_polling,
            timing=timing,
            on_event=lambda event: relay[0].engine_event(event),
        )
        app = cls(engine, first_drill=first_drill, **options)
        relay.append(app)
        return app

    # -- engine events (any thread) -------------------------------------------------------
    def engine_event(self, event: Event) -> None:
        """The engine's callback: wrap the event and post it; nothing else."""
        self.post_message(message_for(event))

    # -- start and stop -------------------------------------------------------------------
    def on_mount(self) -> None:
        self.workspace_label = self._workspace_text
        self.push_screen(DrillListScreen(self.drill_rows()))
        if self.first_drill is not None:
            self.open_drill(self.first_drill)
        if self.live:
            self._start_engine()

    @work(thread=True, group="engine", exit_on_error=False, name="starting the engine")
    def _start_engine(self) -> None:
        self.engine.start()

    def on_unmount(self) -> None:
        if self.live:
            self.engine.stop()

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        """Every worker's failure ends here: say it and keep going."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.say(f"{event.worker.name} failed: {error}", title="flashtutor", severity="error", timeout=10)

    # -- engine messages (UI thread) ------------------------------------------------------
    @on(CheckBegan)
    def _check_began(self, message: CheckBegan) -> None:
        drill = message.event.drill
        self.running.add(drill)
        for screen in self._drill_screens(drill):
            screen.show_running(True)

    @on(CheckAbandoned)
    def _check_abandoned(self, message: CheckAbandoned) -> None:
        # a newer save replaced it; a CheckBegan for the newest content follows
        self.running.discard(message.event.drill)

    @on(CheckDone)
    def _check_done(self, message: CheckDone) -> None:
        event = message.event
        result = event.result
        self.latest[event.drill] = result
        self.running.discard(event.drill)
        if result.device is not None:
            self._device(result.device)
        for screen in self._drill_screens(event.drill):
            screen.show_running(False)
            screen.show_result(result)
            screen.show_history(*event.record.history_series())
        drill = get_drill(event.drill)
        for hints_screen in self._screens(HintsScreen):
            if hints_screen.drill.id == drill.id:  # the event carries the recorded unlocks: no re-read
                hints_screen.update_states(hint_states(drill, event.record.unlocked_hints), event.record.attempts)
        if event.newly_unlocked:
            titles = "\n".join(f"{drill.hints.index(h) + 1}. {h.title}" for h in event.newly_unlocked)
            plural = "s" if len(event.newly_unlocked) > 1 else ""
            self.say(f"{titles}\npress h to read {'them' if plural else 'it'}",
                     title=f"{drill.id}: hint{plural} unlocked", timeout=8)
        if result.solved and event.counted and event.record.attempts_to_pass == event.record.attempts:
            self.say(f"{drill.id} {drill.title} solved in {event.record.attempts} attempts. n: the next drill.",
                     title="solved", timeout=8)
        self._refresh_list()

    @on(PerformanceDone)
    def _performance_done(self, message: PerformanceDone) -> None:
        event = message.event
        self.latest[event.drill] = event.result
        for screen in self._drill_screens(event.drill):
            screen.show_result(event.result)
            screen.show_history(*event.record.history_series())
        self._refresh_list()

    @on(WatcherChanged)
    def _watcher_changed(self, message: WatcherChanged) -> None:
        status = message.event
        self.watcher_label = f"watch: {status.mode}"
        if status.mode != "native":
            self.say(status.reason + " (r re-runs a check by hand)", title=f"watching: {status.mode}",
                     severity="warning", timeout=10)

    @on(DeviceKnown)
    def _device_known(self, message: DeviceKnown) -> None:
        self._device(message.event.device)

    @on(EngineNotice)
    def _engine_notice(self, message: EngineNotice) -> None:
        is_error = isinstance(message.event, EngineError)
        if is_error:
            if self.engine.device is None:
                self.device_label = "device: the check worker did not start"
            self.running.clear()
            for screen in self._screens(DrillScreen):
                screen.show_running(False)
        self.say(message.event.message, title="flashtutor", severity="error" if is_error else "warning",
                 timeout=15)

    def say(self, message: str, *, title: str = "flashtutor", severity: SeverityLevel = "information",
            timeout: float = 6) -> None:
        """A notification; the text is shown as is (paths and code are not markup)."""
        self.notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def _device(self, device: Device) -> None:
        self.device_label = device.label

    # -- what the screens show ------------------------------------------------------------
    def drill_rows(self) -> list[DrillRow]:
        return drill_summaries(self.engine.progress, all_drills())

    def _refresh_list(self) -> None:
        rows = self.drill_rows()
        for screen in self._screens(DrillListScreen):
            screen.update_rows(rows)

    def _screens(self, kind: type[_S]) -> Iterator[_S]:
        return (s for s in self.screen_stack if isinstance(s, kind))

    def _drill_screens(self, drill_id: str) -> Iterator[DrillScreen]:
        return (s for s in self._screens(DrillScreen) if s.drill.id == drill_id)

    def _current_drill(self) -> Drill | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, DrillScreen):
                return screen.drill
            if isinstance(screen, DrillListScreen):
                return screen.selected_drill()
        return None

    # -- navigation -----------------------------------------------------------------------
    @on(DrillListScreen.OpenDrill)
    def _open_from_list(self, message: DrillListScreen.OpenDrill) -> None:
        self.open_drill(message.drill)

    def open_drill(self, drill: Drill) -> None:
        """The drill view (kernel drills) or the quiz (the paper drill)."""
        if not drill.is_kernel:
            self.action_quiz()
            return
        self._pop_to_list()
        self.push_screen(DrillScreen(
            drill,
            self.workspace,
            result=self.latest.get(drill.id),
            history=self.engine.progress.drill(drill.id).history_series(),
            running=drill.id in self.running,
            animate=self.animations,
        ))
        self.engine.set_focus(drill.id)
        if self.live and drill.id not in self.latest and drill.id not in self.running:
            self.engine.recheck(drill.id)  # show where the drill stands without waiting for a save

    def _pop_to_list(self) -> None:
        while len(self.screen_stack) > 1 and not isinstance(self.screen, DrillListScreen):
            self.pop_screen()

    def action_drill_list(self) -> None:
        self._pop_to_list()
        self.engine.set_focus(None)
        self._refresh_list()

    def action_next_drill(self) -> None:
        current = self._current_drill()
        upcoming = next_drill(current.id if current else None)
        if upcoming is None:
            self.say("That was the last drill.", title="flashtutor")
            return
        self.open_drill(upcoming)

    # -- drill actions --------------------------------------------------------------------
    def _kernel_drill_or_say(self) -> Drill | None:
        drill = self._current_drill()
        if drill is None or not drill.is_kernel:
            kernels = ", ".join(d.id for d in kernel_drills())
            self.say(f"Open a kernel drill first ({kernels}).", title="flashtutor")
            return None
        return drill

    def action_recheck(self) -> None:
        drill = self._kernel_drill_or_say()
        if drill is None:
            return
        if not self.live:
            self.say("Not checking: this app was started without its engine.", severity="warning")
            return
        self.engine.recheck(drill.id)

    def action_hints(self) -> None:
        drill = self._current_drill()
        if drill is None:
            return
        progress = self.engine.progress.drill(drill.id)  # one read: the attempts and the unlocks agree
        self.push_screen(HintsScreen(drill, hint_states(drill, progress.unlocked_hints), progress.attempts))

    def action_edit(self) -> None:
        drill = self._kernel_drill_or_say()
        if drill is None:
            return
        path = self.workspace / "drills" / drill.file
        editor = links.chosen_editor() or shutil.which("vi")
        if not editor:
            self.say(f"Set $EDITOR to edit from here, or open {path} in any editor: saves are watched.",
                     severity="warning")
            return
        failure: OSError | None = None
        try:
            with self.suspend():
                try:  # inside: an error here must not skip the app's resume
                    subprocess.call(links.editor_command(editor, path))
                except OSError as exc:  # the editor's binary is missing or not executable
                    failure = exc
        except SuspendNotSupported:
            self.say(f"This terminal cannot hand over to an editor: edit {path} in another window "
                     "(saves are watched).", severity="warning")
            return
        if failure is not None:
            self.say(f"Could not run {editor}: {failure}. Edit {path} in another window: saves are watched.",
                     severity="warning")

    def action_reset(self) -> None:
        drill = self._kernel_drill_or_say()
        if drill is None:
            return
        question = (f"Reset drills/{drill.file} to the pristine drill?\n"
                    "Your version is copied to a backup first, and the backup's path is shown.")

        def answered(yes: bool | None) -> None:
            if yes:
                self._reset(drill)

        self.push_screen(ConfirmScreen(question, yes="Reset", no="Keep my version"), answered)

    @work(thread=True, group="reset", exit_on_error=False, name="resetting the drill")
    def _reset(self, drill: Drill) -> None:
        """Off the UI thread: the backup and the restore are file copies and writes."""
        try:
            report = reset_drill(drill, self.workspace)
        except WorkspaceError as exc:
            self.call_from_thread(self.say, str(exc), title="reset failed", severity="error", timeout=15)
            return
        if not report.changed:
            self.call_from_thread(self.say, f"drills/{drill.file} is already the pristine drill: nothing to reset.",
                                  title="reset")
            return
        kept = (f"Your version is kept in\n{display_path(str(report.backup), self.workspace)}"
                if report.backup else "There was no version of yours to keep.")
        self.call_from_thread(self.say, f"Restored drills/{drill.file} from {report.source}.\n{kept}",
                              title="reset", timeout=15)

    def action_solution(self) -> None:
        drill = self._current_drill()
        if drill is None:
            return
        if self.engine.progress.drill(drill.id).solved_before:  # passed once stays passed for the gate
            self._show_solution(drill)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._show_solution(drill)

        self.push_screen(ConfirmScreen(f"You have not passed {drill.id} yet. Show the solution anyway?",
                                       yes="Show it", no="Not yet"), answered)

    def _show_solution(self, drill: Drill) -> None:
        path = solution_path(drill)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            self.say(f"cannot read {path}: {exc.strerror or exc}", severity="error")
            return
        self.push_screen(TextPage(f"solution: {drill.id} {drill.title}", solution_markdown(path, text),
                                  page_id="solution"))

    def action_help(self) -> None:
        self.push_screen(HelpPage())

    # -- quiz -----------------------------------------------------------------------------
    def action_quiz(self) -> None:
        existing = next(self._screens(QuizScreen), None)
        if existing is not None:
            while self.screen is not existing:
                self.pop_screen()
            return
        self._prepare_quiz()

    @work(thread=True, group="quiz", exclusive=True, exit_on_error=False, name="preparing the quiz")
    def _prepare_quiz(self) -> None:
        """Build the questions off the UI thread: the GPU-aware budget question
        asks torch about the GPU, which imports torch (seconds)."""
        device = self.engine.device
        gpu = gpu_for_checks(None if device is None else device.interpreter, self.engine.device_choice)
        session = QuizSession(build_questions(seed=None, gpu=gpu), self.engine.progress)
        self.call_from_thread(self._show_quiz, session)

    def _show_quiz(self, session: QuizSession) -> None:
        self._pop_to_list()
        self.push_screen(QuizScreen(session))

    @on(QuizScreen.Answered)
    def _quiz_answered(self, message: QuizScreen.Answered) -> None:
        self._refresh_list()
        self.engine.send_warnings()  # an answer that could not be saved says so, once

