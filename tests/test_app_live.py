"""The app on a real engine: real watcher on a tmp workspace, real worker
processes, Triton's CPU interpreter.  A save in the workspace is what drives it."""

from __future__ import annotations

import pytest
from helpers_app import drill01_variant, make_workspace, screen_text, wait_for

from tutor.app.app import FlashTutorApp
from tutor.app.screens.drill_view import DrillScreen
from tutor.catalog import get_drill, pristine_path, solution_path

pytestmark = pytest.mark.slow

SIZE = (120, 40)  # room for the notifications next to the view


def live_app(workspace) -> FlashTutorApp:
    # timing=False: the verdict, error and visit map are what these tests read; no stopwatch needed
    return FlashTutorApp.with_engine(workspace, device="cpu", timing=False, animate=False)


def verdict(app) -> str:
    screen = app.screen
    return screen.query_one("#verdict").render().plain if isinstance(screen, DrillScreen) else ""


async def test_saving_the_solution_turns_the_view_passed_and_announces_hints(tmp_path):
    workspace = make_workspace(tmp_path)
    drill_file = workspace / "drills" / "01_causal_mask.py"
    todo2_done = drill01_variant("todo2_done")
    app = live_app(workspace)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.press("enter")  # opening the drill checks it as it is
        await wait_for(pilot, lambda: "FAILED" in verdict(app), "the shipped drill FAILED")
        text = screen_text(app)
        assert "CPU · Triton interpreter" in text and "watch: native" in text
        drill_file.write_text(todo2_done)  # the student saves: correct, but every block still visited
        await wait_for(pilot, lambda: "PASSED · 1 finding open" in verdict(app), "PASSED with TODO 1 open")
        # its diagnosis (TODO 1 open) opens the loop-bound hint at once; the notification says so
        await wait_for(pilot, lambda: "01: hint" in screen_text(app) and "press h to read" in screen_text(app),
                       "the hint announcement")
        assert "visited      1.000 (32/32 in total)  ideal 0.625, 2 heads" in screen_text(app)
        drill_file.write_text(solution_path(get_drill("01")).read_text())
        await wait_for(pilot, lambda: verdict(app).endswith("PASSED"), "PASSED after saving the solution")
        await wait_for(pilot, lambda: "solved in 2 attempts" in screen_text(app), "the solved notification")
        text = screen_text(app)
        assert "visited      0.625 (20/32 in total)  ideal 0.625, 2 heads" in text
        assert "██ ·· ·· ··" in text  # the first query block skips every future block
    assert app.engine.progress.status("01") == "passed"


async def test_errors_are_shown_and_the_app_keeps_watching(tmp_path):
    workspace = make_workspace(tmp_path)
    drill_file = workspace / "drills" / "01_causal_mask.py"
    pristine = pristine_path(get_drill("01")).read_text()
    broken = drill01_variant("syntax_error")
    line = broken.splitlines().index("    hi = N_CTX +") + 1
    app = live_app(workspace)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: "FAILED" in verdict(app), "the first check")
        drill_file.write_text(broken)
        await wait_for(pilot, lambda: "COULD NOT RUN · syntax" in verdict(app), "the syntax error")
        # the verdict line and the error's panel are drawn by separate refreshes: wait for the panel
        await wait_for(pilot, lambda: f"drills/01_causal_mask.py:{line}" in screen_text(app)
                       and f"{line} │     hi = N_CTX +" in screen_text(app), "the error's file, line and source")
        drill_file.unlink()
        await wait_for(pilot, lambda: "missing-file" in verdict(app), "the deleted file reported")
        drill_file.write_text(pristine)
        await wait_for(pilot, lambda: "FAILED" in verdict(app), "a check after the file came back")
