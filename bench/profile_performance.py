"""Where the performance phase's seconds go, inside the worker: after a kernel edit
(fresh source: Triton compiles), the verdict phase runs, then the performance
phase with each step clocked: the timing inputs, the concurrent compiles (timed
variants and the roofline's counting launches), each ``do_bench``, the roofline.
Then, on a GPU, what a shorter ``do_bench`` costs in spread: the timed launches
of the last pass, timed again and again at several ``rep`` lengths.

    python bench/profile_performance.py [--device gpu] [--drill 01] [--passes 4] [--repeats 7]

Like the save loop after a drill's first timed check, torch's SDPA is not timed
(``time_sdpa=False``).  Each pass writes the drill's solution with a new comment
line inside its ``@triton.jit`` function (a nonce per pass, so no pass finds
another's compile in Triton's on-disk cache).  ``--device cpu`` runs the passes
on the interpreter (a smoke test of this script: nothing compiles there).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def clocked(steps: dict[str, list[float]], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, adding each call's seconds to ``steps[name]``."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            steps[name].append(time.perf_counter() - started)
    return wrapper


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="gpu")
    parser.add_argument("--drill", default="01")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7, help="do_bench runs per rep length in the spread table")
    parser.add_argument("--reps", default="100,40,20", help="do_bench rep lengths (ms) for the spread table")
    args = parser.parse_args()

    from tutor.harness.device import select_device

    dev = select_device(args.device)
    import torch
    import triton.testing

    device = "cpu" if dev.interpreter else "cuda"
    if not dev.interpreter:
        torch.zeros(1, device=device)
        from tutor.harness.warmup import warm_compiler

        print(f"compiler warmed in {warm_compiler():.3f} s")
    from save_to_verdict import content

    import tutor.harness.check as check
    from tutor.catalog import get_drill, solution_path
    from tutor.harness import launch, timing
    from tutor.harness.job import CheckJob
    from tutor.harness.problems import PROBLEMS, problem_for

    drill = get_drill(args.drill)
    problem = problem_for(drill.problem)
    problem_module = importlib.import_module(PROBLEMS[drill.problem])  # its own shapes, where it has a plan
    plan_for = getattr(problem_module, "plan_for", None)
    shape = tuple(plan_for(dev.interpreter).timing) if plan_for is not None else None
    if shape is not None:
        draws = []
        for draw in (launch.random_inputs, lambda s, d, g: launch.timing_tensors([s] * 3, d, g)):
            seconds = []
            for _ in range(3):
                started = time.perf_counter()
                draw(shape, device, torch.Generator().manual_seed(0))
                if not dev.interpreter:
                    torch.cuda.synchronize()
                seconds.append(time.perf_counter() - started)
            draws.append(statistics.median(seconds))
        print(f"timing inputs {shape}: drawn on the CPU and moved to {device} {draws[0]:.3f} s, "
              f"drawn on {device} {draws[1]:.3f} s")

    steps: dict[str, list[float]] = defaultdict(list)
    check.compile_concurrently = clocked(steps, "compiles (concurrent launches)", check.compile_concurrently)
    timed_problem = dataclasses.replace(problem, timing_launches=clocked(steps, "timing inputs and launchers",
                                                                         problem.timing_launches))
    check.problem_for = lambda name: timed_problem
    check._roofline = clocked(steps, "roofline (counts, peaks)", check._roofline)
    timing.time_ms = clocked(steps, "do_bench (each)", timing.time_ms)
    solution = solution_path(drill).read_text(encoding="utf-8")
    rows = []
    with tempfile.TemporaryDirectory(prefix="flashtutor-profile-") as tmp:
        for n in range(args.passes):
            file = Path(tmp) / f"pass{n}_{drill.file}"
            file.write_text(content(solution, f"{n}-{uuid.uuid4().hex[:8]}", True), encoding="utf-8")
            job = CheckJob(drill=drill.id, file=str(file), timing=True, seed=0, time_sdpa=False)
            started = time.perf_counter()
            result, state = check.run_verdict(job, dev)
            verdict_s = time.perf_counter() - started
            steps.clear()
            started = time.perf_counter()
            check.run_performance(job, dev, result, state)
            perf_s = time.perf_counter() - started
            rows.append((n, result.outcome, result.performance.status, verdict_s, perf_s,
                         {name: list(values) for name, values in steps.items()}))
            print(f"pass {n}: verdict {verdict_s:.3f} s, performance {perf_s:.3f} s "
                  f"({result.performance.status}); full {result.full_ms} ms, causal {result.causal_ms} ms")
        timed = problem.timing_launches(drill, state.module, dev.interpreter, device, state.generator)

    spread = []
    for rep in (int(r) for r in args.reps.split(",") if not dev.interpreter):
        for mode, fn in timed.student.items():
            values, seconds = [], []
            for _ in range(args.repeats):
                started = time.perf_counter()
                values.append(float(triton.testing.do_bench(fn, warmup=timing.GPU_WARMUP_MS, rep=rep,
                                                            return_mode="median")))
                seconds.append(time.perf_counter() - started)
            mid = statistics.median(values)
            spread.append((rep, mode, mid, (max(values) - min(values)) / mid * 100, statistics.median(seconds)))

    print(f"\nperformance phase in-process, drill {drill.id}, {dev.label}, torch {dev.torch}, triton {dev.triton}, "
          f"python {sys.version.split()[0]}; every pass edits the kernel (compiles); SDPA not timed")
    print(f"{'pass':<5}{'outcome':<9}{'perf':<7}{'verdict s':>10}{'perf s':>8}  steps of the performance phase (s)")
    for n, outcome, status, verdict_s, perf_s, parts in rows:
        said = ", ".join(f"{name} {' + '.join(f'{v:.3f}' for v in values)}" for name, values in parts.items())
        print(f"{n:<5}{outcome:<9}{status:<7}{verdict_s:>10.3f}{perf_s:>8.3f}  {said}")
    if dev.interpreter:
        return 0
    print(f"\ndo_bench of the timed launches at {timed.shape}, warm-up {timing.GPU_WARMUP_MS} ms, "
          f"{args.repeats} runs per row")
    print(f"{'rep ms':>7} {'mode':<7}{'median ms':>10}{'spread %':>10}{'s per call':>11}")
    for rep, mode, mid, pct, secs in spread:
        print(f"{rep:>7} {mode:<7}{mid:>10.4f}{pct:>10.2f}{secs:>11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
