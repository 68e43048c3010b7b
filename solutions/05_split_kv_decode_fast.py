"""Drill 05 — split-KV decoding, the fast variant.

The same contract and the same exact merge as ``05_split_kv_decode_solution.py``;
read that one first.  A decode step reads every K/V element once and does two
multiply-adds with it, so it is bound by HBM bandwidth: the kernel is fast when
enough loads are in flight to cover the memory latency.  What changes here:

1. **Both loads first.**  Each step issues the K and the V tile before any
   arithmetic, so the V load overlaps the scores' reduction instead of waiting
   for it.
2. **Bigger tiles, pipelined.**  On a GPU a handful of configurations (64 or
   128 positions per step, 4 or 8 warps, 2 to 4 pipeline stages) is autotuned
   per head dim and cache length: more bytes per step and loads issued stages
   ahead keep more requests in flight per SM.  Under the interpreter, and
   whenever the tutor records the visit map, the fixed ``BLOCK_N`` below is
   used, so the map's grid is the one the tutor expects.
3. **The split count from the machine.**  A slice per program: enough programs
   to fill every SM about four times over (``batch * heads * splits``), never
   slices shorter than two tiles.  The slice size is a multiple of the largest
   tile, so every configuration's tiles stay inside one slice (``split_count``,
   which bench/decode_speed.py reports too).

Check it with ``flashtutor check solutions/05_split_kv_decode_fast.py --drill 05``.
"""

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # positions per step when the tutor records visits (and under the interpreter)
TILE_MULTIPLE = 128  # the largest tile a configuration uses: slices are a multiple of it
NUM_SPLITS = 4  # the split count off a GPU (on one it follows the SM count, see split_count)


@triton.jit
def _decode_split(
    Q, K, V, Lengths,  # q: (batch*heads, head_dim); k/v: (batch*heads, max_len, head_dim); lengths: (batch,)
    MidM, MidL, MidO,  # per-slice state: m and l (batch*heads, NUM_SPLITS), o (batch*heads, NUM_SPLITS, head_dim)
    Visits,  # int32 (batch*heads, cdiv(max_len, BLOCK_N)): the slice (+1) that read each cache block
    sm_scale,
    MAX_LEN,
    SPLIT_SIZE,  # positions per slice, a multiple of every BLOCK_N used
    HEADS,
    HEAD_DIM: tl.constexpr,
    BLOCK_N: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    RECORD_VISITS: tl.constexpr,
):
    off_bh = tl.program_id(0)
    split = tl.program_id(1)
    length = tl.load(Lengths + off_bh // HEADS)
    kv_base = off_bh.to(tl.int64) * MAX_LEN * HEAD_DIM

    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    q = tl.load(Q + off_bh * HEAD_DIM + offs_d).to(tl.float32)
    qk_scale = sm_scale * 1.44269504  # m is kept in the exp2 domain, as the merge expects

    lo = split * SPLIT_SIZE
    hi = tl.minimum(lo + SPLIT_SIZE, length)

    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < hi
        # -- both tiles requested before any arithmetic: the V load overlaps the scores --
        k = tl.load(K + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        v = tl.load(V + kv_base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=col_ok[:, None], other=0.0)
        qk = tl.sum(k.to(tl.float32) * q[None, :], 1) * qk_scale
        qk = tl.where(col_ok, qk, float("-inf"))
        # -- the online softmax update of the clear solution --
        m_new = tl.maximum(m_i, tl.max(qk, 0))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        m_i = m_new

        if RECORD_VISITS:
            tl.store(Visits + off_bh * tl.cdiv(MAX_LEN, BLOCK_N) + start_n // BLOCK_N, split + 1)

    state = off_bh * NUM_SPLITS + split
    tl.store(MidM + state, m_i)
    tl.store(MidL + state, l_i)
    tl.store(MidO + state * HEAD_DIM + offs_d, acc)


# the GPU's configurations: tile, warps, stages (the split count is the launcher's)
_CONFIGS = [triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=s)
            for n in (64, 128) for w in (4, 8) for s in (2, 3, 4)]
_decode_split_tuned = triton.autotune(configs=_CONFIGS, key=["HEAD_DIM", "MAX_LEN", "NUM_SPLITS"])(_decode_split)


@triton.jit
def _decode_combine(
    MidM, MidL, MidO, Out,
    HEAD_DIM: tl.constexpr,
    NUM_SPLITS: tl.constexpr,
    SPLITS_POW2: tl.constexpr,
):
    # the exact merge of the clear solution: every slice brought to the global maximum
    off_bh = tl.program_id(0)
    offs_s = tl.arange(0, SPLITS_POW2)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ok = offs_s < NUM_SPLITS
    state = off_bh * NUM_SPLITS + offs_s
    m = tl.load(MidM + state, mask=s_ok, other=float("-inf"))
    l = tl.load(MidL + state, mask=s_ok, other=0.0)
    o = tl.load(MidO + state[:, None] * HEAD_DIM + offs_d[None, :], mask=s_ok[:, None], other=0.0)
    m_max = tl.max(m, 0)
    w = tl.exp2(m - m_max)
    l_total = tl.sum(l * w, 0)
    acc = tl.sum(o * w[:, None], 0) / l_total
    tl.store(Out + off_bh * HEAD_DIM + offs_d, acc.to(Out.dtype.element_ty))


def split_count(batch: int, heads: int, max_len: int, device: torch.device | str) -> int:
    """The split count ``attention`` uses when it is given none, for ``batch`` sequences
    of ``heads`` heads and a cache of ``max_len`` positions on ``device``: about four
    programs per SM (``batch * heads * splits`` of them), no slice shorter than two of
    the largest tiles, at most 32; off a GPU, ``NUM_SPLITS``."""
    device = torch.device(device)
    if device.type != "cuda":
        return NUM_SPLITS
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    most = max(1, max_len // (2 * TILE_MULTIPLE))
    return max(1, min(most, 32, triton.cdiv(4 * sms, batch * heads)))


def attention(q, k_cache, v_cache, lengths, out=None, visits=None, num_splits=None):
    """One decode step, as ``05_split_kv_decode_solution.attention`` (same arguments)."""
    batch, heads, head_dim = q.shape
    max_len = k_cache.shape[2]
    num_splits = num_splits or split_count(batch, heads, max_len, q.device)
    q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
    lengths = lengths.to(device=q.device, dtype=torch.int32).contiguous()
    if out is None:
        out = torch.empty_like(q)
    split_size = triton.cdiv(triton.cdiv(max_len, num_splits), TILE_MULTIPLE) * TILE_MULTIPLE
    mid_m = torch.empty((batch * heads, num_splits), dtype=torch.float32, device=q.device)
    mid_l = torch.empty_like(mid_m)
    mid_o = torch.empty((batch * heads, num_splits, head_dim), dtype=torch.float32, device=q.device)
    args = (q, k_cache, v_cache, lengths, mid_m, mid_l, mid_o, visits if visits is not None else mid_m,
            head_dim**-0.5, max_len, split_size, heads)
    grid = (batch * heads, num_splits)
    if visits is not None or q.device.type != "cuda":  # the tutor's fixed tile (its visit map's grid)
        _decode_split[grid](*args, HEAD_DIM=head_dim, BLOCK_N=BLOCK_N, NUM_SPLITS=num_splits,
                            RECORD_VISITS=visits is not None)
    else:
        _decode_split_tuned[grid](*args, HEAD_DIM=head_dim, NUM_SPLITS=num_splits, RECORD_VISITS=False)
    _decode_combine[(batch * heads,)](
        mid_m, mid_l, mid_o, out,
        HEAD_DIM=head_dim, NUM_SPLITS=num_splits, SPLITS_POW2=max(2, triton.next_power_of_2(num_splits)),
    )
    return out


if __name__ == "__main__":
    from tutor.standalone import check_this_file

    check_this_file(__file__, drill="05")
