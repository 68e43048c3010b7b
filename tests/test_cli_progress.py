"""`flashtutor check` on any file but the workspace's own drill records nothing, and
`flashtutor list` shows the summary the app's list shows."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers_app import offline_app, recorded_result, settle
from helpers_harness import REPO, run_cli

from tutor.app.screens.drill_list import progress_text
from tutor.catalog import get_drill
from tutor.cli import main
from tutor.quiz import QuizSession, build_questions, record_drill_status
from tutor.state.progress import ProgressStore, done_count, drill_summaries, status_words
from tutor.state.workspace import init_workspace


def _workspace(tmp_path: Path) -> Path:
    return init_workspace(tmp_path / "ws").workspace


def _progress(workspace: Path) -> dict:
    return json.loads((workspace / ".flashtutor" / "progress.json").read_text())["drills"]


# A check of the workspace's own drill, counted once per distinct content: tests/test_attempts.py.


def test_checking_another_file_records_nothing(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace)}
    solution = REPO / "solutions" / "02_online_rescale_solution.py"
    proc = run_cli("check", str(solution), "--no-timing", cwd=workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / ".flashtutor" / "progress.json").exists() or "02" not in _progress(workspace)


def _listed(capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, tuple[str, int]], str]:
    """`flashtutor list` run in process: drill id -> (status words, attempts), and its tally line."""
    capsys.readouterr()
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {}
    for line in out:
        match = re.match(r"\[.\] (\d\d)\s+.{40} (.{23}) +(\d+)  drills/", line)
        if match:
            rows[match[1]] = (match[2].strip(), int(match[3]))
    return rows, next(line for line in out if " done · " in line)


async def test_list_and_the_apps_list_agree_on_every_drill_and_the_tally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`list` re-derived the summary the app shows, and its "done" could differ: a drill
    whose status is passed without a recorded first pass (a file from an older tutor)
    was done in the app and not in `list`."""
    workspace = _workspace(tmp_path)
    store = ProgressStore(workspace)
    store.record_check(recorded_result("01_passing", workspace), get_drill("01"), "solved")  # solved
    store.record_check(recorded_result("01_failing", workspace), get_drill("01"), "broken")  # then broken again
    store.record_check(recorded_result("02_failing", workspace), get_drill("02"), "tried")  # failing
    questions = build_questions()
    session = QuizSession(questions, store)
    session.answer(str(questions[0].answer))
    record_drill_status(store, session, "03")  # the paper drill: in progress, one answer
    path = workspace / ".flashtutor" / "progress.json"
    state = json.loads(path.read_text())
    state["drills"]["05"] = {"status": "passed", "attempts": 3, "first_passed_at": None}  # an older tutor's record
    path.write_text(json.dumps(state))
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))

    listed, tally = _listed(capsys)
    app = offline_app(workspace)
    async with app.run_test() as pilot:
        await settle(pilot)  # the app reads the progress file in a worker
        rows = app.known.rows()  # what the app's list shows
    assert {row.drill.id: (status_words(row), row.attempts) for row in rows} == listed
    assert listed["01"] == ("failing, solved before", 2) and listed["02"] == ("failing", 1)
    assert listed["03"] == ("in-progress", 1) and listed["04"] == ("not-started", 0)
    assert listed["05"] == ("passed", 3)
    done = done_count(rows)
    assert done == 2 and tally.startswith(f"{done}/{len(rows)} done")
    assert f"{done}/{len(rows)} drills passed" in progress_text(rows).plain


def test_a_passed_drill_with_an_open_finding_is_listed_so_not_as_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23: TODO 2 done, TODO 1 open: PASSED with a finding was listed as "failing"."""
    workspace = _workspace(tmp_path)
    ProgressStore(workspace).record_check(recorded_result("01_todo2_only", workspace), get_drill("01"), "mine")
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    listed, _ = _listed(capsys)
    assert listed["01"] == ("passed, finding open", 1)
    from tutor.app.screens.drill_list import row_cells

    (row,) = drill_summaries(ProgressStore(workspace), [get_drill("01")])
    assert row_cells(row)[0].plain == "~ passed, finding open"


@pytest.mark.parametrize("command", [["list"], ["hint", "01"]])
def test_a_corrupt_progress_file_is_said_once_naming_the_kept_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """Issue 23: `list` and `hint` moved a corrupt progress file aside and said nothing."""
    workspace = _workspace(tmp_path)
    (workspace / ".flashtutor").mkdir(exist_ok=True)
    (workspace / ".flashtutor" / "progress.json").write_text("{ not json")
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    kept = list((workspace / ".flashtutor").glob("progress.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{ not json"
    assert err.count("is corrupt") == 1 and str(kept[0]) in err
    assert main(command) == 0
    assert "corrupt" not in capsys.readouterr().err  # said once: the next command finds a good file


async def test_the_app_shows_a_corrupt_progress_file_it_found(tmp_path: Path) -> None:
    from helpers_app import screen_text, wait_for

    from tutor.app.app import FlashTutorApp
    from tutor.loop.engine import TutorEngine

    workspace = _workspace(tmp_path)
    (workspace / ".flashtutor").mkdir(exist_ok=True)
    (workspace / ".flashtutor" / "progress.json").write_text("{ not json")
    relay: list[FlashTutorApp] = []  # as FlashTutorApp.with_engine wires it, without a watcher or a worker
    engine = TutorEngine(workspace, device="cpu", watch=False, warm=False,
                         on_event=lambda event: relay[0].engine_event(event))
    app = FlashTutorApp(engine, live=True, animate=False)
    relay.append(app)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: "progress.json.corrupt-" in screen_text(app), "the corrupt-file warning")
