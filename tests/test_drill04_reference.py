"""Drill 04's float64 reference: the written-out backward equals torch autograd's."""

from __future__ import annotations

import pytest
import torch

from tutor.harness.problems import attention_backward as bwd


def _autograd(q, k, v, do, causal):
    q64, k64, v64 = (t.to(torch.float64).requires_grad_() for t in (q, k, v))
    seq, head_dim = q.shape[-2], q.shape[-1]
    s = (q64 @ k64.transpose(-1, -2)) * head_dim**-0.5
    if causal:
        idx = torch.arange(seq)
        s = s.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    o = torch.softmax(s, -1) @ v64
    return o.detach(), torch.autograd.grad(o, (q64, k64, v64), do.to(torch.float64))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [37, 129])
def test_the_written_out_backward_equals_autograd(causal, seq):
    g = torch.Generator().manual_seed(seq)
    q, k, v, do = bwd.random_case((1, 2, seq, 64), "cpu", g)
    ref = bwd.reference(q, k, v, do, causal)
    o, grads = _autograd(q, k, v, do, causal)
    assert torch.allclose(ref.o, o, rtol=0, atol=1e-12)
    for name, want in zip(bwd.GRADS, grads, strict=True):
        assert float((ref.grads[name] - want).abs().max()) < 1e-12, name
    # and a wrong one would not pass: the check can fail
    assert float((ref.grads["dq"] * 1.001 - grads[0]).abs().max()) > 1e-12
