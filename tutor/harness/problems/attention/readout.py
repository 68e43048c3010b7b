"""Read out the attention weights a student's kernel actually applies.

Any attention kernel, right or wrong, computes ``out = W · V`` for a weight
matrix ``W`` that depends only on Q and K: the accumulation is linear in V.
Launch the kernel with V's rows one-hot (key j's value is the unit vector
``e_(j mod d)``, the other keys zero) and the output *is* ``W`` for the keys of
that group: ``seq / head_dim`` launches read the whole matrix.  The outputs are
fp16, so ``W`` is known to fp16's resolution (~5e-4 relative, 6e-8 absolute):
every threshold below sits well above that.

:func:`read_out` compares ``W`` with the float64 softmax ``P`` of the same
Q, K and measures where weight sits that must not, which keys carry no weight
that should, what the rows sum to, the softmax temperature, whether the K/V
blocks share one scale, and (when the weights do not look like a softmax of
q·k at all) which inputs the output depends on.  The numbers go into a
:class:`~tutor.harness.result.ReadOut`; :mod:`.diagnose` turns
them into sentences.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType

import torch

from tutor.harness import launch as launching
from tutor.harness.problems.attention.block_shares import (
    BLOCK_MASS,
    CONSISTENT,
    counted_keys_words,
    fits_pattern,
    zero_scores_words,
)
from tutor.harness.result import BlockPattern, ForbiddenScore, MissingWhere, ReadOut, TemperatureName

READ = 0.0  # a weight above this was given: a masked key gets exactly 0 (p = exp2(-inf) = 0, times one-hot V)
ROW_MASS = 2e-3  # a row's misplaced or missing mass worth reporting (fp16 noise is ~1e-4 a row)
MISSING_P = 1e-3  # a key the reference weighs at least this much, and the kernel exactly 0, was never read
FIT_RMS = 0.01  # a softmax temperature is said only where log(weight) is a line in the scores to this rms ...
FIT_EXPLAINED = 0.99  # ... explaining this share of log(weight)'s spread about its block means
MAP_CELLS = 40  # the drawn maps are at most this many cells a side
# the one-token (decode) read-outs scale the case's q by this, so that every weight stays far from fp16's
# underflow: their numbers are of the case's keys and lengths with that q, which their words say
DECODE_Q_SCALE = 0.1


def scaled_q_case(case: str) -> str:
    """"the <case> case, q scaled by 0.1": what a decode read-out's numbers are measured on."""
    return f"the {case} case, q scaled by {DECODE_Q_SCALE:g}"

LN2 = math.log(2.0)


def one_hot_values(shape: tuple[int, ...], group: int, device: torch.device | str) -> torch.Tensor:
    """V for key group ``group``: key j = group*d + c gets e_c, every other key 0."""
    batch, heads, seq, dim = shape
    v = torch.zeros(shape, dtype=torch.float16, device=device)
    keys = torch.arange(group * dim, min((group + 1) * dim, seq), device=device)
    v[:, :, keys, keys - group * dim] = 1.0
    return v


def weights(module: ModuleType, q: torch.Tensor, k: torch.Tensor, causal: bool | None) -> tuple[torch.Tensor, int]:
    """The student's effective weights, (batch*heads, seq, seq) float64, and the launches it took.

    Unwritten elements (still the poison pattern) read as NaN.  Each launch records its
    visits, as the correctness launches do, so it runs the variant they compiled (a
    kernel whose visit recording is a constexpr switch would otherwise compile again);
    and each runs on the case's own shape: one launch a group of keys, not the groups
    stacked in the batch, whose larger batch would read out a kernel that mishandles the
    batch index as weights it never applies at the checked shape."""
    def launch(v: torch.Tensor) -> torch.Tensor:
        return launching.run_launcher(module, (q, k, v), causal, record_visits=True).out

    return weights_through(launch, tuple(q.shape), q.shape[0] * q.shape[1], q.device)


def weights_through(launch: Callable[[torch.Tensor], torch.Tensor], v_shape: tuple[int, ...], rows: int,
                    device: torch.device | str) -> tuple[torch.Tensor, int]:
    """Weights read out through one-hot values: ``launch(v)`` runs the kernel with
    values ``v`` of ``v_shape`` (batch, heads of V, seq, head_dim) and returns its
    output, whose (``rows``, seq, head_dim) are the weights on the keys that carry a
    one, head_dim keys a launch (V made on ``device``).  Returns (rows, seq, seq) float64 (unwritten
    elements as NaN) and the launches it took."""
    seq, dim = v_shape[2], v_shape[3]
    return weights_read_out(lambda group: launch(one_hot_values(v_shape, group, device)), seq, dim,
                            (rows, seq), device)


def weights_read_out(read: Callable[[int], torch.Tensor], keys: int, dim: int, rows: tuple[int, int],
                     device: torch.device | str) -> tuple[torch.Tensor, int]:
    """Weights read out through one-hot values, a group of ``dim`` keys a launch:
    ``read(group)`` runs the kernel with key ``group*dim + c`` carrying the unit vector
    e_c and every other key 0, and returns its output arranged as (``rows``, dim) — rows
    being (attention rows, queries each), e.g. (batch*heads, seq) — so that output channel
    c of a row is its weight on that key.  Returns (*rows, keys) float64 on ``device``
    (unwritten elements, still the poison pattern, as NaN) and the launches it took."""
    w = torch.empty((*rows, keys), dtype=torch.float64, device=device)  # measured where the kernel ran
    groups = -(-keys // dim)
    for group in range(groups):
        out = read(group).detach().reshape(*rows, dim)
        poisoned = out.view(torch.int16) == launching.POISON_BITS
        block = out.to(torch.float64).masked_fill(poisoned, float("nan")).to(device)
        width = min(dim, keys - group * dim)
        w[:, :, group * dim : group * dim + width] = block[:, :, :width]
    return w, groups


# how far a kernel's output on a random V may stray from the read-out weights times V (fp16
# weights of about 1/n each, V of a few units) before the read-out describes nothing
LINEAR_SLACK = 0.1


def read_out_gap(out: torch.Tensor, w: torch.Tensor, v: torch.Tensor, relative: bool = False) -> float:
    """How far the kernel's output ``out`` on values ``v`` strays from the read-out weights
    ``w`` times ``v``: an attention kernel's output is its weights times V, so a gap above
    :data:`LINEAR_SLACK` means the one-hot read-out describes nothing (V read from the wrong
    tensor, or its channels mixed).  ``out`` (rows, queries, d), ``w`` (rows, queries, keys),
    ``v`` (rows of V, keys, d); only rows the read-out measured (finite) count.  ``relative``:
    each row's gap over its largest predicted value where that is above 1 (an fp16 output of
    weights summing far above 1 rounds by more than the slack, and is still their sum)."""
    predicted = w.nan_to_num(0.0) @ v.to(torch.float64).to(w.device)
    measured = torch.isfinite(w).all(dim=-1)
    gap = (out.to(torch.float64).to(w.device) - predicted).abs().nan_to_num(nan=float("inf"))
    if relative:
        gap = gap / predicted.abs().amax(dim=-1, keepdim=True).clamp_min(1.0)
    gap = gap.amax(dim=-1)[measured]
    return float(gap.max()) if gap.numel() else 0.0


V_LOAD = ("Check what the V load reads: its pointer (the tensor, the head offset), offsets and strides; and that"
          " V reaches nothing but that weighted sum (a Q or K load that reads V's tensor makes the weights"
          " themselves change with V).")


def not_weighted_sum_words(gap: float, where: str, look: str = V_LOAD) -> str:
    """What :func:`read_out_gap` measured when the read-out describes nothing, in words,
    and where to ``look``."""
    return (f" Read out through one-hot values, your output is no weighted sum of its own head's rows of V: on a"
            f" random V it differs from the read-out weights times V by up to {gap:.3g}{where}, so the tutor says"
            f" nothing of which keys each row weighs. {look}")


def head_dim_major(x: torch.Tensor) -> torch.Tensor:
    """``x`` (..., positions, head_dim) as a load that exchanges its strides reads it: position c,
    component d taken from element c + d * positions of each (positions, head_dim) block."""
    return x.contiguous().reshape(*x.shape[:-2], x.shape[-1], x.shape[-2]).transpose(-1, -2)


def head_dim_major_words(name: str, positions: int, head_dim: int) -> str:
    """The end of a sentence whose subject is the wrong outputs: attention with ``name`` read
    head_dim-major (:func:`head_dim_major`)."""
    return (f", within the tolerance, attention with its own {name} read head_dim-major: position c, component d at"
            f" element c + d * {positions} of the head's {positions} x {head_dim} block, where c * {head_dim} + d"
            f" belongs (the {name} load's strides exchanged).")


def other_head_words(out: torch.Tensor, expected: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
                     tolerance: float) -> str:
    """Where the whole output of every wrong head equals, within ``tolerance``, attention with
    another head's query, K/V, K or V (the rest its own), in words; "" otherwise.  The head
    is axis 1 of ``q``, ``k``, ``v``, ``out`` and ``expected`` (the reference's output; one K/V
    head a query head); ``attend(q, k, v)`` is the drill's float64 reference, run here on one
    head at a time: a (wrong head, other head) pair costs a head's attention, and a way of
    swapping stops at the first wrong head no other head explains."""
    heads = q.shape[1]
    got = out.to(torch.float64)

    def gap(h: int, alt: torch.Tensor) -> float:
        return float((got.select(1, h) - alt.to(got.device)).abs().nan_to_num(nan=float("inf")).max())

    wrong = [h for h in range(heads) if gap(h, expected.select(1, h)) > tolerance]
    if not wrong:
        return ""
    if k.shape == v.shape:  # its own K and V, the one taken for the other (blind round 12, 07 w42)
        exchanged = attend(q, v, k)
        if all(gap(h, exchanged.select(1, h)) <= tolerance for h in wrong):
            return " The whole output of each wrong head equals, within the tolerance, attention with its own" + KV_EXCHANGED
    for name, moved in (("K", (False, True, False)), ("V", (False, False, True))):
        # its own K or V read head_dim-major (blind round 27, 02 b32: K's offsets cols + offs_d * N_CTX, told
        # only that the weights are no softmax of q.k)
        transposed = attend(*[head_dim_major(x) if m else x for x, m in zip((q, k, v), moved, strict=True)])
        if all(gap(h, transposed.select(1, h)) <= tolerance for h in wrong):
            return " The whole output of each wrong head equals" + head_dim_major_words(name, *k.shape[-2:])
    swaps = {  # what is another head's -> (what stays its own, the pointer to check, which of q, k, v move)
        "query": ("K/V", "q pointer", (True, False, False)),
        "K/V": ("query", "K and V pointers", (False, True, True)),
        "K": ("query and V", "K pointer", (False, True, False)),
        "V": ("query and K", "V pointer", (False, False, True)),
    }
    def alt(h: int, o: int, moved: tuple[bool, bool, bool]) -> torch.Tensor:
        """Head h's attention with head o's tensors where ``moved`` says, its own elsewhere."""
        pick = [[o if m else h] for m in moved]
        return attend(q[:, pick[0]], k[:, pick[1]], v[:, pick[2]]).select(1, 0)

    for what, (own, pointer, moved) in swaps.items():
        found: dict[int, int] = {}
        for h in wrong:
            match = next((o for o in range(heads) if o != h and gap(h, alt(h, o, moved)) <= tolerance), None)
            if match is None:
                break
            found[h] = match
        if len(found) == len(wrong):
            shown = "; ".join(f"head {h}: head {o}'s" for h, o in sorted(found.items()))
            return (f" The whole output of each wrong head equals, within the tolerance, attention with another head's"
                    f" {what} and its own {own} ({shown}): check the head offset of the {pointer}.")
    return ""


def scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The true scaled scores q·k / sqrt(d), float64, (batch*heads, seq, seq), on q's device."""
    batch, heads, seq, dim = q.shape
    qf = q.to(torch.float64).reshape(batch * heads, seq, dim)
    kf = k.to(torch.float64).reshape(batch * heads, k.shape[-2], dim)  # as many keys as k holds (one query: decode)
    s: torch.Tensor = (qf @ kf.transpose(-1, -2)) * dim**-0.5
    return s


LAYOUT_FIT = 0.01  # largest weight gap at which a read-out is softmax of given scores


def softmax_itself(w: torch.Tensor, p: torch.Tensor) -> bool:
    """Are the read-out weights ``w`` softmax's own ``p`` (within LAYOUT_FIT) on every finite row?"""
    rows = torch.isfinite(w).all(dim=-1)
    return bool(rows.any()) and float((w[rows].to(torch.float64) - p[rows].to(torch.float64)).abs().max()) <= LAYOUT_FIT


def k_layout_words(w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor, group: int = 1) -> str:
    """Where the read-out weights ``w`` (batch*heads, seq, seq) are softmax over ``allowed`` of
    scores against each head's K read as a (head_dim, seq) array -- key n's component c taken
    from element c*seq + n, the sequence and head_dim strides swapped in the K offsets -- in
    every finite row, within LAYOUT_FIT: the words; "" otherwise.  ``k`` (batch, heads_kv, seq,
    head_dim), each K/V head serving ``group`` query heads of ``q``."""
    b, h, n, d = k.shape
    if n == d:
        return ""  # the two layouts are one shape: a transposed K is the same question either way
    swapped = k.reshape(b, h, d, n).transpose(-1, -2).repeat_interleave(group, dim=1)
    s = scores(q, swapped).to(w.device)
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
    if not softmax_itself(w, p):
        return ""
    rows = torch.isfinite(w).all(dim=-1)
    which = "every row's weights are" if bool(rows.all()) else \
        f"the weights of every row it can read ({int(rows.sum())} of {rows.numel()}) are"
    return (f" Read out through one-hot values, {which} softmax's over scores against K read as a"
            f" (head_dim, seq) array: key n's component c taken from element c*{n} + n of its head's K, where the"
            f" drill's (seq, head_dim) layout has it at n*{d} + c (within {LAYOUT_FIT} of every weight). The K offsets"
            " swap the sequence and head_dim strides.")


def allowed_keys(seq: int, causal: bool, device: torch.device | str = "cpu") -> torch.Tensor:
    rows = torch.arange(seq, device=device)[:, None]
    cols = torch.arange(seq, device=device)[None, :]
    return (cols <= rows) if causal else torch.ones(seq, seq, dtype=torch.bool, device=device)


def softmax_on(s: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    masked = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(masked, dim=-1).nan_to_num(nan=0.0)


# -- temperature -------------------------------------------------------------------------
def temperature_names(head_dim: int) -> dict[TemperatureName, float]:
    """Slopes of log W against the true scores that a known mistake gives."""
    scale = head_dim**-0.5
    return {
        "right": 1.0,
        "scale-missing": 1 / scale,
        "scale-twice": scale,
        "scale-inverted": 1 / scale**2,
        "exp-not-exp2": 1 / LN2,  # exp() of scores already multiplied by log2(e)
        "exp2-without-log2e": LN2,  # exp2() of scores never multiplied by log2(e)
        "scale-missing-exp-not-exp2": 1 / (scale * LN2),
        "scale-missing-exp2-without-log2e": LN2 / scale,
        "scale-twice-exp-not-exp2": scale / LN2,
        "scale-twice-exp2-without-log2e": scale * LN2,
    }


# What a measured temperature (slope of log W against the true scaled scores) equals, and
# the ways a kernel gets there: the slope measures the product of the factors on the
# scores before the exponential, not which line put them there, so every known way is said.
TEMPERATURE_WORDS: dict[TemperatureName, str] = {
    "right": "the scale and the exponential's base agree with softmax's",
    "scale-missing": ("that is 1/sm_scale: the scores reach the exponential without the 1/sqrt(head_dim)"
                      " scale"),
    "scale-twice": ("that is sm_scale: the scores are scaled by 1/head_dim, one 1/sqrt(head_dim) too many"
                    " (the scale applied twice, or 1/head_dim passed as the scale)"),
    "scale-inverted": ("that is 1/sm_scale squared: the scores are multiplied by sqrt(head_dim) where they"
                       " should be divided by it"),
    "exp-not-exp2": ("that is log2(e): the scores carry a log2(e) factor the exponential does not undo"
                     " (exp() of scores scaled for exp2, or log2(e) applied twice before exp2)"),
    "exp2-without-log2e": ("that is ln(2): the exponential's base is 2 where the scores are in natural-log"
                           " units (exp2() without the log2(e) factor)"),
    "scale-missing-exp-not-exp2": ("that is log2(e)/sm_scale: no 1/sqrt(head_dim) scale, and a log2(e) factor"
                                   " the exponential does not undo"),
    "scale-missing-exp2-without-log2e": "that is ln(2)/sm_scale: exp2() of scores with no scale at all",
    "scale-twice-exp-not-exp2": ("that is sm_scale*log2(e): one 1/sqrt(head_dim) too many, and a log2(e)"
                                 " factor the exponential does not undo"),
    "scale-twice-exp2-without-log2e": ("that is sm_scale*ln(2): one 1/sqrt(head_dim) too many, and exp2()"
                                       " without the log2(e) factor"),
}


def name_temperature(slope: float | None, head_dim: int) -> TemperatureName:
    if slope is None or not math.isfinite(slope):
        return ""
    # within 1 %: a read-out's slope is good to about 0.3 % (fp16 weights); the named slopes of
    # a head_dim lie 2 % apart at some sizes (ln 2 / sm_scale = 3.92 at 32, where a scale of
    # 1/sqrt(2) gives 4.00: blind round 8), and a slope named wrongly names a false cause
    for name, value in temperature_names(head_dim).items():
        if abs(slope / value - 1) < 0.01:
            return name
    return "other"


def temperature_sentence(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, head_dim: int, block_n: int,
                         span: str = "Within each K/V block") -> str:
    """The words of :func:`temperature_reading`."""
    return temperature_reading(w, s, allowed, head_dim, block_n, span)[0]


def measured_slope(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, block_n: int) -> float | None:
    """The slope of log(weight) against the true scaled scores ``s`` where the read-out ``w``
    fits one (:func:`temperature_reading`'s rules), else None."""
    rows_ok = torch.isfinite(w).all(dim=-1)
    slope, rms, explained = _fit_temperature_explained(w.nan_to_num(0.0), s, allowed, rows_ok, block_n)
    if slope is None or rms is None or rms > FIT_RMS or explained is None or explained < FIT_EXPLAINED:
        return None
    return slope


FP16_UNREADABLE = 2.0**-22  # a weight below this comes back from an fp16 output as 0 or a few subnormal steps


def too_small_to_read(s: torch.Tensor, allowed: torch.Tensor, slope: float | None) -> torch.Tensor:
    """The ``allowed`` keys whose weight, were the kernel softmax at the measured ``slope``
    over them, would lie below what an fp16 output holds: a weight read out as 0 there says
    nothing of the mask or the loop (a temperature 32 times too hot spreads the read-out's
    small scores over e^(+-10): blind round 11, drill 08).  None of them without a slope."""
    if slope is None:
        return torch.zeros_like(allowed.expand_as(s))
    z = torch.where(allowed, slope * s, torch.full_like(s, float("-inf")))
    return allowed & (torch.softmax(z, dim=-1) < FP16_UNREADABLE)


def temperature_reading(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, head_dim: int, block_n: int,
                        span: str = "Within each K/V block") -> tuple[str, bool]:
    """The slope of log(weight) against the true scaled scores ``s``, fitted on the keys
    each row weighs (``allowed`` broadcast against ``w``; an intercept per row and group of
    ``block_n`` keys), in words: "" where it cannot be fitted or the weights are no softmax
    of the scores at any slope (rms residual above FIT_RMS, or the line explaining less than FIT_EXPLAINED
    of log(weight)'s spread: a read-out on small scores varies little, so a small residual
    alone does not show a fit), so only a measured slope is said.  (A kernel whose right
    temperature meets the wrong q rows fits at rms 0.03 and 91 %, drill 08's blind round;
    a wrong temperature fits at rms 3e-4 and 99.999 %.)  And whether that slope is
    one a known scale or base mistake gives (not 1): a wrong temperature, measured."""
    return slope_words(measured_slope(w, s, allowed, block_n), head_dim, span)


def slope_words(slope: float | None, head_dim: int, span: str) -> tuple[str, bool]:
    """A :func:`measured_slope` in :func:`temperature_reading`'s words, and whether it is a
    known wrong temperature ("" and False without one)."""
    if slope is None:
        return "", False
    name = name_temperature(slope, head_dim)
    said = TEMPERATURE_WORDS.get(name, "") if name else ""
    if name == "other":  # no known mistake's slope: what it measures, in the kernel's own units
        said = (f"the scores reach a natural exp as q·k times {slope * head_dim**-0.5:.4g}, where softmax's factor is"
                f" 1/sqrt({head_dim}) = {head_dim**-0.5:.4g}")
    if name == "right":
        return f" {span}, log(weight) follows the true scores with slope {slope:.3f} (softmax's is 1): {said}.", False
    return (f" {span}, log(weight) follows the true scores with slope {slope:.3f}, not 1 (softmax's)"
            f"{': ' + said if said else ''}.", bool(name))


def softmax_reading(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, head_dim: int, block_n: int,
                    span: str, sums_of: str, shares: Callable[[], str],
                    row_name: Callable[[int], str] = lambda r: f"row {r}") -> tuple[str, bool]:
    """What a one-hot read-out ``w`` says against softmax of the true scores ``s``, in words:
    the slope (:func:`temperature_reading`), what each row's weights (``sums_of``) add up to
    (:func:`row_sums`) and, only where the slope is softmax's own, how the blocks share each
    row's weight (``shares()``, e.g. :func:`block_shares.block_shares_words`): a block-wise
    pattern is read only at the right temperature.  And whether the slope is a known wrong
    temperature.  Where no slope is read, keys added more than once may still be
    (:func:`block_shares.counted_keys_words`; ``row_name`` names a flat row of ``w``)."""
    slope, hot = temperature_reading(w, s, allowed, head_dim, block_n, span)
    said = slope + row_sums(w, sums_of)
    if not slope:
        said += counted_keys_words(w, s, allowed, row_name) or zero_scores_words(w, s, allowed, row_name)
    if slope and not hot:
        said += shares()
    return said, hot


def row_sums(weights: torch.Tensor, what: str = "each row's weights") -> str:
    """What each row's read-out weights (``what``) add up to, in words, when that is not 1
    ("" when it is)."""
    sums = weights.sum(dim=-1)[torch.isfinite(weights).all(dim=-1)]
    if sums.numel() == 0 or float((sums - 1).abs().max()) < 0.02:
        return ""
    return (f" Read out through one-hot values, {what} add up to between {float(sums.min()):.3g} and "
            f"{float(sums.max()):.3g}, not 1.")


def _fit_temperature(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, rows_ok: torch.Tensor,
                     block_n: int) -> tuple[float | None, float | None]:
    """(slope, rms residual) of :func:`_fit_temperature_explained`."""
    slope, rms, _ = _fit_temperature_explained(w, s, allowed, rows_ok, block_n)
    return slope, rms


def _fit_temperature_explained(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, rows_ok: torch.Tensor,
                               block_n: int) -> tuple[float | None, float | None, float | None]:
    """Fit log W = a·s + b per (row, key block) on the keys read; returns (a, rms residual,
    the share of log W's spread about its block means that the line explains).

    The intercept is free per block, so a block-wide scale error does not bend
    the slope."""
    seq = w.shape[-1]
    rowmax = w.clamp(min=0).amax(dim=-1, keepdim=True)
    use = allowed & rows_ok[..., None] & (w > 1e-3 * rowmax) & (w > 1e-5)
    if int(use.sum()) < 8:
        return None, None, None
    logw = torch.where(use, w.clamp(min=1e-300).log(), torch.zeros_like(w))
    sx = torch.where(use, s, torch.zeros_like(s))
    blocks = -(-seq // block_n)
    pad = blocks * block_n - seq

    def grouped(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, (0, pad)).reshape(*x.shape[:-1], blocks, block_n)

    u, lx, xs = grouped(use.to(torch.float64)), grouped(logw), grouped(sx)
    n = u.sum(dim=-1, keepdim=True)
    has = n >= 2
    mean_x = torch.where(has, (xs * u).sum(-1, keepdim=True) / n.clamp(min=1), torch.zeros_like(n))
    mean_y = torch.where(has, (lx * u).sum(-1, keepdim=True) / n.clamp(min=1), torch.zeros_like(n))
    dx = (xs - mean_x) * u * has
    dy = (lx - mean_y) * u * has
    sxx = float((dx * dx).sum())
    if sxx < 1e-9:
        return None, None, None
    slope = float((dx * dy).sum()) / sxx
    resid = (dy - slope * dx) * u * has
    count = float((u * has).sum())
    spread = float((dy * dy).sum())
    explained = 1.0 - float((resid * resid).sum()) / spread if spread > 0 else None
    return slope, math.sqrt(float((resid * resid).sum()) / max(count, 1.0)), explained


# -- the read-out --------------------------------------------------------------------------
def read_out(
    module: ModuleType,
    q: torch.Tensor,
    k: torch.Tensor,
    causal: bool | None,
    case: str = "",
    probe: bool | None = None,
    generator: torch.Generator | None = None,
    known_dependence: tuple[dict[str, bool], list[str]] | None = None,
    values: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> ReadOut:
    """Launch the kernel with one-hot V and measure its weights against softmax(q·k/sqrt(d)).

    ``causal=None``: the launcher takes no ``causal`` argument (full attention).
    ``probe``: also perturb Q, K, V of head 0 (3 more launches); by default only
    when the weights are not a softmax of the true scores, or show nothing wrong.
    ``known_dependence``: the probe's answer from another mode of the same kernel
    (which pointers it reads does not depend on the mode), reused instead of re-measured.
    ``values``: the (V, output) of the correctness launch on these Q, K: how far that output
    strays from the weights times V (:func:`read_out_gap`, no launch) is ``values_gap``."""
    batch, heads, seq, dim = q.shape
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    is_causal = bool(causal)
    w, launches = weights(module, q, k, causal)
    measured = measure(w, scores(q, k), is_causal, block_m, block_n, dim)
    measured.case = case
    measured.shape = list(q.shape)
    measured.launches = launches
    if values is not None:
        v, out = values
        rows = (batch * heads, seq, dim)
        measured.values_gap = read_out_gap(out.reshape(rows), w, v.reshape(rows), relative=True)
        if not trusted(measured) and k.shape == v.shape:  # keys from V, values from K? (blind round 12)
            exchanged = softmax_on(scores(q, v), allowed_keys(seq, is_causal, q.device)) \
                @ k.to(torch.float64).reshape(rows)
            measured.exchanged_gap = float((out.reshape(rows).to(torch.float64) - exchanged).abs()
                                           .nan_to_num(nan=float("inf")).max())
    if probe is None:  # the weights say nothing (or nothing wrong): ask which inputs the output follows
        probe = measured.fit_rms is None or measured.fit_rms > 0.1 or measured.temperature_name == "other" \
            or not abnormal(measured) or not trusted(measured)
    if probe and known_dependence is not None:
        measured.moves_with, measured.crosstalk = known_dependence  # measured in another mode already
    elif probe:
        measured.moves_with, measured.crosstalk = dependence(module, q, k, causal, generator)
        measured.launches += 4
    return measured


def exchanged(ro: ReadOut) -> bool:
    """Is the case's output attention with K and V exchanged (keys read from V, values from K)?"""
    return ro.exchanged_gap is not None and ro.exchanged_gap <= LINEAR_SLACK


KV_EXCHANGED = (" K and V exchanged (keys taken from V, values from K): check the order of the K and V arguments"
                " where the launcher calls the kernel, and of the kernel's parameters and loads.")


def trusted(ro: ReadOut) -> bool:
    """Does the read-out describe the kernel: its case's own output is the weights times V?"""
    return ro.values_gap is None or ro.values_gap <= LINEAR_SLACK


def abnormal(ro: ReadOut) -> bool:
    """Does the read-out show anything wrong with the weights themselves?"""
    return bool(ro.nan_rows or ro.forbidden_rows or ro.missing_rows or not ro.sums_to_one
                or ro.temperature_name not in ("right",) or ro.block_pattern not in ("consistent",))


def measure(w: torch.Tensor, s: torch.Tensor, causal: bool, block_m: int, block_n: int, head_dim: int) -> ReadOut:
    """Every measurement of :class:`ReadOut` from the weights ``w`` and true scores ``s``
    (both (heads, seq, seq) float64).  Pure tensor work: the tests feed it made-up weights."""
    heads, seq, _ = w.shape
    allowed = allowed_keys(seq, causal, w.device).expand(heads, seq, seq)
    p = softmax_on(s, allowed)
    rows_ok = torch.isfinite(w).all(dim=-1)  # (heads, seq)
    wz = torch.where(rows_ok[..., None], w, torch.zeros_like(w))
    result = ReadOut(mode="causal" if causal else "full", case="", shape=[], block_m=block_m, block_n=block_n,
                     launches=0)
    result.nan_rows = (~rows_ok).any(dim=0).nonzero().flatten().tolist()
    result.nan_whole_rows = bool(result.nan_rows) and bool((~torch.isfinite(w)).all(dim=-1)[~rows_ok].all())
    rows = torch.arange(seq, device=w.device)[:, None]
    cols = torch.arange(seq, device=w.device)[None, :]
    row_block_end = torch.clamp((rows // block_m + 1) * block_m, max=seq)
    bound_done = -(-row_block_end // block_n) * block_n  # the keys a correct causal loop visits: c < this

    # -- weight where it must not be ----------------------------------------------------------
    forbidden = ~allowed & (wz.abs() > READ)
    f_mass = torch.where(~allowed, wz.abs(), torch.zeros_like(wz)).sum(-1)  # (heads, seq)
    f_rows = (f_mass > ROW_MASS) & rows_ok
    result.forbidden_rows = int(f_rows.any(dim=0).sum())
    if result.forbidden_rows:
        h, r = divmod(int(torch.where(f_rows, f_mass, torch.zeros_like(f_mass)).argmax()), seq)
        result.forbidden_mass, result.forbidden_row = float(f_mass[h, r]), r
        sel = forbidden & f_rows[..., None]
        next_key = (cols == rows + 1).expand_as(sel)
        inside = (cols < bound_done).expand_as(sel)
        if bool((sel <= next_key).all()):
            result.forbidden_where = "next-key"
        elif bool((sel <= inside).all()):
            # every future key of the diagonal block, or only some of them
            whole = (~allowed & inside & f_rows[..., None]) <= sel
            result.forbidden_where = "diagonal-block" if bool(whole.all()) else "part-of-diagonal-block"
        elif bool((sel <= ~inside).all()):
            result.forbidden_where = "future-blocks"
        else:
            result.forbidden_where = "diagonal-and-future-blocks"
        result.forbidden_score = _forbidden_score(wz, s, allowed, sel, f_rows)

    # -- weight missing where it must be --------------------------------------------------------
    # exactly 0 where the reference gives at least MISSING_P and the kernel's own weights,
    # extrapolated from the row's heaviest key at the kernel's own temperature, would too: a
    # key never loaded, masked or multiplied by 0 gets exactly 0, while a key whose p merely
    # underflows fp16 (a too-sharp softmax) is predicted tiny and is not "missing"; a key
    # weighted too little is the block ratios' business
    slope, rms = _fit_temperature(wz, s, allowed, rows_ok, block_n)
    a = slope if slope is not None and rms is not None and rms < 0.1 and slope > 0 else 1.0
    w_top, anchor = torch.where(allowed, wz, torch.zeros_like(wz)).max(dim=-1, keepdim=True)
    expected = torch.where(w_top > 0, w_top * torch.exp(a * (s - s.gather(-1, anchor))), p)
    needed = allowed & (p > MISSING_P) & (expected > MISSING_P) & rows_ok[..., None]
    missing = needed & (wz == 0)
    m_mass = torch.where(missing, p, torch.zeros_like(p)).sum(-1)
    m_rows = m_mass > ROW_MASS
    result.missing_rows = int(m_rows.any(dim=0).sum())
    if result.missing_rows:
        h, r = divmod(int(torch.where(m_rows, m_mass, torch.zeros_like(m_mass)).argmax()), seq)
        result.missing_mass, result.missing_row = float(m_mass[h, r]), r
        result.missing_keys = missing[h, r].nonzero().flatten().tolist()
        result.missing_keys_complete = bool((missing[h, r] == (allowed & (wz == 0))[h, r]).all())
        result.missing_where, result.skipped_blocks = _where_missing(missing, needed, rows, cols, seq,
                                                                     block_m, block_n)
        # what a causal mask compared by positions within the tiles drops (offs_n - start_n against
        # offs_m - start_m): right in a diagonal block, it drops keys of the blocks left of it too
        # (said "in the blocks left of the diagonal too": some missed key's block ends before the row's query tile)
        deeper = ((cols % block_n) > (rows % block_m)).expand_as(needed)
        left = ((cols // block_n + 1) * block_n <= rows - rows % block_m).expand_as(needed)
        result.missing_in_tile = bool((missing == (needed & deeper)).all()) and bool((missing & left).any())
        # or every key after the row's place in its query block (key > row % BLOCK_M): the row's offset in its
        # tile compared with the keys' positions (blind round 28, 01 b08), seen only below the first query block
        after = (cols > rows % block_m).expand_as(needed)
        result.missing_row_in_tile = bool((missing == (needed & after)).all()) and bool(
            missing[..., block_m:, :].any())
        # those rows' weights on the keys left, against softmax over those keys alone: measured on the rows
        # themselves (blind round 26, 01 b30: V loaded at a block's own offsets folds the missing keys' weight
        # onto block 0's keys; the clean rows' proportions said nothing of it)
        # (every key read as exactly 0, not only those of at least MISSING_P: at 1000 keys most weigh less)
        unread = allowed & (wz == 0)
        rest = softmax_on(s, allowed & ~unread)
        gap = (wz - rest).abs().amax(dim=-1)[m_rows & rows_ok]
        result.missing_rest_softmax = bool((gap < 0.01).all())
        # or is what those rows miss at key c found on key c % BLOCK_N, of key block 0, on top of its own weight:
        # V rows loaded at a block's offsets within the block (offs_n), not at its keys (blind round 26, 01 b27)
        moved = torch.where(unread, p, torch.zeros_like(p))
        folded = torch.zeros_like(p[..., :block_n])
        for start in range(0, seq, block_n):
            part = moved[..., start:start + block_n]
            folded[..., :part.shape[-1]] += part
        first = min(block_n, seq)
        excess = wz[..., :first] - torch.where(allowed, p, torch.zeros_like(p))[..., :first]
        off = (excess - folded[..., :first]).abs().amax(dim=-1)[m_rows & rows_ok]
        result.missing_on_block0 = bool(off.numel()) and bool((off < 0.01).all())
        result.missing_cut = _score_cut(wz, s, allowed, m_rows & rows_ok, block_n)

    # -- row sums, temperature, block consistency ----------------------------------------------------
    sums = wz.sum(-1)[rows_ok]
    if sums.numel():
        result.row_sum_min, result.row_sum_max = float(sums.min()), float(sums.max())
        # an output never divided by l_i sums to l_i = sum_j exp(s_ij - max_j s_ij): 1 at the
        # maximum, more for every other key (a row divided by something else sums to anything)
        top = torch.where(allowed, s, torch.full_like(s, float("-inf"))).amax(dim=-1, keepdim=True)
        den = torch.where(allowed, torch.exp(s - top.nan_to_num(neginf=0.0)), torch.zeros_like(s)).sum(-1)[rows_ok]
        close = (sums - den).abs() <= 0.02 * den
        result.sums_are_denominators = bool(close.float().mean() >= 0.9)
    result.temperature = slope
    result.fit_rms = rms
    result.temperature_name = name_temperature(slope, head_dim) if rms is not None and rms < 0.1 else ""
    clean = rows_ok & ~f_rows & ~m_rows
    fitted = slope if result.temperature_name and slope is not None else 1.0  # a name implies a fitted slope
    _blocks(result, wz, s, p, allowed, clean, block_n, fitted)
    _phantoms(result, wz, s, allowed, clean, fitted, block_m, block_n)
    _maps(result, wz, p, allowed, rows_ok, f_mass, missing)
    return result


def _score_cut(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, rows: torch.Tensor,
               block_n: int) -> list[float]:
    """:attr:`ReadOut.missing_cut` over ``rows`` (heads, seq): in every K/V block of those rows, are
    the keys weighed 0 all below the keys weighed more (the block's p cut off under a score, as one
    that underflows is: each block's p is taken against the running maximum of its time)?  A block
    weighed not at all counts as neither; at least four cut blocks are needed (chance does not
    order a few zeros below the rest that often)."""
    seq = w.shape[-1]
    pad = -seq % block_n

    def blocked(x: torch.Tensor, fill: float | bool) -> torch.Tensor:
        x = x[rows]  # (rows, seq)
        return torch.nn.functional.pad(x, (0, pad), value=fill).reshape(x.shape[0], -1, block_n)

    ok = blocked(allowed, False)
    zero, kept = ok & (blocked(w, 0.0) == 0), ok & (blocked(w, 0.0) > 0)
    score = blocked(s, 0.0)
    inf = torch.full_like(score, float("inf"))
    highest_zero = torch.where(zero, score, -inf).amax(dim=-1)
    lowest_kept = torch.where(kept, score, inf).amin(dim=-1)
    cut = zero.any(dim=-1) & kept.any(dim=-1)  # (rows, blocks)
    if int(cut.sum()) < 4 or not bool((highest_zero[cut] < lowest_kept[cut]).all()):
        return []
    top = torch.where(allowed[rows], s[rows], float("-inf")).amax(dim=-1)
    under = (top[:, None] - (highest_zero + lowest_kept) / 2)[cut]
    return [float(cut.sum()), float(under.min()), float(under.max())]


def _forbidden_score(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, sel: torch.Tensor,
                     f_rows: torch.Tensor) -> ForbiddenScore:
    """What score the forbidden keys a row read got: their real one, or 0 (a mask that
    writes 0 instead of -inf).  Judged on rows that read every allowed key."""
    seen = (allowed & (w > READ)) | sel
    verdicts: list[tuple[ForbiddenScore, float]] = []
    fills: tuple[tuple[ForbiddenScore, float | None], ...] = (("true", None), ("zero", 0.0))
    for name, fill in fills:
        alt = s if fill is None else torch.where(sel, torch.full_like(s, fill), s)
        pred = softmax_on(alt, seen)
        # compared in proportion: keys V cannot show (past the end, loaded as zeros but
        # scored by the same mistake) only scale a row's weights down
        total = w.sum(-1, keepdim=True)
        shape = torch.where(total > 0, w / total.clamp(min=1e-300), w)
        gap = (pred - shape).abs().amax(dim=-1)[f_rows]
        verdicts.append((name, float((gap < 0.01).float().mean()) if gap.numel() else 0.0))
    best = max(verdicts, key=lambda x: x[1])
    return best[0] if best[1] >= 0.9 else "other"


def _where_missing(missing: torch.Tensor, needed: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, seq: int,
                   block_m: int, block_n: int) -> tuple[MissingWhere, list[list[int]]]:
    blocks = -(-seq // block_n)
    # (query block, key block) pairs in which every row misses every key it may see
    skipped = []
    for i in range(-(-seq // block_m)):
        r0, r1 = i * block_m, min((i + 1) * block_m, seq)
        for j in range(blocks):
            c0, c1 = j * block_n, min((j + 1) * block_n, seq)
            need = needed[:, r0:r1, c0:c1]
            if bool(need.any()) and bool((missing[:, r0:r1, c0:c1] | ~need).all()):
                skipped.append([i, j])
    whole = torch.zeros_like(missing)
    for i, j in skipped:
        whole[:, i * block_m : (i + 1) * block_m, j * block_n : (j + 1) * block_n] = True
    in_skipped = bool(skipped) and bool((missing <= whole).all())
    where: MissingWhere
    own = (cols == rows).expand_as(missing)
    # own keys missed only where whole blocks are (a last query block of one row whose one
    # key block the loop never reached, say) is a skipped block, not a mask off by one
    if bool((missing <= own).all()) and not in_skipped:
        where = "own-key"
    elif bool((missing <= (cols > rows).expand_as(missing)).all()):
        where = "future-keys"  # a full launch that drops the keys after each row: a causal mask leaked
    elif seq % block_n and bool((missing <= (tail := (cols >= seq - seq % block_n).expand_as(missing))).all()) \
            and bool(((needed & tail) <= missing).all()):
        # every key of the partial block missed, by every row that may see it: the loop never gets there (a mask
        # that drops only some of them, the last key say, is no loop bound: blind round 27, 02 b36)
        where = "ragged-tail"
    else:
        where = "whole-blocks" if in_skipped else "part-of-blocks"
    return where, skipped


def _blocks(result: ReadOut, w: torch.Tensor, s: torch.Tensor, p: torch.Tensor, allowed: torch.Tensor,
            clean: torch.Tensor, block_n: int, slope: float) -> None:
    """Per key block, the student's weight over the reference's, on rows with nothing
    misplaced or missing: one scale for every block, one factor for the whole row,
    or blocks weighted against their own maximum / a maximum not yet final."""
    heads, seq, _ = w.shape
    blocks = -(-seq // block_n)
    wm = torch.stack([torch.where(allowed, w, 0)[..., j * block_n:(j + 1) * block_n].sum(-1) for j in range(blocks)], -1)
    pm = torch.stack([p[..., j * block_n:(j + 1) * block_n].sum(-1) for j in range(blocks)], -1)
    use = (pm > BLOCK_MASS) & clean[..., None] & (wm > 0)
    if not bool(use.any()):
        return
    log_ratio = torch.where(use, (wm.clamp(min=1e-300) / pm.clamp(min=1e-300)).log(), torch.zeros_like(wm))
    result.block_ratio = [
        round(float(log_ratio[..., j][use[..., j]].median().exp()), 4) if bool(use[..., j].any()) else None
        for j in range(blocks)
    ]
    counts = use.sum(-1)
    multi = counts >= 2
    row_mean = log_ratio.sum(-1) / counts.clamp(min=1)
    spread = torch.where(use, (log_ratio - row_mean[..., None]).abs(), torch.zeros_like(log_ratio)).amax(-1)
    rows_used = counts >= 1
    result.row_factor = round(float(row_mean[rows_used].median().exp()), 4)
    if bool(multi.any()):
        result.rows_measured = int(multi.sum())
        result.rows_inconsistent = int((multi & (spread >= CONSISTENT)).sum())
        head, row = divmod(int(torch.where(multi, spread, -1.0).flatten().argmax()), seq)
        result.worst_row = row
        result.worst_row_ratio = [round(float(log_ratio[head, row, j].exp()), 4) if bool(use[head, row, j]) else None
                                  for j in range(blocks)]
    if not bool(multi.any()) or float(spread[multi].max()) < CONSISTENT:
        result.block_pattern = "consistent" if abs(result.row_factor - 1) < 0.01 and float(
            (row_mean[rows_used].abs()).max()) < 0.02 else "one-factor"
        return
    # which maximum each block was weighed against: its own, or the running one at the time
    masked = torch.where(allowed, s, float("-inf")) * slope
    bmax = torch.stack([masked[..., j * block_n:(j + 1) * block_n].amax(-1) for j in range(blocks)], -1)
    running = torch.cummax(bmax, dim=-1).values
    top = bmax.amax(-1, keepdim=True)
    result.block_pattern = "other"
    # (blind round 12) acc multiplied by alpha twice a step: each block weighs exp(running - final) times
    # softmax's; p against the block's own maximum while alpha carries the running one: exp(running - own)
    patterns: tuple[tuple[BlockPattern, torch.Tensor], ...] = (
        ("own-block-max", top - bmax), ("stale-max", top - running), ("rescaled-twice", running - top),
        ("block-max-carried", running - bmax),
        # (blind round 25, 02 b08) alpha in another base than p: each step carries the blocks before it by
        # e^(d) where 2^(d) belongs (d in log2 units), or the other way round: exp((c - 1)(running - final))
        ("alpha-natural-exp", (1 / LN2 - 1) * (running - top)), ("alpha-exp2-natural", (LN2 - 1) * (running - top)),
        # (blind round 25, 02 b12) acc divided by the running sum at every step: each block divided by every later l
        ("normalised-each-step", _later_sums(masked, running, blocks, block_n)))
    for name, pred in patterns:
        if fits_pattern(log_ratio, use, pred, multi):
            result.block_pattern = name
            return


def _later_sums(masked: torch.Tensor, running: torch.Tensor, blocks: int, block_n: int) -> torch.Tensor:
    """Per block j, -sum over the blocks t >= j that hold a visible key of ln l_t, l_t the running
    sum after block t (each key's exp(score - the running maximum after t)): the log of what an
    accumulator divided by l at every step leaves of block j, up to one constant a row."""
    logs = []
    for t in range(blocks):
        upto = masked[..., : (t + 1) * block_n]
        l_t = torch.exp(upto - running[..., t: t + 1]).nan_to_num(nan=0.0).sum(-1)
        held = torch.isfinite(masked[..., t * block_n:(t + 1) * block_n]).any(-1) & (l_t > 0)
        logs.append(torch.where(held, l_t.clamp(min=1e-300).log(), torch.zeros_like(l_t)))
    log_l = torch.stack(logs, -1)
    return -log_l.flip(-1).cumsum(-1).flip(-1)


def _phantoms(result: ReadOut, w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, clean: torch.Tensor,
              slope: float, block_m: int, block_n: int) -> None:
    """Rows whose weights keep the right proportions but sum to less than 1 had
    something extra in the denominator: as many score-0 keys as ``phantom_keys``,
    or the forbidden keys' own exp-scores."""
    if result.block_pattern not in ("one-factor", "consistent"):
        return
    total = w.sum(-1)
    rows = clean & (total < 0.99) & (total > 1e-6)
    if not bool(rows.any()):
        return
    scaled = torch.where(allowed, s * slope, float("-inf"))
    top = scaled.amax(-1)
    z = torch.exp(scaled - top[..., None]).sum(-1)  # the denominator, in units of exp(top)
    extra = (1 / total - 1) * z  # what the kernel's denominator had on top, same units
    phantom = (extra * torch.exp(top.clamp(max=700.0)))[rows]  # hostile scores: no inf * 0
    result.phantom_keys = round(float(phantom.median()), 2)
    ratio_zero = phantom / phantom.median()
    if bool((ratio_zero - 1).abs().max() < 0.05) and result.phantom_keys >= 0.5:
        result.extra_in_sum = "score-0-keys"
        return
    # the future keys' own weights: those of the diagonal block (the loop bound done), or all
    seq = w.shape[-1]
    r = torch.arange(seq, device=w.device)[:, None]
    c = torch.arange(seq, device=w.device)[None, :]
    in_diagonal = c < -(-torch.clamp((r // block_m + 1) * block_m, max=seq) // block_n) * block_n
    exp_scores = torch.exp(s * slope - top[..., None])
    for keys in (~allowed & in_diagonal, ~allowed):
        future = torch.where(keys, exp_scores, torch.zeros_like(s)).sum(-1)[rows]
        if bool(future.min() > 0) and bool(((extra[rows] / future) - 1).abs().max() < 0.05):
            result.extra_in_sum = "future-keys"
            return


def _maps(result: ReadOut, w: torch.Tensor, p: torch.Tensor, allowed: torch.Tensor, rows_ok: torch.Tensor,
          f_mass: torch.Tensor, missing_keys: torch.Tensor) -> None:
    """One head's weights, the reference's and a mark per cell, at most MAP_CELLS a side."""
    heads, seq, _ = w.shape
    head = int(f_mass.sum(-1).argmax()) if bool((f_mass > 0).any()) else 0
    # cells that tile the K/V blocks exactly, so block boundaries fall between cells
    cell = max(1, -(-seq // MAP_CELLS))
    tile = math.gcd(result.block_m, result.block_n)
    fits = [c for c in range(cell, tile + 1) if tile % c == 0]
    cell = fits[0] if fits else cell
    n = -(-seq // cell)
    pad = n * cell - seq

    def pool(x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.pad(x, (0, pad, 0, pad))
        return x.reshape(n, cell, n, cell).sum(dim=(1, 3))

    wh = torch.where(rows_ok[head][:, None], w[head], torch.zeros_like(w[head]))
    ph, ah = p[head], allowed[head].to(torch.float64)
    area = pool(torch.ones(seq, seq, dtype=torch.float64, device=w.device)).clamp(min=1)
    student, reference = pool(wh) / area, pool(ph) / area
    forbidden = pool(torch.where(allowed[head], torch.zeros_like(wh), wh.abs())) > READ
    missing = pool(missing_keys[head].to(torch.float64)) > 0
    nan_rows = pool((~rows_ok[head])[:, None].expand(seq, seq).to(torch.float64)) > 0
    wrong = (student - reference).abs() > 0.02 * reference.clamp(min=1e-3) + 1e-4
    seen = (pool(ah) > 0) | (student > 0)
    # the cells, at most MAP_CELLS a side, marked on the CPU: one copy, not a device read per cell
    cells = [x.cpu().tolist() for x in (nan_rows, forbidden, missing, wrong, seen)]
    marks = []
    for i in range(n):
        line = ""
        for j in range(n):
            nan_cell, forbidden_cell, missing_cell, wrong_cell, seen_cell = (c[i][j] for c in cells)
            line += ("!" if nan_cell else "+" if forbidden_cell else "-" if missing_cell else "~" if wrong_cell
                     else "." if seen_cell else " ")
        marks.append(line)
    result.head = head
    result.map_cell = cell
    result.map_student = [[round(x, 5) for x in row] for row in student.cpu().tolist()]
    result.map_reference = [[round(x, 5) for x in row] for row in reference.cpu().tolist()]
    result.map_marks = marks


def dependence(module: ModuleType, q: torch.Tensor, k: torch.Tensor, causal: bool | None,
               generator: torch.Generator | None) -> tuple[dict[str, bool], list[str]]:
    """Change head 0's q, k or v alone: does head 0's output move, and does any other head's?"""
    generator = generator or torch.Generator().manual_seed(1234)
    v = torch.randn(q.shape, generator=generator).to(q.device, torch.float16)
    base = launching.run_launcher(module, (q, k, v), causal, record_visits=True).out.to("cpu", torch.float64)
    moves: dict[str, bool] = {}
    cross: list[str] = []
    if not bool(torch.isfinite(base.reshape(-1, *base.shape[2:])[0]).any()):
        return moves, cross  # head 0 is NaN throughout: no change could show
    inputs = {"q": q, "k": k, "v": v}
    for name in ("q", "k", "v"):
        changed = dict(inputs)
        fresh = inputs[name].clone()
        fresh[0, 0] = torch.randn(fresh.shape[2:], generator=generator).to(q.device, torch.float16)
        changed[name] = fresh
        out = launching.run_launcher(module, (changed["q"], changed["k"], changed["v"]), causal,
                                     record_visits=True).out.to("cpu", torch.float64)
        # moved: a finite value changed, or an element turned NaN or stopped being NaN
        both = torch.isfinite(out) & torch.isfinite(base)
        delta = torch.where(both, (out - base).abs(), (torch.isfinite(out) != torch.isfinite(base)).to(out.dtype))
        delta = delta.reshape(-1, *out.shape[2:])
        moves[name] = bool(delta[0].max() > 1e-3)
        if delta.shape[0] > 1 and bool(delta[1:].max() > 1e-3):
            cross.append(name)
    return moves, cross
