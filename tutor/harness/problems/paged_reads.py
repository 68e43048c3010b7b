"""On Triton's interpreter, how many times each element of a watched tensor was loaded.

The interpreter runs every ``tl.load`` as NumPy on real addresses.  While
:func:`counting_reads` is active, each load's masked-in addresses that fall in
a watched buffer add one to that element's count.  Drill 07 watches the K and V
page pools (their guard bands included), which measures which pages and
offsets a kernel read, and how many times: the bytes a decode step moved.  A
compiled GPU launch runs no Python per load; there nothing is counted (None).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

_watched: list[tuple[int, int, int, Any]] | None = None  # (first byte, end byte, element size, counts)
_installed = False


def _count(addresses: Any, mask: Any) -> None:
    if not _watched:
        return
    live = addresses.ravel() if mask is None else addresses[np.broadcast_to(mask, addresses.shape)]
    if live.size == 0:
        return
    for first, end, size, counts in _watched:
        inside = live[(live >= first) & (live < end)]
        if inside.size:
            np.add.at(counts, ((inside - first) // size).astype(np.int64), 1)


def _install() -> None:
    """Wrap the interpreter's masked load (every load goes through it)."""
    global _installed
    if _installed:
        return
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load = builder.create_masked_load

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        _count(ptrs.data, None if mask is None else mask.data)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    builder.create_masked_load = create_masked_load
    _installed = True


@contextmanager
def counting_reads(buffers: list[torch.Tensor], interpreter: bool) -> Iterator[list[Any] | None]:
    """Count the loads of each of ``buffers`` (1-D, contiguous) inside the block: yields
    one NumPy int64 array per buffer (filled as the block runs), or None off the interpreter."""
    global _watched
    if not interpreter:
        yield None
        return
    _install()
    counts = [np.zeros(b.numel(), dtype=np.int64) for b in buffers]
    _watched = [(b.data_ptr(), b.data_ptr() + b.numel() * b.element_size(), b.element_size(), c)
                for b, c in zip(buffers, counts, strict=True)]
    try:
        yield counts
    finally:
        _watched = None
