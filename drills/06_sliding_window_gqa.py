"""Drill 06 — sliding-window causal attention with grouped K/V heads.

Below is a tiled FlashAttention forward kernel in Triton (fp16 in, fp32
accumulate) for a model with grouped-query attention (GQA): q has H heads, k
and v have only H_KV, and each K/V head is shared by a group of H // H_KV
query heads.  Each query row r may see only the last WINDOW keys, itself
included: keys r - WINDOW + 1 .. r (a sliding window, as in Mistral or
Gemma's local layers).  WINDOW keys (r - WINDOW < c <= r) is Hugging Face's
convention; Mistral's reference, flash-attn's window_size=(W, 0) and the
FlexAttention blog's q - kv <= W give W + 1 keys, so their W is WINDOW - 1.
As shipped the kernel is plain causal attention that reads the wrong K/V
head.  Make it right, then make it fast:

* TODO 1 — the K/V head.  Which of the H_KV heads does query head h share?
* TODO 2 — the loop bounds.  A query block needs only the K/V blocks that
  hold a key of some row's window: skip the blocks wholly before the window
  (the sliding window's whole point: the work per row is WINDOW keys, not r)
  and the blocks wholly after the block's last row.
* TODO 3 — the mask inside the boundary blocks.  The block on the diagonal
  is masked causally already; the block where the window starts holds keys
  too old for some rows: they must get score -inf too.

Check your work with ``flashtutor check 06`` (or save the file while
``flashtutor launch`` / ``flashtutor watch`` runs).  As shipped it prints
FAILED.
"""

import torch
import triton
import triton.language as tl

# One program computes BLOCK_M query rows of one query head; the inner loop
# walks that head's K/V BLOCK_N keys at a time.
BLOCK_M = 64
BLOCK_N = 64


@triton.jit
def _swa_fwd(
    Q, K, V, Out, Visits,  # q/out: (batch*H, seq, head_dim); k/v: (batch*H_KV, seq, head_dim); contiguous
    sm_scale,  # 1 / sqrt(head_dim)
    N_CTX,  # sequence length (any value; need not be a multiple of the block)
    WINDOW,  # row r sees keys r - WINDOW + 1 .. r (itself included); WINDOW >= 1
    H,  # query heads
    H_KV,  # K/V heads; H is a multiple of H_KV
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    RECORD_VISITS: tl.constexpr,  # compiled out unless the tutor asks which blocks were visited
):
    # -- which tile is this program? ------------------------------------------------
    # axis 0 picks the query block, axis 1 the (batch, query head) pair.
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H

    # -- TODO 1: the K/V head this query head reads ----------------------------------------
    # k and v hold only H_KV heads.  As shipped, query head h wraps around them
    # (h % H_KV): always a head that exists, but is it the one h's group shares?
    # The groups are consecutive: G = H // H_KV query heads per K/V head.
    off_hkv = off_h % H_KV

    q_base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM  # int64: batch*heads*seq*dim can pass 2**31
    kv_base = (off_b * H_KV + off_hkv).to(tl.int64) * N_CTX * HEAD_DIM

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows of this tile
    offs_n = tl.arange(0, BLOCK_N)  # key columns, relative to the current K/V block
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX  # the last query block may hang past the end of the sequence

    # -- load the query tile once; it stays in registers for the whole loop -----------
    q = tl.load(Q + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    # -- running softmax state, one entry per query row (fp32): see drill 02 -----------
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e)), and exp2 is the cheap one

    # -- TODO 2: the loop bounds -------------------------------------------------------------
    # As shipped, every program walks every K/V block of the sequence.  Which
    # blocks hold no key that any row of this tile may see?  Those wholly
    # before the first row's window, and those wholly after the last row.
    # Start the loop at a block boundary (the visit map counts whole blocks).
    lo = 0
    hi = N_CTX

    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX  # the last K/V block may hang past the end too

        # scores for this (query block, key block) tile: (BLOCK_M, BLOCK_N)
        k = tl.load(K + kv_base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        # keys past the end of the sequence do not exist: -inf gives them weight 0
        qk = tl.where(col_ok[None, :], qk, float("-inf"))

        # -- TODO 3: the mask inside the boundary blocks ------------------------------------
        # Row r may see key c only when r - WINDOW < c <= r.  As shipped only the
        # causal side (c <= r) is masked, so every row sees its whole past.
        # Add the window's far side: the first block of a row's window holds
        # keys that are too old for it.
        visible = cols[None, :] <= offs_m[:, None]
        qk = tl.where(visible, qk, float("-inf"))

        # -- online softmax update (drill 02), safe for rows that see no key here --------
        # In the first block of the loop a row near the end of the tile may see
        # no key at all (its window starts in a later block): its scores are all
        # -inf, and so is m_new.  Subtracting 0 instead keeps exp2(-inf - -inf)
        # (= NaN) out: such a row adds exactly nothing and its state stays empty.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)  # rescales what was accumulated under the old max
        p = tl.exp2(qk - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

        # -- bookkeeping for the tutor: mark (query block, key block) as visited -------
        if RECORD_VISITS:
            n_m = tl.cdiv(N_CTX, BLOCK_M)
            n_n = tl.cdiv(N_CTX, BLOCK_N)
            tl.store(Visits + (off_bh * n_m + start_m) * n_n + start_n // BLOCK_N, 1)

    # -- epilogue: normalise and write only the rows that exist -------------------------
    # Every row that exists sees at least its own key, so its l_i > 0 here; a padding row past
    # N_CTX may see none (l_i = 0, a NaN), which the store's row mask never writes.
    acc = acc / l_i[:, None]
    tl.store(Out + q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


def attention(q, k, v, window, out=None, visits=None):
    """Sliding-window causal attention with grouped K/V heads, fp16.

    q: (batch, H, seq, head_dim); k, v: (batch, H_KV, seq, head_dim) with H a
    multiple of H_KV.  Row r of query head h sees keys r - window + 1 .. r of
    K/V head h // (H // H_KV).  ``out`` (optional) receives the result;
    ``visits`` (optional, int32, shape (batch*H, cdiv(seq, BLOCK_M),
    cdiv(seq, BLOCK_N)), zeroed) gets a 1 for every (query block, key block)
    pair the kernel visits.
    """
    batch, heads, seq, head_dim = q.shape
    heads_kv = k.shape[1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    # one program per (query block, batch*query head)
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
    _swa_fwd[grid](
        q, k, v, out, visits if visits is not None else out,
        head_dim**-0.5, seq, window, heads, heads_kv,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        RECORD_VISITS=visits is not None,
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="06")
