"""The app never reads .flashtutor/progress.json on its UI thread: it loads the
file in a thread worker and otherwise draws from the records the engine's
events carry (tutor/app/known_progress.py)."""

from __future__ import annotations

import threading

from helpers_app import make_workspace, offline_app, recorded_result, screen_text, settle

from tutor.app.known_progress import KnownProgress
from tutor.app.screens.confirm import ConfirmScreen
from tutor.app.screens.drill_list import DrillListScreen
from tutor.app.screens.hints import HintsScreen
from tutor.app.screens.text_page import TextPage
from tutor.catalog import get_drill
from tutor.loop.engine import CheckFinished
from tutor.state.progress import FAILING, PASSED, DrillProgress, ProgressStore


def _finished(store: ProgressStore, name: str) -> CheckFinished:
    """Record a fixture result through ``store`` (not the app's) and the event the engine would send."""
    result = recorded_result(name, store.workspace)
    drill = get_drill(result.drill)
    rec = store.record_check(result, drill)
    return CheckFinished(result.drill, result, rec.unlocked_hints(drill), rec.progress)


def test_a_load_read_before_a_newer_record_keeps_the_record():
    known = KnownProgress()
    mark = known.load_mark()  # a load starts ...
    newer = DrillProgress(status=PASSED, attempts=2, first_passed_at=1.0)
    known.take_record("01", newer)  # ... a check's record arrives ...
    stale = {"01": DrillProgress(status=FAILING, attempts=1), "02": DrillProgress(status=FAILING, attempts=4)}
    changed = known.take_load(stale, {}, mark)  # ... and the load, read before it, lands
    assert known.drill("01") == newer and known.drill("02").attempts == 4
    assert changed == {"02"}
    # a load started after the record takes what the file says
    later = {"01": DrillProgress(status=FAILING, attempts=3, first_passed_at=1.0)}
    assert known.take_load(later, {}, known.load_mark()) == {"01", "02"}
    assert known.drill("01").attempts == 3 and known.drill("02") == DrillProgress()


async def test_the_ui_thread_never_reads_the_progress_file(tmp_path, monkeypatch):
    workspace = make_workspace(tmp_path)
    other = ProgressStore(workspace)  # another front end on the workspace (and the test's recorder)
    other.record_check(recorded_result("02_failing", workspace), get_drill("02"))  # progress before the app starts
    app = offline_app(workspace)
    store = app.engine.progress
    reads: list[str] = []
    real_read = store._read

    def watched_read():
        reads.append(threading.current_thread().name)
        return real_read()

    monkeypatch.setattr(store, "_read", watched_read)
    ui_thread = threading.current_thread().name  # run_test drives the app on this thread
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)  # the first load, in a worker
        assert "✘ failing      02" in screen_text(app)  # what was on file when the app started
        await pilot.press("enter")  # drill 01: its history, without a read
        app.engine_event(_finished(other, "01_failing"))
        app.engine_event(_finished(other, "01_passing"))
        await pilot.pause()
        await pilot.press("h")  # the hints: from the last event's record
        assert isinstance(app.screen, HintsScreen)
        await pilot.press("escape", "s")  # the solution gate: passed, so no question
        await settle(pilot)  # the solution is read in a worker
        assert isinstance(app.screen, TextPage) and not isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape", "escape")  # back to the list: reloaded in a worker
        await settle(pilot)
        assert isinstance(app.screen, DrillListScreen)
        assert "✔ passed       01" in screen_text(app)
    assert reads, "the app never loaded the progress file"
    assert ui_thread not in reads, f"progress.json was read on the UI thread ({reads})"
