"""The README's test command on a student's clone: every kernel drill solved, a
progress file with their record.  The CLI tests run on temporary workspaces, so
they pass there and leave the clone's drills/ and .flashtutor/ byte-for-byte
unchanged (they used to run `flashtutor check` on the clone itself: the spec-format
test failed once drill 01 was solved, and each run added attempts, "solved"
entries and a drill 02 attempt the student never made)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import student_state

from tutor.catalog import all_drills, solution_path
from tutor.pristine import manifest, shipped_bytes
from tutor.state.progress import PASSED, ProgressStore

REPO = Path(__file__).resolve().parent.parent


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=s", "-c", "user.email=s@example.com", *args],
                   cwd=repo, check=True, capture_output=True)


def solved_clone(root: Path) -> Path:
    clone = root / "clone"
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.egg-info", ".flashtutor")
    for part in ("tutor", "tests", "drills", "solutions"):
        shutil.copytree(REPO / part, clone / part, ignore=ignore)
    for part in ("pyproject.toml", "README.md"):
        shutil.copyfile(REPO / part, clone / part)
    for name in manifest():  # the clone as shipped, committed
        (clone / "drills" / name).write_bytes(shipped_bytes(name)[0])
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "flashtutor")
    store = ProgressStore(clone)
    for drill in all_drills():  # the student's work: every kernel drill solved, and a record of it
        if drill.kind == "kernel":
            shutil.copyfile(solution_path(drill), clone / "drills" / drill.file)
        store.set_status(drill.id, PASSED)
    return clone


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_cli_tests_pass_on_a_solved_clone_and_leave_its_work_alone(tmp_path: Path) -> None:
    clone = solved_clone(tmp_path)
    before = student_state(clone)
    assert any(key.startswith(".flashtutor/") for key in before)
    env = {k: v for k, v in os.environ.items() if k != "FLASHTUTOR_WORKSPACE"}
    env["PYTHONPATH"] = str(clone)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cli_check.py",
         "-k", "spec_format or a_missing_file or an_unknown_drill_id"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout
    assert student_state(clone) == before
