"""The app's `e` key runs the student's editor: `launch --edit-cmd CMD` (with
{file}/{line}), else $VISUAL, else $EDITOR, at the line of the drill's newest
error where the editor takes a line."""

from __future__ import annotations

import contextlib

import pytest
from helpers_app import make_workspace, offline_app, record, recorded_result

from tutor.app import drill_actions
from tutor.cli import main


@pytest.fixture
def editor_calls(monkeypatch):
    """The argv of every editor the app runs (instead of running it)."""
    calls: list[list[str]] = []
    monkeypatch.setattr(drill_actions.subprocess, "call", lambda argv: calls.append(list(argv)) or 0)
    monkeypatch.delenv("VISUAL", raising=False)
    return calls


async def _press_e(app, error: bool) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        app.suspend = contextlib.nullcontext  # a terminal that can hand over (the test driver cannot)
        await pilot.press("enter")
        if error:
            app.engine_event(record(app.engine, "01_syntax_error"))
            await pilot.pause()
        await pilot.press("e")
        await pilot.pause()


async def test_edit_cmd_gets_the_file_and_the_error_line(tmp_path, monkeypatch, editor_calls):
    monkeypatch.setenv("EDITOR", "vim")  # --edit-cmd comes first
    workspace = make_workspace(tmp_path)
    await _press_e(offline_app(workspace, edit_cmd="myed --line {line} {file}"), error=True)
    line = recorded_result("01_syntax_error", workspace).error.line
    assert line and editor_calls == [["myed", "--line", str(line), str(workspace / "drills" / "01_causal_mask.py")]]


async def test_without_edit_cmd_visual_then_editor_with_the_line_where_it_takes_one(tmp_path, monkeypatch,
                                                                                  editor_calls):
    workspace = make_workspace(tmp_path)
    path = str(workspace / "drills" / "01_causal_mask.py")
    line = recorded_result("01_syntax_error", workspace).error.line
    monkeypatch.setenv("EDITOR", "vim")
    await _press_e(offline_app(workspace), error=True)
    await _press_e(offline_app(workspace), error=False)  # no error: just the file
    monkeypatch.setenv("VISUAL", "code --wait")
    await _press_e(offline_app(workspace), error=True)
    assert editor_calls == [["vim", f"+{line}", path], ["vim", path], ["code", "--wait", "-g", f"{path}:{line}"]]


def test_launch_hands_edit_cmd_to_the_app(tmp_path, monkeypatch):
    from tutor.app.app import FlashTutorApp
    from tutor.cli import launch

    started: list[FlashTutorApp] = []
    monkeypatch.setattr(launch, "missing_tty", lambda: None)  # as if in a terminal
    monkeypatch.setattr(FlashTutorApp, "run", lambda self, **options: started.append(self))
    workspace = make_workspace(tmp_path)
    assert main(["launch", "--workspace", str(workspace), "--edit-cmd", "myed +{line} {file}"]) == 0
    assert [app.edit_cmd for app in started] == ["myed +{line} {file}"]
    assert main(["launch", "--workspace", str(workspace)]) == 0
    assert started[-1].edit_cmd is None  # $VISUAL / $EDITOR then
