"""Time full and causal launches of the student's kernel.

GPU: ``triton.testing.do_bench`` (CUDA events, warm-up, median of many runs)
on a shape that fills the chip.  Interpreter: the wall clock of one run per
mode.  At the interpreter's small shapes it does not follow the work done
(fixed per-launch costs and the machine's load dominate), so the reports
headline the counted work ratio there and show these milliseconds as
secondary; one run is enough for that and keeps the loop fast.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch

INTERPRETER_REPS = 1
GPU_WARMUP_MS = 25
# 40 ms of runs: on an H200 the median's spread over repeated calls was no wider than at
# 100 ms, at half the seconds a save (bench/profile_performance.py; docs/LOOP.md, runs 9-11)
GPU_REP_MS = 40
GPU_REP_ENV = "FLASHTUTOR_GPU_REP_MS"  # replaces GPU_REP_MS (a benchmark's choice)


def gpu_rep_ms() -> int:
    return int(os.environ.get(GPU_REP_ENV) or GPU_REP_MS)


def time_ms(fn: Callable[[], object], interpreter: bool) -> float:
    if interpreter:
        samples = []
        for _ in range(INTERPRETER_REPS):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=GPU_WARMUP_MS, rep=gpu_rep_ms(), return_mode="median"))


def sdpa_ms(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> float:
    """torch's own scaled_dot_product_attention on the same inputs (GPU only)."""
    def sdpa() -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return time_ms(sdpa, interpreter=False)


def method_label(interpreter: bool) -> str:
    if interpreter:
        runs = "one run" if INTERPRETER_REPS == 1 else f"median of {INTERPRETER_REPS}"
        return f"wall clock, {runs} (interpreter: not a speed; see the counted work)"
    return f"triton.testing.do_bench median (warm-up {GPU_WARMUP_MS} ms, {gpu_rep_ms()} ms of runs)"
