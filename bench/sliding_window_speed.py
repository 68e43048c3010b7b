"""Drill 06's solution vs torch's flex_attention and SDPA, sliding-window causal GQA, one process.

    python bench/sliding_window_speed.py            # GPU: N = 4k/16k, W = 256/1024, d = 64/128, fp16
    python bench/sliding_window_speed.py --quick    # CPU interpreter (or a GPU): one tiny shape

For every shape (32 query heads on 8 K/V heads, batch*N = 16k tokens) it
times, with ``triton.testing.do_bench`` (median):

* ``solution``: solutions/06_sliding_window_gqa_solution.py;
* ``flex``: ``torch.compile(flex_attention)`` with a sliding-window block mask
  (``create_block_mask`` built once, outside the timing) and ``enable_gqa``;
  skipped, with the reason printed, when it fails to compile or run;
* ``sdpa``: ``scaled_dot_product_attention`` with the same window as a dense
  boolean (N, N) mask, on K/V already expanded to 32 heads (the expansion is
  not timed): its default dispatch, with the backend it used recorded from the
  profiler, and forced FLASH_ATTENTION and EFFICIENT_ATTENTION beside it ("n/a"
  where a backend refuses: FLASH_ATTENTION takes no mask).

TFLOP/s count the useful work only: 4 * d * (number of (row, key) pairs inside
the window) per head.  The visited fraction is *counted* by running the
solution with its visit map on, beside the ideal for the shape.  Before timing,
every output is compared with the solution's (max abs difference).

Then it checks, through the real harness (tutor.harness.check.run_check on this
device), that the shipped drill FAILS and the solution PASSES, one line each.
The last lines are a markdown table with the GPU, torch and triton versions.
On the CPU interpreter the times are relative only.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "06_sliding_window_gqa_solution.py"
SHIPPED = ROOT / "drills" / "06_sliding_window_gqa.py"
HEADS, HEADS_KV = 32, 8
# (batch, seq, window, head_dim)
GPU_SHAPES = [(b, n, w, d) for n, b in ((4096, 4), (16384, 1)) for w in (256, 1024) for d in (64, 128)]
QUICK_SHAPES = [(1, 256, 64, 64)]


def pairs_in_window(seq: int, window: int) -> int:
    """(row, key) pairs with row - window < key <= row: sum over rows of min(r + 1, window)."""
    full = max(seq - window, 0)
    return full * window + sum(min(r + 1, window) for r in range(seq - full))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny shape (what the CPU interpreter can run)")
    parser.add_argument("--no-harness", action="store_true", help="skip the shipped-FAILS / solution-PASSES lines")
    args = parser.parse_args()

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import load, load_flex, timer, use_interpreter
    from sdpa_baselines import SDPA_VARIANTS, dispatch_line, ms_cell, time_sdpa

    interpreter = use_interpreter()
    if interpreter:
        args.quick = True
    import triton

    sys.path.insert(0, str(ROOT))
    device = "cpu" if interpreter else "cuda"
    solution = load(SOLUTION)
    heads, heads_kv = (HEADS, HEADS_KV) if not interpreter else (4, 2)
    shapes = QUICK_SHAPES if args.quick else GPU_SHAPES

    bench = timer(interpreter)
    flex_attention, create_block_mask, flex_reason = load_flex(interpreter, cache_size_limit=64)

    gpu = "CPU (Triton interpreter: relative only)" if interpreter else torch.cuda.get_device_name()
    print(f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}")
    if flex_attention is not None:
        print("flex_attention: " + ("eager (not compiled) on the CPU: relative only" if interpreter
                                    else "torch.compile(flex_attention, dynamic=False), block mask built untimed"))
    print(f"heads: {heads} query, {heads_kv} K/V; fp16; timing: "
          f"{'wall clock, 1 run after a warm-up' if interpreter else 'triton.testing.do_bench median'}")
    rows = []
    gen = torch.Generator().manual_seed(0)

    def measure(batch: int, seq: int, window: int, dim: int):
        """Time the three on one shape; one (shape, visited, ideal, times, flops) row."""
        q = torch.randn(batch, heads, seq, dim, generator=gen).to(device, torch.float16)
        k, v = (torch.randn(batch, heads_kv, seq, dim, generator=gen).to(device, torch.float16) for _ in range(2))
        out = torch.empty_like(q)
        n_m, n_n = triton.cdiv(seq, solution.BLOCK_M), triton.cdiv(seq, solution.BLOCK_N)
        visits = torch.zeros((batch * heads, n_m, n_n), dtype=torch.int32, device=device)
        solution.attention(q, k, v, window, out=out, visits=visits)
        visited = float((visits != 0).float().mean())
        ideal = sum(
            1 for i in range(n_m) for j in range(n_n)
            if max(i * solution.BLOCK_M - window + 1, 0) // solution.BLOCK_N <= j
            <= (min((i + 1) * solution.BLOCK_M, seq) - 1) // solution.BLOCK_N
        ) / (n_m * n_n)
        useful = 4 * dim * pairs_in_window(seq, window) * batch * heads
        times, diffs, notes = {}, {}, []
        forced: dict[str, float | None] = dict.fromkeys(SDPA_VARIANTS[1:])
        backend = "-"
        times["solution"] = bench(lambda: solution.attention(q, k, v, window, out=out))

        if flex_attention is not None:
            try:
                def in_window(b, h, q_idx, kv_idx):
                    return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

                block_mask = create_block_mask(in_window, None, None, seq, seq, device=device)

                def flex() -> torch.Tensor:
                    return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True)

                diffs["flex"] = float((flex().float() - out.float()).abs().max())
                times["flex"] = bench(flex)
            except Exception as exc:  # noqa: BLE001 - say why, keep going
                notes.append(f"flex_attention skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        else:
            notes.append(f"flex_attention skipped: {flex_reason or 'not available'}")

        try:
            rows_i = torch.arange(seq, device=device)[:, None]
            cols_i = torch.arange(seq, device=device)[None, :]
            mask = (cols_i <= rows_i) & (cols_i > rows_i - window)
            group = heads // heads_kv
            k_rep, v_rep = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)

            def sdpa() -> torch.Tensor:
                return torch.nn.functional.scaled_dot_product_attention(q, k_rep, v_rep, attn_mask=mask)

            diffs["sdpa"] = float((sdpa().float() - out.float()).abs().max())
            timed = time_sdpa(bench, sdpa)
            times["sdpa"], backend, forced = timed.ms["default"], timed.backend, timed.forced
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory at 16k
            notes.append(f"sdpa skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            if not interpreter:
                torch.cuda.empty_cache()

        shape = f"B={batch} N={seq} W={window} d={dim}"
        print(f"{shape}: visited {visited:.4f} of the K/V blocks (ideal {ideal:.4f}); "
              + "; ".join(f"{name} {ms:.3f} ms" + (f" (max |diff| vs solution {diffs[name]:.1e})" if name in diffs else "")
                          for name, ms in times.items()))
        print(dispatch_line(backend, forced))
        for note in notes:
            print("  " + note)
        return shape, visited, ideal, times, useful, forced, backend

    for batch, seq, window, dim in shapes:
        rows.append(measure(batch, seq, window, dim))
        if not interpreter:
            torch.cuda.empty_cache()

    harness_lines = []
    if not args.no_harness:
        from tutor.harness.check import run_check
        from tutor.harness.device import select_device
        from tutor.harness.job import CheckJob

        dev = select_device("auto")
        for label, path, want in (("shipped drill", SHIPPED, False), ("solution", SOLUTION, True)):
            result = run_check(CheckJob(drill="06", file=str(path), timing=False, seed=0), dev)
            verdict = "PASSED" if result.passed else "FAILED"
            ok = "as expected" if result.passed == want and result.error is None else "UNEXPECTED"
            err = "n/a" if result.max_abs_err is None else f"{result.max_abs_err:.2e}"
            harness_lines.append(f"{label} through the harness on {dev.name}: {verdict} ({ok}); "
                                 f"max |err| {err}; codes {result.codes}")
        print(*harness_lines, sep="\n")

    print()
    print(f"| shape ({heads} q / {heads_kv} kv heads, fp16) | visited (ideal) | solution ms | flex ms | sdpa ms "
          "| solution TFLOP/s | flex TFLOP/s | sdpa TFLOP/s | sdpa backend | forced FLASH_ATTENTION ms "
          "| forced EFFICIENT_ATTENTION ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, visited, ideal, times, useful, forced, backend in rows:
        ms = [times.get(n) for n in ("solution", "flex", "sdpa")]
        cells = [f"{t:.3f}" if t is not None else "skipped" for t in ms]
        tflops = [f"{useful / (t * 1e-3) / 1e12:.1f}" if t is not None else "-" for t in ms]
        extra = [backend, ms_cell(forced["flash"]), ms_cell(forced["efficient"])]
        print(f"| {shape} | {visited:.3f} ({ideal:.3f}) | " + " | ".join(cells + tflops + extra) + " |")
    print(f"\n{gpu}; torch {torch.__version__}; triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
