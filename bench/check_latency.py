"""How long one `flashtutor check` takes, cold, as a student runs it.

    python bench/check_latency.py [--runs 3] [--device cpu|auto] [DRILL_FILE ...]

For each file it runs the real CLI (`python -m tutor check FILE --json`) in a
fresh process several times and prints the median of: the whole command
(Python start-up, worker start-up with the torch/triton imports, the check),
and the check inside the worker (`duration_s`: every correctness and timed
launch plus the reference and diagnosis).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FILES = ["solutions/01_causal_mask_solution.py", "drills/01_causal_mask.py", "solutions/02_online_rescale_solution.py"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    rows = []
    for rel in args.files:
        whole, inside = [], []
        for _ in range(args.runs):
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "tutor", "check", str(ROOT / rel), "--json", "--device", args.device],
                capture_output=True, text=True, cwd=ROOT,
            )
            whole.append(time.perf_counter() - start)
            inside.append(json.loads(proc.stdout.splitlines()[-1])["duration_s"])
        rows.append((rel, statistics.median(whole), statistics.median(inside)))
    print(f"{'file':<42}{'whole command s':>16}{'check in worker s':>19}   (median of {args.runs})")
    for rel, w, i in rows:
        print(f"{rel:<42}{w:>16.2f}{i:>19.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
