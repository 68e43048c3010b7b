"""``flashtutor doctor``: can a check run here, and if not, what to do.

Each probe is real: it imports the packages, runs a tiny Triton kernel through
the interpreter (and compiled, when a GPU is visible) in a child process, starts
the same file watcher the tutor uses on the workspace's ``drills/`` and writes a
probe file into ``.flashtutor/``'s parent.  A probe gives one :class:`Finding`;
the run is healthy when no finding is an ``error``.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from tutor.harness.device import INTERPRETER_MIN_TRITON, interpreter_supports
from tutor.paths import NO_WORKSPACE, SOURCE_ROOT
from tutor.state.progress import NOT_SAVED

Level = Literal["ok", "warning", "error"]

# distribution names whose versions the report lists (triton: either distribution)
PACKAGES = ("torch", "triton", "pytorch-triton-rocm", "numpy", "textual", "watchdog", "rich")
PROBE_TIMEOUT_S = 120.0

# A tiny kernel: y = x + 1 on 16 elements, checked against torch.
_KERNEL_PROBE = r"""
import os, sys
if sys.argv[1] == "interpreter":
    os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl

@triton.jit
def add_one(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1.0)

device = "cpu" if sys.argv[1] == "interpreter" else "cuda"
x = torch.arange(16, dtype=torch.float32, device=device)
y = torch.empty_like(x)
add_one[(1,)](x, y, N=16)
assert torch.equal(y.cpu(), (x + 1).cpu()), "wrong result"
print("ok")
"""


@dataclass
class Finding:
    name: str
    level: Level
    detail: str
    fix: str = ""


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def can_check(self) -> bool:
        """A check can run: nothing is at error level."""
        return all(f.level != "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"can_check": self.can_check, "versions": self.versions, "findings": [asdict(f) for f in self.findings]}


def installed_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def _parse(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def installed_from_clone() -> bool:
    """flashtutor runs from a clone's source tree (``pip install -e .``), not from a wheel."""
    return (SOURCE_ROOT / "pyproject.toml").is_file() and (SOURCE_ROOT / "tutor").is_dir()


def install_command(extra: str = "") -> str:
    """The command that installs flashtutor (with ``extra``) the way it is installed
    here: in the clone for an editable install, from the registry for a wheel."""
    if installed_from_clone():
        target = f"'.[{extra}]'" if extra else "."
        return f"cd {SOURCE_ROOT} && pip install -e {target}"
    return f"pip install 'flashtutor[{extra}]'" if extra else "pip install flashtutor"


def probe_packages(versions: dict[str, str]) -> list[Finding]:
    found = []
    if "torch" not in versions:
        found.append(Finding("torch", "error", "torch is not installed",
                             "pip install torch (on a machine without a GPU: a CPU build, see docs/SETUP.md)"))
    if "triton" not in versions and "pytorch-triton-rocm" not in versions:
        found.append(Finding("triton", "error", "no Triton is installed",
                             f"on a CPU machine: {install_command('cpu')}; "
                             "on a GPU, torch's own Triton comes with it"))
    if "triton" in versions and "pytorch-triton-rocm" in versions:
        found.append(Finding("triton", "error", "two Triton packages share the import name `triton` "
                             f"(triton {versions['triton']} and pytorch-triton-rocm {versions['pytorch-triton-rocm']})",
                             "pip uninstall triton (ROCm's torch brings pytorch-triton-rocm)"))
    for name in ("textual", "watchdog"):
        if name not in versions:
            found.append(Finding(name, "warning", f"{name} is not installed: the app and `watch` need it",
                                 install_command()))
    return found


def probe_device() -> tuple[Finding, bool]:
    """Which device a check would use; the bool says whether a GPU is visible."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken install is what we report
        return Finding("device", "error", f"torch does not import: {exc}"), False
    if not torch.cuda.is_available():
        return Finding("device", "ok", "no GPU visible to torch: checks run on the CPU through Triton's interpreter "
                       "(its timings are not speeds: the counted work is what compares)"), False
    hip = getattr(torch.version, "hip", None)
    runtime = f"ROCm {hip}" if hip else f"CUDA {torch.version.cuda}"
    detail = f"{torch.cuda.get_device_name(0)} ({runtime})"
    smi = shutil.which("nvidia-smi")
    if smi and not hip:
        try:
            driver = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                                    text=True, timeout=20).stdout.strip().splitlines()
            if driver:
                detail += f", driver {driver[0]}"
        except (OSError, subprocess.SubprocessError):
            pass
    return Finding("device", "ok", detail), True


def probe_kernel(mode: Literal["interpreter", "compiled"]) -> Finding:
    """Run the tiny kernel in a child process (a crash there cannot take the doctor down)."""
    name = f"triton {mode}"
    with tempfile.TemporaryDirectory(prefix="flashtutor-doctor-") as scratch:
        script = Path(scratch) / "probe_kernel.py"  # compiled @jit needs its source in a file
        script.write_text(_KERNEL_PROBE, encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT_S, cwd=scratch)
        except subprocess.TimeoutExpired:
            return Finding(name, "error", f"a 16-element kernel did not finish in {PROBE_TIMEOUT_S:g} s")
    if done.returncode == 0 and done.stdout.strip().endswith("ok"):
        return Finding(name, "ok", "runs a tiny kernel correctly")
    last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    return Finding(name, "error", f"a tiny kernel failed: {last}")


def known_bad(versions: dict[str, str], has_gpu: bool) -> list[Finding]:
    """Combinations seen failing, with the fix (see docs/SETUP.md)."""
    found = []
    triton = _parse(versions.get("triton", ""))
    numpy = _parse(versions.get("numpy", ""))
    if not has_gpu and triton is not None and not interpreter_supports(str(triton)):
        found.append(Finding("triton interpreter", "error",
                             f"triton {triton} cannot run the drills in its CPU interpreter "
                             f"(needs >= {INTERPRETER_MIN_TRITON})",
                             f"pip install 'triton>={INTERPRETER_MIN_TRITON}'"))
    if not has_gpu and triton is not None and not interpreter_supports(str(triton)) and numpy is not None \
            and numpy >= Version("2.5"):
        found.append(Finding("numpy", "warning", f"numpy {numpy} with triton {triton}'s interpreter was seen failing",
                             "pip install 'numpy<2.5' or a newer triton"))
    return found


def probe_workspace(workspace: Path | None) -> list[Finding]:
    if workspace is None or not (workspace / "drills").is_dir():
        where = f"no drills in {workspace}" if workspace else "no workspace found"
        return [Finding("workspace", "error", where, NO_WORKSPACE)]
    found = [Finding("workspace", "ok", str(workspace))]
    try:
        with tempfile.NamedTemporaryFile(dir=workspace, prefix=".flashtutor-doctor-"):
            pass
        found.append(Finding("writable", "ok", "progress can be saved"))
    except OSError as exc:
        found.append(Finding("writable", "warning", f"the workspace is not writable ({exc.strerror}): "
                             f"checks run, but {NOT_SAVED}", "check the directory's permissions"))
    return found


def probe_watching(drills_dir: Path) -> Finding:
    """Start the tutor's own watcher on ``drills/`` (with its probe) and say which mode it chose."""
    try:
        from tutor.loop.watcher import NATIVE, DrillWatcher
    except ImportError as exc:
        return Finding("file watching", "warning", f"the watcher cannot start: {exc}", "pip install watchdog")
    status: dict[str, str] = {}
    seen = threading.Event()

    def on_status(mode: str, reason: str) -> None:
        status.update(mode=mode, reason=reason)
        seen.set()

    watcher = DrillWatcher(drills_dir, names=(), on_change=lambda path, settled: None, on_status=on_status)
    try:
        watcher.start()
    except OSError as exc:
        return Finding("file watching", "error", f"cannot watch {drills_dir}: {exc}")
    finally:
        watcher.stop()
    if status.get("mode") == NATIVE:
        return Finding("file watching", "ok", "native (inotify or the platform's own)")
    return Finding("file watching", "warning", f"polling: {status.get('reason', 'native watching unavailable')}",
                   "saves are still seen, a little later; a local (not network/WSL /mnt) folder watches natively")


def diagnose(workspace: Path | None) -> Report:
    report = Report(versions=installed_versions())
    report.findings += probe_packages(report.versions)
    device, has_gpu = probe_device()
    report.findings.append(device)
    report.findings += known_bad(report.versions, has_gpu)
    if "torch" in report.versions and ("triton" in report.versions or "pytorch-triton-rocm" in report.versions):
        report.findings.append(probe_kernel("interpreter"))
        if has_gpu:
            report.findings.append(probe_kernel("compiled"))
    if has_gpu:
        # with a GPU the interpreter is only used with --device cpu: its failure is not fatal
        for finding in report.findings:
            if finding.name == "triton interpreter" and finding.level == "error":
                finding.level = "warning"
    report.findings += probe_workspace(workspace)
    if workspace is not None and (workspace / "drills").is_dir():
        report.findings.append(probe_watching(workspace / "drills"))
    return report
