"""Loads into a guard band's margin, counted on Triton's interpreter
(tutor/harness/read_trace.py): each distinct margin element a load reads, mask
applied, on the side it lies; nothing outside :func:`tracing_reads`; nothing for
a masked load.  (The student-like kernels whose discarded reads the check reports
as ``read-past-end-unused`` are in solutions/NN_slug.mistakes.toml.)"""

from __future__ import annotations

from pathlib import Path

import pytest
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


def test_the_margin_tracer_and_the_page_counter_share_one_hook_and_see_the_same_loads(monkeypatch):
    """Both listeners (the margin tracing and drill 07's counter) see the one launch's
    loads; the interpreter's load is wrapped once, and each load is dispatched once."""
    from triton.runtime import interpreter

    from tutor.harness import read_trace
    from tutor.harness.problems import paged_reads

    dispatched = []
    dispatch = read_trace._dispatch
    monkeypatch.setattr(read_trace, "_dispatch", lambda a, m: (dispatched.append(1), dispatch(a, m)))
    data = torch.arange(40, dtype=torch.float16)
    with tracing_reads(interpreter=True):
        band = guard.input_band("X", data, margin=64)
        out = torch.empty(16, dtype=torch.float16)
        with paged_reads.counting_reads([band.buffer], interpreter=True) as counts:
            _copy[(1,)](band.view, out, 32, 40, BLOCK=16, MASKED=False)
    assert band.reads == {"after": 8}  # the margin tracer: elements 40..47
    assert counts is not None  # the counter: elements 32..47 of the view, each loaded twice
    assert counts[0].nonzero()[0].tolist() == list(range(64 + 32, 64 + 48))
    assert set(counts[0][64 + 32: 64 + 48].tolist()) == {2}
    assert len(dispatched) == 2  # the two loads, each once for both listeners
    # Triton's own method under read_trace's one wrapper (and the bounds check's, where the
    # device selection installed it: tutor/harness/interpreter_bounds.py), each once
    layers, fn = [], interpreter.InterpreterBuilder.create_masked_load
    while hasattr(fn, "__wrapped__"):
        layers.append(Path(fn.__code__.co_filename).name)
        fn = fn.__wrapped__
    assert Path(fn.__code__.co_filename).parts[-3:] == ("triton", "runtime", "interpreter.py")
    assert layers.count("read_trace.py") == 1 and set(layers) <= {"read_trace.py", "interpreter_bounds.py"}
    assert len(layers) == len(set(layers))
    assert read_trace._listeners == []  # both gone when their blocks end: the hook only calls through


def test_with_no_listener_the_hook_calls_through(monkeypatch):
    from tutor.harness import read_trace

    monkeypatch.setattr(read_trace, "_dispatch", lambda a, m: pytest.fail("dispatched with no listener"))
    with read_trace.listening(lambda live: None, interpreter=True):  # installs the hook
        pass
    out = torch.empty(16, dtype=torch.float16)
    _copy[(1,)](torch.arange(40, dtype=torch.float16), out, 0, 40, BLOCK=16, MASKED=False)
    assert out.tolist() == list(range(16))
