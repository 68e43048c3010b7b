"""Drill 08 — variable-length (packed) sequences and chunked prefill.

Sequences of different lengths are packed one after another into q, k and v
(flash-attn's varlen layout: (total_tokens, heads, head_dim)); ``cu_seqlens_q``
and ``cu_seqlens_k`` (int32, batch + 1 entries) hold where each sequence
starts.  Sequence b has Nq = cu_seqlens_q[b+1] - cu_seqlens_q[b] queries and
Nk = cu_seqlens_k[b+1] - cu_seqlens_k[b] >= Nq keys, and its queries are the
LAST Nq of its Nk tokens (chunked prefill, or a prompt after a prefix cache):
query row i sits at key position i + (Nk - Nq) and sees keys 0 .. i + Nk - Nq.
As shipped the kernel treats every sequence as self-attention packed like the
queries.  Make it right, then make it fast:

* TODO 1 - the sequence's keys.  Where do sequence b's keys start in the
  packed k and v, and how many are there?  (Not where its queries start.)
* TODO 2 - the loop bound.  The last key any row of the tile sees is its last
  row + (Nk - Nq): stop there, and never past the sequence's last key.
* TODO 3 - the mask.  Row i sees key c when c <= i + (Nk - Nq), both
  in-sequence indices; keys past the sequence's end belong to the next one.

Check your work with ``flashtutor check 08`` (or save the file while
``flashtutor launch`` / ``flashtutor watch`` runs).  As shipped it prints
FAILED.
"""

import torch
import triton
import triton.language as tl

# One program computes BLOCK_M query rows of one head of one sequence; the
# inner loop walks that sequence's keys BLOCK_N at a time.
BLOCK_M = 32
BLOCK_N = 32


@triton.jit
def _varlen_fwd(
    Q, K, V, Out, Visits,  # q/out: (total_q, H, head_dim); k/v: (total_k, H, head_dim); contiguous
    CuQ, CuK,  # int32 (batch + 1,): where each sequence starts in the packed q / k
    sm_scale,  # 1 / sqrt(head_dim)
    H,  # heads
    MAX_Q, MAX_K,  # the longest Nq and Nk: the visit map is (batch*H, cdiv(MAX_Q, BLOCK_M), cdiv(MAX_K, BLOCK_N))
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    RECORD_VISITS: tl.constexpr,  # compiled out unless the tutor asks which blocks were visited
):
    # -- which tile is this program? -----------------------------------------------------
    # axis 0 picks the query block inside the sequence, axis 1 the (sequence, head) pair.
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H

    # -- this sequence's rows in the packed tensors --------------------------------------
    q_start = tl.load(CuQ + off_b)
    seqlen_q = tl.load(CuQ + off_b + 1) - q_start
    # -- TODO 1: this sequence's keys ------------------------------------------------------
    # As shipped the keys are taken where the queries are (self-attention packing):
    # right only when every sequence has as many keys as queries.  cu_seqlens_k
    # (CuK) says where sequence b's keys start and end in the packed k and v.
    k_start = q_start
    seqlen_k = seqlen_q
    # the grid is sized for the longest sequence: shorter ones have nothing here
    if start_m * BLOCK_M >= seqlen_q:
        return
    # query row i is token i + diag of the sequence: it sees keys 0 .. i + diag
    diag = seqlen_k - seqlen_q

    row_stride = H * HEAD_DIM  # one token of every head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)  # query rows, in-sequence
    offs_n = tl.arange(0, BLOCK_N)  # key columns, relative to the current block
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seqlen_q  # the last query block may hang past this sequence's end
    q_ptrs = Q + (q_start + offs_m[:, None]).to(tl.int64) * row_stride + off_h * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)

    # -- running softmax state, one entry per query row (fp32): see drill 02 -------------
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e))

    # -- TODO 2: the loop bound -----------------------------------------------------------
    # As shipped the loop stops at the tile's last row, as if every chunk started
    # at key 0.  The rows are the LAST Nq tokens: row i is token i + diag.
    hi = tl.minimum((start_m + 1) * BLOCK_M, seqlen_k)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n  # key columns, in-sequence
        col_ok = cols < seqlen_k  # never past this sequence's last key (the next one starts there)
        kv_rows = (k_start + cols).to(tl.int64) * row_stride + off_h * HEAD_DIM
        k = tl.load(K + kv_rows[None, :] + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        # -- TODO 3: the causal mask ----------------------------------------------------------
        # As shipped row i sees keys c <= i: the diagonal of a chunk that started
        # at key 0.  col_ok keeps the next sequence's keys out.
        visible = col_ok[None, :] & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(visible, qk, float("-inf"))

        # -- online softmax update (drill 02) ----------------------------------------------
        # with Nk >= Nq every row (padding rows too) sees key 0 of the first block, so m_new is
        # finite here; a mask that lets a row see no key of the first block (TODO 3 written wrong)
        # leaves it -inf, and subtracting 0 there keeps exp2(-inf - -inf) = NaN out
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(qk - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + kv_rows[:, None] + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

        # -- bookkeeping for the tutor: mark (query block, key block) as visited -----------
        if RECORD_VISITS:
            n_m = tl.cdiv(MAX_Q, BLOCK_M)
            n_n = tl.cdiv(MAX_K, BLOCK_N)
            tl.store(Visits + (off_bh * n_m + start_m) * n_n + start_n // BLOCK_N, 1)

    # -- epilogue: normalise and write only this sequence's rows --------------------------
    acc = acc / tl.where(row_ok, l_i, 1.0)[:, None]
    o_ptrs = Out + (q_start + offs_m[:, None]).to(tl.int64) * row_stride + off_h * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


def attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, out=None, visits=None):
    """Causal attention over packed sequences, each query chunk the last tokens of its keys.

    q: (total_q, H, head_dim); k, v: (total_k, H, head_dim), fp16; cu_seqlens_q,
    cu_seqlens_k: int32 (batch + 1,), starting at 0; max_seqlen_q / max_seqlen_k:
    the longest Nq / Nk.  ``out`` (optional) receives the result; ``visits``
    (optional, int32, (batch*H, cdiv(max_seqlen_q, BLOCK_M), cdiv(max_seqlen_k,
    BLOCK_N)), zeroed) gets a 1 for every (query block, key block) visited.
    """
    total_q, heads, head_dim = q.shape
    batch = cu_seqlens_q.numel() - 1
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    # one program per (query block of the longest sequence, sequence*head)
    grid = (triton.cdiv(max_seqlen_q, BLOCK_M), batch * heads)
    _varlen_fwd[grid](
        q, k, v, out, visits if visits is not None else out,
        cu_seqlens_q, cu_seqlens_k,
        head_dim**-0.5, heads, max_seqlen_q, max_seqlen_k,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        RECORD_VISITS=visits is not None,
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="08")
