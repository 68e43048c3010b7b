"""One backward of drill 04's fast file and one of SDPA's, for Nsight Compute (issue 26).

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats python3 bench/profile_backward.py [B H N d] [--causal]

The autotuner runs first (outside the profiled range); then one fast-recompute backward
(D, dK/dV, dQ) and one SDPA backward (cuDNN on Hopper with torch 2.11) run between
cudaProfilerStart/Stop, so ncu reports exactly those kernels.  The shape defaults to
4x16x4096x128, full: the case where the fast file is furthest from cuDNN (0.72-0.74x).
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import load

FAST = Path(__file__).resolve().parent.parent / "solutions" / "04_flash_backward_fast.py"


def main() -> int:
    numbers = [int(x) for x in sys.argv[1:] if x.isdigit()] or [4, 16, 4096, 128]
    causal = "--causal" in sys.argv
    fast = load(FAST)
    torch.manual_seed(0)
    q, k, v, do = (torch.randn(*numbers, device="cuda", dtype=torch.float16) for _ in range(4))
    o, lse = fast.attention_forward(q, k, v, causal)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    for _ in range(3):  # autotune and warm both, outside the profiled range
        fast.attention_backward(q, k, v, o, lse, do, causal)
        torch.autograd.grad(out, leaves, do, retain_graph=True)
    torch.cuda.synchronize()
    print("configs:", fast.chosen_configs(numbers[3]), flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    fast.attention_backward(q, k, v, o, lse, do, causal)
    torch.autograd.grad(out, leaves, do, retain_graph=True)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
