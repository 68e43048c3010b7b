"""Where a verdict's seconds go, inside the worker: the verdict phase of one check
run in this process under cProfile, after a kernel edit (fresh source: Triton
compiles) and again on the same source (Triton's in-memory cache), with the
variants' compiles concurrent (the default on a GPU) and one after another.

    python bench/profile_verdict.py [--device gpu|cpu] [--drill 01] [--top 25]

Each pass writes the drill's solution to a temp file with a new comment line
inside its ``@triton.jit`` function (a nonce per pass, so no pass finds another's
compile in Triton's on-disk cache).  Prints the top functions by cumulative time
for the first fresh pass, then a short table: pass, compiles, seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--drill", default="01")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--warm-compiler", action="store_true",
                        help="first warm Triton's compiler as a spare worker does (tutor.harness.warmup)")
    args = parser.parse_args()

    from tutor.harness.device import select_device

    dev = select_device(args.device)
    import torch

    from tutor.harness import cost

    cost.install()  # as the worker does: the compile-only warm-ups and the phase's counts need it

    if not dev.interpreter:
        torch.zeros(1, device="cuda")
        if args.warm_compiler:
            from tutor.harness.warmup import warm_compiler

            print(f"compiler warmed in {warm_compiler():.3f} s")
    from save_to_verdict import content

    from tutor.catalog import get_drill, solution_path
    from tutor.harness.check import PARALLEL_COMPILE_ENV, run_verdict
    from tutor.harness.interpreter_patch import swap_counts
    from tutor.harness.job import CheckJob

    drill = get_drill(args.drill)
    solution = solution_path(drill).read_text(encoding="utf-8")
    rows = []
    with tempfile.TemporaryDirectory(prefix="flashtutor-profile-") as tmp:
        passes = [("1", True), ("1", False), ("0", True), ("0", False), ("1", True), ("0", True), ("1", True)]
        for n, (parallel, fresh) in enumerate(passes):
            os.environ[PARALLEL_COMPILE_ENV] = parallel
            if fresh:
                nonce = uuid.uuid4().hex[:8]
                file = Path(tmp) / f"pass{n}_{drill.file}"
                file.write_text(content(solution, f"{n}-{nonce}", True), encoding="utf-8")
            swaps_before = swap_counts()
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            result, _ = run_verdict(CheckJob(drill=drill.id, file=str(file), timing=False, seed=0), dev)
            profile.disable()
            seconds = time.perf_counter() - started
            swaps = {k: v - swaps_before[k] for k, v in swap_counts().items()}
            rows.append((n, "concurrent" if parallel == "1" else "serial",
                         "kernel edited" if fresh else "same source again", result.outcome, seconds,
                         f"{swaps['swaps']}/{swaps['skipped']}" if dev.interpreter else "-"))
            if n in (0, 2):
                text = io.StringIO()
                print(f"--- pass {n} ({'concurrent' if parallel == '1' else 'serial'}, kernel edited): "
                      f"by cumulative, then own time")
                pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
                pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(15)
                print(text.getvalue())
    print(f"verdict phase in-process, drill {drill.id}, {dev.label}, torch {dev.torch}, triton {dev.triton}")
    if dev.interpreter:
        print("swaps: the interpreter's language swaps done/skipped (tutor/harness/interpreter_patch.py; "
              "FLASHTUTOR_INTERPRETER_PATCH_ONCE=0 skips none)")
    print(f"{'pass':<5}{'compiles':<12}{'source':<20}{'outcome':<10}{'seconds':>8}  {'swaps':>9}")
    for n, mode, source, outcome, seconds, swapped in rows:
        print(f"{n:<5}{mode:<12}{source:<20}{outcome:<10}{seconds:>8.3f}  {swapped:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
