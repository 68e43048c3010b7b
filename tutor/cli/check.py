"""``flashtutor check`` and ``flashtutor list``."""

from __future__ import annotations

import argparse
import sys

from tutor.catalog import Drill, Hint, all_drills
from tutor.cli import EXIT_FAILED, EXIT_NOT_RUN, EXIT_OK, EXIT_USAGE, say_warnings
from tutor.harness.device import DEVICE_CHOICES
from tutor.harness.result import CheckResult
from tutor.links import file_link
from tutor.loop.runner import DEFAULT_TIMEOUT_S, CheckRunner, Phase, WorkerStartError
from tutor.paths import default_workspace
from tutor.report import LABEL_WIDTH, diagnosis_lines, performance_lines, verdict_lines
from tutor.state.progress import (
    FAILING,
    IN_PROGRESS,
    NOT_STARTED,
    PASSED,
    CheckRecord,
    DrillStatus,
    ProgressStore,
    attempt_content_id,
    done_count,
    drill_summaries,
    not_saved_note,
    status_words,
)
from tutor.state.targets import Target, TargetError, resolve, workspace_file

EXIT_CODES = {"solved": EXIT_OK, "passed-with-finding": EXIT_FAILED, "failed": EXIT_FAILED, "not-run": EXIT_NOT_RUN}


def exit_code(result: CheckResult) -> int:
    return EXIT_CODES[result.outcome]


def add_runner_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICE_CHOICES, default="auto",
                        help="auto: a GPU if one is visible; cpu: force Triton's interpreter")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"stop a check after this long (default {DEFAULT_TIMEOUT_S:g})")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = subparsers.add_parser("check", help="check a drill and print the report",
                                  description="Run a drill's kernel against the reference and report.")
    check.add_argument("target", nargs="?", help="drill id (01), name (causal_mask) or a path to a file")
    check.add_argument("--drill", metavar="ID", help="which drill the file implements, when its name does not say")
    check.add_argument("--all", action="store_true", help="check every drill in the workspace")
    check.add_argument("--json", action="store_true", help="print one JSON object per drill instead of the report")
    check.add_argument("--no-timing", action="store_true", help="skip the timed launches")
    check.add_argument("--seed", type=int, help="fix the random inputs (default: fresh every run)")
    add_runner_options(check)
    check.set_defaults(func=run_check_command)

    listing = subparsers.add_parser("list", help="list the drills")
    listing.set_defaults(func=run_list_command)


def _targets(args: argparse.Namespace) -> list[Target]:
    if args.all:
        if args.target or args.drill:
            raise TargetError("--all checks every drill: name no drill with it", usage=True)
        return [Target(d, workspace_file(d)) for d in all_drills()]
    if not args.target:
        raise TargetError("name a drill (e.g. `flashtutor check 01`) or use --all", usage=True)
    return [resolve(args.target, args.drill)]


def _paper_drill_line(drill: Drill) -> str:
    return f"{drill.id} {drill.title}: a paper drill - answer it with `flashtutor quiz`"


def _paper_drill_code(drill: Drill) -> int:
    """A paper drill is solved when its quiz is done (status passed); until then, as a
    kernel drill that is not solved yet, exit 1."""
    workspace = default_workspace()
    done = workspace is not None and ProgressStore(workspace).status(drill.id) == PASSED
    return EXIT_OK if done else EXIT_FAILED


def run_check_command(args: argparse.Namespace) -> int:
    try:
        targets = _targets(args)
    except TargetError as exc:
        print(f"flashtutor: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.usage else EXIT_NOT_RUN
    codes = []
    with CheckRunner(device=args.device, timeout_s=args.timeout, warm=len(targets) > 1) as runner:
        for target in targets:
            if not target.drill.is_kernel:
                if not args.json:
                    print(_paper_drill_line(target.drill) + "\n")
                codes.append(_paper_drill_code(target.drill))  # exit 1 until its quiz is done
                continue
            if not target.file.exists():
                print(f"flashtutor: {target.file} is missing", file=sys.stderr)
                codes.append(EXIT_NOT_RUN)
                continue
            title = f"{target.drill.id} {target.drill.title} ({file_link(target.file, stream=sys.stdout)})"
            store = _store_for(target)  # one progress store for every phase of this check
            shown = _Shown(args, target, title, store)
            try:
                result = runner.check(target.drill.id, target.file, timing=not args.no_timing, seed=args.seed,
                                      on_phase=shown.phase)
            except WorkerStartError as exc:
                print(f"flashtutor: {exc}", file=sys.stderr)
                return EXIT_NOT_RUN
            shown.last(result)
            if args.json:
                print(result.to_json())  # one object: every phase (each with its status)
            else:
                performance = performance_lines(result) if result.error is None else []
                if performance:
                    print("\n".join(performance))
                print()
            codes.append(exit_code(result))
    return max(codes, default=EXIT_OK)


class _Shown:
    """One check's phases, printed (and recorded) in order as each arrives: the
    verdict, the diagnosis, then (by the caller) the performance."""

    def __init__(self, args: argparse.Namespace, target: Target, title: str, store: ProgressStore | None):
        self.args, self.target, self.title, self.store = args, target, title, store
        self.verdict: CheckResult | None = None
        self.diagnosed = False

    def phase(self, phase: Phase, partial: CheckResult) -> None:
        if phase == "verdict":
            self.verdict = partial
            _show_verdict(self.args, self.target, partial, self.title, self.store)
        else:
            self._diagnosis(partial)

    def _diagnosis(self, result: CheckResult) -> None:
        self.diagnosed = True
        assert self.verdict is not None
        record = None
        if self.store is not None:
            record = self.store.record_diagnosis(result, self.target.drill, attempt_content_id(result))
        if self.args.json:
            return
        _erase_indicator()
        lines = diagnosis_lines(result)
        before, after = self.verdict.error, result.error
        if before is not None and after is not None and after.message != before.message:
            lines += ["", f"{'diagnosis':<{LABEL_WIDTH}}: {after.message[len(before.message):].strip()}"]
        print("\n".join(lines[1:] if lines[:1] == [""] else lines), flush=True)
        unlocked = record.unlocked_hints(self.target.drill) if record is not None else []
        print(_progress_lines(self.target, record, self.store, unlocked, counted_line=False), end="")
        _indicate(self.target, result)

    def last(self, result: CheckResult) -> None:
        """The check's end: the verdict if it was not shown, the diagnosis if it was
        not, and the performance's record."""
        if self.verdict is None:  # no later phase: the result is the verdict (and its diagnosis)
            _show_verdict(self.args, self.target, result, self.title, self.store)
            return
        if not self.diagnosed and self.verdict.diagnosis_phase.status == "pending":
            self._diagnosis(result)
        if not self.args.json:
            _erase_indicator()
        if self.store is not None and result.performance.status == "done":
            self.store.record_performance(result, attempt_content_id(result))


def _erase_indicator() -> None:
    if sys.stderr.isatty():
        print("\033[K", end="", file=sys.stderr, flush=True)


def _indicate(target: Target, result: CheckResult) -> None:
    """An indicator on the terminal while a later phase runs; erased when it is in."""
    print()
    if not sys.stderr.isatty():
        return
    if result.diagnosis_phase.status == "pending":
        print(f"diagnosing {target.drill.id}… (the verdict above is in)", end="\r", file=sys.stderr, flush=True)
    elif result.performance.status == "pending":
        print(f"timing {target.drill.id}… (the verdict above is in)", end="\r", file=sys.stderr, flush=True)


def _show_verdict(args: argparse.Namespace, target: Target, verdict: CheckResult, title: str,
                  store: ProgressStore | None) -> None:
    record = _record_progress(store, target, verdict)
    if args.json:
        return  # --json prints one object per drill once every phase is in
    # a pending diagnosis: the indicator says it runs, and what it finds follows
    print("\n".join(verdict_lines(verdict, title, links=True, diagnosis=verdict.diagnosis_phase.status != "pending")),
          flush=True)
    unlocked = record.unlocked_hints(target.drill) if record is not None else []
    print(_progress_lines(target, record, store, unlocked), end="")
    if verdict.diagnosis_phase.status == "pending" or verdict.performance.status == "pending":
        _indicate(target, verdict)
    sys.stdout.flush()


def _store_for(target: Target) -> ProgressStore | None:
    """The workspace's progress when ``target`` is the workspace's own drill file; a
    check of some other file (a solution, a copy) is not recorded."""
    workspace = default_workspace()
    if workspace is None or target.file != workspace_file(target.drill, workspace).resolve():
        return None
    return ProgressStore(workspace)


def _record_progress(store: ProgressStore | None, target: Target, result: CheckResult) -> CheckRecord | None:
    """A check of the workspace's own drill file counts as an attempt when its content
    is new, as a save in `watch` or the app does."""
    if store is None:
        return None
    record = store.record_check(result, target.drill, attempt_content_id(result))
    for warning in store.warnings:  # said once per command, plainly (not writable, file moved aside)
        print(f"flashtutor: {warning}", file=sys.stderr)
    store.warnings.clear()
    return record


def _progress_lines(target: Target, record: CheckRecord | None, store: ProgressStore | None,
                    unlocked: list[Hint], counted_line: bool = True) -> str:
    if record is None or store is None:
        return ""
    lines = []
    if counted_line and not record.counted:
        lines.append(f"not a new attempt ({record.not_counted}): attempts stay at {record.progress.attempts}")
    note = not_saved_note(store, "command")
    suffix = f" - {note}" if note else ""
    for hint in unlocked:
        lines.append(f"hint unlocked: {hint.title} (`flashtutor hint {target.drill.id}`){suffix}")
    return "".join(f"\n{line}" for line in lines) + ("\n" if lines else "")


def run_list_command(args: argparse.Namespace) -> int:
    """The drills with their status and attempts; the mark reads without colour:
    ``[x]`` passed, ``[!]`` failing, ``[~]`` in progress (a quiz), ``[ ]`` not started.
    The status is the current file's state, with ``solved before`` when it no
    longer passes but once did."""
    marks: dict[DrillStatus, str] = {PASSED: "[x]", FAILING: "[!]", IN_PROGRESS: "[~]", NOT_STARTED: "[ ]"}
    workspace = default_workspace()
    store = ProgressStore(workspace) if workspace is not None else None
    rows = drill_summaries(store, all_drills())
    say_warnings(store)  # a corrupt progress file moved aside: said, never silently
    print(f"    {'id':<4}{'drill':<40} {'status':<23} {'attempts':>8}  file")
    for row in rows:  # the rows the app's list shows (tutor.state.progress.drill_summaries)
        drill = row.drill
        mark = "[~]" if row.finding_open else marks[row.status]  # passed, a finding open: not failing
        print(f"{mark} {drill.id:<4}{drill.title:<40} {status_words(row):<23} "
              f"{row.attempts:>8}  drills/{drill.file}")
    where = (f"workspace {workspace}" if workspace is not None
             else "no workspace found (`flashtutor init DIR` makes one)")
    print(f"\n{done_count(rows)}/{len(rows)} done · {where}")
    return EXIT_OK
