"""On Triton's interpreter, how many times each element of a watched tensor was loaded.

The interpreter runs every ``tl.load`` as NumPy on real addresses.  While
:func:`counting_reads` is active, each load's masked-in addresses that fall in
a watched buffer add one to that element's count.  Drill 07 watches the K and V
page pools (their guard bands included), which measures which pages and
offsets a kernel read, and how many times: the bytes a decode step moved.  A
compiled GPU launch runs no Python per load; there nothing is counted (None).

The counter is a listener of :mod:`tutor.harness.read_trace`, which owns the
one hook into the interpreter's loads (shared with the guard bands' margin tracing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from tutor.harness import read_trace


def _counter(buffers: list[torch.Tensor], counts: list[Any]) -> Callable[[Any], None]:
    """A read_trace listener adding one, per masked-in address, to the element of
    ``buffers`` it lies in (``counts``: one NumPy int64 array per buffer)."""
    ranges = [(b.data_ptr(), b.data_ptr() + b.numel() * b.element_size(), b.element_size(), c)
              for b, c in zip(buffers, counts, strict=True)]

    def count(live: Any) -> None:
        for first, end, size, element_counts in ranges:
            inside = live[(live >= first) & (live < end)]
            if inside.size:
                np.add.at(element_counts, ((inside - first) // size).astype(np.int64), 1)

    return count


@contextmanager
def counting_reads(buffers: list[torch.Tensor], interpreter: bool) -> Iterator[list[Any] | None]:
    """Count the loads of each of ``buffers`` (1-D, contiguous) inside the block: yields
    one NumPy int64 array per buffer (filled as the block runs), or None off the interpreter."""
    if not interpreter:
        yield None
        return
    counts = [np.zeros(b.numel(), dtype=np.int64) for b in buffers]
    with read_trace.listening(_counter(buffers, counts), interpreter):
        yield counts
