"""Drill 01's fast kernel with Triton's warp specialisation switched on, against itself and SDPA (issue 26).

    python3 bench/warp_specialize.py [--json PATH]      # GPU only

The fast solution's K/V loop is ``tl.range(lo, hi, BLOCK_N)``.  This script builds a copy of the
file whose loop is ``tl.range(lo, hi, BLOCK_N, warp_specialize=True)`` (Triton's automatic warp
specialisation: producer warps issue the loads, consumer warps the dots and the softmax) and
launches both, config by config (every entry of the fast file's ``_CONFIGS`` for the head dim,
no autotuner: a config that fails to compile is reported with its error, not skipped), at
N = 4k and 16k, d = 64 and 128, full and causal.  Every launch's output is compared with SDPA's
once before it is timed.  Printed: per shape, the best config of each form, its ms and TFLOP/s,
its ratio to SDPA's default dispatch (backend read from the profiler) and to forced
FLASH_ATTENTION; then which configs did not compile and why (first line of the error).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAST = ROOT / "solutions" / "01_causal_mask_fast.py"
LOOP = "tl.range(lo, hi, BLOCK_N)"
SHAPES = [(4, 16, 4096), (1, 16, 16384)]


def specialised_copy(folder: Path) -> Path:
    """The fast file with its K/V loop warp-specialised, written into ``folder``."""
    source = FAST.read_text()
    assert source.count(LOOP) == 1, f"expected one {LOOP!r} in {FAST}"
    path = folder / "fast_warp_specialized.py"
    path.write_text(source.replace(LOOP, LOOP[:-1] + ", warp_specialize=True)"))
    return path


def launch(module, q, k, v, out, causal, config):
    """One launch of ``module``'s kernel with ``config`` = (BLOCK_M, BLOCK_N, warps, stages)."""
    import triton

    block_m, block_n, warps, stages = config
    batch, heads, seq, dim = q.shape
    tma = module.use_tma()
    qa, ka, va = q, k, v
    if tma:
        rows = batch * heads * seq
        qa, ka, va = (
            module.TensorDescriptor.from_tensor(t.view(rows, dim), [block, dim])
            for t, block in ((q, block_m), (k, block_n), (v, block_n))
        )
    grid = (triton.cdiv(seq, block_m), batch * heads)
    module._attn_fwd[grid](qa, ka, va, out, out, dim**-0.5, seq, HEAD_DIM=dim, BLOCK_M=block_m, BLOCK_N=block_n,
                           CAUSAL=causal, RECORD_VISITS=False, TMA=tma, num_warps=warps, num_stages=stages)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("warp specialisation is a GPU compile option: this script needs a GPU")
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import triton
    import triton.language as tl
    from bench_common import load, timer
    from sdpa_baselines import sdpa_backend, sdpa_try, sdpa_with

    bench = timer(False, warmup=50, rep=300)
    folder = Path(tempfile.mkdtemp(prefix="ws-"))
    forms = {"fast": load(FAST), "fast+ws": load(specialised_copy(folder))}
    gluon = "yes" if _has("triton.experimental.gluon") else "no"
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; triton {triton.__version__}; "
          f"python {platform.python_version()}; TMA {forms['fast'].use_tma()}; triton.experimental.gluon: {gluon}; "
          f"tl.range takes warp_specialize: {_takes(tl.range, 'warp_specialize')}")
    rows, failures = [], []
    for batch, heads, seq in SHAPES:
        for dim in (64, 128):
            for causal in (False, True):
                torch.manual_seed(0)
                q, k, v = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
                call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                reference = call()
                flops = 4 * batch * heads * seq * seq * dim / (2 if causal else 1)
                row = {"shape": f"{batch}x{heads}x{seq}x{dim}", "mode": "causal" if causal else "full",
                       "sdpa_ms": bench(call), "sdpa_backend": sdpa_backend(call)}
                forced = sdpa_with("flash", call)
                row["fa2_ms"] = bench(forced) if sdpa_try(forced) is not None else None
                for name, module in forms.items():
                    best = None
                    for config in module._CONFIGS[dim]:
                        out = torch.empty_like(q)
                        try:
                            launch(module, q, k, v, out, causal, config)
                            torch.cuda.synchronize()
                        except Exception as error:  # noqa: BLE001 - whatever stops a config is reported, not raised
                            failures.append({"form": name, "dim": dim, "causal": causal, "config": config,
                                             "error": f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"})
                            continue
                        err = (out.float() - reference.float()).abs().max().item()
                        if err > 1e-2:
                            failures.append({"form": name, "dim": dim, "causal": causal, "config": config,
                                             "error": f"wrong result: max |err| {err:.2e}"})
                            continue
                        ms = bench(lambda: launch(module, q, k, v, out, causal, config))
                        if best is None or ms < best[0]:
                            best = (ms, config, err)
                    row[name] = None if best is None else {"ms": best[0], "config": best[1], "max_err": best[2],
                                                           "tflops": flops / best[0] / 1e9}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.json:
                    args.json.write_text(json.dumps({"rows": rows, "failures": failures}, indent=1))
    seen = set()
    for failure in failures:
        key = (failure["form"], failure["config"], failure["error"][:60])
        if key not in seen:
            seen.add(key)
            print(f"did not run: {failure['form']} d={failure['dim']} {failure['config']}: {failure['error']}")
    print("\n| B×H×N×d | mode | SDPA ms (backend) | FA2 ms | fast ms (config) | ×SDPA | fast+ws ms (config) | ×SDPA | ws/fast |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = []
        for name in forms:
            best = row[name]
            cells += ["did not run", "-"] if best is None else [
                f"{best['ms']:.3f} ({'x'.join(map(str, best['config']))})", f"{row['sdpa_ms'] / best['ms']:.2f}"]
        ratio = (f"{row['fast']['ms'] / row['fast+ws']['ms']:.2f}" if row["fast"] and row["fast+ws"] else "-")
        fa2 = f"{row['fa2_ms']:.3f}" if row["fa2_ms"] else "n/a"
        print(f"| {row['shape']} | {row['mode']} | {row['sdpa_ms']:.3f} ({row['sdpa_backend']}) | {fa2} | "
              + " | ".join(cells) + f" | {ratio} |")
    return 0


def _takes(fn, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _has(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


if __name__ == "__main__":
    sys.exit(main())
