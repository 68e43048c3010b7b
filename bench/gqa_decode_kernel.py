"""Split-KV decoding with grouped K/V heads, the group packed into one ``tl.dot`` (issue 26).

Drill 05's kernels give each query head a program of its own, so with grouped-query
attention (H query heads sharing KVH < H K/V heads, G = H / KVH) every K/V element is
read G times, once per query head of its group.  Here one program owns a (sequence,
K/V head, slice): it loads the G query rows of its group as one (GROUP_ROWS, d) tile,
and each K/V tile it reads once serves all of them through ``tl.dot``.  The bytes
read drop by G, and a decode step's arithmetic intensity rises from about 1 to about
G FLOPs per byte (the quiz's decode-intensity answer: 2·g/b with g query heads per
K/V head and b bytes per element).  The split and the exact log-sum-exp merge are
drill 05's (``solutions/05_split_kv_decode_fast.py``).

    attention(q, k_cache, v_cache, lengths, num_splits=None, out=None)
    q: (batch, heads, d); k_cache, v_cache: (batch, kv_heads, max_len, d); lengths: (batch,)

Not a drill: ``bench/gqa_decode_speed.py`` times it against SDPA with ``enable_gqa=True``
and ``tests/test_gqa_decode_kernel.py`` checks it under the interpreter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/: the shared parts
from bench_common import load

# solutions/05_split_kv_decode_fast.py, whose merge kernel and split count this file uses (loaded once)
_FAST_PATH = Path(__file__).resolve().parent.parent / "solutions" / "05_split_kv_decode_fast.py"
FAST = sys.modules.get(_FAST_PATH.stem) or load(_FAST_PATH)
BLOCK_N = 64  # positions per step off a GPU (on one, autotuned)
TILE_MULTIPLE = FAST.TILE_MULTIPLE  # the largest tile a configuration uses: slices are a multiple of it
MIN_DOT_ROWS = 16  # tl.dot needs at least 16 rows: a group of fewer query heads is padded with masked rows


@triton.jit
def _gqa_split(
    Q, K, V, Lengths,  # q: (batch*heads, d); k/v: (batch*kv_heads, max_len, d); lengths: (batch,)
    MidM, MidL, MidO,  # per (query head, slice): m and l (batch*heads, NUM_SPLITS), o (.., NUM_SPLITS, d)
    sm_scale,
    MAX_LEN,
    SPLIT_SIZE,  # positions per slice, a multiple of every BLOCK_N used
    KV_HEADS,
    GROUP: tl.constexpr,  # query heads per K/V head
    GROUP_ROWS: tl.constexpr,  # GROUP padded to a power of two >= 16 (tl.dot's smallest M)
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
):
    off_bkv = tl.program_id(0)  # (sequence, K/V head)
    split = tl.program_id(1)
    b = off_bkv // KV_HEADS
    length = tl.load(Lengths + b)
    kv_base = off_bkv.to(tl.int64) * MAX_LEN * HEAD_DIM

    # -- the group's query rows: heads b*H + kvh*G + g, i.e. rows off_bkv*G + g of q --
    offs_g = tl.arange(0, GROUP_ROWS)
    g_ok = offs_g < GROUP  # the padding rows load 0 and are never stored
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q_rows = off_bkv * GROUP + offs_g
    q = tl.load(Q + q_rows[:, None] * HEAD_DIM + offs_d[None, :], mask=g_ok[:, None], other=0.0)
    qk_scale = sm_scale * 1.44269504  # m kept in the exp2 domain, as the merge expects

    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, length)

    m_i = tl.full([GROUP_ROWS], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_ROWS], dtype=tl.float32)
    acc = tl.zeros([GROUP_ROWS, HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < hi  # the slice's end (and the sequence's length) masks the last tile
        # -- one K tile and one V tile, read once for every query head of the group --
        k = tl.load(K + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        v = tl.load(V + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale  # (GROUP_ROWS, BLOCK_N)
        qk = tl.where(col_ok[None, :], qk, float("-inf"))
        # -- the online softmax, row by row (each row one query head) --
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # -- each real query head's slice state, where the merge reads it --
    state = q_rows * NUM_SPLITS + split
    tl.store(MidM + state, m_i, mask=g_ok)
    tl.store(MidL + state, l_i, mask=g_ok)
    tl.store(MidO + state[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=g_ok[:, None])


_CONFIGS = [triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=s)
            for n in (64, 128) for w in (4, 8) for s in (2, 3)]
_gqa_split_tuned = triton.autotune(configs=_CONFIGS, key=["HEAD_DIM", "MAX_LEN", "NUM_SPLITS", "GROUP"])(_gqa_split)


def attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, lengths: torch.Tensor,
              num_splits: int | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """One decode step with grouped K/V heads: ``out[b, h] = softmax(q[b, h] K[b, h // G, :len]^T
    / sqrt(d)) V[b, h // G, :len]``, each K/V element read once per step."""
    batch, heads, head_dim = q.shape
    kv_heads, max_len = k_cache.shape[1], k_cache.shape[2]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not split into groups over {kv_heads} K/V heads")
    group = heads // kv_heads
    # drill 05's split count, for batch * kv_heads programs a slice: about four per SM
    num_splits = num_splits or split_count(batch, kv_heads, max_len, q.device)
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    lengths = lengths.to(device=q.device, dtype=torch.int32).contiguous()
    if out is None:
        out = torch.empty_like(q)
    split_size = triton.cdiv(triton.cdiv(max_len, num_splits), TILE_MULTIPLE) * TILE_MULTIPLE
    mid_m = torch.empty((batch * heads, num_splits), dtype=torch.float32, device=q.device)
    mid_l = torch.empty_like(mid_m)
    mid_o = torch.empty((batch * heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    args = (q, k_cache, v_cache, lengths, mid_m, mid_l, mid_o, head_dim**-0.5, max_len, split_size, kv_heads)
    shape = dict(GROUP=group, GROUP_ROWS=max(MIN_DOT_ROWS, triton.next_power_of_2(group)), HEAD_DIM=head_dim,
                 NUM_SPLITS=num_splits)
    grid = (batch * kv_heads, num_splits)
    if q.device.type == "cuda":
        _gqa_split_tuned[grid](*args, **shape)
    else:
        _gqa_split[grid](*args, **shape, BLOCK_N=BLOCK_N)
    # drill 05's exact merge, one program per query head (the states are stored per query head)
    FAST._decode_combine[(batch * heads,)](mid_m, mid_l, mid_o, out, HEAD_DIM=head_dim, NUM_SPLITS=num_splits,
                                           SPLITS_POW2=max(2, triton.next_power_of_2(num_splits)))
    return out


def split_count(batch: int, kv_heads: int, max_len: int, device: torch.device | str) -> int:
    """Drill 05's split count (``05_split_kv_decode_fast.split_count``) for ``batch * kv_heads``
    programs a slice: about four programs per SM, slices of two tiles or more, at most 32."""
    return int(FAST.split_count(batch, kv_heads, max_len, device))
