"""The watcher on a real directory with watchdog's real observers: each editor's
way of saving is one save, bursts collapse, other files never count, and the
polling fallback is taken when the native observer cannot start."""

from __future__ import annotations

import os
import resource
import shutil
import threading
import time
from pathlib import Path

import pytest

# imported before any test lowers the open-file limit: an import needs file descriptors
import watchdog.observers.inotify
import watchdog.observers.polling
import watchdog.utils.dirsnapshot  # noqa: F401
from helpers_loop import QUIET_S, WAIT_S, save_by_rename, save_in_place, save_vim_style

from tutor.loop.watcher import NATIVE, POLLING, DrillWatcher, SaveDebouncer

DRILL = "01_causal_mask.py"
OTHER = "02_online_rescale.py"


class Saves:
    """What the debouncer reported, with when; waits for a number of saves."""

    def __init__(self) -> None:
        self.fired: list[tuple[Path, float]] = []
        self.statuses: list[tuple[str, str]] = []
        self._cond = threading.Condition()

    def __call__(self, path: Path) -> None:
        with self._cond:
            self.fired.append((path, time.monotonic()))
            self._cond.notify_all()

    def status(self, mode: str, reason: str) -> None:
        self.statuses.append((mode, reason))

    def wait(self, count: int = 1) -> None:
        deadline = time.monotonic() + WAIT_S
        with self._cond:
            while len(self.fired) < count:
                assert time.monotonic() < deadline, f"only {len(self.fired)} of {count} saves reported"
                self._cond.wait(deadline - time.monotonic())

    def paths(self) -> list[str]:
        with self._cond:
            return [p.name for p, _ in self.fired]


@pytest.fixture
def drills(tmp_path: Path) -> Path:
    directory = tmp_path / "drills"
    directory.mkdir()
    (directory / DRILL).write_text("# shipped\n")
    (directory / OTHER).write_text("# shipped\n")
    return directory


def wait_until(condition, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


def start_watching(directory: Path, saves: Saves, **options) -> tuple[DrillWatcher, SaveDebouncer]:
    debouncer = SaveDebouncer(saves)
    debouncer.start()
    watcher = DrillWatcher(directory, {DRILL, OTHER}, debouncer.poke, on_status=saves.status, **options)
    watcher.start()
    return watcher, debouncer


def stop_watching(watcher: DrillWatcher, debouncer: SaveDebouncer) -> None:
    watcher.stop()
    debouncer.stop()


def delete_then_recreate(path: Path, text: str) -> None:
    path.unlink()
    path.write_text(text)


@pytest.mark.parametrize("save", [save_in_place, save_by_rename, save_vim_style, delete_then_recreate])
def test_one_save_is_reported_once_whatever_the_editor_does(drills: Path, save) -> None:
    saves = Saves()
    watcher, debouncer = start_watching(drills, saves)
    try:
        assert watcher.mode == NATIVE
        save(drills / DRILL, "# the student's new version\n")
        saves.wait(1)
        time.sleep(QUIET_S)  # room for a second (wrong) report to arrive
        assert saves.paths() == [DRILL]
    finally:
        stop_watching(watcher, debouncer)


def test_a_burst_of_saves_gives_one_or_two_reports_the_last_after_the_final_write(drills: Path) -> None:
    saves = Saves()
    watcher, debouncer = start_watching(drills, saves)
    try:
        for version in range(20):
            save_in_place(drills / DRILL, f"# version {version}\n")
        last_write = time.monotonic()
        saves.wait(1)
        time.sleep(QUIET_S)
        assert 1 <= len(saves.fired) <= 2, saves.paths()
        assert saves.paths() == [DRILL] * len(saves.fired)
        # the last report comes after the final write: its check reads the final content
        assert saves.fired[-1][1] > last_write
    finally:
        stop_watching(watcher, debouncer)


def test_files_that_are_not_drills_never_count(drills: Path) -> None:
    saves = Saves()
    watcher, debouncer = start_watching(drills, saves)
    try:
        (drills / f".{DRILL}.swp").write_text("vim swap")
        (drills / "4913").write_text("vim's write test")
        (drills / f"{DRILL}~").write_text("backup")
        (drills / "notes.txt").write_text("notes")
        (drills / "__pycache__").mkdir()
        (drills / "__pycache__" / "01_causal_mask.cpython-311.pyc").write_bytes(b"\0")
        (drills / "__pycache__" / DRILL).write_text("# not the drill: a subdirectory")
        save_in_place(drills / OTHER, "# a real save, so we know events flow\n")
        saves.wait(1)
        time.sleep(QUIET_S)
        assert saves.paths() == [OTHER]
    finally:
        stop_watching(watcher, debouncer)


def _open_fds() -> set[int]:
    listed = {int(name) for name in os.listdir("/proc/self/fd")}
    return {fd for fd in listed if _is_open(fd)}  # not the one listdir itself used and closed


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _limit_leaving_free(free: int) -> int:
    """The open-file limit under which exactly ``free`` more descriptors can be opened."""
    open_fds = _open_fds()
    limit = 0
    while limit - sum(fd < limit for fd in open_fds) < free:
        limit += 1
    return limit


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
def test_polling_is_taken_when_the_native_observer_cannot_start(drills: Path) -> None:
    """Provoked for real: the native (inotify) observer needs an inotify instance
    and a pipe; this process's open-file limit is lowered (for this process only)
    so that it has one descriptor too few, while polling still has what it needs."""
    from watchdog.events import FileSystemEventHandler
    from watchdog.observers.inotify import InotifyObserver

    before = _open_fds()
    # how many descriptors a native observer watching a folder takes here (watchdog 7.1
    # opens them when a folder is scheduled, older ones when the observer is made)
    probe = InotifyObserver()
    probe.schedule(FileSystemEventHandler(), str(drills), recursive=False)
    needed = len(_open_fds() - before)
    probe.start()
    probe.stop()
    probe.join()
    assert needed >= 2, "the native observer needs too few descriptors to starve it of one"

    saves = Saves()
    debouncer = SaveDebouncer(saves)
    debouncer.start()
    watcher = DrillWatcher(drills, {DRILL}, debouncer.poke, on_status=saves.status, poll_interval_s=0.2)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = _open_fds()
    resource.setrlimit(resource.RLIMIT_NOFILE, (_limit_leaving_free(needed - 1), hard))
    try:
        watcher.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert watcher.mode == POLLING
        mode, reason = saves.statuses[-1]
        assert mode == POLLING and "native file watching could not start" in reason and "open files" in reason
        save_in_place(drills / DRILL, "# saved while polling\n")
        saves.wait(1)
        assert saves.paths() == [DRILL]
    finally:
        stop_watching(watcher, debouncer)
        # the failed native start leaves its inotify descriptor behind (watchdog does not close it)
        for fd in _open_fds() - before:
            try:
                if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify":
                    os.close(fd)
            except OSError:
                pass


def test_forced_polling_reports_saves(drills: Path) -> None:
    saves = Saves()
    watcher, debouncer = start_watching(drills, saves, force_polling=True, poll_interval_s=0.2)
    try:
        assert saves.statuses == [(POLLING, "--poll was given; polling every 0.2 s instead")]
        save_by_rename(drills / DRILL, "# new\n")
        saves.wait(1)
        time.sleep(QUIET_S)
        assert saves.paths() == [DRILL]
    finally:
        stop_watching(watcher, debouncer)


def test_a_replaced_drills_directory_is_watched_again(drills: Path) -> None:
    """``rm -rf drills`` and a fresh copy (a re-clone, an unpacked archive): the
    old watch is gone; the supervisor restarts it and reports every drill file."""
    saves = Saves()
    watcher, debouncer = start_watching(drills, saves)
    try:
        fresh = drills.with_name("fresh")
        fresh.mkdir()
        (fresh / DRILL).write_text("# from the new copy\n")
        shutil.rmtree(drills)  # reported too: the drill file was deleted
        fresh.rename(drills)
        wait_until(lambda: any("restarted" in reason for _, reason in saves.statuses))
        assert watcher.mode == NATIVE
        after_restart = len(saves.fired)
        wait_until(lambda: DRILL in saves.paths()[after_restart:])  # every drill file re-reported
        save_in_place(drills / DRILL, "# edited after the restart\n")
        saves.wait(after_restart + 1)
        assert saves.paths()[-1] == DRILL
    finally:
        stop_watching(watcher, debouncer)
