"""The save-to-recheck engine: watch the drills, check each save, record it.

Front ends (the Textual app, ``flashtutor watch``, the latency benchmark) all
drive the same :class:`TutorEngine` and only show what it reports.  It imports
no UI code.

Use::

    engine = TutorEngine(workspace, device="auto", on_event=handle)
    engine.start()            # returns at once; the watcher and a warm worker start in the background
    engine.set_focus("01")    # checks of 01 go first (every saved drill is still checked)
    engine.recheck("01")      # a manual re-run
    ...
    engine.stop()

Events (frozen dataclasses, passed to ``on_event``):

``WatcherStatus(mode, reason)``
    mode ``"native"`` (inotify), ``"polling"`` (the fallback, or ``--poll``) or
    ``"off"`` (``watch=False``, or watchdog missing); sent at start and whenever
    the watcher changes mode or restarts.
``DeviceReady(device)``
    the worker is warm: the :class:`~tutor.harness.result.Device` checks run on.
``CheckStarted(drill, file, trigger)``
    a check of drill id ``drill`` began; ``trigger`` is ``"save"`` or ``"manual"``.
``CheckStep(drill, step)``
    what the running check of ``drill`` is doing now, in words ("loading and
    compiling your kernel", "the ragged case, shape 1x2x129x64, causal"): a
    front end says "compiling…" while the first one lasts.
``CheckCancelled(drill, file)``
    a newer save of the same drill arrived: this check was abandoned, and a
    ``CheckStarted`` for the newest content follows.
``CheckFinished(drill, result, newly_unlocked, record)``
    the *verdict*, sent as soon as it is known: ``result`` is the structured
    :class:`~tutor.harness.result.CheckResult` (an error, a timeout and a
    crash are results too) with correctness and visit map (and, for a kernel
    that passed, its diagnosis); it has been recorded: ``record`` is the
    drill's :class:`~tutor.state.progress.DrillProgress` after it, ``newly_unlocked``
    the :class:`~tutor.catalog.Hint` objects it unlocked; ``counted`` is False
    when it was not a new attempt (the content of the last attempt, or the
    drill as shipped: ``not_counted`` says which).
    ``result.diagnosis_phase.status`` is ``"pending"`` when a ``DiagnosisFinished``
    follows (the kernel FAILED: its read-outs run now);
    ``result.performance.status`` is ``"pending"`` when a ``PerformanceFinished`` for the
    same content follows, else ``"skipped"``.
    A check of a deleted file (error kind ``missing-file``) is reported but
    not recorded: deleting a file is not an attempt.
``DiagnosisFinished(drill, result, newly_unlocked, record)``
    the second phase of a failing check: ``result`` is the verdict's result
    with the diagnosis, guard findings and read-outs filled in;
    ``result.diagnosis_phase.status`` is ``"done"``, ``"skipped"`` (the
    tutor's own budget ran out: the verdict stands), ``"failed"`` or
    ``"cancelled"``.  Its codes have been recorded into the verdict's attempt
    and ``newly_unlocked`` are the hints they opened.
``PerformanceFinished(drill, result, record)``
    the second phase of the same check: ``result`` is the verdict's result
    with the timed launches, torch's SDPA and the roofline filled in, and
    ``result.performance.status`` one of ``"done"``, ``"failed"`` (the
    verdict stands; ``reason`` says why) or ``"cancelled"`` (a newer save
    arrived while it was timed: a ``CheckStarted`` for the newer content
    follows).  A completed phase's speed-up has been recorded into the
    verdict's attempt (``record``).
``EngineWarning(message)``
    something a student should read once (progress file moved aside, not writable).
``EngineError(message)``
    a check could not be run at all (the worker cannot start); the engine keeps
    going and the next save tries again.

Threading contract:

* ``on_event`` is called from the engine's background threads (the check
  thread sends the check and device events, the watcher threads send
  ``WatcherStatus``), never from the caller's thread, one call at a time per
  thread.  It must return quickly and must not call back into the engine's
  ``stop``: post the event to your own loop (Textual's ``post_message``, a
  ``queue.Queue``).  An exception it raises is logged and ignored.
* ``start``, ``stop``, ``recheck``, ``set_focus``, ``notify_saved``, ``hints``
  and ``progress`` are safe from any thread; ``start`` and ``stop`` return
  within seconds (``stop`` kills a running check).
* One check runs at a time (its performance phase included).  Saves are
  never dropped: a save of the drill being checked (or timed) cancels that check (``CheckRunner.check(cancel=...)``) and
  queues the newest content; saves of other drills wait their turn, the
  focused drill first.  The file is read when its check starts, so the
  recorded result is always that of the newest content.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tutor.catalog import Drill, Hint, get_drill, kernel_drills
from tutor.harness.device import DeviceChoice
from tutor.harness.result import CheckResult, Device
from tutor.loop.runner import DEFAULT_TIMEOUT_S, CheckRunner, Phase, WorkerStartError
from tutor.loop.watcher import SaveDebouncer, WatcherMode
from tutor.state.hints import HintState, hint_states
from tutor.state.progress import DrillProgress, ProgressStore, attempt_content_id

if TYPE_CHECKING:
    from tutor.loop.watcher import DrillWatcher

log = logging.getLogger(__name__)

# How saves reach the engine: the watcher's observer (native file events or polling),
# or "off" (not watching: watchdog missing, the folder cannot be watched, watch=False).
WatchMode = WatcherMode | Literal["off"]
WATCH_OFF: WatchMode = "off"

# What asked for a check: a save of the file, or the student (the re-run key, opening a drill).
Trigger = Literal["save", "manual"]


@dataclass(frozen=True)
class WatcherStatus:
    mode: WatchMode
    reason: str


@dataclass(frozen=True)
class DeviceReady:
    device: Device


@dataclass(frozen=True)
class CheckStarted:
    drill: str
    file: Path
    trigger: Trigger = "save"


@dataclass(frozen=True)
class CheckStep:
    drill: str
    step: str


@dataclass(frozen=True)
class CheckCancelled:
    drill: str
    file: Path


@dataclass(frozen=True)
class CheckFinished:
    drill: str
    result: CheckResult
    newly_unlocked: list[Hint]
    record: DrillProgress
    counted: bool = True  # False: the same content as the last attempt, or the drill as shipped
    not_counted: str | None = None  # why it was not counted, in words


@dataclass(frozen=True)
class DiagnosisFinished:
    drill: str
    result: CheckResult
    newly_unlocked: list[Hint]
    record: DrillProgress


@dataclass(frozen=True)
class PerformanceFinished:
    drill: str
    result: CheckResult
    record: DrillProgress


@dataclass(frozen=True)
class EngineWarning:
    message: str


@dataclass(frozen=True)
class EngineError:
    message: str


Event = (WatcherStatus | DeviceReady | CheckStarted | CheckStep | CheckCancelled | CheckFinished | DiagnosisFinished
         | PerformanceFinished | EngineWarning | EngineError)


@dataclass
class _Request:
    file: Path
    trigger: Trigger
    since: float


@dataclass(frozen=True)
class _CheckTask:
    drill: str
    request: _Request
    cancel: threading.Event


@dataclass(frozen=True)
class _WarmUpTask:
    """Start a worker and wait until it is warm (``wait_warm``)."""


@dataclass
class _Running:
    drill: str
    file: Path
    cancel: threading.Event


class TutorEngine:
    """Watches ``<workspace>/drills``, checks every save of a kernel drill in a
    worker process, records the result and unlocks hints.  See the module
    docstring for the events and the threading contract."""

    def __init__(
        self,
        workspace: Path,
        *,
        device: DeviceChoice = "auto",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        on_event: Callable[[Event], None] | None = None,
        force_polling: bool = False,
        watch: bool = True,
        warm: bool = True,
        timing: bool = True,
        seed: int | None = None,
    ):
        self.workspace = Path(workspace).resolve()
        self.drills_dir = self.workspace / "drills"
        self.device_choice: DeviceChoice = device  # what the user asked for; self.device: what was found
        self.timeout_s = timeout_s
        self.force_polling = force_polling
        self.watch = watch
        self.warm = warm
        self.timing = timing
        self.seed = seed
        self.progress = ProgressStore(self.workspace)
        self.device: Device | None = None
        self.watcher_mode: WatchMode | None = None
        self.watcher_reason = ""
        self._on_event = on_event or (lambda event: None)
        self._kernel_drills: dict[str, Drill] = {d.file: d for d in kernel_drills()}
        self._debouncer = SaveDebouncer(self.notify_saved_now)
        self._cond = threading.Condition()
        self._pending: dict[str, _Request] = {}
        self._running: _Running | None = None
        self._focus: str | None = None
        self._stopping = False
        self._warm_wanted = False
        self._warm_done = threading.Event()
        self._warnings_sent = 0
        self._runner: CheckRunner | None = None
        self._watcher: DrillWatcher | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker, the watcher and the check thread; returns at once."""
        if self._thread is not None:
            raise RuntimeError("the engine is already started")
        self._runner = CheckRunner(device=self.device_choice, timeout_s=self.timeout_s, warm=self.warm)
        self._debouncer.start()
        self._thread = threading.Thread(target=self._run, daemon=True, name="flashtutor-engine")
        self._thread.start()

    def stop(self) -> None:
        """Stop watching, abandon a running check and end every worker."""
        with self._cond:
            self._stopping = True
            if self._running is not None:
                self._running.cancel.set()
            self._cond.notify_all()
        self._debouncer.stop()
        if self._runner is not None:
            self._runner.close()  # ends a warm-up in progress (its worker is killed)
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._watcher is not None:  # after the join: the check thread starts it
            self._watcher.stop()
        if self._runner is not None:
            self._runner.close()  # a spare started by the last check's clean-up

    def __enter__(self) -> TutorEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- requests --------------------------------------------------------------------
    def recheck(self, drill_id: str) -> None:
        """Check the drill's workspace file now (the manual re-run key)."""
        drill = self._kernel_drill(drill_id)
        self._request(drill, self.drills_dir / drill.file, "manual")

    def notify_saved(self, path: Path, settled: bool = True) -> None:
        """Report a change to a drill file, as the watcher does: it is debounced
        like a watcher event.  For front ends or tools that watch on their own."""
        path = Path(path)
        if path.name in self._kernel_drills:
            self._debouncer.poke(self.drills_dir / path.name, settled)

    def notify_saved_now(self, path: Path) -> None:
        """Queue a check of a saved drill file, without debouncing."""
        drill = self._kernel_drills.get(Path(path).name)
        if drill is not None:
            self._request(drill, self.drills_dir / drill.file, "save")

    def set_focus(self, drill_id: str | None) -> None:
        """The drill on screen: its checks run before any other drill's."""
        focus = None if drill_id is None else get_drill(drill_id).id
        with self._cond:
            self._focus = focus

    def wait_warm(self, timeout_s: float = 120.0) -> Device | None:
        """Block until a warm worker is ready for the next check (benchmarks use
        this to time a save, not a worker's start-up).  None on timeout."""
        with self._cond:
            self._warm_done.clear()
            self._warm_wanted = True
            self._cond.notify_all()
        return self.device if self._warm_done.wait(timeout_s) else None

    def send_warnings(self) -> None:
        """Send the progress store's warnings not sent yet, as ``EngineWarning``s (for a
        front end that wrote to ``progress`` itself, as the app's quiz does)."""
        self._emit_warnings()

    # -- what front ends read --------------------------------------------------------
    def hints(self, drill_id: str) -> list[HintState]:
        drill = get_drill(drill_id)
        return hint_states(drill, self.progress.unlocked_hints(drill.id))

    @property
    def busy(self) -> bool:
        with self._cond:
            return self._running is not None or bool(self._pending)

    # -- internals -------------------------------------------------------------------
    def _kernel_drill(self, drill_id: str) -> Drill:
        drill = get_drill(drill_id)
        if not drill.is_kernel:
            raise ValueError(f"drill {drill.id} is a paper drill: it is answered in the quiz, not checked")
        return drill

    def _request(self, drill: Drill, file: Path, trigger: Trigger) -> None:
        with self._cond:
            if self._stopping:
                return
            request = self._pending.get(drill.id)
            if request is None:
                self._pending[drill.id] = _Request(file=file, trigger=trigger, since=time.monotonic())
            else:
                request.trigger = trigger if trigger == "manual" else request.trigger
            if self._running is not None and self._running.drill == drill.id:
                self._running.cancel.set()  # stale: the queued request checks the newest content
            self._cond.notify_all()

    def _emit(self, event: Event) -> None:
        try:
            self._on_event(event)
        except Exception:  # a front end's bug must not stop the checks (logged with its traceback)
            log.exception("flashtutor: the engine's event callback failed on %r", event)

    def _emit_warnings(self) -> None:
        warnings = self.progress.warnings
        for message in warnings[self._warnings_sent:]:
            self._emit(EngineWarning(message))
        self._warnings_sent = len(warnings)

    def _start_watcher(self) -> None:
        if not self.watch:
            self._set_watch_status(WATCH_OFF, "not watching: saves are checked when reported (re-run key)")
            return
        try:
            import watchdog  # noqa: F401 - only to say clearly when it is missing

            from tutor.loop.watcher import DrillWatcher
        except ImportError:
            self._set_watch_status(WATCH_OFF, "watchdog is not installed: saves are not watched; use the re-run key")
            return
        watcher = DrillWatcher(
            self.drills_dir,
            self._kernel_drills,
            self._debouncer.poke,
            on_status=self._set_watch_status,
            force_polling=self.force_polling,
        )
        try:
            watcher.start()
        except OSError as exc:
            self._set_watch_status(WATCH_OFF, f"cannot watch {self.drills_dir}: {exc}")
            return
        self._watcher = watcher

    def _set_watch_status(self, mode: WatchMode, reason: str) -> None:
        self.watcher_mode, self.watcher_reason = mode, reason
        self._emit(WatcherStatus(mode, reason))

    def _warm_up(self) -> None:
        assert self._runner is not None
        try:
            device = self._runner.warm_up()
        except WorkerStartError as exc:
            if not self._stopping:
                self._emit(EngineError(str(exc)))
            return
        finally:
            self._warm_done.set()
        self._device_known(device)

    def _device_known(self, device: Device | None) -> None:
        if device is not None and self.device is None:
            self.device = device
            self._emit(DeviceReady(device))

    def _next(self) -> _CheckTask | _WarmUpTask | None:
        """The next thing to do: a check, a warm-up, or None when stopping."""
        with self._cond:
            while not self._stopping and not self._pending and not self._warm_wanted:
                self._cond.wait()
            if self._stopping:
                return None
            if not self._pending:
                self._warm_wanted = False
                return _WarmUpTask()
            drill_id = self._focus if self._focus in self._pending else min(
                self._pending, key=lambda key: self._pending[key].since)
            request = self._pending.pop(drill_id)
            cancel = threading.Event()
            self._running = _Running(drill=drill_id, file=request.file, cancel=cancel)
            return _CheckTask(drill_id, request, cancel)

    def _run(self) -> None:
        self._emit_warnings()
        self._start_watcher()
        if self.warm:
            self._warm_up()
        while True:
            task = self._next()
            if task is None:
                return
            if isinstance(task, _WarmUpTask):
                self._warm_up()
                continue
            drill_id = task.drill
            try:
                self._check(drill_id, task.request, task.cancel)
            except Exception as exc:  # a tutor bug: say it (logged with its traceback), keep going
                log.exception("flashtutor: checking %s failed", drill_id)
                self._emit(EngineError(f"checking {drill_id} failed inside the tutor: {exc!r}"))
            finally:
                with self._cond:
                    self._running = None

    def _check(self, drill_id: str, request: _Request, cancel: threading.Event) -> None:
        assert self._runner is not None
        drill = get_drill(drill_id)
        self._emit(CheckStarted(drill_id, request.file, request.trigger))
        sent: dict[str, CheckResult] = {}  # the phases already published, by name

        def on_phase(phase: Phase, partial: CheckResult) -> None:
            sent[phase] = partial
            if phase == "verdict":
                self._verdict(drill, request, partial)
            else:
                self._diagnosis(drill, partial)

        try:
            result = self._runner.check(drill_id, request.file, timing=self.timing, seed=self.seed, cancel=cancel,
                                        on_phase=on_phase, on_step=lambda step: self._emit(CheckStep(drill_id, step)))
        except WorkerStartError as exc:
            if not self._stopping:
                self._emit(EngineError(str(exc)))
            return
        if "verdict" not in sent:  # no later phase: this result is the verdict (and its diagnosis)
            self._verdict(drill, request, result)
            return
        if "diagnosis" not in sent and sent["verdict"].diagnosis_phase.status == "pending":
            self._diagnosis(drill, result)
        if sent["verdict"].performance.status != "pending":
            return
        record = self.progress.drill(drill_id)
        if result.performance.status == "done":
            record = self.progress.record_performance(result, attempt_content_id(sent["verdict"]))
        if not self._stopping:
            self._emit(PerformanceFinished(drill_id, result, record))

    def _diagnosis(self, drill: Drill, result: CheckResult) -> None:
        """Record and publish a failing check's diagnosis: its codes go into the
        verdict's attempt and open their hints."""
        if result.diagnosis_phase.status == "cancelled":
            return  # a CheckStarted for the newer content follows
        record = self.progress.record_diagnosis(result, drill, attempt_content_id(result))
        self._emit_warnings()
        if not self._stopping:
            self._emit(DiagnosisFinished(drill.id, result, record.unlocked_hints(drill), record.progress))

    def _verdict(self, drill: Drill, request: _Request, result: CheckResult) -> None:
        """Record and publish a verdict (the first phase of a check), as an attempt of
        the content the worker checked (:func:`tutor.state.progress.attempt_content_id`)."""
        drill_id = drill.id
        self._device_known(result.device)
        if result.error is not None and result.error.kind == "cancelled":
            if not self._stopping:
                self._emit(CheckCancelled(drill_id, request.file))
            return
        if result.error is not None and result.error.kind == "missing-file":
            # a deleted file is not an attempt: report it, record nothing
            self._emit(CheckFinished(drill_id, result, [], self.progress.drill(drill_id)))
            return
        record = self.progress.record_check(result, drill, attempt_content_id(result))
        self._emit_warnings()
        self._emit(CheckFinished(drill_id, result, record.unlocked_hints(drill), record.progress,
                                 record.counted, record.not_counted))
