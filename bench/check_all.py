"""Run the tutor's own check on every shipped drill and solution; print a table.

    python bench/check_all.py [--device cpu|gpu|auto] [--json PATH]

The shipped drills must FAIL with their documented diagnosis and every
solution must PASS: this is the same check `flashtutor check` runs, through
the same warm worker, so the "check s" column is the runner's wall time per
check with the worker already warm (imports excluded, compiles included).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tutor.runner import CheckRunner  # noqa: E402

FILES = [
    ("01", "drills/01_causal_mask.py"),
    ("01", "solutions/01_causal_mask_solution.py"),
    ("01", "solutions/01_causal_mask_fast.py"),
    ("02", "drills/02_online_rescale.py"),
    ("02", "solutions/02_online_rescale_solution.py"),
    ("04", "drills/04_flash_backward.py"),
    ("04", "solutions/04_flash_backward_solution.py"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with CheckRunner(device=args.device, warm=True) as runner:
        device = runner.warm_up()
        print(f"device: {device.label}; torch {device.torch}; triton {device.triton}", flush=True)
        for drill, rel in [(d, f) for d, f in FILES if (ROOT / f).exists()]:
            runner.warm_up()  # time the check, not the worker's start-up
            start = time.perf_counter()
            result = runner.check(drill, ROOT / rel)
            wall = time.perf_counter() - start
            rows.append((rel, result, wall))
            print(json.dumps({"file": rel, "wall_s": wall, **result.to_dict()})[:400], flush=True)
    if args.json:
        args.json.write_text(json.dumps([{"file": rel, "wall_s": wall, **r.to_dict()} for rel, r, wall in rows], indent=1))
    print()
    print(f"{'file':<40}{'result':>8}{'solved':>7}{'max err':>9}{'full ms':>9}{'causal ms':>10}{'×':>6}"
          f"{'visited':>9}{'ideal':>7}{'sdpa f/c ms':>14}{'check s':>8}  diagnosis")
    for rel, r, wall in rows:
        verdict = "ERROR" if r.error else ("PASSED" if r.passed else "FAILED")
        fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
        sdpa = "-" if r.sdpa_full_ms is None else f"{r.sdpa_full_ms:.3f}/{fmt(r.sdpa_causal_ms, '.3f')}"
        print(f"{rel:<40}{verdict:>8}{str(r.solved):>7}{fmt(r.max_abs_err, '.1e'):>9}{fmt(r.full_ms, '.3f'):>9}"
              f"{fmt(r.causal_ms, '.3f'):>10}{fmt(r.speedup, '.2f'):>6}{fmt(r.visited_fraction, '.3f'):>9}"
              f"{fmt(r.ideal_fraction, '.3f'):>7}{sdpa:>14}{wall:>8.2f}  {','.join(r.codes) or (r.error.kind if r.error else '')}")
    if rows and rows[0][1].timing_shape:
        print(f"timing shape {rows[0][1].timing_shape}, correctness shape {rows[0][1].shape}; {rows[0][1].timing_method}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
