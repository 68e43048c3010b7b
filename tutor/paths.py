"""Where the drill content and the student's workspace live.

Two layouts are supported:

* a clone of the repository: ``drills/`` and ``solutions/`` sit at the top of
  the checkout, which is also the student's workspace;
* an installed wheel: pristine copies of both ship as package data under
  ``tutor/_content``; ``flashtutor init DIR`` copies the drills into a workspace.

``$FLASHTUTOR_CONTENT_ROOT`` (a directory holding ``drills/`` and
``solutions/``) replaces both: drill authors and tests point ``flashtutor dev
check``/``dev new`` (``--root DIR`` sets it) at a copy, and the check workers
the process starts inherit it.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE_DIR.parent
WORKSPACE_STATE_DIR = ".flashtutor"
CONTENT_ROOT_ENV = "FLASHTUTOR_CONTENT_ROOT"


def _is_content_root(path: Path) -> bool:
    return (path / "drills").is_dir() and (path / "solutions").is_dir()


def content_root() -> Path:
    """The directory holding the canonical ``drills/`` and ``solutions/``.

    In a clone (editable install) that is the checkout; in a wheel it is the
    package's ``_content`` folder; ``$FLASHTUTOR_CONTENT_ROOT`` overrides both.
    """
    override = os.environ.get(CONTENT_ROOT_ENV)
    if override:
        return Path(override).resolve()
    if _is_content_root(SOURCE_ROOT) and (SOURCE_ROOT / "pyproject.toml").is_file():
        return SOURCE_ROOT
    return PACKAGE_DIR / "_content"


def find_workspace(start: Path | None = None) -> Path | None:
    """The nearest directory at or above ``start`` that holds a ``drills/`` folder
    with drill files in it (a clone, or a workspace made by ``flashtutor init``)."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        drills = candidate / "drills"
        if drills.is_dir() and any(drills.glob("0*_*.*")):
            return candidate
    return None


def default_workspace() -> Path | None:
    """The workspace to use when none is named: ``$FLASHTUTOR_WORKSPACE``, else the
    nearest one at or above the current directory; None outside any.  Never the
    clone an editable install runs from when the student is elsewhere: a check run
    from another folder must not record progress in the clone unasked
    (:func:`no_workspace_message` says where its drills are)."""
    env = os.environ.get("FLASHTUTOR_WORKSPACE")
    if env:
        return Path(env).resolve()
    return find_workspace()


NO_WORKSPACE = ("no drills here: run this inside a clone of flashtutor or a workspace, or make one with "
                "`flashtutor init DIR` and run it there")


def no_workspace_message(where: Path | None = None) -> str:
    """:data:`NO_WORKSPACE`, naming the folder searched and, for an install from a clone,
    where that clone's drills are."""
    here = (where or Path.cwd()).expanduser()
    message = NO_WORKSPACE.replace("no drills here", f"no drills here ({here} or above)", 1)
    if content_root() == SOURCE_ROOT:
        message += (f". This flashtutor is installed from the clone {SOURCE_ROOT}: its drills are in "
                    f"{SOURCE_ROOT / 'drills'} (cd {SOURCE_ROOT} to work there)")
    return message


class NoWorkspace(LookupError):
    """No workspace where one is needed; ``str()`` says so (:func:`no_workspace_message`)."""


def require_workspace(explicit: Path | None = None) -> Path:
    """The workspace a command works in: ``explicit`` (or one above it), else
    :func:`default_workspace`; raises :class:`NoWorkspace` when it has no ``drills/``."""
    found = find_workspace(explicit.expanduser()) if explicit is not None else default_workspace()
    if found is None or not (found / "drills").is_dir():
        raise NoWorkspace(no_workspace_message(explicit))
    return found
