"""The byte and FLOP arithmetic of drill 03, exact.

Conventions (the drill, its solution and the quiz all use these):

* one attention head, sequence length ``n``, head dimension ``d``, ``b`` bytes
  per element of every tensor (fp16/bf16: 2, fp32: 4, fp8: 1);
* **naive** attention materialises the scores in HBM: it reads Q, K and V once
  (3·n·d elements), writes S = QKᵀ (n²), reads S back for the softmax (n²),
  writes P = softmax(S) (n²), reads P back for PV (n²) and writes O (n·d):
  (4·n·d + 4·n²) elements;
* **fused** attention counts compulsory traffic only: Q, K, V read once and O
  written once, 4·n·d elements; S and P live on chip one tile at a time;
* FLOPs are the two matmuls, 2·n²·d each (a multiply-add is two FLOPs); the
  softmax's exp/max/sum work is left out (it is O(n²), not O(n²·d));
* causal block skipping uses square blocks: query block m visits key blocks
  0..m, and the diagonal block is visited whole.

Integers stay integers and ratios are :class:`fractions.Fraction`, so the
headline identities (the ratio is exactly 1 + n/d) hold exactly, not to
rounding.
"""

from __future__ import annotations

from fractions import Fraction
from math import isqrt


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")


def naive_elements(n: int, d: int) -> int:
    """Elements moved by naive attention: Q, K, V, O once; S and P twice each."""
    _check_positive(n=n, d=d)
    qkv_reads = 3 * n * d
    score_passes = 4 * n * n  # write S, read S, write P, read P
    o_write = n * d
    return qkv_reads + score_passes + o_write


def naive_hbm_bytes(n: int, d: int, b: int) -> int:
    """HBM bytes of naive attention for one head: (4·n·d + 4·n²)·b."""
    _check_positive(b=b)
    return naive_elements(n, d) * b


def fused_elements(n: int, d: int) -> int:
    """Elements moved by fused attention: Q, K, V read once, O written once."""
    _check_positive(n=n, d=d)
    return 4 * n * d


def fused_hbm_bytes(n: int, d: int, b: int) -> int:
    """Compulsory HBM bytes of fused attention for one head: 4·n·d·b."""
    _check_positive(b=b)
    return fused_elements(n, d) * b


def traffic_ratio(n: int, d: int) -> Fraction:
    """Naive over fused traffic: exactly 1 + n/d (the bytes per element cancel)."""
    return Fraction(naive_elements(n, d), fused_elements(n, d))


def forward_flops(n: int, d: int) -> int:
    """FLOPs of the attention forward pass, one head: two n×n×d matmuls, 4·n²·d."""
    _check_positive(n=n, d=d)
    return 2 * n * n * d + 2 * n * n * d


def naive_intensity(n: int, d: int, b: int) -> Fraction:
    """FLOPs per HBM byte of naive attention: 4n²d / ((4nd + 4n²)·b) = n·d / ((n + d)·b)."""
    return Fraction(forward_flops(n, d), naive_hbm_bytes(n, d, b))


def naive_intensity_limit(d: int, b: int) -> Fraction:
    """The limit of :func:`naive_intensity` as n grows: d / b (d/2 for fp16)."""
    _check_positive(d=d, b=b)
    return Fraction(d, b)


def score_matrix_bytes(n: int, b: int, matrices: int = 1) -> int:
    """Bytes of ``matrices`` dense n×n score matrices (one per head and batch entry)."""
    _check_positive(n=n, b=b, matrices=matrices)
    return matrices * n * n * b


def longest_fitting_sequence(budget_bytes: int, b: int, matrices: int = 1) -> int:
    """The largest n whose ``matrices`` n×n score matrices fit in ``budget_bytes``.

    n + 1 is the first length that breaks the budget.  Exact: n²·b·matrices <=
    budget ⇔ n² <= budget // (b·matrices), because n² is an integer.
    """
    _check_positive(budget_bytes=budget_bytes, b=b, matrices=matrices)
    return isqrt(budget_bytes // (b * matrices))


def blocks_per_side(n: int, block: int) -> int:
    """T = ceil(n / block): the tiles along each side of the n×n score matrix (the last may be ragged)."""
    _check_positive(n=n, block=block)
    return -(-n // block)


def causal_block_count(n: int, block: int) -> tuple[int, int]:
    """(visited, total) (query block, key block) pairs of a causal tiled kernel
    with square ``block``×``block`` tiles that skips every block wholly in the future."""
    t = blocks_per_side(n, block)
    return t * (t + 1) // 2, t * t


def causal_visited_fraction(n: int, block: int) -> Fraction:
    """The share of K/V blocks a causal kernel visits: (T + 1) / (2T), T = ceil(n / block)."""
    visited, total = causal_block_count(n, block)
    return Fraction(visited, total)


def block_sparse_flops(listed_blocks: int, block: int, d: int) -> int:
    """Matmul FLOPs of a block-sparse kernel, one head: every listed (query block, key block)
    tile, full or partial, costs two ``block``×``block``×d matmuls, 4·block²·d FLOPs (a
    partial tile's masked pairs are computed and thrown away)."""
    _check_positive(block=block, d=d)
    return 4 * block * block * d * listed_blocks


def causal_block_sparse_flops(n: int, block: int, d: int) -> int:
    """:func:`block_sparse_flops` of a causal BlockMask at ``n``: T(T+1)/2 listed tiles
    (T(T−1)/2 full tiles and T partial ones on the diagonal)."""
    return block_sparse_flops(causal_block_count(n, block)[0], block, d)


# --- the tiled kernel's real traffic (FlashAttention, Theorem 2) ----------------------------
#
# The fused count above is compulsory traffic.  A tiled kernel with no cache
# between HBM and the chip reads K and V once per query block; with on-chip
# memory of M bytes holding four B_r×d tiles (Q, O, K, V), B_r = M / (4·d·b),
# and the K/V re-reads are (n / B_r)·2·n·d·b = 8·n²·d²·b² / M bytes:
# Θ(n²·d² / M), FlashAttention's Theorem 2 (there in elements).


def tiled_query_block_rows(d: int, b: int, sram_bytes: int) -> int:
    """B_r, the query rows one program holds: four B_r×d tiles (Q, O, K, V) fill ``sram_bytes``."""
    _check_positive(d=d, b=b, sram_bytes=sram_bytes)
    rows = sram_bytes // (4 * d * b)
    if rows < 1:
        raise ValueError(f"{sram_bytes} bytes cannot hold four 1 x {d} tiles of {b}-byte elements")
    return rows


def tiled_hbm_bytes(n: int, d: int, b: int, sram_bytes: int) -> int:
    """HBM bytes of a tiled fused kernel with no cache: Q read and O written once, K and V
    read once per query block of B_r rows: 2·n·d·b + ceil(n / B_r)·2·n·d·b
    (= 2·n·d·b + 8·n²·d²·b² / M when B_r divides n)."""
    _check_positive(n=n)
    blocks = -(-n // tiled_query_block_rows(d, b, sram_bytes))
    return 2 * n * d * b + blocks * 2 * n * d * b


# --- the backward pass (drill 04) ----------------------------------------------------------
#
# FlashAttention-2's backward (Algorithm 2), per head: it recomputes S = QKᵀ
# (and from it P = exp(S − L) with the stored log-sum-exp L), then dV = PᵀdO,
# dP = dO Vᵀ, dS = P ∘ (dP − D), dQ = dS K and dK = dSᵀ Q: five n×n×d matmuls
# against the forward's two, dQ summed across key blocks by atomic adds.  Drill
# 04 computes dQ in a pass of its own, which recomputes S and dP once more:
# seven matmuls, no atomics.  The compulsory reads are Q, K, V, O, dO (n×d
# each) and L (n floats, fp32); D = rowsum(dO ∘ O) is computed from O and dO.

BACKWARD_MATMULS = ("S = QKᵀ (recomputed)", "dV = PᵀdO", "dP = dO Vᵀ", "dQ = dS K", "dK = dSᵀ Q")
"""FlashAttention-2's backward (Algorithm 2): one pass over the key blocks, dQ by atomic adds."""
DRILL04_BACKWARD_MATMULS = (
    "S = QKᵀ", "dV = PᵀdO", "dP = dO Vᵀ", "dK = dSᵀ Q",  # the dK/dV pass, one program per key block
    "S = QKᵀ", "dP = dO Vᵀ", "dQ = dS K",  # the dQ pass, one program per query block
)
"""Drill 04's backward: dQ in a pass of its own, which recomputes S and dP."""
FORWARD_MATMULS = ("S = QKᵀ", "O = PV")
LSE_BYTES = 4  # the log-sum-exp is kept in fp32, whatever the tensors' dtype


def backward_flops(n: int, d: int) -> int:
    """FLOPs of FlashAttention-2's backward for one head: five n×n×d matmuls, 10·n²·d."""
    _check_positive(n=n, d=d)
    return len(BACKWARD_MATMULS) * 2 * n * n * d


def backward_flops_ratio() -> Fraction:
    """FlashAttention-2's backward over the forward: 5 matmuls over 2, exactly 5/2 (softmax work left out)."""
    return Fraction(len(BACKWARD_MATMULS), len(FORWARD_MATMULS))


def drill04_extra_flops() -> Fraction:
    """What drill 04's separate dQ pass costs over FlashAttention-2's backward: 7/5 - 1 = 2/5 (+40 %)."""
    return Fraction(len(DRILL04_BACKWARD_MATMULS), len(BACKWARD_MATMULS)) - 1


def backward_read_bytes(n: int, d: int, b: int) -> int:
    """Compulsory bytes the backward reads for one head: Q, K, V, O, dO (5·n·d·b) and L (4·n)."""
    _check_positive(n=n, d=d, b=b)
    return 5 * n * d * b + LSE_BYTES * n


def stored_p_bytes(n: int, b: int) -> int:
    """What the backward would read instead of L if the forward had stored P: n²·b."""
    _check_positive(n=n, b=b)
    return n * n * b


# --- decoding with a KV cache (drill 05) ---------------------------------------------------
#
# One new query token per sequence attends to every cached token: for each
# cached token it reads that token's K and V in every KV head, 2·h_kv·d·b
# bytes per layer, and each query head does q·k and p·v, 2·d FLOPs each.


def kv_bytes_per_token(kv_heads: int, d: int, b: int, layers: int = 1) -> int:
    """Bytes of K and V one token adds to the cache (and a decode step reads per cached token):
    2·layers·h_kv·d·b."""
    _check_positive(kv_heads=kv_heads, d=d, b=b, layers=layers)
    return 2 * layers * kv_heads * d * b


def decode_flops_per_token(heads: int, d: int) -> int:
    """FLOPs one decode step spends per cached token and layer: q·k and p·v in every query head, 4·h·d."""
    _check_positive(heads=heads, d=d)
    return 4 * heads * d


def decode_intensity(heads: int, kv_heads: int, b: int) -> Fraction:
    """FLOPs per byte of a decode step's attention: 4·h·d / (2·h_kv·d·b) = 2·g/b, g = h / h_kv
    query heads per KV head; d cancels, and so does the cache length."""
    _check_positive(heads=heads, kv_heads=kv_heads, b=b)
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    return Fraction(decode_flops_per_token(heads, 1), kv_bytes_per_token(kv_heads, 1, b))


def gqa_saving(heads: int, kv_heads: int) -> Fraction:
    """How many times smaller the KV cache is with h_kv KV heads than with one per query head."""
    _check_positive(heads=heads, kv_heads=kv_heads)
    return Fraction(heads, kv_heads)


# --- sliding-window attention (drill 06) ---------------------------------------------------


def window_block_count(n: int, window: int, block: int) -> tuple[int, int]:
    """(visited, total) (query block, key block) pairs of a causal sliding-window kernel with
    square ``block`` tiles: row r sees keys r − window + 1 .. r, and query block m visits the key
    blocks from the one holding its first row's first visible key up to the diagonal."""
    _check_positive(n=n, window=window, block=block)
    t = blocks_per_side(n, block)
    visited = 0
    for m in range(t):
        first_key = max(0, m * block - window + 1)
        visited += m - first_key // block + 1
    return visited, t * t


def window_visited_fraction(n: int, window: int, block: int) -> Fraction:
    """The share of all block pairs a sliding-window kernel visits."""
    visited, total = window_block_count(n, window, block)
    return Fraction(visited, total)


def decode_step_kv_bytes(batch: int, context: int, kv_heads: int, d: int, b: int, reads_per_kv_head: int = 1) -> int:
    """Bytes of K and V one layer's decode step reads for ``batch`` sequences of ``context``
    cached tokens: 2·B·T·h_kv·d·b when each K/V head's pages are read once (the G query heads
    of a group packed into one program); ``reads_per_kv_head`` = G when every query head's
    program reads its K/V head itself (2·B·T·h·d·b)."""
    _check_positive(batch=batch, context=context, kv_heads=kv_heads, d=d, b=b, reads=reads_per_kv_head)
    return batch * context * kv_bytes_per_token(kv_heads, d, b) * reads_per_kv_head
