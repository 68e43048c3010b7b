"""The added cost of the attention read-out per check, solved and failing kernels.

    python bench/readout_cost.py [--device cpu|auto] [--runs 3] [--quick]

For each kernel it runs the correctness part of a check (every case and mode,
the reference, the fingerprints, the diagnosis: ``check_correctness``) in this
process, warm (one untimed run first, so compilation is not counted), twice
per run: with the read-out switched off and as shipped.  The difference is what
the read-out adds: nothing for a kernel that passes (it runs only on failing
modes), ``seq / head_dim`` launches per failing mode plus 4 when it probes
which inputs the output follows.  Times are wall clock medians; on the CPU
interpreter they are relative only.  ``--quick``: one run each, solved and two
failing kernels.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()

    from tutor.harness.device import select_device

    dev = select_device(args.device)  # before triton is imported
    import torch

    from tutor.authoring import student_kernels as mistakes
    from tutor.catalog import get_drill, pristine_path, solution_path
    from tutor.harness import launch as launching
    from tutor.harness.loader import load_student_module
    from tutor.harness.problems import attention

    made = Path(tempfile.mkdtemp(prefix="readout-cost-"))
    written = mistakes.materialise(made)
    kernels = [
        ("01 solution", "01", solution_path(get_drill("01"))),
        ("01 shipped drill (todo2-open)", "01", pristine_path(get_drill("01"))),
        ("01 mask 0 not -inf", "01", written["01_mask_zero"]),
        ("02 solution", "02", solution_path(get_drill("02"))),
        ("02 shipped drill (never-rescaled)", "02", pristine_path(get_drill("02"))),
        ("02 Q through K (probes inputs)", "02", written["02_q_from_k"]),
    ]
    if args.quick:
        kernels = [kernels[0], kernels[1], kernels[4]]
        args.runs = 1
    shipped = attention.read_failing_modes
    device = launching.torch_device_name(dev)

    def one_check(drill, module, read: bool) -> tuple[float, object]:
        attention.read_failing_modes = shipped if read else (lambda *a, **k: {})
        try:
            start = time.perf_counter()
            found = attention.check_correctness(drill, module, dev.interpreter, device, torch.Generator().manual_seed(0))
            return time.perf_counter() - start, found
        finally:
            attention.read_failing_modes = shipped

    rows = []
    for label, drill_id, path in kernels:
        drill = get_drill(drill_id)
        module = load_student_module(Path(path))
        one_check(drill, module, True)  # warm: compile every launch once
        without, with_readout = [], []
        found = None
        for _ in range(args.runs):
            without.append(one_check(drill, module, False)[0])
            seconds, found = one_check(drill, module, True)
            with_readout.append(seconds)
        passed = all(c.passed for c in found.cases)
        launches = sum(r.launches for r in found.readout.values())
        base, full = statistics.median(without), statistics.median(with_readout)
        rows.append((label, "PASSED" if passed else "FAILED", base, full, full - base, launches,
                     ",".join(found.readout) or "-"))

    print(f"device: {dev.label}; correctness shape {attention.plan_for(dev.interpreter).default}; "
          f"median of {args.runs} warm run(s)")
    print(f"{'kernel':<36}{'verdict':>8}{'check s':>10}{'+read-out s':>13}{'added s':>10}{'launches':>10}  modes read")
    for label, verdict, base, full, added, launches, modes in rows:
        print(f"{label:<36}{verdict:>8}{base:>10.2f}{full:>13.2f}{added:>10.2f}{launches:>10}  {modes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
