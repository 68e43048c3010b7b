"""Drill 04 — the FlashAttention backward pass.

Below is a working tiled FlashAttention forward (``attention_forward``) that
also stores, for every query row, the log-sum-exp of its scores

    lse_i = log(sum_j exp(s_ij)),  s_ij = q_i . k_j / sqrt(d)

and a backward (``attention_backward``) that computes dQ, dK and dV for full
and causal attention in three Triton kernels, with its key steps left open.
dQ gets a pass of its own that recomputes S and dP (7 matmuls, not 5): deterministic,
no atomics; FlashAttention-2 adds dQ with atomic adds in the dK/dV loop, and
FlashAttention-3 accumulates it with atomic adds in an fp32 buffer.
In every kernel ``start_m`` / ``start_n`` is the first row / key of a block (an
offset, never a block index).

* TODO 1 — ``_bwd_preprocess``: D_i = rowsum(dO_i * O_i), one float per row.
  As shipped it stores zeros.
* TODO 2 — in both backward loops: rebuild the probabilities of a tile from
  the stored lse, P_ij = exp(s_ij - lse_i): no max, no sum, no second softmax
  pass.  As shipped it normalises by the tile's own maximum, which is not P.
* TODO 3 — in both loops: dS = P * (dP - D).  As shipped it is P * dP.
* TODO 4 — causal: (a) the loop bounds (the dK/dV loop may start at the
  diagonal, the dQ loop may stop there) and (b) the mask inside the blocks
  that straddle the diagonal.  As shipped both loops visit every block and
  mask nothing.

The math, for one row block at a time (see drill 03 and the FlashAttention-2
paper, section 3.1.2):

    dV = P^T dO          dP = dO V^T          dS = P * (dP - D)
    dQ = dS K / sqrt(d)  dK = dS^T Q / sqrt(d)

The launchers the tutor calls are documented at the end of the file.  The
tutor runs *your* ``attention_forward`` to get O and lse (it checks O too:
leave the forward as it is) and compares dQ, dK and dV with torch autograd in
float64.  Check your work with ``flashtutor check 04`` or by saving the file
while ``flashtutor launch`` runs; as shipped it prints FAILED.
"""

import torch
import triton
import triton.language as tl

# Tile sizes: a tile is BLOCK_M query rows x BLOCK_N keys.  64 x 64 fp16 tiles
# fit in shared memory for head_dim up to 128 and keep the tensor cores busy.
BLOCK_M = 64
BLOCK_N = 64


# =====================================================================================
# Forward (given, leave it as it is): O = softmax(s) V, and the per-row log-sum-exp for the backward
# =====================================================================================
@triton.jit
def _attn_fwd(
    Q, K, V, Out, LSE,  # q/k/v/out: (batch*heads, seq, head_dim); LSE: (batch*heads, seq) fp32
    sm_scale,  # 1 / sqrt(head_dim)
    N_CTX,  # sequence length (any value; need not be a multiple of the block)
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    # axis 0 picks the query block, axis 1 the (batch, head) pair
    start_m = tl.program_id(0) * BLOCK_M  # the first query row of this program's block
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM  # int64: batch*heads*seq*dim can pass 2**31
    row_base = off_bh.to(tl.int64) * N_CTX  # LSE holds one float per row

    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX

    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    # running max m_i and sum l_i of exp2 of the scores (log2 units), and the output accumulator
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e)

    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, N_CTX)  # no block wholly in the future
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=col_ok[None, :], other=0.0)
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(col_ok[None, :], qk, float("-inf"))
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(Out.dtype.element_ty), mask=row_ok[:, None])
    # lse in natural-log units of the scaled scores: log2(sum 2^x) = m + log2(l), times ln(2)
    tl.store(LSE + row_base + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=row_ok)


# =====================================================================================
# Backward, step 1 (TODO 1): D_i = rowsum(dO_i * O_i)
# =====================================================================================
@triton.jit
def _bwd_preprocess(
    Out, DO, Delta,  # out/dO: (batch*heads, seq, head_dim); Delta: (batch*heads, seq) fp32
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M  # the first row of this program's block
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM
    row_base = off_bh.to(tl.int64) * N_CTX
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX

    # -- TODO 1: D_i = rowsum(dO_i * O_i) -------------------------------------------------
    # Load this block's rows of O and dO (rows past N_CTX as zeros) and sum their
    # elementwise product along head_dim, in fp32.  D_i equals rowsum(P_i * dP_i),
    # the term the softmax's Jacobian subtracts, at the cost of two (N, d) reads.
    delta = tl.zeros([BLOCK_M], dtype=tl.float32)
    tl.store(Delta + row_base + offs_m, delta, mask=row_ok)


# =====================================================================================
# Backward, step 2: dK and dV — one program per key block, looping over query blocks
# =====================================================================================
@triton.jit
def _bwd_dkdv(
    Q, K, V, DO, LSE, Delta, DK, DV, Visits,  # Visits: (batch*heads, key blocks, query blocks) int32
    sm_scale,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    RECORD_VISITS: tl.constexpr,
):
    start_n = tl.program_id(0) * BLOCK_N  # the first key of the block this program owns
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM
    row_base = off_bh.to(tl.int64) * N_CTX

    cols = start_n + tl.arange(0, BLOCK_N)  # the keys of this program
    offs_m = tl.arange(0, BLOCK_M)  # query rows, relative to the current query block
    offs_d = tl.arange(0, HEAD_DIM)
    col_ok = cols < N_CTX  # the last key block may hang past the end of the sequence

    # this program's K and V tiles stay in registers for the whole loop
    k = tl.load(K + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
    v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
    # dK and dV of these keys are sums over every query row: accumulate in fp32 across the loop
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)

    # -- TODO 4a: the causal bound ---------------------------------------------------------
    # Row r sees key c only when r >= c.  With CAUSAL set, which query blocks can
    # see none of this program's keys?  Start the loop after them (a multiple of
    # BLOCK_M, never past the block that holds this program's first key).
    lo = 0

    for start_m in range(lo, N_CTX, BLOCK_M):
        rows = start_m + offs_m
        row_ok = rows < N_CTX
        q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
        do = tl.load(DO + base + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
        lse = tl.load(LSE + row_base + rows, mask=row_ok, other=0.0)
        delta = tl.load(Delta + row_base + rows, mask=row_ok, other=0.0)

        # scores of this tile: (BLOCK_M, BLOCK_N), in natural-log units like lse
        qk = tl.dot(q, tl.trans(k)) * sm_scale
        # -- TODO 2: P from the stored lse ---------------------------------------------------
        # As shipped: exp relative to this tile's own maximum - a number between 0
        # and 1, but not the softmax probability.  The forward stored lse_i for
        # every row: P_ij = exp(s_ij - lse_i) exactly, with no max and no sum.
        p = tl.exp(qk - tl.max(qk, 1)[:, None])
        # pairs that do not exist (a row or key past the end) get P = 0
        valid = row_ok[:, None] & col_ok[None, :]
        # -- TODO 4b: the causal mask: with CAUSAL set, pairs with key > row get P = 0 too
        p = tl.where(valid, p, 0.0)

        # dV += P^T dO
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        # -- TODO 3: dS = P * (dP - D), with dP = dO V^T --------------------------------------
        # As shipped the D term is missing.  delta holds D for this tile's rows.
        dp = tl.dot(do, tl.trans(v))
        ds = p * dp
        # dK += dS^T Q  (the 1/sqrt(d) of the scores is applied once, after the loop)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)

        if RECORD_VISITS:
            n_n = tl.cdiv(N_CTX, BLOCK_N)
            n_m = tl.cdiv(N_CTX, BLOCK_M)
            tl.store(Visits + (off_bh * n_n + start_n // BLOCK_N) * n_m + start_m // BLOCK_M, 1)

    dk = dk * sm_scale
    tl.store(DK + base + cols[:, None] * HEAD_DIM + offs_d[None, :], dk.to(DK.dtype.element_ty), mask=col_ok[:, None])
    tl.store(DV + base + cols[:, None] * HEAD_DIM + offs_d[None, :], dv.to(DV.dtype.element_ty), mask=col_ok[:, None])


# =====================================================================================
# Backward, step 3: dQ — one program per query block, looping over key blocks
# =====================================================================================
@triton.jit
def _bwd_dq(
    Q, K, V, DO, LSE, Delta, DQ, Visits,  # Visits: (batch*heads, query blocks, key blocks) int32
    sm_scale,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    RECORD_VISITS: tl.constexpr,
):
    start_m = tl.program_id(0) * BLOCK_M  # the first row of the query block this program owns
    off_bh = tl.program_id(1)
    base = off_bh.to(tl.int64) * N_CTX * HEAD_DIM
    row_base = off_bh.to(tl.int64) * N_CTX

    rows = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)  # keys, relative to the current key block
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = rows < N_CTX

    # everything per row stays in registers for the whole loop
    q = tl.load(Q + base + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + base + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    lse = tl.load(LSE + row_base + rows, mask=row_ok, other=0.0)
    delta = tl.load(Delta + row_base + rows, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # -- TODO 4a: the causal bound ---------------------------------------------------------
    # With CAUSAL set, key blocks wholly after this block's last row are never
    # seen: end the loop before them (but never before the diagonal block).
    hi = N_CTX

    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        k = tl.load(K + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)

        qk = tl.dot(q, tl.trans(k)) * sm_scale
        # -- TODO 2: P from the stored lse (as in the dK/dV loop) -----------------------------
        p = tl.exp(qk - tl.max(qk, 1)[:, None])
        valid = row_ok[:, None] & col_ok[None, :]
        # -- TODO 4b: the causal mask (as in the dK/dV loop)
        p = tl.where(valid, p, 0.0)
        # -- TODO 3: dS = P * (dP - D) (as in the dK/dV loop) ---------------------------------
        dp = tl.dot(do, tl.trans(v))
        ds = p * dp
        # dQ += dS K
        dq += tl.dot(ds.to(k.dtype), k)

        if RECORD_VISITS:
            n_m = tl.cdiv(N_CTX, BLOCK_M)
            n_n = tl.cdiv(N_CTX, BLOCK_N)
            tl.store(Visits + (off_bh * n_m + start_m // BLOCK_M) * n_n + start_n // BLOCK_N, 1)

    dq = dq * sm_scale
    tl.store(DQ + base + rows[:, None] * HEAD_DIM + offs_d[None, :], dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])


# =====================================================================================
# Launchers: what the tutor calls
# =====================================================================================
def attention_forward(q, k, v, causal=False):
    """(O, lse) for fp16 q, k, v of shape (batch, heads, seq, head_dim); lse is fp32
    (batch, heads, seq), natural log of sum_j exp(q_i . k_j / sqrt(d))."""
    batch, heads, seq, head_dim = q.shape
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    lse = torch.empty((batch, heads, seq), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(seq, BLOCK_M), batch * heads)
    _attn_fwd[grid](
        q, k, v, out, lse, head_dim**-0.5, seq,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, CAUSAL=causal,
    )
    return out, lse


def attention_backward(q, k, v, o, lse, do, causal=False, dq=None, dk=None, dv=None, dkdv_visits=None, dq_visits=None):
    """(dQ, dK, dV) of attention given the forward's ``o`` and ``lse`` and the upstream
    gradient ``do``.  ``dq``/``dk``/``dv`` (optional) receive the results.
    ``dkdv_visits`` (optional, int32, (batch*heads, key blocks, query blocks), zeroed)
    and ``dq_visits`` ((batch*heads, query blocks, key blocks)) get a 1 for every
    block pair each loop visits."""
    batch, heads, seq, head_dim = q.shape
    q, k, v, o, do, lse = (t.contiguous() for t in (q, k, v, o, do, lse))
    dq = torch.empty_like(q) if dq is None else dq
    dk = torch.empty_like(k) if dk is None else dk
    dv = torch.empty_like(v) if dv is None else dv
    delta = torch.empty((batch, heads, seq), dtype=torch.float32, device=q.device)
    sm_scale = head_dim**-0.5

    _bwd_preprocess[(triton.cdiv(seq, BLOCK_M), batch * heads)](o, do, delta, seq, HEAD_DIM=head_dim, BLOCK_M=BLOCK_M)
    _bwd_dkdv[(triton.cdiv(seq, BLOCK_N), batch * heads)](
        q, k, v, do, lse, delta, dk, dv, dkdv_visits if dkdv_visits is not None else dk,
        sm_scale, seq,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        CAUSAL=causal, RECORD_VISITS=dkdv_visits is not None,
    )
    _bwd_dq[(triton.cdiv(seq, BLOCK_M), batch * heads)](
        q, k, v, do, lse, delta, dq, dq_visits if dq_visits is not None else dq,
        sm_scale, seq,
        HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        CAUSAL=causal, RECORD_VISITS=dq_visits is not None,
    )
    return dq, dk, dv


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal):
        o, lse = attention_forward(q, k, v, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(q, k, v, o, lse, do, ctx.causal)
        return dq, dk, dv, None


def attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(d)) v with this file's forward and backward kernels
    (``attention(q, k, v).backward(do)`` works like torch's own)."""
    return _Attention.apply(q, k, v, causal)


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="04")
