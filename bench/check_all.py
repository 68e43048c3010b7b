"""Run the tutor's own check on every shipped drill and solution; print a table.

    python bench/check_all.py [--device cpu|gpu|auto] [--json PATH] [--mistakes] [--no-shipped] [--drills 04,05] [--shard I/N]

The shipped drills must FAIL with their documented diagnosis and every
solution must PASS: this is the same check `flashtutor check` runs, through
the same warm worker, so the "check s" column is the runner's wall time per
check with the worker already warm (imports excluded, compiles included).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tutor.authoring.student_kernels import all_mistakes, materialise  # noqa: E402
from tutor.catalog import all_drills  # noqa: E402
from tutor.harness.result import code_name, codes_match  # noqa: E402
from tutor.loop.runner import CheckRunner  # noqa: E402


def shipped_files() -> list[tuple[str, str, str]]:
    """(drill, path relative to the repo, what the check must say) for every kernel drill:
    the shipped file FAILS, every solution file of that drill PASSES and is solved."""
    files = []
    for drill in all_drills():
        if drill.kind != "kernel":
            continue
        files.append((drill.id, f"drills/{drill.file}", "FAILED"))
        for solution in sorted((ROOT / "solutions").glob(f"{drill.id}_*.py")):
            files.append((drill.id, f"solutions/{solution.name}", "solved"))
    return files


def mistake_files(dest: Path, gpu: bool) -> list[tuple[str, str, str]]:
    """Every student-like kernel of solutions/NN_slug.mistakes.toml, with what it must get
    on this device (a GPU's ``gpu_codes`` where the entry has them)."""
    written = materialise(dest)
    return [(m.drill, str(written[m.stem]), m.expected(gpu)) for m in all_mistakes() if m.stem in written]


def agrees(expected: str, result) -> bool:
    if expected == "FAILED":
        return not result.passed
    if expected == "solved":
        return result.solved
    if expected.startswith("error:"):
        return result.error is not None and result.error.kind == expected.removeprefix("error:")
    return codes_match(result.diagnosis, expected.split(",")) and (result.error is None)


def fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--mistakes", action="store_true",
                        help="also check every student-like kernel of the mistakes files (timing off for those)")
    parser.add_argument("--no-shipped", action="store_true", help="skip the shipped drills and solutions")
    parser.add_argument("--drills", help="only these drills, e.g. 04,05,06")
    parser.add_argument("--only", help="only files whose name holds one of these, e.g. blocks_32,visits_row")
    parser.add_argument("--skip", help="leave out files whose name holds one of these")
    parser.add_argument("--shard", help="I/N: only every N-th file from the I-th (0-based), to run N processes at once")
    args = parser.parse_args()
    rows = []
    files = [] if args.no_shipped else shipped_files()
    if args.mistakes:
        import torch

        gpu = args.device != "cpu" and torch.cuda.is_available()
        files += mistake_files(Path(tempfile.mkdtemp(prefix="flashtutor-mistakes-")), gpu)
    if args.drills:
        files = [f for f in files if f[0] in args.drills.split(",")]
    if args.only:
        files = [f for f in files if any(word in f[1] for word in args.only.split(","))]
    if args.skip:
        files = [f for f in files if not any(word in f[1] for word in args.skip.split(","))]
    if args.shard:
        first, count = (int(x) for x in args.shard.split("/"))
        files = files[first::count]
    with CheckRunner(device=args.device, warm=True) as runner:
        device = runner.warm_up()
        print(f"device: {device.label}; torch {device.torch}; triton {device.triton}", flush=True)
        for drill, rel, expected in files:
            runner.warm_up()  # time the check, not the worker's start-up
            start = time.perf_counter()
            result = runner.check(drill, ROOT / rel, timing=not rel.startswith("/"))
            wall = time.perf_counter() - start
            rel = Path(rel).name if rel.startswith("/") else rel
            rows.append((rel, result, wall, expected))
            said = ",".join(result.codes_said([code_name(c) for c in expected.split(",")]))
            print(f"{rel}: {result.outcome}, codes [{said}], expected {expected}"
                  f"{'' if agrees(expected, result) else '   <-- NOT what it must'} ({wall:.1f} s)", flush=True)
            if not agrees(expected, result):  # what a reader needs to see why, from this log alone
                failed = [f"{c.name}/{'causal' if c.causal else 'full'} {c.shape} err {fmt(c.max_abs_err, '.3g')}"
                          for c in result.cases if not c.passed]
                print(f"    failing cases: {'; '.join(failed) or 'none'}"
                      + (f"; error {result.error.kind}: {result.error.message[:300]}" if result.error else ""), flush=True)
                for d in result.diagnosis:
                    print(f"    {d.severity} {d.code}: {d.message[:400]}", flush=True)
    if args.json:
        args.json.write_text(json.dumps([{"file": rel, "wall_s": wall, "expected": e, **r.to_dict()} for rel, r, wall, e in rows], indent=1))
    print()
    print(f"{'file':<40}{'result':>8}{'solved':>7}{'max err':>9}{'full ms':>9}{'causal ms':>10}{'×':>6}"
          f"{'visited':>9}{'ideal':>7}{'sdpa f/c ms':>14}{'check s':>8}  diagnosis")
    for rel, r, wall, expected in rows:
        verdict = "ERROR" if r.error else ("PASSED" if r.passed else "FAILED")
        sdpa = "-" if r.sdpa_full_ms is None else f"{r.sdpa_full_ms:.3f}/{fmt(r.sdpa_causal_ms, '.3f')}"
        print(f"{rel:<40}{verdict:>8}{str(r.solved):>7}{fmt(r.max_abs_err, '.1e'):>9}{fmt(r.full_ms, '.3f'):>9}"
              f"{fmt(r.causal_ms, '.3f'):>10}{fmt(r.speedup, '.2f'):>6}{fmt(r.visited_fraction, '.3f'):>9}"
              f"{fmt(r.ideal_fraction, '.3f'):>7}{sdpa:>14}{wall:>8.2f}  {','.join(r.codes) or (r.error.kind if r.error else '')}"
              + ("" if agrees(expected, r) else f"   <-- expected {expected}"))
    wrong = [rel for rel, r, _, expected in rows if not agrees(expected, r)]
    print(f"{len(rows) - len(wrong)}/{len(rows)} files got what they must" + (f"; not: {', '.join(wrong)}" if wrong else ""))
    if rows and rows[0][1].timing_shape:
        print(f"timing shape {rows[0][1].timing_shape}, correctness shape {rows[0][1].shape}; {rows[0][1].timing_method}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
