"""`flashtutor check` on the workspace's own drill counts as an attempt; on any other file it does not."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from helpers_harness import REPO, run_cli


def _workspace(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "drills", tmp_path / "drills")
    return tmp_path


def _progress(workspace: Path) -> dict:
    return json.loads((workspace / ".flashtutor" / "progress.json").read_text())["drills"]


def test_checking_the_workspace_drill_records_an_attempt_and_announces_a_hint(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace)}
    for _ in range(2):
        proc = run_cli("check", "02", "--no-timing", "--seed", "1", cwd=workspace, env=env)
        assert proc.returncode == 1, proc.stderr
    record = _progress(workspace)["02"]
    assert record["status"] == "failing"
    assert record["attempts"] == 2
    # drill 02's second hint opens after two checks; the second report says so
    assert "hint unlocked: What changes when the maximum moves" in proc.stdout


def test_checking_another_file_records_nothing(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace)}
    solution = REPO / "solutions" / "02_online_rescale_solution.py"
    proc = run_cli("check", str(solution), "--no-timing", cwd=workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / ".flashtutor" / "progress.json").exists() or "02" not in _progress(workspace)
