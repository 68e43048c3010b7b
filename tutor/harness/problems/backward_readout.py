"""Reading out the P a student's backward uses (drill 04, the diagnosis phase).

The backward is linear in dO, and dV = Pᵀ dO depends on nothing but the P the
dK/dV loop rebuilds.  One probe launch, at a failing case's own shape with its
own q, k, v, O and lse (the same dtypes, ints and visit-recording arguments, so
it reuses the variant the case compiled), gets a one-hot dO: ``dO[r0 + c, c] = 1``
for the ``head_dim`` rows r0 .. r0 + head_dim - 1 and 0 elsewhere.  Then

    dV[j, c] = sum_i P[i, j] dO[i, c] = P[r0 + c, j]

so column c of dV is row r0 + c of that loop's P, every key, every head: one
launch reads ``head_dim`` rows of P (all of them when seq <= head_dim).  The rows
read are the last ``head_dim`` of the sequence: in a causal launch they see every
key block, and they hold the ragged last query block.

:func:`describe` compares the read-out P with the float64 one, exp(s - lse), on
the pairs where both are large enough to be measured (P > 1e-3; fp16's dV holds
P to ~5e-4 relative): log P_read - log P_true is fitted as (a - 1) s + c_row.
a != 1 is a wrong scale or base; a = 1 with a per-row c that is not 0 is a row
whose subtracted lse is not its own (which row's it is, when it equals one);
a = 1 with a c that changes between key blocks of one row is an lse indexed by
the key (block).  Pairs a row may not see that carry weight are counted apart.
Everything is float64 on the tensors' device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from tutor.harness.findings import index_runs

MEASURABLE = 1e-3  # P below this is not compared (fp16 dV quantises it)
FIT_SLACK = 0.02  # |log ratio| residual allowed: ~4 fp16 roundings of P, and then some


@dataclass
class PReadout:
    rows: list[int]  # the sequence rows read (the same for every head)
    p: torch.Tensor  # (bh, len(rows), N) float64: the dK/dV loop's P on those rows


def one_hot_do(do: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """dO of ``do``'s shape and dtype with dO[r0 + c, c] = 1 for the last head_dim rows."""
    seq, head_dim = do.shape[-2], do.shape[-1]
    count = min(seq, head_dim)
    r0 = seq - count
    probe = torch.zeros_like(do)
    cols = torch.arange(count, device=do.device)
    probe[..., r0 + cols, cols] = 1.0
    return probe, list(range(r0, seq))


def read_p(backward: Callable[[torch.Tensor], torch.Tensor], do: torch.Tensor) -> PReadout | None:
    """One probe launch: ``backward(dO)`` returns the student's dV for that dO (the
    caller's closure launches at the case's shape).  None when dV is not finite."""
    probe, rows = one_hot_do(do)
    dv = backward(probe).to(torch.float64)
    dv = dv.reshape(-1, *dv.shape[-2:])  # (bh, N, d)
    p = dv[..., : len(rows)].transpose(-1, -2)  # (bh, rows, N): P[r0 + c, j] = dV[j, c]
    if not bool(torch.isfinite(p).all()):
        return None
    return PReadout(rows=rows, p=p)


@dataclass
class PShape:
    """What a read-out P measurably is, against the true one."""

    right: bool  # every read row matches exp(s - lse) within FIT_SLACK (and the mask)
    slope: float | None  # a in exp(a s - ...): 1 when the scale and base are right
    per_row: bool  # with a = 1: one factor per row explains every wrong row
    per_block: bool  # with a = 1: one factor per (row, key block) does, and no per-row one
    wrong_rows: list[int]
    factors: tuple[float, float]  # the smallest and largest per-row factor P_read / P_true
    lse_from: dict[int, int]  # wrong row -> the row whose lse it subtracted (where one matches)
    rest_right: bool  # every pair outside the extra and missing ones matches within 0.01
    extra_pairs: int  # (row, key) pairs a row may not see that carry weight > MEASURABLE
    missing_pairs: int  # pairs a row must see whose weight is ~0 where it should not be
    missing_kinds: dict[str, int]  # of those: "the diagonal (key = row)", "keys before the row", "keys after"
    extra_kinds: dict[str, int]  # the same split of the pairs a row may not see that carry weight
    # wrong (batch*head, row) -> another batch*head whose lse of that same row it subtracted
    lse_head_from: dict[tuple[int, int], int] = field(default_factory=dict)
    # every wrong row subtracted its own given lse times this one constant (where one fits to 1 %)
    lse_scaled: float | None = None
    missing_at: torch.Tensor | None = None  # (bh, R, N) bool: the missing pairs themselves


def describe(read: PReadout, s: torch.Tensor, lse: torch.Tensor, allowed: torch.Tensor,
             block_n: int, lse_given: torch.Tensor) -> PShape:
    """``s``: true scaled scores (..., N, N) float64; ``lse``: the true lse (..., N);
    ``allowed``: (N, N) bool; ``lse_given``: the lse the backward was handed (..., N)."""
    seq = s.shape[-1]
    rows = torch.tensor(read.rows, device=s.device)
    s_r = s.reshape(-1, seq, seq)[:, rows]  # (bh, R, N)
    lse_r = lse.reshape(-1, seq)[:, rows]
    ok = allowed[rows][None].expand_as(s_r)
    true = torch.where(ok, torch.exp(s_r - lse_r[..., None]), torch.zeros((), dtype=s.dtype, device=s.device))
    got = read.p
    extra_at = (got.abs() > MEASURABLE) & ~ok
    missing_at = (got.abs() < MEASURABLE * 0.1) & (true > 10 * MEASURABLE)
    extra, missing = int(extra_at.sum()), int(missing_at.sum())
    offset = torch.arange(seq, device=s.device)[None, :] - rows[:, None]  # key - row
    where = {"the diagonal (key = row)": offset == 0, "keys before the row": offset < 0,
             "keys after the row": offset > 0}
    missing_kinds = {name: int((missing_at & at).sum()) for name, at in where.items()}
    extra_kinds = {name: int((extra_at & at).sum()) for name, at in where.items()}
    both = ok & (got > MEASURABLE) & (true > MEASURABLE)
    ratio = torch.where(both, torch.log(got.clamp(min=1e-300)) - torch.log(true.clamp(min=1e-300)),
                        torch.zeros((), dtype=s.dtype, device=s.device))
    # a pair is off by 0.01 absolute or, where both are measurable, by more than FIT_SLACK in log:
    # on a long row every P is ~1/N, under any absolute slack (H100 run 32, 04_lse_by_key_in_dkdv:
    # at seq 1024 its P, off by a few % on every pair, was read as "P is right"; on the CPU at
    # 1x2x1024x128, only 2 of the 128 rows read were off by more than 0.01)
    off_at = ((got - true).abs() > 0.01) | (both & (ratio.abs() > FIT_SLACK))
    row_bad = off_at.any(-1)  # (bh, R)
    wrong_rows = sorted({read.rows[int(i)] for i in row_bad.nonzero()[:, 1].tolist()})
    shape = PShape(right=not wrong_rows and not extra and not missing, slope=None, per_row=False, per_block=False,
                   wrong_rows=wrong_rows, factors=(1.0, 1.0), lse_from={},
                   rest_right=not bool((off_at & ~extra_at & ~missing_at).any()),
                   extra_pairs=extra, missing_pairs=missing,
                   missing_kinds={k: n for k, n in missing_kinds.items() if n},
                   extra_kinds={k: n for k, n in extra_kinds.items() if n}, missing_at=missing_at)
    if shape.right or not bool(both.any()):
        return shape
    w = both.to(s.dtype)
    n = w.sum(-1).clamp(min=1)
    r_mean = (ratio * w).sum(-1) / n  # the per-(head, row) intercept
    # a = 1 and one factor per row?
    if float(((ratio - r_mean[..., None]) * w).abs().amax()) <= FIT_SLACK:
        shape.per_row = True
        off = (r_mean.abs() > FIT_SLACK) & (w.sum(-1) > 0)  # rows whose factor is not 1
        shape.wrong_rows = sorted({read.rows[i] for i in off.nonzero()[:, 1].tolist()})
        fac = torch.exp(r_mean)[off]
        shape.factors = (float(fac.min()), float(fac.max())) if fac.numel() else (1.0, 1.0)
        # which row's lse each wrong row subtracted: lse_used = lse_row - c_row, the nearest given lse
        used = lse_r - r_mean
        given = lse_given.reshape(-1, seq).to(torch.float64)
        own = given[:, rows]
        usable = off & (own.abs() > 0.5)  # a ratio to a given lse near 0 says nothing
        if int(usable.sum()) >= 3:
            scale = (used / own.where(usable, torch.ones_like(own)))[usable]
            if float((scale - scale.median()).abs().max()) <= 0.01 * abs(float(scale.median())):
                shape.lse_scaled = float(scale.median())
        for h, i in off.nonzero().tolist():
            row = read.rows[i]
            heads_gap = (given[:, row] - used[h, i]).abs()
            heads_gap[h] = float("inf")
            other = int(heads_gap.argmin())
            if float(heads_gap[other]) < 5e-3:  # another head's lse of the same row: a missing head offset
                shape.lse_head_from[(h, row)] = other
                continue
            gap = (given[h] - used[h, i]).abs()
            best = int(gap.argmin())
            if float(gap[best]) < 5e-3:
                shape.lse_from[read.rows[i]] = best
        return shape
    # a = 1 and one factor per (row, key block)?
    blocks = torch.arange(seq, device=s.device) // block_n
    worst = 0.0
    for b in range(int(blocks.max()) + 1):
        cols = blocks == b
        wb, rb = w[..., cols], ratio[..., cols]
        mb = (rb * wb).sum(-1) / wb.sum(-1).clamp(min=1)
        worst = max(worst, float(((rb - mb[..., None]) * wb).abs().amax()))
    if worst <= FIT_SLACK:
        shape.per_block = True
        return shape
    # else fit ratio = (a - 1) s + c_row on the measured pairs: the scale or base
    s_mean = (s_r * w).sum(-1) / n
    sc, rc = (s_r - s_mean[..., None]) * w, (ratio - r_mean[..., None]) * w
    denom = float((sc * sc).sum())
    slope = 1.0 + (float((sc * rc).sum()) / denom if denom > 0 else 0.0)
    # said only when exp(a s - c_row) explains every measured pair
    if float((rc - (slope - 1.0) * sc).abs().amax()) <= 2 * FIT_SLACK:
        shape.slope = slope
    return shape


# ------------------------------------------------------------------------------------
# the dQ loop's dS, read out through dQ with one-hot K
# ------------------------------------------------------------------------------------
# dQ = sm_scale * dS K is linear in K's rows, and with K[j] = AMP * e_(j+1 mod head_dim)
# (key j's vector one-hot at the next component: seq <= head_dim) dQ[i, j+1] = sm_scale *
# AMP * dS[i, j]: one launch reads every (row, key) of the dQ loop's dS, for the scores
# s_ij = AMP * sm_scale * q_i[j+1] that K gives.  Not K[j] = AMP * e_j: that K is its own
# transpose, and a dQ loop that loads K's tile transposed read it right (blind round 11,
# w45: "dS is right" was said of a kernel whose scores and dS were both wrong).  AMP puts
# those scores at a standard deviation of ~2: P spans a few orders of magnitude, so its
# temperature is measurable, and nothing overflows.
DS_AMP_STD = 2.0
DS_MEASURABLE = 0.01  # P below this does not say what D was (its dS is ~0 either way)


def one_hot_dims(seq: int, head_dim: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The component each key's one-hot vector sits at: key j at (j + 1) % head_dim."""
    return (torch.arange(seq, device=device) + 1) % head_dim


def one_hot_k(k: torch.Tensor) -> torch.Tensor:
    """K of ``k``'s shape and dtype with K[j] = AMP * e_(j+1 mod head_dim) (needs seq <= head_dim)."""
    seq, head_dim = k.shape[-2], k.shape[-1]
    probe = torch.zeros_like(k)
    keys = torch.arange(seq, device=k.device)
    probe[..., keys, one_hot_dims(seq, head_dim, k.device)] = DS_AMP_STD * head_dim**0.5
    return probe


@dataclass
class DsShape:
    """What the dQ loop's read-out dS measurably is, against P ∘ (dP − D)."""

    right: bool
    words: str  # the measured facts, a sentence (empty when nothing is measured)


def describe_ds(dq: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
                allowed: torch.Tensor) -> DsShape:
    """``dq``: the student's dQ for one-hot ``k`` (:func:`one_hot_k`); the rest the probe's
    inputs.  Compares the dS it implies with the float64 P ∘ (dP − D) of those inputs,
    then says which of its terms the measurement singles out: a factor on all of it,
    P missing, D missing or scaled or taken per key, or a P of another temperature."""
    f64 = torch.float64
    head_dim, seq = q.shape[-1], q.shape[-2]
    scale = head_dim**-0.5
    q64, k64, v64, do64 = (t.to(f64).reshape(-1, seq, head_dim) for t in (q, k, v, do))
    s = (q64 @ k64.transpose(-1, -2)) * scale
    masked = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(masked, -1)
    dp = do64 @ v64.transpose(-1, -2)
    d = (do64 * (p @ v64)).sum(-1)  # rowsum(dO ∘ O)
    ds = p * (dp - d[..., None])
    amp = DS_AMP_STD * head_dim**0.5
    got = dq.to(f64).reshape(-1, seq, head_dim)[..., one_hot_dims(seq, head_dim, dq.device)] / (scale * amp)
    if not bool(torch.isfinite(got).all()):
        return DsShape(False, "")
    tol = 0.02 * float(ds.abs().max()) + 2e-3

    def close(a: torch.Tensor, b: torch.Tensor) -> bool:
        return bool(((a - b).abs() <= tol).all())

    if close(got, ds):
        return DsShape(True, " Read out through dQ with one-hot K, the dQ loop's dS = P * (dP - D) is right:"
                             " what is wrong comes after it (dq += dS K, the loop's bounds, its store).")
    said = " Read out through dQ with one-hot K (one launch at this case's shape), the dQ loop's dS"
    # every statement below is a model of dS that reproduces the read-out on every pair
    outside = (~allowed).expand_as(got) & (got.abs() > tol)
    if bool(outside.any()):
        ahead = torch.arange(seq, device=got.device)[None, :] > torch.arange(seq, device=got.device)[:, None]
        after = int((outside & ahead).sum())
        where = "keys after the row" if after == int(outside.sum()) else "pairs the mask removes"
        return DsShape(False, f"{said} is nonzero, beyond the read-out's noise ({tol:.2g}), on {int(outside.sum())} of"
                              f" the {int((~allowed).expand_as(got).sum())} (row, key) pairs a row may not see"
                              f" ({where}): the dQ loop's mask lets them through.")
    norm = float((ds * ds).sum())
    alpha = float((got * ds).sum()) / norm if norm > 0 else 0.0
    if close(got, alpha * ds):
        return DsShape(False, f"{said} is {alpha:.3g} x P * (dP - D) as dQ reads it: its terms are right and one factor"
                              " on all of it is off (in dS, or in dQ's scale after the loop: the read-out"
                              " cannot tell them apart).")
    if close(got, (dp - d[..., None]) * allowed):
        return DsShape(False, f"{said} is dP - D on every pair a row may see: it is not multiplied by P.")
    # dP from another operand than V (P and D right): dS = P * (dO Xᵀ - D), or dP transposed
    for name, other in (("K", k64), ("Q", q64), ("dO", do64)):
        if close(got, p * (do64 @ other.transpose(-1, -2) - d[..., None])):
            return DsShape(False, f"{said} is P * (dO {name}ᵀ - D) on every pair: its dP is dO {name}ᵀ where it is"
                                  f" dO Vᵀ ({name} loaded or used in place of V), P and D are right.")
    if close(got, p * (dp.transpose(-1, -2) - d[..., None])):
        return DsShape(False, f"{said} is P * (dPᵀ - D) on every pair: its dP is transposed (V dOᵀ, or the"
                              " (key, query) tile where it takes the (query, key) one), P and D are right.")
    # D, where P is large enough to say: D_used = dP - dS / P
    big = allowed & (p > DS_MEASURABLE)
    d_used = torch.where(big, dp - got / p.clamp(min=DS_MEASURABLE), torch.zeros((), dtype=f64))
    counted = big.to(f64).sum(-1)
    row_mean = d_used.sum(-1) / counted.clamp(min=1)
    if close(got, p * (dp - row_mean[..., None])):  # one D per row: P and dP are right, D differs
        d_tol = 0.05 + 0.02 * float(d.abs().max())
        if bool((row_mean.abs() <= d_tol).all()):
            return DsShape(False, f"{said} is P * dP on every row: D is not subtracted.")
        c = float((row_mean * d).sum()) / float((d * d).sum()) if float((d * d).sum()) > 0 else 0.0
        if bool(((row_mean - c * d).abs() <= d_tol).all()):
            return DsShape(False, f"{said} subtracts {c:.3g} x rowsum(dO * O) as D: P and dP are right.")
        return DsShape(False, f"{said} subtracts another D per row than rowsum(dO * O) (e.g. row 0: "
                              f"{float(row_mean.reshape(-1)[0]):.3g} where it is {float(d.reshape(-1)[0]):.3g}):"
                              " P and dP are right.")
    if close(got, p * (dp - d[..., None, :])):
        return DsShape(False, f"{said} is P * (dP - D_j), D of the key (column j) where it takes D of the row"
                              " (i): D is broadcast on the wrong axis.")
    # P, where dP - D is large enough to say: P_used = dS / (dP - D), fitted as exp(a s - c_row)
    gap = dp - d[..., None]
    sure = allowed & (gap.abs() > 0.2) & (p > DS_MEASURABLE) & (got.abs() > 1e-4)
    ratio = torch.where(sure, got / gap, torch.ones((), dtype=f64))
    if bool(sure.any()) and bool((ratio > 0).all()):
        logr = torch.where(sure, torch.log(ratio) - torch.log(p.clamp(min=1e-300)), torch.zeros((), dtype=f64))
        w = sure.to(f64)
        n = w.sum(-1).clamp(min=1)
        s_mean = (s * w).sum(-1) / n
        r_mean = (logr * w).sum(-1) / n
        sc, rc = (s - s_mean[..., None]) * w, (logr - r_mean[..., None]) * w
        denom = float((sc * sc).sum())
        if denom > 0:
            slope = 1.0 + float((sc * rc).sum()) / denom
            shifted = p * torch.exp((slope - 1.0) * (s - s_mean[..., None]) + r_mean[..., None])
            if abs(slope - 1) > 0.03 and close(got, torch.where(allowed, shifted * gap, torch.zeros((), dtype=f64))):
                return DsShape(False, f"{said} is P' * (dP - D) with D right and a P' that grows as"
                                      f" exp({slope:.3g} s) in the scores s, where P grows as exp(s):"
                                      " the dQ loop rebuilds P with another scale or base than the forward's.")
    factored = _factor_words(got, ds, close)
    if factored:
        return DsShape(False, said + factored)
    worst = float((got - ds).abs().max())
    return DsShape(False, f"{said} differs from P * (dP - D) by up to {worst:.3g} (its largest term is"
                          f" {float(ds.abs().max()):.3g}), in no way the tutor can single out.")


def _factor_words(got: torch.Tensor, ds: torch.Tensor, close: Callable[[torch.Tensor, torch.Tensor], bool]) -> str:
    """Where the read-out dS is P * (dP - D) times one factor per key (every row alike), or
    times one factor per (row, block of keys), that, in words; else "".  ``got`` and ``ds``
    are (heads, rows, keys)."""
    seq = got.shape[-1]
    weight = (ds * ds).sum(dim=(0, 1))
    per_key = torch.where(weight > 0, (got * ds).sum(dim=(0, 1)) / weight.clamp(min=1e-300), torch.ones_like(weight))
    if close(got, ds * per_key):
        used = weight > 1e-6 * float(weight.max())
        times = {j: round(float(per_key[j])) for j in range(seq) if used[j]}
        whole = all(abs(float(per_key[j]) - n) <= 0.02 for j, n in times.items())
        values = sorted(set(times.values()))
        if whole and len(values) <= 3 and values != [1]:
            groups = "; ".join(f"{n:g} x on keys {index_runs([j for j, m in times.items() if m == n])}"
                               for n in values)
            how = []
            if 0 in values:
                how.append("a key at 0 x never reaches dQ: the dQ loop's mask or bounds drop it")
            if any(n >= 2 for n in values):
                how.append("a key at 2 x or more is added that many times (steps shorter than the dQ loop's tile,"
                           " or ranges that overlap)")
            return (f" is P * (dP - D) times a whole number per key, the same on every row: {groups} (of"
                    f" {seq}): {'; '.join(how)}.")
        return (f" is P * (dP - D) times one factor per key, the same on every row, from"
                f" {float(per_key[used].min()):.3g} to {float(per_key[used].max()):.3g}.")
    for block in [seq] + [b for b in (128, 64, 32, 16) if b < seq]:  # the fewest factors that fit first
        pad = -seq % block
        g = torch.nn.functional.pad(got, (0, pad)).reshape(*got.shape[:-1], -1, block)
        r = torch.nn.functional.pad(ds, (0, pad)).reshape(*ds.shape[:-1], -1, block)
        w = (r * r).sum(-1)
        c = torch.where(w > 0, (g * r).sum(-1) / w.clamp(min=1e-300), torch.ones_like(w))
        if close(got, (r * c[..., None]).reshape(*ds.shape[:-1], -1)[..., :seq]):
            sure = w > 1e-6 * float(w.max())
            span = f"{float(c[sure].min()):.3g} to {float(c[sure].max()):.3g}"
            if block == seq:
                return (f" is P * (dP - D) times one factor per row, from {span}: P (or dS) is scaled per row, as"
                        " when P is normalised by something else than the row's lse (its maximum alone, say).")
            return (f" is P * (dP - D) times one factor per (row, block of {block} keys), from {span}: P (or dS)"
                    " is scaled per block, as when each block's P is normalised on its own (by its own maximum"
                    " or sum) rather than by the row's lse.")
    return ""

