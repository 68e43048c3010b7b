"""Warm a GPU worker's compiler while it waits for a job.

The first Triton compile in a fresh process pays once for what every later
compile shares: importing Triton's compiler and NVIDIA backend, loading LLVM
and libdevice, the first ``ptxas`` run, building the kernel launcher.  Measured
on an H200 (``bench/profile_verdict.py``, docs/LOOP.md): about a second, which
the first check in each worker used to pay on the student's clock.  A spare
worker compiles this small kernel (a ``tl.dot`` and an ``exp2``, as attention
uses) before it says it is ready, so the student's check pays only for its own
kernel's compiles.

``TRITON_ALWAYS_COMPILE`` is set for that one compile: with Triton's on-disk
cache warm a cache hit would skip exactly the work this is for.  The kernel's
cache entry is the same every time, so the cache does not grow.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (a @triton.jit kernel: Triton reads its parameters' annotations, so they stay Triton's own)

import os
import time

import torch
import triton
import triton.language as tl


@triton.jit
def _warm_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    tile = tl.load(x_ptr + rows[:, None] * BLOCK + rows[None, :])  # one BLOCK x BLOCK fp16 tile
    scores = tl.dot(tile, tl.trans(tile))  # fp32 accumulate, as q @ k^T
    tl.store(y_ptr + rows[:, None] * BLOCK + rows[None, :], tl.exp2(scores * 0.01).to(tl.float16))


def warm_compiler(device: str = "cuda") -> float:
    """Compile and run the warm-up kernel once; the seconds it took."""
    started = time.perf_counter()
    block = 16
    x = torch.randn(block, block, device=device, dtype=torch.float16)
    y = torch.empty_like(x)
    previous = os.environ.get("TRITON_ALWAYS_COMPILE")
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    try:
        _warm_kernel[(1,)](x, y, BLOCK=block)
        torch.cuda.synchronize()
    finally:
        if previous is None:
            del os.environ["TRITON_ALWAYS_COMPILE"]
        else:
            os.environ["TRITON_ALWAYS_COMPILE"] = previous
    return time.perf_counter() - started
