"""The memory budgets the score-matrix questions ask about.

A :class:`GpuBudget` is a name, an L2 size and an HBM size in bytes.  When a
GPU is present the quiz uses *its* sizes (:func:`detect_gpu`, which reads
``torch.cuda.get_device_properties``); otherwise it uses the stated budgets in
:data:`STATED_BUDGETS`, which are the vendors' round numbers taken literally in
decimal units (50 MB = 50,000,000 bytes) so a question can state them exactly.

torch is imported only inside :func:`detect_gpu`: importing this module (or the
quiz) costs nothing and works on a machine without torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tutor.harness.device import DeviceChoice

MB = 10**6
GB = 10**9


@dataclass(frozen=True)
class GpuBudget:
    """Where the score matrix has to fit: ``l2_bytes`` of cache, ``hbm_bytes`` of memory.

    ``detected`` is True when the sizes were read from the GPU this quiz runs
    on, False for a stated budget.
    """

    name: str
    l2_bytes: int
    hbm_bytes: int
    detected: bool = False

    def __post_init__(self) -> None:
        for field_name in ("l2_bytes", "hbm_bytes"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{field_name} must be a positive number of bytes, not {value!r}")

    @property
    def source(self) -> str:
        """How a question names the budget: "your GPU (NAME)" or "a stated NAME budget (...)": a stated
        budget is the vendor's round figure in decimal bytes, which is not what the card counts (an
        H100's "50 MB" of L2 is 50 MiB = 52,428,800 bytes on the card; blind round 28's review)."""
        if self.detected:
            return f"the GPU this quiz runs on ({self.name})"
        return (f"a stated {self.name} budget (the round figure quoted for an {self.name}, taken in decimal bytes:"
                " not the card's own count)")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "l2_bytes": self.l2_bytes, "hbm_bytes": self.hbm_bytes, "detected": self.detected}


STATED_BUDGETS: dict[str, GpuBudget] = {
    budget.name: budget
    for budget in (
        GpuBudget("A100 80GB", l2_bytes=40 * MB, hbm_bytes=80 * GB),
        GpuBudget("H100", l2_bytes=50 * MB, hbm_bytes=80 * GB),
        GpuBudget("H200", l2_bytes=60 * MB, hbm_bytes=141 * GB),
        GpuBudget("L4", l2_bytes=48 * MB, hbm_bytes=24 * GB),
        GpuBudget("RTX 4090", l2_bytes=72 * MB, hbm_bytes=24 * GB),
    )
}


def budget_from_properties(props: Any) -> GpuBudget | None:
    """A detected budget from an object shaped like ``torch.cuda.get_device_properties(i)``
    (``name``, ``L2_cache_size``, ``total_memory``); None when a size is missing or zero
    (some drivers report no L2 size)."""
    l2 = getattr(props, "L2_cache_size", 0) or 0
    hbm = getattr(props, "total_memory", 0) or 0
    if l2 <= 0 or hbm <= 0:
        return None
    return GpuBudget(name=str(props.name), l2_bytes=int(l2), hbm_bytes=int(hbm), detected=True)


def detect_gpu(device_index: int = 0) -> GpuBudget | None:
    """The budget of the visible CUDA or ROCm GPU, or None without one (or without torch).

    Imports torch when called (about 2 s on a small CPU machine), never at module import.
    """
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return budget_from_properties(torch.cuda.get_device_properties(device_index))


def gpu_for_checks(interpreter: bool | None, choice: DeviceChoice) -> GpuBudget | None:
    """The GPU the budget questions are about: the one the checks run on.

    ``interpreter`` is the checks' device (None while the worker has not said yet);
    ``choice`` is the ``--device`` asked for.  Only a GPU device, or an unknown
    one that may be a GPU, asks torch (:func:`detect_gpu`, seconds: call it off a UI thread).
    """
    on_gpu = interpreter is False
    unknown = interpreter is None and choice != "cpu"
    return detect_gpu() if on_gpu or unknown else None
