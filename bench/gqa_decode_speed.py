"""Drill 05's decode with grouped K/V heads, the group packed into one tl.dot, vs SDPA with enable_gqa=True.

    python bench/gqa_decode_speed.py            # GPU: batch 8/32, 32 query heads on 8 or 4 K/V heads, cache 4k/16k, d = 128
    python bench/gqa_decode_speed.py --quick    # no GPU needed: the CPU interpreter at a tiny shape

For every shape (every sequence's cache full, so SDPA without a mask does the same work)
it times three decodes of one query token per head:
- ``packed``: bench/gqa_decode_kernel.py, one program per (sequence, K/V head, slice),
  each K/V tile read once for the G query heads of its group;
- ``per head``: solutions/05_split_kv_decode_fast.py, drill 05's fast kernel, one program
  per query head, on the K/V heads repeated G times beforehand (what a kernel without
  packing reads: G times the bytes);
- torch's SDPA with ``enable_gqa=True`` on the grouped cache (its default dispatch, the
  backend recorded from the profiler).
Each output is checked against SDPA's.  GB/s counts the bytes of the grouped cache,
2 * B * KV_HEADS * L * d * 2, for all three, so the per-head kernel's figure is what it
delivers to the step, not what it reads.  ``--json PATH`` writes every number.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKED = ROOT / "bench" / "gqa_decode_kernel.py"
# batch, query heads, K/V heads, cache length, head_dim
GPU_SHAPES = [(b, 32, kvh, n, 128) for b in (8, 32) for kvh in (8, 4) for n in (4096, 16384)]
CPU_SHAPES = [(2, 8, 2, 128, 32)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CPU interpreter, one tiny shape (no GPU needed)")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    parser.add_argument("--shapes", help="B,H,KVH,L,d;... instead of the default GPU shapes (KVH = H: no grouping, "
                        "the packed kernel pads its one row to tl.dot's 16)")
    args = parser.parse_args()

    import torch  # does not import triton: the interpreter switch can still be set

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
    from bench_common import gbs, load, timer, use_interpreter
    from sdpa_baselines import time_sdpa

    interpreter = use_interpreter(args.quick)
    import triton

    sys.path.insert(0, str(ROOT))
    device = "cpu" if interpreter else "cuda"
    packed = load(PACKED)
    per_head = packed.FAST  # solutions/05_split_kv_decode_fast.py, loaded once by the packed kernel's file
    gpu = "CPU (Triton interpreter: timings relative only)" if interpreter else torch.cuda.get_device_name(0)
    header = f"device: {gpu}; torch {torch.__version__}; triton {triton.__version__}; python {platform.python_version()}"
    print(header, flush=True)
    bench = timer(interpreter, samples=2)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rows = []
    shapes = CPU_SHAPES if interpreter else GPU_SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in shape.split(",")) for shape in args.shapes.split(";")]
    for batch, heads, kv_heads, cache, dim in shapes:
        group = heads // kv_heads
        gen = torch.Generator(device=device).manual_seed(0)
        q = torch.randn((batch, heads, dim), device=device, dtype=torch.float16, generator=gen)
        k, v = (torch.randn((batch, kv_heads, cache, dim), device=device, dtype=torch.float16, generator=gen)
                for _ in range(2))
        k_rep, v_rep = (t.repeat_interleave(group, dim=1).contiguous() for t in (k, v))
        lengths = torch.full((batch,), cache, dtype=torch.int32, device=device)
        q4 = q[:, :, None, :]
        reference = sdpa(q4, k, v, enable_gqa=True)[:, :, 0, :].float()
        out_packed, out_per_head = torch.empty_like(q), torch.empty_like(q)
        packed.attention(q, k, v, lengths, out=out_packed)
        per_head.attention(q, k_rep, v_rep, lengths, out=out_per_head)
        gbytes = 2 * batch * kv_heads * cache * dim * 2 / 1e9
        timed = time_sdpa(bench, lambda: sdpa(q4, k, v, enable_gqa=True), forced=False)
        row = {
            "batch": batch, "heads": heads, "kv_heads": kv_heads, "cache": cache, "head_dim": dim,
            "packed_splits": packed.split_count(batch, kv_heads, cache, q.device),
            "per_head_splits": per_head.split_count(batch, heads, cache, q.device),
            "packed_err": float((out_packed.float() - reference).abs().max()),
            "per_head_err": float((out_per_head.float() - reference).abs().max()),
            "sdpa_ms": timed.ms["default"], "sdpa_backend": timed.backend,
            "packed_ms": bench(lambda: packed.attention(q, k, v, lengths, out=out_packed)),
            "per_head_ms": bench(lambda: per_head.attention(q, k_rep, v_rep, lengths, out=out_per_head)),
        }
        for name in ("sdpa", "packed", "per_head"):
            row[f"{name}_gbs"] = gbytes / (row[f"{name}_ms"] / 1e3)
        rows.append(row)
        print(json.dumps(row), flush=True)

    if args.json:
        args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=1))
    print(header)
    print("GB/s: the grouped cache's K and V bytes (2·B·KVH·L·d·2) per second, for all three")
    print("| B×H/KVH×L×d | SDPA enable_gqa ms (backend) | GB/s | packed ms (splits) | GB/s | ×SDPA "
          "| per head ms (splits) | GB/s | packed ×per head | max err packed / per head |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']}×{r['heads']}/{r['kv_heads']}×{r['cache']}×{r['head_dim']} "
              f"| {r['sdpa_ms']:.3f} ({r['sdpa_backend']}) | {gbs(r['sdpa_gbs'])} "
              f"| {r['packed_ms']:.3f} ({r['packed_splits']}) | {gbs(r['packed_gbs'])} | {r['sdpa_ms'] / r['packed_ms']:.2f} "
              f"| {r['per_head_ms']:.3f} ({r['per_head_splits']}) | {gbs(r['per_head_gbs'])} "
              f"| {r['per_head_ms'] / r['packed_ms']:.2f} | {r['packed_err']:.1e} / {r['per_head_err']:.1e} |")
    if interpreter:
        print("(CPU interpreter: the milliseconds are relative only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
