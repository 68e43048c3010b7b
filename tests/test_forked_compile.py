"""The forked compiles' process mechanics, with real forked children (the
compiles themselves need a GPU: tests/test_parallel_compile_gpu.py)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tutor.harness import forked_compile


def _write(path: Path, text: str):
    def call() -> None:
        path.write_text(text + str(os.getpid()))
    return call


def test_every_child_runs_its_call_in_another_process(tmp_path):
    files = [tmp_path / f"{i}.txt" for i in range(5)]
    done = forked_compile.run_in_children([_write(f, "ok ") for f in files], max_children=2)
    assert done == 5
    pids = {f.read_text().split()[1] for f in files}
    assert str(os.getpid()) not in pids and len(pids) == 5


def test_prepare_runs_in_the_child_before_the_call(tmp_path):
    marker = tmp_path / "m.txt"
    state = {"pinned": False}

    def prepare() -> None:
        state["pinned"] = True

    def call() -> None:
        marker.write_text(str(state["pinned"]))

    assert forked_compile.run_in_children([call, lambda: None], prepare=prepare) == 2
    assert marker.read_text() == "True"
    assert state["pinned"] is False  # the parent's own state is untouched


def test_a_failing_child_is_not_counted_and_does_not_stop_the_others(tmp_path):
    def fails() -> None:
        raise RuntimeError("a variant that does not compile")

    good = tmp_path / "good.txt"
    assert forked_compile.run_in_children([fails, _write(good, "ok ")]) == 1
    assert good.exists()


def test_a_hanging_child_is_killed_at_the_deadline():
    started = time.monotonic()
    done = forked_compile.run_in_children([lambda: time.sleep(60), lambda: None], deadline_s=0.5)
    assert done == 1
    assert time.monotonic() - started < 5


def test_a_stop_kills_the_children_and_returns_at_once():
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    assert forked_compile.run_in_children([lambda: time.sleep(60)] * 3, stop=stop) == 0
    assert time.monotonic() - started < 5


def test_a_childs_output_does_not_reach_the_parents_stdout(capfd):
    assert forked_compile.run_in_children([lambda: print("noise"), lambda: os.write(1, b"raw")]) == 2
    assert capfd.readouterr().out == ""


def test_the_environment_turns_it_off(monkeypatch):
    monkeypatch.setenv(forked_compile.FORKED_COMPILE_ENV, "0")
    assert not forked_compile.enabled()
    assert forked_compile.fill_disk_cache([lambda: None, lambda: None]) == 0
