"""On Triton's interpreter, two programs of one launch that store different values
to the same element: a race, kept for the check to report.

On a GPU the programs of a launch run in no fixed order, so when two of them store
to one element, which value lands is a race: the output is right on some runs and
wrong on others.  The interpreter runs the programs one after another, always in
the same order, which hides it: a kernel whose padding rows store garbage over
another program's rows passes whenever the rightful program happens to run last.

While an interpreted launch runs (:mod:`tutor.harness.interpreter_bounds` calls
:func:`begin` and :func:`end` around it, and :func:`stored` from every store), each
element stored remembers the program that stored it last and the value's bits.  A
store by another program of *different* bits is a :class:`StoreRace`, which names the
tensor, the element and both programs, and keeps the stack of the store.  It is kept,
not raised, so the launch runs on and its output is checked as always: a kernel whose
output is wrong anyway is diagnosed from what it computed, and one whose output came out
right only through the interpreter's order is told of the race
(:func:`tutor.harness.check.run_verdict`, which :func:`take` s the first one; reported at
the store's line by :mod:`tutor.harness.errors`).  Equal values are no race (the result
is the same in any order);
atomics are not stores and are not checked; masked-off lanes are not stores.  The
tutor's own visit maps (parameters named ``Visits...``) are bookkeeping whose
overlaps the visit read-out measures, and are left out.
"""

from __future__ import annotations

import threading
import traceback
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tutor.harness.interpreter_bounds import Span


class StoreRace(RuntimeError):
    """Two programs of one launch stored different values to the same element; ``frames``:
    the stack of the second store."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.frames = traceback.extract_stack()


_first: list[StoreRace] = []  # the first race since :func:`take` (one process runs one check at a time)


def take() -> StoreRace | None:
    """The first race found since the last call, and forget it."""
    found = _first[0] if _first else None
    _first.clear()
    return found


class _Stores(threading.local):
    def __init__(self) -> None:
        # a stack, one entry per running launch: (tensor name, store size) -> (last program, last bits)
        self.stack: list[dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]] = []


_stores = _Stores()


def begin() -> None:
    """A launch starts."""
    _stores.stack.append({})


def end() -> None:
    _stores.stack.pop()


def _program() -> tuple[int, ...]:
    from triton.runtime import interpreter

    grid = getattr(interpreter.interpreter_builder, "grid_idx", None)
    return tuple(int(i) for i in grid) if grid is not None else (0,)


def _encode(program: tuple[int, ...]) -> int:
    x, y, z = (tuple(program) + (0, 0, 0))[:3]
    return x | (y << 21) | (z << 42)


def _decode(code: int) -> tuple[int, int, int]:
    mask = (1 << 21) - 1
    return code & mask, (code >> 21) & mask, code >> 42


def stored(spans: list[Span], live: Any, values: Any, size: int) -> None:
    """Record a store's masked-in elements (``live``: NumPy uint64 byte addresses, each
    ``size`` bytes, launch ``spans`` known; ``values``: theirs, one each) and keep a
    :class:`StoreRace` (the first, for :func:`take`) where another program of this launch
    stored different bits."""
    if not _stores.stack:
        return
    launch = _stores.stack[-1]
    values = np.ascontiguousarray(values)
    bits = values.view(f"u{values.itemsize}").astype(np.uint64) if values.itemsize in (1, 2, 4, 8) \
        else values.astype(np.float64).view(np.uint64)
    program = _encode(_program())
    for span in spans:
        inside = (live >= span.first) & (live + size <= span.end)
        if not inside.any() or span.name.lower().startswith("visit"):
            continue
        key = (span.name, size)
        if key not in launch:
            count = (span.end - span.first) // size
            launch[key] = (np.full(count, -1, dtype=np.int64), np.zeros(count, dtype=np.uint64))
        owner, last = launch[key]
        index = ((live[inside] - span.first) // size).astype(np.int64)
        new = bits[inside]
        clash = (owner[index] >= 0) & (owner[index] != program) & (last[index] != new)
        if clash.any() and not _first:
            at = int(np.argmax(clash))
            element = int(index[at])
            _first.append(StoreRace(
                f"programs {_decode(int(owner[element]))} and {_decode(program)} both store element {element} of "
                f"{span.name} ({int(clash.sum())} elements of this store clash so), with different values. On a GPU "
                "the programs of a launch run in no fixed order, so which value lands there is a race: right on one "
                "run, wrong on the next. The interpreter runs them one after another, which hides it. Check this "
                "store's offsets and mask: each element is stored by one program (or added with an atomic)."))
        owner[index] = program
        last[index] = new
