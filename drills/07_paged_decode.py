"""Drill 07 — paged, GQA-packed split-KV decoding.

The cache is a pool of fixed-size pages, ``(num_pages, kv_heads, PAGE_SIZE,
head_dim)``; sequence b's logical position ``pos`` lives in page
``block_table[b, pos // PAGE_SIZE]`` at offset ``pos % PAGE_SIZE``.  The
``G = heads // kv_heads`` query heads ``kvh*G .. kvh*G + G-1`` share K/V head
``kvh``; one program loads each K/V tile once and scores all G query rows with
one ``tl.dot`` (the rows are the M dimension, padded to 16).  The split and
merge are drill 05's: each slice reports (m, l, o) and the merge weighs them by
``exp2(m_s - M)``.

Your two TODOs are in ``_paged_split``: (1) find each position's page and offset
through the block table; (2) pick the G query heads that share this program's
K/V head.  The split and the merge are drill 05's, given complete.

Run it as ``python drills/07_paged_decode.py``.
"""

import torch
import triton
import triton.language as tl

# Positions per tile.  It need not equal the page size: every position finds its
# own page, so a tile may span pages (a page of 8) or part of one (a page of 64).
BLOCK_N = 32
# Programs per (sequence, K/V head); the launcher takes another (num_splits=).
NUM_SPLITS = 4


@triton.jit
def _paged_split(
    Q, KPages, VPages, BlockTable, Lengths,  # q: (batch, heads, D); pages: (num_pages, KV_HEADS, PAGE_SIZE, D)
    MidM, MidL, MidO,  # per (batch*heads, NUM_SPLITS) slice state, fp32; o has a head_dim axis
    sm_scale,
    MAX_PAGES,  # columns of the block table
    SPLIT_SIZE,  # positions per slice, a multiple of BLOCK_N
    HEADS, KV_HEADS,
    PAGE_SIZE: tl.constexpr,
    GROUP: tl.constexpr,  # query heads per K/V head
    GROUP_PAD: tl.constexpr,  # GROUP rounded up to a power of two >= 16 (tl.dot's M)
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
):
    # -- which (sequence, K/V head) and which slice --------------------------------
    off_bkv = tl.program_id(0)
    split = tl.program_id(1)
    b = off_bkv // KV_HEADS
    kvh = off_bkv % KV_HEADS
    length = tl.load(Lengths + b)

    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    g_ok = offs_g < GROUP  # the padding rows are not heads: loaded as zeros, never stored
    # TODO(2): the GROUP query heads that share K/V head kvh (heads // KV_HEADS of them, in order)
    heads = offs_g
    q = tl.load(Q + (b * HEADS + heads)[:, None] * HEAD_DIM + offs_d[None, :], mask=g_ok[:, None], other=0.0)
    qk_scale = sm_scale * 1.44269504  # exp(x) == exp2(x * log2(e))

    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, length)
    m_i = tl.zeros([GROUP_PAD], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < hi  # the last tile may hang past the length (a partial last page)
        # -- the block table: logical position -> (page, offset in page) ---------------
        # TODO(1): position cols lives in page BlockTable[b, cols // PAGE_SIZE], at offset cols % PAGE_SIZE.
        # As written, every sequence reads pool pages 0, 1, 2, ... in order, whatever its table says.
        page = cols // PAGE_SIZE
        slot = cols % PAGE_SIZE
        row = (page.to(tl.int64) * KV_HEADS + kvh) * PAGE_SIZE + slot  # int64: the pool can pass 2**31 elements
        k = tl.load(KPages + row[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        # -- all G query rows against the tile at once: (GROUP_PAD, D) x (D, BLOCK_N) ----
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        qk = tl.where(col_ok[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        v = tl.load(VPages + row[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    # -- each head's slice state: (m, l, o); an empty slice stores (-inf, 0, 0) --------
    state = (b * HEADS + heads) * NUM_SPLITS + split
    tl.store(MidM + state, m_i, mask=g_ok)
    tl.store(MidL + state, l_i, mask=g_ok)
    tl.store(MidO + state[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=g_ok[:, None])


@triton.jit
def _paged_combine(
    MidM, MidL, MidO, Out,  # the slices' states; out: (batch*heads, head_dim) fp16
    HEAD_DIM: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
):
    # drill 05's exact merge, one program per (sequence, query head)
    off_bh = tl.program_id(0)
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = offs_s < NUM_SPLITS
    state = off_bh * NUM_SPLITS + offs_s
    m = tl.load(MidM + state, mask=s_ok, other=float("-inf"))
    l = tl.load(MidL + state, mask=s_ok, other=0.0)
    o = tl.load(MidO + state[:, None] * HEAD_DIM + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    m_max = tl.max(m, 0)  # slice 0 holds position 0: finite
    w = tl.exp2(m - m_max)  # an empty slice weighs exp2(-inf) = 0
    acc = tl.sum(o * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(Out + off_bh * HEAD_DIM + offs_d, acc.to(Out.dtype.element_ty))


def attention(q, k_pages, v_pages, block_table, lengths, out=None, num_splits=None):
    """One decode step over a paged cache with grouped K/V heads.

    q: (batch, heads, head_dim) fp16; k_pages, v_pages: (num_pages, kv_heads,
    page_size, head_dim) fp16; block_table: int32 (batch, max_pages), the pages
    of each sequence in logical order; lengths: int32 (batch,), each >= 1.
    ``heads`` is a multiple of ``kv_heads``.  Returns (batch, heads, head_dim) fp16.
    """
    batch, heads, head_dim = q.shape
    _, kv_heads, page_size, _ = k_pages.shape
    group = heads // kv_heads
    max_pages = block_table.shape[1]
    num_splits = num_splits or NUM_SPLITS
    if out is None:
        out = torch.empty_like(q)
    max_len = max_pages * page_size
    split_size = triton.cdiv(triton.cdiv(max_len, num_splits), BLOCK_N) * BLOCK_N
    # every slice state starts empty, (m, l, o) = (-inf, 0, 0): a query head that no program
    # scored merges to NaN (its m - m_max is -inf - (-inf)), visibly, never to whatever memory
    # held before
    mid_m = torch.full((batch * heads, num_splits), float("-inf"), dtype=torch.float32, device=q.device)
    mid_l = torch.zeros_like(mid_m)
    mid_o = torch.zeros((batch * heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    # one program per (sequence, K/V head, slice): each K/V tile is loaded once for its G heads
    _paged_split[(batch * kv_heads, num_splits)](
        q, k_pages, v_pages, block_table, lengths, mid_m, mid_l, mid_o,
        head_dim**-0.5, max_pages, split_size, heads, kv_heads,
        PAGE_SIZE=page_size, GROUP=group, GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim, BLOCK_N=BLOCK_N, NUM_SPLITS=num_splits,
    )
    _paged_combine[(batch * heads,)](
        mid_m, mid_l, mid_o, out,
        HEAD_DIM=head_dim, NUM_SPLITS=num_splits, SPLITS_POW2=max(2, triton.next_power_of_2(num_splits)),
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="07")
