"""A check in three phases: the verdict (the correctness launches), then a failing
kernel's diagnosis (read-outs and probes, on the tutor's own time budget), then
the performance.  Real workers, the real engine, the interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_harness import run_cli, shipped_drill
from helpers_loop import (
    drill_file,
    make_workspace,
    running_engine,
    save_by_rename,
    solution,
)

from tutor.authoring.student_kernels import load
from tutor.catalog import get_drill
from tutor.harness.result import CheckResult
from tutor.loop import runner as running
from tutor.loop.engine import CheckFinished, CheckStep, DiagnosisFinished, PerformanceFinished
from tutor.loop.runner import CheckRunner
from tutor.report import step_words
from tutor.state.hints import code_unlocks

pytestmark = pytest.mark.slow  # real workers

# the shipped drill 01 with a comment added: new content that fails as shipped does
EDITED_SHIPPED = shipped_drill("01").read_text(encoding="utf-8") + "\n# my first edit\n"


def wrapped(text: str, before: str) -> str:
    """``text`` whose launcher runs ``before`` (which sees q, k, v) and then the kernel."""
    return (f"{text}\n\n_checked_attention = attention\n\n"
            "def attention(q, k, v, causal=False, out=None, visits=None):\n"
            f"    {before}\n"
            "    return _checked_attention(q, k, v, causal=causal, out=out, visits=visits)\n")


def test_a_failing_verdict_comes_before_its_diagnosis_which_costs_launches_not_compiles(tmp_path: Path) -> None:
    file = tmp_path / "01_causal_mask.py"
    file.write_text(EDITED_SHIPPED, encoding="utf-8")
    phases: list[tuple[str, CheckResult]] = []
    with CheckRunner(device="cpu", warm=False) as runner:
        result = runner.check("01", file, seed=0, timing=True, on_phase=lambda p, r: phases.append((p, r)))
    assert [p for p, _ in phases] == ["verdict", "diagnosis"]
    verdict, diagnosed = phases[0][1], phases[1][1]
    assert verdict.outcome == "failed" and verdict.diagnosis_phase.status == "pending"
    assert verdict.diagnosis == [] and verdict.readout == {}  # nothing read out yet
    assert verdict.max_abs_err is not None and verdict.visits is not None  # what the launches gave, at once
    assert diagnosed.diagnosis_phase.status == "done"
    assert diagnosed.codes == ["todo2-open", "all-blocks-visited"] == result.codes
    assert result.performance.status == "done"
    # every phase says what it cost; the read-out re-ran the student's kernel, compiled nothing
    assert set(result.costs) == {"verdict", "diagnosis", "performance"}
    assert result.costs["verdict"].launches == 12  # 4 cases + the hostile and long-sum ones, 2 modes each
    assert result.costs["diagnosis"].launches >= 4  # one-hot V: seq 200 / head_dim 64 -> 4 groups
    assert result.costs["diagnosis"].compiles == 0 and result.costs["verdict"].compiles == 0  # the interpreter


def test_a_passing_kernel_is_diagnosed_with_its_verdict(tmp_path: Path) -> None:
    file = tmp_path / "01_causal_mask.py"
    file.write_text(solution("01"), encoding="utf-8")
    phases: list[str] = []
    with CheckRunner(device="cpu", warm=False) as runner:
        result = runner.check("01", file, seed=0, timing=False, on_phase=lambda p, r: phases.append(p))
    assert phases == [] and result.solved  # no later phase: the one result is all
    assert result.diagnosis_phase.status == "done" and "diagnosis" not in result.costs


def test_the_attempt_is_recorded_at_the_verdict_and_its_codes_unlock_hints_at_the_diagnosis(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    drill = get_drill("01")
    keyed = code_unlocks(drill, ["mask-off-by-one"])
    assert keyed, "drill 01 keys a hint to the off-by-one mask"
    off_by_one = solution("01").replace("qk = tl.where(offs_m[:, None] >= cols[None, :]",
                                        "qk = tl.where(offs_m[:, None] > cols[None, :]")
    with running_engine(workspace) as (engine, log):
        mark = log.mark()
        save_by_rename(drill_file(workspace, "01"), off_by_one)
        verdict = log.finished("01", after=mark)
        assert verdict.result.outcome == "failed" and verdict.result.diagnosis_phase.status == "pending"
        assert verdict.counted and verdict.record.attempts == 1
        assert not verdict.newly_unlocked  # nothing is known of the mistake yet
        diagnosis = log.wait_for(lambda e: isinstance(e, DiagnosisFinished), after=mark)
        events = log.events[mark:]
        assert events.index(verdict) < events.index(diagnosis)
        assert diagnosis.result.codes == ["mask-off-by-one"]
        assert {drill.hints.index(h) for h in diagnosis.newly_unlocked} == keyed
        progress = engine.progress.drill("01")
        assert progress.attempts == 1 and progress.history[-1].codes == ["mask-off-by-one"]
        assert keyed <= set(progress.unlocked_hints)


def test_a_diagnosis_past_the_tutors_budget_is_skipped_and_the_verdict_stands(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The read-out's one-hot launches hang here (a stand-in for a machine too busy to
    finish them): the verdict is the student's, the budget the tutor's."""
    monkeypatch.setattr(running, "DIAGNOSIS_MIN_S", 3.0)
    monkeypatch.setattr(running, "DIAGNOSIS_BUDGET_FACTOR", 1.0)
    file = tmp_path / "01_causal_mask.py"
    file.write_text(wrapped(EDITED_SHIPPED, "if bool((v == 0).float().mean() > 0.9):\n"
                                            "        import time; time.sleep(600)"), encoding="utf-8")
    with CheckRunner(device="cpu", warm=False) as runner:
        result = runner.check("01", file, seed=0, timing=True)
    assert result.error is None and result.outcome == "failed"  # not a timeout of the student's kernel
    assert result.diagnosis_phase.status == "skipped"
    assert "diagnosis skipped" in result.diagnosis_phase.reason and "busy" in result.diagnosis_phase.reason
    assert "never ends" not in result.diagnosis_phase.reason
    assert result.performance.status == "skipped"


def test_a_launch_that_never_returns_is_named_by_its_case_and_shape(tmp_path: Path) -> None:
    file = tmp_path / "01_causal_mask.py"
    file.write_text(wrapped(solution("01"), "if q.shape[2] == 129:\n        import time; time.sleep(600)"),
                    encoding="utf-8")
    with CheckRunner(device="cpu", timeout_s=20, warm=False) as runner:
        result = runner.check("01", file, seed=0, timing=False)
    assert result.error is not None and result.error.kind == "timeout"
    assert "the ragged case, shape 1x2x129x64" in result.error.message
    assert "did not return" in result.error.message


# appended to a drill-04 kernel: its launcher raises once the check's last named step is a read-out
RAISES_IN_THE_READOUT = """

from tutor.harness import cost as _cost  # noqa: E402
_checked_backward = attention_backward


def attention_backward(*args, **kwargs):
    if _cost.last_step().startswith("reading out"):
        raise RuntimeError("this launcher raises in the read-out only")
    return _checked_backward(*args, **kwargs)
"""


def test_a_readout_launch_that_raises_fails_the_diagnosis_only_and_names_the_probe(tmp_path: Path) -> None:
    drill = get_drill("04")
    mistake = {m.name: m for m in load(drill)}["dkdv_scores_unscaled"]  # read out through dV's P probe
    file = tmp_path / "04_mine.py"
    file.write_text(mistake.text(drill) + RAISES_IN_THE_READOUT, encoding="utf-8")
    data = json.loads(run_cli("check", file, "--drill", "04", "--json", "--no-timing", "--seed", "0",
                              cwd=tmp_path).stdout)
    assert data["outcome"] == "failed" and data["error"] is None  # the verdict stands
    phase = data["diagnosis_phase"]
    assert phase["status"] == "failed" and data["diagnosis"] == []
    assert "this launcher raises in the read-out only" in phase["reason"]
    assert "the last step the diagnosis named: reading out P through dV on the default case" in phase["reason"]


def test_check_prints_verdict_diagnosis_performance_in_order_and_json_has_each_phase(tmp_path: Path) -> None:
    file = tmp_path / "mine.py"
    file.write_text(EDITED_SHIPPED, encoding="utf-8")
    text = run_cli("check", file, "--drill", "01", "--device", "cpu", "--seed", "0", cwd=tmp_path).stdout
    assert text.index("result        : FAILED") < text.index("Expected until TODO 2") < text.index("wall clock")
    run = run_cli("check", file, "--drill", "01", "--device", "cpu", "--json", "--seed", "0", cwd=tmp_path)
    data = json.loads(run.stdout)
    assert data["diagnosis_phase"]["status"] == "done" and data["performance"]["status"] == "done"
    assert [d["code"] for d in data["diagnosis"]] == ["todo2-open", "all-blocks-visited"]
    assert {"verdict", "diagnosis", "performance"} == set(data["costs"])
    assert data["costs"]["diagnosis"]["launches"] >= 4


def test_engine_events_of_a_failing_save_arrive_in_phase_order(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with running_engine(workspace, timing=True) as (_, log):
        mark = log.mark()
        save_by_rename(drill_file(workspace, "01"), EDITED_SHIPPED)
        log.wait_for(lambda e: isinstance(e, PerformanceFinished), after=mark)
        kinds = [type(e).__name__ for e in log.events[mark:]
                 if isinstance(e, (CheckFinished, DiagnosisFinished, PerformanceFinished))]
        assert kinds == ["CheckFinished", "DiagnosisFinished", "PerformanceFinished"]
        # while the verdict runs, its steps: loading and compiling first, then each case's launch
        steps = [e.step for e in log.events[mark:] if isinstance(e, CheckStep)]
        assert steps[0].startswith("loading and compiling") and step_words(steps[0]) == "compiling…"
        assert any(step.startswith("the ragged case, shape 1x2x129x64") for step in steps)
        finished = next(i for i, e in enumerate(log.events[mark:]) if isinstance(e, CheckFinished))
        assert all(i < finished for i, e in enumerate(log.events[mark:]) if isinstance(e, CheckStep))


def test_a_warm_up_thread_stops_at_its_next_step_once_a_job_arrived() -> None:
    """A spare's warm-up gives way to the job (tutor.loop.worker): cost.abortable."""
    import threading

    from tutor.harness import cost

    arrived = threading.Event()
    seen: list[str] = []

    def warm_up() -> None:
        with cost.abortable(arrived):
            cost.step("a step before the job")
            seen.append("ran")
            arrived.wait(5)
            try:
                cost.step("a step after it")
            except cost.LaunchAborted:
                seen.append("stopped")

    thread = threading.Thread(target=warm_up)
    thread.start()
    arrived.set()
    thread.join(10)
    assert seen == ["ran", "stopped"]
    cost.step("the job's own step")  # the job's thread is never stopped
