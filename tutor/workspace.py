"""Make a workspace (``flashtutor init``) and restore a drill (``flashtutor reset``).

Where the pristine drill comes from depends on the layout (see
:mod:`tutor.paths`):

* an installed package: its own copy, ``tutor/_content/drills/<file>``;
* a clone, where the workspace *is* the content root, so ``drills/<file>`` is
  the file the student edited: the committed version, ``git show HEAD:drills/<file>``.

A reset first copies the student's version to
``<workspace>/.flashtutor/backups/<name>.<time>.py`` and says where; the
pristine text is then written atomically (temp file + rename), which a running
watcher sees as one save.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tutor.atomic import write_text_atomically
from tutor.catalog import Drill
from tutor.paths import WORKSPACE_STATE_DIR, content_root

BACKUP_DIR = "backups"


class WorkspaceError(Exception):
    """A clear, user-facing reason a workspace operation cannot be done."""


@dataclass
class InitReport:
    workspace: Path
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)  # already there: never overwritten


@dataclass
class ResetReport:
    file: Path
    source: str  # where the pristine text came from, in words
    backup: Path | None  # None: there was no student version to keep (missing, or already pristine)
    changed: bool


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def init_workspace(directory: Path, content: Path | None = None) -> InitReport:
    """Create ``directory`` with ``drills/`` (every drill file and Markdown page of
    the pristine content) and ``.flashtutor/``.  Existing files are kept."""
    content = content or content_root()
    directory = Path(directory).expanduser()
    if directory.exists() and _same(directory, content):
        raise WorkspaceError(f"{directory} is the flashtutor checkout itself: it already is a workspace")
    sources = sorted(
        p for p in (content / "drills").iterdir()
        if p.suffix in (".py", ".md") and not p.name.startswith("_") and p.is_file()  # not a package __init__.py
    )
    if not sources:
        raise WorkspaceError(f"no drills found in {content / 'drills'}: the installation looks broken")
    report = InitReport(workspace=directory.absolute())
    try:
        (directory / "drills").mkdir(parents=True, exist_ok=True)
        (directory / WORKSPACE_STATE_DIR).mkdir(exist_ok=True)
        for source in sources:
            target = directory / "drills" / source.name
            if target.exists():
                report.kept.append(target)
                continue
            shutil.copyfile(source, target)
            report.created.append(target)
    except OSError as exc:
        raise WorkspaceError(f"cannot create the workspace in {directory}: {exc.strerror or exc}") from None
    report.workspace = directory.resolve()
    return report


def pristine_text(drill: Drill, workspace: Path, content: Path | None = None) -> tuple[str, str]:
    """The drill as shipped and where it came from (in words)."""
    content = content or content_root()
    relative = f"drills/{drill.file}"
    if not _same(workspace, content):
        path = content / "drills" / drill.file
        try:
            return path.read_text(encoding="utf-8"), f"the pristine copy {path}"
        except OSError as exc:
            raise WorkspaceError(f"cannot read the pristine copy {path}: {exc.strerror or exc}") from None
    # a clone: the working file is the student's; the committed one is pristine
    try:
        shown = subprocess.run(
            ["git", "show", f"HEAD:./{relative}"],
            cwd=workspace, capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceError(
            f"cannot restore {relative}: in a clone the pristine drill is the committed one, and git "
            f"could not be run ({exc}). Install git, or copy the file from a fresh clone."
        ) from None
    if shown.returncode != 0:
        raise WorkspaceError(
            f"cannot restore {relative}: in a clone the pristine drill is the committed one, but "
            f"`git show HEAD:{relative}` failed: {shown.stderr.strip() or 'no output'}"
        )
    return shown.stdout, f"git (HEAD:{relative})"


def _backup_path(workspace: Path, drill: Drill) -> Path:
    directory = workspace / WORKSPACE_STATE_DIR / BACKUP_DIR
    stem, suffix = os.path.splitext(drill.file)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = directory / f"{stem}.{stamp}{suffix}"
    n = 1
    while candidate.exists():
        candidate = directory / f"{stem}.{stamp}-{n}{suffix}"
        n += 1
    return candidate


def reset_drill(drill: Drill, workspace: Path, content: Path | None = None) -> ResetReport:
    """Back up the student's version of ``drill`` and restore the pristine one."""
    workspace = Path(workspace)
    file = workspace / "drills" / drill.file
    text, source = pristine_text(drill, workspace, content)
    try:
        current = file.read_text(encoding="utf-8") if file.exists() else None
    except (OSError, UnicodeDecodeError):
        current = ""  # unreadable as text: still back it up byte for byte
    if current == text:
        return ResetReport(file=file, source=source, backup=None, changed=False)
    backup = None
    try:
        if current is not None:
            backup = _backup_path(workspace, drill)
            backup.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, backup)
        file.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(file, text)
    except OSError as exc:
        where = f" (your version is safe in {backup})" if backup is not None and backup.exists() else ""
        raise WorkspaceError(f"cannot reset {file}: {exc.strerror or exc}{where}") from None
    return ResetReport(file=file, source=source, backup=backup, changed=True)

