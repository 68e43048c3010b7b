"""Resolve what the student named on the command line to a drill and a file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tutor.catalog import Drill, UnknownDrill, get_drill
from tutor.paths import default_workspace


class TargetError(Exception):
    """A clear, user-facing reason the target cannot be checked."""


@dataclass(frozen=True)
class Target:
    drill: Drill
    file: Path


def workspace_file(drill: Drill, workspace: Path | None = None) -> Path:
    root = workspace or default_workspace()
    if root is None:
        raise TargetError(
            "no drills found here: run this inside a clone of flashtutor, or make a workspace with "
            "`flashtutor init DIR` and run it there"
        )
    return root / "drills" / drill.file


def resolve(name: str, drill_id: str | None = None, workspace: Path | None = None) -> Target:
    """``name`` is a drill id (``01``), a name (``causal_mask``) or a path to any file
    that implements a drill; ``drill_id`` says which when the file name does not."""
    looks_like_path = any(sep in name for sep in ("/", "\\")) or name.endswith((".py", ".md"))
    if looks_like_path:
        path = Path(name).expanduser()
        if not path.exists():
            raise TargetError(f"no such file: {path}")
        try:
            drill = get_drill(drill_id or path.name)
        except UnknownDrill:
            raise TargetError(
                f"cannot tell which drill {path.name} implements: add --drill ID (e.g. --drill 01)"
            ) from None
        return Target(drill, path.resolve())
    try:
        drill = get_drill(drill_id or name)
    except UnknownDrill as exc:
        raise TargetError(str(exc)) from None
    path = workspace_file(drill, workspace)
    if not path.exists():
        raise TargetError(f"{path} is missing: `flashtutor reset {drill.id}` restores the pristine drill")
    return Target(drill, path)
