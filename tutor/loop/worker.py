"""The child process that runs a student's kernel: ``python -m tutor.loop.worker``.

Protocol (one JSON object per line):

1. the worker picks its device (setting ``TRITON_INTERPRET`` before triton is
   imported), imports torch, triton and the harness, and writes
   ``{"ready": true, "device": {...}}`` — it is now *warm*;
2. it reads one job (a :class:`~tutor.harness.job.CheckJob` as a dict) from
   stdin, runs its verdict phase and writes ``{"result": {...}}`` at once;
   before each of the student's correctness launches it writes
   ``{"step": "the default case, shape 1x2x200x64, causal"}``, so a launch that
   never returns is named by the runner's timeout;
3. when that result's ``diagnosis_phase.status`` is ``"pending"`` (it FAILED) it
   runs the diagnosis (read-outs, probes) and writes ``{"diagnosis": {...}}``
   (:meth:`CheckResult.phase_dict`);
4. when its ``performance.status`` is ``"pending"`` it runs the performance
   phase (timed launches, SDPA, roofline) and writes ``{"performance": {...}}``
   (:meth:`CheckResult.phase_dict`); then it exits.

A spare worker (``--warm-compiler``) says it is ready first and warms up after,
in a thread that gives way to the job the moment it arrives (at its next kernel
launch): the student's first check never waits for the spare's warm-up.

One check per worker: a crash, a hang or a sticky CUDA error dies with it.
The protocol travels on a private copy of the original stdout; file
descriptors 1 and 2 both point at the log the parent gave as stderr, so
whatever the student's code (or Triton, or C code) prints lands there and
cannot corrupt the protocol.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import traceback
from typing import Any, TextIO


def _protocol_channel() -> TextIO:
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stdout now goes to the log too
    return channel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tutor.loop.worker")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--warm-compiler", action="store_true",
                        help="a spare worker: while waiting for the job, compile a small kernel (GPU) or "
                             "interpret it once (CPU)")
    parser.add_argument("--warm-drill", help="with --warm-compiler, on a GPU: also run this drill's solution once "
                                             "(the harness's first CUDA operations)")
    args = parser.parse_args(argv)
    channel = _protocol_channel()

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    import time

    clock = time.perf_counter()
    startup: dict[str, float] = {}  # where a cold start's seconds go (bench/cold_check.py prints it)
    try:
        from tutor.harness.device import select_device

        device = select_device(args.device)  # imports torch (and probes the device)
        startup["device_s"] = time.perf_counter() - clock
        from tutor.harness.check import run_diagnosis, run_performance, run_verdict

        startup["harness_imports_s"] = time.perf_counter() - clock - startup["device_s"]
        if not device.interpreter:
            # create the CUDA context now, while the worker waits, not during the check
            import torch
            import triton.testing  # noqa: F401 - the timed launches need it

            before = time.perf_counter()
            torch.zeros(1, device="cuda")
            startup["cuda_context_s"] = time.perf_counter() - before
        from tutor.harness.job import CheckJob
    except Exception as exc:  # noqa: BLE001 - tell the parent why this worker cannot start
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    from tutor import codec
    from tutor.harness import cost

    cost.install()
    startup["total_s"] = time.perf_counter() - clock
    send({"ready": True, "device": codec.encode(device), "pid": os.getpid(), "startup": startup})
    job_arrived = threading.Event()
    warming = None
    if args.warm_compiler:
        warming = threading.Thread(target=_warm_up, args=(device, args.warm_drill, job_arrived, startup),
                                   daemon=True, name="warm-up")
        warming.start()
    line = sys.stdin.readline()
    job_arrived.set()
    if not line:
        return 0  # the parent closed us without a job: a warm spare that was not needed
    if warming is not None and device.interpreter:
        # the interpreter swaps Triton's language modules process-wide: one kernel at a time;
        # the warm-up stops at its next launch (one small kernel on the CPU)
        warming.join()
    # on a GPU the job starts at once: the warm-up stops at its next launch or step (a
    # compile under way finishes beside the job's own, which overlap as they do anyway)
    try:
        job = CheckJob(**json.loads(line))
        cost.listen_steps(lambda words: send({"step": words}))
        result, state = run_verdict(job, device)
        cost.listen_steps(None)
        send({"result": result.to_dict()})
        if result.diagnosis_phase.status == "pending":
            run_diagnosis(job, device, result, state)
            send({"diagnosis": result.phase_dict("diagnosis")})
        if result.performance.status == "pending":
            run_performance(job, device, result, state)
            send({"performance": result.phase_dict("performance")})
    except Exception:  # noqa: BLE001 - a bug in the tutor, not the student: say so
        send({"internal_error": traceback.format_exc()})
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: a student's CUDA context in a bad state can hang it
    os._exit(0)


def _warm_up(device: Any, warm_drill: str | None, job_arrived: threading.Event, startup: dict[str, float]) -> None:
    """A spare's head start, while it waits for its job: compile (GPU) or interpret
    (CPU) a small kernel, on a GPU run the last drill's solution once (the harness's
    first CUDA operations) and measure the roofline's peaks (once per device, cached).
    Each step only if no job has arrived; a launch after one has raises
    :class:`~tutor.harness.cost.LaunchAborted`, which ends the warm-up there.  Only a
    head start, each: a check does what failed here as it would anyway."""
    import time

    from tutor.harness import cost
    from tutor.harness.launch import torch_device_name
    from tutor.harness.warmup import warm_compiler, warm_harness

    with cost.abortable(job_arrived):
        try:  # a GPU compiles the warm-up kernel, the interpreter runs it once
            startup["compiler_warm_s"] = warm_compiler(torch_device_name(device))
        except Exception:  # noqa: BLE001 - a warm-up only saves time: whatever stops it, the check still runs
            startup["compiler_warm_s"] = -1.0
        if not device.interpreter and warm_drill and not job_arrived.is_set():
            before = time.perf_counter()
            try:
                warm_harness(warm_drill, device)
                startup["harness_warm_s"] = time.perf_counter() - before
            except Exception:  # noqa: BLE001 - a warm-up only saves time: whatever stops it, the check still runs
                startup["harness_warm_s"] = -1.0
    if not device.interpreter and not job_arrived.is_set():
        from tutor.harness.peaks import device_peaks

        try:  # the roofline's ceilings, measured once per device and cached
            device_peaks(device.name, device.torch)
        except Exception:  # noqa: BLE001 - measured again when a check asks for them (or the table serves)
            pass


if __name__ == "__main__":
    sys.exit(main())
