"""Triton's interpreter, without its repeated language swaps: one per launch.

With ``TRITON_INTERPRET=1`` Triton runs a kernel as Python: when a kernel
launches it swaps ``triton.language``'s builtins (``tl.load``, ``tl.dot`` ...)
for interpreted ones, and swaps them back when the launch ends.  It swaps them
again on *every call of a* ``@triton.jit`` *function inside the kernel* — and
``tl.max``, ``tl.sum``, ``tl.cdiv``, ``tl.softmax`` are such functions
(``triton.language.standard``), so a flash-attention loop calls them several
times per block.  Each swap walks the language modules with
``inspect.getmembers``.  Measured on this project's CPU machine
(``python bench/profile_verdict.py --device cpu``, drill 01's solution): 468
swaps in one verdict, about a third of its time.

Inside one launch the repeats change nothing: the first swap of a module already
replaced its builtins (a replaced one is no longer a builtin, so a later walk
skips it) and the rest sets the same stateless helpers again.  So, while a
launch runs, :func:`install` lets a device function's call swap only the
language modules that this launch has not swapped yet.  The launch's own swap
and its restore at the end are Triton's, unchanged; a launch's numbers are the
same bits either way (``tests/test_interpreter_patch.py`` compares them in two
processes, one with ``FLASHTUTOR_INTERPRETER_PATCH_ONCE=0``).

Only Triton's private names are touched (``_patch_lang``,
``GridExecutor.__call__``); where a Triton version has other ones,
:func:`install` leaves the interpreter as it is and says so by returning False.
"""

from __future__ import annotations

import functools
import os
import threading
from types import ModuleType
from typing import Any

DISABLE_ENV = "FLASHTUTOR_INTERPRETER_PATCH_ONCE"  # "0": Triton's interpreter exactly as shipped


class _LaunchState(threading.local):
    """Per thread: how deep in interpreted launches, and which language modules
    (by the set of them a function sees) the running launch has swapped."""

    def __init__(self) -> None:
        self.depth = 0
        self.swapped: set[frozenset[int]] = set()


_state = _LaunchState()
_counts = {"swaps": 0, "skipped": 0}  # read by the tests and bench/profile_verdict.py


def swap_counts() -> dict[str, int]:
    """Language swaps done and skipped in this process since :func:`install`."""
    return dict(_counts)


def _language_modules(fn: Any, interpreter: ModuleType) -> frozenset[int]:
    """Which of triton.language / triton.language.core ``fn`` can see: what Triton's
    swap walks for ``fn`` (its ``_patch_lang`` reads the same globals)."""
    languages = (interpreter.tl, interpreter.tl.core)
    return frozenset(id(value) for value in fn.__globals__.values()
                     if isinstance(value, ModuleType) and value in languages)


def install() -> bool:
    """Make the running interpreter swap the language once per launch (idempotent).
    False when disabled by :data:`DISABLE_ENV` or when this Triton's interpreter
    lacks the names this relies on (it is then left as it is)."""
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return False
    from triton.runtime import interpreter

    executor = getattr(interpreter, "GridExecutor", None)
    swap = getattr(interpreter, "_patch_lang", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if executor is None or swap is None or scope_type is None or not hasattr(interpreter, "tl"):
        return False
    if getattr(swap, "_flashtutor_once", False):
        return True
    launch = executor.__call__

    @functools.wraps(swap)
    def swap_once(fn: Any) -> Any:
        key = _language_modules(fn, interpreter)
        if _state.depth > 0 and key in _state.swapped:
            _counts["skipped"] += 1
            return scope_type()  # nothing changed, nothing to restore
        _counts["swaps"] += 1
        scope = swap(fn)
        if _state.depth > 0:
            _state.swapped.add(key)
        return scope

    @functools.wraps(launch)
    def launch_with_one_swap(self: Any, *args: Any, **kwargs: Any) -> Any:
        outer, _state.swapped = _state.swapped, set()
        _state.depth += 1
        try:
            return launch(self, *args, **kwargs)  # swaps the kernel's language, restores it at its end
        finally:
            _state.depth -= 1
            _state.swapped = outer

    swap_once._flashtutor_once = True  # type: ignore[attr-defined]
    interpreter._patch_lang = swap_once
    executor.__call__ = launch_with_one_swap
    return True


OVERFLOW_CHECK_ENV = "FLASHTUTOR_INTERPRETER_OVERFLOW_CHECK"  # "1": keep Triton's int32 overflow checks


def integers_as_on_a_gpu() -> bool:
    """Skip the interpreter's int32 overflow check where it cannot fire.

    The interpreter redoes every 32-bit integer ``+``, ``-`` and ``*`` in int64 and
    compares it with the limits, then hands the result to ``device_assert``, which does
    nothing unless Triton runs in debug mode (``TRITON_DEBUG=1``): outside it, the check
    is work whose answer is dropped, and the arithmetic wraps around as a compiled GPU
    kernel's does either way.  It is about a quarter of a verdict's time on this
    project's CPU (drill 04's solution 2.5-3.5 s -> 1.9-2.5 s, drill 01's 0.9-1.6 s ->
    0.75-1.1 s, A/B in one process, the machine under load).  Left on in debug mode, with
    :data:`OVERFLOW_CHECK_ENV` = 1, or on a Triton without the option (False: unchanged)."""
    if os.environ.get(OVERFLOW_CHECK_ENV) == "1":
        return False
    import dataclasses

    from triton.runtime import interpreter

    builder: Any = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not hasattr(options, "sanitize_overflow") or getattr(options, "debug", False):
        return False
    builder.options = dataclasses.replace(options, sanitize_overflow=False)
    return True
