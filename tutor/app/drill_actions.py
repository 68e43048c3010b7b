"""The keys that act on the drill on screen: re-run its check, read its hints,
open it in the student's editor, reset it to the pristine drill, show the
solution.  :class:`DrillActions` is the app's base class holding them (the
screens' bindings name them as ``app.edit``, ``app.reset``, ...); the file work
itself is in plain functions that return what to tell the student.

The editor is ``--edit-cmd`` (``flashtutor launch --edit-cmd 'code -g {file}:{line}'``),
then ``$VISUAL``, then ``$EDITOR``, then ``vi`` where it is installed
(:func:`tutor.links.chosen_editor`); :func:`tutor.links.editor_command` puts
the file and the line where the editor takes them.  A terminal editor needs the
terminal: the app suspends while it runs and redraws when it exits.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, SuspendNotSupported
from textual.notifications import SeverityLevel

from tutor import links
from tutor.app.known_progress import KnownProgress
from tutor.app.screens.confirm import ConfirmScreen
from tutor.app.screens.drill_list import DrillListScreen
from tutor.app.screens.drill_view import DrillScreen
from tutor.app.screens.hints import HintsScreen
from tutor.app.screens.text_page import TextPage, solution_markdown
from tutor.app.widgets.result_view import display_path
from tutor.catalog import Drill, kernel_drills, solution_path
from tutor.harness.result import CheckResult
from tutor.loop.engine import TutorEngine
from tutor.state.hints import hint_states
from tutor.state.workspace import WorkspaceError, reset_drill


@dataclass(frozen=True)
class Notice:
    """A notification for the student (``App.notify``'s arguments)."""

    message: str
    title: str = "flashtutor"
    severity: SeverityLevel = "information"
    timeout: float = 6


def edit_file(app: App[Any], path: Path, line: int | None = None, edit_cmd: str | None = None,
              env: dict[str, str] | None = None) -> Notice | None:
    """Run the editor on ``path`` (at ``line`` where it takes one) and wait for it.
    Returns what went wrong, or None."""
    editor = links.chosen_editor(edit_cmd, env) or shutil.which("vi")
    if not editor:
        return Notice(f"Set $EDITOR (or start with --edit-cmd) to edit from here, or open {path} in any editor: "
                      "saves are watched.", severity="warning")
    argv = links.editor_command(editor, path, line)
    failure: OSError | None = None
    try:
        with app.suspend():
            try:  # inside: an error here must not skip the app's resume
                subprocess.call(argv)
            except OSError as exc:  # the editor's binary is missing or not executable
                failure = exc
    except SuspendNotSupported:
        return Notice(f"This terminal cannot hand over to an editor: edit {path} in another window "
                      "(saves are watched).", severity="warning")
    if failure is not None:
        return Notice(f"Could not run {editor}: {failure}. Edit {path} in another window: saves are watched.",
                      severity="warning")
    return None


def error_line(result: CheckResult | None, path: Path) -> int | None:
    """The line of ``path`` the newest check's error points at (None: no error there)."""
    error = None if result is None else result.error
    if error is None or not error.file or not error.line:
        return None
    return error.line if Path(error.file).resolve() == path.resolve() else None


def reset_with_backup(drill: Drill, workspace: Path) -> Notice:
    """Back up the student's version of the drill and restore the pristine one
    (file copies and writes: call it off the UI thread).  What happened, in words."""
    try:
        report = reset_drill(drill, workspace)
    except WorkspaceError as exc:
        return Notice(str(exc), title="reset failed", severity="error", timeout=15)
    if not report.changed:
        return Notice(f"drills/{drill.file} is already the pristine drill: nothing to reset.", title="reset")
    kept = (f"Your version is kept in\n{display_path(str(report.backup), workspace)}"
            if report.backup else "There was no version of yours to keep.")
    return Notice(f"Restored drills/{drill.file} from {report.source}.\n{kept}", title="reset", timeout=15)


def solution_page(drill: Drill) -> TextPage | Notice:
    """The drill's solution as a page, or why it cannot be read."""
    path = solution_path(drill)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return Notice(f"cannot read {path}: {exc.strerror or exc}", severity="error")
    return TextPage(f"solution: {drill.id} {drill.title}", solution_markdown(path, text), page_id="solution")


class DrillActions(App[int]):
    """The actions on the drill on screen; :class:`~tutor.app.app.FlashTutorApp` sets what they read."""

    engine: TutorEngine
    workspace: Path
    live: bool  # False: no engine running (nothing is checked)
    known: KnownProgress  # the progress drawn (never read from the file on the UI thread)
    latest: dict[str, CheckResult]  # drill id -> newest result this session
    edit_cmd: str | None  # `launch --edit-cmd`; None: $VISUAL, then $EDITOR

    def say(self, message: str, *, title: str = "flashtutor", severity: SeverityLevel = "information",
            timeout: float = 6) -> None:
        """A notification; the text is shown as is (paths and code are not markup)."""
        self.notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def notice(self, notice: Notice) -> None:
        self.say(notice.message, title=notice.title, severity=notice.severity, timeout=notice.timeout)

    def _current_drill(self) -> Drill | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, DrillScreen):
                return screen.drill
            if isinstance(screen, DrillListScreen):
                return screen.selected_drill()
        return None

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
        progress = self.known.drill(drill.id)  # one record: the attempts and the unlocks agree
        self.push_screen(HintsScreen(drill, hint_states(drill, progress.unlocked_hints), progress.attempts))

    def action_edit(self) -> None:
        drill = self._kernel_drill_or_say()
        if drill is None:
            return
        path = self.workspace / "drills" / drill.file
        problem = edit_file(self, path, error_line(self.latest.get(drill.id), path), self.edit_cmd)
        if problem is not None:
            self.notice(problem)

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
        self.call_from_thread(self.notice, reset_with_backup(drill, self.workspace))

    def action_solution(self) -> None:
        drill = self._current_drill()
        if drill is None:
            return
        if self.known.drill(drill.id).solved_before:  # passed once stays passed for the gate
            self._show_solution(drill)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._show_solution(drill)

        self.push_screen(ConfirmScreen(f"You have not passed {drill.id} yet. Show the solution anyway?",
                                       yes="Show it", no="Not yet"), answered)

    @work(thread=True, group="solution", exit_on_error=False, name="reading the solution")
    def _show_solution(self, drill: Drill) -> None:
        """Off the UI thread: the solution is read from disk."""
        page = solution_page(drill)
        if isinstance(page, Notice):
            self.call_from_thread(self.notice, page)
        else:
            self.call_from_thread(self.push_screen, page)
