"""Snapshots of every screen at 80x24 and 120x40 (pytest-textual-snapshot).

The views are fed results recorded once from real checks of the real kernels
(tests/fixtures/results/, made by generate.py there), never live timings; the
engine is never started, spinners are frozen, the workspace is shown as
~/flashtutor and notifications are cleared, so a snapshot changes only when
the app's drawing does.  Accept a deliberate change with
``pytest tests/test_app_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

import pytest
from helpers_app import make_workspace, offline_app, record, settle
from textual.widgets import Input

from tutor.loop.engine import DeviceReady, WatcherStatus

SIZES = [(80, 24), (120, 40)]


def _feed(app, *names: str) -> None:
    """Record the named results, as checks would, and hand the app their events."""
    app.engine_event(WatcherStatus("native", "inotify"))
    for name in names:
        event = record(app.engine, name)
        app.engine_event(DeviceReady(event.result.device))
        app.engine_event(event)


async def _settle(pilot) -> None:
    await settle(pilot)
    pilot.app.clear_notifications()
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


def _drill_view(*names: str):
    async def run_before(pilot) -> None:
        await pilot.press("enter")
        _feed(pilot.app, *names)
        await _settle(pilot)

    return run_before


async def _list(pilot) -> None:
    _feed(pilot.app, "01_failing", "01_passing", "02_failing")
    await pilot.press("j")
    await _settle(pilot)


async def _hints(pilot) -> None:
    await pilot.press("enter")
    _feed(pilot.app, "01_failing")
    await pilot.press("h")
    await _settle(pilot)


async def _quiz(pilot) -> None:
    from helpers_app import wait_for

    from tutor.app.screens.quiz import QuizScreen

    await pilot.press("m")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, QuizScreen), "the quiz screen")
    await pilot.press(*"4.2 MB", "enter")  # a wrong answer: the feedback shows the relative error
    await _settle(pilot)


VIEWS = {
    "list": _list,
    "drill_failing": _drill_view("01_failing"),
    "drill_passing": _drill_view("01_failing", "01_todo2_only", "01_passing"),
    "drill_error": _drill_view("01_failing", "01_syntax_error"),
    "hints": _hints,
    "quiz": _quiz,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(VIEWS))
def test_snapshot(view, size, snap_compare, tmp_path):
    app = offline_app(make_workspace(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=VIEWS[view])
