"""The hostile cases' allowance (``attention.reference.score_rounding_allowance``): a
kernel whose scores carry one fp16 rounding of q pre-scaled (right, and the Triton tutorial
once did it) stays inside it at scores of ~+-100, where the plain tolerance failed it; a
real mistake (the causal mask missing) does not."""

from __future__ import annotations

import torch

from tutor.harness import guarded as shared
from tutor.harness.problems.attention.reference import score_rounding_allowance


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    s = (q @ k.transpose(-1, -2)).masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def test_a_prescaled_fp16_query_is_inside_the_allowance_and_a_missing_mask_is_not():
    seq, dim = 150, 64
    scale = dim**-0.5
    idx = torch.arange(seq)
    causal = idx[None, :] <= idx[:, None]
    worst_plain = 0.0
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        q = (torch.randn(1, 2, seq, dim, generator=g) * 40).half()
        k, v = (torch.randn(1, 2, seq, dim, generator=g).half() for _ in range(2))
        expected = _attend(q.double() * scale, k.double(), v.double(), causal)
        allowance = score_rounding_allowance(q, k, v, expected, causal, 0.02, shared.ROUNDINGS, shared.FP16_U)
        # the kernels' qk_scale = sm_scale * log2(e) (a power of two alone would round nothing)
        qk_scale = scale * 1.4426950408889634
        prescaled = _attend((q.float() * qk_scale).half().double() / 1.4426950408889634, k.double(), v.double(), causal)
        err = (prescaled - expected).abs()
        worst_plain = max(worst_plain, float(err.max()))
        assert bool((err <= allowance).all()), seed
        unmasked = _attend(q.double() * scale, k.double(), v.double(), torch.ones_like(causal))
        assert bool(((unmasked - expected).abs() > allowance).any()), seed
    assert worst_plain > 0.02  # the plain tolerance would have failed a right kernel
