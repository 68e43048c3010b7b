"""Reference attention and the wrong answers students usually compute.

Everything here is plain PyTorch in float64.  ``attention_reference`` is the
right answer; the ``*_variants`` functions compute what a kernel with one
known mistake would output, so a student's output can be matched against them
(mistake fingerprinting) instead of guessed at.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# (rows, keys) -> bool: may query row r see key c?  Both are index tensors.
KeyRule = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# a hostile case's "far below" rows (drills 08, 09): every score (natural units) near -FAR_BELOW, so
# exp or exp2 of a score minus a running maximum that started at 0, not -inf, underflows fp32
FAR_BELOW = 120.0


def place_far_below(q: torch.Tensor, k: torch.Tensor, a: float, q_scale: float = 1.0) -> None:
    """In place: q (standard-normal noise times ``q_scale``) becomes a e0 + noise / 4 and k
    (standard-normal noise) -b e0 + noise / 4, with a b / sqrt(d) = FAR_BELOW: every score of a
    row lies within a few units of -FAR_BELOW (q's own noise along e0 shifts a whole row by about
    FAR_BELOW / (4 a), keys differ by about 0.3): an ordinary softmax over score differences."""
    q *= 0.25 / q_scale
    k *= 0.25
    q[..., 0] += a
    k[..., 0] -= FAR_BELOW * q.shape[-1] ** 0.5 / a


def far_below_words(subject: str, then: str | None = "") -> str:
    """Rows whose every score lies near -FAR_BELOW, named by ``subject`` (e.g. "Those rows are
    all in sequence 2 of that case"), and what underflows there, followed by ``then`` (what
    the row's output becomes, e.g. ", and the final division is then 0/0"); with ``then``
    None, only where they are (the measurement does not show the underflow's outcome)."""
    where = f" {subject}, whose every score lies near -{FAR_BELOW:.0f}"
    if then is None:
        return where + "."
    return (where + ": there exp or exp2 of a score minus a maximum far above it (0, for one: a running maximum"
            " that does not start at -inf, that is set to 0 after a block where the row saw no key, or that is"
            f" taken before the mask over keys past the end, which load as 0 and score 0) underflows to 0 for every"
            f" key{then}.")


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v in float64, causal or full."""
    seq = q.shape[-2]
    rule: KeyRule = (lambda r, c: c <= r) if causal else (lambda r, c: c < seq)
    return masked_attention(q, k, v, rule)


def masked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: KeyRule,
    padded_keys: int = 0,
    stream_block: int | None = None,
) -> torch.Tensor:
    """Attention in float64 where row r sees key c only when ``allowed(r, c)``.

    ``padded_keys`` appends that many zero keys and zero values after the
    sequence, as a kernel that loads its ragged last block with ``other=0`` but
    forgets to mask the scores sees them.  A row that may see no key at all
    comes out NaN, as 0/0 does in a kernel.

    ``stream_block``: compute it as a kernel that streams the keys in blocks of
    that size from key 0, with a running maximum that starts at -inf and masked
    scores of -inf, does: a row that may see no key of the *first* block gets
    -inf - (-inf) = NaN there, and stays NaN whatever it sees later.
    """
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    seq, head_dim = q.shape[-2], q.shape[-1]
    if padded_keys:
        pad = torch.zeros(*k.shape[:-2], padded_keys, head_dim, dtype=k.dtype, device=k.device)
        k = torch.cat([k, pad], dim=-2)
        v = torch.cat([v, pad], dim=-2)
    rows = torch.arange(seq, device=q.device)[:, None]
    cols = torch.arange(k.shape[-2], device=q.device)[None, :]
    scores = (q @ k.transpose(-1, -2)) * head_dim**-0.5
    visible = allowed(rows, cols)
    scores = scores.masked_fill(~visible, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    if stream_block is not None:
        poisoned_rows = ~visible[:, :stream_block].any(dim=-1)
        out = out.masked_fill(poisoned_rows[:, None], float("nan"))
    return out


def causal_variants(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_m: int, block_n: int, causal: bool
) -> dict[str, torch.Tensor]:
    """What drill 01's kernel outputs with each known mistake, keyed by diagnosis code.

    ``block_m``/``block_n`` are the kernel's tile sizes: several mistakes are
    "right up to the block boundary", so the tiles shape the wrong answer.
    ``causal`` is the launch's own switch: a full launch that computes a causal
    answer ("full-broken") is the causal code leaking into the path without
    CAUSAL.  A code with a ``/suffix`` is one more way of making that mistake.
    Rows a variant leaves NaN are the ones such a kernel turns into NaN (see
    ``stream_block`` of :func:`masked_attention`).
    """
    seq = q.shape[-2]
    padded = -seq % block_n

    def end_of_row_block(r: torch.Tensor) -> torch.Tensor:  # first row past r's block
        return (r // block_m + 1) * block_m

    def start_of_row_block(r: torch.Tensor) -> torch.Tensor:
        return (r // block_m) * block_m

    # `for start_n in range(0, hi, BLOCK_N)` visits whole key blocks: every key
    # below the first block boundary at or past `hi`
    def visited_below(hi: torch.Tensor) -> torch.Tensor:
        return -(-hi // block_n) * block_n

    def bound_done(r: torch.Tensor) -> torch.Tensor:
        return visited_below(torch.clamp(end_of_row_block(r), max=seq))

    rules: dict[str, tuple[KeyRule, int]] = {}
    if causal:
        rules["todo2-open"] = (lambda r, c: c < seq, 0)
        rules["diagonal-unmasked"] = (lambda r, c: (c < bound_done(r)) & (c < seq), 0)
        rules["loop-stops-before-diagonal"] = (lambda r, c: (c < visited_below(start_of_row_block(r))) & (c <= r), 0)
        rules["mask-off-by-one"] = (lambda r, c: c < r, 0)
        # a reversed mask applied to every block, or (in a two-stage loop) only to
        # the diagonal block
        rules["mask-reversed"] = (lambda r, c: (c >= r) & (c < bound_done(r)) & (c < seq), 0)
        rules["mask-reversed/diagonal-only"] = (
            lambda r, c: ((c < start_of_row_block(r)) | (c >= r)) & (c < end_of_row_block(r)) & (c < seq),
            0,
        )
    else:
        # the causal mask, or the loop bound alone, applied without `if CAUSAL`
        rules["full-broken/causal"] = (lambda r, c: c <= r, 0)
        rules["full-broken/bound-only"] = (lambda r, c: (c < bound_done(r)) & (c < seq), 0)
    if padded:
        if causal:  # the loop bound done, neither the diagonal nor the end of the sequence masked
            rules["ragged-unmasked"] = (lambda r, c: c < bound_done(r), padded)
        else:
            rules["ragged-unmasked"] = (lambda r, c: c < seq + padded, padded)
    return {code: masked_attention(q, k, v, rule, pad, stream_block=block_n) for code, (rule, pad) in rules.items()}


def streamed_softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_n: int,
    *,
    running_max: bool = True,
    rescale_sum: bool = True,
    rescale_acc: bool = True,
    final_division: bool = True,
) -> torch.Tensor:
    """Full attention computed the way drill 02's loop does it, block by block, in
    float64 — with each part of the online update switchable, so the function
    also computes every way of getting that update wrong.

    With every switch on it equals :func:`attention_reference` (non-causal).
    ``running_max=False`` weights each block against its own maximum and never
    rescales, as drill 02 ships.
    """
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    seq, head_dim = q.shape[-2], q.shape[-1]
    scores = (q @ k.transpose(-1, -2)) * head_dim**-0.5
    shape = scores.shape[:-1]
    m = torch.full(shape, float("-inf"), dtype=torch.float64, device=q.device)
    l = torch.zeros(shape, dtype=torch.float64, device=q.device)  # noqa: E741 - the paper's name
    acc = torch.zeros(*shape, head_dim, dtype=torch.float64, device=q.device)
    for start in range(0, seq, block_n):
        s = scores[..., start : start + block_n]
        block_max = s.amax(dim=-1)
        if running_max:
            m_new = torch.maximum(m, block_max)
            alpha = torch.exp(m - m_new)
        else:
            m_new, alpha = block_max, torch.ones_like(block_max)
        p = torch.exp(s - m_new[..., None])
        l = (l * alpha if rescale_sum else l) + p.sum(dim=-1)  # noqa: E741
        acc = (acc * alpha[..., None] if rescale_acc else acc) + p @ v[..., start : start + block_n, :]
        m = m_new
    return acc / l[..., None] if final_division else acc


def online_variants(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_n: int) -> dict[str, torch.Tensor]:
    """What drill 02's kernel outputs with each known mistake, keyed by diagnosis code."""

    def stream(**switches: bool) -> torch.Tensor:
        return streamed_softmax_attention(q, k, v, block_n, **switches)

    return {
        "never-rescaled": stream(running_max=False),
        "sum-not-rescaled": stream(rescale_sum=False),
        "acc-not-rescaled": stream(rescale_acc=False),
        "no-final-division": stream(final_division=False),
    }


def score_rounding_allowance(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, expected: torch.Tensor,
                             allowed: torch.Tensor, tolerance: float, roundings: int, unit: float,
                             modifier: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """Each output element's allowed error where scores are large (the hostile cases): the
    tolerance plus what ``roundings`` roundings of ``unit`` (fp16's) on the scores' terms can
    move it.  q (..., N, D), k and v (..., M, D) head for head, ``allowed`` (N, M) bool.

    A kernel's score s_ij = scale * sum_d q_id k_jd may carry a rounding of each term (q
    pre-scaled in fp16, as the Triton tutorial once did, is right): |ds_ij| <= u * a_ij with
    a_ij = scale * sum_d |q_id k_jd|.  To first order out_i moves by
    sum_j P_ij (ds_ij - sum_k P_ik ds_ik) (v_j - out_i), so each element's error is at most
    u * sum_j P_ij (a_ij + sum_k P_ik a_ik) |v_jd - out_id| per rounding.  At standard-normal
    scores this is far below the tolerance; at +-100 two nearly tied top keys share their
    weight differently after one rounding (a blind attempt's pre-scaled q was off by 0.031),
    and the allowance grows with exactly that and no more: a missing running maximum (inf,
    NaN) or a wrong mask (errors of ~1) still fails.  ``modifier``: a score transform whose
    slope is at most 1 (a soft-cap), applied before the softmax; the bound stands through it."""
    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    scale = q.shape[-1] ** -0.5
    s = q64 @ k64.transpose(-1, -2) * scale
    s = (s if modifier is None else modifier(s)).masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)
    a = (q64.abs() @ k64.abs().transpose(-1, -2)) * scale * allowed
    moved = a + (p * a).sum(-1, keepdim=True)  # (..., N, M)
    spread = (v64[..., None, :, :] - expected.to(q64.device, torch.float64)[..., :, None, :]).abs()  # (..., N, M, D)
    allowance: torch.Tensor = tolerance + roundings * unit * ((p * moved)[..., None] * spread).sum(-2)
    return allowance

