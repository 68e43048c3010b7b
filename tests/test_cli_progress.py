"""`flashtutor check` on any file but the workspace's own drill records nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers_harness import REPO, run_cli

from tutor.workspace import init_workspace


def _workspace(tmp_path: Path) -> Path:
    return init_workspace(tmp_path / "ws").workspace


def _progress(workspace: Path) -> dict:
    return json.loads((workspace / ".flashtutor" / "progress.json").read_text())["drills"]


# A check of the workspace's own drill, counted once per distinct content: tests/test_attempts.py.


def test_checking_another_file_records_nothing(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    env = {**os.environ, "FLASHTUTOR_WORKSPACE": str(workspace)}
    solution = REPO / "solutions" / "02_online_rescale_solution.py"
    proc = run_cli("check", str(solution), "--no-timing", cwd=workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / ".flashtutor" / "progress.json").exists() or "02" not in _progress(workspace)
