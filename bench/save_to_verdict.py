"""Save-to-verdict latency: from a drill file written to its result recorded.

    python bench/save_to_verdict.py [--device cpu|auto] [--saves 7] [--cold-saves 3]
                                    [--mode auto|watchdog|direct] [--drill 01] [--no-timing]

A temp workspace holds the drill's solution; each save rewrites it (a temp
file renamed over it, as a "safe write" editor does) with a new first line
that prints a marker, so every save is new content and its check can be told
apart.  The clock starts when the write has returned and stops when the
engine reports the check recorded (``CheckFinished``, sent after the progress
file is written): watcher event, debounce, the job sent to the worker, the
check itself, the result back, progress saved.

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
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tutor.catalog import get_drill, solution_path  # noqa: E402
from tutor.engine import CheckFinished, EngineError, TutorEngine, WatcherStatus  # noqa: E402

MARKER = "save-to-verdict-bench"
THINK_S = 1.2  # pause before each save: longer than the debouncer's burst window


@dataclass
class Row:
    worker: str
    mode: str
    latencies: list[float] = field(default_factory=list)
    in_worker: list[float] = field(default_factory=list)
    solved: list[bool] = field(default_factory=list)


class Verdicts:
    """Engine events, with the moment each ``CheckFinished`` arrived."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.finished: list[tuple[float, CheckFinished]] = []
        self.events: list[object] = []

    def __call__(self, event: object) -> None:
        now = time.perf_counter()
        with self.cond:
            self.events.append(event)
            if isinstance(event, CheckFinished):
                self.finished.append((now, event))
            self.cond.notify_all()

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

    def verdict_for(self, version: int, timeout: float) -> tuple[float, CheckFinished]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for arrived, event in self.finished:
                    if f"{MARKER} {version}" in event.result.output:
                        return arrived, event
                if time.monotonic() > deadline:
                    raise SystemExit(f"no verdict for save {version}; events so far: {self.events}")
                self.cond.wait(0.1)


def content(solution: str, version: int) -> str:
    return f"print('{MARKER} {version}')\n{solution}"


def save(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.bench-tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def measure(args: argparse.Namespace, warm: bool, saves: int, watch: bool, workspace: Path) -> tuple[Row, object]:
    drill = get_drill(args.drill)
    file = workspace / "drills" / drill.file
    solution = solution_path(drill).read_text(encoding="utf-8")
    verdicts = Verdicts()
    engine = TutorEngine(workspace, device=args.device, timeout_s=args.timeout, on_event=verdicts,
                         watch=watch, warm=warm, timing=not args.no_timing)
    engine.start()
    try:
        status = verdicts.wait(lambda e: isinstance(e, WatcherStatus), 30)
        mode = f"watchdog/{status.mode}" if watch else "direct"
        device = None
        version = 0
        row = Row(worker="warm" if warm else "cold", mode=mode)
        for n in range(saves + 1):  # the first save is not counted: it fills caches (Triton's, the OS's)
            version += 1
            if warm:
                engine.wait_warm()
            time.sleep(THINK_S)
            save(file, content(solution, version))
            written = time.perf_counter()
            if not watch:
                engine.notify_saved(file)
            arrived, finished = verdicts.verdict_for(version, timeout=args.timeout + 60)
            device = finished.result.device
            if n == 0:
                continue
            row.latencies.append(arrived - written)
            row.in_worker.append(finished.result.duration_s)
            row.solved.append(finished.result.solved)
            print(f"  {row.worker} save {n}: {arrived - written:.3f} s "
                  f"(check in worker {finished.result.duration_s:.3f} s, solved={finished.result.solved})", flush=True)
        return row, device
    finally:
        engine.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, gpu or cpu (the interpreter)")
    parser.add_argument("--drill", default="01")
    parser.add_argument("--saves", type=int, default=7, help="measured saves with the warm worker")
    parser.add_argument("--cold-saves", type=int, default=3, help="measured saves without it (0: skip)")
    parser.add_argument("--mode", choices=("auto", "watchdog", "direct"), default="auto")
    parser.add_argument("--no-timing", action="store_true", help="checks without the timed launches")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    args = parser.parse_args()

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
                row, device = measure(args, warm, saves, watch, workspace)
                rows.append(row)

    label = device.label if device else "?"
    versions = f"torch {device.torch}, triton {device.triton}" if device else ""
    print(f"\nsave-to-verdict, drill {args.drill} ({solution_path(get_drill(args.drill)).name}), "
          f"timing {'off' if args.no_timing else 'on'}; {label}; {versions}; python {sys.version.split()[0]}")
    print(f"{'worker':<7}{'mode':<18}{'saves':>6}{'median s':>10}{'min s':>8}{'max s':>8}"
          f"{'in worker s':>13}{'rest s':>8}")
    for row in rows:
        median = statistics.median(row.latencies)
        inside = statistics.median(row.in_worker)
        rest = statistics.median(total - check for total, check in zip(row.latencies, row.in_worker))
        print(f"{row.worker:<7}{row.mode:<18}{len(row.latencies):>6}{median:>10.3f}{min(row.latencies):>8.3f}"
              f"{max(row.latencies):>8.3f}{inside:>13.3f}{rest:>8.3f}")
    if args.json:
        args.json.write_text(json.dumps({"device": label, "versions": versions, "rows": [row.__dict__ for row in rows]},
                                        indent=1))
    if not all(all(row.solved) for row in rows):
        print("warning: some checks did not solve the drill (see above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
