"""``flashtutor launch``: the Textual app.

This module stays light: Textual and the app are imported only when the
command runs (``tutor.cli`` is part of the core, which never imports Textual
at import time; .importlinter names this one crossing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tutor.catalog import UnknownDrill, get_drill
from tutor.cli import EXIT_OK, EXIT_USAGE
from tutor.paths import NoWorkspace, require_workspace

NO_TTY = (
    "flashtutor: `launch` is a full-screen terminal app and needs a terminal on stdin, stdout and stderr\n"
    "(it was started with {which} redirected). In scripts and pipes use `flashtutor watch` or `flashtutor check`."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from tutor.cli.check import add_runner_options

    launch = subparsers.add_parser(
        "launch",
        help="the full-screen app: drills, live results on every save, hints, quiz",
        description="Open the flashtutor app: every save of a drill file is checked and shown at once.",
    )
    launch.add_argument("drill", nargs="?", help="open this drill right away (id or name)")
    launch.add_argument("--workspace", type=Path, metavar="DIR",
                        help="the workspace (default: the one around the current directory)")
    launch.add_argument("--poll", action="store_true",
                        help="watch files by polling (network filesystems, WSL's /mnt)")
    launch.add_argument("--edit-cmd", metavar="CMD",
                        help="the editor the `e` key runs, e.g. 'code -g {file}:{line}' or 'vim +{line} {file}' "
                             "(default: $VISUAL, then $EDITOR; known editors get the error's line)")
    add_runner_options(launch)
    launch.set_defaults(func=run_launch_command)


def missing_tty() -> str | None:
    """Which standard streams are not a terminal, or None when all are (Textual
    reads keys from stdin and draws on stderr; stdout redirected means a pipe)."""
    streams = (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))
    redirected = [name for name, stream in streams if stream is None or not stream.isatty()]
    if not redirected:
        return None
    return redirected[0] if len(redirected) == 1 else ", ".join(redirected[:-1]) + " and " + redirected[-1]


def run_launch_command(args: argparse.Namespace) -> int:
    try:
        workspace = require_workspace(args.workspace)
    except NoWorkspace as exc:
        print(f"flashtutor: {exc} (or pass --workspace DIR)", file=sys.stderr)
        return EXIT_USAGE
    first = None
    if args.drill:
        try:
            first = get_drill(args.drill)
        except UnknownDrill as exc:
            print(f"flashtutor: {exc}", file=sys.stderr)
            return EXIT_USAGE
    which = missing_tty()
    if which:
        print(NO_TTY.format(which=which), file=sys.stderr)
        return EXIT_USAGE
    from tutor.app.app import FlashTutorApp  # Textual is imported here, never at CLI start-up

    app = FlashTutorApp.with_engine(
        workspace, device=args.device, timeout_s=args.timeout, force_polling=args.poll, first_drill=first,
        edit_cmd=args.edit_cmd,
    )
    app.run()
    return EXIT_OK if app.return_code in (None, 0) else int(app.return_code)
