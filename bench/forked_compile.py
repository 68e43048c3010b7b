"""Compiling a check's Triton variants: threads of one process against forked
children (tutor.harness.forked_compile), on a GPU.

    python bench/forked_compile.py [--drills 01,04,05,06]

For each drill, in one process: the solution with a fresh comment in every
kernel (so nothing is in Triton's disk cache), its compile warm-ups recorded in
compile-only mode, then

* threads: every recorded variant compiled from a thread of its own, forked
  compiles off (run 15's way);
* forked: the same with another fresh comment, each variant first compiled in a
  forked child (writing the disk cache), then the threads (loading it);

and after each, the verdict's own launches (check_correctness): its seconds and
whether every case passed.  Prints a table; times are wall seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from save_to_verdict import content

from tutor.catalog import get_drill, solution_path
from tutor.harness import check, cost, forked_compile
from tutor.harness.loader import load_student_module
from tutor.harness.problems import problem_for


def _fresh_module(drill_id: str, folder: Path):
    drill = get_drill(drill_id)
    path = folder / uuid.uuid4().hex[:8] / drill.file
    path.parent.mkdir()
    path.write_text(content(solution_path(drill).read_text(), 1, True, uuid.uuid4().hex[:8]))
    return drill, load_student_module(path, path.read_bytes())


def measure(drill_id: str, forked: bool, folder: Path) -> dict[str, object]:
    os.environ[forked_compile.FORKED_COMPILE_ENV] = "1" if forked else "0"
    drill, module = _fresh_module(drill_id, folder)
    problem = problem_for(drill.problem)
    assert problem.compile_warmups is not None
    warmups = problem.compile_warmups(drill, module, "cuda")
    recorded: list = []
    for warmup in warmups:
        with cost.compile_only() as calls:
            warmup()
        recorded += calls
    started = time.perf_counter()
    children = forked_compile.fill_disk_cache(recorded) if forked else 0
    in_children = time.perf_counter() - started
    os.environ[forked_compile.FORKED_COMPILE_ENV] = "0"  # the threads alone now (the children ran above)
    check.compile_concurrently(warmups)
    compiled = time.perf_counter() - started
    started = time.perf_counter()
    found = problem.check_correctness(drill, module, False, "cuda", torch.Generator().manual_seed(0))
    torch.cuda.synchronize()
    verdict = time.perf_counter() - started
    return {"drill": drill_id, "way": "forked" if forked else "threads", "variants": len(recorded),
            "children_ok": children, "children_s": in_children, "compile_s": compiled, "verdict_s": verdict,
            "passed": all(c.passed for c in found.cases)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drills", default="01,04,05,06")
    args = parser.parse_args()
    cost.install()
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; "
          f"triton {__import__('triton').__version__}; {os.cpu_count()} CPUs", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for drill_id in args.drills.split(","):
            measure(drill_id, False, Path(folder))  # first use of this drill's torch ops, unmeasured
            for forked in (False, True, False, True):
                rows.append(measure(drill_id, forked, Path(folder)))
                print(rows[-1], flush=True)
    print("\ndrill way      variants children_ok children_s compile_s verdict_s passed")
    for r in rows:
        print(f"{r['drill']:>5} {r['way']:8} {r['variants']:>8} {r['children_ok']:>11} {r['children_s']:>10.3f}"
              f" {r['compile_s']:>9.3f} {r['verdict_s']:>9.3f} {r['passed']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
