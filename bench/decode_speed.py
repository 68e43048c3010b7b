"""Drill 05's solution (split-KV decoding) vs torch's SDPA for one query token, in one process.

    python bench/decode_speed.py            # GPU: batch 8/32/64, 32 heads, cache 4k/16k/32k, d = 128, fp16
    python bench/decode_speed.py --quick    # no GPU needed: the CPU interpreter at a tiny shape

First it runs the real harness (tutor.harness.check.run_check) on the shipped
drill and on the solution and prints one line each: the drill must FAIL and the
solution PASS on this device.  Then, for every shape (every sequence's cache
full, so SDPA without a mask does the same work), it times the solution at its
default split count and at 1..32 slices, and torch's SDPA with a (batch, heads,
1, d) query (its default dispatch, with the backend it used recorded from the
profiler, and forced FLASH_ATTENTION and EFFICIENT_ATTENTION beside it, "n/a"
where one refuses), and checks the solution's output against SDPA's.  Decode reads
each cache entry once, so the figure that matters is the bandwidth: the K and V
bytes read, 2 * B * H * L * d * 2, per second.  The last lines are the tables
(markdown); ``--json PATH`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "05_split_kv_decode_solution.py"
DRILL = ROOT / "drills" / "05_split_kv_decode.py"
GPU_SHAPES = [(b, 32, n, 128) for b in (8, 32, 64) for n in (4096, 16384, 32768)]  # batch, heads, cache, d
CPU_SHAPES = [(2, 2, 256, 64)]
SPLITS = (1, 2, 4, 8, 16, 32)
CPU_SPLITS = (1, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CPU interpreter, one tiny shape (no GPU needed)")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    parser.add_argument("--solution", type=Path, default=SOLUTION,
                        help="the kernel file to time (default: the clear solution; e.g. solutions/05_split_kv_decode_fast.py)")
    parser.add_argument("--splits", help="the split counts to sweep, e.g. 8,16,32 (default: 1..32, doubling)")
    args = parser.parse_args()

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import best_split, decode_summary_head, gbs, harness_lines, load, timer, use_interpreter
    from sdpa_baselines import SDPA_VARIANTS, ms_cell, time_sdpa

    interpreter = use_interpreter(args.quick)
    import triton

    sys.path.insert(0, str(ROOT))
    device = "cpu" if interpreter else "cuda"
    solution = load(args.solution)
    gpu = "CPU (Triton interpreter: timings relative only)" if interpreter else torch.cuda.get_device_name(0)
    header = f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}"
    print(header, flush=True)
    checks = harness_lines("05", [(label, path, want, path == args.solution) for label, path, want in (
        ("shipped drill 05", DRILL, "FAILED"), (args.solution.name, args.solution, "PASSED"))], interpreter)
    print(*checks, sep="\n", flush=True)

    bench = timer(interpreter, samples=2)

    shapes = CPU_SHAPES if interpreter else GPU_SHAPES
    splits = CPU_SPLITS if interpreter else SPLITS
    if args.splits:
        splits = tuple(int(n) for n in args.splits.split(","))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for batch, heads, cache, dim in shapes:
        gen = torch.Generator(device=device).manual_seed(0)
        q = torch.randn((batch, heads, dim), device=device, dtype=torch.float16, generator=gen)
        k, v = (torch.randn((batch, heads, cache, dim), device=device, dtype=torch.float16, generator=gen) for _ in range(2))
        lengths = torch.full((batch,), cache, dtype=torch.int32, device=device)
        out = torch.empty_like(q)
        q4 = q[:, :, None, :]
        reference = sdpa(q4, k, v)[:, :, 0, :].float()
        solution.attention(q, k, v, lengths, out=out)
        err = float((out.float() - reference).abs().max())
        gbytes = 2 * batch * heads * cache * dim * 2 / 1e9
        timed = time_sdpa(bench, lambda: sdpa(q4, k, v))
        row = {
            "batch": batch, "heads": heads, "cache": cache, "head_dim": dim,
            "default_splits": (solution.split_count(batch, heads, cache, q.device)  # the fast file's own choice
                               if hasattr(solution, "split_count") else solution.NUM_SPLITS),
            "solution": args.solution.name, "max_abs_err_vs_sdpa": err,
            "sdpa_ms": timed.ms["default"], "sdpa_backend": timed.backend,
            **{f"sdpa_{variant}_ms": timed.ms[variant] for variant in SDPA_VARIANTS[1:]},
            "default_ms": bench(lambda: solution.attention(q, k, v, lengths, out=out)),
            "split_ms": {},
        }
        for n in splits:
            row["split_ms"][n] = bench(lambda n=n: solution.attention(q, k, v, lengths, out=out, num_splits=n))
        best_split(row, gbytes)
        rows.append(row)
        print(json.dumps(row), flush=True)

    decode_summary_head(args.json, gpu, header, checks, rows)
    print("| B×H×L×d | SDPA ms (backend) | SDPA GB/s | solution ms (splits) | GB/s | ×SDPA | best ms (splits) | GB/s "
          "| ×SDPA | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']}×{r['heads']}×{r['cache']}×{r['head_dim']} | {r['sdpa_ms']:.3f} ({r['sdpa_backend']}) "
              f"| {gbs(r['sdpa_gbs'])} "
              f"| {r['default_ms']:.3f} ({r['default_splits']}) | {gbs(r['default_gbs'])} | {r['sdpa_ms'] / r['default_ms']:.2f} "
              f"| {r['best_ms']:.3f} ({r['best_splits']}) | {gbs(r['best_gbs'])} | {r['sdpa_ms'] / r['best_ms']:.2f} "
              f"| {r['max_abs_err_vs_sdpa']:.1e} |")
    print()
    print("SDPA's backends (ms; ×: SDPA's time over the solution's best; n/a: the backend refused the shape)")
    print("| B×H×L×d | default ms | ×best | forced FLASH_ATTENTION ms | ×best | forced EFFICIENT_ATTENTION ms | ×best |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cells = []
        for ms in (r["sdpa_ms"], r["sdpa_flash_ms"], r["sdpa_efficient_ms"]):
            cells += [ms_cell(ms), ms_cell(None if ms is None else ms / r["best_ms"], 2)]
        print(f"| {r['batch']}×{r['heads']}×{r['cache']}×{r['head_dim']} | " + " | ".join(cells) + " |")
    print()
    print("split count's effect (ms; programs = B×H×splits):")
    print("| B×H×L×d | " + " | ".join(f"{n} split{'s' if n > 1 else ''}" for n in splits) + " |")
    print("|---|" + "---|" * len(splits))
    for r in rows:
        print(f"| {r['batch']}×{r['heads']}×{r['cache']}×{r['head_dim']} | "
              + " | ".join(f"{r['split_ms'][n]:.3f}" for n in splits) + " |")
    if interpreter:
        print("(CPU interpreter: the milliseconds are relative only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
