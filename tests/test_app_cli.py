"""`flashtutor launch` refuses clearly where the app cannot run."""

from __future__ import annotations

import subprocess
import sys

from helpers_app import make_workspace

from tutor.cli import EXIT_USAGE


def launch(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tutor", "launch", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def test_launch_without_a_terminal_says_it_needs_one(tmp_path):
    done = launch("--workspace", str(make_workspace(tmp_path)), cwd=tmp_path)
    assert done.returncode == EXIT_USAGE
    assert "needs a terminal" in done.stderr and "stdin, stdout and stderr redirected" in done.stderr
    assert "flashtutor watch" in done.stderr  # what to use in a script instead
    assert "Traceback" not in done.stderr


def test_launch_where_there_are_no_drills_says_how_to_make_a_workspace(tmp_path):
    (tmp_path / "empty").mkdir()
    done = launch("--workspace", str(tmp_path / "empty"), cwd=tmp_path)
    assert done.returncode == EXIT_USAGE
    assert "no drills here" in done.stderr and "flashtutor init DIR" in done.stderr


def test_launch_names_the_drills_when_the_one_asked_for_does_not_exist(tmp_path):
    done = launch("--workspace", str(make_workspace(tmp_path)), "99", cwd=tmp_path)
    assert done.returncode == EXIT_USAGE
    assert "unknown drill '99'" in done.stderr and "01 (causal_mask)" in done.stderr
