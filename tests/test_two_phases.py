"""A check in two phases: the verdict is published (and recorded) as soon as it
is known, the performance phase (timed launches, roofline) follows as a second
result for the same content.  Real workers, the real engine, the interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_harness import run_cli
from helpers_loop import (
    EventLog,
    checked_version,
    drill_file,
    make_workspace,
    running_engine,
    save_by_rename,
    solution,
)

from tutor.harness.result import CheckResult
from tutor.loop.engine import (
    CheckCancelled,
    CheckFinished,
    CheckStarted,
    PerformanceFinished,
)
from tutor.loop.runner import CheckRunner

pytestmark = pytest.mark.slow  # real workers


def timed_differently(text: str, body: str) -> str:
    """The solution, whose launcher runs ``body`` first when called without a visit
    map: only the performance phase's timed launches do that."""
    return (f"{text}\n\n_checked_attention = attention\n\n"
            "def attention(q, k, v, causal=False, out=None, visits=None):\n"
            f"    if visits is None:\n        {body}\n"
            "    return _checked_attention(q, k, v, causal=causal, out=out, visits=visits)\n")


def performance_of(log: EventLog, version: int, after: int = 0) -> PerformanceFinished:
    return log.wait_for(lambda e: isinstance(e, PerformanceFinished) and checked_version(e.result) == version,
                        after=after)


def test_the_verdict_comes_first_and_the_performance_of_the_same_content_follows(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace, timing=True) as (engine, log):
        mark = log.mark()
        save_by_rename(drill_file(workspace, "01"), solution("01", 1))
        verdict = log.finished("01", after=mark)
        assert checked_version(verdict.result) == 1 and verdict.result.outcome == "solved"
        assert verdict.result.performance.status == "pending"
        assert verdict.result.full_ms is None and verdict.result.roofline is None  # not yet timed
        assert verdict.result.visits is not None and verdict.result.work_ratio == pytest.approx(32 / 20)
        assert verdict.record.attempts == 1 and verdict.record.history[-1].speedup is None
        assert verdict.record.history[-1].work_ratio == pytest.approx(32 / 20)  # counted with the verdict

        performance = performance_of(log, 1, after=mark)
        events = log.events[mark:]
        assert events.index(verdict) < events.index(performance)
        result = performance.result
        assert result.performance.status == "done" and result.performance.duration_s > 0
        assert result.full_ms > 0 and result.causal_ms > 0
        assert result.outcome == "solved" and result.visits == verdict.result.visits  # the same verdict
        modes = {launch.mode: launch for launch in result.roofline.launches}
        assert set(modes) == {"full", "causal"} and modes["causal"].visited_tiles == 20
        assert all(launch.tflops is None and launch.gbps is None for launch in modes.values())  # no rates
        # recorded: the same attempt (not a second one) carries the counted work ratio, and no
        # speed-up: the interpreter's wall clock is none (a GPU's timed ratio has its own field)
        progress = engine.progress.drill("01")
        assert progress.attempts == 1 and progress.history[-1].work_ratio == pytest.approx(32 / 20)
        assert progress.history[-1].speedup is None and performance.record.best_speedup is None
        assert performance.record.best_work_ratio == pytest.approx(32 / 20)


def test_a_save_during_the_performance_phase_cancels_it_and_the_newer_content_is_checked(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace, timing=True) as (engine, log):
        file = drill_file(workspace, "01")
        save_by_rename(file, timed_differently(solution("01", 1), "import time; time.sleep(60)"))
        first = log.wait_for(lambda e: isinstance(e, CheckFinished) and checked_version(e.result) == 1)
        assert first.result.performance.status == "pending"  # the verdict is out, the timing hangs
        mark = log.mark()
        save_by_rename(file, solution("01", 2))
        cancelled = log.wait_for(lambda e: isinstance(e, PerformanceFinished), after=mark)
        assert cancelled.result.performance.status == "cancelled" and checked_version(cancelled.result) == 1
        assert cancelled.result.outcome == "solved"  # the verdict stands
        second = log.wait_for(lambda e: isinstance(e, CheckFinished) and checked_version(e.result) == 2,
                              after=mark)
        assert not log.of(CheckCancelled, "01")  # the verdict phase itself was never cancelled
        assert len(log.of(CheckStarted, "01")) == 2
        assert second.result.outcome == "solved"
        assert performance_of(log, 2, after=mark).result.performance.status == "done"
        assert engine.progress.drill("01").history[0].speedup is None  # the cancelled timing recorded nothing


def test_a_kernel_that_raises_only_when_timed_keeps_its_verdict(tmp_path: Path) -> None:
    with CheckRunner(device="cpu", warm=False) as runner:
        file = tmp_path / "01_causal_mask.py"
        file.write_text(timed_differently(solution("01"), "raise RuntimeError('no timing today')"), encoding="utf-8")
        verdicts: list[CheckResult] = []
        result = runner.check("01", file, seed=0, on_phase=lambda phase, r: verdicts.append(r))
    assert [v.outcome for v in verdicts] == ["solved"]
    assert result.outcome == "solved" and result.error is None
    assert result.performance.status == "failed" and "no timing today" in result.performance.reason
    assert result.full_ms is None


def test_check_json_holds_both_phases_and_the_text_prints_the_verdict_first(tmp_path: Path) -> None:
    file = tmp_path / "mine.py"
    file.write_text(solution("01"), encoding="utf-8")
    run = run_cli("check", file, "--drill", "01", "--device", "cpu", "--json", "--seed", "0", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(run.stdout)
    assert data["outcome"] == "solved" and data["performance"]["status"] == "done"
    assert data["full_ms"] > 0 and data["roofline"]["launches"][1]["mode"] == "causal"
    assert data["work_ratio"] == pytest.approx(32 / 20)

    untimed = run_cli("check", file, "--drill", "01", "--device", "cpu", "--json", "--no-timing", cwd=tmp_path)
    data = json.loads(untimed.stdout)
    assert data["performance"]["status"] == "skipped" and data["roofline"] is None

    text = run_cli("check", file, "--drill", "01", "--device", "cpu", "--seed", "0", cwd=tmp_path).stdout
    assert text.index("result        : PASSED") < text.index("wall clock") < text.index("\n  causal      : ")
    assert "x vs full" not in text  # no wall-clock ratio on the interpreter


def test_flashtutor_watch_prints_the_verdict_then_the_performance(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import threading

    workspace = make_workspace(tmp_path)
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace), "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tutor", "watch", "01", "--device", "cpu"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    lines = EventLog()
    threading.Thread(target=lambda: [lines(line) for line in proc.stdout], daemon=True).start()
    try:
        verdict = lines.wait_for(lambda line: "result        : FAILED" in line)
        timing = lines.wait_for(lambda line: line.startswith("timing 01"))  # not a terminal: said once
        performance = lines.wait_for(lambda line: line.startswith("wall clock    : full "))
        roof = lines.wait_for(lambda line: line.startswith("  causal      : "))
        order = [lines.events.index(x) for x in (verdict, timing, performance, roof)]
        assert order == sorted(order)
        proc.stdin.write("q\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
