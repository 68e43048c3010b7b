"""Issue 23, a newcomer's first hour: the small stumbles, each as it was met."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers_app import recorded_result

from tutor.cli import EXIT_FAILED, EXIT_OK, main
from tutor.report import error_lines, printable
from tutor.state.progress import IN_PROGRESS, PASSED, ProgressStore
from tutor.state.workspace import init_workspace

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


@pytest.mark.slow
def test_a_kernel_without_module_level_tile_sizes_is_told_what_to_add(tmp_path: Path) -> None:
    """A kernel ported from elsewhere got a raw `AttributeError: module ... has no attribute
    'BLOCK_M'`: the tutor needs the tile sizes to count the visit map in."""
    from helpers_harness import REPO, run_cli

    text = (REPO / "solutions" / "01_causal_mask_solution.py").read_text()
    assert "BLOCK_M = 64\nBLOCK_N = 64\n" in text
    ported = tmp_path / "ported_forward.py"
    ported.write_text(text.replace("BLOCK_M = 64\nBLOCK_N = 64\n", "")
                      .replace("triton.cdiv(seq, BLOCK_M)", "triton.cdiv(seq, 64)")
                      .replace("BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N", "BLOCK_M=64, BLOCK_N=64"))
    done = run_cli("check", str(ported), "--drill", "01", "--no-timing", "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "has no attribute" not in done.stdout
    assert "defines no module-level BLOCK_M and BLOCK_N" in done.stdout and "visit map" in done.stdout
    assert "`BLOCK_M = 64`; `BLOCK_N = 64` at the top of the file" in done.stdout


def test_a_bare_flashtutor_launches_the_app_in_a_terminal_and_prints_help_otherwise(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tutor.cli.launch as launch

    ran: list[str] = []
    monkeypatch.setattr(launch, "run_launch_command", lambda args: ran.append(args.command) or 0)
    from tutor.cli import EXIT_USAGE

    assert main([]) == EXIT_USAGE and "usage: flashtutor" in capsys.readouterr().out and ran == []
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main([]) == 0 and ran == ["launch"]


def test_the_readme_has_one_copy_paste_install_block_per_machine() -> None:
    """Issue 23: the README's block said `pip install -e .`, the CPU variant hid in a parenthesis:
    typed literally on a CPU machine, no Triton.  .ci/run installs torch the CPU block's way."""
    import re

    from helpers_harness import REPO

    blocks = re.findall(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    cpu = "pip install torch==2.13.0 && pip install -e '.[cpu]' && flashtutor launch"
    gpu = "pip install torch && pip install -e . && flashtutor launch"
    assert blocks[:3] == [cpu, gpu, "pip install -e '.[test]' && python3 -m pytest -n auto --dist loadfile"]
    assert "pip install --quiet torch==2.13.0" in (REPO / ".ci" / "run").read_text()
