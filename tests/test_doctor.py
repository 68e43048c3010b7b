"""`flashtutor doctor` with its real probes on this machine, and forced bad cases."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tutor.doctor import diagnose, known_bad, probe_packages

REPO = Path(__file__).resolve().parents[1]


def _workspace(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "drills", tmp_path / "drills")
    return tmp_path


def _doctor(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {key: value for key, value in os.environ.items() if key != "FLASHTUTOR_WORKSPACE"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "tutor", "doctor", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)


def test_real_probes_on_this_machine_say_a_check_can_run(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    report = diagnose(workspace)
    by_name = {f.name: f for f in report.findings}
    assert report.can_check, report.findings
    assert by_name["triton interpreter"].level == "ok"
    assert by_name["workspace"].detail == str(workspace)
    assert by_name["file watching"].level in ("ok", "warning")
    assert report.versions["torch"].startswith(__import__("torch").__version__.split("+")[0])
    copied = sorted(p.name for p in (workspace / "drills").iterdir())
    assert copied == sorted(p.name for p in (REPO / "drills").iterdir())


def test_cli_json_and_exit_code(tmp_path: Path) -> None:
    done = _doctor(_workspace(tmp_path), "--json", env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["can_check"] is True
    assert {"torch", "triton", "numpy"} <= set(data["versions"])


def test_no_workspace_is_an_error_with_the_fix(tmp_path: Path) -> None:
    done = _doctor(tmp_path, env={"PYTHONPATH": str(REPO), "FLASHTUTOR_WORKSPACE": str(tmp_path)})
    assert done.returncode == 3
    assert f"no drills in {tmp_path}" in done.stdout and "flashtutor init DIR" in done.stdout


def test_a_broken_triton_fails_the_kernel_probe(tmp_path: Path) -> None:
    """Forced bad case: a `triton` that cannot import shadows the real one."""
    fake = tmp_path / "shadow" / "triton"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('this triton is broken on purpose')\n")
    workspace = _workspace(tmp_path / "ws")
    done = _doctor(workspace, env={"PYTHONPATH": os.pathsep.join([str(fake.parent), str(REPO)])})
    assert done.returncode == 3
    assert "[FAIL] triton interpreter" in done.stdout
    assert "broken on purpose" in done.stdout


def test_known_bad_combinations_name_the_fix() -> None:
    found = known_bad({"triton": "3.6.0", "numpy": "2.5.2"}, has_gpu=False)
    assert [f.level for f in found] == ["error", "warning"]
    assert "triton>=3.7" in found[0].fix
    assert known_bad({"triton": "3.6.0", "numpy": "2.5.2"}, has_gpu=True) == []
    assert known_bad({"triton": "3.9.0", "numpy": "2.4.6"}, has_gpu=False) == []


def test_missing_and_doubled_packages() -> None:
    levels = {f.name: f.level for f in probe_packages({"python": "3.11"})}
    assert levels["torch"] == "error" and levels["triton"] == "error"
    doubled = probe_packages({"torch": "2.11", "triton": "3.6.0", "pytorch-triton-rocm": "3.6.0",
                              "textual": "8", "watchdog": "6"})
    assert [f.name for f in doubled] == ["triton"] and "pip uninstall triton" in doubled[0].fix


def test_the_fix_for_a_missing_triton_is_the_command_for_how_flashtutor_was_installed(monkeypatch) -> None:
    """Issue 23: an editable install from a clone was told `pip install 'flashtutor[cpu]'` (a
    registry name) instead of the clone's `pip install -e '.[cpu]'`."""
    import tutor.doctor as doctor
    from tutor.paths import SOURCE_ROOT

    monkeypatch.setattr(doctor, "installed_from_clone", lambda: True)
    (finding,) = [f for f in probe_packages({"torch": "2.13.0"}) if f.name == "triton"]
    assert finding.fix.startswith(f"on a CPU machine: cd {SOURCE_ROOT} && pip install -e '.[cpu]';")
    monkeypatch.setattr(doctor, "installed_from_clone", lambda: False)
    (finding,) = [f for f in probe_packages({"torch": "2.13.0"}) if f.name == "triton"]
    assert finding.fix.startswith("on a CPU machine: pip install 'flashtutor[cpu]';")
    assert doctor.install_command() == "pip install flashtutor"


def test_this_clone_is_seen_as_installed_from_a_clone() -> None:
    from tutor.doctor import installed_from_clone

    assert installed_from_clone() == (REPO / "pyproject.toml").is_file()
