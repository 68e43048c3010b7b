"""Clickable paths and the student's editor.

:func:`file_link` wraps ``path[:line]`` in an OSC 8 terminal hyperlink when the
terminal is known to support them (plain text otherwise, and always when the
stream is not a terminal), so a compile error's ``drills/01_causal_mask.py:57``
opens in one click.  :func:`editor_command` builds the command that opens a
file at a line in the student's editor: ``--edit-cmd``, then ``$VISUAL``, then
``$EDITOR``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

OSC8 = "\033]8;;{uri}\033\\{text}\033]8;;\033\\"

# Terminals that render OSC 8 links (others print the text only, or garbage).
_TERM_PROGRAMS = {"iTerm.app", "WezTerm", "vscode", "ghostty", "Hyper", "Tabby", "rio"}
_TERMS = {"xterm-kitty", "foot", "xterm-ghostty", "alacritty", "wezterm"}

# How editors take a line: "+N file" (most terminal editors) or "file:N" with a flag.
_PLUS_LINE = {"vi", "vim", "nvim", "nano", "emacs", "emacsclient", "micro", "kak", "hx", "helix", "joe", "ne", "mg"}
_COLON_LINE = {"code": ["-g"], "codium": ["-g"], "cursor": ["-g"], "subl": [], "zed": [], "atom": []}


def supports_hyperlinks(stream: TextIO | None, env: dict[str, str] | None = None) -> bool:
    """OSC 8 only on a terminal known to render it; ``FORCE_HYPERLINK=1``/``0`` overrides."""
    env = dict(os.environ) if env is None else env
    forced = env.get("FORCE_HYPERLINK")
    if forced is not None:
        return forced not in ("0", "")
    if stream is None or not getattr(stream, "isatty", lambda: False)() or env.get("TERM") == "dumb":
        return False
    if env.get("TERM_PROGRAM") in _TERM_PROGRAMS or env.get("TERM") in _TERMS:
        return True
    if env.get("WT_SESSION") or env.get("KITTY_WINDOW_ID") or env.get("KONSOLE_VERSION"):
        return True
    vte = env.get("VTE_VERSION", "")
    return vte.isdigit() and int(vte) >= 5000


def file_uri(path: Path) -> str:
    return "file://" + quote(str(Path(path).resolve()))


def file_link(path: Path | str, line: int | None = None, text: str | None = None,
              stream: TextIO | None = None, env: dict[str, str] | None = None) -> str:
    """``text`` (default ``path`` or ``path:line``) as a hyperlink to the file where supported."""
    shown = text if text is not None else (f"{path}:{line}" if line else str(path))
    if not supports_hyperlinks(stream, env):
        return shown
    return OSC8.format(uri=file_uri(Path(path)), text=shown)


def chosen_editor(edit_cmd: str | None = None, env: dict[str, str] | None = None) -> str | None:
    env = dict(os.environ) if env is None else env
    return edit_cmd or env.get("VISUAL") or env.get("EDITOR") or None


def editor_command(editor: str, path: Path | str, line: int | None = None) -> list[str]:
    """The argv that opens ``path`` (at ``line`` where the editor takes one).

    ``editor`` may hold ``{file}`` and ``{line}`` placeholders (``--edit-cmd 'code -g {file}:{line}'``);
    otherwise known editors get their own line syntax and others just the file.
    """
    if "{file}" in editor:
        return [part.format(file=str(path), line=line or 1) for part in shlex.split(editor)]
    argv = shlex.split(editor)
    name = Path(argv[0]).name if argv else ""
    if line and name in _PLUS_LINE:
        return [*argv, f"+{line}", str(path)]
    if line and name in _COLON_LINE:
        return [*argv, *_COLON_LINE[name], f"{path}:{line}"]
    return [*argv, str(path)]
