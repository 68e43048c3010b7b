"""Where a failing check's diagnosis phase spends its time, per drill, in one process.

    python bench/profile_diagnosis.py [--device gpu|cpu] [--drills 01 02 04 05 06] [--top 12]

For each drill, its student-like mistakes on the solution that FAIL (the first
``--per-drill`` of them) are checked in this process: the verdict phase, then
the diagnosis phase under cProfile, twice (the first one pays first-use costs,
the second is reported; ``--first``: the first).  Prints each diagnosis's seconds, launches and compiles
(``CheckResult.costs``) and the functions of tutor/ that took the most of it.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--drills", nargs="+", default=["01", "02", "04", "05", "06"])
    parser.add_argument("--per-drill", type=int, default=2)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--only", nargs="+", help="these mistakes only (their names)")
    parser.add_argument("--first", action="store_true",
                        help="profile the first diagnosis in this process (what a save's fresh worker pays) "
                             "instead of the second")
    args = parser.parse_args()

    from tutor.harness.device import select_device

    dev = select_device(args.device)
    from tutor.authoring.student_kernels import load
    from tutor.catalog import get_drill
    from tutor.harness import cost
    from tutor.harness.check import run_diagnosis, run_verdict
    from tutor.harness.job import CheckJob

    cost.install()
    rows = []
    with tempfile.TemporaryDirectory(prefix="flashtutor-profile-") as tmp:
        for drill_id in args.drills:
            drill = get_drill(drill_id)
            failing = [m for m in load(drill) if m.base == "solution" and not m.passes
                       and (not args.only or m.name in args.only)][: args.per_drill]
            for mistake in failing:
                path = Path(tmp) / f"{drill_id}_{mistake.name}.py"
                path.write_text(mistake.text(drill), encoding="utf-8")
                job = CheckJob(drill=drill_id, file=str(path), timing=False, seed=0)
                profile = cProfile.Profile()
                first_s = 0.0
                for attempt in range(2):
                    result, state = run_verdict(job, dev)
                    if attempt == (0 if args.first else 1):
                        profile.enable()
                    run_diagnosis(job, dev, result, state)
                    profile.disable()
                    if attempt == 0:
                        first_s = result.costs["diagnosis"].seconds if "diagnosis" in result.costs else 0.0
                diag = result.costs.get("diagnosis")
                print(f"   first diagnosis of this mistake in the process: {first_s:.3f} s", flush=True)
                rows.append((drill_id, mistake.name, result.costs["verdict"], diag, result.codes))
                print(f"\n== {drill_id} {mistake.name}: verdict {result.costs['verdict']}, diagnosis {diag}, "
                      f"codes {result.codes}", flush=True)
                stats = pstats.Stats(profile)
                entries = [(key, value) for key, value in stats.stats.items() if "/tutor/" in key[0]]  # type: ignore[attr-defined]
                entries.sort(key=lambda kv: kv[1][3], reverse=True)
                for (file, line, name), (_, calls, _, cumulative, _) in entries[: args.top]:
                    print(f"   {cumulative:7.3f} s  {calls:>6}x  {Path(file).name}:{line} {name}")
    print(f"\ndiagnosis phase per failing mistake ({dev.label}; torch {dev.torch}, triton {dev.triton})")
    print(f"{'drill':<6}{'mistake':<34}{'verdict s':>10}{'diag s':>8}{'launches':>9}{'compiles':>9}  codes")
    for drill_id, name, verdict, diag, codes in rows:
        print(f"{drill_id:<6}{name:<34}{verdict.seconds:>10.3f}{(diag.seconds if diag else 0):>8.3f}"
              f"{(diag.launches if diag else 0):>9}{str(diag.compiles if diag else '-'):>9}  {','.join(codes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
