"""One rule for status, the solution gate and the list (tutor.state.progress): the status
is the current file's state; a pass once recorded is kept (``solved_before``).
After a reset of a solved drill the list used to show it failing with no word of
the pass, and the app's `s` said "You have not passed 01 yet"."""

from __future__ import annotations

from helpers_app import make_workspace, offline_app, recorded_result, screen_text, settle

from tutor.app.screens.confirm import ConfirmScreen
from tutor.app.screens.text_page import TextPage
from tutor.catalog import all_drills, get_drill, pristine_path, solution_path
from tutor.cli import main
from tutor.pristine import blob_id
from tutor.state.progress import FAILING, ProgressStore, status_words

DRILL = get_drill("01")


def solved_then_reset(tmp_path, monkeypatch):
    workspace = make_workspace(tmp_path)
    file = workspace / "drills" / DRILL.file
    file.write_bytes(solution_path(DRILL).read_bytes())
    store = ProgressStore(workspace)
    assert store.record_check(recorded_result("01_passing", workspace), DRILL, blob_id(file.read_bytes())).counted
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    assert main(["reset", "01"]) == 0
    assert file.read_bytes() == pristine_path(DRILL).read_bytes()
    # the tutor checks the reset file: the shipped drill fails (no new attempt)
    again = store.record_check(recorded_result("01_failing", workspace), DRILL, blob_id(file.read_bytes()))
    assert not again.counted
    return workspace, store


def test_the_list_shows_the_current_state_and_the_kept_pass(tmp_path, monkeypatch, capsys):
    workspace, store = solved_then_reset(tmp_path, monkeypatch)
    progress = store.drill("01")
    assert progress.status == FAILING and progress.solved_before and progress.attempts == 1
    assert status_words(progress) == "failing, solved before"
    capsys.readouterr()
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("[!] 01"))
    assert "failing, solved before" in line and line.split()[-2] == "1"
    assert f"1/{len(all_drills())} done" in out


async def test_the_app_list_and_the_solution_gate_keep_the_pass(tmp_path, monkeypatch):
    workspace, _ = solved_then_reset(tmp_path, monkeypatch)
    app = offline_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        text = screen_text(app)
        assert "✘ failing · solved before" in text and f"1/{len(all_drills())} drills passed" in text
        await pilot.press("enter", "s")
        await settle(pilot)  # the solution is read in a worker
        assert not isinstance(app.screen, ConfirmScreen)
        assert isinstance(app.screen, TextPage) and app.screen.id == "solution"
