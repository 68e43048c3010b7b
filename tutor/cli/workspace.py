"""``flashtutor init``, ``flashtutor reset`` and ``flashtutor hint``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tutor.catalog import UnknownDrill, get_drill, kernel_drills
from tutor.cli import EXIT_NOT_RUN, EXIT_OK, EXIT_USAGE, say_warnings
from tutor.paths import NoWorkspace, default_workspace, require_workspace
from tutor.state.hints import hint_states, next_locked
from tutor.state.progress import DrillProgress, ProgressStore
from tutor.state.workspace import WorkspaceError, init_workspace, reset_drill

DEFAULT_INIT_DIR = "flashtutor"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = subparsers.add_parser("init", help="make a workspace with the drills (for an installed package)",
                                 description="Copy the pristine drills into DIR/drills and start a progress file.")
    init.add_argument("directory", nargs="?", default=DEFAULT_INIT_DIR, metavar="DIR",
                      help=f"where to make it (default: ./{DEFAULT_INIT_DIR})")
    init.set_defaults(func=run_init_command)

    reset = subparsers.add_parser("reset", help="restore a drill as shipped (your version is backed up first)")
    reset.add_argument("drill", nargs="?", help="drill id (01) or name (causal_mask)")
    reset.add_argument("--all", action="store_true", help="reset every kernel drill (each backed up first)")
    reset.set_defaults(func=run_reset_command)

    hint = subparsers.add_parser("hint", help="the hints you have unlocked, and what unlocks the next")
    hint.add_argument("drill", help="drill id (01) or name (causal_mask)")
    hint.set_defaults(func=run_hint_command)


def _fail(message: str) -> int:
    print(f"flashtutor: {message}", file=sys.stderr)
    return EXIT_NOT_RUN


def run_init_command(args: argparse.Namespace) -> int:
    try:
        report = init_workspace(Path(args.directory))
    except WorkspaceError as exc:
        return _fail(str(exc))
    for path in report.created:
        print(f"created {path}")
    for path in report.kept:
        print(f"kept    {path} (already there)")
    print(f"\nworkspace ready: {report.workspace}")
    print(f"next: cd {args.directory} && flashtutor watch   (or flashtutor launch)")
    return EXIT_OK


def run_reset_command(args: argparse.Namespace) -> int:
    if bool(args.drill) == bool(args.all):
        print("flashtutor: name one drill (`flashtutor reset 01`) or use --all", file=sys.stderr)
        return EXIT_USAGE
    try:
        workspace = require_workspace()
    except NoWorkspace as exc:
        return _fail(str(exc))
    try:
        drills = list(kernel_drills()) if args.all else [get_drill(args.drill)]
    except UnknownDrill as exc:
        return _fail(str(exc))
    for drill in drills:
        try:
            report = reset_drill(drill, workspace)
        except WorkspaceError as exc:
            return _fail(str(exc))
        if not report.changed:
            print(f"{report.file} is already as shipped: nothing to reset")
            continue
        if report.backup is not None:
            print(f"your version is saved in {report.backup}")
        print(f"restored {report.file} from {report.source}")
    return EXIT_OK


def run_hint_command(args: argparse.Namespace) -> int:
    try:
        drill = get_drill(args.drill)
    except UnknownDrill as exc:
        return _fail(str(exc))
    workspace = default_workspace()
    store = ProgressStore(workspace) if workspace is not None else None
    progress = store.drill(drill.id) if store is not None else DrillProgress()
    say_warnings(store)  # a corrupt progress file moved aside: said here, not silently
    states = hint_states(drill, progress.unlocked_hints)
    total = len(states)
    print(f"{drill.id} {drill.title}: hints")
    for state in states:
        if state.unlocked:
            print(f"\nhint {state.number}/{total}: {state.hint.title}\n")
            print("\n".join("    " + line if line else "" for line in state.hint.text.splitlines()))
    upcoming = next_locked(states)
    locked = sum(not s.unlocked for s in states)
    if upcoming is None:
        print("\nevery hint is unlocked")
    else:
        more = f" ({locked - 1} more after it)" if locked > 1 else ""
        print(f"\nnext: hint {upcoming.number}/{total}, \"{upcoming.hint.title}\", {upcoming.unlock_rule}{more}")
    if drill.is_kernel:
        broken = (f"; {progress.not_run} save{'s' if progress.not_run != 1 else ''} that could not run "
                  "(no attempts)" if progress.not_run else "")
        print(f"attempts so far: {progress.attempts} (checks whose kernel ran){broken}")
    return EXIT_OK
