"""One decision for a check's outcome: CheckResult.outcome, read by the report's
verdict, the CLI's exit code, the app's verdict widget and watch's colour."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_app import recorded_result

from tutor.app.widgets.result_view import verdict_kind
from tutor.cli import EXIT_FAILED, EXIT_NOT_RUN, EXIT_OK
from tutor.cli.check import exit_code
from tutor.cli.watch import OUTCOME_STYLES
from tutor.harness.result import CheckResult
from tutor.report import verdict

WORKSPACE = Path("/workspace")


@pytest.mark.parametrize("name,outcome,word,code,kind,style", [
    ("01_passing", "solved", "PASSED", EXIT_OK, "solved", "green"),
    ("01_todo2_only", "passed-with-finding", "PASSED", EXIT_FAILED, "passed", "yellow"),
    ("01_failing", "failed", "FAILED", EXIT_FAILED, "failed", "red"),
    ("01_syntax_error", "not-run", "COULD NOT RUN", EXIT_NOT_RUN, "error", "red"),
])
def test_every_front_end_reads_the_one_outcome(name, outcome, word, code, kind, style):
    result = recorded_result(name, WORKSPACE)
    assert result.outcome == outcome
    assert (verdict(result), exit_code(result), verdict_kind(result), OUTCOME_STYLES[result.outcome]) == \
        (word, code, kind, style)
    assert result.solved == (outcome == "solved")
    assert CheckResult.from_json(result.to_json()).outcome == outcome
    assert result.to_dict()["outcome"] == outcome


def test_an_error_wins_over_a_pass_and_a_finding_over_a_clean_pass():
    result = recorded_result("01_todo2_only", WORKSPACE)
    assert result.passed and result.outcome == "passed-with-finding"
    result.diagnosis = [d for d in result.diagnosis if d.severity != "finding"]
    assert result.outcome == "solved"
    result.error = recorded_result("01_syntax_error", WORKSPACE).error
    assert result.outcome == "not-run"
