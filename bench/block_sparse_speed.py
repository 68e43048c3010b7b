"""Drill 09's solution vs torch's flex_attention and dense SDPA: block-sparse attention
with tanh soft-capping, one process.

    python bench/block_sparse_speed.py            # GPU: N = 4k/16k, causal/window/random masks, d = 64/128
    python bench/block_sparse_speed.py --quick    # CPU interpreter (or a GPU): one tiny shape

For every shape (16 heads, fp16, softcap 30) and mask it times, with
``triton.testing.do_bench`` (median):

* ``solution``: solutions/09_block_sparse_solution.py at its own BLOCK_M x BLOCK_N,
  and again at 128 x 64 (``solution@128x64``: the module's block sizes set before the
  launch, the block mask built for them);
* ``every-masked``: the mistakes file's ``every_block_masked`` entry (the element mask
  loaded on full blocks too): what the ``full-blocks-masked`` finding costs;
* ``flex``: ``torch.compile(flex_attention)`` with the same mask (``create_block_mask``
  of a mask_mod reading the same dense mask, built untimed) and the same softcap as a
  ``score_mod``; skipped, with the reason printed, when it fails;
* ``sdpa``: dense ``scaled_dot_product_attention`` with the mask as a dense boolean
  (no softcap: SDPA has none), its backend recorded from the profiler.

Every block mask is built outside the timing.  Each output is compared with the
solution's (max abs difference).  The last lines are a markdown table with the GPU,
torch and triton versions, and the solution-to-flex ratio the drill targets (>= 0.9x
flex's speed, i.e. solution ms <= flex ms / 0.9).  On the CPU the times are relative only.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "09_block_sparse_solution.py"
HEADS, SOFTCAP = 16, 30.0
GPU_SHAPES = [(b, n, d, p) for n, b in ((4096, 4), (16384, 1)) for d in (64, 128) for p in ("causal", "window", "random")]
QUICK_SHAPES = [(1, 128, 32, "causal")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny shape (what the CPU interpreter can run)")
    args = parser.parse_args()

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import load, load_flex, timer, use_interpreter
    from sdpa_baselines import time_sdpa

    interpreter = use_interpreter()
    if interpreter:
        args.quick = True
    import triton

    sys.path.insert(0, str(ROOT))
    from tutor.authoring import student_kernels
    from tutor.catalog import get_drill
    from tutor.harness.problems import block_sparse as bs

    device = "cpu" if interpreter else "cuda"
    solution = load(SOLUTION)
    drill = get_drill("09")
    masked_entry = next(m for m in student_kernels.load(drill) if m.name == "every_block_masked")
    tmp = Path(tempfile.mkdtemp()) / "every_block_masked.py"
    tmp.write_text(masked_entry.text(drill), encoding="utf-8")
    every_masked = load(tmp)
    heads = HEADS if not interpreter else 2

    bench = timer(interpreter)
    flex_attention, create_block_mask, flex_reason = load_flex(interpreter, cache_size_limit=64)

    gpu = "CPU (Triton interpreter: relative only)" if interpreter else torch.cuda.get_device_name()
    print(f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}")
    rows = []
    gen = torch.Generator().manual_seed(0)

    def measure(batch: int, seq: int, dim: int, pattern: str):
        case = bs.Case("bench", batch, heads, seq, dim, pattern, SOFTCAP, window=seq // 4)
        q, k, v = (torch.randn(batch, heads, seq, dim, generator=gen).to(device, torch.float16) for _ in range(3))
        dense = bs.element_mask(case, gen, 128, 128)  # the random pattern drawn on 128-blocks
        out = torch.empty_like(q)
        times, diffs, notes = {}, {}, []
        bm = bs.build_block_mask(dense, solution.BLOCK_M, solution.BLOCK_N, device)
        listed = float((bm.kinds() > 0).float().mean())
        times["solution"] = bench(lambda: solution.attention(q, k, v, bm, SOFTCAP, out=out))
        ref = out.clone()
        own = solution.BLOCK_M, solution.BLOCK_N
        if not interpreter:
            solution.BLOCK_M, solution.BLOCK_N = 128, 64
            bm2 = bs.build_block_mask(dense, 128, 64, device)
            out2 = torch.empty_like(q)
            try:
                times["solution@128x64"] = bench(lambda: solution.attention(q, k, v, bm2, SOFTCAP, out=out2))
                diffs["solution@128x64"] = float((out2.float() - ref.float()).abs().max())
            except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory at d=128
                notes.append(f"solution@128x64 skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
            solution.BLOCK_M, solution.BLOCK_N = own
        out3 = torch.empty_like(q)
        times["every-masked"] = bench(lambda: every_masked.attention(q, k, v, bm, SOFTCAP, out=out3))
        diffs["every-masked"] = float((out3.float() - ref.float()).abs().max())
        if flex_attention is not None:
            try:
                dense_dev = dense.to(device)

                def mask_mod(b, h, q_idx, kv_idx):
                    return dense_dev[q_idx, kv_idx]

                def softcap_mod(score, b, h, q_idx, kv_idx):
                    return SOFTCAP * torch.tanh(score / SOFTCAP)

                block_mask = create_block_mask(mask_mod, None, None, seq, seq, device=device)

                def flex() -> torch.Tensor:
                    return flex_attention(q, k, v, score_mod=softcap_mod, block_mask=block_mask)

                diffs["flex"] = float((flex().float() - ref.float()).abs().max())
                times["flex"] = bench(flex)
            except Exception as exc:  # noqa: BLE001 - say why, keep going
                notes.append(f"flex_attention skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        else:
            notes.append(f"flex_attention skipped: {flex_reason or 'not available'}")
        backend = "-"
        try:
            mask = dense.to(device)

            def sdpa() -> torch.Tensor:
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

            timed = time_sdpa(bench, sdpa, forced=False)  # the default dispatch alone
            times["sdpa"], backend = timed.ms["default"], timed.backend
        except Exception as exc:  # noqa: BLE001
            notes.append(f"sdpa skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        shape = f"B={batch} N={seq} d={dim} {pattern}"
        print(f"{shape}: {listed:.3f} of the blocks listed; "
              + "; ".join(f"{n} {ms:.3f} ms" + (f" (max |diff| {diffs[n]:.1e})" if n in diffs else "")
                          for n, ms in times.items()) + f"; sdpa backend {backend}")
        for note in notes:
            print("  " + note)
        return shape, listed, times, backend

    for batch, seq, dim, pattern in (QUICK_SHAPES if args.quick else GPU_SHAPES):
        rows.append(measure(batch, seq, dim, pattern))
        if not interpreter:
            torch.cuda.empty_cache()

    names = ("solution", "solution@128x64", "every-masked", "flex", "sdpa")
    print()
    print(f"| shape ({heads} heads, fp16, softcap {SOFTCAP:g}) | listed | " + " | ".join(f"{n} ms" for n in names)
          + " | best solution / flex speed | sdpa backend |")
    print("|---|---|" + "---|" * len(names) + "---|---|")
    for shape, listed, times, backend in rows:
        cells = [f"{times[n]:.3f}" if n in times else "-" for n in names]
        best = min(times[n] for n in ("solution", "solution@128x64") if n in times)
        ratio = f"{times['flex'] / best:.2f}x" if "flex" in times else "-"
        print(f"| {shape} | {listed:.3f} | " + " | ".join(cells) + f" | {ratio} | {backend} |")
    print(f"\n{gpu}; torch {torch.__version__}; triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
