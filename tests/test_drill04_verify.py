"""Drill 04's timed launches are compared once with float64 (``TimedLaunches.verify``):
on a GPU the harness calls it after the timing, since the timed backward records no
visits and may run another (an autotuned) configuration than the one the verdict
checked.  Called here directly, on the interpreter's timing shape."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # TRITON_INTERPRET set before triton's import, as a worker does
WHERE = "cpu" if DEVICE.interpreter else "cuda"

from tutor.catalog import get_drill, solution_path  # noqa: E402
from tutor.harness.loader import load_student_module  # noqa: E402
from tutor.harness.problems import attention_backward as bwd  # noqa: E402

DRILL = get_drill("04")


def _timed(tmp_path: Path, text: str) -> bwd.TimedLaunches:
    file = tmp_path / f"{abs(hash(text))}_{DRILL.file}"
    file.write_text(text)
    module = load_student_module(file, file.read_bytes())
    return bwd.timing_launches(DRILL, module, DEVICE.interpreter, WHERE, torch.Generator().manual_seed(0))


@pytest.mark.slow
def test_the_timed_backward_is_compared_with_float64(tmp_path):
    solution = solution_path(DRILL).read_text()
    right = _timed(tmp_path, solution)
    assert right.verify is not None and right.verify() is None
    scaled = "    dq = dq * sm_scale\n"
    assert solution.count(scaled) == 1
    wrong = _timed(tmp_path, solution.replace(scaled, "    dq = dq * sm_scale * 1.5\n"))
    assert wrong.verify is not None
    said = wrong.verify()
    assert said is not None and "dq of batch 0, head 0 is off by up to" in said and "not shown" in said
