"""How many Triton variants one check compiles, per phase.

    python bench/compile_variants.py [--device cpu|auto] [--drill 01] [--file PATH]

Runs one check in this process, phase by phase (``run_verdict``, then
``run_performance``), with every ``@triton.jit`` kernel of the student's module
wrapped so that each launch records the key Triton compiles by:

* the ``tl.constexpr`` arguments (``CAUSAL``, ``RECORD_VISITS``, block sizes);
* for every other argument what Triton specialises on: a tensor's dtype and
  16-byte alignment, an integer's being 1 or a multiple of 16, None.

Distinct keys are the variants a GPU compiles (the interpreter compiles
nothing, but its launches carry the same keys, so the count is exact on the
CPU too).  On a GPU the kernels' own caches (``JITFunction.device_caches``)
are read as well, as the ground truth, with the seconds each phase took; run
it twice to see Triton's on-disk cache at work (the second run loads what the
first compiled; ``TRITON_CACHE_DIR`` moves it).  Prints a short table last.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class CountingKernel:
    """Stands in for a jit kernel in the student's module: records each launch's key."""

    def __init__(self, kernel, name: str, keys: list):
        self.kernel, self.name, self.keys = kernel, name, keys
        fn = getattr(kernel, "fn", kernel)
        self.params = list(inspect.signature(fn).parameters.values())
        self.constexpr = {p.name for p in self.params if "constexpr" in str(p.annotation)}

    def __getattr__(self, attr):
        return getattr(self.kernel, attr)

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def counted(*args, **kwargs):
            self.keys.append((self.name, self.key(args, kwargs)))
            return launch(*args, **kwargs)

        return counted

    def key(self, args, kwargs) -> tuple:
        import torch

        bound = dict(zip((p.name for p in self.params), args))
        bound.update(kwargs)
        parts = []
        for name, value in sorted(bound.items()):
            if name in self.constexpr:
                parts.append((name, value))
            elif isinstance(value, torch.Tensor):
                parts.append((name, str(value.dtype), value.data_ptr() % 16 == 0))
            elif isinstance(value, bool):
                parts.append((name, "bool"))
            elif isinstance(value, int):
                parts.append((name, "int", value == 1, value % 16 == 0))
            elif value is None:
                parts.append((name, None))
            else:
                parts.append((name, type(value).__name__))
        return tuple(parts)


def compiled_count(kernels: list[CountingKernel]) -> int | None:
    """Variants in the kernels' own caches (GPU); None where there are none (interpreter)."""
    total, found = 0, False
    for wrapper in kernels:
        caches = getattr(wrapper.kernel, "device_caches", None)
        if not caches:
            continue
        for entry in caches.values():
            cache = entry[0] if isinstance(entry, tuple) else entry
            if isinstance(cache, dict):
                total += len(cache)
                found = True
    return total if found else None


def describe(key: tuple) -> str:
    flags = [f"{name}={value}" for name, value in ((p[0], p[1]) for p in key if len(p) == 2 and p[1] is not None
                                                    and not isinstance(p[1], str))]
    ints = [f"{p[0]}{'%16' if p[3] else ''}" for p in key if len(p) == 4 and p[1] == "int"]
    return ", ".join(flags + ints)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, gpu or cpu (the interpreter)")
    parser.add_argument("--drill", default="01")
    parser.add_argument("--file", type=Path, help="the kernel file (default: the drill's solution)")
    args = parser.parse_args()

    from tutor.harness.device import select_device

    dev = select_device(args.device)  # sets TRITON_INTERPRET before triton is imported
    from tutor.catalog import get_drill, solution_path
    from tutor.harness import check as checking
    from tutor.harness.job import CheckJob
    from tutor.harness.loader import load_student_module

    drill = get_drill(args.drill)
    file = (args.file or solution_path(drill)).resolve()
    keys: list = []
    wrappers: list[CountingKernel] = []
    real_load = load_student_module

    def load_and_count(path):
        module = real_load(path)
        for name, value in list(vars(module).items()):
            if type(value).__name__ in ("JITFunction", "InterpretedFunction"):
                wrapper = CountingKernel(value, name, keys)
                wrappers.append(wrapper)
                setattr(module, name, wrapper)
        return module

    checking.load_student_module = load_and_count
    job = CheckJob(drill=drill.id, file=str(file), seed=0)
    started = time.perf_counter()
    result, state = checking.run_verdict(job, dev)
    verdict_s = time.perf_counter() - started
    verdict_keys = list(dict.fromkeys(keys))
    verdict_compiled = compiled_count(wrappers)
    launches_verdict = len(keys)
    started = time.perf_counter()
    if result.performance.status == "pending":
        checking.run_performance(job, dev, result, state)
    perf_s = time.perf_counter() - started
    all_keys = list(dict.fromkeys(keys))
    new_keys = [k for k in all_keys if k not in verdict_keys]
    compiled = compiled_count(wrappers)

    print(f"{file.name} as drill {drill.id} on {dev.label}; outcome {result.outcome}, "
          f"performance {result.performance.status}; TRITON_CACHE_DIR={os.environ.get('TRITON_CACHE_DIR', '(default)')}")
    for phase, phase_keys in (("verdict", verdict_keys), ("performance (new)", new_keys)):
        print(f"\n{phase}:")
        for name, key in phase_keys:
            print(f"  {name}: {describe(key)}")
    print(f"\n{'phase':<13}{'launches':>9}{'variants':>9}{'compiled':>9}{'seconds':>9}")
    print(f"{'verdict':<13}{launches_verdict:>9}{len(verdict_keys):>9}"
          f"{'-' if verdict_compiled is None else verdict_compiled:>9}{verdict_s:>9.2f}")
    print(f"{'performance':<13}{len(keys) - launches_verdict:>9}{len(new_keys):>9}"
          f"{'-' if compiled is None else compiled - (verdict_compiled or 0):>9}{perf_s:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
