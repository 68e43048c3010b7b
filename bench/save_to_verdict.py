"""Save-to-verdict latency, every phase: from a drill file written to its verdict
recorded, on to a failing kernel's diagnosis, and on to the performance phase.

    python bench/save_to_verdict.py [--device cpu|auto] [--saves 8] [--cold-saves 2] [--quick]
                                    [--edit source|last|mistake|marker] [--mode auto|watchdog|direct]
                                    [--drill 01] [--no-timing] [--passing-only]

A temp workspace holds the drill's solution; each save rewrites it (a temp
file renamed over it, as a "safe write" editor does) with a new first line
that prints a marker, so every save is new content and its check can be told
apart.  Saves alternate a *failing* edit and the solution, as a student's do:
the failing ones are the drill's student-like mistakes that FAIL
(``solutions/NN_slug.mistakes.toml`` on the solution, taken in turn: several
kinds), so the failing saves pay the diagnosis phase's read-outs and probes
(``--passing-only``: the solution every time).  With ``--edit source`` (the default) each save also edits the
kernels' own source (a new comment line inside every ``@triton.jit`` function,
part of the source Triton hashes), so on a GPU every save compiles the kernel
again, as a real edit does; ``--edit last`` edits only the last kernel;
``--edit mistake`` edits the kernels each failing edit changes (its own change,
plus a comment so it compiles afresh) and, on the passing save after it, the same
kernels put right: a student's edit and its fix, one kernel as a rule;
``--edit marker`` changes only the marker line.

The clock starts when the write has returned.  ``verdict s`` stops when the
engine reports the verdict recorded (``CheckFinished``, sent after the
progress file is written): watcher event, debounce, the job sent to the
worker, the correctness launches, the result back, progress saved.
``+diag`` is the further time until ``DiagnosisFinished`` (failing saves only),
``+perf`` the further time until ``PerformanceFinished`` (timed launches, SDPA
on a GPU, roofline).  ``in wkr`` are the phases' own durations inside the
worker; ``launches/compiles`` what each phase cost (``CheckResult.costs``).

Two worker set-ups:

* ``warm``: the engine's default; before each save the spare worker is ready
  (torch and triton imported), as it is when a student takes a few seconds
  between saves;
* ``cold``: no spare (``CheckRunner(warm=False)``): every save pays a worker's
  start-up, as a plain ``flashtutor check`` does.

Modes: ``watchdog`` uses the real file watcher; ``direct`` (taken by ``auto``
when watchdog is not importable, e.g. on a bare GPU box) writes the file and
tells the engine of the save itself (``TutorEngine.notify_saved``): the same
debounce and check path without the kernel's file events.  Only the kernel's
source around the jit function changes between saves, so on a GPU Triton's
on-disk cache spares recompiles after the first (unmeasured) save; a real edit
of the kernel adds its compile time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tutor.authoring.student_kernels import load as load_mistakes  # noqa: E402
from tutor.catalog import get_drill, solution_path  # noqa: E402
from tutor.loop.engine import (  # noqa: E402
    CheckFinished,
    DiagnosisFinished,
    EngineError,
    PerformanceFinished,
    TutorEngine,
    WatcherStatus,
)

MARKER = "save-to-verdict-bench"
THINK_S = 1.2  # default pause before each save: longer than the debouncer's burst window


@dataclass
class Row:
    worker: str
    mode: str
    kind: str  # "failing" or "passing" saves
    latencies: list[float] = field(default_factory=list)  # save -> verdict recorded
    in_worker: list[float] = field(default_factory=list)  # the verdict phase inside the worker
    diag_after: list[float] = field(default_factory=list)  # verdict -> diagnosis arrived (failing saves)
    diag_in_worker: list[float] = field(default_factory=list)
    perf_after: list[float] = field(default_factory=list)  # the phase before -> performance arrived
    perf_in_worker: list[float] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    costs: list[dict] = field(default_factory=list)  # per save: phase -> {seconds, launches, compiles}
    edits: list[str] = field(default_factory=list)  # which mistake (or "solution")


class Verdicts:
    """Engine events, with the moment each ``CheckFinished`` arrived."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.finished: list[tuple[float, CheckFinished]] = []
        self.diagnosis: list[tuple[float, DiagnosisFinished]] = []
        self.performance: list[tuple[float, PerformanceFinished]] = []
        self.events: list[object] = []

    def __call__(self, event: object) -> None:
        now = time.perf_counter()
        with self.cond:
            self.events.append(event)
            if isinstance(event, CheckFinished):
                self.finished.append((now, event))
            if isinstance(event, DiagnosisFinished):
                self.diagnosis.append((now, event))
            if isinstance(event, PerformanceFinished):
                self.performance.append((now, event))
            self.cond.notify_all()

    def phase_for(self, arrivals: list, version: int, timeout: float):
        """(arrival time, event) of ``version`` among ``arrivals`` (one phase's events)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for arrived, event in arrivals:
                    if f"{MARKER} {version}" in event.result.output:
                        return arrived, event
                if time.monotonic() > deadline:
                    raise SystemExit(f"no such phase for save {version}; events so far: {self.events}")
                self.cond.wait(0.1)

    def wait(self, predicate, timeout: float):
        """The first event satisfying ``predicate``; stops the run on an engine error."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for event in self.events:
                    if isinstance(event, EngineError):
                        raise SystemExit(f"engine error: {event.message}")
                    if predicate(event):
                        return event
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out; events so far: {self.events}")
                self.cond.wait(0.1)



def jit_blocks(text: str) -> list[str]:
    """Each ``@triton.jit`` function's source (decorator to the end of its body), in order."""
    lines = text.splitlines(keepends=True)
    blocks = []
    for jit in (i for i, line in enumerate(lines) if line.strip().startswith("@triton.jit")):
        end = next(i for i in range(jit, len(lines)) if lines[i].lstrip().startswith("def ")) + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#)"):
            end += 1  # the body: indented lines, blank lines, comments, the signature's closing parenthesis
        blocks.append("".join(lines[jit:end]))
    return blocks


def changed_kernels(text: str, solution: str) -> set[int]:
    """The indices of the ``@triton.jit`` functions whose source ``text`` changes from ``solution``'s."""
    mine, theirs = jit_blocks(text), jit_blocks(solution)
    return {i for i, block in enumerate(mine) if i >= len(theirs) or block != theirs[i]}


def content(solution: str, version: int | str, edit_source: bool | str | set[int] = False, nonce: str = "") -> str:
    """The text with a marker line; with ``edit_source`` also a new comment inside
    every ``@triton.jit`` function's body (Triton hashes that source): every kernel
    of the file compiles again, for a passing save as for a failing one (``"last"``:
    the last ``@triton.jit`` function only, the kernel a student of drill 04 or 05
    edits last: dQ's, the merge; a set: the functions of those indices);
    ``nonce`` keeps one measurement's edits apart from another's (Triton's on-disk
    cache would otherwise hold them from an earlier run)."""
    text = solution
    if edit_source:
        lines = text.splitlines(keepends=True)
        jits = [i for i, line in enumerate(lines) if line.strip().startswith("@triton.jit")]
        chosen = (jits[-1:] if edit_source == "last" else [jits[i] for i in sorted(edit_source) if i < len(jits)]
                  if isinstance(edit_source, set) else jits)
        for jit in reversed(chosen):  # from the last, so the earlier indices stay right
            body = next(i for i in range(jit, len(lines)) if lines[i].rstrip().endswith(":")) + 1
            while lines[body].lstrip().startswith(('"""', "#")) or not lines[body].strip():
                if lines[body].lstrip().startswith('"""'):  # skip a docstring, its closing line included
                    end = body if lines[body].count('"""') >= 2 else next(
                        i for i in range(body + 1, len(lines)) if '"""' in lines[i])
                    body = end + 1
                else:
                    body += 1
            indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
            lines.insert(body, f"{indent}# bench edit {version} ({nonce}): the kernel's source changed\n")
        text = "".join(lines)
    return f"print('{MARKER} {version}')\n{text}"


def save(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.bench-tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def failing_edits(drill_id: str) -> list[tuple[str, str]]:
    """(name, text) of the drill's student-like mistakes on its solution that FAIL."""
    drill = get_drill(drill_id)
    return [(m.name, m.text(drill)) for m in load_mistakes(drill) if m.base == "solution" and not m.passes]


def measure(args: argparse.Namespace, warm: bool, saves: int, watch: bool, workspace: Path) -> tuple[list[Row], object]:
    drill = get_drill(args.drill)
    file = workspace / "drills" / drill.file
    solution = solution_path(drill).read_text(encoding="utf-8")
    failing = [] if args.passing_only else failing_edits(args.drill)
    verdicts = Verdicts()
    engine = TutorEngine(workspace, device=args.device, timeout_s=args.timeout, on_event=verdicts,
                         watch=watch, warm=warm, timing=not args.no_timing)
    engine.start()
    try:
        status = verdicts.wait(lambda e: isinstance(e, WatcherStatus), 30)
        mode = f"watchdog/{status.mode}" if watch else "direct"
        device = None
        version = 0
        rows = {kind: Row(worker="warm" if warm else "cold", mode=mode, kind=kind) for kind in ("failing", "passing")}
        nonce = uuid.uuid4().hex[:8]  # this measurement's edits compile: no earlier run cached them
        edited: set[int] = set()
        wait_s = args.timeout + 60
        for n in range(saves + 1):  # the first save is not counted: it fills caches (Triton's, the OS's)
            version += 1
            if failing and n % 2 == 1:  # odd saves: a failing edit, each kind in turn
                name, text = failing[(n // 2) % len(failing)]
                edited = changed_kernels(text, solution)  # --edit mistake: the kernels the mistake changes
            else:  # --edit mistake: the kernels the last mistake changed, put right (or the last kernel)
                name, text = "solution", solution
            if warm:
                engine.wait_warm()
            time.sleep(args.think)
            which = {"source": True, "last": "last", "mistake": edited or "last"}.get(args.edit, False)
            save(file, content(text, version, which, nonce))
            written = time.perf_counter()
            if not watch:
                engine.notify_saved(file)
            arrived, finished = verdicts.phase_for(verdicts.finished, version, wait_s)
            device = finished.result.device
            result = finished.result
            diagnosing = result.diagnosis_phase.status == "pending"
            timed = result.performance.status == "pending"
            before_perf = arrived
            if diagnosing:
                diag_arrived, diagnosed = verdicts.phase_for(verdicts.diagnosis, version, wait_s)
                result, before_perf = diagnosed.result, diag_arrived
            if timed:
                perf_arrived, perf = verdicts.phase_for(verdicts.performance, version, wait_s)
                result = perf.result
            if n == 0:
                continue
            row = rows["failing" if finished.result.outcome in ("failed", "not-run") else "passing"]
            row.latencies.append(arrived - written)
            row.in_worker.append(finished.result.duration_s)
            row.outcomes.append(result.outcome)
            row.edits.append(name)
            row.costs.append({phase: c.__dict__ for phase, c in result.costs.items()})
            extra = ""
            if diagnosing:
                row.diag_after.append(diag_arrived - arrived)
                row.diag_in_worker.append(result.diagnosis_phase.duration_s)
                extra += (f"; diagnosis {result.diagnosis_phase.status} {diag_arrived - arrived:.3f} s later "
                          f"(in worker {result.diagnosis_phase.duration_s:.3f} s, codes {result.codes})")
            if timed:
                row.perf_after.append(perf_arrived - before_perf)
                row.perf_in_worker.append(result.performance.duration_s)
                extra += (f"; performance {result.performance.status} {perf_arrived - before_perf:.3f} s later "
                          f"(in worker {result.performance.duration_s:.3f} s)")
            spent = ", ".join(f"{phase} {c.launches} launches/{c.compiles} compiles"
                              + (f" ({c.compiling_s:.2f} s compiling)" if c.compiling_s else "")
                              for phase, c in result.costs.items())
            print(f"  {row.worker} save {n} ({name}): verdict {finished.result.outcome} {arrived - written:.3f} s "
                  f"(in worker {finished.result.duration_s:.3f} s){extra} [{spent}]", flush=True)
        return [row for row in rows.values() if row.latencies], device
    finally:
        engine.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, gpu or cpu (the interpreter)")
    parser.add_argument("--drill", default="01")
    parser.add_argument("--saves", type=int, default=8, help="measured saves with the warm worker")
    parser.add_argument("--cold-saves", type=int, default=2, help="measured saves without it (0: skip)")
    parser.add_argument("--passing-only", action="store_true", help="every save the solution (no failing edits)")
    parser.add_argument("--mode", choices=("auto", "watchdog", "direct"), default="auto")
    parser.add_argument("--no-timing", action="store_true", help="checks without the timed launches")
    parser.add_argument("--edit", choices=("source", "last", "mistake", "marker"), default="source",
                        help="source: every save edits every kernel's source (all recompile on a GPU); "
                             "last: only the file's last kernel; mistake: the kernels the failing edit "
                             "changes, then the same ones put right (a student's edit and its fix); "
                             "marker: only a marker line changes")
    parser.add_argument("--spare-during-check", action="store_true",
                        help="start the next spare worker once a check's verdict is in, not after the check "
                             "(the default before run 26), to see what the overlap costs a check")
    parser.add_argument("--think", type=float, default=THINK_S,
                        help="seconds between a save's last phase and the next save (a student reading the result; "
                             "a spare worker's warm-up runs in them)")
    parser.add_argument("--quick", action="store_true", help="3 warm saves and 1 cold one")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()
    if args.quick:
        args.saves, args.cold_saves = 4, 2
    if args.spare_during_check:
        import tutor.loop.runner

        tutor.loop.runner.SPARE_DURING_CHECK = True

    have_watchdog = importlib.util.find_spec("watchdog") is not None
    if args.mode == "watchdog" and not have_watchdog:
        parser.error("watchdog is not installed: use --mode direct")
    watch = args.mode == "watchdog" or (args.mode == "auto" and have_watchdog)
    print(f"mode: {'watchdog (the real file watcher)' if watch else 'direct (no watchdog: the engine is told of each save)'}")

    rows, device = [], None
    with tempfile.TemporaryDirectory(prefix="flashtutor-bench-") as tmp:
        workspace = Path(tmp)
        (workspace / "drills").mkdir()
        drill = get_drill(args.drill)
        (workspace / "drills" / drill.file).write_text(solution_path(drill).read_text(encoding="utf-8"))
        for warm, saves in ((True, args.saves), (False, args.cold_saves)):
            if saves > 0:
                measured, device = measure(args, warm, saves, watch, workspace)
                rows += measured

    label = device.label if device else "?"
    versions = f"torch {device.torch}, triton {device.triton}" if device else ""
    print(f"\nsave-to-verdict, drill {args.drill} ({solution_path(get_drill(args.drill)).name}), "
          f"saves edit {dict(source='every kernel', last='the last kernel', mistake='the kernels each mistake changes, then fixes').get(args.edit, 'the marker line only')}, "
          f"timing {'off' if args.no_timing else 'on'}; {label}; {versions}; python {sys.version.split()[0]}")
    import tutor.loop.runner
    from tutor.harness.check import PARALLEL_COMPILE_ENV

    compiles = ("none (the interpreter)" if device is not None and device.interpreter
                else "one after another" if os.environ.get(PARALLEL_COMPILE_ENV) == "0" else "concurrent")
    print(f"compiles: {compiles} "
          f"({PARALLEL_COMPILE_ENV}={os.environ.get(PARALLEL_COMPILE_ENV, 'unset')}); next spare worker started "
          f"{'once the verdict is in (during the performance phase of)' if tutor.loop.runner.SPARE_DURING_CHECK else 'after'} "
          "each check")
    print("medians in seconds; verdict: save -> verdict recorded; +diag: verdict -> diagnosis (failing saves); "
          "+perf: the phase before -> performance; rest: verdict - its phase in the worker")
    print(f"{'worker':<7}{'saves':<8}{'n':>3}{'verdict':>9}{'min':>7}{'max':>7}{'in wkr':>8}{'rest':>7}"
          f"{'+diag':>8}{'in wkr':>8}{'+perf':>8}{'in wkr':>8}  launches v/d/p  compiles v/d/p")

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.3f}" if values else "-"

    def per_phase(row: Row, what: str) -> str:
        def one(phase: str) -> str:
            values = [c[phase][what] for c in row.costs if phase in c and c[phase][what] is not None]
            return f"{statistics.median(values):g}" if values else "-"
        return "/".join(one(phase) for phase in ("verdict", "diagnosis", "performance"))

    for row in rows:
        rest = [total - check for total, check in zip(row.latencies, row.in_worker)]
        print(f"{row.worker:<7}{row.kind:<8}{len(row.latencies):>3}{med(row.latencies):>9}{min(row.latencies):>7.3f}"
              f"{max(row.latencies):>7.3f}{med(row.in_worker):>8}{med(rest):>7}{med(row.diag_after):>8}"
              f"{med(row.diag_in_worker):>8}{med(row.perf_after):>8}{med(row.perf_in_worker):>8}"
              f"  {per_phase(row, 'launches'):<16}{per_phase(row, 'compiles')}")
    warm_rows = {row.kind: row for row in rows if row.worker == "warm"}
    if "failing" in warm_rows and "passing" in warm_rows:
        ratio = statistics.median(warm_rows["failing"].latencies) / statistics.median(warm_rows["passing"].latencies)
        print(f"warm: a failing save's verdict takes {ratio:.2f}x a passing one's (median)")
    if args.json:
        args.json.write_text(json.dumps({"device": label, "versions": versions, "drill": args.drill,
                                         "rows": [row.__dict__ for row in rows]}, indent=1))
    unexpected = [(row.kind, o) for row in rows for o in row.outcomes
                  if (row.kind == "passing") != (o in ("solved", "passed-with-finding"))]
    if unexpected:
        print(f"warning: outcomes that do not match their save's kind: {unexpected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
