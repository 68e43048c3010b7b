"""``FlashTutorApp``: the Textual front end on :class:`tutor.loop.engine.TutorEngine`.

Everything on screen comes from core objects: the engine's events (check
results and the progress records they carry, device, watcher mode), its
progress store and hint states, the catalog, and the quiz engine.  The app
adds no judgement of its own.

Threads: the engine calls :meth:`FlashTutorApp.engine_event` from its own
threads; that only posts a message (thread-safe), and the handlers below run
on the UI thread.  Slow work (starting the engine, reading the progress file,
building the quiz, which may import torch) runs in thread workers that end in
a message or ``call_from_thread``; their failures all land in
:meth:`FlashTutorApp._worker_changed`.  The UI thread never reads
``progress.json``: it draws from :class:`~tutor.app.known_progress.KnownProgress`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from textual import on, work
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tutor.app.drill_actions import DrillActions
from tutor.app.known_progress import KnownProgress
from tutor.app.messages import (
    CheckAbandoned,
    CheckBegan,
    CheckDone,
    CheckStepped,
    DeviceKnown,
    DiagnosisDone,
    EngineNotice,
    PerformanceDone,
    ProgressLoaded,
    WatcherChanged,
    message_for,
)
from tutor.app.screens.drill_list import DrillListScreen
from tutor.app.screens.drill_view import DrillScreen
from tutor.app.screens.help import HelpPage
from tutor.app.screens.hints import HintsScreen
from tutor.app.screens.quiz import QuizScreen
from tutor.app.widgets.status_bar import DEVICE_PENDING, short_path
from tutor.catalog import Drill, Hint, get_drill, next_drill
from tutor.harness.device import DeviceChoice
from tutor.harness.result import CheckResult, Device
from tutor.loop.engine import EngineError, Event, TutorEngine
from tutor.loop.runner import DEFAULT_TIMEOUT_S
from tutor.quiz import QuizSession, build_questions, gpu_for_checks
from tutor.state.hints import hint_states
from tutor.state.progress import DrillProgress

_S = TypeVar("_S", bound="Screen[Any]")


class FlashTutorApp(DrillActions):
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
        edit_cmd: str | None = None,
    ) -> None:
        super().__init__()
        self.engine = engine
        self.workspace = engine.workspace
        self.live = live
        self.first_drill = first_drill
        self.edit_cmd = edit_cmd  # the `e` key's editor ({file}/{line} templates); None: $VISUAL, $EDITOR
        # not `self.animate`: that name is the App's animate() method, which Textual calls
        self.animations = animate
        self.latest: dict[str, CheckResult] = {}  # drill id -> newest result this session
        self.running: set[str] = set()  # drill ids with a check in flight
        self.known = KnownProgress()  # the progress drawn: loaded in a worker, then the events' records
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
        self.push_screen(DrillListScreen(self.known.rows(), loaded=self.known.loaded))
        self._load_progress()
        if self.first_drill is not None:
            self.open_drill(self.first_drill)
        if self.live:
            self._start_engine()

    @work(thread=True, group="engine", exit_on_error=False, name="starting the engine")
    def _start_engine(self) -> None:
        self.engine.start()

    def _load_progress(self) -> None:
        """Read the progress file off the UI thread; :meth:`_progress_loaded` takes it in."""
        self._read_progress(self.known.load_mark())

    @work(thread=True, group="progress", exit_on_error=False, name="reading the progress file")
    def _read_progress(self, mark: int) -> None:
        store = self.engine.progress
        self.post_message(ProgressLoaded(store.all_drills(), store.quiz_answers(), mark))

    @on(ProgressLoaded)
    def _progress_loaded(self, message: ProgressLoaded) -> None:
        changed = self.known.take_load(message.drills, message.answers, message.mark)
        for drill_id in changed:
            for screen in self._drill_screens(drill_id):
                screen.show_history(self.known.drill(drill_id).history_series())
        self._refresh_list()

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

    @on(CheckStepped)
    def _check_stepped(self, message: CheckStepped) -> None:
        for screen in self._drill_screens(message.event.drill):
            screen.show_step(message.event.step)

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
        self.known.take_record(event.drill, event.record)
        if result.device is not None:
            self._device(result.device)
        for screen in self._drill_screens(event.drill):
            screen.show_running(False)
            screen.show_result(result)
            screen.show_history(event.record.history_series())
        self._hints_unlocked(event.drill, event.record, event.newly_unlocked)
        drill = get_drill(event.drill)
        if result.solved and event.counted and event.record.attempts_to_pass == event.record.attempts:
            self.say(f"{drill.id} {drill.title} solved in {event.record.attempts} attempts. n: the next drill.",
                     title="solved", timeout=8)
        self._refresh_list()

    def _hints_unlocked(self, drill_id: str, record: DrillProgress, unlocked: list[Hint]) -> None:
        """The hints screen follows the recorded unlocks (no re-read); new ones are announced."""
        drill = get_drill(drill_id)
        for hints_screen in self._screens(HintsScreen):
            if hints_screen.drill.id == drill.id:
                hints_screen.update_states(hint_states(drill, record.unlocked_hints), record.attempts)
        if unlocked:
            titles = "\n".join(f"{drill.hints.index(h) + 1}. {h.title}" for h in unlocked)
            plural = "s" if len(unlocked) > 1 else ""
            self.say(f"{titles}\npress h to read {'them' if plural else 'it'}",
                     title=f"{drill.id}: hint{plural} unlocked", timeout=8)

    @on(DiagnosisDone)
    def _diagnosis_done(self, message: DiagnosisDone) -> None:
        event = message.event
        if event.result.diagnosis_phase.status == "cancelled":
            return  # a newer save's check follows
        self.latest[event.drill] = event.result
        self.known.take_record(event.drill, event.record)
        for screen in self._drill_screens(event.drill):
            screen.show_result(event.result)
            screen.show_history(event.record.history_series())
        self._hints_unlocked(event.drill, event.record, event.newly_unlocked)
        self._refresh_list()

    @on(PerformanceDone)
    def _performance_done(self, message: PerformanceDone) -> None:
        event = message.event
        self.latest[event.drill] = event.result
        self.known.take_record(event.drill, event.record)
        for screen in self._drill_screens(event.drill):
            screen.show_result(event.result)
            screen.show_history(event.record.history_series())
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

    def _device(self, device: Device) -> None:
        self.device_label = device.label

    # -- what the screens show ------------------------------------------------------------
    def _refresh_list(self) -> None:
        rows = self.known.rows()
        for screen in self._screens(DrillListScreen):
            screen.update_rows(rows, loaded=self.known.loaded)

    def _screens(self, kind: type[_S]) -> Iterator[_S]:
        return (s for s in self.screen_stack if isinstance(s, kind))

    def _drill_screens(self, drill_id: str) -> Iterator[DrillScreen]:
        return (s for s in self._screens(DrillScreen) if s.drill.id == drill_id)

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
            history=self.known.drill(drill.id).history_series(),
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
        self._load_progress()  # what another front end on this workspace changed meanwhile

    def action_next_drill(self) -> None:
        current = self._current_drill()
        upcoming = next_drill(current.id if current else None)
        if upcoming is None:
            self.say("That was the last drill.", title="flashtutor")
            return
        self.open_drill(upcoming)

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
        self._load_progress()  # the answer and the paper drill's status are in the file now
        self.engine.send_warnings()  # an answer that could not be saved says so, once

