"""`flashtutor init` and `flashtutor reset`: the pristine drill from the package's
copy (an installed package) and from git (a clone), with the student's version
backed up first."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tutor.catalog import get_drill, pristine_path
from tutor.cli import main
from tutor.paths import content_root
from tutor.state.workspace import WorkspaceError, init_workspace, reset_drill

DRILL = get_drill("01")
STUDENT = "# the student's attempt\n"


def shipped_files() -> set[str]:
    return {p.name for p in (content_root() / "drills").iterdir()
            if p.suffix in (".py", ".md") and not p.name.startswith("_")}


def test_init_copies_the_pristine_drills_and_keeps_what_is_there(tmp_path: Path) -> None:
    report = init_workspace(tmp_path / "ws")
    drills = tmp_path / "ws" / "drills"
    assert {p.name for p in report.created} == shipped_files() == {p.name for p in drills.iterdir()}
    assert {DRILL.file, "README.md"} <= shipped_files()
    assert (drills / DRILL.file).read_text() == pristine_path(DRILL).read_text()
    assert (tmp_path / "ws" / ".flashtutor").is_dir()

    (drills / DRILL.file).write_text(STUDENT)
    (drills / "README.md").unlink()
    again = init_workspace(tmp_path / "ws")
    assert [p.name for p in again.created] == ["README.md"]
    assert (drills / DRILL.file).read_text() == STUDENT  # never overwritten


def test_init_refuses_the_checkout_itself() -> None:
    with pytest.raises(WorkspaceError, match="already is a workspace"):
        init_workspace(content_root())


def test_flashtutor_init_says_what_to_do_next(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "mine")]) == 0
    out = capsys.readouterr().out
    assert f"created {tmp_path / 'mine' / 'drills' / DRILL.file}" in out
    assert "flashtutor watch" in out


def test_reset_from_the_package_copy_backs_up_the_students_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workspace that is not the content root (an installed package's layout)."""
    workspace = init_workspace(tmp_path / "ws").workspace
    file = workspace / "drills" / DRILL.file
    file.write_text(STUDENT)
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    assert main(["reset", "01"]) == 0
    out = capsys.readouterr().out
    assert file.read_text() == pristine_path(DRILL).read_text()
    backups = list((workspace / ".flashtutor" / "backups").iterdir())
    assert len(backups) == 1 and backups[0].read_text() == STUDENT
    assert f"your version is saved in {backups[0]}" in out

    assert main(["reset", "01"]) == 0  # nothing to do the second time, and no empty backup
    assert "already as shipped" in capsys.readouterr().out
    assert len(list((workspace / ".flashtutor" / "backups").iterdir())) == 1


def test_reset_restores_a_deleted_drill(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    (workspace / "drills" / DRILL.file).unlink()
    report = reset_drill(DRILL, workspace)
    assert report.changed and report.backup is None
    assert (workspace / "drills" / DRILL.file).read_text() == pristine_path(DRILL).read_text()


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   cwd=repo, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_reset_in_a_clone_takes_the_committed_drill_from_git(tmp_path: Path) -> None:
    """In a clone the workspace is the content root: drills/<file> is the edited
    file itself, and the pristine one is git's object of the shipped version
    (even when the student has committed their edit over it)."""
    clone = tmp_path / "clone"
    (clone / "drills").mkdir(parents=True)
    committed = pristine_path(DRILL).read_text()
    (clone / "drills" / DRILL.file).write_text(committed)
    _git(clone, "init", "-q")
    _git(clone, "add", "drills")
    _git(clone, "commit", "-q", "-m", "drills")
    (clone / "drills" / DRILL.file).write_text(STUDENT)
    _git(clone, "commit", "-q", "-am", "my work")

    report = reset_drill(DRILL, clone, content=clone)
    assert report.source.startswith(f"git (the shipped version of drills/{DRILL.file}")
    assert (clone / "drills" / DRILL.file).read_text() == committed
    assert report.backup is not None and report.backup.read_text() == STUDENT


def test_reset_in_a_clone_without_git_history_says_so(tmp_path: Path) -> None:
    clone = tmp_path / "not-a-repo"
    (clone / "drills").mkdir(parents=True)
    (clone / "drills" / DRILL.file).write_text(STUDENT)
    with pytest.raises(WorkspaceError, match="has been edited, and git has no shipped version"):
        reset_drill(DRILL, clone, content=clone)
    assert (clone / "drills" / DRILL.file).read_text() == STUDENT  # untouched


def test_check_outside_any_workspace_says_where_the_drills_are_and_records_nothing_in_the_clone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23: `flashtutor check 01` from a folder outside any workspace silently checked the
    editable install's clone and recorded progress there."""
    from tutor.paths import SOURCE_ROOT, default_workspace

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.delenv("FLASHTUTOR_WORKSPACE", raising=False)
    clone_progress = SOURCE_ROOT / ".flashtutor" / "progress.json"
    before = clone_progress.read_bytes() if clone_progress.exists() else None
    assert default_workspace() is None
    capsys.readouterr()
    assert main(["check", "01", "--no-timing"]) == 2
    err = capsys.readouterr().err
    assert f"no drills here ({outside} or above)" in err and "`flashtutor init DIR`" in err
    if content_root() == SOURCE_ROOT:  # an install from a clone: say where its drills are
        assert f"its drills are in {SOURCE_ROOT / 'drills'}" in err
    assert (clone_progress.read_bytes() if clone_progress.exists() else None) == before
