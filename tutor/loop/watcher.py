"""Turn file-system events in ``drills/`` into one "this drill file was saved".

Editors save in different ways, and each way is several events:

* in place (VS Code, nano): ``modified`` ... ``closed`` on the file itself;
* temp file then rename (JetBrains "safe write", many vim set-ups): ``created``
  and ``modified`` on a temp name, then ``moved`` temp -> the drill file;
* delete then recreate, or vim's rename-to-backup (``moved`` file -> ``file~``)
  followed by a fresh ``created``/``modified``/``closed`` of the file.

:class:`DrillWatcher` maps every event that touches a drill file by name
(``src_path`` and a move's ``dest_path``) to ``on_change(path, settled)``; any
other name (swap files, ``4913``, ``~`` backups, ``__pycache__``) is ignored.
``settled`` is true for the events that end a save: a close after writing and
the rename into place.  :class:`SaveDebouncer` then collapses the events of one
save, and bursts of saves, into one call:

* a settled event with nothing else pending fires after ``settle_s`` (50 ms);
* otherwise (a write still going, a second save in the same burst, or any
  save within ``burst_s`` of the last fire) it waits for ``quiet_s`` (200 ms)
  without events, and never longer than ``max_wait_s`` (1 s) after the first.

The native observer (inotify on Linux) is tried first; when it cannot start
(``OSError``: the inotify watch or instance limit, too many open files) or
delivers nothing (a probe file written into the directory is never reported:
network filesystems, WSL's ``/mnt``), the watcher falls back to watchdog's
``PollingObserver`` and says so through ``on_status``.  A supervisor thread
restarts the observer if its thread dies or the directory is replaced.

Threads: watchdog's observer thread only calls ``SaveDebouncer.poke`` (a dict
update under a lock); the debouncer's own thread makes the ``on_save`` call.
watchdog is imported only when a watcher starts, so the debouncer and
everything built on it work without it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:  # watchdog is imported when an observer starts (doctor reports it missing)
    from watchdog.events import FileSystemEventHandler

log = logging.getLogger(__name__)

QUIET_S = 0.2
SETTLE_S = 0.05
MAX_WAIT_S = 1.0
BURST_S = 1.0
POLL_INTERVAL_S = 0.5
PROBE_TIMEOUT_S = 2.0
SUPERVISE_INTERVAL_S = 0.5
PROBE_NAME = ".flashtutor-watch-probe"

WatcherMode = Literal["native", "polling"]
"""Which observer runs: the OS's file events (inotify, FSEvents, ...) or a poll of the files."""
NATIVE: WatcherMode = "native"
POLLING: WatcherMode = "polling"

# event types that can change a file's content or existence; opened /
# closed_no_write are reads and never mean a save
_CHANGE_EVENTS = frozenset({"created", "modified", "deleted", "moved", "closed"})
_SETTLING_EVENTS = frozenset({"closed", "moved"})


@dataclass
class _Pending:
    first: float
    last: float
    deadline: float


class SaveDebouncer:
    """Collects change events per path and calls ``on_save(path)`` once per save
    or burst of saves (see the module docstring for the timing rules)."""

    def __init__(
        self,
        on_save: Callable[[Path], None],
        *,
        quiet_s: float = QUIET_S,
        settle_s: float = SETTLE_S,
        max_wait_s: float = MAX_WAIT_S,
        burst_s: float = BURST_S,
    ):
        self._on_save = on_save
        self.quiet_s, self.settle_s, self.max_wait_s, self.burst_s = quiet_s, settle_s, max_wait_s, burst_s
        self._pending: dict[Path, _Pending] = {}
        self._last_fired: dict[Path, float] = {}
        self._settled_seen: set[Path] = set()
        self._cond = threading.Condition()
        self._running = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        with self._cond:
            if self._running:
                return
            self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True, name="flashtutor-debounce")
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def poke(self, path: Path, settled: bool = False) -> None:
        """A change event for ``path``; cheap, safe from any thread."""
        now = time.monotonic()
        with self._cond:
            pending = self._pending.get(path)
            recently_fired = now - self._last_fired.get(path, -1e9) < self.burst_s
            if pending is None:
                pending = self._pending[path] = _Pending(first=now, last=now, deadline=now)
                self._settled_seen.discard(path)
            pending.last = now
            quick = settled and path not in self._settled_seen and not recently_fired
            if settled:
                self._settled_seen.add(path)
            wait = self.settle_s if quick else self.quiet_s
            pending.deadline = min(now + wait, pending.first + self.max_wait_s)
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._running:
                    return
                now = time.monotonic()
                due = [path for path, p in self._pending.items() if p.deadline <= now]
                for path in due:
                    del self._pending[path]
                    self._last_fired[path] = now
                if not due:
                    next_deadline = min((p.deadline for p in self._pending.values()), default=None)
                    self._cond.wait(None if next_deadline is None else max(next_deadline - now, 0.001))
                    continue
            for path in due:
                try:
                    self._on_save(path)
                except Exception:  # one bad callback must not stop the watching (logged)
                    log.exception("flashtutor: the save callback for %s failed", path)


class _EventRouter:
    """The handler watchdog calls (it only needs ``dispatch``): drill files to
    the debouncer, the probe file to the probe flag, the rest nowhere."""

    def __init__(self, directory: Path, names: Collection[str], on_change: Callable[[Path, bool], None]):
        self.directory = directory
        self.names = frozenset(names)
        self.on_change = on_change
        self.probe_seen = threading.Event()

    def dispatch(self, event: Any) -> None:
        if event.is_directory or event.event_type not in _CHANGE_EVENTS:
            return
        paths = [(event.src_path, event.event_type == "closed")]
        if event.event_type == "moved":
            paths.append((event.dest_path, True))  # renamed into place: that file is complete
        for raw, settled in paths:
            name = os.path.basename(os.fsdecode(raw))
            if name == PROBE_NAME:
                self.probe_seen.set()
            elif name in self.names:
                self.on_change(self.directory / name, settled)


class DrillWatcher:
    """Watches one directory for saves of the named files.

    ``on_change(path, settled)`` gets every relevant event (feed it to
    :meth:`SaveDebouncer.poke`); ``on_status(mode, reason)`` hears which observer
    runs and why, at start and whenever that changes.
    """

    def __init__(
        self,
        directory: Path,
        names: Collection[str],
        on_change: Callable[[Path, bool], None],
        *,
        on_status: Callable[[WatcherMode, str], None] | None = None,
        force_polling: bool = False,
        probe: bool = True,
        poll_interval_s: float = POLL_INTERVAL_S,
    ):
        self.directory = Path(directory).resolve()
        self.names = frozenset(names)
        self._on_change = on_change
        self._on_status = on_status or (lambda mode, reason: None)
        self.force_polling = force_polling
        self.probe = probe
        self.poll_interval_s = poll_interval_s
        self.mode: WatcherMode | None = None
        self.reason = ""
        self._observer: Any = None
        self._router: _EventRouter | None = None
        self._inode: int | None = None
        self._native_failed = False
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._supervisor: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start watching (blocking for at most the probe's ~2 s); raises
        ``OSError`` only if even polling cannot start (the directory is missing)."""
        with self._lock:
            self._start_observer(first=True)
        self._supervisor = threading.Thread(target=self._supervise, daemon=True, name="flashtutor-watch-supervisor")
        self._supervisor.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=5)
        with self._lock:
            self._stop_observer()

    # -- observers -------------------------------------------------------------------
    def _start_observer(self, first: bool, why: str = "") -> None:
        self._inode = os.stat(self.directory).st_ino
        self._router = _EventRouter(self.directory, self.names, self._on_change)
        if self.force_polling:
            self._start_polling("--poll was given" if first else why)
            return
        if not self._native_failed:
            try:
                self._start_native()
            except OSError as exc:
                self._native_failed = True
                self._stop_observer()
                self._start_polling(f"native file watching could not start ({exc})")
                return
            if self.probe and not self._probe_delivered():
                self._native_failed = True
                self._stop_observer()
                self._start_polling(f"the native watcher reported no events in {self.directory} "
                                    "(a network or WSL /mnt filesystem?)")
                return
            self._announce(NATIVE, "watching with inotify" if first else why)
            return
        self._start_polling(why or "native file watching failed earlier")

    def _start_native(self) -> None:
        from watchdog.observers import Observer

        assert self._router is not None  # made by _start_observer
        observer = Observer()
        self._observer = observer  # set first, so a failed start is still stopped
        observer.schedule(cast("FileSystemEventHandler", self._router), str(self.directory), recursive=False)
        observer.start()

    def _start_polling(self, reason: str) -> None:
        from watchdog.observers.polling import PollingObserver

        assert self._router is not None  # made by _start_observer
        observer = PollingObserver(timeout=self.poll_interval_s)
        self._observer = observer
        observer.schedule(cast("FileSystemEventHandler", self._router), str(self.directory), recursive=False)
        observer.start()
        self._announce(POLLING, f"{reason}; polling every {self.poll_interval_s:g} s instead")

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is None:
            return
        try:
            observer.stop()
            if observer.is_alive():
                observer.join(timeout=5)
        except (OSError, RuntimeError) as exc:  # a half-started observer
            log.debug("stopping the observer: %s", exc)

    def _probe_delivered(self) -> bool:
        """Write a probe file and wait for the native observer to report it."""
        assert self._router is not None
        probe = self.directory / PROBE_NAME
        try:
            probe.write_text(str(os.getpid()), encoding="utf-8")
        except OSError:
            return True  # a directory we cannot write to: no probe; trust the observer
        try:
            return self._router.probe_seen.wait(PROBE_TIMEOUT_S)
        finally:
            probe.unlink(missing_ok=True)

    def _announce(self, mode: WatcherMode, reason: str) -> None:
        self.mode, self.reason = mode, reason
        try:
            self._on_status(mode, reason)
        except Exception:  # a front end's callback must not stop the watching (logged)
            log.exception("flashtutor: the watcher status callback failed")

    # -- supervision -----------------------------------------------------------------
    def _healthy(self) -> bool:
        observer = self._observer
        if observer is None or not observer.is_alive() or not all(e.is_alive() for e in observer.emitters):
            return False
        try:
            return os.stat(self.directory).st_ino == self._inode
        except OSError:
            return False

    def _supervise(self) -> None:
        gone = False  # said once that the directory is gone, until it is back
        while not self._stopped.wait(SUPERVISE_INTERVAL_S):
            with self._lock:
                if self._stopped.is_set() or self._healthy():
                    continue
                if not self.directory.is_dir():
                    if not gone:
                        gone = True
                        self._stop_observer()
                        self._announce(self.mode or POLLING, f"{self.directory} is gone (the workspace was deleted"
                                                             " or moved): waiting for it to come back")
                    continue
                gone = False
                self._stop_observer()
                try:
                    self._start_observer(first=False, why="restarted: the drills directory was replaced "
                                                          "or the watcher stopped")
                except OSError as exc:
                    log.warning("flashtutor: cannot watch %s yet: %s", self.directory, exc)
                    continue
            # files may have changed while nothing watched: treat every drill file as saved
            for name in sorted(self.names):
                if (self.directory / name).exists():
                    self._on_change(self.directory / name, False)
