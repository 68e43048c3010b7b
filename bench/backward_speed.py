"""Drill 04's backward kernels vs torch's SDPA backward, side by side, in one process.

    python bench/backward_speed.py            # GPU: N = 1k/4k/16k, d = 64/128, fp16, full and causal
    python bench/backward_speed.py --seqs 4096,16384 --all-configs   # issue 26's shapes, every config checked
    python bench/backward_speed.py --kernels fast   # the fast file alone (both dQ modes)
    python bench/backward_speed.py --quick    # no GPU needed: the interpreter at a tiny shape

``--kernels`` picks what is timed beside SDPA (default ``clear,fast``): ``clear`` is
the clear solution, ``fast`` the fast file (solutions/04_flash_backward_fast.py) in
both of its dQ modes, ``fast-recompute`` / ``fast-atomic`` one of them.  For every
shape and mode it times each kernel's ``attention_backward`` (D, dK/dV, dQ; O and
lse come from that file's forward, outside the timed call) and torch's SDPA backward
(``torch.autograd.grad`` of SDPA's output with the same dO), and reports ms, TFLOP/s
(FlashAttention-2's count, 5 matmuls of N^2 d: 10*B*H*N^2*d flops, halved for causal,
whatever a kernel runs: the recompute designs run 7), SDPA's time over the kernel's
(issue 26's target for the fast file: >= 0.75 against cuDNN at 4k and 16k) and the
largest difference of the kernel's dQ, dK, dV from SDPA's.  That difference is taken
from one more call *after* the timing, so the fast file's autotuned configuration
(recorded in the row: tiles, warps, stages of each pass) is the one that was timed;
beyond 0.02 + 1 % of the gradients' largest value (the harness's rule for a timed
launch) the row says WRONG and the script exits 1.  ``--all-configs`` also runs every
configuration of the fast file's autotune lists once per shape (untimed) against SDPA.
The atomic dQ mode is not deterministic: each fast row says whether two calls gave
bit-identical dQ.  SDPA is timed three ways: its default dispatch (the backend it used
is recorded, from the profiler: on an H200 with torch 2.11 it was cuDNN, issue 21),
forced FLASH_ATTENTION (FlashAttention-2) and forced EFFICIENT_ATTENTION; "n/a" where a
backend refuses the shape.  Then it runs the tutor's own check (through the real
worker) on the shipped drill, which must FAIL, and on each kernel file, which must PASS
(the fast file once per dQ mode, with its timed launches on a GPU: the harness compares
the autotuned timed launch with float64 once), one line each.  The last lines are a
markdown table with the GPU and the versions.  Interpreter timings are relative only.
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
FAST = ROOT / "solutions" / "04_flash_backward_fast.py"
SHIPPED = ROOT / "drills" / "04_flash_backward.py"
# batch*heads*seq = 256k tokens: every shape fills an H200 many waves deep
GPU_SHAPES = [(16, 16, 1024), (4, 16, 4096), (1, 16, 16384)]
CPU_SHAPES = [(1, 2, 128)]
KERNELS = ("clear", "fast-recompute", "fast-atomic")  # what --kernels can name ("fast": both fast modes)
TOLERANCE = 0.02  # drill 04's; a timed launch may also be off by 1 % of the gradients' largest value


def kernels_of(text: str) -> list[str]:
    """``--kernels``' value as a list of KERNELS: "fast" is both dQ modes of the fast file."""
    chosen: list[str] = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        names = ["fast-recompute", "fast-atomic"] if word == "fast" else [word]
        for name in names:
            if name not in KERNELS:
                raise SystemExit(f"--kernels: unknown kernel {name!r} (choose from clear, fast, {', '.join(KERNELS[1:])})")
            if name not in chosen:
                chosen.append(name)
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the CPU interpreter at a tiny shape")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    parser.add_argument("--no-check", action="store_true", help="skip the harness lines")
    parser.add_argument("--kernels", default="clear,fast",
                        help="comma-separated: clear, fast (= fast-recompute,fast-atomic), fast-recompute, fast-atomic")
    parser.add_argument("--seqs", help="comma-separated sequence lengths: only the GPU shapes of these (1024,4096,16384)")
    parser.add_argument("--all-configs", action="store_true",
                        help="also run every autotune configuration of the fast file once per shape against SDPA")
    parser.add_argument("--fast-file", type=Path, default=FAST,
                        help="another file in the fast file's form (a copy with other autotune lists, say)")
    args = parser.parse_args()
    kernels = kernels_of(args.kernels)

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import load, timer, use_interpreter
    from sdpa_baselines import SDPA_VARIANTS, ms_cell, sdpa_backend, sdpa_try, sdpa_with

    interpreter = use_interpreter(args.quick)
    import triton

    device = "cpu" if interpreter else "cuda"
    modules = {}
    if "clear" in kernels:
        modules["clear"] = load(SOLUTION)
    if any(name.startswith("fast") for name in kernels):
        modules["fast"] = load(args.fast_file)

    bench = timer(interpreter, samples=3, warmup=50, rep=300)

    shapes = CPU_SHAPES if interpreter else GPU_SHAPES
    if args.seqs and not interpreter:
        wanted = {int(x) for x in args.seqs.split(",")}
        shapes = [shape for shape in shapes if shape[2] in wanted]
        if not shapes:
            raise SystemExit(f"--seqs: none of {sorted(wanted)} is a GPU shape's length ({[s[2] for s in GPU_SHAPES]})")
    dims = (64,) if interpreter else (64, 128)
    gpu = "CPU (Triton interpreter: timings relative only)" if interpreter else torch.cuda.get_device_name(0)
    header = f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}"
    print(header, flush=True)
    print(f"kernels: {', '.join(kernels)}", flush=True)
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

    def compared(grads, want) -> tuple[float, bool]:
        """(largest |difference| of dQ, dK, dV from SDPA's, within the timed-launch rule?)"""
        err = max(float((a.float() - b.float()).abs().nan_to_num(nan=float("inf")).max())
                  for a, b in zip(grads, want, strict=True))
        allowed = TOLERANCE + 0.01 * max(float(b.float().abs().max()) for b in want)
        return err, err <= allowed

    def run_kernel(name: str, causal: bool, q, k, v, do, want) -> dict:
        """One kernel at one shape and mode: timed, then compared with SDPA once (the
        configuration that was timed), and for the fast file its chosen configs and
        whether two calls agree bit for bit."""
        module = modules["clear" if name == "clear" else "fast"]
        mode = name.removeprefix("fast-") if name != "clear" else None
        o, lse = module.attention_forward(q, k, v, causal=causal)
        grads = [torch.empty_like(q) for _ in range(3)]

        def call(out=grads):
            if mode:  # attention_backward with the dQ mode given (its configs: the autotuned ones)
                return module.backward_with(q, k, v, o, lse, do, causal, dq=out[0], dk=out[1], dv=out[2], mode=mode)
            return module.attention_backward(q, k, v, o, lse, do, causal=causal, dq=out[0], dk=out[1], dv=out[2])

        call()  # the fast file autotunes here, on its first call at this key
        ms = bench(call)
        call()  # the timed configuration, once more, compared with SDPA
        err, ok = compared(grads, want)
        result = {"ms": ms, "max_abs_diff": err, "ok": ok}
        if mode:
            again = [torch.empty_like(q) for _ in range(3)]
            call(again)
            result["deterministic"] = all(torch.equal(a, b) for a, b in zip(grads, again, strict=True))
            chosen = module.chosen_configs(q.shape[-1])
            result["configs"] = chosen if mode == "recompute" else {"dkdv": chosen["dkdv"], "dq": "atomic"}
        return result

    def every_config(mode: str, causal: bool, q, k, v, do, want) -> list[dict]:
        """Each autotune configuration of the fast file, once, untimed, against SDPA
        (dK/dV configs paired with dQ configs in order, the shorter list's first repeating)."""
        module = modules["fast"]
        kv_list, q_list = module.pass_configs(q.shape[-1])
        if not kv_list:
            return []
        o, lse = module.attention_forward(q, k, v, causal=causal)
        if mode == "atomic":
            pairs = [(c, None) for c in kv_list]
        else:
            n = max(len(kv_list), len(q_list))
            pairs = [(kv_list[i] if i < len(kv_list) else kv_list[0], q_list[i] if i < len(q_list) else q_list[0])
                     for i in range(n)]
        found = []
        for kv_cfg, q_cfg in pairs:
            said = f"  config check: fast-{mode} {'causal' if causal else 'full'} {tuple(q.shape)} dkdv {kv_cfg} " \
                   f"dq {q_cfg or 'atomic'}:"
            one = {"dkdv": list(kv_cfg), "dq": list(q_cfg) if q_cfg else "atomic"}
            try:
                grads = module.backward_with(q, k, v, o, lse, do, causal, dkdv_config=kv_cfg, dq_config=q_cfg,
                                             mode=mode)
            except Exception as exc:  # noqa: BLE001 - say what failed, then go on with the next config
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
                # the autotuner skips a config that fails these ways (too much shared memory, ...)
                skipped = type(exc).__name__ in ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")
                found.append({**one, "max_abs_diff": None, "ok": skipped, "could_not_run": why})
                print(f"{said} could not run ({why}){'; the autotuner skips it too' if skipped else ' - WRONG'}",
                      flush=True)
                continue
            err, ok = compared(grads, want)
            found.append({**one, "max_abs_diff": err, "ok": ok})
            print(f"{said} max |diff| vs SDPA {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
        return found

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
                work = flops / (2 if causal else 1)
                row = {
                    "batch": batch, "heads": heads, "seq": seq, "head_dim": dim, "causal": causal,
                    "sdpa_ms": torch_ms, "sdpa_tflops": work / torch_ms / 1e9, "sdpa_backend": backend,
                    **{f"sdpa_{variant}_ms": sdpa_runs[variant][0] for variant in SDPA_VARIANTS[1:]},
                    **{f"sdpa_{variant}_backend": sdpa_runs[variant][2] for variant in SDPA_VARIANTS[1:]},
                }
                for name in kernels:
                    got = run_kernel(name, causal, q, k, v, do, torch_grads)
                    # the clear solution keeps the keys it always had ("solution_..."); fast-x: "fast_x_..."
                    key = "solution" if name == "clear" else name.replace("-", "_")
                    row.update({
                        f"{key}_ms": got["ms"], f"{key}_tflops": work / got["ms"] / 1e9,
                        f"sdpa_over_{key}": torch_ms / got["ms"],
                        **{f"sdpa_{variant}_over_{key}": None if sdpa_runs[variant][0] is None
                           else sdpa_runs[variant][0] / got["ms"] for variant in SDPA_VARIANTS[1:]},
                        f"{key}_max_abs_diff" if key != "solution" else "max_abs_diff": got["max_abs_diff"],
                        f"{key}_ok": got["ok"],
                    })
                    if "configs" in got:
                        row[f"{key}_configs"] = got["configs"]
                        row[f"{key}_deterministic"] = got["deterministic"]
                    if args.all_configs and name != "clear":
                        row[f"{key}_config_checks"] = every_config(name.removeprefix("fast-"), causal, q, k, v, do,
                                                                   torch_grads)
                rows.append(row)
                print(json.dumps(row), flush=True)
                del sdpa_runs, torch_grads

    checks = []
    if not args.no_check:
        import os

        from tutor.loop.runner import CheckRunner

        files = [(SHIPPED, False, None, False)]
        if "clear" in kernels:
            files.append((SOLUTION, True, None, False))
        files += [(FAST, True, name.removeprefix("fast-"), not interpreter) for name in kernels if name != "clear"]
        for path, want, mode, timed in files:
            # each file in a fresh worker, which inherits the dQ mode through the environment
            saved = os.environ.get("FLASHTUTOR_DQ_MODE")
            if mode:
                os.environ["FLASHTUTOR_DQ_MODE"] = mode
            try:
                with CheckRunner(device="cpu" if interpreter else "auto", warm=True) as runner:
                    runner.warm_up()
                    start = time.perf_counter()
                    result = runner.check("04", path, timing=timed)
                    wall = time.perf_counter() - start
            finally:
                if saved is None:
                    os.environ.pop("FLASHTUTOR_DQ_MODE", None)
                else:
                    os.environ["FLASHTUTOR_DQ_MODE"] = saved
            verdict = "ERROR" if result.error else ("PASSED" if result.passed else "FAILED")
            performance = result.performance
            timed_ok = not timed or performance.status == "done"
            ok = result.error is None and result.passed == want and timed_ok
            label = f"{path.relative_to(ROOT)}" + (f" (dQ {mode})" if mode else "")
            timing = f"; timed launches: {performance.status} {performance.reason}".rstrip() if timed else ""
            line = (f"harness: {label}: {verdict} (expected {'PASSED' if want else 'FAILED'}"
                    f"{'' if ok else ' - MISMATCH'}); max abs err {result.max_abs_err}; "
                    f"codes {','.join(result.codes) or '-'}{timing}; "
                    f"on {result.device.label if result.device else '?'}; {wall:.1f} s")
            checks.append({"file": str(path.relative_to(ROOT)), "dq_mode": mode, "verdict": verdict, "ok": ok,
                           "codes": result.codes, "max_abs_err": result.max_abs_err, "wall_s": wall,
                           "timed_launches": f"{performance.status} {performance.reason}".strip() if timed else None})
            print(line, flush=True)

    if args.json:
        args.json.write_text(json.dumps({"device": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                         "kernels": kernels, "rows": rows, "checks": checks}, indent=1))
    print()
    print(header)
    print()
    print("SDPA/kernel: SDPA's time (its default dispatch, backend in brackets) over the kernel's; FA, EFF: forced "
          "FLASH_ATTENTION, EFFICIENT_ATTENTION over the kernel's. TFLOP/s counts 5 matmuls (FlashAttention-2's).")
    print()
    print("| B×H×N×d | mode | kernel | bwd ms | TFLOP/s | SDPA/kernel | FA/kernel | EFF/kernel "
          "| max |Δ| vs SDPA | configs (dK/dV; dQ) | same dQ twice |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    wrong = False
    for r in rows:
        shape = f"{r['batch']}×{r['heads']}×{r['seq']}×{r['head_dim']}"
        mode = "causal" if r["causal"] else "full"
        print(f"| {shape} | {mode} | SDPA ({r['sdpa_backend'].split(' [')[0]}) | {r['sdpa_ms']:.3f} | "
              f"{r['sdpa_tflops']:.1f} | 1.00 | {ms_cell(r['sdpa_flash_ms'])} ms | {ms_cell(r['sdpa_efficient_ms'])} ms "
              f"| - | - | - |")
        for name in kernels:
            key = "solution" if name == "clear" else name.replace("-", "_")
            diff = r["max_abs_diff" if key == "solution" else f"{key}_max_abs_diff"]
            wrong |= not r[f"{key}_ok"]
            configs = r.get(f"{key}_configs")
            config_cell = "fixed 64×64" if configs is None else f"{configs['dkdv']}; {configs['dq']}"
            same = r.get(f"{key}_deterministic")
            print(f"| {shape} | {mode} | {name} | {r[f'{key}_ms']:.3f} | {r[f'{key}_tflops']:.1f} | "
                  f"{r[f'sdpa_over_{key}']:.2f} | {ms_cell(r[f'sdpa_flash_over_{key}'], 2)} | "
                  f"{ms_cell(r[f'sdpa_efficient_over_{key}'], 2)} | {diff:.1e}{'' if r[f'{key}_ok'] else ' WRONG'} | "
                  f"{config_cell} | {'-' if same is None else ('yes' if same else 'no')} |")
            for check in r.get(f"{key}_config_checks", []):
                wrong |= not check["ok"]
    return 0 if all(c["ok"] for c in checks) and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
