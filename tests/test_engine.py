"""The engine end to end: real watchdog observer on a temp workspace, real
worker processes, Triton's CPU interpreter.  Which content a check ran is
read from the check's own output (each version prints a marker on import)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers_loop import (
    CRASHING_LAUNCHER,
    HANGING_LAUNCHER,
    QUIET_S,
    SLOW_LAUNCHER,
    WAIT_S,
    EventLog,
    checked_version,
    drill_file,
    make_workspace,
    running_engine,
    save_by_rename,
    save_in_place,
    solution,
    with_launcher,
)

from tutor.catalog import get_drill, pristine_path
from tutor.loop.engine import CheckCancelled, CheckFinished, CheckStarted, WatcherStatus
from tutor.state.hints import earned_unlocks
from tutor.state.progress import FAILING, PASSED

pytestmark = pytest.mark.slow  # every test here starts real workers


def test_a_rename_save_and_an_in_place_save_each_give_exactly_one_check_of_the_new_content(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace) as (engine, log):
        assert engine.watcher_mode == "native"
        for version, save in ((1, save_by_rename), (2, save_in_place)):
            mark = log.mark()
            save(drill_file(workspace, "01"), solution("01", version))
            finished = log.finished("01", after=mark)
            time.sleep(QUIET_S)  # a second check of the same save would have started by now
            assert len([e for e in log.events[mark:] if isinstance(e, CheckStarted)]) == 1
            assert checked_version(finished.result) == version
            assert finished.result.solved and finished.record.status == PASSED
        assert engine.progress.drill("01").attempts == 2


def test_a_burst_of_twenty_saves_ends_with_the_final_content_checked(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace) as (engine, log):
        for version in range(20):
            save_in_place(drill_file(workspace, "01"), solution("01", version))
        log.wait_for(lambda e: isinstance(e, CheckFinished) and checked_version(e.result) == 19)
        time.sleep(QUIET_S)
        started = log.of(CheckStarted, "01")
        assert 1 <= len(started) <= 2
        last = log.of(CheckFinished, "01")[-1]
        assert checked_version(last.result) == 19
        assert engine.progress.drill("01").history[-1].solved


def test_a_save_during_a_check_cancels_it_and_the_newest_content_is_recorded(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace) as (engine, log):
        file = drill_file(workspace, "01")
        save_by_rename(file, with_launcher(solution("01", 1), SLOW_LAUNCHER))  # a check that takes a minute
        log.wait_for(lambda e: isinstance(e, CheckStarted))
        mark = log.mark()
        save_by_rename(file, solution("01", 2))
        finished = log.finished("01", after=mark)
        assert log.of(CheckCancelled, "01"), "the stale check was not cancelled"
        assert checked_version(finished.result) == 2 and finished.result.solved
        progress = engine.progress.drill("01")
        assert progress.attempts == 1  # the abandoned check is not an attempt
        assert [a.solved for a in progress.history] == [True]


def test_a_deleted_and_recreated_file_is_checked(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace) as (engine, log):
        file = drill_file(workspace, "01")
        file.unlink()
        file.write_text(solution("01", 7), encoding="utf-8")
        finished = log.wait_for(lambda e: isinstance(e, CheckFinished) and checked_version(e.result) == 7)
        assert finished.result.solved
        mark = log.mark()
        file.unlink()  # and not recreated: reported, but not an attempt
        gone = log.finished("01", after=mark)
        assert gone.result.error is not None and gone.result.error.kind == "missing-file"
        assert gone.record.attempts == 1 and gone.record.status == PASSED


def test_a_hanging_kernel_times_out_and_the_next_check_works(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    # a short bound ends the hang; the fixed check then gets a generous one: under load (the
    # README's `-n auto` on 2 cores) a real interpreter check can take longer than 12 s, and
    # this test was flaky when the fixed check had to fit in the hang's bound
    with running_engine(workspace, timeout_s=12) as (engine, log):
        file = drill_file(workspace, "01")
        save_by_rename(file, with_launcher(solution("01"), HANGING_LAUNCHER))
        hung = log.finished("01")
        assert hung.result.error is not None and hung.result.error.kind == "timeout"
        assert hung.record.status == FAILING
        engine._runner.timeout_s = 240  # the runner reads its bound at each check
        mark = log.mark()
        save_by_rename(file, solution("01", 3))
        fixed = log.finished("01", after=mark)
        assert checked_version(fixed.result) == 3 and fixed.result.solved
        assert [a.error for a in engine.progress.drill("01").history] == ["timeout", None]


def test_a_crashing_worker_is_reported_and_the_next_check_works(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace) as (engine, log):
        file = drill_file(workspace, "02")
        save_by_rename(file, with_launcher(solution("02", 1), CRASHING_LAUNCHER))
        crashed = log.finished("02")
        assert crashed.result.error is not None and crashed.result.error.kind == "crash"
        assert "exit code 1" in crashed.result.error.message
        assert checked_version(crashed.result) == 1  # the student's output before the crash is kept
        mark = log.mark()
        save_by_rename(file, solution("02", 2))
        fixed = log.finished("02", after=mark)
        assert checked_version(fixed.result) == 2 and fixed.result.solved


def test_checks_unlock_hints_and_the_event_carries_them(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    drill = get_drill("01")
    with running_engine(workspace) as (engine, log):
        earned: set[int] = set()
        newly = []
        mark = log.mark()
        engine.recheck("01")  # the shipped drill, re-run by hand: not an attempt, opens nothing
        opened = log.finished("01", after=mark)
        assert not opened.counted and opened.record.attempts == 0 and not opened.newly_unlocked
        shipped = pristine_path(drill).read_text()
        for attempt in (1, 2):  # two saves of new content (each still the unsolved kernel)
            mark = log.mark()
            save_in_place(drill_file(workspace, "01"), f"{shipped}\n# edit {attempt}\n")
            finished = log.finished("01", after=mark)
            assert finished.record.attempts == attempt
            now = earned_unlocks(drill, attempt, finished.result.codes)  # the drill's own rules decide
            assert [drill.hints.index(h) for h in finished.newly_unlocked] == sorted(now - earned)
            earned |= now
            newly.append(finished.newly_unlocked)
        assert newly[1], "the second check reached no tier: the drill's first attempts tier is after 2 checks"
        assert {s.index for s in engine.hints("01") if s.unlocked} == {0} | earned
        assert set(finished.record.unlocked_hints) == earned


def test_forced_polling_still_checks_saves(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace, force_polling=True) as (engine, log):
        status = log.of(WatcherStatus)[0]
        assert status.mode == "polling" and "--poll" in status.reason
        save_by_rename(drill_file(workspace, "01"), solution("01", 5))
        assert checked_version(log.finished("01").result) == 5


def test_flashtutor_watch_rechecks_on_save_and_offers_the_next_drill(tmp_path: Path) -> None:
    """The plain-terminal front end as a student runs it, keys typed on stdin."""
    workspace = make_workspace(tmp_path)
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace), "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tutor", "watch", "01", "--device", "cpu", "--no-timing"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    output = EventLog()  # one event per printed line
    reader = threading.Thread(target=lambda: [output(line) for line in proc.stdout], daemon=True)
    reader.start()

    def printed(text: str, after: int = 0) -> int:
        """Wait for a line holding ``text`` printed after line ``after``; the index after it."""
        line = output.wait_for(lambda line: text in line, after=after)
        return output.events.index(line, after) + 1

    try:
        seen = printed("result        : FAILED")  # the shipped drill, checked at start
        save_by_rename(drill_file(workspace, "01"), solution("01"))
        seen = printed("result        : PASSED", seen)
        seen = printed("Move on to 02 Online softmax rescaling? [y/n]", seen)
        proc.stdin.write("y\n")
        proc.stdin.flush()
        seen = printed("drill         : 02 Online softmax rescaling", seen)
        proc.stdin.write("q\n")
        proc.stdin.flush()
        assert proc.wait(timeout=WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not list(workspace.glob("drills/.flashtutor-*")), "the watcher's probe file was left behind"
