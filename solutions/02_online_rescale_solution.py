"""Drill 02 — the online softmax update, solved.

FlashAttention never holds a whole row of scores: it walks the keys one block
at a time and keeps, per query row, three running values

* ``m_i``  — the largest score seen so far,
* ``l_i``  — the sum of ``exp(score - m_i)`` over the keys seen so far,
* ``acc``  — the sum of ``exp(score - m_i) * v`` over the same keys.

When a new block raises the maximum from ``m_i`` to ``m_new``, everything
accumulated so far was weighted against the old maximum and must be multiplied
by ``alpha = exp(m_i - m_new)`` — both the sum *and* the accumulator — before
the new block is added.  At the end, ``acc / l_i`` is exactly softmax(s) @ v.

Run it as ``python solutions/02_online_rescale_solution.py``.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 64  # query rows per program
BLOCK_N = 64  # keys per step of the streaming loop


@triton.jit
def _attn_fwd(
    Q, K, V, Out, Visits,  # q/k/v/out: (batch*heads, seq, head_dim), contiguous
    sm_scale,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    RECORD_VISITS: tl.constexpr,  # compiled out unless the tutor counts visited blocks
):
    # -- this program's tile: query block start_m of (batch, head) off_bh -------------
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX  # rows past the end of the sequence are computed but never stored

    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    # -- running state, fp32: nothing seen yet --------------------------------------
    # m_i starts at -inf so the first block's maximum always wins; alpha for the
    # first block is then exp2(-inf) = 0, which multiplies the zero state: no NaN.
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # fold log2(e) into the scale and use exp2

    for start_n in range(0, N_CTX, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        qk = tl.dot(q, k) * qk_scale  # scores in log2 units
        qk = tl.where(col_ok[None, :], qk, float("-inf"))  # keys past the end get weight 0

        # -- THE ONLINE UPDATE --------------------------------------------------------
        # 1. the new running maximum, over the old one and this block's scores
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        # 2. how much the old weights overstate the new ones: everything summed so
        #    far was weighted by exp2(s - m_i) and must now be exp2(s - m_new)
        alpha = tl.exp2(m_i - m_new)
        # 3. this block's weights, against the *new* maximum (never above 1: no overflow)
        p = tl.exp2(qk - m_new[:, None])
        # 4. rescale both running sums, then add this block
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

        if RECORD_VISITS:
            n_m = tl.cdiv(N_CTX, BLOCK_M)
            n_n = tl.cdiv(N_CTX, BLOCK_N)
            tl.store(Visits + (off_bh * n_m + start_m) * n_n + start_n // BLOCK_N, 1)

    # -- 5. one division at the end turns the weighted sum into an average ---------------
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


def attention(q, k, v, out=None, visits=None):
    """Full (non-causal) softmax(q k^T / sqrt(d)) v for fp16 (batch, heads, seq, head_dim)."""
    batch, heads, seq, head_dim = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
    _attn_fwd[grid](
        q, k, v, out, visits if visits is not None else out,
        head_dim**-0.5, seq,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        RECORD_VISITS=visits is not None,
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="02")
