"""``flashtutor watch [DRILL]``: the save-to-recheck loop in a plain terminal.

It drives the same :class:`~tutor.loop.engine.TutorEngine` as the app: every save
of the drill is checked and the report printed: the verdict at once, the
performance phase (timings, roofline) below it when it arrives; a spinner runs
while a check does and while its performance is timed; new hints are printed
as they unlock; once the drill is solved it asks before moving on to the next
one.  In a terminal each key acts at once (the terminal is put in cbreak mode,
and restored on exit); when stdin is not a terminal it is read a line at a
time (Enter re-runs), so it can be scripted.
"""

from __future__ import annotations

import argparse
import os
import queue
import select
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.status import Status

from tutor.catalog import Drill, Hint, UnknownDrill, get_drill, kernel_drills, next_drill
from tutor.cli import EXIT_NOT_RUN, EXIT_OK, EXIT_USAGE
from tutor.cli.check import add_runner_options
from tutor.harness.result import CheckResult
from tutor.links import file_link
from tutor.loop.engine import (
    CheckCancelled,
    CheckFinished,
    CheckStarted,
    CheckStep,
    DeviceReady,
    DiagnosisFinished,
    EngineError,
    EngineWarning,
    PerformanceFinished,
    TutorEngine,
    WatcherStatus,
)
from tutor.paths import NoWorkspace, require_workspace
from tutor.report import diagnosis_lines, performance_lines, step_words, verdict, verdict_lines
from tutor.state.hints import hint_states
from tutor.state.progress import ProgressStore, not_saved_note

KEYS = "Enter or r: re-run · h: hints · n: next drill · q: quit"

# watch's colour of a verdict, from the result's one outcome
OUTCOME_STYLES = {"solved": "green", "passed-with-finding": "yellow", "failed": "red", "not-run": "red"}


@dataclass(frozen=True)
class _Line:
    """A line the student typed (None: stdin closed)."""

    text: str | None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    watch = subparsers.add_parser("watch", help="re-check a drill on every save (plain terminal)",
                                  description="Watch the drills and re-check the current one on every save.")
    watch.add_argument("drill", nargs="?", help="drill id (01) or name; default: the first one not yet done")
    watch.add_argument("--poll", action="store_true", help="poll for changes instead of native file events")
    watch.add_argument("--no-timing", action="store_true", help="skip the timed launches")
    add_runner_options(watch)
    watch.set_defaults(func=run_watch_command)


def first_unsolved(progress: ProgressStore) -> Drill:
    drills = kernel_drills()
    return next((d for d in drills if not progress.drill(d.id).solved_before), drills[0])


def _read_stdin(events: queue.Queue[object]) -> None:
    """Not a terminal: one command per line."""
    for line in sys.stdin:
        events.put(_Line(line.strip().lower()))
    events.put(_Line(None))


ESCAPE, END_OF_TEXT = "\x1b", "\x04"


def _read_keys(fd: int, events: queue.Queue[object]) -> None:
    """A terminal in cbreak mode: one command per key, no Enter needed (Enter alone
    re-runs).  An escape sequence (an arrow key) is read whole and ignored; Ctrl-D
    closes input as end of file does."""
    while True:
        try:
            data = os.read(fd, 1)
        except OSError:
            data = b""
        key = data.decode("utf-8", errors="replace")
        if not data or key == END_OF_TEXT:
            events.put(_Line(None))
            return
        if key == ESCAPE:
            while select.select([fd], [], [], 0.05)[0] and os.read(fd, 16):
                pass
        elif key in ("\r", "\n"):
            events.put(_Line(""))
        elif key.isprintable() and not key.isspace():
            events.put(_Line(key.lower()))


@contextmanager
def single_keys(stream: Any) -> Iterator[bool]:
    """While inside, a terminal ``stream`` delivers each key as it is typed (cbreak:
    no line editing, no echo; Ctrl-C still interrupts).  Its settings are restored
    on the way out, however it is left.  Yields False (and changes nothing) when
    ``stream`` is not a terminal."""
    try:
        fd = stream.fileno()
        is_terminal = os.isatty(fd)
    except (AttributeError, OSError, ValueError):
        is_terminal = False
    if not is_terminal:
        yield False
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class WatchSession:
    """One ``flashtutor watch`` run: engine events and typed lines, one queue."""

    def __init__(self, engine: TutorEngine, drill: Drill, console: Console, events: queue.Queue[object]):
        """``console`` prints to stdout: the drill file and an error's ``file:line`` are
        terminal hyperlinks where stdout's terminal renders them (:mod:`tutor.links`),
        as in ``flashtutor check``."""
        self.engine = engine
        self.drill = drill
        self.console = console
        self.events = events
        self.spinner: Status | None = None
        self.asking_next: Drill | None = None

    def say(self, text: str, style: str | None = None) -> None:
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def drill_link(self, drill: Drill, text: str) -> str:
        """``text`` as a hyperlink to the drill's workspace file (plain where unsupported)."""
        return file_link(self.engine.drills_dir / drill.file, text=text, stream=sys.stdout)

    def focus(self, drill: Drill) -> None:
        self.drill = drill
        self.engine.set_focus(drill.id)
        where = self.drill_link(drill, f"drills/{drill.file}")
        self.say(f"\n== {drill.id} {drill.title} · {where} · save to re-check ==", style="bold")
        self.say(KEYS)
        self.engine.recheck(drill.id)

    def loop(self) -> int:
        self.focus(self.drill)
        while True:
            item = self.events.get()
            if isinstance(item, _Line):
                if item.text is None:
                    continue  # stdin closed: keep watching until Ctrl-C
                if not self.on_line(item.text):
                    return EXIT_OK
            else:
                self.on_event(item)

    # -- engine events -----------------------------------------------------------
    def on_event(self, event: object) -> None:
        if isinstance(event, WatcherStatus):
            self.say(f"watcher: {event.mode} ({event.reason})", style=None if event.mode == "native" else "yellow")
        elif isinstance(event, DeviceReady):
            self.say(f"device: {event.device.label}")
        elif isinstance(event, EngineWarning):
            self.say(f"warning: {event.message}", style="yellow")
        elif isinstance(event, EngineError):
            self.stop_spinner()
            self.say(f"error: {event.message}", style="red")
        elif isinstance(event, CheckStarted):
            self.stop_spinner()  # a "timing" spinner of the previous content gives way
            self.start_spinner(event.drill)
        elif isinstance(event, CheckStep):
            if self.spinner is not None and event.drill == self.drill.id:
                self.spinner.update(f"checking {event.drill}… {step_words(event.step)}")
        elif isinstance(event, CheckCancelled):
            pass  # the newer save's check follows at once
        elif isinstance(event, CheckFinished):
            self.stop_spinner()
            self.on_finished(event)
            self.spin_for_later_phase(event.result, event.drill)
        elif isinstance(event, DiagnosisFinished):
            if event.result.diagnosis_phase.status != "cancelled":  # else a newer check's spinner runs
                self.stop_spinner()
            self.on_diagnosis(event)
            self.spin_for_later_phase(event.result, event.drill)
        elif isinstance(event, PerformanceFinished):
            if event.result.performance.status != "cancelled":  # else a newer check's spinner runs
                self.stop_spinner()
            self.on_performance(event)

    def spin_for_later_phase(self, result: CheckResult, drill_id: str) -> None:
        """While the diagnosis or the timing of the drill on screen runs, say so."""
        if drill_id != self.drill.id:
            return
        if result.diagnosis_phase.status == "pending":
            self.start_spinner(drill_id, "diagnosing")
        elif result.performance.status == "pending":
            self.start_spinner(drill_id, "timing")

    def start_spinner(self, drill_id: str, doing: str = "checking") -> None:
        message = f"{doing} {drill_id}…"
        if not self.console.is_terminal:
            self.say(message)
            return
        if self.spinner is None:
            self.spinner = self.console.status(message)
            self.spinner.start()

    def stop_spinner(self) -> None:
        if self.spinner is not None:
            self.spinner.stop()
            self.spinner = None

    def on_finished(self, event: CheckFinished) -> None:
        drill = get_drill(event.drill)
        if drill.id != self.drill.id:
            self.say(f"{drill.id} checked too: {verdict(event.result)} (attempt {event.record.attempts})")
            return
        if self.console.is_terminal:
            self.console.clear()
        style = OUTCOME_STYLES[event.result.outcome]
        title = f"{drill.id} {drill.title} ({self.drill_link(drill, drill.file)})"
        pending = event.result.diagnosis_phase.status == "pending"  # the spinner says so; its findings follow
        self.say("\n".join(verdict_lines(event.result, title=title, links=True, diagnosis=not pending)))
        if event.counted:
            self.say(f"attempt {event.record.attempts}", style=style)
        else:
            self.say(f"not a new attempt ({event.not_counted}); attempts: {event.record.attempts}", style=style)
        self.announce_hints(drill, event.newly_unlocked)
        if event.result.solved:
            self.offer_next(drill)
        elif event.result.diagnosis_phase.status != "pending":
            self.say(f"\n{KEYS}")

    def on_diagnosis(self, event: DiagnosisFinished) -> None:
        """The diagnosis of the failing check whose verdict is on screen: printed below it."""
        drill = get_drill(event.drill)
        if drill.id != self.drill.id or event.result.diagnosis_phase.status == "cancelled":
            return
        if event.result.error is not None:  # a crash, re-run at whole blocks: its message says more now
            self.say(f"diagnosis     : {event.result.error.message}")
        else:
            lines = diagnosis_lines(event.result)
            self.say("\n".join(lines[1:] if lines[:1] == [""] else lines))
        self.announce_hints(drill, event.newly_unlocked)
        self.say(f"\n{KEYS}")

    def announce_hints(self, drill: Drill, unlocked: list[Hint]) -> None:
        note = not_saved_note(self.engine.progress, "session") if unlocked else ""
        for hint in unlocked:
            number = drill.hints.index(hint) + 1
            heading = f"new hint unlocked - hint {number}: {hint.title}" + (f" ({note})" if note else "")
            self.say(f"\n{heading}\n{hint.text}", style="cyan")

    def on_performance(self, event: PerformanceFinished) -> None:
        """The second phase of the check whose verdict is on screen: printed below it."""
        if event.drill != self.drill.id or event.result.performance.status == "cancelled":
            return  # another drill's timing, or a newer save's check follows
        lines = performance_lines(event.result)
        if lines:
            self.say("\n" + "\n".join(lines), style="dim" if event.result.performance.status != "done" else None)

    def offer_next(self, drill: Drill) -> None:
        upcoming = next_drill(drill.id)
        if upcoming is None:
            self.say(f"\n{drill.id} is done, and it was the last drill. Well done!", style="green")
            return
        if not upcoming.is_kernel:
            self.say(f"\n{drill.id} is done. Next is {upcoming.id} {upcoming.title}, a paper drill: "
                     "run `flashtutor quiz`.", style="green")
            return
        self.asking_next = upcoming
        self.say(f"\n{drill.id} is done. Move on to {upcoming.id} {upcoming.title}? [y/n]", style="green")

    # -- typed lines -------------------------------------------------------------
    def on_line(self, text: str) -> bool:
        """Handle one typed line; False to quit."""
        if self.asking_next is not None and text in ("y", "yes", "n", "no"):
            upcoming, self.asking_next = self.asking_next, None
            if text.startswith("y"):
                self.focus(upcoming)
            else:
                self.say(f"staying on {self.drill.id}; `n` moves on later")
            return True
        if text in ("", "r"):
            self.engine.recheck(self.drill.id)
        elif text == "h":
            self.print_hints()
        elif text == "n":
            following = next_drill(self.drill.id, kind="kernel")
            if following is None:
                paper_left = next_drill(self.drill.id, kind="paper") is not None
                self.say("no kernel drill after this one" + ("; `flashtutor quiz` asks the paper drill"
                                                              if paper_left else ""))
            else:
                self.focus(following)
        elif text in ("q", "quit", "exit"):
            return False
        else:
            self.say(f"unknown key {text!r}; {KEYS}")
        return True

    def print_hints(self) -> None:
        states = hint_states(self.drill, self.engine.progress.unlocked_hints(self.drill.id))
        for state in states:
            if state.unlocked:
                self.say(f"\nhint {state.number}: {state.hint.title}\n{state.hint.text}", style="cyan")
            else:
                self.say(f"\nhint {state.number} (locked): {state.hint.title} - {state.unlock_rule}")


def run_watch_command(args: argparse.Namespace) -> int:
    try:
        workspace = require_workspace()
    except NoWorkspace as exc:
        print(f"flashtutor: {exc}", file=sys.stderr)
        return EXIT_NOT_RUN
    events: queue.Queue[object] = queue.Queue()
    engine = TutorEngine(workspace, device=args.device, timeout_s=args.timeout, on_event=events.put,
                         force_polling=args.poll, timing=not args.no_timing)
    try:
        drill = get_drill(args.drill) if args.drill else first_unsolved(engine.progress)
    except UnknownDrill as exc:
        print(f"flashtutor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not drill.is_kernel:
        print(f"flashtutor: {drill.id} is a paper drill: run `flashtutor quiz`", file=sys.stderr)
        return EXIT_NOT_RUN
    session = WatchSession(engine, drill, Console(highlight=False), events)
    with single_keys(sys.stdin) as keys:
        reader = (_read_keys, (sys.stdin.fileno(), events)) if keys else (_read_stdin, (events,))
        threading.Thread(target=reader[0], args=reader[1], daemon=True, name="flashtutor-stdin").start()
        engine.start()
        try:
            return session.loop()
        except KeyboardInterrupt:
            return EXIT_OK
        finally:
            session.stop_spinner()
            engine.stop()
