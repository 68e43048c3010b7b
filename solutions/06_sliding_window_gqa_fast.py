"""Drill 06 — sliding-window causal attention with grouped K/V heads, the fast variant.

The same answer and the same contract as ``06_sliding_window_gqa_solution.py``
(``attention(q, k, v, window, out=None, visits=None)``, the visit map on the
fixed ``BLOCK_M`` x ``BLOCK_N`` grid below), tuned for a GPU (written against
Hopper, the H100/H200) while staying readable.  Read the clear solution first;
every change here says what it buys:

1. **Only the K/V blocks the window touches, in three stages.**  The clear
   solution already starts at the block holding the first row's oldest key; it
   then masks every block.  But for a query block of rows m0 .. m0 + BLOCK_M - 1
   the keys split three ways:

       keys:  lo ........ mid ................ m0 ........... hi
              | far edge  |      interior      |   diagonal   |
              | (masked)  |     (no mask)      |   (masked)   |

   * the *far edge* [lo, mid): some rows' windows have not started yet (a key
     there is too old for the tile's last rows): masked, one or two blocks;
   * the *interior* [mid, m0): every key is inside every row's window and before
     every row, and inside the sequence: no mask, no predicated loads;
   * the *diagonal* [m0, hi): keys after some rows (the causal side) and, on the
     last query block, keys past the end of the sequence: masked.

   With a window of W keys a query block visits about (W + BLOCK_M) / BLOCK_N
   blocks, of which only about 2 + BLOCK_M / BLOCK_N pay for a mask, however
   long the sequence.  (As Triton's tutorial 06 splits causal attention, and
   ``01_causal_mask_fast.py``.)
2. **The query heads of a GQA group share their K/V tiles** (``PACK``).  Query
   heads h0 .. h0 + PACK - 1 of one group read the same K/V head, so one program
   can stack their query tiles into one tall tile of PACK * BLOCK_M rows (same
   positions, different heads) and load each K/V tile once for all of them.  What
   that buys under a window: the tile is as tall as a plain 128-row tile (the
   tensor cores stay busy) but spans only BLOCK_M positions, so the blocks it
   visits beyond the window (the W + BLOCK_M above) shrink, and so does the
   masked far edge.  A pack of 2 x 64 rows over W = 256 visits about 320 keys per
   row for 256 useful ones; one head's 128 rows visit about 384.
3. **exp2 with log2(e) folded into the scale**, applied in the same multiply-add
   that subtracts the running maximum: one FMA per score (unmasked stage).
4. **Heavy query blocks first.**  Query blocks of the first W rows see fewer keys
   (their window is cut by key 0); every later block does the same work.  The
   grid launches the last query block first, so the light ones fill the last wave.
5. **TMA loads on Hopper.**  On compute capability 9.0+ the Q, K and V tiles
   arrive through tensor descriptors served by the bulk tensor copy engine (TMA):
   one instruction per tile, no per-thread address arithmetic or predication.  Q
   is read through a 3-D descriptor over (batch*H, seq, head_dim), one box of
   (PACK, BLOCK_M, head_dim): positions past the sequence end are zero-filled per
   head.  K and V are read through 2-D descriptors over (batch*H_KV*seq, head_dim)
   as in ``01_causal_mask_fast.py``.  Elsewhere (and under the interpreter unless
   ``FLASHTUTOR_TMA=1``) the same kernel uses pointer loads: ``TMA`` is a
   constexpr, one kernel, two builds.
6. **A short list of configurations, autotuned on the GPU** per head dim: rows
   per head, keys per block, heads per pack, warps and pipeline stages
   (``CONFIGS``).  A pack must divide the group (H // H_KV): the others are
   pruned before tuning.  Under the interpreter, and whenever the tutor records
   the visit map, the fixed ``BLOCK_M`` x ``BLOCK_N`` tiles below run (the map's
   grid is the one the tutor expects), packed by ``FIXED_PACK`` where the group
   allows.  ``attention_with`` launches any one configuration, so a bench can run
   every one of them against the reference (``bench/sliding_window_speed.py
   --kernels fast --all-configs``).

Check it with ``flashtutor check solutions/06_sliding_window_gqa_fast.py --drill 06``.
"""

import inspect
import os

import torch
import triton
import triton.language as tl

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # triton too old for host-side tensor descriptors
    TensorDescriptor = None

# The tiles of the visit map and of the interpreter: BLOCK_M query rows of one head
# by BLOCK_N keys.  FIXED_PACK query heads share a program there where the group allows.
BLOCK_M = 64
BLOCK_N = 64
FIXED_PACK = 2

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


def use_tma() -> bool:
    """TMA on Hopper and newer; ``FLASHTUTOR_TMA=0/1`` forces either path (the
    interpreter runs both, so both can be checked on a CPU)."""
    forced = os.environ.get("FLASHTUTOR_TMA")
    if forced is not None:
        return forced == "1" and TensorDescriptor is not None
    if TensorDescriptor is None or INTERPRETING or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability()[0] >= 9


@triton.jit
def _swa_inner(
    acc, l_i, m_i, q,  # running state and the (PACK * BLOCK_M, HEAD_DIM) query tile
    K, V, kv_row0,  # TMA: descriptors and this K/V head's first row; else pointers to its first row
    Visits, visit_rows,  # RECORD_VISITS: each packed head's row of the visit map
    qk_scale, N_CTX, WINDOW, lo, hi,  # the keys [lo, hi) this stage visits
    pos, offs_n, offs_d,  # pos: the sequence position of each tile row
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,  # an edge stage: mask the window's far side, the diagonal and the sequence end
    RECORD_VISITS: tl.constexpr,
    TMA: tl.constexpr,
):
    """Stream the K/V blocks [lo, hi) into the running (m_i, l_i, acc) state."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        cols = start_n + offs_n  # the keys of this block

        # -- S = Q K^T for the tile: (PACK * BLOCK_M, BLOCK_N), unscaled, fp32 ----------
        if TMA:
            # whole (BLOCK_N, HEAD_DIM) tiles of the flattened (batch*H_KV*seq, head_dim)
            # view.  Only the diagonal stage of the last query block reaches past this
            # head's last key: those rows are the next head's (or zeros past the tensor),
            # finite, and the mask below gives them p = 0.
            k = K.load([kv_row0 + start_n, 0])
            v = V.load([kv_row0 + start_n, 0])
            qk = tl.dot(q, k.T)
        else:
            # K as a (HEAD_DIM, BLOCK_N) tile, so q @ k needs no transpose
            k_ptrs = K + cols[None, :] * HEAD_DIM + offs_d[:, None]
            v_ptrs = V + cols[:, None] * HEAD_DIM + offs_d[None, :]
            if MASKED:  # the diagonal stage may run past the sequence end: read zeros there
                k = tl.load(k_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
                v = tl.load(v_ptrs, mask=cols[:, None] < N_CTX, other=0.0)
            else:  # the interior lies wholly inside the sequence: no mask, no predication
                k = tl.load(k_ptrs)
                v = tl.load(v_ptrs)
            qk = tl.dot(q, k)

        # -- scale, mask (edge stages only), and the new running maximum ----------------
        if MASKED:
            # Row r (at position pos) sees key c when r - WINDOW < c <= r and c < N_CTX.
            # Masked scores get a large negative offset, not -inf: m_ij stays finite
            # even for a row that sees no key of this block (a far-edge block can be
            # wholly too old for the tile's last rows), so exp2(m_i - m_ij) is never
            # exp2(-inf + inf) = NaN.  Such a row's p is then exp2(0) = 1 for keys it
            # must not see - but its m_ij is ~ -1e6, and the first block with a key it
            # does see (every row sees itself, in the diagonal stage at the latest)
            # rescales that junk by alpha = exp2(-1e6 - m) = 0 exactly.  A row that has
            # already seen a key keeps its real m_i, and its masked keys get
            # p = exp2(-1e6) = 0.
            keep = (cols[None, :] <= pos[:, None]) & (cols[None, :] > pos[:, None] - WINDOW)
            keep = keep & (cols[None, :] < N_CTX)
            qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            # every key is in every row's window: scale and subtract the max in one FMA
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]

        # -- online softmax update (drill 02) --------------------------------------------
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)  # rescales what was accumulated under the old max
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)  # accumulate in place: acc += p @ v
        m_i = m_ij

        # -- bookkeeping for the tutor: this (query block, key block) for every packed head
        if RECORD_VISITS:
            tl.store(Visits + visit_rows + start_n // BLOCK_N, 1)
    return acc, l_i, m_i


@triton.jit
def _swa_fwd(
    Q, K, V, Out, Visits,  # q/out: (batch*H, seq, head_dim); k/v: (batch*H_KV, seq, head_dim); contiguous
    sm_scale,  # 1 / sqrt(head_dim)
    N_CTX,  # sequence length (any value; need not be a multiple of the block)
    WINDOW,  # row r sees keys r - WINDOW + 1 .. r (itself included); WINDOW >= 1
    H,  # query heads
    H_KV,  # K/V heads; H is a multiple of H_KV
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows (positions) per head
    BLOCK_N: tl.constexpr,  # keys per K/V block
    PACK: tl.constexpr,  # query heads of one group per program; divides H // H_KV
    RECORD_VISITS: tl.constexpr,
    TMA: tl.constexpr,  # Q (3-D), K, V (2-D) are tensor descriptors
):
    # the diagonal stage starts at the query block's first row: a K/V block boundary
    tl.static_assert(BLOCK_M % BLOCK_N == 0)

    # -- which tile: heavy query blocks first -----------------------------------------
    # axis 0 picks the query block, the last one first (the first W rows' blocks see
    # fewer keys); axis 1 the pack of PACK consecutive query heads of one batch entry.
    start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    off_bh0 = tl.program_id(1) * PACK  # the pack's first flattened (batch, query head)
    off_b = off_bh0 // H
    # the K/V head the pack shares (a pack never straddles two groups: PACK divides them)
    off_hkv = (off_bh0 % H) // (H // H_KV)
    off_bkv = off_b * H_KV + off_hkv
    kv_row0 = off_bkv * N_CTX  # this K/V head's first row in the flattened view (TMA path)
    if TMA:
        K_in, V_in = K, V
    else:
        kv_base = off_bkv.to(tl.int64) * N_CTX * HEAD_DIM  # int64: batch*heads*seq*dim can pass 2**31
        K_in, V_in = K + kv_base, V + kv_base

    # -- the tall query tile: PACK heads x BLOCK_M positions --------------------------
    # Tile row i belongs to head off_bh0 + i // BLOCK_M, at position m0 + i % BLOCK_M.
    # The mask only ever needs the position; the heads differ only in where q and
    # out live.
    m0 = start_m * BLOCK_M
    offs_i = tl.arange(0, PACK * BLOCK_M)
    pos = m0 + offs_i % BLOCK_M
    row_ok = pos < N_CTX  # the last query block may hang past the end of the sequence
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_rows = (off_bh0 + offs_i // BLOCK_M).to(tl.int64) * N_CTX * HEAD_DIM + pos * HEAD_DIM
    if TMA:
        # one (PACK, BLOCK_M, HEAD_DIM) box: positions past N_CTX read as zeros, per head
        q = Q.load([off_bh0, m0, 0])
        q = tl.reshape(q, [PACK * BLOCK_M, HEAD_DIM])
    else:
        q = tl.load(Q + q_rows[:, None] + offs_d[None, :], mask=row_ok[:, None], other=0.0)

    m_i = tl.full([PACK * BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([PACK * BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([PACK * BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) == exp2(x * log2(e))

    visit_rows = 0
    if RECORD_VISITS:
        n_m = tl.cdiv(N_CTX, BLOCK_M)
        n_n = tl.cdiv(N_CTX, BLOCK_N)
        visit_rows = ((off_bh0 + tl.arange(0, PACK)) * n_m + start_m) * n_n

    # -- the three stages (see the module docstring) ----------------------------------
    # lo: the block holding the first row's oldest key, m0 - WINDOW + 1 (never below 0),
    #     exactly the clear solution's lower bound.
    # mid: the first block start n0 whose every key is inside the *last* row's window:
    #     n0 > (m0 + BLOCK_M - 1) - WINDOW, i.e. n0 >= m0 + BLOCK_M - WINDOW, rounded up
    #     to a block; clamped into [lo, m0] (a window shorter than the tile has no
    #     interior: the far edge then runs up to the diagonal).
    # hi: the end of the last row's block (never past the sequence).
    lo = tl.maximum(m0 - WINDOW + 1, 0) // BLOCK_N * BLOCK_N
    mid = (tl.maximum(m0 + BLOCK_M - WINDOW, 0) + BLOCK_N - 1) // BLOCK_N * BLOCK_N
    mid = tl.minimum(tl.maximum(mid, lo), m0)
    hi = tl.minimum(m0 + BLOCK_M, N_CTX)

    # stage 1, the far edge: keys too old for some rows, masked
    acc, l_i, m_i = _swa_inner(
        acc, l_i, m_i, q, K_in, V_in, kv_row0, Visits, visit_rows, qk_scale, N_CTX, WINDOW, lo, mid,
        pos, offs_n, offs_d, HEAD_DIM, BLOCK_N, True, RECORD_VISITS, TMA)
    # stage 2, the interior: every key in every row's window, unmasked
    acc, l_i, m_i = _swa_inner(
        acc, l_i, m_i, q, K_in, V_in, kv_row0, Visits, visit_rows, qk_scale, N_CTX, WINDOW, mid, m0,
        pos, offs_n, offs_d, HEAD_DIM, BLOCK_N, False, RECORD_VISITS, TMA)
    # stage 3, the diagonal: keys after some rows (and past the sequence end), masked
    acc, l_i, m_i = _swa_inner(
        acc, l_i, m_i, q, K_in, V_in, kv_row0, Visits, visit_rows, qk_scale, N_CTX, WINDOW, m0, hi,
        pos, offs_n, offs_d, HEAD_DIM, BLOCK_N, True, RECORD_VISITS, TMA)

    # -- epilogue: normalise, and store only the rows that exist ----------------------
    # Every row sees its own key, so l_i > 0.  Pointer stores with a mask (never TMA
    # stores: the caller's out may be any view, and a ragged block must not be written).
    acc = acc / l_i[:, None]
    tl.store(Out + q_rows[:, None] + offs_d[None, :], acc.to(Out.dtype.element_ty), mask=row_ok[:, None])


# -- autotuning (GPU only) ------------------------------------------------------------
# (BLOCK_M rows per head, BLOCK_N keys, PACK heads, warps, stages) per head dim.  The
# tile is PACK * BLOCK_M rows tall: 128 in most (what 01 fast found best on an H200),
# reached either by one head's 128 rows or by 2 heads x 64 / 4 heads x 32 (a shorter
# span of positions: fewer blocks visited beyond the window, see the docstring);
# one 256-tall tile at d = 64.  BLOCK_M must be a multiple of BLOCK_N (static_assert).
# The first of each list is 01 fast's pick at that head dim.
CONFIGS = {
    64: [(128, 64, 1, 4, 3), (128, 64, 1, 8, 3), (64, 64, 2, 4, 3), (64, 64, 2, 8, 3), (32, 32, 4, 4, 3),
         (64, 64, 4, 8, 3)],
    128: [(128, 64, 1, 8, 3), (128, 128, 1, 8, 2), (64, 64, 2, 8, 3), (64, 64, 2, 4, 3), (32, 32, 4, 4, 3)],
}


def configs(head_dim: int) -> list[tuple[int, int, int, int, int]]:
    """The autotuned (BLOCK_M, BLOCK_N, PACK, warps, stages) list at this head dim
    (empty where it is not tuned: the fixed tiles run)."""
    return list(CONFIGS.get(head_dim, []))


def _set_block_shapes(nargs):
    """Autotune pre-hook: each config's tiles become the descriptors' box sizes."""
    if nargs["TMA"]:
        nargs["Q"].block_shape = [nargs["PACK"], nargs["BLOCK_M"], nargs["HEAD_DIM"]]
        nargs["K"].block_shape = [nargs["BLOCK_N"], nargs["HEAD_DIM"]]
        nargs["V"].block_shape = [nargs["BLOCK_N"], nargs["HEAD_DIM"]]


def _packs_that_divide_the_group(configs, named_args, **kwargs):
    """Autotune pruning: a pack of query heads must lie inside one group."""
    group = named_args["H"] // named_args["H_KV"]
    return [c for c in configs if group % c.kwargs["PACK"] == 0]


def _autotuned(config_list):
    options = {}
    if "cache_results" in inspect.signature(triton.autotune).parameters:
        options["cache_results"] = True  # keep the choice across processes (one per check)
    return triton.autotune(
        configs=[
            triton.Config({"BLOCK_M": m, "BLOCK_N": n, "PACK": p}, num_warps=w, num_stages=s,
                          pre_hook=_set_block_shapes)
            for m, n, p, w, s in config_list
        ],
        key=["N_CTX", "WINDOW", "H", "H_KV", "HEAD_DIM", "TMA"],
        prune_configs_by={"early_config_prune": _packs_that_divide_the_group},
        **options,
    )(_swa_fwd)


_TUNED = {dim: _autotuned(config_list) for dim, config_list in CONFIGS.items()}


def chosen_config(head_dim: int) -> str:
    """The configuration the autotuned kernel ran last at this head dim, in words (for
    a bench to record), or "fixed" where it has not been tuned."""
    best = getattr(_TUNED.get(head_dim), "best_config", None)
    if best is None:
        return f"fixed {BLOCK_M}x{BLOCK_N} pack<={FIXED_PACK}"
    kw = best.kwargs
    return f"{kw['BLOCK_M']}x{kw['BLOCK_N']} pack {kw['PACK']} w{best.num_warps} s{best.num_stages}"


def attention(q, k, v, window, out=None, visits=None):
    """Sliding-window causal attention with grouped K/V heads, fp16: the clear
    solution's contract.  q: (batch, H, seq, head_dim); k, v: (batch, H_KV, seq,
    head_dim).  ``visits`` (int32, (batch*H, cdiv(seq, BLOCK_M), cdiv(seq, BLOCK_N)),
    zeroed) gets a 1 for every (query block, key block) pair visited."""
    return attention_with(q, k, v, window, out=out, visits=visits)


def attention_with(q, k, v, window, config=None, out=None, visits=None, tma=None):
    """``attention`` with one (BLOCK_M, BLOCK_N, PACK, warps, stages) configuration
    given, for a bench or test that checks every configuration, not only the one
    autotuning picks.  A config of None: the autotuned one on a GPU, the fixed tiles
    under the interpreter, while recording visits (the map's grid) or at an untuned
    head dim.  ``tma``: None for ``use_tma()``.  A config whose pack does not divide
    the group raises ValueError (the autotuner prunes it)."""
    batch, heads, seq, head_dim = q.shape
    heads_kv = k.shape[1]
    group = heads // heads_kv
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if out is None:
        out = torch.empty_like(q)
    record = visits is not None
    if config is None and (record or INTERPRETING or head_dim not in _TUNED):
        pack = FIXED_PACK if group % FIXED_PACK == 0 else 1
        config = (BLOCK_M, BLOCK_N, pack, 4, 3)
    if config is not None and group % config[2]:
        raise ValueError(f"a pack of {config[2]} query heads does not divide the group of {group}")
    if record and config[:2] != (BLOCK_M, BLOCK_N):
        raise ValueError(f"the visit map's grid is {BLOCK_M}x{BLOCK_N}; config {config} would not fill it")
    tma = use_tma() if tma is None else tma
    if tma:  # box sizes of this config (or the fixed tiles); the pre-hook resizes them per tuned config
        m, n, p = config[:3] if config is not None else (BLOCK_M, BLOCK_N, 1)
        q_in = TensorDescriptor.from_tensor(q.view(batch * heads, seq, head_dim), [p, m, head_dim])
        k_in, v_in = (TensorDescriptor.from_tensor(t.view(batch * heads_kv * seq, head_dim), [n, head_dim])
                      for t in (k, v))
    else:
        q_in, k_in, v_in = q, k, v
    args = (q_in, k_in, v_in, out, visits if record else out, head_dim**-0.5, seq, window, heads, heads_kv)
    if config is not None:
        m, n, p, warps, stages = config
        grid = (triton.cdiv(seq, m), batch * heads // p)
        _swa_fwd[grid](*args, HEAD_DIM=head_dim, BLOCK_M=m, BLOCK_N=n, PACK=p, RECORD_VISITS=record, TMA=tma,
                       num_warps=warps, num_stages=stages)
    else:
        grid = lambda meta: (triton.cdiv(seq, meta["BLOCK_M"]), batch * heads // meta["PACK"])  # noqa: E731
        _TUNED[head_dim][grid](*args, HEAD_DIM=head_dim, RECORD_VISITS=False, TMA=tma)
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="06", explain_speedup=True)
