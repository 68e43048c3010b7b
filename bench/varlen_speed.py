"""Drill 08's solution vs torch: packed variable-length chunked prefill, one process.

    python bench/varlen_speed.py            # GPU: three mixes of sequences, d = 64/128, fp16
    python bench/varlen_speed.py --quick    # CPU interpreter (or a GPU): one tiny mix

Each mix packs sequences whose queries are the last Nq of their Nk keys (the
causal diagonal offset by Nk - Nq).  It times, with ``triton.testing.do_bench``
(median):

* ``solution``: solutions/08_varlen_prefill_solution.py on the packed tensors
  (cu_seqlens, flash-attn's varlen layout);
* ``flex``: ``torch.compile(flex_attention)`` on the packed tensors as one
  sequence of total_q queries and total_k keys, with a document mask (same
  sequence, offset causal inside it) built once by ``create_block_mask``,
  untimed; skipped, with the reason printed, when it fails;
* ``sdpa``: ``scaled_dot_product_attention`` on the sequences padded to a batch
  (the padding not timed) with the boolean mask each needs
  (``tutor.harness.problems.varlen_attention.padded``): its default dispatch,
  with the backend it used recorded from the profiler, and forced
  FLASH_ATTENTION and EFFICIENT_ATTENTION beside it ("n/a" where a backend
  refuses: FLASH_ATTENTION takes no mask).

TFLOP/s count the useful work only: 4 * d * (the (row, key) pairs the offset
causal mask lets in) per head.  Every output is compared with the float64
reference (max abs error) before it is timed.  The last lines are a markdown
table with the GPU, torch and triton versions; on the CPU interpreter the times
are relative only.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTION = ROOT / "solutions" / "08_varlen_prefill_solution.py"
# (name, heads, head_dim, ((Nq, Nk), ...))
GPU_MIXES = [
    (f"{name} d={d}", 16, d, seqs)
    for d in (64, 128)
    for name, seqs in (
        ("prefill chunks 16x(512 of 1k..2k)", tuple((512, 1024 + 64 * i) for i in range(16))),
        ("mixed 8 full + 8 chunks", tuple((n, n) for n in (4096, 2000, 1000, 777, 512, 300, 100, 33))
         + tuple((256, 8192 - 512 * i) for i in range(8))),
        ("64 short 1..500", tuple((1 + (i * 37) % 250, 1 + (i * 37) % 250 + (i * 53) % 250) for i in range(64))),
    )
]
QUICK_MIXES = [("tiny", 2, 32, ((21, 75), (37, 37), (1, 29)))]


def pairs(seqs) -> int:
    """(row, key) pairs the offset causal mask lets in: row i of (Nq, Nk) sees i + Nk - Nq + 1 keys."""
    return sum(nq * (nk - nq) + nq * (nq + 1) // 2 for nq, nk in seqs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one tiny mix (what the CPU interpreter can run)")
    args = parser.parse_args()

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import load, load_flex, timer, use_interpreter
    from sdpa_baselines import SDPA_VARIANTS, dispatch_line, ms_cell, time_sdpa

    interpreter = use_interpreter()
    if interpreter:
        args.quick = True
    import triton

    sys.path.insert(0, str(ROOT))
    from tutor.harness.problems import varlen_attention as va

    device = "cpu" if interpreter else "cuda"
    solution = load(SOLUTION)

    bench = timer(interpreter)
    flex_attention, create_block_mask, flex_reason = load_flex(interpreter)

    gpu = "CPU (Triton interpreter: relative only)" if interpreter else torch.cuda.get_device_name()
    print(f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}")
    rows = []
    gen = torch.Generator().manual_seed(0)
    for name, heads, dim, seqs in QUICK_MIXES if args.quick else GPU_MIXES:
        case = va.Case(name, heads, dim, seqs)
        q, k, v = va.random_inputs(case, device, gen)
        # float64, every mix (the reference goes by chunks of rows: no size is skipped); every
        # row sees key 0, so it is finite, and a nan below would be the kernel's own
        expected = va.reference(case, q, k, v)
        if not bool(torch.isfinite(expected).all()):
            raise RuntimeError(f"{name}: the float64 reference is not finite")
        cu_q = torch.tensor(case.cu_q, dtype=torch.int32, device=device)
        cu_k = torch.tensor(case.cu_k, dtype=torch.int32, device=device)
        max_q, max_k = max(s[0] for s in seqs), max(s[1] for s in seqs)
        out = torch.empty_like(q)
        times: dict[str, float] = {}
        errors: dict[str, float] = {}
        notes: list[str] = []

        def err(got: torch.Tensor) -> float:
            return float((got.double() - expected).abs().max())

        def student() -> torch.Tensor:
            return solution.attention(q, k, v, cu_q, cu_k, max_q, max_k, out=out)

        errors["solution"] = err(student())
        times["solution"] = bench(student)

        if flex_attention is not None:
            try:
                doc_q = torch.repeat_interleave(torch.arange(len(seqs), device=device),
                                                torch.tensor([s[0] for s in seqs], device=device))
                doc_k = torch.repeat_interleave(torch.arange(len(seqs), device=device),
                                                torch.tensor([s[1] for s in seqs], device=device))
                start_q, start_k = cu_q.long(), cu_k.long()
                offset = (cu_k[1:] - cu_k[:-1] - (cu_q[1:] - cu_q[:-1])).long()

                def document(b, h, q_idx, kv_idx):
                    d = doc_q[q_idx]
                    return (d == doc_k[kv_idx]) & (kv_idx - start_k[d] <= q_idx - start_q[d] + offset[d])

                block_mask = create_block_mask(document, None, None, case.cu_q[-1], case.cu_k[-1], device=device)
                qf, kf, vf = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))  # (1, H, total, d)

                def flex() -> torch.Tensor:
                    return flex_attention(qf, kf, vf, block_mask=block_mask)

                errors["flex"] = err(flex()[0].transpose(0, 1))
                times["flex"] = bench(flex)
            except Exception as exc:  # noqa: BLE001 - say why, keep going
                notes.append(f"flex_attention skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
        else:
            notes.append(f"flex_attention skipped: {flex_reason or 'not available'}")

        backend = "-"
        forced: dict[str, float | None] = dict.fromkeys(SDPA_VARIANTS[1:])
        try:
            qp, kp, vp, mask = va.padded(case, q, k, v)

            def sdpa() -> torch.Tensor:
                return torch.nn.functional.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask)

            padded_out = sdpa()
            errors["sdpa"] = max(
                float((padded_out[b, :, :nq].transpose(0, 1).double() - expected[case.cu_q[b]:case.cu_q[b + 1]])
                      .abs().max())
                for b, (nq, _) in enumerate(seqs))
            timed = time_sdpa(bench, sdpa)
            times["sdpa"], backend, forced = timed.ms["default"], timed.backend, timed.forced
        except Exception as exc:  # noqa: BLE001 - e.g. out of memory
            notes.append(f"sdpa skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")

        useful = 4 * dim * pairs(seqs) * heads
        print(f"{name}: {len(seqs)} sequences, total_q={case.cu_q[-1]} total_k={case.cu_k[-1]}; "
              + "; ".join(f"{n} {ms:.3f} ms ({useful / ms / 1e9:.1f} TFLOP/s, max abs err {errors.get(n, float('nan')):.1e})"
                          for n, ms in times.items()))
        print(dispatch_line(backend, forced))
        for note in notes:
            print("  " + note)
        rows.append((name, times, backend, forced, useful))
        if not interpreter:
            torch.cuda.empty_cache()

    print()
    print("| mix | solution ms | flex ms | sdpa ms (backend) | forced efficient ms | solution TFLOP/s |")
    print("|---|---|---|---|---|---|")
    for name, times, backend, forced, useful in rows:
        print(f"| {name} | {ms_cell(times.get('solution'))} | {ms_cell(times.get('flex'))} | "
              f"{ms_cell(times.get('sdpa'))} ({backend}) | {ms_cell(forced['efficient'])} | "
              f"{useful / times['solution'] / 1e9:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
