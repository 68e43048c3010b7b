"""Guard bands: every tensor the kernel touches lives inside a larger buffer.

Q, K, V, the output and the visit map are handed to the student's launcher as
contiguous views into buffers with a margin before and after, so the strides
the kernel sees are the ones it would see anyway.  The margins hold a
sentinel: NaN for the inputs, so a load past the end reads NaN instead of
faulting (and the NaN shows in the output, if the value is used), and a poison
bit pattern for the output and the visit map, so a store past the end changes
a margin.  :meth:`Band.changed` says which side was written after a launch.

A margin is as large as a whole block the kernel might load or store without
a mask, and never smaller than ``MIN_MARGIN_ROWS`` rows of the last dimension.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from tutor.harness import read_trace

INPUT_NAN_BITS = 0x7E5A  # a quiet fp16 NaN with a payload: what a load past the end of Q/K/V reads
INPUT_NAN_BITS_32 = 0x7FC05A5A  # the same for an fp32 input (drill 04's lse)
VISIT_SENTINEL = 0x5A5A5A5A  # an int32 no visit-map store writes (the kernel writes 1)
MIN_MARGIN_ROWS = 128
SIDES = ("before", "after")


@dataclass
class Band:
    """One guarded tensor: ``view`` is what the kernel gets."""

    name: str  # "Q", "K", "V", "output", "visit map"
    buffer: torch.Tensor  # 1-D, the margins and the tensor
    view: torch.Tensor
    margin: int  # elements on each side
    bits: int  # the margins' sentinel, as the integer its elements must still hold
    reads: dict[str, int] = field(default_factory=dict)  # side -> margin elements loads read (interpreter)
    source: torch.Tensor | None = None  # an input's own tensor, which the view was copied from

    def overwritten(self) -> int:
        """How many elements of an input's view no longer hold their source's bits: a
        store landed inside the input (0 for a band that is not an input's)."""
        if self.source is None:
            return 0
        view, source = self.view, self.source
        if view.is_floating_point():
            width = {2: torch.int16, 4: torch.int32}.get(view.element_size(), torch.int64)
            view, source = view.view(width), source.view(width)
        return int((view != source).sum())

    def side(self, which: str) -> torch.Tensor:
        inside = self.view.numel()
        part = self.buffer[: self.margin] if which == "before" else self.buffer[self.margin + inside:]
        if part.dtype == torch.float16:
            return part.view(torch.int16)
        return part.view(torch.int32) if part.dtype == torch.float32 else part

    def changed(self) -> dict[str, int]:
        """side -> how many margin elements no longer hold the sentinel."""
        found: dict[str, int] = {}
        if self.bits < 0:
            return found
        for which in SIDES:
            part = self.side(which)
            n = int((part != _as_signed(self.bits, part.dtype)).sum())
            if n:
                found[which] = n
        return found


def _as_signed(bits: int, dtype: torch.dtype) -> int:
    width = 16 if dtype == torch.int16 else 32
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def margin_elements(shape: tuple[int, ...], rows: int) -> int:
    """``rows`` rows of the last dimension (at least MIN_MARGIN_ROWS), rounded up
    to 64 elements so the view stays 128-byte aligned for fp16."""
    rows = max(rows, MIN_MARGIN_ROWS)
    n = rows * (shape[-1] if shape else 1)
    return -(-n // 64) * 64


def band(name: str, shape: tuple[int, ...], dtype: torch.dtype, device: str, margin: int, bits: int,
         inside: torch.Tensor | None = None, inside_bits: int | None = None) -> Band:
    """A buffer of ``margin`` + numel + ``margin`` elements; the margins hold ``bits``,
    the tensor holds ``inside`` (copied), or ``inside_bits`` everywhere."""
    numel = 1
    for n in shape:
        numel *= n
    int_dtype = torch.int16 if dtype == torch.float16 else torch.int32
    buffer = torch.full((margin + numel + margin,), _as_signed(bits, int_dtype), dtype=int_dtype, device=device)
    if inside_bits is not None:
        buffer[margin: margin + numel] = _as_signed(inside_bits, int_dtype)
    buffer = buffer.view(dtype)
    view = buffer[margin: margin + numel].view(shape)
    if inside is not None:
        view.copy_(inside)
    made = Band(name=name, buffer=buffer, view=view, margin=margin, bits=bits)
    read_trace.register(made)  # on the interpreter, while a check runs: its loads are watched
    return made


def input_band(name: str, tensor: torch.Tensor, margin: int, fill: str = "nan") -> Band:
    """Q, K or V in a band.  ``fill``: "nan" (the sentinel, both sides), "zero"
    (finite margins, to tell whether NaN in the output came from them), or
    "nan-before" / "nan-after" (NaN on that side only, zeros on the other)."""
    bits = 0 if fill == "zero" else INPUT_NAN_BITS_32 if tensor.dtype == torch.float32 else INPUT_NAN_BITS
    made = band(name, tuple(tensor.shape), tensor.dtype, str(tensor.device), margin, bits, inside=tensor)
    made.source = tensor
    if fill in ("nan-before", "nan-after"):
        made.side("after" if fill == "nan-before" else "before").fill_(0)
        made.bits = -1  # the margins no longer hold one sentinel: never asked whether they changed
    return made


def computed_nans(out: torch.Tensor, poison_bits: int) -> int:
    """Non-finite output elements the kernel wrote (the poison is not counted)."""
    return int((~torch.isfinite(out.to(torch.float32)) & (out.view(torch.int16) != poison_bits)).sum())


def probe_reads(launch: Callable[[dict[str, str]], torch.Tensor], poison_bits: int, baseline: int,
                names: tuple[str, ...] = ("Q", "K", "V")) -> list[tuple[str, str, int]]:
    """Which inputs' margins reach the output: (tensor, side, NaN outputs it causes).

    ``launch(fills)`` runs the same kernel on the same inputs with those margin
    fills and returns its output; ``baseline`` is how many NaN it computed with
    every margin NaN.  With every margin finite the NaN the kernel computes
    itself remains; what disappears came from a load past the end of a tensor,
    and NaN on one tensor (then on its one side) alone says which.  A load past
    the end whose value is never used (masked afterwards) changes nothing and is
    not seen here."""
    finite = {n: "zero" for n in names}
    own = computed_nans(launch(finite), poison_bits)
    if baseline <= own:
        return []
    found = []
    for name in names:
        both = computed_nans(launch({**finite, name: "nan"}), poison_bits) - own
        if both <= 0:
            continue
        after = computed_nans(launch({**finite, name: "nan-after"}), poison_bits) - own
        if after > 0:
            found.append((name, "after", after))
        if both > after:  # NaN before the tensor reaches outputs that NaN after it does not
            found.append((name, "before", both - max(after, 0)))
    return found
