"""The compile-only mode the phases' concurrent compiles use (tutor.harness.cost):
a kernel call there is recorded and launches nothing, a launcher that keeps calling
is stopped, and outside the mode the same call launches (run through the
interpreter here; on a GPU the recorded calls compile, bench/profile_verdict.py)."""

from __future__ import annotations

import pytest
import torch

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # TRITON_INTERPRET set before triton's import, as a worker does

from tutor.harness import cost  # noqa: E402
from tutor.harness.warmup import _warm_kernel  # noqa: E402


def _tensors() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    where = "cpu" if DEVICE.interpreter else "cuda"
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(64, 64, generator=gen).half().to(where)
    k = torch.randn(128, 64, generator=gen).half().to(where)
    return q, k, torch.zeros_like(q)


def test_a_call_in_compile_only_mode_is_recorded_and_launches_nothing():
    cost.install()
    q, k, out = _tensors()
    with cost.compile_only() as calls:
        assert _warm_kernel[(1,)](q, k, out, N=128, BLOCK=64) is None
    assert len(calls) == 1
    assert bool((out == 0).all())  # nothing ran
    _warm_kernel[(1,)](q, k, out, N=128, BLOCK=64)  # outside the mode: a launch
    assert not bool((out == 0).all())


def test_a_launcher_that_keeps_calling_kernels_is_stopped():
    cost.install()
    q, k, out = _tensors()
    with cost.compile_only() as calls, pytest.raises(cost.TooManyCalls):
        for _ in range(cost.COMPILE_ONLY_CALLS + 1):
            _warm_kernel[(1,)](q, k, out, N=128, BLOCK=64)
    assert len(calls) == cost.COMPILE_ONLY_CALLS


def test_a_warm_up_whose_job_arrived_stops_instead_of_compiling():
    import threading

    from tutor.harness.check import compile_concurrently

    cost.install()
    q, k, out = _tensors()
    arrived = threading.Event()
    arrived.set()
    with cost.abortable(arrived), pytest.raises(cost.LaunchAborted):
        compile_concurrently([lambda: _warm_kernel[(1,)](q, k, out, N=128, BLOCK=64)])
    assert bool((out == 0).all())
