"""What guard bands and the hostile case add to one check (issue 9).

    python bench/guard_cost.py [--runs 5] [--device cpu|auto] [--quick]

In this process, on the device's default correctness shape, for a solved and
some failing kernels (drill files and solutions/NN_slug.mistakes.toml entries):
the median wall time of the correctness check as shipped, the same check with
the hostile case switched off, and with the read probe (re-runs that find
which input's margin a NaN came from) switched off too; and per launch, the
student's launcher called through the guard bands against the same call on
plain tensors.  Times are this process's CPU seconds (time.process_time: all
its threads), which a machine shared with other work disturbs far less than
wall time; every one is measured here, nothing is estimated.  ``--quick``
does 2 runs of two files.  The table is printed last.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FILES = [
    ("01", "solutions/01_causal_mask_solution.py"),
    ("02", "solutions/02_online_rescale_solution.py"),
    ("02", "mistake:no_running_max"),
    ("02", "mistake:v_load_unmasked"),
]


def measure(drill: str, path: Path, dev, runs: int) -> tuple:
    """One file's row of the table."""
    import torch

    from tutor.harness import guard as guarding
    from tutor.harness import launch as launching
    from tutor.harness.check import run_check
    from tutor.harness.job import CheckJob
    from tutor.harness.loader import load_student_module
    from tutor.harness.problems import attention
    from tutor.harness.shapes import plan_for

    def check_s() -> tuple[float, bool]:
        start = time.process_time()
        result = run_check(CheckJob(drill=drill, file=str(path), timing=False, seed=1), dev)
        return time.process_time() - start, result.passed

    def median(fn) -> tuple[float, bool]:
        fn()  # warm: compile (GPU) and import
        times = [fn() for _ in range(runs)]
        return statistics.median(t for t, _ in times), times[0][1]

    shipped, passed = median(check_s)
    real_hostile, real_probe = attention.hostile_launches, guarding.probe_reads
    attention.hostile_launches = lambda *a, **k: []
    try:
        no_hostile, _ = median(check_s)
        guarding.probe_reads = lambda *a, **k: []
        try:
            neither, _ = median(check_s)
        finally:
            guarding.probe_reads = real_probe
    finally:
        attention.hostile_launches = real_hostile
    # one launch through the bands against the same launch on plain tensors
    module = load_student_module(path)
    shape = plan_for(dev.interpreter).default
    device = launching.torch_device_name(dev)
    q, k, v = launching.random_inputs(shape, device, torch.Generator().manual_seed(0))
    causal = {} if drill == "02" else {"causal": True}

    def banded() -> tuple[float, bool]:
        start = time.process_time()
        launching.run_launcher(module, (q, k, v), causal.get("causal"), record_visits=True)
        return time.process_time() - start, True

    def plain() -> tuple[float, bool]:
        n_m, n_n = launching.visit_grid(shape[2], module.BLOCK_M, module.BLOCK_N)
        start = time.process_time()
        out = torch.empty_like(q)
        visits = torch.zeros((shape[0] * shape[1], n_m, n_n), dtype=torch.int32, device=device)
        module.attention(q, k, v, out=out, visits=visits, **causal)
        if q.is_cuda:
            torch.cuda.synchronize()
        return time.process_time() - start, True

    band_s, _ = median(banded)
    plain_s, _ = median(plain)
    return (path.name, "PASSED" if passed else "FAILED", shipped, shipped - no_hostile, no_hostile - neither,
            plain_s, band_s)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.runs = 2
    from tutor.harness.device import select_device

    dev = select_device(args.device)  # before triton is imported: TRITON_INTERPRET on a CPU
    from tutor.authoring.student_kernels import load
    from tutor.catalog import get_drill
    from tutor.harness.shapes import plan_for

    tmp = Path(tempfile.mkdtemp(prefix="guard-cost-"))
    files = FILES[1:3] if args.quick else FILES
    rows = []
    for drill, name in files:
        if name.startswith("mistake:"):
            entry = {m.name: m for m in load(get_drill(drill))}[name.split(":", 1)[1]]
            path = tmp / f"{entry.stem}.py"
            path.write_text(entry.text(get_drill(drill)), encoding="utf-8")
        else:
            path = ROOT / name

        rows.append(measure(drill, path, dev, args.runs))
    print(f"device: {dev.label}; shape {'x'.join(map(str, plan_for(dev.interpreter).default))}; "
          f"median of {args.runs} warm runs, CPU seconds of this process; python {' '.join(sys.argv)}")
    print("| file | verdict | check s | hostile case s | read probe s | launch plain s | launch banded s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, verdict, shipped, hostile, probe, plain_s, band_s in rows:
        print(f"| {name} | {verdict} | {shipped:.2f} | {hostile:+.2f} | {probe:+.2f} | {plain_s:.3f} | {band_s:.3f} |")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
