"""``flashtutor``: the command line.  Each sub-command lives in its own module
with a ``register(subparsers)`` function that adds its parser and sets
``func`` (called with the parsed arguments, returning the exit code)."""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import TYPE_CHECKING

from tutor import __version__

if TYPE_CHECKING:
    from tutor.state.progress import ProgressStore

# Exit codes shared by every sub-command.
EXIT_OK = 0  # passed / solved / done
EXIT_FAILED = 1  # the check ran and the drill is not solved
EXIT_USAGE = 2  # argparse's own code for bad usage
EXIT_NOT_RUN = 3  # the drill could not run: syntax, import, compile error, crash, timeout

COMMAND_MODULES = ("check", "quiz", "watch", "workspace", "launch", "doctor", "completion", "dev")


def say_warnings(store: ProgressStore | None) -> None:
    """Print what the progress store found and did (a corrupt file moved aside to
    ``progress.json.corrupt-<time>``, a workspace it cannot write), once: each
    warning is printed to stderr and then dropped from the store."""
    if store is None:
        return
    for warning in store.warnings:
        print(f"flashtutor: {warning}", file=sys.stderr)
    store.warnings.clear()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flashtutor",
        description="FlashAttention drills in Triton, checked on every save.",
    )
    parser.add_argument("--version", action="version", version=f"flashtutor {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"tutor.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        if not (sys.stdin.isatty() and sys.stdout.isatty()):  # a script or a pipe: the help, as before
            parser.print_help()
            return EXIT_USAGE
        args = parser.parse_args(["launch"])  # a bare `flashtutor` in a terminal opens the app (rustlings' way)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `flashtutor ... | head`: the reader left; say nothing more
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
