"""Engine events as Textual messages.

The engine calls back from its own threads; the app's callback only wraps the
event in one of these messages and posts it (``post_message`` is thread-safe),
so every widget update happens on the UI thread.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message

from tutor.loop import engine
from tutor.state.progress import DrillProgress


class EngineMessage(Message):
    """Carries one engine event; subclasses say which kind."""

    def __init__(self, event: engine.Event) -> None:
        super().__init__()
        self.event = event


class CheckBegan(EngineMessage):
    event: engine.CheckStarted


class CheckStepped(EngineMessage):
    """What a running check does now (``engine.CheckStep``)."""

    event: engine.CheckStep

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CheckStepped) and message.event.drill == self.event.drill


class CheckAbandoned(EngineMessage):
    event: engine.CheckCancelled


class CheckDone(EngineMessage):
    event: engine.CheckFinished

    def can_replace(self, message: Message) -> bool:
        """Collapse a burst: a result is dropped when a newer result of the same
        drill is already queued right behind it — unless it unlocked a hint,
        whose announcement must not be lost."""
        return (
            isinstance(message, CheckDone)
            and message.event.drill == self.event.drill
            and not self.event.newly_unlocked
        )


class DiagnosisDone(EngineMessage):
    """The diagnosis of a failing check whose verdict (CheckDone) came before."""

    event: engine.DiagnosisFinished


class PerformanceDone(EngineMessage):
    """The second phase of a check whose verdict (CheckDone) came before."""

    event: engine.PerformanceFinished


class WatcherChanged(EngineMessage):
    event: engine.WatcherStatus


class DeviceKnown(EngineMessage):
    event: engine.DeviceReady


class EngineNotice(EngineMessage):
    """A warning or an error the student should read; the engine keeps going."""

    event: engine.EngineWarning | engine.EngineError


_MESSAGE_FOR = {
    engine.CheckStarted: CheckBegan,
    engine.CheckStep: CheckStepped,
    engine.CheckCancelled: CheckAbandoned,
    engine.CheckFinished: CheckDone,
    engine.DiagnosisFinished: DiagnosisDone,
    engine.PerformanceFinished: PerformanceDone,
    engine.WatcherStatus: WatcherChanged,
    engine.DeviceReady: DeviceKnown,
    engine.EngineWarning: EngineNotice,
    engine.EngineError: EngineNotice,
}


def message_for(event: engine.Event) -> EngineMessage:
    """The message that carries ``event``."""
    return _MESSAGE_FOR[type(event)](event)


class ProgressLoaded(Message):
    """The progress file as a worker read it (``ProgressStore.all_drills`` and
    ``quiz_answers``), with :meth:`KnownProgress.load_mark` from when it started."""

    def __init__(self, drills: dict[str, DrillProgress], answers: dict[str, dict[str, Any]], mark: int) -> None:
        super().__init__()
        self.drills = drills
        self.answers = answers
        self.mark = mark
