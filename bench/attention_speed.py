"""Solution kernels vs torch's scaled_dot_product_attention, side by side, in one process.

    python bench/attention_speed.py            # GPU: N = 1k/4k/16k, d = 64/128, fp16
    python bench/attention_speed.py --quick    # fewer shapes
    TRITON_INTERPRET=1 python bench/attention_speed.py   # no GPU: tiny shapes, relative timings

For every shape it prints ms and TFLOP/s (4*B*H*N^2*d, halved for causal) of
each kernel, the ratio of its throughput to SDPA's (the backend SDPA's default
dispatch used is recorded, read from the profiler; forced FLASH_ATTENTION and
EFFICIENT_ATTENTION are timed beside it, "n/a" where one refuses), and the causal/full
speed-up next to the ideal 1/visited-fraction, where the visited fraction is
*counted* by running the kernel with its visit map switched on.  The last lines
are a short table; ``--json PATH`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = {
    "solution": ROOT / "solutions" / "01_causal_mask_solution.py",
    "fast": ROOT / "solutions" / "01_causal_mask_fast.py",
}
# batch*heads*seq stays at 256k tokens: every shape fills an H200 many waves deep
GPU_SHAPES = [(16, 16, 1024), (4, 16, 4096), (1, 16, 16384)]
CPU_SHAPES = [(1, 2, 256)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only N = 4k, d = 64 and 128")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated subset of: " + ", ".join(KERNELS))
    args = parser.parse_args()

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import load, timer, use_interpreter
    from sdpa_baselines import SDPA_VARIANTS, ms_cell, time_sdpa

    interpreter = use_interpreter()
    import triton

    device = "cpu" if interpreter else "cuda"
    modules = {name: load(KERNELS[name]) for name in args.kernels.split(",") if KERNELS[name].exists()}

    bench = timer(interpreter, samples=3, warmup=50, rep=300)

    shapes = CPU_SHAPES if interpreter else GPU_SHAPES
    dims = (64,) if interpreter else (64, 128)
    if args.quick and not interpreter:
        shapes = [(4, 16, 4096)]
    gpu = "CPU (Triton interpreter: timings relative only)" if interpreter else torch.cuda.get_device_name(0)
    print(f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}")

    rows = []
    for batch, heads, seq in shapes:
        for dim in dims:
            gen = torch.Generator(device=device).manual_seed(0)
            q, k, v = (torch.randn((batch, heads, seq, dim), device=device, dtype=torch.float16, generator=gen) for _ in range(3))
            flops_full = 4 * batch * heads * seq * seq * dim
            sdpa_fn = torch.nn.functional.scaled_dot_product_attention
            # SDPA's default dispatch, and FLASH_ATTENTION / EFFICIENT_ATTENTION forced: ms, or None (refused)
            timed = {c: time_sdpa(bench, lambda c=c: sdpa_fn(q, k, v, is_causal=c), backend=not c)
                     for c in (False, True)}  # the backend the default dispatch ran: recorded on full
            sdpa_all = {(variant, c): timed[c].ms[variant] for variant in SDPA_VARIANTS for c in (False, True)}
            sdpa = {c: sdpa_all[("default", c)] for c in (False, True)}
            backend = timed[False].backend
            reference = {c: sdpa_fn(q, k, v, is_causal=c).float() for c in (False, True)}
            for name, module in modules.items():
                out = torch.empty_like(q)
                times, errors = {}, {}
                for causal in (False, True):
                    module.attention(q, k, v, causal=causal, out=out)
                    errors[causal] = float((out.float() - reference[causal]).abs().max())
                    times[causal] = bench(lambda c=causal: module.attention(q, k, v, causal=c, out=out))
                n_m, n_n = triton.cdiv(seq, module.BLOCK_M), triton.cdiv(seq, module.BLOCK_N)
                visits = torch.zeros((batch * heads, n_m, n_n), dtype=torch.int32, device=device)
                module.attention(q, k, v, causal=True, out=out, visits=visits)
                visited = float((visits != 0).float().mean())
                row = {
                    "kernel": name, "batch": batch, "heads": heads, "seq": seq, "head_dim": dim,
                    "full_ms": times[False], "causal_ms": times[True],
                    "sdpa_full_ms": sdpa[False], "sdpa_causal_ms": sdpa[True], "sdpa_backend": backend,
                    **{f"sdpa_{variant}_{'causal' if c else 'full'}_ms": sdpa_all[(variant, c)]
                       for variant in SDPA_VARIANTS[1:] for c in (False, True)},
                    "full_tflops": flops_full / times[False] / 1e9,
                    "causal_tflops": flops_full / 2 / times[True] / 1e9,
                    "vs_sdpa_full": sdpa[False] / times[False],
                    "vs_sdpa_causal": sdpa[True] / times[True],
                    **{f"vs_sdpa_{variant}_{'causal' if c else 'full'}": (
                        None if sdpa_all[(variant, c)] is None else sdpa_all[(variant, c)] / times[c])
                       for variant in SDPA_VARIANTS[1:] for c in (False, True)},
                    "speedup": times[False] / times[True],
                    "visited_fraction": visited,
                    "ideal_speedup": 1 / visited,
                    "max_abs_err_full": errors[False], "max_abs_err_causal": errors[True],
                }
                row["speedup_of_ideal"] = row["speedup"] / row["ideal_speedup"]
                rows.append(row)
                print(json.dumps(row), flush=True)

    if args.json:
        args.json.write_text(json.dumps({"device": gpu, "torch": torch.__version__, "triton": triton.__version__, "rows": rows}, indent=1))
    print()
    print(f"{'kernel':<9}{'B×H×N×d':>18}{'full ms':>9}{'TF/s':>7}{'×sdpa':>7}{'causal ms':>10}{'TF/s':>7}{'×sdpa':>7}{'speedup':>8}{'ideal':>7}{'of ideal':>9}{'err':>9}")
    for r in rows:
        shape = f"{r['batch']}×{r['heads']}×{r['seq']}×{r['head_dim']}"
        print(
            f"{r['kernel']:<9}{shape:>18}{r['full_ms']:>9.3f}{r['full_tflops']:>7.0f}{r['vs_sdpa_full']:>7.2f}"
            f"{r['causal_ms']:>10.3f}{r['causal_tflops']:>7.0f}{r['vs_sdpa_causal']:>7.2f}{r['speedup']:>8.2f}"
            f"{r['ideal_speedup']:>7.2f}{r['speedup_of_ideal']:>9.2f}{max(r['max_abs_err_full'], r['max_abs_err_causal']):>9.1e}"
        )
    for (b, h, n) in shapes:
        for d in dims:
            s = next(r for r in rows if (r["batch"], r["heads"], r["seq"], r["head_dim"]) == (b, h, n, d))
            print(f"sdpa     {b}×{h}×{n}×{d}: default ({s['sdpa_backend']}) full {s['sdpa_full_ms']:.3f} ms, "
                  f"causal {s['sdpa_causal_ms']:.3f} ms; forced FLASH_ATTENTION full "
                  f"{ms_cell(s['sdpa_flash_full_ms'])} ms, causal {ms_cell(s['sdpa_flash_causal_ms'])} ms; "
                  f"forced EFFICIENT_ATTENTION full {ms_cell(s['sdpa_efficient_full_ms'])} ms, "
                  f"causal {ms_cell(s['sdpa_efficient_causal_ms'])} ms")
    print()
    print("the kernels against each SDPA backend (×: SDPA's time over the kernel's; n/a: the backend refused)")
    print(f"{'kernel':<9}{'B×H×N×d':>18}{'×default':>10}{'×flash':>8}{'×effic.':>9}"
          f"{'causal ×default':>17}{'×flash':>8}{'×effic.':>9}")
    for r in rows:
        shape = f"{r['batch']}×{r['heads']}×{r['seq']}×{r['head_dim']}"
        cells = [r["vs_sdpa_full"], r["vs_sdpa_flash_full"], r["vs_sdpa_efficient_full"],
                 r["vs_sdpa_causal"], r["vs_sdpa_flash_causal"], r["vs_sdpa_efficient_causal"]]
        widths = (10, 8, 9, 17, 8, 9)
        print(f"{r['kernel']:<9}{shape:>18}" + "".join(f"{ms_cell(c, 2):>{w}}" for c, w in zip(cells, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
