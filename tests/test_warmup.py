"""The spare worker's compiler warm-up kernel (tutor.harness.warmup) computes what it
says (run through the interpreter here), and on a GPU warming leaves Triton's
environment as it found it."""

from __future__ import annotations

import math
import os

import pytest
import torch

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # the interpreter here (TRITON_INTERPRET set before triton's import), as a worker does

from tutor.harness.warmup import _warm_kernel, warm_compiler, warm_harness  # noqa: E402


def test_the_warm_up_kernel_is_a_real_attention_row_loop():
    gen = torch.Generator().manual_seed(0)
    where = "cpu" if DEVICE.interpreter else "cuda"
    q = torch.randn(64, 64, generator=gen).half().to(where)
    k = torch.randn(128, 64, generator=gen).half().to(where)
    out = torch.empty_like(q)
    _warm_kernel[(1,)](q, k, out, N=128, BLOCK=64)
    # exp2 of raw scores: softmax at temperature 1/ln 2, over the 128 keys, values = keys
    expected = torch.softmax((q.double() @ k.double().T) * math.log(2), dim=1) @ k.double()
    assert (out.double() - expected).abs().max() < 2e-2


@pytest.mark.skipif(DEVICE.interpreter, reason="needs a GPU")
def test_warming_compiles_and_restores_the_environment():
    before = os.environ.get("TRITON_ALWAYS_COMPILE")
    assert warm_compiler() > 0
    assert os.environ.get("TRITON_ALWAYS_COMPILE") == before


@pytest.mark.skipif(not DEVICE.interpreter, reason="the interpreter's own warm-up")
def test_warming_the_interpreter_runs_the_kernel_and_restores_the_environment():
    """A CPU spare interprets the kernel once (small tiles) and imports every problem module."""
    import sys

    from tutor.harness.problems import PROBLEMS

    before = os.environ.get("TRITON_ALWAYS_COMPILE")
    assert warm_compiler("cpu") > 0
    assert os.environ.get("TRITON_ALWAYS_COMPILE") == before
    assert all(module in sys.modules for module in PROBLEMS.values())


def test_warming_the_harness_checks_the_drill_solution_and_leaves_it_alone():
    """What a GPU spare runs while it waits: one verdict of the drill's shipped solution."""
    from tutor.catalog import get_drill, solution_path

    path = solution_path(get_drill("02"))
    before = (path.stat().st_mtime_ns, path.read_bytes())
    result = warm_harness("02", DEVICE)
    assert result.solved and result.drill == "02" and result.file == str(path)
    assert result.performance.status != "done"  # no timed launches
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


@pytest.mark.skipif(DEVICE.interpreter, reason="a CPU spare does not run it")
def test_a_gpu_spare_is_ready_before_its_warm_up_and_a_job_sent_then_is_checked():
    """The spare says it is ready before it warms up (the warm-up runs in a thread and
    gives way to the job), so the job's check starts at once and is still right."""
    from tutor.catalog import get_drill, solution_path
    from tutor.loop.runner import Worker

    worker = Worker("auto", spare=True, warm_drill="01")
    try:
        assert worker.wait_ready() is not None
        assert "harness_warm_s" not in worker.startup  # ready was said before the warm-up ran
        job = {"drill": "02", "file": str(solution_path(get_drill("02"))), "seed": 0, "timing": False}
        result = worker.run(job, timeout_s=120)
        assert result.outcome == "solved", result.error
    finally:
        worker.close()
