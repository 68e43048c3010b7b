"""Triton's interpreter computes bfloat16 dots, arithmetic and casts as a GPU does
(tutor/harness/interpreter_bf16.py): shipped, it multiplied bfloat16 bit patterns as
integers, so a correct kernel that feeds its MMA in bfloat16 FAILED on the CPU."""

from __future__ import annotations

import pytest
import torch
from helpers_harness import check_jobs, job, shipped_solution

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # the interpreter here (TRITON_INTERPRET set before triton's import)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

pytestmark = pytest.mark.skipif(not DEVICE.interpreter, reason="the interpreter's own arithmetic")


@triton.jit
def _bf16_ops(a_ptr, b_ptr, dot_ptr, ew_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)
    tile = rows[:, None] * N + rows[None, :]
    a = tl.load(a_ptr + tile).to(tl.bfloat16)  # fp32 -> bf16: rounded to nearest even
    b = tl.load(b_ptr + tile).to(tl.bfloat16)  # fp16 -> bf16
    tl.store(dot_ptr + tile, tl.dot(a, b))  # bf16 products, fp32 accumulation
    tl.store(ew_ptr + 0 * N * N + tile, a.to(tl.float32))
    tl.store(ew_ptr + 1 * N * N + tile, (a + b).to(tl.float32))
    tl.store(ew_ptr + 2 * N * N + tile, (a * b).to(tl.float32))
    tl.store(ew_ptr + 3 * N * N + tile, tl.maximum(a, b).to(tl.float32))
    tl.store(ew_ptr + 4 * N * N + tile, (-a).to(tl.float32))
    tl.store(ew_ptr + 5 * N * N + tile, tl.where(a > b, 1.0, 0.0))


def test_bf16_dot_arithmetic_and_casts_match_torch_bf16():
    gen = torch.Generator().manual_seed(0)
    n = 16
    a = torch.randn(n, n, generator=gen) * 3
    b = torch.randn(n, n, generator=gen).half()
    dot = torch.empty(n, n)
    ew = torch.empty(6, n, n)
    _bf16_ops[(1,)](a, b, dot, ew, N=n)
    a16, b16 = a.bfloat16(), b.bfloat16()
    expected_dot = a16.double() @ b16.double()  # bf16 products are exact; only the fp32 sums round
    assert (dot.double() - expected_dot).abs().max() < 1e-4
    for got, expected in zip(ew, [a16, a16 + b16, a16 * b16, torch.maximum(a16, b16), -a16,
                                  (a16 > b16).float()], strict=True):
        assert torch.equal(got, expected.float())


@pytest.mark.slow
def test_drill01_with_its_pv_product_in_bf16_solves(tmp_path):
    """A correct kernel written differently: P and V cast to bfloat16 for the MMA."""
    text = shipped_solution("01").read_text(encoding="utf-8")
    assert "tl.dot(p.to(v.dtype), v)" in text
    file = tmp_path / "01_causal_mask.py"
    file.write_text(text.replace("tl.dot(p.to(v.dtype), v)", "tl.dot(p.to(tl.bfloat16), v.to(tl.bfloat16))"),
                    encoding="utf-8")
    (result,) = check_jobs([job(file, "01")])
    assert result.outcome == "solved", (result.codes, result.max_abs_err)
