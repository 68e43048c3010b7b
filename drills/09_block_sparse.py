"""Drill 09 — block-sparse attention from a block mask, with a score modifier.

FlexAttention runs attention whose mask is data: a BlockMask lists, for each
query block, the key blocks to visit, split into *full* blocks (every key
visible) and *partial* ones (an element mask decides), and a score modifier
changes each score before the softmax.  This kernel computes the right
attention *without* the modifier, and does it the slow way: it visits every
key block and masks every one.  Your three TODOs:

* TODO 1 (the loops): a query block visits only the key blocks its lists name:
  first its *full* blocks (every key visible: no element mask), then its
  *partial* blocks (an element mask decides key by key), each list read as
  ``count`` entries of an index row, as FlexAttention's BlockMask stores them;
* TODO 2 (the element mask): inside a partial block, key c is seen by row r
  only where ``mask[r, c]`` is set; a full block needs no mask load at all;
* TODO 3 (the score modifier): tanh soft-capping, ``softcap * tanh(s / softcap)``
  of the *scaled* score s = q·k / sqrt(d), before the log2(e) factor that
  turns exp into exp2.

Run ``python drills/09_block_sparse.py`` (or ``flashtutor check 09``) to check it.
"""

import torch
import triton
import triton.language as tl

# One program computes BLOCK_M query rows of one head; the block mask the tutor
# passes in is built for these sizes (as FlexAttention's BLOCK_SIZE).
BLOCK_M = 32
BLOCK_N = 32


@triton.jit
def _tile(acc, l_i, m_i, q, K, V, Mask, kv_base, start_m, start_n, offs_m, offs_n, offs_d, N_CTX, sm_scale, softcap,
          Visits, off_bh, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          PARTIAL: tl.constexpr, RECORD_VISITS: tl.constexpr):
    """One (query block, key block) tile of the online softmax (drill 02)."""
    cols = start_n + offs_n
    col_ok = cols < N_CTX  # the last key block may hang past the end of the sequence
    k = tl.load(K + kv_base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
    s = tl.dot(q, k) * sm_scale  # the scaled scores, in natural-log units

    # -- TODO 3: the score modifier, in the units it is defined in -----------------------
    # Apply tanh soft-capping: softcap * tanh(s / softcap), with s the *scaled* score.
    # Triton has no tanh here: tanh(x) = 1 - 2 / (exp(2x) + 1).
    qk = s * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e)), and exp2 is the cheap one
    qk = tl.where(col_ok[None, :], qk, float("-inf"))

    # -- TODO 2: the element mask, on partial blocks only --------------------------
    # As written, every tile loads the mask and applies it; a full block needs neither.
    if True:
        row_ok = offs_m < N_CTX
        seen = tl.load(Mask + offs_m[:, None] * N_CTX + cols[None, :],
                       mask=row_ok[:, None] & col_ok[None, :], other=0)
        qk = tl.where(seen != 0, qk, float("-inf"))

    # -- online softmax update, safe for rows that see no key here ----------------------
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_use)
    p = tl.exp2(qk - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(V + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)

    # -- bookkeeping for the tutor: mark (query block, key block) as visited -------------
    if RECORD_VISITS:
        n_m = tl.cdiv(N_CTX, BLOCK_M)
        n_n = tl.cdiv(N_CTX, BLOCK_N)
        tl.store(Visits + (off_bh * n_m + start_m) * n_n + start_n // BLOCK_N, 1)
    return acc, l_i, m_new


@triton.jit
def _block_sparse_fwd(
    Q, K, V, Out, Visits,  # (batch*heads, seq, head_dim), contiguous
    Mask,  # (seq, seq) int8: may row r see key c?  Read inside partial blocks only
    FullCount, FullIndex,  # (n_m,), (n_m, n_n) int32: the full key blocks of each query block
    PartCount, PartIndex,  # the same for the partial key blocks
    sm_scale, softcap, N_CTX, N_N,  # N_N: key blocks per row of an index list
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, RECORD_VISITS: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM  # int64: batch*heads*seq*dim can pass 2**31
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # -- TODO 1: visit the listed blocks only -------------------------------------
    # As written, every key block is visited (and masked: unlisted blocks are all
    # zeros in the mask).  Visit the full blocks of FullIndex[start_m, :FullCount[start_m]]
    # and the partial ones of PartIndex[start_m, :PartCount[start_m]] instead.
    for start_n in range(0, N_CTX, BLOCK_N):
        acc, l_i, m_i = _tile(acc, l_i, m_i, q, K, V, Mask, base, start_m, start_n, offs_m, offs_n, offs_d, N_CTX,
                              sm_scale, softcap, Visits, off_bh, HEAD_DIM, BLOCK_M, BLOCK_N, True, RECORD_VISITS)

    # -- epilogue: a row that saw no key (an empty list, or every key masked) outputs 0,
    # as flex_attention does; the others are normalised
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    acc = acc / l_safe[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=row_ok[:, None])


def attention(q, k, v, block_mask, softcap, out=None, visits=None):
    """Block-sparse attention with tanh soft-capping, fp16.

    q, k, v: (batch, heads, seq, head_dim).  ``block_mask`` has ``mask`` (seq, seq)
    int8 and, for each query block, its full and partial key blocks:
    ``full_kv_num_blocks`` / ``full_kv_indices`` and ``kv_num_blocks`` /
    ``kv_indices`` (int32, (n_m,) and (n_m, n_n)), built for BLOCK_M x BLOCK_N
    tiles.  ``softcap`` > 0.  ``visits`` (optional, int32 (batch*heads, n_m, n_n),
    zeroed) gets a 1 for every (query block, key block) pair visited.
    """
    batch, heads, seq, head_dim = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    bm = block_mask
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
    _block_sparse_fwd[grid](
        q, k, v, out, visits if visits is not None else out, bm.mask,
        bm.full_kv_num_blocks, bm.full_kv_indices, bm.kv_num_blocks, bm.kv_indices,
        head_dim**-0.5, float(softcap), seq, bm.kv_indices.shape[1],
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, RECORD_VISITS=visits is not None,
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="09")
