"""Resolve what the student named on the command line to a drill and a file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tutor.catalog import Drill, UnknownDrill, all_drills, get_drill
from tutor.paths import NoWorkspace, require_workspace


class TargetError(Exception):
    """A clear, user-facing reason the target cannot be checked.

    ``usage``: the command line itself is wrong (an unknown drill, a file whose
    drill cannot be told) - as opposed to naming a file that is not there."""

    def __init__(self, message: str, usage: bool = False):
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class Target:
    drill: Drill
    file: Path


def workspace_file(drill: Drill, workspace: Path | None = None) -> Path:
    try:
        root = workspace or require_workspace()
    except NoWorkspace as exc:
        raise TargetError(str(exc), usage=True) from None  # exit 2: run it in a workspace
    return root / "drills" / drill.file


def drill_named_by(path: Path) -> Drill | None:
    """The drill a file's name says: ``01_causal_mask.py``, ``01_causal_mask_solution.py``,
    or any ``01_causal_mask_<variant>.py``; None when the name does not say."""
    try:
        return get_drill(path.name)
    except UnknownDrill:
        pass
    return next((d for d in all_drills() if path.stem.startswith(f"{d.name}_")), None)


def resolve(name: str, drill_id: str | None = None, workspace: Path | None = None) -> Target:
    """``name`` is a drill id (``01``), a name (``causal_mask``) or a path to any file
    that implements a drill; ``drill_id`` says which when the file name does not."""
    looks_like_path = any(sep in name for sep in ("/", "\\")) or name.endswith((".py", ".md"))
    if looks_like_path:
        path = Path(name).expanduser()
        if not path.exists():
            raise TargetError(f"no such file: {path}")
        if drill_id:
            try:
                return Target(get_drill(drill_id), path.resolve())
            except UnknownDrill as exc:
                raise TargetError(str(exc), usage=True) from None
        drill = drill_named_by(path)
        if drill is None:
            raise TargetError(
                f"cannot tell which drill {path.name} implements: add --drill ID (e.g. --drill 01)", usage=True
            )
        return Target(drill, path.resolve())
    try:
        drill = get_drill(drill_id or name)
    except UnknownDrill as exc:
        raise TargetError(str(exc), usage=True) from None
    path = workspace_file(drill, workspace)
    if not path.exists():
        raise TargetError(f"{path} is missing: `flashtutor reset {drill.id}` restores the pristine drill")
    return Target(drill, path)
