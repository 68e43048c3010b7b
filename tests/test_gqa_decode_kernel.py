"""bench/gqa_decode_kernel.py (issue 26's GQA-packed decode) against float64 attention,
under the interpreter: ragged lengths, groups of 2 and 4 query heads per K/V head, slices
that end mid-tile and slices left empty by a short sequence."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # TRITON_INTERPRET set before triton's import
WHERE = "cpu" if DEVICE.interpreter else "cuda"
KERNEL = Path(__file__).resolve().parent.parent / "bench" / "gqa_decode_kernel.py"


def _kernel():
    spec = importlib.util.spec_from_file_location("gqa_decode_kernel", KERNEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gqa_decode_kernel"] = module
    spec.loader.exec_module(module)
    return module


def _reference(q, k, v, lengths):
    group = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64)
    for b, n in enumerate(lengths.tolist()):
        kk = k[b, :, :n].double().repeat_interleave(group, dim=0)
        vv = v[b, :, :n].double().repeat_interleave(group, dim=0)
        w = torch.softmax((kk @ q[b].double()[:, :, None])[..., 0] / q.shape[-1] ** 0.5, dim=-1)
        out[b] = (w[:, None, :] @ vv)[:, 0, :]
    return out


@pytest.mark.parametrize(("heads", "kv_heads", "splits"), [(4, 2, 3), (8, 2, 4), (4, 4, 1)])
def test_the_packed_group_matches_float64(heads, kv_heads, splits):
    kernel = _kernel()
    gen = torch.Generator().manual_seed(heads * 10 + splits)
    batch, max_len, dim = 3, 300, 16
    q = torch.randn((batch, heads, dim), generator=gen).half().to(WHERE)
    k, v = (torch.randn((batch, kv_heads, max_len, dim), generator=gen).half().to(WHERE) for _ in range(2))
    lengths = torch.tensor([300, 1, 137], dtype=torch.int32)  # a full cache, one position, a slice's end mid-tile
    out = kernel.attention(q, k, v, lengths.to(WHERE), num_splits=splits)
    err = (out.double().cpu() - _reference(q.cpu(), k.cpu(), v.cpu(), lengths)).abs().max().item()
    assert err < 2e-3, err


def test_heads_that_do_not_split_into_groups_are_refused():
    kernel = _kernel()
    q = torch.zeros((1, 3, 16), dtype=torch.float16)
    k = torch.zeros((1, 2, 8, 16), dtype=torch.float16)
    with pytest.raises(ValueError, match="do not split into groups"):
        kernel.attention(q, k, k, torch.tensor([8]))
