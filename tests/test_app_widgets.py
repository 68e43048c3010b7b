"""The app's drawing functions on recorded results: what each part says, and
that every state is told apart without colour."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from helpers_app import recorded_result

from tutor.app.messages import CheckDone
from tutor.app.screens.drill_list import DrillListScreen, row_cells
from tutor.app.screens.drill_view import DrillScreen
from tutor.app.screens.help import help_markdown
from tutor.app.screens.quiz import QuizScreen
from tutor.app.widgets.result_view import diagnosis_text, error_text, metrics_text, verdict_kind, verdict_text
from tutor.app.widgets.sparkline import history_text, spark
from tutor.app.widgets.status_bar import short_path
from tutor.app.widgets.visit_map import GLYPHS, Cell, classify, render_map, tally
from tutor.catalog import get_drill
from tutor.harness.result import Device, Performance, VisitMap
from tutor.links import file_uri
from tutor.loop.engine import CheckFinished
from tutor.report import render
from tutor.state.progress import DrillProgress, DrillSummary

WORKSPACE = Path("/home/student/flashtutor")


def _map(counts: list[list[int]], heads: int = 2) -> VisitMap:
    n = len(counts)
    return VisitMap(block_m=64, block_n=64, seq=64 * n, heads=heads, counts=counts,
                    ideal=[[j <= i for j in range(n)] for i in range(n)])


# -- the visited-block map ---------------------------------------------------------------
def test_every_cell_kind_is_classified_and_drawn_with_its_own_glyph():
    # row 0: needed+visited, future+visited; row 1: needed but one head of two missed it, future skipped
    visits = VisitMap(64, 64, 128, 2, counts=[[2, 1], [1, 2]], ideal=[[True, False], [True, True]])
    assert classify(visits) == [[Cell.VISITED, Cell.EXTRA], [Cell.MISSING, Cell.VISITED]]
    assert len(set(GLYPHS.values())) == len(Cell), "two kinds share a glyph: unreadable without colour"
    drawn = render_map(visits).plain
    for cell in Cell:
        assert GLYPHS[cell] in drawn  # the legend names every kind
    assert "0  ██ xx" in drawn and "1  !! ██" in drawn


def test_a_solved_causal_kernel_draws_the_lower_triangle():
    result = recorded_result("01_passing", WORKSPACE)
    grid = classify(result.visits)
    n = len(grid)
    assert all(grid[i][j] is (Cell.VISITED if j <= i else Cell.SKIPPED) for i in range(n) for j in range(n))
    rows = [line for line in render_map(result.visits).plain.splitlines() if line[:1].isdigit()]
    assert [row.count("██") for row in rows] == list(range(1, n + 1))


def test_the_shipped_drill_visits_the_future_and_the_map_says_so():
    grid = classify(recorded_result("01_failing", WORKSPACE).visits)
    counts = tally(grid)
    assert counts[Cell.EXTRA] == sum(range(len(grid)))  # the whole upper triangle
    assert counts[Cell.SKIPPED] == 0 and counts[Cell.MISSING] == 0


def test_a_loop_that_stops_before_the_diagonal_shows_the_diagonal_missing():
    grid = classify(recorded_result("01_stops_before_diagonal", WORKSPACE).visits)
    assert [grid[i][i] for i in range(len(grid))] == [Cell.MISSING] * len(grid)


def test_wide_maps_keep_one_character_pair_per_block():
    n = 16
    drawn = render_map(_map([[2 if j <= i else 0 for j in range(n)] for i in range(n)])).plain
    last_row = next(line for line in drawn.splitlines() if line.startswith("15"))
    assert last_row == "15  " + "██" * n


# -- the numbers -------------------------------------------------------------------------
def test_metrics_name_error_against_tolerance_timings_speedup_and_visited_fraction():
    result = recorded_result("01_passing", WORKSPACE)
    result.full_visited_blocks = 32  # the full launch's count (fixtures older than that field lack it)
    text = metrics_text(result).plain
    assert f"{result.max_abs_err:.1e}  ≤ tolerance 0.02" in text
    # the interpreter: the counted work ratio is the speed-up; the wall clock is secondary, with no ratio
    assert "causal work  20/32 blocks  full/causal 1.60x, counted" in text
    assert "x vs full" not in text and "interpreter: not a speed" in text
    assert f"visited      {result.visited_fraction:.3f}" in text and f"ideal {result.ideal_fraction:.3f}" in text
    assert "compared on a GPU only" in text  # the interpreter has no SDPA comparison


def test_metrics_on_a_gpu_show_the_timed_speedup_and_a_pending_timing_says_so():
    result = recorded_result("01_passing", WORKSPACE)
    result.device = Device(kind="cuda", name="NVIDIA H200", interpreter=False)
    assert f"{result.speedup:.2f}x vs full, timed" in metrics_text(result).plain
    result.performance = Performance("pending")
    result.full_ms = result.causal_ms = None
    assert "timing       …  the timed launches follow" in metrics_text(result).plain


def test_metrics_compare_with_torch_sdpa_when_the_check_timed_it():
    result = recorded_result("01_passing", WORKSPACE)
    result.device = Device(kind="cuda", name="NVIDIA H200", interpreter=False)
    result.sdpa_full_ms, result.sdpa_causal_ms = 0.040, 0.025
    result.full_ms, result.causal_ms = 0.080, 0.050
    text = metrics_text(result).plain
    assert "torch sdpa   full 0.040 ms · causal 0.025 ms" in text
    assert "yours takes 2.00x its time" in text
    assert "first check" not in text
    result.sdpa_from_earlier_check = True  # a later save shows the session's one SDPA timing, and says so
    assert "yours takes 2.00x its time; sdpa timed at this session's first check" in metrics_text(result).plain


def test_non_finite_output_is_said_in_words():
    result = recorded_result("01_stops_before_diagonal", WORKSPACE)
    text = metrics_text(result).plain
    # which cases held NaN, how many values, and the finite cases' error: a diagnosis that explains
    # another case need not mention the NaN, so this line says where it is
    assert ("NaN/Inf or unwritten output in 3 of 6 cases (default, causal: 8192 NaN/Inf values; ragged, causal:"
            " 8192 NaN/Inf values; short, causal: 2368 NaN/Inf values); 3.0e-04 on the others") in text
    assert "max abs err   : NaN/Inf or unwritten output in 3 of 6 cases (default, causal" in render(result)
    for case in result.cases:  # every case non-finite: no finite error to give
        case.max_abs_err, case.nonfinite = None, 5
    assert "in every case (" in metrics_text(result).plain and "on the others" not in metrics_text(result).plain


def test_verdicts_read_without_colour():
    kinds = {name: verdict_kind(recorded_result(name, WORKSPACE))
             for name in ("01_failing", "01_todo2_only", "01_passing", "01_syntax_error")}
    assert kinds == {"01_failing": "failed", "01_todo2_only": "passed", "01_passing": "solved",
                     "01_syntax_error": "error"}
    assert verdict_text(recorded_result("01_failing", WORKSPACE)).plain == "✘  FAILED"
    assert verdict_text(recorded_result("01_passing", WORKSPACE)).plain == "✔  PASSED"
    assert verdict_text(recorded_result("01_todo2_only", WORKSPACE)).plain == "✔  PASSED · 1 finding open"


def test_a_check_that_could_not_run_shows_file_line_source_and_message():
    result = recorded_result("01_syntax_error", WORKSPACE)
    text = error_text(result, WORKSPACE).plain
    assert text.splitlines()[0] == f"drills/01_causal_mask.py:{result.error.line}"
    assert f"{result.error.line} │ {result.error.source_line.rstrip()}" in text
    assert result.error.message in text
    assert "Traceback" not in text
    # the location is a hyperlink to the file (Textual writes it as OSC 8 where the terminal takes it)
    links = [span.style.link for span in error_text(result, WORKSPACE).spans if not isinstance(span.style, str)]
    assert links == [file_uri(Path(result.error.file))]


def test_diagnosis_says_why_it_failed_and_what_is_still_open():
    result = recorded_result("01_todo2_only", WORKSPACE)  # PASSED, with TODO 1 open
    assert diagnosis_text(result).plain == f"finding: {result.diagnosis[0].message}"
    failing = recorded_result("01_failing", WORKSPACE)
    text = diagnosis_text(failing).plain
    assert text.startswith("why it failed: Expected until TODO 2 is done")
    assert all(d.message in text for d in failing.diagnosis)


# -- history, status bar, help ---------------------------------------------------------------
def test_sparkline_is_log_scaled_and_marks_attempts_without_a_number():
    assert spark([1.0, 1e-1, 1e-2, None, 1e-3], log=True) == "█▆▃·▁"
    assert spark([1.0, 1.5, 2.0]) == "▁▅█"
    assert spark([None, None]) == "··"
    assert spark([3.0]) == "▅"  # one value: mid-height, not an empty line
    assert len(spark(list(range(100)), width=30)) == 30


def test_paths_under_home_are_shortened():
    assert short_path(Path("/home/s/flashtutor"), home=Path("/home/s")) == "~/flashtutor"
    assert short_path(Path("/srv/ws"), home=Path("/home/s")) == "/srv/ws"


def test_help_lists_every_key_of_every_screen():
    text = help_markdown()
    for screen in (DrillListScreen, DrillScreen, QuizScreen):
        for binding in screen.BINDINGS:
            assert (binding.tooltip or binding.description) in text
    for word in ("$EDITOR", "solution", "pristine", "next drill", "quiz", "quit"):
        assert word in text


# -- messages --------------------------------------------------------------------------------
def _done(drill: str, unlocked: list | None = None) -> CheckDone:
    result = recorded_result("01_failing", WORKSPACE)
    return CheckDone(CheckFinished(drill, result, unlocked or [], DrillProgress()))


def test_a_result_gives_way_to_a_newer_one_of_the_same_drill_unless_it_unlocked_a_hint():
    hint = get_drill("01").hints[1]
    assert _done("01").can_replace(_done("01"))
    assert not _done("01").can_replace(_done("02"))
    assert not _done("01", [hint]).can_replace(_done("01"))


def test_status_bar_keeps_the_watcher_and_the_end_of_a_long_path():
    from tutor.app.widgets.status_bar import StatusBar

    class Sized(StatusBar):
        @property
        def content_size(self):
            from textual.geometry import Size

            return Size(78, 1)

    bar = Sized()
    bar.device = "CPU · Triton interpreter — timings relative only"
    bar.watcher = "watch: polling"
    bar.workspace = "/tmp/pytest-of-root/pytest-7/test_launch_in_a_real_terminal0/workspace"
    line = bar.render().plain
    assert len(line) <= 78
    assert " │ watch: polling │ …" in line and line.endswith("terminal0/workspace")
    assert line.startswith("CPU · Triton interpreter")


def test_a_crash_or_timeout_shows_the_last_output_of_the_students_code():
    from tutor.harness.result import CheckError, CheckResult

    for kind in ("crash", "timeout"):
        result = CheckResult(
            drill="01", file=str(WORKSPACE / "drills/01_causal_mask.py"),
            error=CheckError(kind=kind, message=f"the worker {kind} message",
                             file=str(WORKSPACE / "drills/01_causal_mask.py")),
            output="step 1\nstep 2\n",
        )
        text = error_text(result, WORKSPACE).plain
        assert text.splitlines()[0] == "drills/01_causal_mask.py"
        assert f"the worker {kind} message" in text and "last output of your code:\nstep 1\nstep 2" in text
        assert verdict_text(result).plain == f"⚠  COULD NOT RUN · {kind}"


def test_the_attempt_chart_labels_counted_work_and_timed_gpu_speedups_apart():
    """The chart had one "speed-up" line fed the counted work ratio on the interpreter."""
    cpu = history_text([2.9, 7.8e-4], [None, None], [1.0, 1.6]).plain.splitlines()
    assert [line.split("  ")[0] for line in cpu[1:]] == ["error (log)", "work (counted)"]
    assert cpu[2].endswith("1.00 → 1.60x") and not any("speed-up" in line for line in cpu)
    gpu = history_text([2.9, 7.8e-4], [None, 1.75], [1.6, 1.6]).plain.splitlines()
    assert gpu[3].startswith("speed-up (timed, GPU)") and gpu[3].endswith("- → 1.75x")
    older = history_text([2.9], [1.34], [None], undecided=1).plain
    assert "(1 older record: not known whether timed on a GPU)" in older


def test_the_list_tags_its_best_ratio_timed_counted_or_older():
    drill = get_drill("01")
    row = DrillSummary(drill, "passed", 2, 7.8e-4, best_work_ratio=1.6)
    assert row_cells(row)[4] == "7.8e-04 1.60x counted"
    assert row_cells(replace(row, best_speedup=1.75))[4] == "7.8e-04 1.75x timed"
    assert row_cells(replace(row, best_speedup=1.34, best_speedup_undecided=True))[4] == "7.8e-04 1.34x older record"
    assert row_cells(replace(row, best_work_ratio=None))[4] == "7.8e-04"
