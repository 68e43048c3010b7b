"""On Triton's interpreter, which loads reached into a guard band's margin.

A guard band's NaN margins (:mod:`tutor.harness.guard`) catch a load past the
end of an input only when the value read reaches the output.  A kernel that
loads a tile with no mask and then masks the *scores* (``tl.where(col_ok, qk,
-inf)``) discards the NaN: its output is right, but on a GPU that same load
reads memory past the tensor — an illegal-address fault or another tensor's
bytes, depending on where the allocation ends.

The interpreter runs every load as NumPy on real addresses, so here the tutor
can see the read itself: while :func:`tracing_reads` is active, every band made
(:func:`register`, called by :mod:`tutor.harness.guard`) is watched, and each
load (``tl.load``, masked or not) counts the addresses it read, mask applied,
that fall in a band's margins (:attr:`Band.reads`).  A compiled GPU launch runs
no Python per load; there this measures nothing (and says nothing).

This module owns the tutor's one hook into the interpreter's loads: a small
registry of listeners (:func:`listening`), each handed the masked-in addresses
of every load, computed once per load for all of them.  The margin tracing is
one listener; drill 07's page-pool counter
(:mod:`tutor.harness.problems.paged_reads`) is another.  With no listener
active the hook only calls through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch


class Watched(Protocol):
    """What a watched band offers (:class:`tutor.harness.guard.Band` is one): its
    name, its buffer (the margins and the tensor), the tensor's view, the margin's
    length in elements, and the counts of margin elements read, by side.  A
    protocol, so this module needs nothing from :mod:`tutor.harness.guard`, which
    registers every band it makes here."""

    name: str
    buffer: torch.Tensor
    view: torch.Tensor
    margin: int
    reads: dict[str, int]


@dataclass
class _Margin:
    """One side of a watched band: its byte range and which of its elements were read."""

    band: Watched
    side: str  # "before" or "after"
    first: int  # first byte
    end: int  # byte past the last
    touched: Any  # NumPy bool, one per margin element


_watched: list[_Margin] | None = None  # the margins of the bands made while tracing (None: not tracing)


def register(band: Watched) -> None:
    """Watch ``band``'s margins for reads (a no-op unless :func:`tracing_reads` is active)."""
    if _watched is None:
        return
    size = band.buffer.element_size()
    start = band.buffer.data_ptr()
    inside = band.view.data_ptr() + band.view.numel() * size
    for side, first in (("before", start), ("after", inside)):
        _watched.append(_Margin(band, side, first, first + band.margin * size, np.zeros(band.margin, dtype=bool)))


def _mark_margins(live: Any) -> None:
    """The margin listener: mark the margin elements the masked-in ``live`` addresses
    (uint64 NumPy, 1-D) read; ``Band.reads[side]`` is then how many distinct elements
    of that margin were read."""
    if not _watched:
        return
    low, high = int(live.min()), int(live.max())
    for margin in _watched:
        if high >= margin.first and low < margin.end:  # only then look address by address
            inside = live[(live >= margin.first) & (live < margin.end)]
            if inside.size:
                margin.touched[(inside - margin.first) // margin.band.buffer.element_size()] = True
                margin.band.reads[margin.side] = int(margin.touched.sum())


def margins_read() -> set[tuple[str, str]] | None:
    """(band name, side) of every margin a load of this trace has read so far, over all
    the bands made since :func:`tracing_reads` began; None when nothing is traced (a GPU)."""
    if _watched is None:
        return None
    return {(m.band.name, m.side) for m in _watched if m.band.reads.get(m.side)}


Listener = Callable[[Any], None]
"""Handed the masked-in addresses (uint64 NumPy, 1-D, never empty) of each interpreted load."""

_listeners: list[Listener] = []  # the active listeners, in the order they began
_installed = False


def _dispatch(addresses: Any, mask: Any) -> None:
    """Hand one load's masked-in addresses to every active listener (computed once for all)."""
    live = addresses.ravel() if mask is None else addresses[np.broadcast_to(mask, addresses.shape)]
    if live.size == 0:
        return
    for listener in tuple(_listeners):
        listener(live)


def _install() -> None:
    """Wrap the interpreter's one load (``create_load`` goes through it too), once per process."""
    global _installed
    if _installed:
        return
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    load = builder.create_masked_load

    @functools.wraps(load)
    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any) -> Any:
        if _listeners:  # the fast path: no listener, no work but the call through
            _dispatch(ptrs.data, None if mask is None else mask.data)
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    builder.create_masked_load = create_masked_load
    _installed = True


@contextmanager
def listening(listener: Listener, interpreter: bool) -> Iterator[bool]:
    """Hand ``listener`` the masked-in addresses of every load inside the block; yields
    whether it listens (only on the interpreter: a compiled launch runs no Python per load)."""
    if not interpreter:
        yield False
        return
    _install()
    _listeners.append(listener)
    try:
        yield True
    finally:
        _listeners.remove(listener)


@contextmanager
def tracing_reads(interpreter: bool) -> Iterator[None]:
    """Watch the bands made inside the block (on the interpreter; elsewhere nothing)."""
    global _watched
    if not interpreter:
        yield
        return
    _watched = []
    try:
        with listening(_mark_margins, interpreter):
            yield
    finally:
        _watched = None
