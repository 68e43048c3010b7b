"""Run the student's launcher once, on fresh inputs, into a poisoned output.

The output lives inside a larger buffer: every element, and a guard region
before and after it, starts as a NaN bit pattern no kernel computes.  An
element still holding it afterwards was never written; a guard element that
changed was written out of bounds.  Q, K, V and the visit map get guard bands
too (:mod:`tutor.harness.guard`): a load past the end of an input reads NaN.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Literal

import torch

from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness.guarded import POISON_BITS, BadOutput, Guarded, returned_tensor, synchronize
from tutor.harness.loader import LAUNCHER, check_launcher_call
from tutor.harness.result import Device

__all__ = ["POISON_BITS", "BadOutput", "Launch", "random_inputs", "random_tensors", "run_launcher", "timing_tensors",
           "visit_grid"]

GUARD_ROWS = 128  # rows of head_dim after the output that must stay untouched


@dataclass
class Launch:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    guard: torch.Tensor
    visits: torch.Tensor | None
    bands: list[guarding.Band] = field(default_factory=list)  # Q, K, V, output, visit map
    launched: list[dict[str, int]] = field(default_factory=list)  # each kernel launch's BLOCK_M / BLOCK_N, CAUSAL

    def ran_without_causal(self) -> bool:
        """Did every kernel launch that took a CAUSAL argument get it false (and at least one
        take it)?  Measured at the launch, whatever the launcher was asked for."""
        flags = [x["CAUSAL"] for x in self.launched if "CAUSAL" in x]
        return bool(flags) and not any(flags)

    def other_blocks(self, module: ModuleType) -> dict[str, int]:
        """The BLOCK_M / BLOCK_N a kernel of this launch ran with where they differ from the
        module's constants (which size the tutor's visit map), or {}."""
        for blocks in self.launched:
            other = {k: v for k, v in blocks.items() if k in cost.BLOCK_CONSTANTS and getattr(module, k, v) != v}
            if other:
                return other
        return {}

    @property
    def unwritten(self) -> int:
        return int((self.out.view(torch.int16) == POISON_BITS).sum())

    @property
    def wrote_out_of_bounds(self) -> bool:
        out_band = [b for b in self.bands if b.name == "output"]
        if out_band:
            return bool(out_band[0].changed())
        return bool((self.guard != POISON_BITS).any())

    def writes_past_the_end(self) -> list[tuple[str, str, int]]:
        """(tensor, side, margin elements changed) for every band a store reached."""
        return [(b.name, side, n) for b in self.bands for side, n in b.changed().items()]


def random_inputs(
    shape: tuple[int, ...], device: str, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fresh standard-normal fp16 q, k, v (never zeros: zeros hide unwritten outputs)."""
    q, k, v = random_tensors(shape, device, generator, 3)
    return q, k, v


HEAVY_LAST_SCORE = 8.0  # the last row's score on its own key: e^8 against ~128 keys near 0 is ~93 % of its weight


def heavy_last_key(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``k`` with its last key along the last query row of the first query head of each K/V
    head's group, so that row scores it HEAVY_LAST_SCORE (q.k / sqrt(d)) and gives it most
    of its weight; every other row scores it about N(0, 1), as any key.  A kernel that
    skips the last row's own key (a loop bound one key short where the last block holds
    one key: seq = 129) is then off by about a whole value row, not by one key's share of
    the average (found by a blind attempt that passed at 0.007)."""
    group = q.shape[1] // k.shape[1]
    last_q = q[:, ::group, -1].to(torch.float32)  # (batch, kv heads, head_dim)
    heavy = HEAVY_LAST_SCORE * q.shape[-1] ** 0.5 * last_q / (last_q * last_q).sum(-1, keepdim=True)
    k = k.clone()
    k[:, :, -1] = heavy.to(k.dtype)
    return k


def accepts_keyword(function: Callable[..., object], name: str) -> bool:
    """Whether ``function`` takes the keyword argument ``name`` (by name, or through **kwargs);
    False where its signature cannot be read."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def split_count(module: ModuleType, launcher: str, wanted: int | None) -> int | None:
    """The ``num_splits=`` a split-KV launch passes: ``wanted`` where it is given and the
    module's ``launcher`` takes that keyword, else None (the launcher's own choice: one
    written without the keyword is launched as it is, since nothing in the contract's first
    arguments changes)."""
    if wanted is None or not accepts_keyword(getattr(module, launcher), "num_splits"):
        return None
    return wanted


def random_tensors(shape: tuple[int, ...], device: str, generator: torch.Generator, count: int) -> list[torch.Tensor]:
    """``count`` fresh standard-normal fp16 tensors, drawn in order (drill 04 adds dO to q, k, v)."""
    return [torch.randn(shape, generator=generator, dtype=torch.float32).to(device, torch.float16)
            for _ in range(count)]


def timing_tensors(shapes: Sequence[tuple[int, ...]], device: str, generator: torch.Generator) -> list[torch.Tensor]:
    """Standard-normal fp16 tensors of ``shapes`` for the timed launches, drawn on ``device``
    itself from one seed of the check's stream.  Nothing compares their values, and at a
    GPU's timing shape (4x16x4096x64, three tensors) a draw on the CPU and its copy took
    0.44 s a save (H200 box, docs/LOOP.md); the correctness inputs stay CPU-drawn
    (:func:`random_tensors`), the same on every device for one seed."""
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    on_device = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(shape, generator=on_device, device=device, dtype=torch.float16) for shape in shapes]


# The torch device string the check's tensors live on ("cuda" on ROCm too: torch names
# HIP devices "cuda"); not the user's --device choice nor the detected Device.kind.
TorchDevice = Literal["cuda", "cpu"]


def torch_device_name(device: Device) -> TorchDevice:
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
    fills: dict[str, str] | None = None,
) -> Launch:
    """Call ``module.attention`` once.  ``causal=None`` means the launcher takes no
    ``causal`` argument (full attention only, as in drill 02).

    Every tensor goes in as a view inside a guard band; ``fills`` maps "Q", "K",
    "V" to what their margins hold ("nan", the default, or "zero")."""
    q, k, v = inputs
    batch, heads, seq, _ = q.shape
    blocks = max(int(getattr(module, "BLOCK_M", 0) or 0), int(getattr(module, "BLOCK_N", 0) or 0))
    margin = guarding.margin_elements(tuple(q.shape), 2 * blocks)
    fills = fills or {}
    guarded = Guarded()
    views = tuple(guarded.input(name, t, margin, fills.get(name, "nan")) for name, t in zip("QKV", inputs, strict=True))
    out = guarded.output("output", tuple(q.shape), str(q.device), margin)
    visits = None
    if record_visits:
        n_m, n_n = visit_grid(seq, module.BLOCK_M, module.BLOCK_N)
        shape = (batch * heads, n_m, n_n)
        visits = guarded.visits("visit map", shape, str(q.device), guarding.margin_elements(shape, 2 * n_m))
    kwargs: dict[str, object] = {"out": out, "visits": visits}
    if causal is not None:
        kwargs["causal"] = causal
    launcher = getattr(module, LAUNCHER)
    check_launcher_call(launcher, ("q", "k", "v"), views, kwargs)  # a wrong def: say so at its line
    with cost.launched_blocks() as launched:
        returned = launcher(*views, **kwargs)
    synchronize(q)
    out = returned_tensor(f"{LAUNCHER}() returned", returned, out, tuple(q.shape))
    return Launch(q=q, k=k, v=v, out=out, guard=guarded.band("output").side("after"), visits=visits,
                  bands=guarded.bands, launched=launched)
