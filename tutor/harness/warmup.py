"""Warm a spare worker's compiler (GPU) or interpreter (CPU) while it waits for a job.

The first Triton compile in a fresh process pays once for what every later
compile shares: importing Triton's compiler and NVIDIA backend, loading LLVM
and libdevice, the first ``ptxas`` run, building the kernel launcher.  Measured
on an H200 (``bench/profile_verdict.py``, docs/LOOP.md): about a second, which
the first check in each worker used to pay on the student's clock.  A spare
worker imports the problem modules and compiles this small kernel (an
attention row loop on 64x64 tiles) before it says it is ready, so the
student's check pays only for its own kernel's compiles.

``TRITON_ALWAYS_COMPILE`` is set for that one compile: with Triton's on-disk
cache warm a cache hit would skip exactly the work this is for.  The kernel's
cache entry is the same every time, so the cache does not grow.

The first verdict in a fresh process also pays for the harness's own first
CUDA operations (torch loads each operation's kernels on first use: the
float64 reference's matmuls and softmax, the guard bands' fills and compares,
the visit map's reads): measured on an H200, about 0.4 s of the first
verdict's 1.5 s (``bench/profile_verdict.py``; the later ones took 0.6-0.7 s).
On a GPU a spare therefore also runs one verdict of the drill's own
solution (:func:`warm_harness`; no timed launches, nothing written), the
whole path the student's next check takes.
"""

# mypy: disable-error-code="untyped-decorator,no-untyped-def"
# (a Triton kernel: Triton reads its parameters' annotations, so they stay Triton's own)

import importlib
import os
import time

import torch
import triton
import triton.language as tl

from tutor.harness.launch import TorchDevice
from tutor.harness.result import CheckResult, Device


@triton.jit
def _warm_kernel(q_ptr, k_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    # a one-block attention row loop: the same kinds of work (loads in a loop,
    # two tl.dot's on 64x64 tiles, a running max, exp2) go through the same
    # compiler passes (software pipelining, Hopper's warp-group MMA) as the drills
    rows = tl.arange(0, BLOCK)
    tile = rows[:, None] * BLOCK + rows[None, :]
    q = tl.load(q_ptr + tile)
    m_i = tl.full([BLOCK], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK], tl.float32)
    acc = tl.zeros([BLOCK, BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        k = tl.load(k_ptr + start * BLOCK + tile)
        s = tl.dot(q, tl.trans(k))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), k)
        m_i = m_new
    tl.store(out_ptr + tile, (acc / l_i[:, None]).to(tl.float16))


def warm_compiler(device: TorchDevice = "cuda") -> float:
    """Import the harness's problem modules, then compile and run the warm-up
    kernel once (on ``"cpu"``: interpret it once, on small tiles, which pays the
    interpreter's own first-launch costs); the seconds it took."""
    started = time.perf_counter()
    from tutor.harness.problems import PROBLEMS

    for module in PROBLEMS.values():
        importlib.import_module(module)
    block, n = (16, 32) if device == "cpu" else (64, 128)
    q = torch.randn(block, block, device=device, dtype=torch.float16)
    k = torch.randn(n, block, device=device, dtype=torch.float16)
    out = torch.empty_like(q)
    previous = os.environ.get("TRITON_ALWAYS_COMPILE")
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"
    try:
        _warm_kernel[(1,)](q, k, out, N=n, BLOCK=block)
        if device != "cpu":
            torch.cuda.synchronize()
    finally:
        if previous is None:
            del os.environ["TRITON_ALWAYS_COMPILE"]
        else:
            os.environ["TRITON_ALWAYS_COMPILE"] = previous
    return time.perf_counter() - started


def warm_harness(drill_id: str, device: Device) -> CheckResult:
    """Run the verdict phase once on drill ``drill_id``'s shipped solution (Triton's
    on-disk cache usually holds its variants) and wait for the device; its result.
    Raises what the check raises: the caller only loses the head start."""
    from tutor.catalog import get_drill, solution_path
    from tutor.harness.check import run_verdict
    from tutor.harness.job import CheckJob

    drill = get_drill(drill_id)
    result, _ = run_verdict(CheckJob(drill=drill.id, file=str(solution_path(drill)), timing=False, seed=0), device)
    if not device.interpreter:
        torch.cuda.synchronize()
    return result
