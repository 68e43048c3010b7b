"""Drill 06's solution vs torch's flex_attention and SDPA, sliding-window causal GQA, one process.

    python bench/sliding_window_speed.py            # GPU: N = 4k/16k, W = 256/1024, d = 64/128, fp16
    python bench/sliding_window_speed.py --quick    # CPU interpreter (or a GPU): one tiny shape
    python bench/sliding_window_speed.py --kernels clear,fast --all-configs   # the fast file too, every config checked

For every shape (32 query heads on 8 K/V heads, batch*N = 16k tokens) it
times, with ``triton.testing.do_bench`` (median):

* ``solution``: solutions/06_sliding_window_gqa_solution.py;
* ``fast`` (with ``--kernels clear,fast``; the default is ``clear`` alone):
  solutions/06_sliding_window_gqa_fast.py, autotuned on its first call at each
  shape (outside the timing); its row records the configuration it chose and how
  many (row, key) pairs that configuration's tiles compute per useful pair;
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
every output is compared with the solution's (max abs difference); the fast file's
is compared once more *after* its timing (the autotuned configuration that was
timed), and beyond drill 06's tolerance (0.02) it says WRONG and the script exits 1.
``--all-configs`` also runs every configuration of the fast file's autotune list
once per shape (untimed) against the solution's output, and on the CPU
interpreter at two small shapes per head dim (8 query heads on 2, so every pack
size runs) against the float64 reference; a pack that does not divide the group
is said as pruned (the autotuner prunes it too).

Then it checks, through the real harness (tutor.harness.check.run_check on this
device), that the shipped drill FAILS and the solution PASSES, one line each (and
the fast file PASSES, with its timed launches on a GPU: the harness compares the
autotuned timed launch with float64 once).
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
FAST = ROOT / "solutions" / "06_sliding_window_gqa_fast.py"
KERNELS = ("clear", "fast")
TOLERANCE = 0.02  # drill 06's
HEADS, HEADS_KV = 32, 8
# (batch, seq, window, head_dim)
GPU_SHAPES = [(b, n, w, d) for n, b in ((4096, 4), (16384, 1)) for w in (256, 1024) for d in (64, 128)]
QUICK_SHAPES = [(1, 256, 64, 64)]
# --all-configs on the interpreter: (batch, heads, heads_kv, seq, window, head_dim), every pack size
# allowed (a group of 4); a window shorter than a 128-row tile, and one with an unmasked interior
CPU_CONFIG_SHAPES = [(1, 8, 2, 300, 48, d) for d in (64, 128)] + [(1, 8, 2, 700, 400, d) for d in (64, 128)]


def pairs_in_window(seq: int, window: int) -> int:
    """(row, key) pairs with row - window < key <= row: sum over rows of min(r + 1, window)."""
    full = max(seq - window, 0)
    return full * window + sum(min(r + 1, window) for r in range(seq - full))


def computed_pairs(seq: int, window: int, block_m: int, block_n: int) -> int:
    """(row, key) pairs a kernel computes per head whose query blocks of ``block_m`` rows
    visit exactly the K/V blocks of ``block_n`` keys their windows touch."""
    total = 0
    for first in range(0, seq, block_m):
        lo = max(first - window + 1, 0) // block_n
        hi = -(-min(first + block_m, seq) // block_n)
        total += block_m * (hi - lo) * block_n
    return total


def kernels_of(text: str) -> list[str]:
    """``--kernels``' value as a list of KERNELS."""
    chosen = [w.strip() for w in text.split(",") if w.strip()]
    for name in chosen:
        if name not in KERNELS:
            raise SystemExit(f"--kernels: unknown kernel {name!r} (choose from {', '.join(KERNELS)})")
    return list(dict.fromkeys(chosen))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny shape (what the CPU interpreter can run)")
    parser.add_argument("--no-harness", action="store_true", help="skip the shipped-FAILS / solution-PASSES lines")
    parser.add_argument("--kernels", default="clear",
                        help="comma-separated, timed beside flex and SDPA: clear (the solution), fast "
                             "(solutions/06_sliding_window_gqa_fast.py); default clear")
    parser.add_argument("--all-configs", action="store_true",
                        help="also run every autotune configuration of the fast file once per shape, untimed")
    args = parser.parse_args()
    kernels = kernels_of(args.kernels)
    if args.all_configs and "fast" not in kernels:
        kernels.append("fast")

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
    solution = load(SOLUTION)  # always: the visit map and the outputs the others are compared with
    fast = load(FAST) if "fast" in kernels else None
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
    print(f"kernels: {', '.join(kernels)}")
    rows = []
    wrong: list[str] = []
    gen = torch.Generator().manual_seed(0)

    def every_config(q, k, v, window: int, want, exact: bool) -> None:
        """Each configuration of the fast file's autotune list at q's head dim, once,
        untimed, against ``want`` (float64 where ``exact``, else the solution's output)."""
        dim = q.shape[-1]
        shape = f"({q.shape[0]}, {q.shape[1]}/{k.shape[1]} heads, N={q.shape[2]}, W={window}, d={dim})"
        for config in fast.configs(dim):
            said = f"  config check {config} (BLOCK_M, BLOCK_N, PACK, warps, stages) at {shape}:"
            try:
                got = fast.attention_with(q, k, v, window, config=config)
            except ValueError as exc:  # a pack that does not divide the group: pruned by the autotuner too
                print(f"{said} pruned ({exc})", flush=True)
                continue
            except Exception as exc:  # noqa: BLE001 - say what failed, then go on with the next config
                why = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
                skipped = type(exc).__name__ in ("OutOfResources", "CompileTimeAssertionFailure", "PTXASError")
                print(f"{said} could not run ({why}){'; the autotuner skips it too' if skipped else ' - WRONG'}",
                      flush=True)
                if not skipped:
                    wrong.append(f"config {config} at {shape}: {why}")
                continue
            err = float((got.double() - want.double()).abs().nan_to_num(nan=float("inf")).max())
            ok = err <= TOLERANCE
            print(f"{said} max |diff| vs {'float64' if exact else 'solution'} {err:.1e} {'ok' if ok else 'WRONG'}",
                  flush=True)
            if not ok:
                wrong.append(f"config {config} at {shape}: off by {err:.1e}")

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
        if "clear" in kernels:
            times["solution"] = bench(lambda: solution.attention(q, k, v, window, out=out))
        fast_config = ""
        if fast is not None:
            out_fast = torch.empty_like(q)
            fast.attention(q, k, v, window, out=out_fast)  # autotunes here, on its first call at this key
            times["fast"] = bench(lambda: fast.attention(q, k, v, window, out=out_fast))
            fast.attention(q, k, v, window, out=out_fast)  # the timed configuration, once more
            diffs["fast"] = float((out_fast.float() - out.float()).abs().nan_to_num(nan=float("inf")).max())
            fast_config = fast.chosen_config(dim)
            words = fast_config.split()
            if words[0] != "fixed":  # "BMxBN pack P wW sS": BLOCK_M rows per head (a pack stacks heads)
                block_m, block_n = map(int, words[0].split("x"))
            else:
                block_m, block_n = fast.BLOCK_M, fast.BLOCK_N
            ratio = computed_pairs(seq, window, block_m, block_n) / pairs_in_window(seq, window)
            ratio_clear = computed_pairs(seq, window, solution.BLOCK_M, solution.BLOCK_N) / pairs_in_window(seq, window)
            fast_config += f"; {ratio:.2f} pairs computed per useful pair (solution {ratio_clear:.2f})"
            if diffs["fast"] > TOLERANCE:
                wrong.append(f"fast at B={batch} N={seq} W={window} d={dim}: off by {diffs['fast']:.1e}")

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
        if fast_config:
            print(f"  fast: {fast_config}" + (" - WRONG" if diffs["fast"] > TOLERANCE else ""))
        print(dispatch_line(backend, forced))
        for note in notes:
            print("  " + note)
        if fast is not None and args.all_configs:
            every_config(q, k, v, window, out, exact=False)
        return shape, visited, ideal, times, useful, forced, backend, fast_config

    for batch, seq, window, dim in shapes:
        rows.append(measure(batch, seq, window, dim))
        if not interpreter:
            torch.cuda.empty_cache()
    if args.all_configs and interpreter:
        from tutor.harness.problems.sliding_window_gqa import window_reference

        for batch, heads_q, heads_k, seq, window, dim in CPU_CONFIG_SHAPES:
            q = torch.randn(batch, heads_q, seq, dim, generator=gen).to(torch.float16)
            k, v = (torch.randn(batch, heads_k, seq, dim, generator=gen).to(torch.float16) for _ in range(2))
            every_config(q, k, v, window, window_reference(q, k, v, window), exact=True)

    harness_lines = []
    if not args.no_harness:
        from tutor.harness.check import run_check
        from tutor.harness.device import select_device
        from tutor.harness.job import CheckJob

        dev = select_device("auto")
        files = [("shipped drill", SHIPPED, False, False), ("solution", SOLUTION, True, False)]
        if fast is not None:  # its timed launches too on a GPU: the autotuned launch checked against float64
            files.append(("fast", FAST, True, not interpreter))
        for label, path, want, timed in files:
            result = run_check(CheckJob(drill="06", file=str(path), timing=timed, seed=0), dev)
            verdict = "PASSED" if result.passed else "FAILED"
            expected = result.passed == want and result.error is None
            if timed:
                expected &= result.performance.status == "done"
            ok = "as expected" if expected else "UNEXPECTED"
            if not expected and label == "fast":
                wrong.append(f"the fast file through the harness: {verdict}, codes {result.codes}")
            err = "n/a" if result.max_abs_err is None else f"{result.max_abs_err:.2e}"
            timing = (f"; timed launches: {result.performance.status} {result.performance.reason}".rstrip()
                      if timed else "")
            harness_lines.append(f"{label} through the harness on {dev.name}: {verdict} ({ok}); "
                                 f"max |err| {err}; codes {result.codes}{timing}")
        print(*harness_lines, sep="\n")

    print()
    # the timed kernels' columns: "solution" (the clear one) and "fast", as chosen
    # (with fast: its speed-up over the solution and over flex, and the configuration it chose)
    names = [n for n in ("solution", "fast") if (n == "solution" and "clear" in kernels) or n in kernels]
    columns = [*names, "flex", "sdpa"]
    print(f"| shape ({heads} q / {heads_kv} kv heads, fp16) | visited (ideal) | "
          + " | ".join(f"{n} ms" for n in columns) + " | " + " | ".join(f"{n} TFLOP/s" for n in columns)
          + " | sdpa backend | forced FLASH_ATTENTION ms | forced EFFICIENT_ATTENTION ms |"
          + (" solution/fast | flex/fast | fast config |" if "fast" in names else ""))
    print("|---|---|" + "---|" * (2 * len(columns) + 3) + ("---|---|---|" if "fast" in names else ""))
    for shape, visited, ideal, times, useful, forced, backend, fast_config in rows:
        ms = [times.get(n) for n in columns]
        cells = [f"{t:.3f}" if t is not None else "skipped" for t in ms]
        tflops = [f"{useful / (t * 1e-3) / 1e12:.1f}" if t is not None else "-" for t in ms]
        extra = [backend, ms_cell(forced["flash"]), ms_cell(forced["efficient"])]
        if "fast" in names:
            over = [times[n] / times["fast"] if n in times else None for n in ("solution", "flex")]
            extra += [ms_cell(over[0], 2), ms_cell(over[1], 2), fast_config.split(";")[0]]
        print(f"| {shape} | {visited:.3f} ({ideal:.3f}) | " + " | ".join(cells + tflops + extra) + " |")
    print(f"\n{gpu}; torch {torch.__version__}; triton {triton.__version__}")
    if wrong:
        print("WRONG:", *wrong, sep="\n  ")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
