"""Compile a phase's Triton variants in forked children, outside this process's GIL.

Triton's compiler holds the GIL for much of its work (the AST walk and most
MLIR passes; only ptxas runs outside it), so compiling N variants from N
threads of one process takes nearly N compiles' time: drill 04's 16 variants
took 2.8 s on an H200 from 16 threads (docs/LOOP.md, run 15).  Forked children
compile truly in parallel.  Each child runs one recorded compile-only call
(:func:`tutor.harness.cost.compile_only`: Triton's ``warmup`` call, the same
specialisation as the launch), which writes the compiled variant into Triton's
on-disk cache, and exits.  The parent then compiles as before
(:func:`tutor.harness.check.compile_concurrently`): each variant's cache key
is found on disk, so it only loads.

This is an accelerator, never a dependency: a child that fails, hangs past its
deadline or is stopped leaves its variant for the parent to compile itself.
A child never touches CUDA (the parent's CUDA context must not be used after a
fork): the Triton driver's device, stream and target queries are pinned to the
values the parent read before forking, and the child's standard output (the
worker's protocol pipe) goes to /dev/null.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

# "0": no forked compiles (every variant compiles in this process, from threads)
FORKED_COMPILE_ENV = "FLASHTUTOR_FORKED_COMPILE"
# a child that has not written its variant by then is killed; the parent compiles it
CHILD_DEADLINE_S = 60.0
_POLL_S = 0.005


def enabled() -> bool:
    """Whether this platform forks (Linux) and the environment has not turned it off."""
    return sys.platform.startswith("linux") and os.environ.get(FORKED_COMPILE_ENV, "1") != "0"


def fill_disk_cache(calls: Sequence[Callable[[], object]], stop: threading.Event | None = None) -> int:
    """Run each compile-only call in a forked child, all at once, and wait for them.
    Returns how many children finished cleanly (their variants are now in Triton's
    disk cache).  Fewer than two calls: nothing to overlap, returns 0."""
    if len(calls) < 2 or not enabled():
        return 0
    pin = _pin_triton_driver()
    if pin is None:
        return 0
    return run_in_children(calls, prepare=pin, stop=stop)


def run_in_children(calls: Sequence[Callable[[], object]], prepare: Callable[[], None] | None = None,
                    stop: threading.Event | None = None, deadline_s: float = CHILD_DEADLINE_S,
                    max_children: int | None = None) -> int:
    """Fork one child per call (at most ``max_children`` alive at once, default the
    CPU count); each runs ``prepare`` then its call and exits 0, or 1 if either
    raised.  Waits until all have exited, ``deadline_s`` has passed or ``stop`` is
    set (the rest are killed).  Returns the number that exited 0."""
    limit = max(1, max_children or os.cpu_count() or 1)
    deadline = time.monotonic() + deadline_s
    alive: set[int] = set()
    succeeded = 0
    queue = list(calls)
    while queue or alive:
        while queue and len(alive) < limit and not _stopped(stop) and time.monotonic() < deadline:
            alive.add(_fork(queue.pop(0), prepare))
        finished, succeeded_now = _reap(alive)
        succeeded += succeeded_now
        alive -= finished
        if _stopped(stop) or time.monotonic() >= deadline:
            _kill(alive)
            break
        if alive and not finished:
            time.sleep(_POLL_S)
    return succeeded


def _stopped(stop: threading.Event | None) -> bool:
    return stop is not None and stop.is_set()


def _fork(call: Callable[[], object], prepare: Callable[[], None] | None) -> int:
    with warnings.catch_warnings():  # "this process is multi-threaded": the child only compiles
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)  # the worker's stdout is its protocol pipe
            os.dup2(null, 2)
            sys.stdout = sys.stderr = open(os.devnull, "w")  # closed by os._exit below
            if prepare is not None:
                prepare()
            call()
            code = 0
        except BaseException:  # noqa: BLE001 - any failure: the parent compiles this variant itself
            code = 1
        finally:
            os._exit(code)  # no atexit handlers, no CUDA teardown, no flush of the parent's buffers
    return pid


def _reap(alive: set[int]) -> tuple[set[int], int]:
    finished: set[int] = set()
    succeeded = 0
    for pid in alive:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            finished.add(pid)
            continue
        if done:
            finished.add(pid)
            succeeded += os.waitstatus_to_exitcode(status) == 0
    return finished, succeeded


def _kill(alive: set[int]) -> None:
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _pin_triton_driver() -> Callable[[], None] | None:
    """Read the Triton driver's current device, stream and target here (the parent),
    and return what makes a forked child answer them without CUDA; None where this
    Triton has no active GPU driver."""
    try:
        from triton.runtime.driver import driver

        active: Any = driver.active
        device = active.get_current_device()
        target = active.get_current_target()
    except Exception:  # noqa: BLE001 - no GPU driver (or another Triton): no forked compiles
        return None

    def pin() -> None:
        active.get_current_device = lambda: device
        active.get_current_stream = lambda *args, **kwargs: 0
        active.get_current_target = lambda: target

    return pin
