"""Shared set-up for the harness and `flashtutor check` tests: where the drills,
solutions and broken fixtures live, checks run in real worker processes, and
the real CLI in a subprocess.

Every check here runs the real harness on a real file in a worker process
(Triton's interpreter on a machine without a GPU); nothing is mocked.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

from helpers_fixtures import materialise

from tutor.catalog import get_drill, pristine_path, solution_path
from tutor.harness.job import CheckJob
from tutor.harness.result import CheckResult
from tutor.loop.runner import Worker

REPO = Path(__file__).resolve().parent.parent
# written once per test session from the edit tables in helpers_fixtures.py
_GENERATED = Path(tempfile.mkdtemp(prefix="flashtutor-fixtures-"))
atexit.register(shutil.rmtree, _GENERATED, ignore_errors=True)
BROKEN, BAD = materialise(_GENERATED)  # one kernel mistake each / files that cannot run to a verdict
CHECK_TIMEOUT_S = 120.0  # a generous bound on one check, never a timing assertion
CLI_TIMEOUT_S = 180.0
TRACEBACK = "Traceback (most recent call last)"


def drill_of(path: Path) -> str:
    """Every drill file, solution and fixture of a drill starts with its id."""
    return path.name[:2]


def fixture_line(path: Path, text: str) -> int:
    """The 1-based line of ``path`` that contains ``text`` (exactly one must);
    a ``text`` ending in a newline must end the line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = [n for n, line in enumerate(lines, 1) if (line + "\n" if text.endswith("\n") else line).count(text)]
    assert len(found) == 1, f"{text!r} is on lines {found} of {path.name}"
    return found[0]


def shipped_drill(drill_id: str) -> Path:
    return pristine_path(get_drill(drill_id))


def shipped_solution(drill_id: str) -> Path:
    return solution_path(get_drill(drill_id))


def solution_with(drill_id: str, line: str, instead: str, path: Path) -> Path:
    """The drill's solution with its one ``line`` replaced by ``instead``, written to ``path``."""
    text = shipped_solution(drill_id).read_text(encoding="utf-8")
    assert text.count(line) == 1, line
    path.write_text(text.replace(line, instead), encoding="utf-8")
    return path


def job(file: Path, drill: str | None = None, **options) -> CheckJob:
    """A check of ``file``; verdict only (no timed launches) unless ``timing=True``."""
    options.setdefault("timing", False)
    return CheckJob(drill=drill or drill_of(file), file=str(file.resolve()), **options)


# checks run side by side: each is one single-threaded interpreter process, so on a
# 2-core machine two at a time take about half the time of one after another
PARALLEL_CHECKS = max(1, min(2, os.cpu_count() or 1))


def entry_module(drill_id: str, name: str, folder: Path) -> ModuleType:
    """The student-like kernel ``name`` of the drill's mistakes file, written into ``folder``
    and loaded as the harness loads a student's file (in this process)."""
    from tutor.authoring import student_kernels
    from tutor.harness.loader import load_student_module

    drill = get_drill(drill_id)
    entry = next(e for e in student_kernels.load(drill) if e.name == name)
    path = folder / f"{entry.stem}.py"
    path.write_text(entry.text(drill), encoding="utf-8")
    return load_student_module(path)


def check_jobs(jobs: list[CheckJob]) -> list[CheckResult]:
    """Run each job in a fresh worker, as :class:`~tutor.loop.runner.CheckRunner` does,
    ``PARALLEL_CHECKS`` at a time (results in the jobs' order)."""
    from concurrent.futures import ThreadPoolExecutor

    def run(one: CheckJob) -> CheckResult:
        for _attempt in range(2):
            worker = Worker("auto")
            try:
                result = worker.run(asdict(one), CHECK_TIMEOUT_S)
            finally:
                worker.close()
            # the diagnosis phase's budget is wall-clock (tutor.loop.runner): on a loaded 2-core machine it can
            # run out, which the product reports as "the machine was busy" (a clean-clone CI run beside other
            # work, 2026-12-07: two drill-06 read-outs came back empty); the measurement is then taken again
            if result.diagnosis_phase.status != "skipped" or "machine was busy" not in result.diagnosis_phase.reason:
                return result
        return result

    with ThreadPoolExecutor(max_workers=PARALLEL_CHECKS, thread_name_prefix="check") as pool:
        return list(pool.map(run, jobs))


def check_files(files: list[Path]) -> dict[Path, CheckResult]:
    """Verdict-only checks of ``files``, each as the drill its name starts with."""
    return dict(zip(files, check_jobs([job(f) for f in files]), strict=True))


def check_one(file: Path, drill: str | None = None, **options) -> CheckResult:
    return check_jobs([job(file, drill, **options)])[0]


def scratch_workspace() -> Path:
    """A fresh workspace made as `flashtutor init` makes one, in a temporary folder:
    every CLI run here happens in one, never in the clone's own drills/ or .flashtutor/."""
    from tutor.state.workspace import init_workspace

    return init_workspace(Path(tempfile.mkdtemp(dir=_GENERATED, prefix="workspace-")) / "ws").workspace


def run_python(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run Python in ``cwd``; without one, in a fresh scratch workspace that is also
    ``$FLASHTUTOR_WORKSPACE`` (unless ``env`` names one)."""
    env = dict(env or {})
    if cwd is None:
        cwd = scratch_workspace()
        env.setdefault("FLASHTUTOR_WORKSPACE", str(cwd))
    return subprocess.run(
        [sys.executable, *map(str, args)],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``flashtutor ARGS`` in a subprocess (``python -m tutor`` runs the console script's ``main``),
    in a scratch workspace unless ``cwd`` is given."""
    return run_python("-m", "tutor", *args, cwd=cwd, env=env, timeout=timeout)
