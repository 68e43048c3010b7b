"""Shared set-up for the save-to-recheck loop's tests: workspaces, editor-style
saves, drill contents that hang or crash, and a thread-safe event log."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tutor.catalog import get_drill, pristine_path, solution_path
from tutor.loop.engine import CheckFinished, DeviceReady, TutorEngine, WatcherStatus

WAIT_S = 60.0  # the longest any single wait may take (a generous bound, never a timing assertion)
QUIET_S = 1.5  # longer than the debouncer's longest wait: nothing more is coming after it
MARKER = "flashtutor-test-content"


def solution(drill_id: str, version: int | None = None) -> str:
    """The drill's solution; with ``version`` it prints a marker when imported,
    so a result's output says which content was checked."""
    text = solution_path(get_drill(drill_id)).read_text(encoding="utf-8")
    return text if version is None else f"print('{MARKER} {version}')\n{text}"


def checked_version(result) -> int | None:
    """The marker version a check's output names (None if it names none)."""
    found = [line.split()[-1] for line in result.output.splitlines() if line.startswith(MARKER)]
    return int(found[-1]) if found else None


def with_launcher(text: str, body: str) -> str:
    """``text`` with its ``attention`` launcher replaced by one running ``body``."""
    return f"{text}\n\ndef attention(q, k, v, causal=False, out=None, **options):\n    {body}\n"


HANGING_LAUNCHER = "while True:\n        pass"
CRASHING_LAUNCHER = "import os\n    os._exit(1)"
SLOW_LAUNCHER = "import time\n    time.sleep(60)"


def make_workspace(root: Path, files: dict[str, str] | None = None) -> Path:
    """``root/drills`` holding every kernel drill as shipped, then ``files``
    (drill id -> text) written over them."""
    drills = root / "drills"
    drills.mkdir(parents=True, exist_ok=True)
    for drill_id in ("01", "02"):
        drill = get_drill(drill_id)
        (drills / drill.file).write_text(pristine_path(drill).read_text(encoding="utf-8"), encoding="utf-8")
    for drill_id, text in (files or {}).items():
        (drills / get_drill(drill_id).file).write_text(text, encoding="utf-8")
    return root


def drill_file(workspace: Path, drill_id: str) -> Path:
    return workspace / "drills" / get_drill(drill_id).file


def save_in_place(path: Path, text: str) -> None:
    """An editor that truncates and rewrites the file (VS Code, nano)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def save_by_rename(path: Path, text: str) -> None:
    """An editor that writes a temp file and renames it over the original
    (JetBrains' safe write, vim with writebackup)."""
    temp = path.with_name(f".{path.name}.tmp-save")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def save_vim_style(path: Path, text: str) -> None:
    """vim's default on Linux: rename the file to a backup, write a new one, delete the backup."""
    backup = path.with_name(path.name + "~")
    os.replace(path, backup)
    path.write_text(text, encoding="utf-8")
    backup.unlink()


class EventLog:
    """Collects engine events from any thread; waits for the one a test expects."""

    def __init__(self) -> None:
        self.events: list[object] = []
        self._cond = threading.Condition()

    def __call__(self, event: object) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def of(self, kind: type, drill: str | None = None) -> list:
        with self._cond:
            return [e for e in self.events if isinstance(e, kind) and (drill is None or e.drill == drill)]

    def wait_for(self, predicate: Callable[[object], bool], *, after: int = 0, timeout: float = WAIT_S):
        """The first event from index ``after`` on that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events[after:]:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no matching event within {timeout:g} s; got {self.events!r}")
                self._cond.wait(remaining)

    def mark(self) -> int:
        with self._cond:
            return len(self.events)

    def finished(self, drill: str, *, after: int = 0, timeout: float = WAIT_S) -> CheckFinished:
        return self.wait_for(lambda e: isinstance(e, CheckFinished) and e.drill == drill, after=after,
                             timeout=timeout)


@contextmanager
def running_engine(workspace: Path, **options) -> Iterator[tuple[TutorEngine, EventLog]]:
    """A started engine on the CPU interpreter (no timed launches, fixed seed),
    once its watcher runs and its worker is warm."""
    log = EventLog()
    options = {"device": "cpu", "timing": False, "seed": 0, **options}
    engine = TutorEngine(workspace, on_event=log, **options)
    engine.start()
    try:
        log.wait_for(lambda e: isinstance(e, WatcherStatus))
        if options.get("warm", True):
            log.wait_for(lambda e: isinstance(e, DeviceReady))
        yield engine, log
    finally:
        engine.stop()
