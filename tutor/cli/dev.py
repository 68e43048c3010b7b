"""``flashtutor dev``: tools for drill authors.

``flashtutor dev check`` verifies every drill against its own data (see
:mod:`tutor.authoring.devcheck`); ``flashtutor dev new NAME`` scaffolds a drill that
``dev check`` then guides to completion (see :mod:`tutor.authoring.devnew`).  Both work
on the content root (the clone's ``drills/`` and ``solutions/``), or on
``--root DIR`` / ``$FLASHTUTOR_CONTENT_ROOT``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tutor.catalog import UnknownDrill
from tutor.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from tutor.harness.device import DEVICE_CHOICES
from tutor.paths import CONTENT_ROOT_ENV


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = subparsers.add_parser(
        "dev",
        help="drill authors: check every drill against its data, scaffold a new one",
        description="Tools for drill authors. See docs/DRILLS.md.",
    )
    commands = dev.add_subparsers(dest="dev_command", metavar="DEV_COMMAND")
    check = commands.add_parser(
        "check",
        help="every drill: data parses, hint codes exist, shipped fails as documented, "
        "solution passes, every diagnosis has a fixture that produces it",
        description="Check every drill (or one) against its own data; exit 1 on any failure. "
        "Kernels run through the real harness, one worker each (minutes on a CPU).",
    )
    check.add_argument("--drill", metavar="ID", help="only this drill (id, slug or name)")
    check.add_argument("--quick", action="store_true", help="data checks only: run no kernel")
    check.add_argument("--json", action="store_true", help="print the report as one JSON object")
    check.add_argument("--device", default="auto", choices=DEVICE_CHOICES,
                       help="where the kernels run (default: a GPU when there is one)")
    _root_option(check)
    check.set_defaults(func=run_check_command)

    new = commands.add_parser(
        "new",
        help="scaffold a new kernel drill (kernel with TODOs, TOML, solution, mistakes table)",
        description="Write drills/NN_NAME.py and .toml, solutions/NN_NAME_solution.py and "
        "NN_NAME.mistakes.toml with the next free id; then run `flashtutor dev check --drill NN`.",
    )
    new.add_argument("name", help="the drill's slug: lower-case words joined by _ (e.g. alibi_bias)")
    new.add_argument("--id", dest="drill_id", metavar="NN", help="the id (default: one more than the last)")
    new.add_argument("--problem", default="attention", metavar="PROBLEM",
                     help="what the kernel computes: a problem of tutor.harness.problems (its first drill is the "
                     "template), or a new name (a problem module skeleton is written too); default attention")
    _root_option(new)
    new.set_defaults(func=run_new_command)

    sync = commands.add_parser(
        "sync",
        help="rewrite what is derived from the drills' TOML: the README tables and the pristine manifest",
        description="Rewrite the drill tables of README.md and drills/README.md (between their marker lines) "
        "from each drill's summary, shipped_summary and competency, then the pristine manifest "
        "(tutor/shipped_drills.json, for the package's own clone).",
    )
    sync.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything is stale")
    _root_option(sync)
    sync.set_defaults(func=run_sync_command)

    def print_usage(args: argparse.Namespace) -> int:  # `flashtutor dev` with no subcommand
        dev.print_help()
        return EXIT_USAGE

    dev.set_defaults(func=print_usage)


def _root_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, metavar="DIR",
                        help=f"the content root holding drills/ and solutions/ (default: ${CONTENT_ROOT_ENV}, "
                        "else the clone this runs from)")


def _use_root(args: argparse.Namespace) -> Path | None:
    if args.root is None:
        return None
    root: Path = args.root.resolve()
    os.environ[CONTENT_ROOT_ENV] = str(root)  # the check workers inherit it
    return root


def run_check_command(args: argparse.Namespace) -> int:
    from tutor.authoring import devcheck

    root = _use_root(args)
    progress = None if args.json else (lambda message: print(message, file=sys.stderr, flush=True))
    try:
        report = devcheck.run(root=root, drill=args.drill, quick=args.quick, device=args.device, progress=progress)
    except UnknownDrill as exc:
        print(f"flashtutor dev check: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(devcheck.render_table(report))
    return EXIT_OK if report.ok else EXIT_FAILED


def run_new_command(args: argparse.Namespace) -> int:
    from tutor.authoring import devnew

    root = _use_root(args)
    try:
        written = devnew.scaffold(args.name, root=root, drill_id=args.drill_id, problem=args.problem)
    except devnew.ScaffoldError as exc:
        print(f"flashtutor dev new: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for path in written:
        print(f"wrote {path}")
    for path in _sync(root):
        print(f"rewrote {path} (derived from the drills' TOML)")
    drill_id = written[0].name[:2]
    print(f"\nNext: flashtutor dev check --drill {drill_id} --quick"
          + (f" --root {root}" if root else "") + "  (it says what to do next)")
    return EXIT_OK


def _sync(root: Path | None) -> list[Path]:
    from tutor.authoring import derived
    from tutor.paths import content_root

    try:
        return derived.sync(root or content_root())
    except derived.MissingMarkers as exc:
        print(f"flashtutor dev sync: {exc}", file=sys.stderr)
        return []


def run_sync_command(args: argparse.Namespace) -> int:
    from tutor.authoring import derived
    from tutor.paths import content_root

    root = _use_root(args) or content_root()
    try:
        stale = derived.stale(root)
    except derived.MissingMarkers as exc:
        print(f"flashtutor dev sync: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.check:
        for path in stale:
            print(f"stale: {path} (run {derived.SYNC_COMMAND})")
        return EXIT_FAILED if stale else EXIT_OK
    for path in derived.sync(root):
        print(f"rewrote {path}")
    if not stale:
        print("every derived file matches the drills' TOML")
    elif derived.owns_manifest(root):
        print("if the app's list screen changed: python3 -m pytest tests/test_app_snapshots.py --snapshot-update")
    return EXIT_OK
