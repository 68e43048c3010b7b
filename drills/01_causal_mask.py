"""Drill 01 — causal masking.

Below is a working, correct tiled FlashAttention forward kernel in Triton
(fp16 in, fp32 accumulate) that ignores ``causal``: it always computes full
attention.  Make it causal:

* TODO 1 — the loop bound.  A query block never needs the K/V blocks that lie
  wholly in its future.  Stop the loop before them: skipping them is where
  causal attention's ~2x saving over full attention comes from.
* TODO 2 — the mask inside the diagonal block.  The one K/V block that
  straddles the diagonal holds keys after most of the query rows it meets (all
  but a row at the block's end); those keys must get score -inf.  That is the
  correctness fix, what causal masking is for: no row sees its future.

Check your work with ``flashtutor check 01`` (or just save the file while
``flashtutor launch`` / ``flashtutor watch`` runs).  As shipped it prints
FAILED: that gap is the lesson.
"""

import torch
import triton
import triton.language as tl

# One program computes BLOCK_M query rows; the inner loop walks the keys
# BLOCK_N at a time.  64 x 64 tiles of fp16 fit comfortably in shared memory
# for head_dim 64 and keep the tensor cores busy.
BLOCK_M = 64
BLOCK_N = 64


@triton.jit
def _attn_fwd(
    Q, K, V, Out, Visits,  # pointers: q/k/v/out are (batch*heads, seq, head_dim), contiguous
    sm_scale,  # 1 / sqrt(head_dim)
    N_CTX,  # sequence length (any value; need not be a multiple of the block)
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    RECORD_VISITS: tl.constexpr,  # compiled out unless the tutor asks which blocks were visited
):
    # -- which tile is this program? ------------------------------------------------
    # axis 0 picks the query block, axis 1 the (batch, head) pair.
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM  # int64: batch*heads*seq*dim can pass 2**31

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows of this tile
    offs_n = tl.arange(0, BLOCK_N)  # key columns, relative to the current K/V block
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX  # the last query block may hang past the end of the sequence

    # -- load the query tile once; it stays in registers for the whole loop -----------
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    # -- running softmax state, one entry per query row (fp32) ------------------------
    # m_i: the largest score seen so far; l_i: the sum of exp(score - m_i);
    # acc: the sum of exp(score - m_i) * v.  See drill 02 for the update itself.
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e)), and exp2 is the cheap one

    # -- TODO 1: the loop bound ---------------------------------------------------------
    # As shipped, every program walks all of the keys, causal or not.  With
    # CAUSAL set, which K/V blocks can a row of this tile never see?  End the
    # loop before them (but never before the diagonal block).
    hi = N_CTX

    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX  # the last K/V block may hang past the end too

        # scores for this (query block, key block) tile: (BLOCK_M, BLOCK_N)
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        # keys past the end of the sequence do not exist: -inf gives them weight 0
        qk = tl.where(col_ok[None, :], qk, float("-inf"))

        # -- TODO 2: the mask inside the diagonal block ---------------------------------
        # With CAUSAL set, key c may only be seen by row r when c <= r.  Blocks
        # wholly left of the diagonal are fine as they are; in the block that
        # straddles it, give the forbidden scores -inf here.

        # -- online softmax update (drill 02) ------------------------------------------
        # Every row has seen key 0 by now, so m_new is finite and no -inf - -inf occurs.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)  # rescales what was accumulated under the old max
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

        # -- bookkeeping for the tutor: mark (query block, key block) as visited -------
        if RECORD_VISITS:
            n_m = tl.cdiv(N_CTX, BLOCK_M)
            n_n = tl.cdiv(N_CTX, BLOCK_N)
            tl.store(Visits + (off_bh * n_m + start_m) * n_n + start_n // BLOCK_N, 1)

    # -- epilogue: normalise and write only the rows that exist -------------------------
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


def attention(q, k, v, causal=False, out=None, visits=None):
    """softmax(q k^T / sqrt(d)) v for fp16 tensors of shape (batch, heads, seq, head_dim).

    ``out`` (optional) receives the result; ``visits`` (optional, int32, shape
    (batch*heads, cdiv(seq, BLOCK_M), cdiv(seq, BLOCK_N)), zeroed) gets a 1 for
    every (query block, key block) pair the kernel visits.
    """
    batch, heads, seq, head_dim = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    # one program per (query block, batch*head)
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
    _attn_fwd[grid](
        q, k, v, out, visits if visits is not None else out,
        head_dim**-0.5, seq,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        CAUSAL=causal, RECORD_VISITS=visits is not None,
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="01")
