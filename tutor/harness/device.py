"""Pick where the student's kernel runs: a CUDA or ROCm GPU, else the CPU
through Triton's interpreter.

This runs in the worker process *before* triton is imported, because
``@triton.jit`` reads ``TRITON_INTERPRET`` when the decorator runs.
"""

from __future__ import annotations

import os
from typing import Literal, get_args

from packaging.version import Version

from tutor.harness.result import Device, DeviceKind

# Three device words, three types:
#   DeviceChoice               what the user asks for (``--device``): a GPU when one is visible, a GPU, the CPU
#   result.DeviceKind          what the worker detected: "cuda", "rocm" or "cpu" (``Device.kind``)
#   launch.TorchDevice         the torch device string the tensors live on: "cuda" (ROCm too) or "cpu"
DeviceChoice = Literal["auto", "gpu", "cpu"]
DEVICE_CHOICES: tuple[DeviceChoice, ...] = get_args(DeviceChoice)
# Triton's interpreter fails on these drills before 3.7 ("only 0-dimensional arrays
# can be converted to Python scalars" in a loop bound; seen with triton 3.6 and
# numpy 2.4); 3.7, 3.8 and 3.9 were run here.  Compiled GPU runs work with 3.6.
INTERPRETER_MIN_TRITON = Version("3.7")


INTERPRET_ENV = "TRITON_INTERPRET"  # Triton's switch: "1" runs kernels through its interpreter


def interpreting() -> bool:
    """Whether this process runs kernels through Triton's interpreter (:func:`select_device` decided it)."""
    return os.environ.get(INTERPRET_ENV) == "1"


def interpreter_supports(triton_version: str) -> bool:
    """Can this Triton's CPU interpreter run the drills?  (``3.7.0+git…`` counts as 3.7.)"""
    return Version(triton_version).release >= INTERPRETER_MIN_TRITON.release


def select_device(choice: DeviceChoice = "auto") -> Device:
    """Set the interpreter switch if needed and describe the device.

    ``choice``: ``auto`` (GPU when one is visible), ``gpu`` (a GPU or an
    error) or ``cpu`` (force the interpreter even on a GPU machine).
    """
    if choice not in DEVICE_CHOICES:
        raise ValueError(f"device must be one of {DEVICE_CHOICES}, not {choice!r}")
    import torch  # importing torch does not import triton

    has_gpu = torch.cuda.is_available() and choice != "cpu"
    if choice == "gpu" and not has_gpu:
        raise RuntimeError("no CUDA or ROCm GPU is visible to PyTorch (see docs/SETUP.md)")
    if not has_gpu:
        os.environ[INTERPRET_ENV] = "1"
    import triton

    if not has_gpu and not interpreter_supports(triton.__version__):
        wanted = INTERPRETER_MIN_TRITON
        raise RuntimeError(
            f"triton {triton.__version__} is installed, and its CPU interpreter cannot run the drills: "
            f"pip install 'triton>={wanted}' (see docs/SETUP.md)"
        )
    if not has_gpu:
        from tutor.harness import interpreter_autotune, interpreter_bf16, interpreter_bounds, interpreter_patch

        interpreter_patch.install()  # one language swap per launch: same numbers, a third less time
        interpreter_patch.integers_as_on_a_gpu()  # no int32 overflow check: a GPU has none; a quarter less time
        interpreter_bf16.install()  # bfloat16 dots and arithmetic computed as a GPU does
        interpreter_bounds.install()  # a load or store outside every tensor: an error at its line, not a crash
        interpreter_autotune.install()  # an autotuned kernel runs its first config (no driver to time them)
    kind: DeviceKind
    if has_gpu:
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        name = torch.cuda.get_device_name(0)
    else:
        kind, name = "cpu", "CPU"
    return Device(kind=kind, name=name, interpreter=not has_gpu, torch=torch.__version__, triton=triton.__version__)

