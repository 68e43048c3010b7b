"""Drill 07's solution (paged, GQA-packed decoding) vs torch's SDPA on the gathered cache, in one process.

    python bench/paged_decode_speed.py            # GPU: batch 8/32/64, 32 query heads on 8 K/V heads, cache 4k/16k, d = 128, pages of 16
    python bench/paged_decode_speed.py --quick    # no GPU needed: the CPU interpreter at a tiny shape

First it runs the real harness (tutor.harness.check.run_check) on the shipped
drill and on the solution and prints one line each: the drill must FAIL and the
solution PASS on this device.  Then, for every shape (every sequence's cache full,
its pages a scrambled permutation of the pool), it times the solution at its
default split count and at 1..16 slices, and torch's SDPA on the same cache
gathered beforehand into contiguous (batch, kv_heads, L, d) tensors with
``enable_gqa=True`` (its default dispatch, the backend recorded from the
profiler), and checks the solution's output against SDPA's.  Decoding reads each
K/V element once per K/V head group, so the figure that matters is the
bandwidth: 2 * B * KV_HEADS * L * d * 2 bytes of K and V per step, per second.
The last lines are the tables (markdown); ``--json PATH`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "07_paged_decode_solution.py"
DRILL = ROOT / "drills" / "07_paged_decode.py"
# batch, query heads, K/V heads, cache length, head_dim, page size
GPU_SHAPES = [(b, 32, 8, n, 128, 16) for b in (8, 32, 64) for n in (4096, 16384)]
CPU_SHAPES = [(2, 8, 2, 64, 32, 8)]
SPLITS = (1, 2, 4, 8, 16)
CPU_SPLITS = (1, 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CPU interpreter, one tiny shape (no GPU needed)")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    args = parser.parse_args()

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import best_split, decode_summary_head, gbs, harness_lines, load, timer, use_interpreter
    from sdpa_baselines import time_sdpa

    interpreter = use_interpreter(args.quick)
    import triton

    sys.path.insert(0, str(ROOT))
    from tutor.harness.problems.paged_decode import Case, gathered, make_inputs

    device = "cpu" if interpreter else "cuda"
    solution = load(SOLUTION)
    gpu = "CPU (Triton interpreter: timings relative only)" if interpreter else torch.cuda.get_device_name(0)
    header = f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}"
    print(header, flush=True)
    checks = harness_lines("07", [("shipped drill 07", DRILL, "FAILED", False),
                                  ("solution 07", SOLUTION, "PASSED", False)], interpreter)
    print(*checks, sep="\n", flush=True)

    bench = timer(interpreter, samples=2)

    shapes = CPU_SHAPES if interpreter else GPU_SHAPES
    splits = CPU_SPLITS if interpreter else SPLITS
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    for batch, heads, kv_heads, cache, dim, page in shapes:
        case = Case("bench", heads, kv_heads, page, dim, (cache,) * batch)
        p = make_inputs(case, device, torch.Generator().manual_seed(0))
        k, v = (t.contiguous() for t in gathered(p, case))
        q4 = p.q[:, :, None, :]
        out = torch.empty_like(p.q)

        def run(n=None):
            return solution.attention(p.q, p.k_pages, p.v_pages, p.block_table, p.lengths, out=out, num_splits=n)

        def base():
            return sdpa(q4, k, v, enable_gqa=True)

        reference = base()[:, :, 0, :].float()
        run()
        err = float((out.float() - reference).abs().max())
        gbytes = 2 * batch * kv_heads * cache * dim * 2 / 1e9
        timed = time_sdpa(bench, base, forced=False)  # the default dispatch alone
        row = {
            "batch": batch, "heads": heads, "kv_heads": kv_heads, "cache": cache, "head_dim": dim, "page_size": page,
            "default_splits": solution.split_count(batch, kv_heads, p.block_table.shape[1] * page, device), "block_n": solution.BLOCK_N, "max_abs_err_vs_sdpa": err,
            "sdpa_ms": timed.ms["default"], "sdpa_backend": timed.backend,
            "default_ms": bench(run), "split_ms": {},
        }
        for n in splits:
            row["split_ms"][n] = bench(lambda n=n: run(n))
        best_split(row, gbytes)
        rows.append(row)
        print(json.dumps(row), flush=True)

    decode_summary_head(args.json, gpu, header, checks, rows)
    print("| B×H/KVH×L×d (page) | SDPA gathered, enable_gqa ms (backend) | SDPA GB/s | solution ms (splits) | GB/s "
          "| SDPA/solution | best ms (splits) | GB/s | SDPA/best | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']}×{r['heads']}/{r['kv_heads']}×{r['cache']}×{r['head_dim']} ({r['page_size']}) "
              f"| {r['sdpa_ms']:.3f} ({r['sdpa_backend']}) | {gbs(r['sdpa_gbs'])} "
              f"| {r['default_ms']:.3f} ({r['default_splits']}) | {gbs(r['default_gbs'])} "
              f"| {r['sdpa_ms'] / r['default_ms']:.2f} "
              f"| {r['best_ms']:.3f} ({r['best_splits']}) | {gbs(r['best_gbs'])} | {r['sdpa_ms'] / r['best_ms']:.2f} "
              f"| {r['max_abs_err_vs_sdpa']:.1e} |")
    print()
    print("split count's effect (ms; programs = B×KVH×splits):")
    print("| shape | " + " | ".join(f"{n} split{'s' if n > 1 else ''}" for n in splits) + " |")
    print("|---|" + "---|" * len(splits))
    for r in rows:
        print(f"| {r['batch']}×{r['heads']}/{r['kv_heads']}×{r['cache']}×{r['head_dim']} | "
              + " | ".join(f"{r['split_ms'][n]:.3f}" for n in splits) + " |")
    if interpreter:
        print("(CPU interpreter: the milliseconds are relative only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
