"""On Triton's interpreter, a load or store outside every tensor a launch was given is
an error with the kernel's line, not a crash or silent garbage.

The interpreter runs each ``tl.load`` / ``tl.store`` as NumPy on raw addresses and
checks none of them: a pointer offset that is wrong by a lot reads another
allocation's bytes, or writes into the heap and the worker dies later with SIGSEGV
or SIGABRT ("the worker died"), far from the line that did it.  On a GPU the same
access is an illegal-address fault or, as silently, another tensor's bytes.

While an interpreted launch runs, :func:`install` keeps the byte ranges of the
storages of its tensor arguments (a guard band's margins lie inside its storage,
so a read of a margin is no error here: the guard bands measure those), and every
load, store and atomic checks its masked-in addresses against them.  One outside
them all raises :class:`OutOfBounds`, which names the access, the program and the
nearest tensor; :mod:`tutor.harness.errors` reports it at the kernel's line.  Every
store is also handed to :mod:`tutor.harness.interpreter_races`, which finds two
programs storing different values to one element.

Masked-off lanes are not accesses and are not checked.  A launch given a tensor that
is not on the CPU (the interpreter copies those) is not checked.  Off with
``FLASHTUTOR_BOUNDS_CHECK=0``.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from tutor.harness import interpreter_races

DISABLE_ENV = "FLASHTUTOR_BOUNDS_CHECK"  # "0": loads and stores unchecked, as Triton ships them


@dataclass(frozen=True)
class Span:
    """One tensor argument's storage: bytes [first, end)."""

    name: str
    first: int
    end: int
    element_size: int


class OutOfBounds(RuntimeError):
    """A load or store reached memory outside every tensor the launch was given."""


class _Launch(threading.local):
    def __init__(self) -> None:
        self.spans: list[list[Span] | None] = []  # a stack: one entry per running launch (None: unchecked)
        # per running launch, the first integer // or % by 0 it ran, in words ("" while none)
        self.zero_division: list[str] = []


_launch = _Launch()


def _tensors(name: str, value: Any) -> list[tuple[str, Any]]:
    """(argument name, tensor) for a tensor argument, a tuple of them, or a descriptor's base."""
    if isinstance(value, tuple):
        return [pair for i, v in enumerate(value) for pair in _tensors(f"{name}[{i}]", v)]
    base = getattr(value, "base", None)
    if base is not None and hasattr(base, "data_ptr") and not hasattr(value, "data_ptr"):
        return _tensors(name, base)
    return [(name, value)] if hasattr(value, "data_ptr") and hasattr(value, "untyped_storage") else []


def spans_of(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Span] | None:
    """The storages of a launch's tensor arguments, named by parameter; None when one is
    not on the CPU (the interpreter runs on a copy of it) or the call cannot be bound."""
    try:
        signature = inspect.signature(fn)
        # the launch options (num_warps ...) are no parameters: Triton drops them the same way
        given = {k: v for k, v in kwargs.items() if k in signature.parameters}
        bound = signature.bind_partial(*args, **given).arguments
    except (TypeError, ValueError):
        return None
    spans = []
    for name, value in bound.items():
        for label, tensor in _tensors(name, value):
            if tensor.device.type != "cpu":
                return None
            storage = tensor.untyped_storage()
            first = storage.data_ptr()
            spans.append(Span(label, first, first + storage.nbytes(), tensor.element_size()))
    return spans


def _words(kind: str, live: Any, size: int, spans: list[Span], where: str) -> str:
    """The error's text: how many elements, the first outside address's nearest tensor."""
    outside = np.ones(live.shape, dtype=bool)
    for s in spans:
        outside &= ~((live >= s.first) & (live + size <= s.end))
    bad = live[outside]
    first = int(bad[0])

    def distance(s: Span) -> int:
        return s.first - first if first < s.first else max(0, first + size - s.end)

    near = min(spans, key=distance) if spans else None
    def elements(n: int) -> str:
        return f"{n} element{'s' * (n != 1)}"

    if near is None:
        nearest = "the launch was given no tensor"
    elif first < near.first:
        nearest = f"{elements(-(-(near.first - first) // size))} before the start of {near.name}'s storage"
    else:
        nearest = f"{elements(-(-(first + size - near.end) // size))} past the end of {near.name}'s storage"
    verb = {"load": "reads", "store": "writes", "atomic": "updates"}[kind]
    return (f"a {kind} {verb} {elements(int(outside.sum()))} outside every tensor the "
            f"kernel was given ({where}; the first: {nearest}). The interpreter does not stop such an access, and on "
            "a GPU it is an illegal-address fault or another tensor's bytes: check the offsets and the mask of this "
            "line, and the program ids they are computed from (tl.program_id(axis) runs over the launch grid's "
            f"axis: {_grid_words()}).")


def masked_in(ptrs: Any, mask: Any) -> Any:
    """The addresses of ``ptrs`` (NumPy) that ``mask`` (None: all) lets through, flat."""
    return ptrs.ravel() if mask is None else ptrs[np.broadcast_to(mask, ptrs.shape)]


def check(kind: str, ptrs: Any, mask: Any, size: int) -> None:
    """Raise :class:`OutOfBounds` if a masked-in address of ``ptrs`` (a NumPy uint64 array
    of byte addresses, each ``size`` bytes wide) lies outside the running launch's spans."""
    check_addresses(kind, masked_in(ptrs, mask), size)


def check_addresses(kind: str, live: Any, size: int) -> None:
    """:func:`check` on addresses already masked in."""
    if not _launch.spans or _launch.spans[-1] is None:
        return
    spans = _launch.spans[-1]
    if live.size == 0:
        return
    low, high = int(live.min()), int(live.max()) + size
    if any(low >= s.first and high <= s.end for s in spans):  # the usual case: one tensor holds them all
        return
    inside = np.zeros(live.shape, dtype=bool)
    for s in spans:
        inside |= (live >= s.first) & (live + size <= s.end)
    if bool(inside.all()):
        return
    raise OutOfBounds(_words(kind, live, size, spans, _program()) + _zero_division_words())


def _program() -> str:
    """The running program, in words ("program (0, 9, 0)")."""
    from triton.runtime import interpreter

    grid = getattr(interpreter.interpreter_builder, "grid_idx", None)
    return f"program {tuple(int(i) for i in grid)}" if grid is not None else "one program"


def _grid_words() -> str:
    """The launch grid, in words ("a grid of (2, 4, 1)"), or "" where the interpreter has none."""
    from triton.runtime import interpreter

    dims = getattr(interpreter.interpreter_builder, "grid_dim", None)
    return f"this launch's grid is {tuple(int(d) for d in dims)}" if dims is not None else "the grid the launcher gave"


def _kernel_line() -> str:
    """The innermost frame outside Triton and this module (the kernel's line being
    interpreted), as "line N: `source`"; "" where there is none."""
    frame = inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if name != __file__ and "/triton/" not in name.replace("\\", "/"):
            info = inspect.getframeinfo(frame, context=1)
            source = (info.code_context or [""])[0].strip()
            return f"line {info.lineno}" + (f": `{source}`" if source else "")
        frame = frame.f_back
    return ""


def divided(divisor: Any) -> None:
    """Note the first integer division or remainder by 0 of the running launch (``divisor``: the
    NumPy divisor).  Not an error: a correct kernel may divide in lanes it then masks off."""
    if _launch.zero_division and not _launch.zero_division[-1] and bool(np.any(np.asarray(divisor) == 0)):
        where = ", ".join(part for part in (_program(), _kernel_line()) if part)
        _launch.zero_division[-1] = where


def _zero_division_words() -> str:
    """What an out-of-bounds error adds where its launch divided an integer by 0 earlier."""
    where = _launch.zero_division[-1] if _launch.zero_division else ""
    if not where:
        return ""
    return (f" Before it, this launch divided an integer by 0 ({where}): Triton's interpreter makes that 0, a GPU"
            " an undefined value, and an offset or program index computed from it can land anywhere: check that"
            " divisor (a count such as a group size H // H_KV that came out 0, arguments passed in another order).")


def _noting_zero_divisors(op: Any) -> Any:
    """An interpreter builder's integer // or % that notes a divisor of 0 first (:func:`divided`)."""

    @functools.wraps(op)
    def noted(self: Any, lhs: Any, rhs: Any) -> Any:
        divided(rhs.data)
        return op(self, lhs, rhs)

    return noted


def _element_size(handle: Any) -> int:
    ty = handle.get_element_ty()
    return max(1, int(getattr(ty, "primitive_bitwidth", 8)) // 8)


def install() -> bool:
    """Check every interpreted load, store and atomic against its launch's tensors
    (idempotent); False where disabled or where this Triton lacks the names used."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return False
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    executor = getattr(interpreter, "GridExecutor", None)
    names = ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas",
             "create_idiv", "create_srem", "create_urem")
    if builder is None or executor is None or not all(hasattr(builder, n) for n in names):
        return False
    if getattr(builder.create_masked_load, "_flashtutor_bounds", False):
        return True
    launch = executor.__call__

    @functools.wraps(launch)
    def checked_launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        _launch.spans.append(spans_of(self.fn, args, kwargs))
        _launch.zero_division.append("")
        interpreter_races.begin()
        try:
            return launch(self, *args, **kwargs)
        finally:
            interpreter_races.end()
            _launch.zero_division.pop()
            _launch.spans.pop()

    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    @functools.wraps(load)
    def masked_load(self: Any, ptrs: Any, mask: Any, *rest: Any) -> Any:
        check("load", ptrs.data, None if mask is None else mask.data, _element_size(ptrs))
        return load(self, ptrs, mask, *rest)

    @functools.wraps(store)
    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        size = _element_size(ptrs)
        live = masked_in(ptrs.data, None if mask is None else mask.data)  # once, for both checks
        check_addresses("store", live, size)
        spans = _launch.spans[-1] if _launch.spans else None
        if spans is not None and live.size:
            values = masked_in(np.broadcast_to(value.data, ptrs.data.shape), None if mask is None else mask.data)
            interpreter_races.stored(spans, live, values, size)
        return store(self, ptrs, value, mask, *rest)

    @functools.wraps(rmw)
    def atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
        check("atomic", ptr.data, None if mask is None else mask.data, _element_size(ptr))
        return rmw(self, op, ptr, val, mask, *rest)

    @functools.wraps(cas)
    def atomic_cas(self: Any, ptr: Any, *rest: Any) -> Any:
        check("atomic", ptr.data, None, _element_size(ptr))
        return cas(self, ptr, *rest)

    # integer // and % (sdiv and udiv call create_idiv); a float's are create_fdiv / create_frem
    for name in ("create_idiv", "create_srem", "create_urem"):
        setattr(builder, name, _noting_zero_divisors(getattr(builder, name)))
    masked_load._flashtutor_bounds = True  # type: ignore[attr-defined]
    builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = atomic_rmw, atomic_cas
    executor.__call__ = checked_launch
    return True
