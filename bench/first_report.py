"""The first report after the tutor starts, as a student on a fresh machine sees it.

    python bench/first_report.py [--device gpu] [--drill 01] [--runs 2]

Each run starts the engine as ``flashtutor watch`` / ``launch`` do (a warm spare
worker, the real watcher when watchdog is there), with Triton's on-disk cache in
a new empty folder (a fresh machine: every kernel compiles), and saves a failing
edit of the drill at once (a student who saves while the tutor still starts).
It reports the seconds from the engine's start to the verdict, to the diagnosis
and to the performance.  Target: the first verdict within 10 s on a GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--drill", default="01")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="flashtutor-first-") as tmp:
            os.environ["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton-cache")  # the workers inherit it
            from save_to_verdict import Verdicts, failing_edits, save  # bench/ is on sys.path as the script's folder

            from tutor.catalog import get_drill, solution_path
            from tutor.loop.engine import TutorEngine

            drill = get_drill(args.drill)
            workspace = Path(tmp) / "ws"
            (workspace / "drills").mkdir(parents=True)
            file = workspace / "drills" / drill.file
            file.write_text(solution_path(drill).read_text(encoding="utf-8"), encoding="utf-8")
            name, text = failing_edits(args.drill)[run % len(failing_edits(args.drill))]
            events = Verdicts()
            started = time.perf_counter()
            engine = TutorEngine(workspace, device=args.device, on_event=events)
            engine.start()
            try:
                time.sleep(0.5)  # the student saves half a second after starting the tutor
                save(file, f"print('save-to-verdict-bench 1')\n{text}")
                engine.notify_saved(file)  # the watcher may still be starting: tell the engine too
                verdict_at, verdict = events.phase_for(events.finished, 1, 300)
                diag_at = perf_at = None
                if verdict.result.diagnosis_phase.status == "pending":
                    diag_at, _ = events.phase_for(events.diagnosis, 1, 300)
                if verdict.result.performance.status == "pending":
                    perf_at, _ = events.phase_for(events.performance, 1, 300)
            finally:
                engine.stop()
            row = (name, verdict.result.outcome, verdict_at - started,
                   None if diag_at is None else diag_at - started, None if perf_at is None else perf_at - started,
                   verdict.result.costs.get("verdict"))
            rows.append(row)
            print(f"  run {run} ({name}): verdict {row[1]} at {row[2]:.2f} s, diagnosis at {row[3]}, "
                  f"performance at {row[4]} (verdict cost {row[5]}); device {verdict.result.device}", flush=True)
    print("\nfirst report after the engine starts (empty Triton cache, failing edit saved 0.5 s in)")
    print(f"{'edit':<28}{'verdict s':>10}{'diagnosis s':>13}{'perf s':>8}")
    for name, _, v, d, p, _ in rows:
        print(f"{name:<28}{v:>10.2f}{'-' if d is None else f'{d:.2f}':>13}{'-' if p is None else f'{p:.2f}':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
