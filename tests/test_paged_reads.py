"""Loads counted element by element on Triton's interpreter (tutor/harness/problems/paged_reads.py),
the measurement under drill 07's diagnosis of which pages a kernel read and how many times."""

from __future__ import annotations

import torch

from tutor.harness.device import select_device

DEVICE = select_device("cpu")  # TRITON_INTERPRET before triton's import, as a worker does

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tutor.harness.problems import paged_reads  # noqa: E402


def test_the_counter_counts_each_masked_in_load_element_by_element():
    @triton.jit
    def twice(X, Out, N: tl.constexpr):
        offs = tl.arange(0, N)
        a = tl.load(X + offs, mask=offs < 5, other=0.0)
        b = tl.load(X + offs, mask=offs % 2 == 0, other=0.0)
        tl.store(Out + offs, a + b)

    x, out = torch.arange(8, dtype=torch.float32), torch.empty(8)
    with paged_reads.counting_reads([x], interpreter=True) as counts:
        twice[(1,)](x, out, N=8)
    assert counts is not None
    assert counts[0].tolist() == [2, 1, 2, 1, 2, 0, 1, 0]
    with paged_reads.counting_reads([x], interpreter=False) as none:
        assert none is None
