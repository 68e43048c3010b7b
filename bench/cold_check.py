"""Where a cold `flashtutor check` spends its seconds.

    python bench/cold_check.py [--device cpu|auto] [--drill 01] [--runs 2]

Each run starts a fresh worker (as a plain `flashtutor check` does) and
splits the time from "start the worker" to "performance arrived": the
worker's start-up as it reports it (importing torch and probing the device,
the harness's imports, creating the CUDA context), the verdict phase and the
performance phase inside the worker, and what is left (process start, Python
itself, the hand-offs).  Every run uses one fresh Triton cache directory
(``TRITON_CACHE_DIR``): the first run compiles every variant, the later ones
load them from that on-disk cache, so the difference is the compiles (on a
GPU; the interpreter compiles nothing).  Prints a short table last.
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

    started = time.perf_counter()
    from tutor.catalog import get_drill, solution_path
    from tutor.loop.runner import Worker

    parent_imports = time.perf_counter() - started
    drill = get_drill(args.drill)
    file = str(solution_path(drill).resolve())
    rows = []
    with tempfile.TemporaryDirectory(prefix="flashtutor-triton-cache-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache  # the workers inherit it
        for run in range(args.runs):
            t0 = time.perf_counter()
            worker = Worker(args.device)
            try:
                device = worker.wait_ready()
                ready = time.perf_counter() - t0
                verdict_at = []
                job = {"drill": drill.id, "file": file, "timing": True, "seed": 0, "time_sdpa": True, "shape": None}
                result = worker.run(job, 300.0, on_phase=lambda phase, r, at=verdict_at, t0=t0: at.append(time.perf_counter() - t0) if phase == "verdict" else None)
                total = time.perf_counter() - t0
            finally:
                worker.close()
            rows.append((run, device, worker.startup, ready, verdict_at[0] if verdict_at else total, result, total))
            print(f"run {run + 1}: ready {ready:.2f} s, verdict at {rows[-1][4]:.2f} s, performance at {total:.2f} s "
                  f"({result.outcome}, performance {result.performance.status}); worker start-up {worker.startup}",
                  flush=True)

    device = rows[0][1]
    print(f"\ncold check, drill {drill.id} ({Path(file).name}); {device.label}; torch {device.torch}, "
          f"triton {device.triton}; parent imports {parent_imports:.2f} s; seconds")
    print(f"{'run':<5}{'torch+dev':>10}{'harness':>9}{'cuda ctx':>9}{'compiler':>9}{'spawn etc':>10}{'verdict':>9}{'perf':>7}"
          f"{'other':>7}{'total':>7}  triton cache")
    for run, _, startup, ready, _verdict_at, result, total in rows:
        inside = result.duration_s + result.performance.duration_s
        spawn = ready - startup.get("total_s", 0.0)
        other = total - ready - inside
        print(f"{run + 1:<5}{startup.get('device_s', 0):>10.2f}{startup.get('harness_imports_s', 0):>9.2f}"
              f"{startup.get('cuda_context_s', 0):>9.2f}{startup.get('compiler_warm_s', 0):>9.2f}{spawn:>10.2f}{result.duration_s:>9.2f}"
              f"{result.performance.duration_s:>7.2f}{other:>7.2f}{total:>7.2f}  {'cold' if run == 0 else 'warm'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
