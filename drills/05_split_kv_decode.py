"""Drill 05 — split-KV decoding (flash-decoding).

At decode time each sequence brings ONE new query token, and attends to its
whole KV cache.  A kernel with one program per (sequence, head) — the forward
kernel of drills 01-02 with BLOCK_M = 1 — launches only batch * heads
programs: at batch 8 with 32 heads, 256 programs for an H100 SXM's or H200's
132 SMs, each streaming thousands of cache positions one block after another.
Decode is bound by memory bandwidth, and two programs per SM, each waiting on
its next load, cannot keep enough bytes in flight to use it.  With 32 heads,
batch 1 leaves 100 of the 132 SMs with no program at all and batch 2 leaves
68; batch 4 fills 128 of them, but with one program each.

So split the cache: the first kernel gives each program one *slice* of one
(sequence, head)'s cache, batch * heads * NUM_SPLITS programs in all, and each
writes its slice's partial softmax state — the running maximum m_s, the sum
l_s = sum exp2(score - m_s), the unnormalised output o_s = sum exp2(score - m_s) v.
A second, tiny kernel merges the slices.  The sequences are ragged (each has
its own length, from ``lengths``), so a short one leaves its later slices
empty.

* TODO — the merge (``_decode_combine``).  As shipped, it averages the
  slices' own outputs o_s / l_s: finite, plausible, and wrong as soon as a
  sequence spans more than one slice.  Merge the states exactly: each slice
  measured its terms against its own maximum m_s; bring them all to one
  reference point first.  The result must be exactly softmax over the whole
  cache — and an empty slice must not turn into a NaN.

Check your work with ``flashtutor check 05`` (or save while ``flashtutor
launch`` runs).  As shipped it prints FAILED.
"""

import torch
import triton
import triton.language as tl

# Each split program walks its slice of the cache BLOCK_N positions at a time.
# A decode step reads each K/V element once and does one multiply-add with it
# (q.k, then p*v): it is bound by memory, not by the tensor cores, so the block
# is sized for the loads (32 rows x head_dim fp16) rather than for tl.dot.
BLOCK_N = 32
# How many programs share one (sequence, head)'s cache.  The launcher takes
# another count (num_splits=) too; benchmark it on your GPU (bench/decode_speed.py).
NUM_SPLITS = 4


@triton.jit
def _decode_split(
    Q, K, V, Lengths,  # q: (batch*heads, head_dim); k/v: (batch*heads, max_len, head_dim); lengths: (batch,) int32
    MidM, MidL, MidO,  # per-slice state: m and l (batch*heads, NUM_SPLITS), o (batch*heads, NUM_SPLITS, head_dim), fp32
    Visits,  # int32 (batch*heads, cdiv(max_len, BLOCK_N)): the slice (+1) that read each cache block
    sm_scale,  # 1 / sqrt(head_dim)
    MAX_LEN,  # the cache's allocated length; sequence b holds only its first Lengths[b] positions
    SPLIT_SIZE,  # positions per slice, a multiple of BLOCK_N
    HEADS,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    RECORD_VISITS: tl.constexpr,  # compiled out unless the tutor asks which blocks were read
):
    # -- which slice of which (sequence, head) is this program? ----------------------
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    length = tl.load(Lengths + off_bh // HEADS)  # this sequence's cache length (>= 1)
    kv_base = off_bh.to(tl.int64) * MAX_LEN * HEAD_DIM  # int64: batch*heads*max_len*dim can pass 2**31

    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(Q + off_bh * HEAD_DIM + offs_d).to(tl.float32)  # the one new query token
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e)); m is kept in the exp2 domain

    # -- the slice: [lo, hi), clipped to the sequence's own length --------------------
    # A short sequence leaves its later slices empty (lo >= length): the loop then
    # runs zero times and the program reports the empty state below.
    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, length)

    # -- running softmax state of this slice (drill 02), one query row -----------------
    m_i = float("-inf")  # largest score so far
    l_i = 0.0  # sum of exp2(score - m_i)
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)  # sum of exp2(score - m_i) * v
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < hi  # the last block of a sequence may hang past its length
        k = tl.load(K + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        # one query row: the scores are a matrix-vector product, (BLOCK_N, D) x (D,)
        qk = tl.sum(k.to(tl.float32) * q[None, :], 1) * qk_scale
        qk = tl.where(col_ok, qk, float("-inf"))  # positions past the length get weight 0
        # the first block of a non-empty slice holds position lo < length, so m_new is finite
        m_new = tl.maximum(m_i, tl.max(qk, 0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new)
        v = tl.load(V + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        m_i = m_new

        # -- bookkeeping for the tutor: which slice read this cache block -------------
        if RECORD_VISITS:
            tl.store(Visits + off_bh * tl.cdiv(MAX_LEN, BLOCK_N) + start_n // BLOCK_N, split + 1)

    # -- the slice's partial result: (m, l, o) unnormalised; empty: (-inf, 0, 0) -------
    state = off_bh * NUM_SPLITS + split
    tl.store(MidM + state, m_i)
    tl.store(MidL + state, l_i)
    tl.store(MidO + state * HEAD_DIM + offs_d, acc)


@triton.jit
def _decode_combine(
    MidM, MidL, MidO, Out,  # the slices' states (above); out: (batch*heads, head_dim) fp16
    HEAD_DIM: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    SPLITS_POW2: tl.constexpr,  # NUM_SPLITS rounded up to a power of two >= 2 (tl.arange's sizes)
):
    off_bh = tl.program_id(0)
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = offs_s < NUM_SPLITS  # the padding rows are not slices: they load as empty ones
    state = off_bh * NUM_SPLITS + offs_s
    m = tl.load(MidM + state, mask=s_ok, other=float("-inf"))
    l = tl.load(MidL + state, mask=s_ok, other=0.0)
    o = tl.load(MidO + state[:, None] * HEAD_DIM + offs_d[None, :], mask=s_ok[:, None], other=0.0)

    # -- TODO: merge the slices exactly ------------------------------------------------
    # Slice s reports (m_s, l_s, o_s), its terms measured against ITS OWN maximum
    # m_s (in the exp2 domain).  As shipped, each non-empty slice's own answer
    # o_s / l_s is averaged, as if every slice held the same share of the softmax
    # mass.  It does not: with M = max_s m_s, slice s holds the share
    # exp2(lse_s - LSE) = l_s * exp2(m_s - M) / sum_t l_t * exp2(m_t - M), so its
    # normalised answer o_s / l_s weighs l_s * exp2(m_s - M), and its unnormalised
    # o_s weighs exp2(m_s - M): a larger maximum alone does not make a larger share.
    # Replace these three lines with the exact merge; keep an empty slice
    # (m_s = -inf, l_s = 0, o_s = 0) from producing a NaN.
    nonempty = l > 0
    per_slice = o / tl.where(nonempty, l, 1.0)[:, None]
    acc = tl.sum(tl.where(nonempty[:, None], per_slice, 0.0), 0) / tl.sum(nonempty.to(tl.float32), 0)
    tl.store(Out + off_bh * HEAD_DIM + offs_d, acc.to(Out.dtype.element_ty))


def attention(q, k_cache, v_cache, lengths, out=None, visits=None, num_splits=None):
    """One decode step: softmax(q K^T / sqrt(d)) V for each sequence's one new token.

    q: (batch, heads, head_dim) fp16; k_cache, v_cache: (batch, heads, max_len,
    head_dim) fp16, of which sequence b uses the first ``lengths[b]`` positions;
    lengths: int32 (batch,), each in 1..max_len.  ``out`` (optional) receives the
    result, (batch, heads, head_dim) fp16; ``visits`` (optional, int32, zeroed,
    (batch*heads, cdiv(max_len, BLOCK_N))) gets, for each cache block read, the
    number (from 1) of the slice whose program read it.
    """
    batch, heads, head_dim = q.shape
    max_len = k_cache.shape[2]
    num_splits = num_splits or NUM_SPLITS
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    lengths = lengths.to(device=q.device, dtype=torch.int32).contiguous()
    if out is None:
        out = torch.empty_like(q)
    # every slice the same size, a whole number of blocks, so the slices tile max_len
    split_size = triton.cdiv(triton.cdiv(max_len, num_splits), BLOCK_N) * BLOCK_N
    mid_m = torch.empty((batch * heads, num_splits), dtype=torch.float32, device=q.device)
    mid_l = torch.empty_like(mid_m)
    mid_o = torch.empty((batch * heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    # one program per (sequence*head, slice): batch*heads*num_splits programs, not batch*heads
    _decode_split[(batch * heads, num_splits)](
        q, k_cache, v_cache, lengths, mid_m, mid_l, mid_o, visits if visits is not None else mid_m,
        head_dim**-0.5, max_len, split_size, heads,
        HEAD_DIM=head_dim, BLOCK_N=BLOCK_N, NUM_SPLITS=num_splits, RECORD_VISITS=visits is not None,
    )
    # one program per (sequence, head) merges its slices
    _decode_combine[(batch * heads,)](
        mid_m, mid_l, mid_o, out,
        HEAD_DIM=head_dim, NUM_SPLITS=num_splits, SPLITS_POW2=max(2, triton.next_power_of_2(num_splits)),
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="05")
