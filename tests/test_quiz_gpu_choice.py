"""Which GPU the quiz's budget questions are about: the checks' own device (tutor.quiz.gpu.gpu_for_checks)."""

from __future__ import annotations

import pytest

from tutor.quiz import gpu


@pytest.fixture
def detected(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    budget = gpu.GpuBudget(name="test GPU", l2_bytes=50 * 2**20, hbm_bytes=80 * 2**30)

    def fake_detect(device_index: int = 0) -> gpu.GpuBudget:
        calls.append(device_index)
        return budget

    monkeypatch.setattr(gpu, "detect_gpu", fake_detect)
    return calls


@pytest.mark.parametrize(("interpreter", "preference", "asks"), [
    (False, "auto", True),  # the checks run on a GPU: its budget
    (None, "auto", True),  # not known yet, may be a GPU: ask
    (None, "cuda", True),
    (True, "auto", False),  # the interpreter: no GPU to ask about
    (None, "cpu", False),  # the CPU was asked for: torch is not even imported
])
def test_only_a_gpu_or_an_unknown_device_asks_torch(detected: list[int], interpreter: bool | None,
                                                     preference: str, asks: bool) -> None:
    found = gpu.gpu_for_checks(interpreter, preference)
    assert (found is not None) == asks
    assert len(detected) == (1 if asks else 0)
