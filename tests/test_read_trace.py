"""Loads into a guard band's margin, counted on Triton's interpreter
(tutor/harness/read_trace.py): each distinct margin element a load reads, mask
applied, on the side it lies; nothing outside :func:`tracing_reads`; nothing for
a masked load.  (The student-like kernels whose discarded reads the check reports
as ``read-past-end-unused`` are in solutions/NN_slug.mistakes.toml.)"""

from __future__ import annotations

import torch

from tutor.harness.device import select_device

DEVICE = select_device("cpu")  # TRITON_INTERPRET before triton's import, as a worker does

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from tutor.harness import guard  # noqa: E402
from tutor.harness.read_trace import tracing_reads  # noqa: E402


@triton.jit
def _copy(src, dst, START, N, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    # one program copies BLOCK elements from START on; twice, so a repeated read counts once
    offs = START + tl.arange(0, BLOCK)
    for _ in range(2):
        if MASKED:
            x = tl.load(src + offs, mask=(offs >= 0) & (offs < N), other=0.0)
        else:
            x = tl.load(src + offs)
    tl.store(dst + tl.arange(0, BLOCK), x)


def _run(start: int, masked: bool, trace: bool = True) -> dict[str, int]:
    data = torch.arange(40, dtype=torch.float16)
    with tracing_reads(interpreter=trace):
        band = guard.input_band("X", data, margin=64)
        out = torch.empty(16, dtype=torch.float16)
        _copy[(1,)](band.view, out, start, 40, BLOCK=16, MASKED=masked)
    return dict(band.reads)


def test_a_load_past_the_end_counts_each_margin_element_once():
    assert _run(32, masked=False) == {"after": 8}  # elements 40..47, read twice


def test_a_load_before_the_start_counts_on_that_side():
    assert _run(-5, masked=False) == {"before": 5}


def test_a_masked_load_reads_no_margin():
    assert _run(32, masked=True) == {}
    assert _run(-5, masked=True) == {}


def test_nothing_is_counted_outside_tracing():
    assert _run(32, masked=False, trace=False) == {}


def _launch_following_q_fill(start: int):
    """A launch (the real _copy kernel) whose NaN follows Q's margin fill *without*
    reading Q past its end: as a kernel that leaves a torch.empty scratch buffer
    unfilled can get back a freed NaN margin.  ``start``: where it reads Q (0: inside)."""
    data = torch.arange(40, dtype=torch.float16)

    def again(fills: dict[str, str]) -> torch.Tensor:
        band = guard.input_band("Q", data, margin=64, fill=fills.get("Q", "nan"))
        out = torch.empty(16, dtype=torch.float16)
        _copy[(1,)](band.view, out, start, 40, BLOCK=16, MASKED=False)
        if fills.get("Q", "nan") in ("nan", "nan-after"):
            out[0] = float("nan")  # the NaN appears, but from no load past the end
        return out

    return again


def test_a_probe_finding_needs_a_traced_read_of_that_margin():
    from tutor.harness.guarded import probe_reads

    with tracing_reads(interpreter=True):  # no load reads past Q: the moved NaN is not a read past the end
        assert probe_reads(_launch_following_q_fill(0), 1, ("Q",)) == []
    with tracing_reads(interpreter=True):  # a load that does read past Q's end keeps the finding
        assert [(t, side) for t, side, _ in probe_reads(_launch_following_q_fill(30), 1, ("Q",))] == [("Q", "after")]
    # nothing traced (as on a GPU): the probe alone
    assert probe_reads(_launch_following_q_fill(0), 1, ("Q",)) == [("Q", "after", 1)]
