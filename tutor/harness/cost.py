"""What each phase of a check costs: kernel launches and Triton compiles, counted.

The read-out of a failing kernel must cost launches, not compiles (a compile of
the student's kernel is ~1 s on an H200, a launch microseconds): every probe
reuses a variant the correctness launches compiled.  This module counts both,
process-wide, so a check can say what each phase did (``CheckResult.costs``)
and a test can hold the diagnosis to zero compiles.

* launches: every ``run`` of a ``@triton.jit`` function, compiled or interpreted
  (``kernel[grid](...)`` goes through it; an autotuner's trial runs count too);
* compiles: Triton's ``jit_post_compile_hook`` (Triton 3.4 and later); None where
  this Triton has no such hook, and 0 on the interpreter, which compiles nothing.

It also keeps the *step* a check is at ("default case, seq=200, causal"), which
the worker reports before each of the student's correctness launches, so a
launch that never returns is named by the runner's timeout message.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tutor.harness.result import PhaseCost


@dataclass
class _Counts:
    launches: int = 0
    compiles: int = 0
    compiling_s: float = 0.0  # wall time inside :func:`compiling` blocks


_counts = _Counts()
_lock = threading.Lock()
_installed = False
_compiles_counted = False
_step_listener: Callable[[str], None] | None = None
_last_step = ""
_stop_thread: dict[int, threading.Event] = {}  # thread id -> an event that aborts its next launch
_compile_only = threading.local()  # .calls: this thread records its kernel calls, launches nothing
_launched = threading.local()  # .blocks: this thread records each launch's BLOCK_* constants
BLOCK_CONSTANTS = ("BLOCK_M", "BLOCK_N")  # the tile sizes the tutor reads from the module too
FLAG_CONSTANTS = ("CAUSAL",)  # a mode flag the drills' kernels take: what the launch really asked for
PROGRAMS = "programs"  # launched_blocks' key for the number of programs a launch's grid holds (an int grid)
COMPILE_ONLY_CALLS = 256  # more kernel calls than this from one warm-up: a launcher that loops on its results


class LaunchAborted(RuntimeError):
    """Raised in a background warm-up thread at its next launch once a job arrived."""


class TooManyCalls(RuntimeError):
    """Raised in compile-only mode past COMPILE_ONLY_CALLS kernel calls from one launcher."""


def install() -> None:
    """Count every launch and compile from now on (idempotent; the worker calls it)."""
    global _installed, _compiles_counted
    if _installed:
        return
    _installed = True
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return
    _wrap_run(JITFunction)
    _skip_autotuned_in_compile_only()
    try:
        from triton.runtime.interpreter import InterpretedFunction

        _wrap_run(InterpretedFunction)
    except ImportError:
        pass
    try:
        from triton import knobs

        previous = knobs.runtime.jit_post_compile_hook

        def counted(*args: Any, **kwargs: Any) -> Any:
            with _lock:
                _counts.compiles += 1
            return previous(*args, **kwargs) if previous is not None else None

        knobs.runtime.jit_post_compile_hook = counted
        _compiles_counted = True
    except (ImportError, AttributeError):
        _compiles_counted = False


def _wrap_run(cls: type) -> None:
    original = cls.run  # type: ignore[attr-defined]

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        stop = _stop_thread.get(threading.get_ident())
        if stop is not None and stop.is_set():
            raise LaunchAborted("a job arrived: the warm-up stops here")
        calls = getattr(_compile_only, "calls", None)
        if calls is not None:  # recorded, to be compiled later; no launch, not counted as one
            if len(calls) >= COMPILE_ONLY_CALLS:
                raise TooManyCalls("the warm-up's launcher kept calling kernels: it stops here")
            calls.append(functools.partial(original, self, *args, **{**kwargs, "warmup": True}))
            return None
        with _lock:
            _counts.launches += 1
        blocks = getattr(_launched, "blocks", None)
        if blocks is not None:
            seen = {k: int(kwargs[k]) for k in (*BLOCK_CONSTANTS, *FLAG_CONSTANTS) if isinstance(kwargs.get(k), int)}
            grid = kwargs.get("grid")
            if isinstance(grid, (tuple, list)) and grid and all(isinstance(g, int) for g in grid):
                seen[PROGRAMS] = functools.reduce(lambda a, b: a * b, grid, 1)
            blocks.append(seen)
        return original(self, *args, **kwargs)

    cls.run = run  # type: ignore[attr-defined]


@contextmanager
def compile_only() -> Iterator[list[Callable[[], object]]]:
    """In this thread, a kernel call launches nothing and returns None: it is
    recorded, as a call that compiles the variant its arguments select (Triton's
    ``warmup``: the same specialisation key as the launch), into the list this
    yields, for the caller to compile each on a thread of its own.  An autotuned
    kernel is left alone (timing configs that never ran would poison its choice):
    it compiles at the phase's own launch.  A launcher that reads its kernels'
    results to decide what to call next sees unwritten memory here; past
    COMPILE_ONLY_CALLS calls it is stopped (:class:`TooManyCalls`)."""
    calls: list[Callable[[], object]] = []
    _compile_only.calls = calls
    try:
        yield calls
    finally:
        _compile_only.calls = None


@contextmanager
def launched_blocks() -> Iterator[list[dict[str, int]]]:
    """In this thread, every kernel launch's BLOCK_M / BLOCK_N arguments (those passed as
    integers: an autotuned kernel's chosen config is not seen), its CAUSAL flag where it
    takes one by that name (:data:`FLAG_CONSTANTS`, as 0 or 1) and, under :data:`PROGRAMS`,
    how many programs its grid holds (a grid of integers, not a callable), one dict a
    launch, into the list this yields: the tile sizes the kernel really ran with, beside the
    module's constants that the tutor sizes its visit maps by."""
    install()
    blocks: list[dict[str, int]] = []
    _launched.blocks = blocks
    try:
        yield blocks
    finally:
        _launched.blocks = None


def _skip_autotuned_in_compile_only() -> None:
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return
    original = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(_compile_only, "calls", None) is not None:
            return None
        return original(self, *args, **kwargs)

    Autotuner.run = run


def stop_event() -> threading.Event | None:
    """The event that aborts this thread's launches (a spare's warm-up), or None."""
    return _stop_thread.get(threading.get_ident())


@contextmanager
def abortable(stop: threading.Event) -> Iterator[None]:
    """Launches from this thread raise :class:`LaunchAborted` once ``stop`` is set
    (a spare worker's warm-up gives way to the job that arrived)."""
    ident = threading.get_ident()
    _stop_thread[ident] = stop
    try:
        yield
    finally:
        _stop_thread.pop(ident, None)


@contextmanager
def compiling() -> Iterator[None]:
    """A block that compiles a phase's variants ahead of its launches: its wall time is
    the phase's ``compiling_s``."""
    started = time.perf_counter()
    try:
        yield
    finally:
        with _lock:
            _counts.compiling_s += time.perf_counter() - started


class Meter:
    """The cost of one phase, from the meter's making to :meth:`cost`."""

    def __init__(self, interpreter: bool) -> None:
        self.interpreter = interpreter
        self._start = (time.perf_counter(), _counts.launches, _counts.compiles)
        self._compiling_from = _counts.compiling_s

    def cost(self) -> PhaseCost:
        """Seconds, launches and compiles since the meter was made."""
        seconds = time.perf_counter() - self._start[0]
        compiles: int | None = _counts.compiles - self._start[2]
        if self.interpreter:
            compiles = 0
        elif not _compiles_counted:
            compiles = None
        return PhaseCost(seconds=seconds, launches=_counts.launches - self._start[1], compiles=compiles,
                         compiling_s=_counts.compiling_s - self._compiling_from)


def listen_steps(listener: Callable[[str], None] | None) -> None:
    """Where :func:`step` reports to (the worker's channel), or None."""
    global _step_listener
    _step_listener = listener


def step(words: str) -> None:
    """The check is about to launch the student's kernel for ``words``
    ("default case, shape 1x2x200x64, causal"): told to the runner, which names
    it if the launch never returns.  In a warm-up thread whose job arrived, a step
    is where the warm-up stops (as at a launch)."""
    global _last_step
    stop = _stop_thread.get(threading.get_ident())
    if stop is not None and stop.is_set():
        raise LaunchAborted("a job arrived: the warm-up stops here")
    _last_step = words
    if _step_listener is not None:
        _step_listener(words)


def last_step() -> str:
    """The words of the last :func:`step` in this process ("" after ``step("")``): what the
    check was running when the student's code raised, for the report to name."""
    return _last_step


def shape_words(shape: tuple[int, ...] | list[int]) -> str:
    return "x".join(str(n) for n in shape)
