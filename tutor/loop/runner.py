"""Run checks in child processes, keeping one warm worker ready.

Importing torch and triton costs seconds, so the runner starts a worker
(:mod:`tutor.loop.worker`) ahead of time; a check hands its job to that warm
worker, and a fresh one is started for the next check once this one is done.
Every worker runs exactly one check, so a segfault, a hang or a sticky CUDA
error costs that worker and nothing else.

Nothing here imports torch: the caller (the CLI, the watch loop, the app)
stays light and never touches the student's kernel.
"""

from __future__ import annotations

import copy
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from tutor import codec
from tutor.harness.device import DeviceChoice
from tutor.harness.job import CheckJob
from tutor.harness.result import (
    CheckError,
    CheckResult,
    Device,
    DiagnosisPhase,
    DiagnosisStatus,
    ErrorKind,
    Performance,
)

# A phase of a check handed over before the check ends: the verdict (when a diagnosis or
# a performance phase follows) and the diagnosis (when a performance phase follows).
Phase = Literal["verdict", "diagnosis"]

DEFAULT_TIMEOUT_S = 120.0  # the verdict: the student's file loaded, compiled and launched on every case
# The tutor's own phases have their own budget, never the student's: the diagnosis
# (read-outs and probes re-run the student's kernel tens of times) may take this many
# times the verdict's own time, and at least DIAGNOSIS_MIN_S; the performance phase
# (timed launches, SDPA, the roofline's counting launches) gets DEFAULT_TIMEOUT_S.
DIAGNOSIS_BUDGET_FACTOR = 10.0
DIAGNOSIS_MIN_S = 30.0
READY_TIMEOUT_S = 120.0  # a worker's start-up: importing torch and triton
OUTPUT_TAIL_CHARS = 4000
# Start the next worker after a check, not during it.  Started once the verdict was in, its
# start-up (importing torch, probing the GPU) made the diagnosis that followed slower on an
# H100: drill 09's 1.10 s against 0.20 s with the spare started after the check, drill 07's
# 1.44 against 0.73 s (run 26); a spare that waited to touch the device until the check
# ended made no difference (1.17 s). Started with the check it cost the verdict 0.15 s
# (run 10), and on a 2-core machine its imports compete with the interpreter. True: once the
# verdict is in (bench/save_to_verdict.py --spare-during-check, to measure it).
SPARE_DURING_CHECK = False


PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding the tutor package (tutor/loop/runner.py)


class WorkerStartError(RuntimeError):
    """A worker could not start (no GPU when one was demanded, a broken install)."""


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {-returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


@dataclass(frozen=True)
class NoMessage:
    """Why the worker sent no message: the deadline passed, the caller cancelled,
    or the worker's channel closed (it exited or died)."""

    why: Literal["timeout", "cancelled", "ended"]


class Worker:
    """One child process, from start-up to its single check."""

    def __init__(self, device_choice: DeviceChoice = "auto", spare: bool = False, warm_drill: str | None = None):
        """``spare``: a worker started ahead of its job also warms Triton's compiler
        while it waits (:mod:`tutor.harness.warmup`); one started for a job at once
        would only move that cost in front of the job.  ``warm_drill``: a spare
        on a GPU also runs that drill's own solution once (the harness's first
        CUDA operations), the drill its next job most likely checks."""
        self.log_path = Path(tempfile.mkstemp(prefix="flashtutor-worker-", suffix=".log")[1])
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "wb") as log:
            # started in the folder that holds the package, which exists while the tutor
            # runs: the caller's own folder may be a workspace deleted under it (a Python
            # started in a deleted folder cannot load torch's libraries)
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tutor.loop.worker", "--device", device_choice,
                 *(["--warm-compiler"] if spare else []),
                 *(["--warm-drill", warm_drill] if spare and warm_drill else [])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=PACKAGE_PARENT,
                start_new_session=True,  # its own process group: kill() reaches anything it spawned
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True, name=f"worker-{self.proc.pid}-reader").start()
        self.device: Device | None = None
        self.startup: dict[str, float] = {}  # the worker's own start-up timings (seconds)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self._lines.put(raw.decode("utf-8", "replace"))
        self._lines.put(None)  # EOF: the process ended or closed its channel

    def _next_message(self, deadline: float, cancel: threading.Event | None) -> dict[str, Any] | NoMessage:
        """The next protocol message, or why there is none."""
        while True:
            if cancel is not None and cancel.is_set():
                return NoMessage("cancelled")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return NoMessage("timeout")
            try:
                line = self._lines.get(timeout=min(remaining, 0.05))
            except queue.Empty:
                continue
            if line is None:  # EOF: the process ended or closed its channel
                return NoMessage("ended")
            message: dict[str, Any] = json.loads(line)  # the worker sends one JSON object a line
            return message

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S, cancel: threading.Event | None = None) -> Device | None:
        """Block until the worker is warm; None if ``cancel`` was set first."""
        if self.device is not None:
            return self.device
        message = self._next_message(time.monotonic() + timeout_s, cancel)
        if message == NoMessage("cancelled"):
            return None
        if isinstance(message, NoMessage) or not message.get("ready"):
            self.kill()
            reason = message.get("error") if isinstance(message, dict) else self.output_tail() or "no output"
            raise WorkerStartError(f"the check worker could not start: {reason}")
        self.device = codec.decode(Device, message["device"])
        self.startup = message.get("startup", {})
        return self.device

    def run(self, job: dict[str, Any], timeout_s: float, cancel: threading.Event | None = None,
            on_phase: Callable[[Phase, CheckResult], None] | None = None,
            on_step: Callable[[str], None] | None = None) -> CheckResult:
        """The check's result with every phase.  ``on_phase`` is called (from this
        thread) with a copy of the verdict as soon as it arrives when a later phase
        follows, and with a copy of the diagnosis when the performance phase follows.
        ``timeout_s`` is the student's: it covers the verdict (their file loaded,
        compiled and launched); the tutor's own phases have their own budgets.
        ``on_step`` hears each step of the verdict as the worker reports it
        ("loading and compiling your kernel", "the ragged case, shape ...")."""
        device = self.wait_ready(cancel=cancel)
        if device is None:
            self.kill()
            return self._failed(job, "cancelled", "a newer save replaced this check before it started")
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        started = time.monotonic()
        step = ""
        while True:
            message = self._next_message(started + timeout_s, cancel)
            if not (isinstance(message, dict) and "step" in message):
                break
            step = str(message["step"])
            if on_step is not None and step:
                on_step(step)
        try:  # every path but a result kills the worker (in _failed) before returning
            if message == NoMessage("timeout"):
                where = f" while running {step}" if step else ""
                return self._failed(
                    job,
                    "timeout",
                    f"the check did not finish within {timeout_s:g} s and was stopped{where}: your kernel's launch"
                    " did not return (a loop that never ends, or a shape far too big for this device)"
                    if step and not step.startswith("loading") else
                    f"the check did not finish within {timeout_s:g} s and was stopped{where}",
                )
            if message == NoMessage("cancelled"):
                return self._failed(job, "cancelled", "a newer save replaced this check")
            if isinstance(message, NoMessage):  # the channel ended
                code = self.proc.wait(timeout=5)
                where = f" while running {step}" if step else ""
                return self._failed(
                    job,
                    "crash",
                    f"the worker running your kernel died ({_signal_name(code)}){where}: a segfault, "
                    "an os._exit, running out of memory or a fatal GPU error. The next check gets a fresh worker.",
                )
            if "internal_error" in message:
                return self._failed(job, "internal", "the tutor itself failed; please report this",
                                    detail=message["internal_error"])
            result = CheckResult.from_dict(message["result"])
            result.output = self.output_tail()
            diagnosing = result.diagnosis_phase.status == "pending"
            timing = result.performance.status == "pending"
            if (diagnosing or timing) and on_phase is not None:
                on_phase("verdict", copy.deepcopy(result))  # the later phases go on filling ``result``
            if diagnosing:
                verdict_s = time.monotonic() - started
                budget = max(DIAGNOSIS_MIN_S, DIAGNOSIS_BUDGET_FACTOR * verdict_s)
                if not self._diagnosis(result, budget, verdict_s, cancel):
                    return result  # stopped: the worker is gone, and its performance phase with it
                if timing and on_phase is not None:
                    on_phase("diagnosis", copy.deepcopy(result))
            if timing:
                self._performance(result, timeout_s, cancel)
            return result  # the worker exits by itself; the caller reaps it
        except BaseException:
            self.kill()
            raise

    def _later_phase(self, key: str, timeout_s: float, cancel: threading.Event | None,
                     doing: str) -> dict[str, Any] | tuple[NoMessage | None, str]:
        """The worker's message of a phase after the verdict (its ``key``: "diagnosis",
        "performance"), or why it did not come: (the NoMessage, or None for a tutor
        bug, and the reason in words, ``doing`` saying what the phase was doing).
        Whatever stops a phase kills the worker; the verdict stands."""
        message = self._next_message(time.monotonic() + timeout_s, cancel)
        while isinstance(message, dict) and "step" in message:  # not sent after the verdict; tolerated
            message = self._next_message(time.monotonic() + timeout_s, cancel)
        if isinstance(message, dict) and key in message:
            phase: dict[str, Any] = message[key]
            return phase
        if message == NoMessage("cancelled"):
            reason = f"a newer save replaced this content while it was {doing}"
        elif message == NoMessage("ended"):
            code = self.proc.wait(timeout=5)
            reason = f"the worker died while {doing} ({_signal_name(code)})"
        elif message == NoMessage("timeout"):
            reason = f"it did not finish within {timeout_s:.0f} s"
        else:
            reason = f"the tutor itself failed while {doing}; please report this"
        self.kill()
        return (message if isinstance(message, NoMessage) else None), reason

    def _diagnosis(self, result: CheckResult, budget_s: float, verdict_s: float,
                   cancel: threading.Event | None) -> bool:
        """Wait for the diagnosis and take it into ``result``; False when it did not
        come (the worker is then killed, the verdict stands, the performance phase is
        off).  Its budget is the tutor's own: running past it says so, and never
        blames the student's kernel."""
        came = self._later_phase("diagnosis", budget_s, cancel, "reading out your kernel")
        result.output = self.output_tail()
        if isinstance(came, dict):
            result.apply_phase("diagnosis", came)
            return True
        why, reason = came
        status: DiagnosisStatus = "cancelled" if why == NoMessage("cancelled") else "failed"
        if why == NoMessage("timeout"):
            status = "skipped"
            reason = (f"diagnosis skipped: the tutor's read-outs did not finish within {budget_s:.0f} s"
                      f" ({DIAGNOSIS_BUDGET_FACTOR:g}x the {verdict_s:.1f} s the verdict took, at least"
                      f" {DIAGNOSIS_MIN_S:g} s): the machine was busy. The verdict stands; the next save tries again.")
        result.diagnosis_phase = DiagnosisPhase(status, reason)
        if result.performance.status == "pending":
            result.performance = Performance("cancelled" if status == "cancelled" else "skipped",
                                             "the worker was stopped during the diagnosis")
        return False

    def _performance(self, result: CheckResult, timeout_s: float, cancel: threading.Event | None) -> None:
        """Wait for the performance phase and take it into ``result``; whatever
        stops it (a newer save, a timeout, a crash) leaves the verdict standing."""
        came = self._later_phase("performance", timeout_s, cancel, "timing your kernel")
        result.output = self.output_tail()
        if isinstance(came, dict):
            result.apply_phase("performance", came)
            return
        why, reason = came
        if why == NoMessage("timeout"):
            reason = f"the timed launches did not finish within {timeout_s:g} s"
        result.performance = Performance("cancelled" if why == NoMessage("cancelled") else "failed", reason)

    def _failed(self, job: dict[str, Any], kind: ErrorKind, message: str, detail: str | None = None) -> CheckResult:
        self.kill()
        return CheckResult(
            drill=job["drill"],
            file=job["file"],
            device=self.device,
            error=CheckError(kind=kind, message=message, file=job["file"], detail=detail),
            output=self.output_tail(),
        )

    def output_tail(self) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-OUTPUT_TAIL_CHARS:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.log_path.unlink(missing_ok=True)


def crash_explainable(job: dict[str, Any], result: CheckResult) -> bool:
    """Whether :func:`explain_crash` would re-run this check: a crash on the check's
    own shapes, of a problem that can run one shape alone."""
    if result.error is None or result.error.kind != "crash" or job.get("shape") is not None or result.device is None:
        return False
    from tutor.catalog import get_drill
    from tutor.harness.problems import SHAPE_ONLY_PROBLEMS

    return get_drill(str(job["drill"])).problem in SHAPE_ONLY_PROBLEMS


def explain_crash(job: dict[str, Any], result: CheckResult, device_choice: DeviceChoice, timeout_s: float,
                  cancel: threading.Event | None = None) -> CheckResult:
    """A worker that died on the check's shapes (all ragged: no length is a multiple
    of the block) gets one more run, in a fresh worker, of the default shape rounded
    up to whole blocks and nothing else: the crash's diagnosis.  If that one
    survives, the crash comes from the ragged tail, and the message says so."""
    if not crash_explainable(job, result):
        return result
    assert result.device is not None and result.error is not None
    from tutor.harness.shapes import plan_for, whole_block_shape

    shape = whole_block_shape(result.device.interpreter)
    worker = Worker(device_choice)
    try:
        again = worker.run({**job, "shape": list(shape), "shape_only": True, "timing": False}, timeout_s, cancel)
    finally:
        worker.close()
    if again.error is not None:
        return result
    seqs = ", ".join(str(s[2]) for _, s in plan_for(result.device.interpreter).cases())
    result.error.message += (
        f" The same kernel at seq = {shape[2]}, a multiple of every block size up to {shape[2]}, ran to the end"
        f" without crashing, while the check's lengths (seq = {seqs}) leave a ragged last block: the kernel reads"
        " or writes past the end of the sequence there. Check the masks of the last block's loads and of the store."
    )
    return result


class CheckRunner:
    """Runs checks one at a time, each in a fresh worker, with a spare kept warm.

    ``check`` is blocking and meant for a background thread; ``cancel`` lets the
    caller abandon a check (a newer save arrived) — the worker is killed.
    ``device`` is the user's choice (``--device``); :attr:`device` is, once a
    worker started, the device it detected.
    """

    def __init__(self, device: DeviceChoice = "auto", timeout_s: float = DEFAULT_TIMEOUT_S, warm: bool = True):
        self.device_choice: DeviceChoice = device
        self.timeout_s = timeout_s
        self.keep_warm = warm
        self._spare: Worker | None = None
        self._lock = threading.Lock()
        self._reapers: list[threading.Thread] = []
        self._sdpa: dict[str, tuple[float | None, float | None]] = {}  # drill -> SDPA full, causal ms
        self._last_drill: str | None = None  # what a spare warms up on (the next save's drill, most likely)
        self.device: Device | None = None
        if warm:
            self._spare = Worker(device, spare=True)

    def _take_worker(self) -> Worker:
        with self._lock:
            worker, self._spare = self._spare, None
        return worker or Worker(self.device_choice)

    def warm_up(self) -> Device | None:
        """Start the spare worker (if not yet) and wait until it is ready: the device."""
        with self._lock:
            if self._spare is None:
                self._spare = Worker(self.device_choice, spare=True)
            spare = self._spare
        self.device = spare.wait_ready()
        return self.device

    def check(self, drill: str, file: str | Path, *, timing: bool = True, seed: int | None = None,
              cancel: threading.Event | None = None,
              on_phase: Callable[[Phase, CheckResult], None] | None = None,
              on_step: Callable[[str], None] | None = None) -> CheckResult:
        """Check ``file`` in a worker: the result with every phase.  With
        ``on_phase``, the verdict is handed over as soon as it is known when a later
        phase follows, and the diagnosis when the performance phase follows
        (otherwise the returned result is all); ``on_step`` hears the verdict's steps."""

        baseline = self._sdpa.get(drill)
        self._last_drill = drill
        job = asdict(CheckJob(drill=drill, file=str(Path(file).resolve()), timing=timing, seed=seed,
                              time_sdpa=baseline is None))
        worker = self._take_worker()
        spare_early = self.keep_warm and SPARE_DURING_CHECK

        def phase_in(phase: Phase, partial: CheckResult) -> None:
            if spare_early and phase == "verdict":  # cores to spare: the next save finds the next worker starting
                self._ensure_spare()
            if on_phase is not None:
                on_phase(phase, partial)

        try:
            result = worker.run(job, self.timeout_s, cancel, phase_in, on_step)
            self.device = worker.device or self.device
            if crash_explainable(job, result):  # a crash's diagnosis: one re-run at whole blocks
                if on_phase is not None:
                    verdict = copy.deepcopy(result)
                    verdict.diagnosis_phase = DiagnosisPhase("pending")
                    on_phase("verdict", verdict)
                started = time.monotonic()
                result = explain_crash(job, result, self.device_choice, self.timeout_s, cancel)
                result.diagnosis_phase = DiagnosisPhase("done", duration_s=time.monotonic() - started)
            self._reuse_sdpa_timing(drill, result, baseline)
            return result
        finally:
            # a finished CUDA worker takes ~0.15 s to tear down: reap it off the caller's path
            reaper = threading.Thread(target=worker.close, daemon=True, name="worker-reaper")
            reaper.start()
            self._reapers = [r for r in self._reapers if r.is_alive()] + [reaper]
            if self.keep_warm:
                self._ensure_spare()

    def _reuse_sdpa_timing(self, drill: str, result: CheckResult,
                           baseline: tuple[float | None, float | None] | None) -> None:
        """torch's SDPA at the timing shape is measured by the first timed check of a
        drill in this session and shown again with the later ones (it is the same
        kernel on the same inputs' shape; the student's kernel is timed every time)."""
        if not result.timed_ms:
            return  # no timed launches this time
        if baseline is None and result.sdpa_timed_ms:
            self._sdpa[drill] = (result.sdpa_full_ms, result.sdpa_causal_ms)
        elif baseline is not None:
            result.sdpa_full_ms, result.sdpa_causal_ms = baseline
            result.sdpa_from_earlier_check = True
            if result.roofline is not None:  # the same SDPA times on the roofline
                for launch in result.roofline.launches:
                    launch.take_sdpa(baseline[0] if launch.mode == "full" else baseline[1])

    def _ensure_spare(self) -> None:
        with self._lock:
            if self._spare is None:
                self._spare = Worker(self.device_choice, spare=True, warm_drill=self._last_drill)

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()
        for reaper in self._reapers:
            reaper.join(timeout=5)

    def __enter__(self) -> CheckRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
