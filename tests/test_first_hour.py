"""Issue 23, a newcomer's first hour: the small stumbles, each as it was met."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers_app import recorded_result

from tutor.cli import EXIT_FAILED, EXIT_OK, main
from tutor.progress import IN_PROGRESS, PASSED, ProgressStore
from tutor.report import error_lines, printable
from tutor.workspace import init_workspace

RAW = "\x00\x01\x1b[31mred\x07 binary \ufffd"


def test_a_binary_files_control_bytes_are_escaped_in_the_line_field(tmp_path: Path) -> None:
    result = recorded_result("01_syntax_error", tmp_path)
    assert result.error is not None
    result.error = dataclasses.replace(result.error, source_line=RAW, message=f"bad byte {RAW}")
    report = "\n".join(error_lines(result))
    assert not any(ord(c) < 32 and c not in "\n\t" for c in report)
    assert "line          : \\x00\\x01\\x1b[31mred\\x07 binary \ufffd" in report
    assert printable("a\tb") == "a\tb"

    from tutor.app.widgets.result_view import error_text

    shown = error_text(result, tmp_path).plain
    assert "\\x1b[31mred" in shown and "\x1b" not in shown and "\x00" not in shown


def test_check_03_exits_1_until_the_quiz_is_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    assert main(["check", "03"]) == EXIT_FAILED  # nothing answered yet
    ProgressStore(workspace).set_status("03", IN_PROGRESS)
    assert main(["check", "03"]) == EXIT_FAILED
    ProgressStore(workspace).set_status("03", PASSED)
    assert main(["check", "03"]) == EXIT_OK
