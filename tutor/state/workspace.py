"""Make a workspace (``flashtutor init``) and restore drills (``flashtutor reset``).

The pristine drill is always the shipped one, pinned by hash
(:mod:`tutor.pristine`): the content root's copy when it is unedited, else
git's object of the shipped version.  An edited copy is never handed out, so
an editable install (whose content root is the clone the student edits), a
wheel and a clone all give the shipped text.

A reset first copies the student's version to
``<workspace>/.flashtutor/backups/<name>.<time>.py`` and says where; the
pristine text is then written atomically (temp file + rename), which a running
watcher sees as one save.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from tutor.catalog import Drill
from tutor.paths import WORKSPACE_STATE_DIR, content_root
from tutor.pristine import PristineError, shipped_bytes, shipped_names, shipped_text
from tutor.state.atomic import write_text_atomically

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
    names = shipped_names()
    if not names:
        raise WorkspaceError("no drills are listed as shipped: the installation looks broken")
    report = InitReport(workspace=directory.absolute())
    try:
        (directory / "drills").mkdir(parents=True, exist_ok=True)
        (directory / WORKSPACE_STATE_DIR).mkdir(exist_ok=True)
        for name in names:
            target = directory / "drills" / name
            if target.exists():
                report.kept.append(target)
                continue
            data, _ = shipped_bytes(name, content)
            target.write_bytes(data)
            report.created.append(target)
    except PristineError as exc:
        raise WorkspaceError(str(exc)) from None
    except OSError as exc:
        raise WorkspaceError(f"cannot create the workspace in {directory}: {exc.strerror or exc}") from None
    report.workspace = directory.resolve()
    return report


def pristine_text(drill: Drill, workspace: Path | None = None, content: Path | None = None) -> tuple[str, str]:
    """The drill as shipped and where it came from (in words); never an edited copy."""
    try:
        return shipped_text(drill.file, content)
    except PristineError as exc:
        raise WorkspaceError(str(exc)) from None


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
    """Back up the student's version of ``drill`` and restore the shipped one."""
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


