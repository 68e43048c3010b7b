"""Pilot tests of the app on an engine that is never started: the screens, the
keys and the message handling, fed with results recorded from real checks."""

from __future__ import annotations

from helpers_app import make_workspace, offline_app, record, recorded_result, screen_text, settle, wait_for
from textual import on

from tutor.app.app import FlashTutorApp
from tutor.app.messages import CheckDone
from tutor.app.screens.confirm import ConfirmScreen
from tutor.app.screens.drill_list import DrillListScreen, DrillTable
from tutor.app.screens.drill_view import DrillScreen
from tutor.app.screens.hints import HintsScreen
from tutor.app.screens.quiz import QuizScreen
from tutor.app.screens.text_page import TextPage
from tutor.catalog import all_drills, get_drill, pristine_path
from tutor.harness.result import Roofline, RooflineLaunch
from tutor.loop.engine import CheckFinished, CheckStarted, DeviceReady, WatcherStatus
from tutor.quiz import build_questions
from tutor.state.progress import DrillProgress

SIZE = (80, 24)


async def test_the_list_shows_every_drill_with_a_status_mark_and_filters(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        text = screen_text(app)
        for line in ("· not started  01  Causal masking", "· not started  02", "· not started  03",
                     "· not started  04"):
            assert line in text
        assert f"0/{len(all_drills())} drills passed" in text  # every drill, whatever their number
        table = app.screen.query_one(DrillTable)
        await pilot.press("j", "j")
        assert app.screen.selected_drill().id == "03"
        await pilot.press("k")
        assert app.screen.selected_drill().id == "02"
        await pilot.press("slash", *"causal", "enter")
        assert table.row_count == 1 and app.screen.selected_drill().id == "01"
        await pilot.press("escape")
        assert table.row_count == len(all_drills())


async def test_enter_opens_the_drill_and_a_result_shows_with_the_device(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        assert isinstance(app.screen, DrillScreen) and app.screen.drill.id == "01"
        assert "not checked yet" in screen_text(app)
        event = record(app.engine, "01_failing")
        app.engine_event(WatcherStatus("native", "inotify"))
        app.engine_event(event)
        await pilot.pause()
        text = screen_text(app)
        assert "✘  FAILED" in text and "> tolerance 0.02" in text
        assert "CPU · Triton interpreter" in text and "watch: native" in text and "~/flashtutor" in text
        assert "██ xx xx xx" in text  # row 0 of the map: every future block visited
        await pilot.press("escape")
        assert isinstance(app.screen, DrillListScreen)
        assert "✘ failing      01" in screen_text(app)


async def test_a_running_check_keeps_the_last_result_on_screen(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        app.engine_event(record(app.engine, "01_failing"))
        await pilot.pause()
        app.engine_event(CheckStarted("01", app.workspace / "drills" / "01_causal_mask.py"))
        await pilot.pause()
        text = screen_text(app)
        assert "checking drills/01_causal_mask.py" in text and "✘  FAILED" in text
        app.engine_event(record(app.engine, "01_passing"))
        await pilot.pause()
        text = screen_text(app)
        assert "checking" not in text and "✔  PASSED" in text


async def test_a_burst_of_results_collapses_to_the_newest(tmp_path):
    handled: list[CheckFinished] = []

    class CountingApp(FlashTutorApp):
        @on(CheckDone)
        def _count(self, message: CheckDone) -> None:
            handled.append(message.event)

    workspace = make_workspace(tmp_path)
    app = CountingApp(offline_app(workspace).engine, live=False, animate=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await pilot.pause()
        burst = [record(app.engine, "01_failing") for _ in range(9)] + [record(app.engine, "01_passing")]
        quiet = [CheckFinished(e.drill, e.result, [], e.record) for e in burst]  # no unlock to announce
        for event in quiet:
            app.engine_event(event)  # all queued before the UI runs again
        await pilot.pause()
        assert handled == [quiet[-1]]
        assert app.latest["01"] is quiet[-1].result
        assert "✔  PASSED" in screen_text(app)


async def test_a_check_that_could_not_run_shows_where_and_why(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        app.engine_event(record(app.engine, "01_syntax_error"))
        await pilot.pause()
        text = screen_text(app)
        result = recorded_result("01_syntax_error", app.workspace)
        assert "COULD NOT RUN · syntax" in text
        assert f"drills/01_causal_mask.py:{result.error.line}" in text
        assert "hi = N_CTX +" in text and "SyntaxError: invalid syntax" in text


async def test_hints_panel_shows_unlocked_hints_in_full_and_what_unlocks_the_rest(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("enter", "h")
        assert isinstance(app.screen, HintsScreen)
        text = screen_text(app)
        states = app.engine.hints("01")
        assert f"1 of {len(states)} hints unlocked" in text and "Both TODOs are inside" in text
        for state in states[1:]:
            assert f"{state.number}. [locked] {state.hint.title}" in text
            assert state.unlock_rule.capitalize()[:40] in text  # "Opens after 2 attempts, or at once when..."
        await pilot.press("escape")
        assert isinstance(app.screen, DrillScreen)


async def test_a_result_that_unlocks_hints_is_announced(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("enter")
        app.engine_event(record(app.engine, "01_failing"))
        event = record(app.engine, "01_failing")  # the second check opens the tier after_attempts = 2 names
        assert event.newly_unlocked
        app.engine_event(event)
        await pilot.pause()
        text = screen_text(app)
        assert "01: hint" in text and "unlocked" in text and "press h to read" in text
        hints = get_drill("01").hints
        for hint in event.newly_unlocked:
            assert f"{hints.index(hint) + 1}. {hint.title}" in text
        await pilot.press("h")
        text = screen_text(app)
        for hint in event.newly_unlocked:
            assert f"{hints.index(hint) + 1}. {hint.title}" in text
            assert f"[locked] {hint.title}" not in text


async def test_engine_failures_are_reported_and_the_app_goes_on(tmp_path):
    from tutor.loop.engine import EngineError, EngineWarning

    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("enter")
        app.engine_event(CheckStarted("01", app.workspace / "drills" / "01_causal_mask.py"))
        app.engine_event(EngineError("the check worker could not start: no GPU"))
        app.engine_event(EngineWarning("progress.json is corrupt: moved it aside"))
        app.engine_event(WatcherStatus("polling", "inotify watch limit reached"))
        await pilot.pause()
        text = screen_text(app)
        assert "could not start: no GPU" in text and "moved it aside" in text and "watch: polling" in text
        assert "checking" not in text  # the indicator does not spin for a check that never ran
        app.engine_event(record(app.engine, "01_passing"))
        await pilot.pause()
        assert "✔  PASSED" in screen_text(app)


async def test_reset_asks_first_then_restores_the_pristine_drill_and_names_the_backup(tmp_path):
    workspace = make_workspace(tmp_path)
    drill_file = workspace / "drills" / "01_causal_mask.py"
    drill_file.write_text("# my attempt\n")
    app = offline_app(workspace)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("enter", "x")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert drill_file.read_text() == "# my attempt\n"
        await pilot.press("x", "y")
        await settle(pilot)
        assert drill_file.read_text() == pristine_path(get_drill("01")).read_text()
        backups = list((workspace / ".flashtutor" / "backups").iterdir())
        assert [b.read_text() for b in backups] == ["# my attempt\n"]
        assert f".flashtutor/backups/{backups[0].name}" in screen_text(app)


async def test_the_solution_needs_a_pass_or_a_confirmation(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("enter", "s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert isinstance(app.screen, DrillScreen)
        app.engine_event(record(app.engine, "01_passing"))
        await pilot.pause()
        await pilot.press("s")
        await settle(pilot)  # the solution is read in a worker
        assert isinstance(app.screen, TextPage) and app.screen.id == "solution"
        assert "solutions/01_causal_mask_solution.py" in screen_text(app)
        assert "Drill 01 — causal masking, solved." in screen_text(app)
        await pilot.press("escape", "n")
        assert isinstance(app.screen, DrillScreen) and app.screen.drill.id == "02"


async def test_help_lists_the_keys(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, TextPage) and app.screen.id == "help"
        assert "check the drill file again now" in screen_text(app)


async def test_quiz_answers_right_and_wrong_and_keeps_them(tmp_path):
    workspace = make_workspace(tmp_path)
    app = offline_app(workspace)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, QuizScreen), "the quiz screen")
        session = app.screen.session
        first = session.current()
        await pilot.press(*f"{int(first.answer)} bytes", "enter")
        await settle(pilot)
        text = screen_text(app)
        assert "✔ right" in text and "why:" in text and f"1 of {len(build_questions())} answered" in text
        await pilot.press("enter")  # next question
        second = session.current()
        assert second is not first
        await pilot.press(*"129", "enter")
        await settle(pilot)
        text = screen_text(app)  # a first wrong answer: how far off, not the answer; one more try
        assert "✘ not yet (one more try)" in text and "relative error" in text and "why:" not in text
        assert session.current() is second
        await pilot.press(*"129", "enter")
        await settle(pilot)
        text = screen_text(app)
        assert "✘ wrong" in text and "relative error" in text and "why:" in text
        await pilot.press("enter")
        await pilot.press(*"abc", "enter")
        await settle(pilot)
        assert "? not an answer" in screen_text(app) and session.current() is session.questions[2]
        await pilot.press("escape")
        assert "~ in progress  03" in screen_text(app)  # one wrong answer does not fail an unfinished quiz
    answers = app.engine.progress.quiz_answers()
    assert answers[first.id]["correct"] and not answers[second.id]["correct"]

    again = offline_app(workspace)  # a new sitting resumes: the right answer is not asked again
    async with again.run_test(size=(120, 40)) as pilot:
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(again.screen, QuizScreen), "the quiz screen")
        assert again.screen.session.current() is not None
        assert again.screen.session.current().id == second.id


async def test_opening_the_paper_drill_opens_the_quiz(tmp_path):
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("j", "j", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, QuizScreen), "the quiz screen")
        assert f"0 of {len(build_questions())} answered" in screen_text(app)


async def test_no_color_keeps_every_mark(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        assert app.no_color
        await pilot.press("enter")
        app.engine_event(DeviceReady(recorded_result("01_failing", app.workspace).device))
        app.engine_event(CheckFinished("01", recorded_result("01_stops_before_diagonal", app.workspace), [],
                                       DrillProgress()))
        await pilot.pause()
        text = screen_text(app)
        assert "✘  FAILED" in text and "!!" in text and "··" in text and "██" in text


async def test_edit_without_a_real_terminal_says_where_to_edit_instead(tmp_path, monkeypatch):
    monkeypatch.setenv("EDITOR", "true")
    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("enter", "e")  # the headless test driver cannot suspend
        await pilot.pause()
        text = screen_text(app)
        assert "cannot hand over to an editor" in text and isinstance(app.screen, DrillScreen)


async def test_the_verdict_shows_at_once_with_a_timing_indicator_until_the_performance_arrives(tmp_path):
    from tutor.harness.result import Performance
    from tutor.loop.engine import PerformanceFinished

    app = offline_app(make_workspace(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        verdict = record(app.engine, "01_passing")
        timed = verdict.result  # the same check, once its performance phase is in
        pending = CheckFinished(verdict.drill, recorded_result("01_passing", app.workspace), [], verdict.record)
        pending.result.performance = Performance("pending")
        pending.result.full_ms = pending.result.causal_ms = None
        app.engine_event(pending)
        await pilot.pause()
        text = screen_text(app)
        assert "✔  PASSED" in text and "timing drills/01_causal_mask.py" in text and "wall clock" not in text
        timed.performance = Performance("done")
        timed.roofline = Roofline(shape=[1, 2, 200, 64], block_m=64, block_n=64, element_bytes=2, launches=[
            RooflineLaunch(mode="causal", flops=13402112, bytes=401408, visited_tiles=20, ideal_flops=12800000.0,
                           ideal_bytes=204800, ideal_note="")])
        app.engine_event(PerformanceFinished("01", timed, verdict.record))
        await pilot.pause()
        text = screen_text(app)
        assert "timing drills" not in text and "wall clock" in text
        roofline = app.screen.query_one("#roofline")
        assert roofline.display and "13.4 MFLOP · 401 kB tile loads" in str(roofline.render())
        assert "counts only on the interpreter" in str(roofline.render())
