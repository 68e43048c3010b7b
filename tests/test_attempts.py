"""An attempt is a distinct content.  Opening a drill, starting `watch`, re-running
`check` on an unchanged file, replacing drills/ and two tutors on one workspace
used to count attempts without any edit (and so opened hints 2-4 by attempt
count).  Now a check counts only when the file's bytes differ from the last
counted attempt and from the drill as shipped, decided under the progress lock."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers_app import recorded_result
from helpers_harness import run_cli
from helpers_loop import EventLog, save_in_place

from tutor.catalog import get_drill, pristine_path
from tutor.loop.engine import CheckFinished, TutorEngine
from tutor.pristine import blob_id
from tutor.state.progress import (
    FAILING,
    NOT_COUNTED_NOT_RUN,
    NOT_COUNTED_SAME,
    NOT_COUNTED_SHIPPED,
    ProgressStore,
    file_content_id,
)
from tutor.state.workspace import init_workspace

DRILL_01, DRILL_02 = get_drill("01"), get_drill("02")
ROOT = Path(__file__).resolve().parent.parent


def _progress(workspace: Path) -> dict:
    path = workspace / ".flashtutor" / "progress.json"
    return json.loads(path.read_text())["drills"] if path.exists() else {}


def test_the_same_content_twice_is_one_attempt_and_the_hash_is_recorded(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    mine = blob_id(b"# my attempt\n")
    first = store.record_check(recorded_result("01_todo2_only", tmp_path), DRILL_01, mine)
    again = store.record_check(recorded_result("01_todo2_only", tmp_path), DRILL_01, mine)
    assert first.counted and not again.counted and again.not_counted == NOT_COUNTED_SAME
    assert again.progress.attempts == 1 and [a.content for a in again.progress.history] == [mine]
    assert _progress(tmp_path)["01"]["history"][0]["content"] == mine


def test_the_shipped_drill_is_no_attempt_and_opens_no_hint(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    shipped = blob_id(pristine_path(DRILL_01).read_bytes())
    for _ in range(8):  # opening the drill in the app again and again, starting watch again and again
        record = store.record_check(recorded_result("01_failing", tmp_path), DRILL_01, shipped)
        assert not record.counted and record.not_counted == NOT_COUNTED_SHIPPED and not record.newly_unlocked
    assert store.drill("01").attempts == 0 and store.drill("01").status == "not-started"
    assert store.unlocked_hints("01") == []


def test_hints_open_by_distinct_attempts_and_broken_content_is_none(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    broken = blob_id(b"def attention(:\n")
    one = store.record_check(recorded_result("01_syntax_error", tmp_path), DRILL_01, broken)
    same = store.record_check(recorded_result("01_syntax_error", tmp_path), DRILL_01, broken)
    assert not one.counted and one.not_counted == NOT_COUNTED_NOT_RUN  # issue 23: it never ran
    assert not same.counted and same.not_counted == NOT_COUNTED_SAME and store.drill("01").attempts == 0
    assert len(store.drill("01").history) == 1  # kept, once
    one = store.record_check(recorded_result("01_failing", tmp_path), DRILL_01, blob_id(b"# fixed the colon\n"))
    assert one.counted and one.progress.attempts == 1 and 1 not in one.newly_unlocked  # after 2 attempts
    two = store.record_check(recorded_result("01_failing", tmp_path), DRILL_01, blob_id(b"# another try\n"))
    assert two.counted and two.progress.attempts == 2 and 1 in two.newly_unlocked


def test_stores_in_two_processes_count_one_save_once(tmp_path: Path) -> None:
    """Two tutors on one workspace record the same save at the same moment: one attempt."""
    result = tmp_path / "result.json"
    result.write_text(recorded_result("01_todo2_only", tmp_path).to_json())
    script = textwrap.dedent(f"""
        import json, sys, time
        from pathlib import Path
        from tutor.catalog import get_drill
        from tutor.harness.result import CheckResult
        from tutor.state.progress import ProgressStore
        store = ProgressStore(Path({str(tmp_path)!r}))
        result = CheckResult.from_dict(json.loads(Path({str(result)!r}).read_text()))
        counted = 0
        for n in range(20):  # round n: both processes record save n at the same moment
            while time.time() < float(sys.argv[1]) + 0.25 * n:
                pass
            counted += store.record_check(result, get_drill("01"), f"content-{{n}}").counted
        print(counted)
    """)
    import time

    start = time.time() + 3
    procs = [subprocess.Popen([sys.executable, "-c", script, str(start)], stdout=subprocess.PIPE, text=True,
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}) for _ in range(2)]
    counted = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(counted) == ProgressStore(tmp_path).drill("01").attempts == 20
    assert [a.content for a in ProgressStore(tmp_path).drill("01").history] == [f"content-{n}" for n in range(20)]


@pytest.mark.slow
def test_two_engines_on_one_workspace_count_a_save_once(tmp_path: Path) -> None:
    """Two real engines (two watchers, two workers) on one workspace: each checks
    the shipped drill when opened (no attempt), then both check one save."""
    workspace = init_workspace(tmp_path / "ws").workspace
    file = workspace / "drills" / DRILL_01.file
    logs = [EventLog(), EventLog()]
    engines = [TutorEngine(workspace, device="cpu", timing=False, on_event=log, force_polling=True)
               for log in logs]
    for engine in engines:
        engine.start()
    try:
        for engine in engines:
            engine.recheck("01")  # what opening the drill in the app does
        opened = [log.finished("01", timeout=180) for log in logs]
        assert [e.counted for e in opened] == [False, False]
        marks = [log.mark() for log in logs]
        save_in_place(file, pristine_path(DRILL_01).read_text() + "\n# my first edit\n")
        saved: list[CheckFinished] = [log.finished("01", after=m, timeout=180)
                                      for log, m in zip(logs, marks, strict=True)]
    finally:
        for engine in engines:
            engine.stop()
    assert sorted(e.counted for e in saved) == [False, True]
    assert next(e for e in saved if not e.counted).not_counted == NOT_COUNTED_SAME
    record = _progress(workspace)["01"]
    assert record["attempts"] == 1 and len(record["history"]) == 1
    assert record["history"][0]["content"] == blob_id(file.read_bytes())


@pytest.mark.slow
def test_check_on_an_unchanged_file_shows_the_result_but_is_no_new_attempt(tmp_path: Path) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    env = {"FLASHTUTOR_WORKSPACE": str(workspace)}
    file = workspace / "drills" / DRILL_02.file

    def check() -> subprocess.CompletedProcess[str]:
        run = run_cli("check", "02", "--no-timing", "--seed", "1", cwd=workspace, env=env)
        assert run.returncode == 1 and "result        : FAILED" in run.stdout, run.stdout + run.stderr
        return run

    shipped = check()
    assert f"not a new attempt ({NOT_COUNTED_SHIPPED}): attempts stay at 0" in shipped.stdout
    assert _progress(workspace).get("02", {}).get("attempts", 0) == 0
    file.write_text(file.read_text() + "\n# trying something\n")
    first = check()
    assert "not a new attempt" not in first.stdout and _progress(workspace)["02"]["attempts"] == 1
    unchanged = check()
    assert f"not a new attempt ({NOT_COUNTED_SAME}): attempts stay at 1" in unchanged.stdout
    assert _progress(workspace)["02"]["attempts"] == 1
    file.write_text(file.read_text() + "# and another thing\n")
    second = check()
    assert _progress(workspace)["02"]["attempts"] == 2
    # drill 02's second hint opens after two attempts; the second counted report says so
    assert "hint unlocked: What changes when the maximum moves" in second.stdout


def test_a_performance_phase_goes_only_into_an_attempt_of_its_content(tmp_path: Path) -> None:
    """The timed phase of a check that was not counted (the drill as shipped, after a
    reset) must not overwrite the last attempt's speed-up."""
    store = ProgressStore(tmp_path)
    solved = recorded_result("01_passing", tmp_path)
    mine = blob_id(b"# my solved kernel\n")
    store.record_check(solved, DRILL_01, mine)
    before = store.drill("01").history[-1].speedup
    shipped = recorded_result("01_failing", tmp_path)
    shipped.device = dataclasses.replace(shipped.device, interpreter=False)  # timed ratios are the headline
    shipped.full_ms, shipped.causal_ms = 1.0, 2.0
    shipped_id = blob_id(pristine_path(DRILL_01).read_bytes())
    assert not store.record_check(shipped, DRILL_01, shipped_id).counted
    assert shipped.gpu_speedup == 0.5 != before
    store.record_performance(shipped, shipped_id)
    assert store.drill("01").history[-1].speedup == before
    solved.device = dataclasses.replace(solved.device, interpreter=False)
    solved.full_ms, solved.causal_ms = 1.75, 1.0
    store.record_performance(solved, mine)  # the same content: its numbers go in
    assert store.drill("01").history[-1].speedup == 1.75


def test_one_name_for_a_contents_id_and_for_reading_a_drill(tmp_path: Path) -> None:
    """progress.content_id was a second name for pristine.blob_id, catalog._parse for
    catalog.read_drill: one name each now, and the ids progress records are the ones
    the shipped drills' manifest holds."""
    import tutor.catalog
    import tutor.state.progress
    from tutor.pristine import manifest

    assert not hasattr(tutor.state.progress, "content_id") and not hasattr(tutor.catalog, "_parse")
    assert file_content_id(pristine_path(DRILL_01)) == manifest()[DRILL_01.file] == blob_id(
        pristine_path(DRILL_01).read_bytes())
    assert file_content_id(tmp_path / "missing.py") is None


def _not_run(tmp_path: Path, kind: str = "syntax"):
    result = recorded_result("01_syntax_error", tmp_path)
    result.error = dataclasses.replace(result.error, kind=kind)
    return result


def test_saves_that_cannot_run_are_kept_but_count_no_attempt_and_unlock_no_hint(tmp_path: Path) -> None:
    """Issue 23: six broken saves opened "Nearly the answer" (after 6 attempts) for a kernel
    that never ran.  Only a check whose kernel ran is an attempt."""
    store = ProgressStore(tmp_path)
    kinds = ["syntax", "import", "missing-function", "crash", "timeout", "syntax"]
    for n, kind in enumerate(kinds):
        record = store.record_check(_not_run(tmp_path, kind), DRILL_01, blob_id(b"# broken %d\n" % n))
        assert not record.counted and record.not_counted == NOT_COUNTED_NOT_RUN
        assert record.newly_unlocked == []
    progress = store.drill("01")
    assert progress.attempts == 0 and progress.unlocked_hints == [] and progress.status == FAILING
    assert [a.error for a in progress.history] == kinds and progress.not_run == 6  # visible in the history
    assert progress.history_series().not_run == 6
    ran = store.record_check(recorded_result("01_failing", tmp_path), DRILL_01, blob_id(b"# it runs\n"))
    assert ran.counted and ran.progress.attempts == 1
    assert 3 not in ran.progress.unlocked_hints  # "Nearly the answer" waits for 6 checks that ran


def test_content_that_could_not_run_counts_once_it_runs(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    mine = blob_id(b"# my attempt\n")
    assert not store.record_check(_not_run(tmp_path, "timeout"), DRILL_01, mine).counted
    assert not store.record_check(_not_run(tmp_path, "timeout"), DRILL_01, mine).counted  # same, still not run
    again = store.record_check(recorded_result("01_todo2_only", tmp_path), DRILL_01, mine)
    assert again.counted and again.progress.attempts == 1
    assert len(again.progress.history) == 2


def test_list_and_hint_show_the_attempts_that_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    workspace = init_workspace(tmp_path / "ws").workspace
    store = ProgressStore(workspace)
    for n in range(3):
        store.record_check(_not_run(tmp_path), DRILL_01, blob_id(b"# broken %d\n" % n))
    store.record_check(recorded_result("01_failing", tmp_path), DRILL_01, blob_id(b"# runs\n"))
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(workspace))
    from tutor.cli import main

    assert main(["hint", "01"]) == 0
    out = capsys.readouterr().out
    assert "attempts so far: 1 (checks whose kernel ran); 3 saves that could not run (no attempts)" in out
    assert main(["list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if " 01 " in line)
    assert row.split()[-2] == "1"


def test_the_attempt_chart_says_how_many_saves_could_not_run() -> None:
    from tutor.app.widgets.sparkline import history_text

    assert history_text([None, 2.9], [None, None], [None, 1.0], not_run=1).plain.splitlines()[0] == (
        "attempts  2 shown, 1 could not run (no attempt)")
