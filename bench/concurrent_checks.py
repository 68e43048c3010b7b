"""Checks at once on one device: a class on one server, or `check --all` on several files.

    python bench/concurrent_checks.py [--device gpu] [--counts 1 4 8] [--timeout 120]

Each check is a real ``flashtutor check --json`` process (its own worker) of a
FAILING student-like kernel (the drill's mistakes on its solution, drills 01 and 02
in turn: they pay the diagnosis phase's read-outs), started together.  For each
count N it reports every check's wall time, the median against the same checks
run alone (N = 1), whether any check's verdict was a timeout (the student's
budget) and whether any diagnosis was skipped (the tutor's own budget: the
machine was too busy for the read-outs; the verdict stands).  A check must
finish within about N times its time alone, and no verdict may time out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tutor.authoring.student_kernels import load as load_mistakes  # noqa: E402
from tutor.catalog import get_drill  # noqa: E402


def failing_files(folder: Path, count: int) -> list[tuple[str, Path]]:
    """``count`` (drill, file) pairs: failing mistakes of drills 01 and 02, in turn."""
    pool = []
    for drill_id in ("01", "02"):
        drill = get_drill(drill_id)
        for mistake in load_mistakes(drill):
            if mistake.base == "solution" and not mistake.passes:
                path = folder / f"{drill_id}_{mistake.name}.py"
                path.write_text(mistake.text(drill), encoding="utf-8")
                pool.append((drill_id, path))
    # alternate the drills so every count mixes them
    ordered = [p for pair in zip(pool[::2], pool[1::2], strict=False) for p in pair]
    return [ordered[i % len(ordered)] for i in range(count)]


def one_check(drill: str, path: Path, device: str, timeout: float) -> dict:
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "tutor", "check", str(path), "--drill", drill, "--json",
                          "--no-timing", "--device", device, "--timeout", str(timeout)],
                         capture_output=True, text=True, cwd=path.parent)
    wall = time.perf_counter() - started
    try:
        data = json.loads(run.stdout)
    except json.JSONDecodeError:
        return {"file": path.name, "wall_s": wall, "outcome": "no-json", "error": run.stderr[-300:]}
    error = data.get("error") or {}
    return {"file": path.name, "wall_s": wall, "outcome": data["outcome"], "error_kind": error.get("kind"),
            "diagnosis": data.get("diagnosis_phase", {}).get("status"), "codes": [d["code"] for d in data["diagnosis"]],
            "costs": data.get("costs", {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="flashtutor-concurrent-") as tmp:
        files = failing_files(Path(tmp), max(args.counts))
        alone: dict[str, float] = {}
        for count in sorted(set(args.counts)):
            chosen = files[:count]
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=count) as pool:
                results = list(pool.map(lambda f: one_check(f[0], f[1], args.device, args.timeout), chosen))
            span = time.perf_counter() - started
            if count == 1 or not alone:
                for r in results:
                    alone[r["file"]] = r["wall_s"]
            for r in results:
                print(f"  N={count} {r['file']}: {r['wall_s']:.1f} s, {r['outcome']}"
                      f" (error {r.get('error_kind')}, diagnosis {r.get('diagnosis')}, codes {r.get('codes')})",
                      flush=True)
            walls = [r["wall_s"] for r in results]
            rows.append({"count": count, "span_s": span, "median_s": statistics.median(walls), "max_s": max(walls),
                         "timeouts": sum(r.get("error_kind") == "timeout" for r in results),
                         "diagnosis_skipped": sum(r.get("diagnosis") == "skipped" for r in results),
                         "failed_verdicts": sum(r["outcome"] == "failed" for r in results), "results": results})
    base = rows[0]["median_s"]
    print(f"\nconcurrent failing checks (check --json --no-timing, drills 01/02 mistakes), device {args.device}")
    print(f"{'N':>3}{'median s':>10}{'max s':>8}{'x alone':>9}{'span s':>8}{'FAILED':>8}{'timeouts':>10}{'diag skipped':>14}")
    for row in rows:
        print(f"{row['count']:>3}{row['median_s']:>10.1f}{row['max_s']:>8.1f}{row['median_s'] / base:>9.2f}"
              f"{row['span_s']:>8.1f}{row['failed_verdicts']:>5}/{row['count']:<3}{row['timeouts']:>9}"
              f"{row['diagnosis_skipped']:>14}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
