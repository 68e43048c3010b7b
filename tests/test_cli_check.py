"""`flashtutor check` from the outside: the real CLI in a subprocess, real
workers, the real files.  Exit codes: 0 solved, 1 ran and not solved, 2 bad
usage, 3 the drill could not run.  Whatever goes wrong, the student sees a
clear message and never a traceback of the tutor."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers_harness import BAD, BROKEN, TRACEBACK, fixture_line, run_cli, run_python, shipped_drill, shipped_solution

from tutor.catalog import get_drill, kernel_drills

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUN = 0, 1, 2, 3

JSON_KEYS = {
    "drill", "passed", "device", "max_abs_err", "tolerance", "full_ms", "causal_ms", "speedup",
    "visited_blocks", "total_blocks", "visited_fraction", "ideal_fraction", "diagnosis", "error",
}


def output(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout + run.stderr


def assert_clean(run: subprocess.CompletedProcess[str]) -> None:
    assert TRACEBACK not in output(run), output(run)


# -- what the student named does not exist or does not say ----------------------


def test_a_missing_file_says_so_and_could_not_run():
    run = run_cli("check", "drills/no_such_drill.py", "--drill", "01")
    assert run.returncode == EXIT_NOT_RUN
    assert "no such file: drills/no_such_drill.py" in run.stderr
    assert_clean(run)


def test_an_unknown_drill_id_is_a_usage_error_that_lists_the_drills():
    run = run_cli("check", "99")
    assert run.returncode == EXIT_USAGE
    assert "unknown drill '99'" in run.stderr and "01 (causal_mask)" in run.stderr
    assert_clean(run)


@pytest.mark.parametrize("args", [["check"], ["check", "--all", "01"], ["check", "01", "--device", "tpu"]],
                         ids=["no-target", "all-and-a-target", "bad-device"])
def test_bad_usage_exits_2(args):
    run = run_cli(*args)
    assert run.returncode == EXIT_USAGE
    assert run.stderr.strip()
    assert_clean(run)


def test_a_file_whose_name_does_not_say_needs_drill(tmp_path: Path):
    mine = tmp_path / "my_kernel.py"
    shutil.copyfile(shipped_solution("01"), mine)

    unnamed = run_cli("check", mine, "--no-timing")
    assert unnamed.returncode == EXIT_USAGE
    assert "cannot tell which drill my_kernel.py implements: add --drill ID" in unnamed.stderr
    wrong_id = run_cli("check", mine, "--drill", "77")
    assert wrong_id.returncode == EXIT_USAGE and "unknown drill '77'" in wrong_id.stderr

    named = run_cli("check", mine, "--drill", "01", "--no-timing")
    assert named.returncode == EXIT_OK, output(named)
    assert "result        : PASSED" in named.stdout
    for run in (unnamed, wrong_id, named):
        assert_clean(run)


# -- files that cannot run to a verdict -------------------------------------------

# fixture -> (error kind, the text of the line it must point at or None, words the message must hold)
BAD_INPUTS = {
    "syntax_error": ("syntax", "    if CAUSAL\n", "SyntaxError: expected ':'"),
    "compile_error": ("compile", "tl.arange(0, N_CTX)", "arange"),
    "launcher_raises": ("runtime", "batch * head)", "NameError: name 'head' is not defined"),
    "import_error": ("import", "import triton.languag as tl", "No module named 'triton.languag'"),
    "no_launcher": ("missing-function", None, "defines no attention(q, k, v, ...) launcher"),
    "wrong_shape": ("bad-output", "def attention(", "attention() returned shape"),
    "wrong_dtype": ("bad-output", "def attention(", "attention() returned dtype torch.float32, expected torch.float16"),
    "crashes": ("crash", None, "the worker running your kernel died"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_a_file_that_cannot_run_gets_its_kind_line_and_message(name: str):
    kind, line_text, words = BAD_INPUTS[name]
    path = BAD / f"{name}.py"
    run = run_cli("check", path, "--drill", "01", "--no-timing")
    assert run.returncode == EXIT_NOT_RUN, output(run)
    assert f"error         : {kind}\n" in run.stdout
    assert words in run.stdout
    assert "result        : COULD NOT RUN" in run.stdout
    if line_text is not None:
        line = fixture_line(path, line_text)
        assert f"where         : {path}:{line}\n" in run.stdout
        source = path.read_text(encoding="utf-8").splitlines()[line - 1].strip()
        assert f"line          : {source}\n" in run.stdout
    assert_clean(run)


def test_a_crash_shows_what_the_students_code_printed_last():
    run = run_cli("check", BAD / "crashes.py", "--drill", "01", "--no-timing")
    assert run.returncode == EXIT_NOT_RUN
    tail = run.stdout.split("last output of your code:", 1)[1]
    assert "launching on seq=" in tail
    assert "exit code 7" in run.stdout


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): it is dead but not yet reaped
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.slow
def test_a_kernel_that_never_returns_is_stopped_and_its_worker_killed(tmp_path: Path):
    pid_file = tmp_path / "worker.pid"
    run = run_cli("check", BAD / "hangs.py", "--drill", "01", "--no-timing", "--timeout", "5",
                  env={"FLASHTUTOR_TEST_PID_FILE": str(pid_file)})
    assert run.returncode == EXIT_NOT_RUN, output(run)
    assert "error         : timeout\n" in run.stdout
    assert "did not finish within 5 s and was stopped" in run.stdout
    assert_clean(run)
    worker_pid = int(pid_file.read_text())  # written by the launcher, just before the kernel spins
    assert not _alive(worker_pid)


# -- the report and the JSON --------------------------------------------------------

REPORT_LINES = [  # the verdict's lines, then the performance phase's (interpreter), in this order
    r"shape         : batch=\d+ heads=\d+ seq=\d+ head_dim=\d+",
    r"visited       : (?P<visited>\d+)/(?P<total>\d+) K/V blocks in total \((?P<heads>\d+) heads x (?P<per_head>\d+) "
    r"per head; ideal (?P<ideal>\d+) = \d+ x (?P<ideal_per_head>\d+), \d\.\d{3}\)",
    r"causal work   : (?P<causal>\d+)/(?P<full>\d+) K/V blocks of the full launch's, in total "
    r"\(full/causal = (?P<ratio>\d+\.\d{2})x, counted from the visit maps\)",
    r"max abs err   : \d\.\de[-+]\d\d   \(tolerance 0\.02\)",
    r"result        : (?P<result>PASSED|FAILED)",
    r"wall clock    : full \d+\.\d{3} ms, causal \d+\.\d{3} ms   "
    r"\(interpreter: not a speed; the counted work above is\)",
]


def test_the_report_has_the_spec_format():
    run = run_cli("check", "01")  # as shipped, with timing
    assert run.returncode == EXIT_FAILED, output(run)
    found = [re.search(f"^{pattern}$", run.stdout, re.M) for pattern in REPORT_LINES]
    assert all(found), run.stdout
    assert [m.start() for m in found] == sorted(m.start() for m in found)
    visited, work = found[1], found[2]
    # every count says total or per head, and the totals are the per-head counts times the heads
    assert int(visited["total"]) == int(visited["heads"]) * int(visited["per_head"])
    assert int(visited["ideal"]) == int(visited["heads"]) * int(visited["ideal_per_head"])
    # the speed-up shown on the interpreter is the counted work ratio, never a wall-clock one
    assert float(work["ratio"]) == pytest.approx(int(work["full"]) / int(work["causal"]), abs=0.005)
    assert "x vs full" not in run.stdout
    after = run.stdout[found[4].end():]
    assert "Expected until TODO 2 is done:" in after
    assert "TODO 1 is still open" in after
    assert_clean(run)


def test_a_passed_kernel_with_a_finding_exits_1_and_says_finding():
    run = run_cli("check", BROKEN / "01_todo2_only.py", "--drill", "01", "--no-timing")
    assert run.returncode == EXIT_FAILED
    assert "result        : PASSED" in run.stdout
    assert "\nfinding: Causal is not meaningfully faster than full" in run.stdout


def one_json_object(run: subprocess.CompletedProcess[str]) -> dict:
    data = json.loads(run.stdout)  # the whole of stdout is one object
    assert isinstance(data, dict) and JSON_KEYS <= set(data)
    return data


def test_json_of_a_solved_drill():
    run = run_cli("check", shipped_solution("01"), "--json")
    assert run.returncode == EXIT_OK, output(run)
    data = one_json_object(run)
    assert data["drill"] == "01" and data["passed"] is True and data["error"] is None
    assert data["diagnosis"] == [] and data["tolerance"] == 0.02
    assert 0 <= data["max_abs_err"] <= data["tolerance"]
    assert data["full_ms"] > 0 and data["causal_ms"] > 0
    assert data["speedup"] == pytest.approx(data["full_ms"] / data["causal_ms"])
    assert data["visited_fraction"] == pytest.approx(data["visited_blocks"] / data["total_blocks"])
    assert data["visited_fraction"] == data["ideal_fraction"] < 1
    assert data["device"]["kind"] in ("cpu", "cuda", "rocm")


def test_json_of_a_failing_drill_lists_the_diagnoses():
    run = run_cli("check", "02", "--json", "--no-timing")
    assert run.returncode == EXIT_FAILED
    data = one_json_object(run)
    assert data["passed"] is False and data["error"] is None
    assert [d["code"] for d in data["diagnosis"]] == ["never-rescaled"]
    assert all(set(d) >= {"code", "message"} and d["message"] for d in data["diagnosis"])
    assert data["full_ms"] is None and data["speedup"] is None  # --no-timing


def test_json_of_a_file_that_cannot_run_has_the_error():
    path = BAD / "syntax_error.py"
    run = run_cli("check", path, "--drill", "01", "--json")
    assert run.returncode == EXIT_NOT_RUN
    data = one_json_object(run)
    assert data["passed"] is False
    assert data["error"]["kind"] == "syntax"
    assert data["error"]["line"] == fixture_line(path, "    if CAUSAL\n")
    assert "expected ':'" in data["error"]["message"]


# -- --all, and the drills run as scripts --------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace whose drill 01 is solved and every other kernel drill is as shipped."""
    drills = tmp_path / "drills"
    drills.mkdir()
    shutil.copyfile(shipped_solution("01"), drills / get_drill("01").file)
    for drill in LATER_KERNEL_DRILLS:
        shutil.copyfile(shipped_drill(drill.id), drills / drill.file)
    return tmp_path


# the kernel drills after 01, each FAILED as shipped
LATER_KERNEL_DRILLS = [d for d in kernel_drills() if d.id != "01"]


@pytest.mark.slow
def test_all_checks_every_drill(workspace: Path):
    env = {"FLASHTUTOR_WORKSPACE": str(workspace)}
    report = run_cli("check", "--all", "--no-timing", env=env)
    assert report.returncode == EXIT_FAILED, output(report)  # the worst of the drills: 02 fails
    results = re.findall(r"^result        : (\w+)$", report.stdout, re.M)
    assert results == ["PASSED"] + ["FAILED"] * len(LATER_KERNEL_DRILLS)
    assert f"01 Causal masking ({workspace / 'drills' / get_drill('01').file})" in report.stdout
    assert "03 " + get_drill("03").title + ": a paper drill" in report.stdout
    # drill 04's two loops: the dQ loop's map is the headline, the dK/dV loop's counted beside it
    assert re.search(r"^also visited  : \d+/\d+ blocks in total \(ideal \d+\) in the dK/dV loop", report.stdout, re.M)
    # drill 09's other block masks, whose labels open with their own article (blind round 25: "in the the")
    assert re.search(r"^also visited  : .* in the window block mask$", report.stdout, re.M), report.stdout
    assert " the the " not in report.stdout
    as_json = run_cli("check", "--all", "--no-timing", "--json", env=env)
    objects = [json.loads(line) for line in as_json.stdout.splitlines() if line.strip()]
    assert [(o["drill"], o["passed"]) for o in objects] == [("01", True)] + [(d.id, False) for d in LATER_KERNEL_DRILLS]
    for run in (report, as_json):
        assert_clean(run)


def test_the_shipped_drill_runs_as_a_script_and_fails():
    run = run_python(shipped_drill("01"))
    assert run.returncode == EXIT_FAILED, output(run)
    assert "result        : FAILED" in run.stdout
    assert "Expected until TODO 2 is done:" in run.stdout
    assert_clean(run)




def test_the_01_solution_as_a_script_prints_the_exact_fraction_and_three_reasons():
    run = run_python(shipped_solution("01"))
    assert run.returncode == EXIT_OK, output(run)
    exact = re.search(r"visited fraction: exactly (\d+)/(\d+) = (\d\.\d{4}) of the K/V blocks at seq=(\d+)", run.stdout)
    assert exact, run.stdout
    visited, total = int(exact[1]), int(exact[2])
    assert float(exact[3]) == pytest.approx(visited / total, abs=5e-5)
    assert re.search(rf"^visited       : {visited}/{total} K/V blocks", run.stdout, re.M)
    reasons = run.stdout.split("Why the measured speed-up lands below the ideal", 1)[1]
    assert [n for n in ("1.", "2.", "3.") if f"\n  {n} " in reasons] == ["1.", "2.", "3."]
    assert_clean(run)


def test_a_file_named_after_a_drill_needs_no_drill_option(tmp_path: Path):
    from tutor.state.targets import resolve

    variant = tmp_path / "01_causal_mask_mine.py"
    shutil.copyfile(shipped_solution("01"), variant)
    assert resolve(str(variant)).drill.id == "01"
    assert resolve(str(shipped_drill("02"))).drill.id == "02"


def test_an_error_in_a_launch_names_the_case_it_was_running():
    """A compile error that one case's shape alone brings out (a head_dim, a length) is found
    from the case the report names; an error before any launch names none."""
    compiled = run_cli("check", BAD / "compile_error.py", "--drill", "01", "--no-timing")
    assert re.search(r"^while         : the \w+ case, shape \d+x\d+x\d+x\d+", compiled.stdout, re.M), output(compiled)
    imported = run_cli("check", BAD / "import_error.py", "--drill", "01", "--no-timing")
    assert "while         :" not in imported.stdout, output(imported)
