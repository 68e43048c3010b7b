"""Drill 04's solution backward vs torch's SDPA backward, side by side, in one process.

    python bench/backward_speed.py            # GPU: N = 1k/4k, d = 64/128, fp16, full and causal
    python bench/backward_speed.py --quick    # no GPU needed: the interpreter at a tiny shape

For every shape and mode it times the solution's ``attention_backward`` (the
three kernels: D, dK/dV, dQ; O and lse come from its forward, outside the timed
call) and torch's SDPA backward (``torch.autograd.grad`` of SDPA's output with
the same dO), reports ms, TFLOP/s (FlashAttention-2's count, 5 matmuls of N^2 d:
10*B*H*N^2*d flops, halved for causal; the solution itself runs 7, dQ in its own
pass) and the largest difference of the solution's dQ, dK, dV from SDPA's.  SDPA
is timed three ways: its default dispatch (the backend it used is recorded, from
the profiler: on an H200 with torch 2.11 it was cuDNN, issue 21), forced
FLASH_ATTENTION (FlashAttention-2) and forced EFFICIENT_ATTENTION; "n/a" where a
backend refuses the shape.  Then it runs the tutor's own check (through the real worker) on the
shipped drill, which must FAIL, and on the solution, which must PASS, one line
each.  The last lines are a markdown table with the GPU and the versions.
Interpreter timings are relative only.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SOLUTION = ROOT / "solutions" / "04_flash_backward_solution.py"
SHIPPED = ROOT / "drills" / "04_flash_backward.py"
# batch*heads*seq = 256k tokens: every shape fills an H200 many waves deep
GPU_SHAPES = [(16, 16, 1024), (4, 16, 4096)]
CPU_SHAPES = [(1, 2, 128)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CPU interpreter at a tiny shape")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    parser.add_argument("--no-check", action="store_true", help="skip the harness lines")
    args = parser.parse_args()

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import load, timer, use_interpreter
    from sdpa_baselines import SDPA_VARIANTS, ms_cell, sdpa_backend, sdpa_try, sdpa_with

    interpreter = use_interpreter(args.quick)
    import triton

    device = "cpu" if interpreter else "cuda"
    module = load(SOLUTION)

    bench = timer(interpreter, samples=3, warmup=50, rep=300)

    shapes = CPU_SHAPES if interpreter else GPU_SHAPES
    dims = (64,) if interpreter else (64, 128)
    gpu = "CPU (Triton interpreter: timings relative only)" if interpreter else torch.cuda.get_device_name(0)
    header = f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}"
    print(header, flush=True)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def sdpa_backward_ms(variant: str, causal: bool, q, k, v, do):
        """(ms, grads, backend) of SDPA's backward under ``variant``; (None, None, "refused") if it refuses."""
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        out = sdpa_try(sdpa_with(variant, lambda: sdpa(*leaves, is_causal=causal)))
        if out is None:
            return None, None, "refused"
        grads = sdpa_try(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True))
        if grads is None:
            return None, None, "refused (backward)"
        backend = sdpa_backend(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True))
        return bench(lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)), grads, backend

    rows = []
    for batch, heads, seq in shapes:
        for dim in dims:
            gen = torch.Generator(device=device).manual_seed(0)
            q, k, v, do = (torch.randn((batch, heads, seq, dim), device=device, dtype=torch.float16, generator=gen)
                           for _ in range(4))
            flops = 10 * batch * heads * seq * seq * dim
            for causal in (False, True):
                sdpa_runs = {variant: sdpa_backward_ms(variant, causal, q, k, v, do) for variant in SDPA_VARIANTS}
                torch_ms, torch_grads, backend = sdpa_runs["default"]
                o, lse = module.attention_forward(q, k, v, causal=causal)
                grads = [torch.empty_like(q) for _ in range(3)]
                module.attention_backward(q, k, v, o, lse, do, causal=causal, dq=grads[0], dk=grads[1], dv=grads[2])
                err = max(float((a.float() - b.float()).abs().max()) for a, b in zip(grads, torch_grads, strict=True))
                ms = bench(lambda causal=causal, o=o, lse=lse: module.attention_backward(
                    q, k, v, o, lse, do, causal=causal, dq=grads[0], dk=grads[1], dv=grads[2]))
                work = flops / (2 if causal else 1)
                row = {
                    "batch": batch, "heads": heads, "seq": seq, "head_dim": dim, "causal": causal,
                    "solution_ms": ms, "sdpa_ms": torch_ms,
                    "solution_tflops": work / ms / 1e9, "sdpa_tflops": work / torch_ms / 1e9,
                    "sdpa_over_solution": torch_ms / ms, "max_abs_diff": err, "sdpa_backend": backend,
                    **{f"sdpa_{variant}_ms": sdpa_runs[variant][0] for variant in SDPA_VARIANTS[1:]},
                    **{f"sdpa_{variant}_backend": sdpa_runs[variant][2] for variant in SDPA_VARIANTS[1:]},
                    **{f"sdpa_{variant}_over_solution": None if sdpa_runs[variant][0] is None
                       else sdpa_runs[variant][0] / ms for variant in SDPA_VARIANTS[1:]},
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
                del sdpa_runs, torch_grads

    checks = []
    if not args.no_check:
        from tutor.loop.runner import CheckRunner

        with CheckRunner(device="cpu" if interpreter else "auto", warm=True) as runner:
            for path, want in ((SHIPPED, False), (SOLUTION, True)):
                runner.warm_up()
                start = time.perf_counter()
                result = runner.check("04", path, timing=False)
                wall = time.perf_counter() - start
                verdict = "ERROR" if result.error else ("PASSED" if result.passed else "FAILED")
                ok = result.error is None and result.passed == want
                line = (f"harness: {path.relative_to(ROOT)}: {verdict} (expected {'PASSED' if want else 'FAILED'}"
                        f"{'' if ok else ' - MISMATCH'}); max abs err {result.max_abs_err}; "
                        f"codes {','.join(result.codes) or '-'}; on {result.device.label if result.device else '?'}; {wall:.1f} s")
                checks.append({"file": str(path.relative_to(ROOT)), "verdict": verdict, "ok": ok, "codes": result.codes,
                               "max_abs_err": result.max_abs_err, "wall_s": wall})
                print(line, flush=True)

    if args.json:
        args.json.write_text(json.dumps({"device": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                         "rows": rows, "checks": checks}, indent=1))
    print()
    print(header)
    print()
    print("| B×H×N×d | mode | solution bwd ms | TFLOP/s | SDPA bwd ms (backend) | TFLOP/s | SDPA/solution time "
          "| forced FLASH_ATTENTION ms | FA/solution | forced EFFICIENT_ATTENTION ms | EFF/solution | max |Δ| vs SDPA |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        shape = f"{r['batch']}×{r['heads']}×{r['seq']}×{r['head_dim']}"
        print(f"| {shape} | {'causal' if r['causal'] else 'full'} | {r['solution_ms']:.3f} | {r['solution_tflops']:.1f} | "
              f"{r['sdpa_ms']:.3f} ({r['sdpa_backend']}) | {r['sdpa_tflops']:.1f} | {r['sdpa_over_solution']:.2f} | "
              f"{ms_cell(r['sdpa_flash_ms'])} | {ms_cell(r['sdpa_flash_over_solution'], 2)} | "
              f"{ms_cell(r['sdpa_efficient_ms'])} | {ms_cell(r['sdpa_efficient_over_solution'], 2)} | "
              f"{r['max_abs_diff']:.1e} |")
    return 0 if all(c["ok"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
