"""Run the student's launcher once, on fresh inputs, into a poisoned output.

The output lives inside a larger buffer: every element, and a guard region
after the end, starts as a NaN bit pattern no kernel computes.  An element
still holding it afterwards was never written; a guard element that changed
was written out of bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import torch

from tutor.harness.loader import LAUNCHER, check_launcher_call

POISON_BITS = 0x7D5A  # an fp16 NaN with a payload; computed NaNs are 0x7E00 / 0x7FFF
GUARD_ROWS = 128  # rows of head_dim after the output that must stay untouched


class BadOutput(Exception):
    """The launcher returned something that is not the attention output."""


@dataclass
class Launch:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    guard: torch.Tensor
    visits: torch.Tensor | None

    @property
    def unwritten(self) -> int:
        return int((self.out.view(torch.int16) == POISON_BITS).sum())

    @property
    def wrote_out_of_bounds(self) -> bool:
        return bool((self.guard != POISON_BITS).any())


def random_inputs(shape: tuple[int, ...], device: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Fresh standard-normal fp16 q, k, v (never zeros: zeros hide unwritten outputs)."""
    return tuple(torch.randn(shape, generator=generator, dtype=torch.float32).to(device, torch.float16) for _ in range(3))


def torch_device_name(device) -> str:
    """The torch device string for a :class:`~tutor.harness.result.Device`."""
    return "cpu" if device.interpreter else "cuda"


def visit_grid(seq: int, block_m: int, block_n: int) -> tuple[int, int]:
    return (-(-seq // block_m), -(-seq // block_n))


def poisoned_output(shape: tuple[int, ...], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    numel = 1
    for n in shape:
        numel *= n
    buffer = torch.full((numel + GUARD_ROWS * shape[-1],), POISON_BITS, dtype=torch.int16, device=device)
    out = buffer[:numel].view(torch.float16).view(shape)
    return out, buffer[numel:]


def run_launcher(
    module: ModuleType,
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    causal: bool | None,
    record_visits: bool,
) -> Launch:
    """Call ``module.attention`` once.  ``causal=None`` means the launcher takes no
    ``causal`` argument (full attention only, as in drill 02)."""
    q, k, v = inputs
    batch, heads, seq, _ = q.shape
    out, guard = poisoned_output(tuple(q.shape), str(q.device))
    visits = None
    if record_visits:
        n_m, n_n = visit_grid(seq, module.BLOCK_M, module.BLOCK_N)
        visits = torch.zeros((batch * heads, n_m, n_n), dtype=torch.int32, device=q.device)
    kwargs = {"out": out, "visits": visits}
    if causal is not None:
        kwargs["causal"] = causal
    launcher = getattr(module, LAUNCHER)
    check_launcher_call(launcher, ("q", "k", "v"), (q, k, v), kwargs)  # a wrong def: say so at its line
    returned = launcher(q, k, v, **kwargs)
    if q.is_cuda:
        torch.cuda.synchronize()  # surface asynchronous faults here, inside the student's launch
    result = out if returned is None else returned
    if not isinstance(result, torch.Tensor):
        raise BadOutput(f"{LAUNCHER}() returned {type(result).__name__}, not a tensor")
    if tuple(result.shape) != tuple(q.shape):
        raise BadOutput(f"{LAUNCHER}() returned shape {tuple(result.shape)}, expected {tuple(q.shape)}")
    if result.dtype != torch.float16:
        raise BadOutput(f"{LAUNCHER}() returned dtype {result.dtype}, expected torch.float16")
    if result.data_ptr() != out.data_ptr():
        # the launcher made its own output: check that one, without the poison guarantees
        out = result
    return Launch(q=q, k=k, v=v, out=out, guard=guard, visits=visits)
