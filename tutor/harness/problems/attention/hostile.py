"""Inputs built to break numerically unsafe kernels (the "hostile" case).

Standard-normal q and k give scores of a few units: ``exp`` of a raw score
never overflows, so a kernel that keeps no running maximum still passes.  The
hostile case gives every fourth query row one of these properties (dims 0 and
1 of q and k are set aside to build them; the rest stays standard normal):

* ``normal``   -- rows as in the standard cases (a control);
* ``large``    -- every score around +``LARGE_SHIFT`` (spread ~``LARGE_SPREAD``,
  so even a causal row that sees one key scores far above 0): exp and exp2
  of a raw score overflow fp32 (and p overflows fp16 long before);
* ``late-max`` -- a score ramp over the keys (up to +``RAMP_SCORE`` at the last
  key): the row's maximum keeps rising and arrives in its *last* K/V block, so
  a maximum that is not updated (or a block that is not rescaled) overflows;
* ``negative`` -- every score shifted down by ``NEGATIVE_SHIFT``: a kernel
  whose padded or masked keys score 0 instead of -inf hands them nearly all
  the weight.  The shift is kept small enough that a correct kernel whose m_i
  starts at 0 (so p = exp2(score) is cast to fp16 unshifted) stays within the
  tolerance: below ~-10 such a kernel's p underflows fp16;
* ``early-max`` -- the late-max ramp reversed: the row's maximum (+``RAMP_SCORE``
  above the last key) is its *first* key's, and every later block's scores fall;
* ``mid-max``  -- a tent over the keys: the maximum (+``RAMP_SCORE``) arrives in
  the middle of the sequence, after blocks whose maxima were far lower, and
  later blocks fall again;
* ``drop``     -- the first eighth of the keys score +``DROP_SCORE`` above the
  rest: from the block after it on, each block's maximum lies further below the
  running one than fp32's exp2 range (2**-126, ~87 natural units), so a
  correction computed as exp of the *rise* (exp2(m_new - m_old), then divided)
  or of a raw score overflows, where exp2(m_old - m_new) is simply 0.

The maximum thus arrives first, in the middle and last, and falls by more than
fp32 can scale, in rows of one launch.

q is scaled, never the scores, so every input stays finite in fp16.  All
numbers are natural units (score = q.k / sqrt(head_dim)).

A second launch of the hostile shape is the ``long-sum`` case (:mod:`tutor.harness.long_sum`):
every score 0 and V's column 0 at 512, so an accumulator kept in fp16 overflows from 128 keys on.

The hostile case of a check is here too: its launches, part of the verdict
(:func:`hostile_launches`), and why they failed when only they did
(:func:`hostile_diagnosis`).
"""

from __future__ import annotations

import dataclasses
import math
from types import ModuleType

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import launch as launching
from tutor.harness.findings import worded
from tutor.harness.long_sum import causal_keys, long_sum_values, long_sum_words
from tutor.harness.numerics import LOG2E, spacing_at
from tutor.harness.problems.attention.block_shares import zero_score_factor
from tutor.harness.problems.attention.cases import evaluate, launch_modes, mode_words
from tutor.harness.problems.attention.reference import attention_reference
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding

GROUPS = ("normal", "large", "late-max", "negative", "early-max", "mid-max", "drop")
LARGE_SHIFT = 120.0  # added to every score of a "large" row
LARGE_SPREAD = 4.0  # the standard deviation of a "large" row's scores around it
RAMP_SCORE = 150.0  # a "late-max" row's extra score at the last key (0 at key 0)
# subtracted from every score of a "negative" row: not so far that a running maximum that starts at 0
# underflows (issue 9 names m_i from 0 a correct kernel of drills 01/02; drills 05-09 have far-below cases)
NEGATIVE_SHIFT = 8.0
_RAMP_K = 8.0  # k[..., 0] runs 0.._RAMP_K over the keys; q[late rows, 0] sets the height
_SHIFT_K = 8.0  # k[..., 1] is this for every key; q[negative rows, 1] sets the shift
DROP_SCORE = 150.0  # a "drop" row's extra score on the first eighth of the keys
_TENT_K = 8.0  # k[..., 2] rises 0.._TENT_K to the middle key and falls back; q[mid rows, 2] sets the height
_STEP_K = 8.0  # k[..., 3] is this on the first eighth of the keys, 0 after; q[drop rows, 3] sets the step


def long_sum_inputs(shape: tuple[int, ...], device: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """fp16 q, k, v of ``shape`` with q = 0 and v[..., 0] = LONG_SUM_V (:mod:`tutor.harness.long_sum`)."""
    q = torch.zeros(shape, dtype=torch.float32)
    k, v = (torch.randn(shape, generator=generator, dtype=torch.float32) for _ in range(2))
    return tuple(t.to(device, torch.float16) for t in (q, k, long_sum_values(v)))


def row_groups(seq: int) -> dict[str, torch.Tensor]:
    """Query rows of each group (row r is in group r % len(GROUPS))."""
    rows = torch.arange(seq)
    return {name: rows[rows % len(GROUPS) == i] for i, name in enumerate(GROUPS)}


def hostile_inputs(shape: tuple[int, ...], device: str, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """fp16 q, k, v of ``shape`` with the row groups above (v stays standard normal)."""
    seq, head_dim = shape[2], shape[3]
    q, k, v = (torch.randn(shape, generator=generator, dtype=torch.float32) for _ in range(3))
    root = head_dim**0.5
    groups = row_groups(seq)
    q[..., :4] = 0.0
    k[..., 0] = torch.linspace(0.0, _RAMP_K, seq)  # the ramp: later keys score higher for late-max rows
    k[..., 1] = _SHIFT_K
    k[..., 2] = _TENT_K - torch.linspace(-_TENT_K, _TENT_K, seq).abs()  # the tent: highest at the middle key
    k[..., 3] = torch.where(torch.arange(seq) < max(1, seq // 8), _STEP_K, 0.0)  # the step: the first eighth
    # large: shifted up through dim 1, the rest of q scaled (q[2:].k[2:]/sqrt(d) has std ~1)
    q[..., groups["large"], 1] = LARGE_SHIFT * root / _SHIFT_K
    q[..., groups["large"], 2:] *= LARGE_SPREAD
    q[..., groups["late-max"], 0] = RAMP_SCORE * root / _RAMP_K
    q[..., groups["negative"], 1] = -NEGATIVE_SHIFT * root / _SHIFT_K
    q[..., groups["early-max"], 0] = -RAMP_SCORE * root / _RAMP_K  # highest at key 0, falling to -RAMP_SCORE
    q[..., groups["mid-max"], 2] = RAMP_SCORE * root / _TENT_K
    q[..., groups["drop"], 3] = DROP_SCORE * root / _STEP_K
    return tuple(t.to(device, torch.float16) for t in (q, k, v))


def row_errors(out: torch.Tensor, expected: torch.Tensor, per_head: bool = False) -> torch.Tensor:
    """The worst |out - expected| over head_dim, per (batch*head, row), or with
    ``per_head=False`` per sequence row over batch and heads (inf where the output
    is not finite but the reference is)."""
    gap = (out.to(torch.float64) - expected).abs()
    gap = torch.where(torch.isfinite(expected), gap.nan_to_num(nan=float("inf")), torch.zeros_like(gap))
    rows = gap.amax(dim=-1).reshape(-1, out.shape[-2])
    return rows if per_head else rows.amax(dim=0)


def scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    """The true scaled scores (float64), -inf where a row may not look."""
    s: torch.Tensor = (q.to(torch.float64) @ k.to(torch.float64).transpose(-1, -2)) * q.shape[-1] ** -0.5
    if causal:
        seq = q.shape[-2]
        s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return s


# p = exp(score - reference) is cast to fp16 before the second dot: above
# ln(65504) ~ 11.1 it is Inf there, and exp2 overflows fp32 above 2**128 (~88.7 natural)
FP16_OVERFLOW_SCORE = 11.09
# p = exp(score - m) cast to fp16 is 0 below its smallest subnormal (2**-24): a row whose m
# sits this far above every key it may see gets nothing from them
FP16_UNDERFLOW_GAP = 16.7
# a masked key at least this far above the visible ones: a maximum taken before the mask is off
MASKED_ABOVE = 1.0


def hostile_findings(
    out: torch.Tensor,
    expected: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    causal: bool,
    block_n: int,
    tolerance: float,
    unmasked_right: bool = False,
    v: torch.Tensor | None = None,
) -> list[tuple[str, str]]:
    """(code, measured detail) for a hostile launch that failed while every
    standard-normal case passed.  ``unmasked_right``: the same inputs without the
    causal mask (the full launch) came out right.

    A causal launch whose wrong rows are all rows where keys the mask removes score far
    above every key the row may see (so exp of the visible keys against a maximum taken
    over all of them underflows), while the unmasked launch is right, takes its maximum
    before the mask (``max-before-mask``).

    The code follows from which rows went wrong, measured against the true
    scores: an Inf/NaN row whose largest score sits in its *first* K/V block and
    exceeds what exp of a raw score survives means the scores are exponentiated
    without any maximum subtracted (``no-running-max``); wrong rows only where
    the maximum arrives in a later block, while first-block maxima of the same
    size are right, mean the maximum is not kept up to date (``stale-max``);
    anything else is reported by group (``hostile-wrong``)."""
    seq = out.shape[-2]
    bad = row_errors(out, expected, per_head=True) > tolerance  # (batch*heads, seq)
    if not bad.any():
        return []
    nonfinite = (~torch.isfinite(out.to(torch.float32)) & torch.isfinite(expected)).any(dim=-1).reshape(-1, seq)
    s = scores(q, k, causal).reshape(-1, seq, seq)
    top = s.amax(dim=-1)
    first = s[..., :block_n].amax(dim=-1)
    big = top > FP16_OVERFLOW_SCORE
    early = big & (first >= top)  # the row's maximum is in its first K/V block
    late = big & (first < top - FP16_OVERFLOW_SCORE)  # a later block beats the first by more than p survives
    groups = row_groups(seq)
    parts = []
    for name, rows in groups.items():
        wrong = bad[:, rows]
        if wrong.any():
            worst = float(top[:, rows][wrong].max())
            how = "Inf/NaN" if nonfinite[:, rows][wrong].all() else "wrong"
            parts.append(f"{int(wrong.sum())} of {wrong.numel()} '{name}' rows come out {how}"
                         f" (largest score {worst:.0f})")
    mode = " causal" if causal else ""
    detail = f" Measured on the hostile{mode} case (seq={seq}): " + "; ".join(parts) + "."
    overflow = bad & nonfinite
    if causal and unmasked_right:
        # every wrong row has future keys above its visible ones (else the maximum would be the
        # same either way), and every row whose visible keys all underflow against a future key
        # of its own diagonal tile (loaded whatever the loop's bounds) is wrong;
        # rows with a smaller gap keep fewer of fp16's bits and can go wrong too (the GPU's
        # hostile case, run 21: wrong rows from a gap of ~8)
        full = scores(q, k, False).reshape(-1, seq, seq)
        gap = full.amax(dim=-1) - top  # masked keys above visible ones
        tile = torch.arange(seq, device=full.device) // block_n  # the diagonal K/V tile: loaded by every loop
        same_tile = tile[:, None] == tile[None, :]
        tile_gap = full.masked_fill(~same_tile, float("-inf")).amax(dim=-1) - top
        if bool((gap[bad] > MASKED_ABOVE).all()) and bool(bad[tile_gap > FP16_UNDERFLOW_GAP].all()):
            return [("max-before-mask",
                     f" Measured on the hostile case (seq={seq}): the full launch, the same inputs without the mask,"
                     f" is right; in the causal launch all {int(bad.sum())} wrong rows are rows whose masked (future)"
                     f" keys score {float(gap[bad].min()):.0f}..{float(gap[bad].max()):.0f} above the highest key they"
                     f" may see, and {int((bad & nonfinite).sum())} of them come out Inf/NaN.")]
    lowest = torch.where(torch.isfinite(s), s, torch.full_like(s, float("inf"))).amin(dim=-1)  # of keys it may see
    ordinary = overflow & (top < FP16_OVERFLOW_SCORE) & (lowest > -FP16_UNDERFLOW_GAP)
    if ordinary.any():  # (blind round 23, 02: tl.max(qk, 0) was told "no maximum at all, or each block's own")
        kinds = ", ".join(repr(name) for name, rows in groups.items() if bool(ordinary[:, rows].any()))
        return [("hostile-wrong", detail + (
            f" {int(ordinary.sum())} of the Inf/NaN rows ({kinds}) have only ordinary scores (every one within"
            f" {FP16_UNDERFLOW_GAP:g} below and {FP16_OVERFLOW_SCORE:g} above 0: nothing of their own overflows,"
            " and their exps stay within fp16's range), and rows like them are right in every standard case:"
            " what turns them Inf/NaN comes from the other rows of the launch. A maximum over the wrong axis does"
            " that (tl.max(qk, 0) takes each key's maximum over the block's rows, not each row's over its keys: a"
            " row is then exponentiated against another row's far larger score, and its sum underflows to 0, then"
            " 0/0), as does anything else that mixes rows (a reduction or a load along the wrong axis)."))]
    if (overflow & early).any():
        return [("no-running-max", detail)]
    if overflow.any() and (bad & ~(overflow & late)).sum() == 0 and (early & ~bad).any():
        return [("stale-max", detail)]
    extra = zero_score_keys_words(out, expected, scores(q, k, causal), bad, tolerance, block_n)
    rounded = "" if extra or v is None else rounded_scores_words(out, expected, scores(q, k, causal), v, tolerance)
    return [("hostile-wrong", detail + extra + rounded)]


def zero_score_keys_words(out: torch.Tensor, expected: torch.Tensor, s: torch.Tensor, bad: torch.Tensor,
                          tolerance: float, block_n: int) -> str:
    """Words where every row of the launch, wrong or right, is its reference times S / (S + E) for
    one whole E from 1 to ``block_n`` (S = sum exp(score) over the keys it may see, ``s`` natural
    units): E keys of score 0 and value 0 in every row's sum, weighing nothing where a row has large
    scores and everything where all its scores are far below 0 (blind round 27, 02 b14: a score mask
    cols <= N_CTX, told only that standard-normal scores hide unsafe numerics); "" otherwise."""
    ref = expected.to(torch.float64).reshape(*s.shape[:-1], -1)
    got = out.to(torch.float64).reshape(*s.shape[:-1], -1)
    if not bool(torch.isfinite(got).all()) or not bool(bad.any()):
        return ""
    for extra in range(1, block_n + 1):
        model = ref * zero_score_factor(s, extra)[..., None]
        if float((model - got).abs().max()) <= tolerance / 2:
            keys = "one key" if extra == 1 else f"{extra} keys"
            return (f" Every row of the case, the right ones too, is what {keys} of score 0 and value 0 in its"
                    f" softmax's sum would give: its reference times S / (S + {extra}), S = sum exp(score) over"
                    f" the keys it may see, within {tolerance / 2:g}. Such keys weigh nothing beside large scores and"
                    " everything where a row's scores are all far below 0: positions past the end that the"
                    " scores' mask lets in (cols <= N_CTX lets one) or a loop that reads them unmasked, with K"
                    " and V loaded as 0 there.")
    return ""


def score_units(root: float) -> tuple[tuple[str, float], ...]:
    """The units a kernel may hold its scores in, as (words, factor from natural units): the exp2
    domain, natural units, and the raw q.k before the scale (``root`` = sqrt(head_dim))."""
    return (("in log2 units (qk * sm_scale * log2(e), the exp2 domain)", LOG2E),
            ("in natural units (qk * sm_scale)", 1.0), ("before the scale (the raw q.k)", root))


def fp16_step_words(top: float, scale: float) -> str:
    """What fp16's spacing at a score of ``top`` (in units ``scale`` times natural) does to the
    scores and their weights, in words (one sentence, starting with a space)."""
    step = spacing_at(top, torch.float16)
    return (f" fp16 keeps steps of {step:g}, so each score is off by up to {step / 2:g}, and its weight by"
            f" up to a factor exp({step / 2 / scale:.3g}) = {math.exp(step / 2 / scale):.3f}.")


def same_grid_words(scale: float, root: float) -> str:
    """Where the natural units (``scale`` 1) and the raw q.k (``scale`` sqrt(head_dim) = ``root``)
    differ by a power of two, fp16's grid is the same in both: words saying the other unit fits
    too, for the one that fitted; "" otherwise (and for log2 units)."""
    if scale not in (1.0, root) or root != 2.0 ** round(math.log2(root)):
        return ""
    other = "before the scale" if scale == 1.0 else "in natural units"
    return (f" (or {other}: sm_scale = 1/{root:g} is a power of two, which moves fp16's grid exactly, so the"
            " two cannot be told apart)")


def rounded_scores_words(out: torch.Tensor, expected: torch.Tensor, s: torch.Tensor, v: torch.Tensor,
                         tolerance: float, case: str = "the hostile case") -> str:
    """Where the output (..., rows, head_dim) is, within the tolerance, attention computed from the
    true scores ``s`` (..., rows, keys: natural units, -inf where a row may not look) rounded to
    fp16 (in log2 units, natural units, or before the scale: where a kernel may cast its score
    tile), in words ("" otherwise; blind round 23, 02: a score tile cast to fp16 was told only
    by the groups of rows it got wrong; blind round 24, 05: a decode kernel's q.k summed in fp16)."""
    root = v.shape[-1] ** 0.5
    v64 = v.to(torch.float64)
    bad = row_errors(out, expected, per_head=True) > tolerance  # the rows the reference finds wrong
    wrong = int(bad.sum())
    for where, scale in score_units(root):
        rounded = (s * scale).to(torch.float16).to(torch.float64) / scale
        model = torch.softmax(rounded, dim=-1) @ v64
        off_model = row_errors(out, model, per_head=True) > tolerance
        # a score on a rounding boundary can round the other way in the kernel's fp32: a few rows, right or
        # wrong, off the model (CPU: 1 of 34; H100, run 32: 5-9 of ~2200): at most a tenth of the wrong rows
        if int(off_model.sum()) <= wrong // 10:
            top = float(s.masked_fill(~torch.isfinite(s), 0.0).abs().max() * scale)
            fit = int((bad & ~off_model).sum())
            some = "" if fit == wrong else f" (on {fit} of its {wrong} wrong rows)"
            return (f" Your output on {case} is{some}, within the tolerance, attention computed from scores"
                    f" rounded to fp16 {where}{same_grid_words(scale, root)}:"
                    f" at its scores (up to {top:.0f} there){fp16_step_words(top, scale)} Keep the score tile in fp32.")
    return ""


# -- the hostile case of a check ---------------------------------------------------------------
@dataclasses.dataclass
class HostileRun:
    """One launch of the hostile case, checked: what its diagnosis reads."""

    case: CaseResult
    causal: bool | None
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    expected: torch.Tensor
    writes: list[tuple[str, str, int]]
    long_sum: bool = False  # the long-sum case's launch (not the hostile rows)


def hostile_launches(drill: Drill, module: ModuleType, shape: tuple[int, ...], device: str,
                     generator: torch.Generator, cases: list[CaseResult]) -> list[HostileRun]:
    """Run the hostile case, then the long-sum case (one head of the same shape: the same
    kernel variant), in every mode (appending to ``cases``): part of the verdict."""
    runs = []
    for name, inputs in (("hostile", hostile_inputs(shape, device, generator)),
                         ("long-sum", long_sum_inputs(shape[:1] + (1,) + shape[2:], device, generator))):
        q, k, v = inputs
        for causal in launch_modes(drill):
            cost.step(f"the {name} case, shape {cost.shape_words(tuple(q.shape))}{mode_words(drill, causal)}")
            run = launching.run_launcher(module, (q, k, v), causal, record_visits=True)
            expected = attention_reference(q, k, v, causal=bool(causal))
            case = evaluate(name, bool(causal), run, expected, drill.tolerance)
            cases.append(case)
            runs.append(HostileRun(case, causal, q, k, v, run.out, expected, run.writes_past_the_end(),
                                   long_sum=name == "long-sum"))
    return runs


def hostile_diagnosis(drill: Drill, runs: list[HostileRun], standard_passed: bool, block_n: int,
                      findings: list[GuardFinding]) -> list[Diagnosis]:
    """The hostile launches' stores into a guard band (to ``findings``) and, only when
    the standard cases all passed (otherwise their diagnosis stands), why they failed."""
    codes: dict[str, str] = {}
    unmasked_right = any(not run.causal and run.case.passed for run in runs if not run.long_sum)
    hostile_passed = all(run.case.passed for run in runs if not run.long_sum)
    # the long-sum case's causal launch first: its rows see 1..seq keys, so where the sum passes fp16's range
    # is a row, not every row
    for run in sorted(runs, key=lambda r: not (r.long_sum and r.causal)):
        case = run.case
        findings += [GuardFinding(t, side, "write", case.name, case.causal, case.shape, n) for t, side, n in run.writes]
        if standard_passed and hostile_passed and not case.passed and run.long_sum:
            keys = causal_keys(run.out.shape[-2], bool(run.causal))
            case_words = f"the long-sum{' causal' if run.causal else ''} case (seq={run.out.shape[-2]})"
            codes.setdefault("long-sum-wrong", long_sum_words(run.out, run.expected, keys, drill.tolerance, case_words))
        elif standard_passed and not case.passed:
            for code, detail in hostile_findings(run.out, run.expected, run.q, run.k, bool(run.causal),
                                                 block_n, drill.tolerance, unmasked_right, run.v):
                codes.setdefault(code if code in drill.diagnoses else "hostile-wrong", detail)
    return worded(drill, codes)


def max_over_unseen_keys(s: torch.Tensor, seen: torch.Tensor, bad: torch.Tensor, block_n: int,
                         loaded: torch.Tensor) -> str:
    """Words where a hostile launch's wrong rows are the rows a running maximum taken before
    the mask gets wrong ("" otherwise).  ``s``: the true scores (batch*heads, seq, seq), natural
    units; ``seen``: (seq, seq), may row r see key c (a band: the keys a row sees are one run);
    ``bad``: (batch*heads, seq), the rows out of tolerance; ``loaded``: (batch*heads, seq, seq),
    the keys of the K/V blocks the launch's visit map records for each row's query block.

    Measured on the scores and the visits: every wrong row has a loaded key it may not see
    scoring MASKED_ABOVE over its highest visible one, and some rows have none (so those are
    right); and on one side of the window (keys older than it, or after the row), every row
    whose unseen key in the K/V block of ``block_n`` that holds its window's edge (loaded)
    scores FP16_UNDERFLOW_GAP above them -- so that p of every visible key underflows fp16
    against it -- is wrong."""
    if not bool(bad.any()):
        return ""
    seq = s.shape[-1]
    top = s.masked_fill(~seen, float("-inf")).amax(dim=-1)
    gap = s.masked_fill(seen | ~loaded, float("-inf")).amax(dim=-1) - top
    if not bool((gap[bad] > MASKED_ABOVE).all()) or not bool((gap <= MASKED_ABOVE).any()):
        return ""
    cols = torch.arange(seq, device=s.device)[None, :]
    oldest = torch.where(seen, cols, seq).amin(dim=-1, keepdim=True)  # each row's oldest visible key
    newest = torch.where(seen, cols, -1).amax(dim=-1, keepdim=True)
    tile = cols // block_n
    sides = []
    for name, keys in (("older than its window", (cols < oldest) & (tile == oldest // block_n)),
                       ("after the row", (cols > newest) & (tile == newest // block_n))):
        edge_gap = s.masked_fill(~(keys & loaded), float("-inf")).amax(dim=-1) - top
        far = edge_gap > FP16_UNDERFLOW_GAP
        if bool(far.any()) and bool(bad[far].all()):
            sides.append((name, int(far.sum())))
    if not sides:
        return ""
    each = "; ".join(f"each of the {count} rows with a key {name} (in the K/V block that holds its window's edge)"
                     f" scoring over {FP16_UNDERFLOW_GAP:g} above every key it may see is among them"
                     for name, count in sides)
    right = int((gap <= MASKED_ABOVE).sum())
    return (f" Measured on the hostile case (seq={seq}) with its visit map: all {int(bad.sum())} wrong rows have, in"
            f" the K/V blocks the kernel visited for them, keys they may not see scoring"
            f" {float(gap[bad].min()):.0f}..{float(gap[bad].max()):.0f} above the highest key they may see, while"
            f" the {right} rows with no such key are right; {each}. A maximum taken before the mask is set by"
            " that key, and exp of every visible key underflows fp16 against it.")
