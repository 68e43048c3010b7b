"""A workspace whose progress cannot be saved, and the quiz's counts and numbers.

Read-only: `check` printed "hint unlocked" though nothing was stored, with no
warning; `quiz` warned at the start and ended with "answers so far are saved".
Now every front end says once, plainly, that progress is not being saved, and
never claims it was.  Quiz: `list` and the app disagreed on drill 03's attempt
count; `1e99` printed a number some 300 characters long."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers_app import offline_app, settle
from helpers_harness import BROKEN, run_cli

from tutor.catalog import get_drill
from tutor.cli import main
from tutor.quiz import QuizSession, build_questions
from tutor.state import progress
from tutor.state.progress import ProgressStore, not_saved_note, saved_words
from tutor.state.workspace import init_workspace

ROOT = Path(__file__).resolve().parent.parent
NOT_SAVED = "progress is NOT being saved"


def unwritable_workspace(tmp_path: Path) -> Path:
    """.flashtutor is a plain file: nothing can be written under it, as on a
    read-only mount (chmod does not stop root)."""
    workspace = init_workspace(tmp_path / "ws").workspace
    shutil.rmtree(workspace / ".flashtutor")
    (workspace / ".flashtutor").write_text("in the way")
    return workspace


def quiz(workspace: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FLASHTUTOR_WORKSPACE", None)
    return subprocess.run([sys.executable, "-m", "tutor", "quiz", "--no-gpu", "--workspace", str(workspace)],
                          input=stdin, capture_output=True, text=True, timeout=120, env=env, cwd=workspace)


@pytest.mark.slow
def test_check_in_an_unwritable_workspace_says_once_that_nothing_is_saved(tmp_path: Path) -> None:
    workspace = unwritable_workspace(tmp_path)
    drill = get_drill("01")
    # an edit (a new attempt): TODO 2 done, TODO 1 open, which opens "The loop bound" at once
    shutil.copyfile(BROKEN / "01_todo2_only.py", workspace / "drills" / drill.file)
    run = run_cli("check", "01", "--no-timing", cwd=workspace, env={"FLASHTUTOR_WORKSPACE": str(workspace)})
    assert run.returncode == 1, run.stdout + run.stderr
    assert (run.stdout + run.stderr).count(NOT_SAVED) == 1 and NOT_SAVED in run.stderr
    assert "hint unlocked: The loop bound (`flashtutor hint 01`) - for this command only: progress is not " \
           "being saved" in run.stdout
    assert (workspace / ".flashtutor").read_text() == "in the way"


def test_quiz_in_an_unwritable_workspace_never_claims_it_saved(tmp_path: Path) -> None:
    workspace = unwritable_workspace(tmp_path)
    first = build_questions()[0]
    run = quiz(workspace, f"{int(first.answer)} bytes\n")
    out = run.stdout + run.stderr
    assert run.returncode == 1 and "Traceback" not in out
    assert out.count(NOT_SAVED) == 1
    assert "answers so far are saved" not in out and "your answers are saved" not in out
    assert "Stopped before the end; nothing was saved: progress is not being saved in this workspace." in out


def test_quiz_numbers_keep_a_sane_width(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    run = quiz(workspace, "1e99\n1e99 GB\n")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "1e+99 bytes" in run.stdout and "1e+108 bytes" in run.stdout
    assert max(len(word) for word in re.split(r"\s+", run.stdout)) < 40, run.stdout


async def test_list_and_the_app_show_one_attempt_count_for_the_quiz(tmp_path: Path, monkeypatch, capsys) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    questions = build_questions()
    session = QuizSession(questions, ProgressStore(workspace))
    session.answer(str(questions[0].answer))  # right
    session.answer(repr(questions[1].answer * 3))  # wrong: one more try
    session.answer(repr(questions[1].answer * 3))  # wrong again
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    capsys.readouterr()
    assert main(["list"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if re.match(r"\[.\] 03", line))
    listed = int(line.split()[-2])
    app = offline_app(workspace)
    async with app.run_test() as pilot:
        await settle(pilot)  # the app reads the progress file in a worker
        shown = next(row for row in app.known.rows() if row.drill.id == "03")
    assert listed == shown.attempts == 3


def test_the_not_saved_words_live_in_one_place() -> None:
    """The "progress not saved" words were spelled out in check, quiz (three ways), the
    app's quiz screen, doctor and the store: now every front end takes them from
    tutor.state.progress (NOT_SAVED and the functions built on it)."""
    spelled = re.compile(r"not (being )?saved|nothing was saved", re.IGNORECASE)
    found = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "tutor").rglob("*.py"))
             if path.name != "progress.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if spelled.search(line.split("#", 1)[0])]
    assert found == []
    store = ProgressStore(unwritable_workspace(Path(tempfile.mkdtemp())))
    assert store.save_error is not None
    words = [store.warnings[0], not_saved_note(store, "command"), not_saved_note(None, "sitting"),
             saved_words(store, "kept"), saved_words(None, "kept")]
    assert all(progress.NOT_SAVED in w.replace("NOT", "not") for w in words), words
    assert not_saved_note(ProgressStore(Path(tempfile.mkdtemp())), "command") == ""
    assert saved_words(ProgressStore(Path(tempfile.mkdtemp())), "kept") == "kept"
