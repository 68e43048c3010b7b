"""``flashtutor doctor``: versions, device, a tiny kernel, file watching and the
workspace, with the fix for anything that stops a check (exit 0 only when a
check can run)."""

from __future__ import annotations

import argparse
import json

from tutor.cli import EXIT_NOT_RUN, EXIT_OK
from tutor.doctor import diagnose
from tutor.paths import default_workspace

MARKS = {"ok": "ok  ", "warning": "warn", "error": "FAIL"}


def register(subparsers: argparse._SubParsersAction) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="check that this machine and workspace can run a check, and say how to fix what cannot",
        description="Probe the installed versions, the device, a tiny Triton kernel, file watching and the "
                    "workspace. Exit 0 only when a check can run.")
    doctor.add_argument("--json", action="store_true", help="print the findings as one JSON object")
    doctor.set_defaults(func=run_doctor_command)


def run_doctor_command(args: argparse.Namespace) -> int:
    report = diagnose(default_workspace())
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("versions: " + ", ".join(f"{name} {version}" for name, version in report.versions.items()))
        width = max(len(f.name) for f in report.findings)
        for finding in report.findings:
            print(f"[{MARKS[finding.level]}] {finding.name:<{width}}  {finding.detail}")
            if finding.fix and finding.level != "ok":
                print(f"       {'':<{width}}  fix: {finding.fix}")
        print("\n" + ("a check can run here" if report.can_check else "a check cannot run here: fix the FAIL lines"))
    return EXIT_OK if report.can_check else EXIT_NOT_RUN
