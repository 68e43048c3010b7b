"""Pristine means pristine: `init` and `reset` never take a drill from a place the
student edits.  The shipped drills are pinned by git blob id in
tutor/shipped_drills.json (tutor/pristine.py); a clone, an editable install and a
wheel must all give the shipped text, even when the content root's own drills/
is the student's edited copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tutor.catalog import all_drills, get_drill
from tutor.cli import main
from tutor.paths import content_root
from tutor.pristine import WRITE_COMMAND, blob_id, manifest, shipped_bytes, stale_entries
from tutor.state.workspace import WorkspaceError, init_workspace, reset_drill

REPO = Path(__file__).resolve().parent.parent
STUDENT = "# the student's half-finished edit\n"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          cwd=repo, check=True, capture_output=True, text=True).stdout


def shipped(name: str) -> bytes:
    return shipped_bytes(name)[0]


def test_the_manifest_pins_every_drill_file_and_is_not_stale() -> None:
    problems = stale_entries()
    assert not problems, f"{problems}: the shipped-drill manifest is stale, run `{WRITE_COMMAND}` and commit it"
    assert {d.file for d in all_drills()} <= manifest().keys()


def test_a_drill_added_to_drills_makes_the_manifest_stale(tmp_path: Path) -> None:
    content = tmp_path / "content"
    (content / "drills").mkdir(parents=True)
    for name in manifest():  # the shipped drills, never the clone's (the student may have edited those)
        (content / "drills" / name).write_bytes(shipped(name))
    assert stale_entries(content) == []
    (content / "drills" / "09_new_drill.py").write_text("# a drill a developer just wrote\n")
    assert stale_entries(content) == ["drills/09_new_drill.py is not in the manifest"]


def test_shipped_bytes_are_the_manifests_blobs() -> None:
    for name, blob in manifest().items():
        assert blob_id(shipped(name)) == blob


def _venv_seeing_this_environment(venv: Path) -> Path:
    """A fresh venv that also imports what the running interpreter can (torch, rich ...),
    whether that interpreter is a venv itself or not, and returns its python.

    ``venv --system-site-packages`` is not that: from inside a venv it shows the *base*
    interpreter's packages, not the venv's (a newcomer's venv: no rich, no packaging).  So
    a .pth file lists this interpreter's site directories, after the new venv's own (which
    wins: the flashtutor installed there is the one imported).  Plain directory lines: the
    .pth files in those directories (this environment's own editable flashtutor) are not run."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         check=True, capture_output=True, text=True).stdout.strip()
    here = [p for p in sys.path if p and Path(p).is_dir() and Path(p).name in ("site-packages", "dist-packages")]
    (Path(own) / "_this_environment.pth").write_text("".join(f"{p}\n" for p in here))
    return python


def test_the_test_venv_imports_what_this_environment_does(tmp_path: Path) -> None:
    python = _venv_seeing_this_environment(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(python), "-c", "import rich, packaging, torch; print(rich.__file__)"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def _clone_of_the_working_tree(tmp_path: Path) -> Path:
    """A git clone of flashtutor as shipped (the working tree's tutor/, pinned drills, solutions)."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for part in ("tutor", "solutions", "pyproject.toml", "README.md"):
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, clone / part)
    (clone / "drills").mkdir()
    for drill_toml in (REPO / "drills").glob("*.toml"):
        shutil.copyfile(drill_toml, clone / "drills" / drill_toml.name)
    for name in manifest():
        (clone / "drills" / name).write_bytes(shipped(name))
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "flashtutor as shipped")
    return clone


@needs_git
@pytest.mark.slow
def test_an_editable_install_of_an_edited_clone_inits_and_resets_the_shipped_drill(tmp_path: Path) -> None:
    """`pip install -e .` for real: the package's content root is the clone, whose
    drill 01 the student has edited (and even committed)."""
    clone = _clone_of_the_working_tree(tmp_path)
    drill = get_drill("01")
    (clone / "drills" / drill.file).write_text(STUDENT)
    _git(clone, "commit", "-q", "-am", "my work so far")  # HEAD is no longer the shipped text either
    python = _venv_seeing_this_environment(tmp_path / "venv")
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(clone)],
                             capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip(f"pip could not build the editable install here: {install.stderr[-500:]}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLASHTUTOR_WORKSPACE")}
    where = subprocess.run([str(python), "-c", "import tutor.paths as p; print(p.content_root())"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert Path(where.stdout.strip()) == clone  # the editable layout: content root = the edited clone

    flashtutor = [str(python), "-m", "tutor"]
    made = subprocess.run([*flashtutor, "init", str(tmp_path / "ws")], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    ws_file = tmp_path / "ws" / "drills" / drill.file
    assert ws_file.read_bytes() == shipped(drill.file)

    ws_file.write_text("# edited in the new workspace\n")
    reset = subprocess.run([*flashtutor, "reset", "01"], capture_output=True, text=True, env=env,
                           cwd=tmp_path / "ws")
    assert reset.returncode == 0, reset.stderr
    assert ws_file.read_bytes() == shipped(drill.file)
    assert "from git (the shipped version of drills/01_causal_mask.py" in reset.stdout

    in_clone = subprocess.run([*flashtutor, "reset", "01"], capture_output=True, text=True, env=env, cwd=clone)
    assert in_clone.returncode == 0, in_clone.stderr
    assert (clone / "drills" / drill.file).read_bytes() == shipped(drill.file)
    backups = list((clone / ".flashtutor" / "backups").iterdir())
    assert [b.read_text() for b in backups] == [STUDENT]


def test_a_wheel_whose_copy_was_edited_refuses_rather_than_hand_it_out(tmp_path: Path) -> None:
    """A wheel built from a clone with an edited drill carries the edit in
    tutor/_content; with no git beside it there is no shipped copy to give."""
    content = tmp_path / "_content"
    shutil.copytree(content_root() / "drills", content / "drills")
    drill = get_drill("02")
    for name in manifest():
        (content / "drills" / name).write_bytes(shipped(name))
    (content / "drills" / drill.file).write_text(STUDENT)
    with pytest.raises(WorkspaceError, match=f"cannot give the shipped drills/{drill.file}: .* has been edited"):
        init_workspace(tmp_path / "ws", content=content)
    assert not (tmp_path / "ws" / "drills" / drill.file).exists()


def test_a_wheels_unedited_copy_is_used_as_is(tmp_path: Path) -> None:
    content = tmp_path / "_content"
    (content / "drills").mkdir(parents=True)
    for name in manifest():
        (content / "drills" / name).write_bytes(shipped(name))
    report = init_workspace(tmp_path / "ws", content=content)
    assert {p.name for p in report.created} == set(manifest())
    workspace = report.workspace
    (workspace / "drills" / "01_causal_mask.py").write_text(STUDENT)
    again = reset_drill(get_drill("01"), workspace, content=content)
    assert again.source == f"the shipped copy {content / 'drills' / '01_causal_mask.py'}"
    assert (workspace / "drills" / "01_causal_mask.py").read_bytes() == shipped("01_causal_mask.py")


def test_reset_all_resets_every_kernel_drill_with_backups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    kernels = [d for d in all_drills() if d.kind == "kernel"]
    for drill in kernels:
        (workspace / "drills" / drill.file).write_text(f"# my {drill.id}\n")
    paper = (workspace / "drills" / "03_flash_math.md")
    paper.write_text("my notes\n")
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    assert main(["reset", "--all"]) == 0
    out = capsys.readouterr().out
    backups = sorted((workspace / ".flashtutor" / "backups").iterdir())
    assert len(backups) == len(kernels)
    for drill in kernels:
        assert (workspace / "drills" / drill.file).read_bytes() == shipped(drill.file)
        assert any(b.read_text() == f"# my {drill.id}\n" and b.name.startswith(drill.name) for b in backups)
        assert f"restored {workspace / 'drills' / drill.file}" in out
    assert paper.read_text() == "my notes\n"  # a paper drill's notes are not a kernel to reset
    assert main(["reset"]) == 2 and main(["reset", "01", "--all"]) == 2


@needs_git
@pytest.mark.slow
def test_a_wheel_install_inits_and_resets_the_shipped_drill(tmp_path: Path) -> None:
    """A real wheel, built from a clone and installed into a fresh environment: its
    tutor/_content is the content root, and no git is beside it."""
    clone = _clone_of_the_working_tree(tmp_path)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(clone)], capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        pytest.skip(f"pip could not build the wheel here: {built.stderr[-500:]}")
    python = str(_venv_seeing_this_environment(tmp_path / "venv"))
    wheel = next((tmp_path / "dist").glob("flashtutor-*.whl"))
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    shutil.rmtree(clone)  # nothing of the clone is left to read from
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLASHTUTOR_WORKSPACE")}
    made = subprocess.run([python, "-m", "tutor", "init", str(tmp_path / "ws")], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    drill = get_drill("01")
    file = tmp_path / "ws" / "drills" / drill.file
    assert file.read_bytes() == shipped(drill.file)
    file.write_text(STUDENT)
    reset = subprocess.run([python, "-m", "tutor", "reset", "01"], capture_output=True, text=True, env=env,
                           cwd=tmp_path / "ws")
    assert reset.returncode == 0, reset.stderr
    assert "from the shipped copy" in reset.stdout and "_content" in reset.stdout
    assert file.read_bytes() == shipped(drill.file)
