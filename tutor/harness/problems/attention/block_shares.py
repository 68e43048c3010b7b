"""How the weight a kernel gives each block of keys compares with softmax's share of it.

A read-out's weights (:mod:`.readout`) can add up to something other than 1 for two
different reasons, and they look different block by block:

- every block keeps softmax's proportions and only the total is off: the output was
  divided by something other than the sum of the weights it accumulated (the running
  sum took other terms or other rescales than the output's accumulator, or a merge of
  partial results weighed the sums differently from the outputs);
- the blocks' shares disagree with one another: what carries a block's weight from one
  step of the loop to the next (the rescale by exp(old max − new max)) is missing or wrong.

:func:`block_shares_words` measures which, on any (rows, queries, keys) read-out with
the float64 scores, and says it.  It is used by drills whose read-outs have no
block-pattern measurement of their own (05–08); drills 01/02 have theirs in
:mod:`.readout`.

Key by key, where a read-out shows no slope (:func:`.readout.softmax_reading`): keys
whose weight is softmax's times a whole count, added more than once
(:func:`counted_keys_words`), and keys or rows that weigh what a score of exactly 0
gets, their K or q read as zeros (:func:`zero_scores_words`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from tutor.harness.findings import index_runs

# shared with the block ratios of drills 01/02 (readout._blocks)
BLOCK_MASS = 0.02  # a (row, block) pair is compared when softmax gives the block this much of the row
CONSISTENT = 0.03  # log-ratio spread under which a row's blocks share one scale
SUM_SLACK = 0.02  # row sums within this of 1 are right (fp16 weights of many keys)
FIT = 0.05  # how far (in log) a pattern may miss a row's block ratios and still be said
SHOWN = 12  # at most this many blocks' ratios are written out
NEVER_READ_P = 1e-3  # a key softmax weighs this much and the kernel exactly 0 was never read: its row is not compared


def even_spans(keys: int, block_n: int) -> list[slice]:
    """The key axis cut into blocks of ``block_n`` from key 0 (the last one short)."""
    return [slice(j, min(j + block_n, keys)) for j in range(0, keys, block_n)]


def _ratios(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor,
            spans: list[slice]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per (row, query, block): log(kernel's weight on the block / softmax's), where it can be
    compared (softmax gives the block at least BLOCK_MASS, the kernel something, the row
    finite, weighing no key it may not and none it must exactly 0: a key never read); the
    mask of those; and the blocks' largest scores."""
    masked = torch.where(allowed, s, float("-inf"))
    p = torch.softmax(masked, dim=-1).nan_to_num(0.0)
    rows_ok = (torch.isfinite(w).all(dim=-1) & (torch.where(allowed, 0.0, w.nan_to_num(0.0).abs()) < 1e-6).all(dim=-1)
               & ~((p > NEVER_READ_P) & (w == 0)).any(dim=-1))
    wz = torch.where(allowed, w.nan_to_num(0.0), 0.0)
    wm = torch.stack([wz[..., sl].sum(-1) for sl in spans], -1)
    pm = torch.stack([p[..., sl].sum(-1) for sl in spans], -1)
    top = torch.stack([masked[..., sl].amax(-1) for sl in spans], -1)
    use = (pm > BLOCK_MASS) & (wm > 0) & rows_ok[..., None]
    log_ratio = torch.where(use, (wm.clamp(min=1e-300) / pm.clamp(min=1e-300)).log(), torch.zeros_like(wm))
    return log_ratio, use, top


def fits_pattern(log_ratio: torch.Tensor, use: torch.Tensor, predicted: torch.Tensor, multi: torch.Tensor) -> bool:
    """Does ``predicted`` (log, up to one constant a row) match every multi-block row's ratios?"""
    gap = torch.where(use, log_ratio - predicted, torch.zeros_like(log_ratio))
    mean = gap.sum(-1) / use.sum(-1).clamp(min=1)
    resid = torch.where(use, (gap - mean[..., None]).abs(), torch.zeros_like(gap))[multi]
    return bool(resid.numel()) and float(resid.max()) < FIT


def _running(top: torch.Tensor, segments: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per block, the running maximum when it was read and the maximum at the end of the
    loop that read it: one loop a row, or, with ``segments`` (a loop id per block, the
    blocks of one id read in order by one program), one a segment."""
    if segments is None:
        return torch.cummax(top, dim=-1).values, top.amax(-1, keepdim=True).expand_as(top)
    seg = segments.expand_as(top)
    running, final = top.clone(), top.clone()
    for j in range(1, top.shape[-1]):
        same = seg[..., j] == seg[..., j - 1]
        running[..., j] = torch.where(same, torch.maximum(running[..., j - 1], top[..., j]), top[..., j])
    final[..., -1] = running[..., -1]
    for j in range(top.shape[-1] - 2, -1, -1):
        final[..., j] = torch.where(seg[..., j] == seg[..., j + 1], final[..., j + 1], running[..., j])
    return running, final


def _runs_words(known: list[tuple[int, float]], unit: str) -> str:
    """Where the compared blocks of a row fall into runs of consecutive blocks with one
    factor each (within CONSISTENT), at least one run of two or more, in words."""
    runs: list[list[tuple[int, float]]] = []
    for j, r in known:
        if runs and abs(math.log(r / runs[-1][0][1])) < CONSISTENT:
            runs[-1].append((j, r))
        else:
            runs.append([(j, r)])
    if len(runs) < 2 or len(runs) > 4 or max(len(run) for run in runs) < 2:
        return ""
    parts = [f"{unit}{'s' if len(run) > 1 else ''} {run[0][0]}{'-' + str(run[-1][0]) if len(run) > 1 else ''}"
             f" ×{run[0][1]:.2f}" for run in runs]
    return (f" They fall into runs of consecutive {unit}s with one factor each ({'; '.join(parts)}): within a run the"
            f" {unit}s keep softmax's proportions, and the runs weigh wrong against one another, as the parts of a"
            f" computation done piece by piece (a slice of a split, a pass of a loop) would.")


OWN_SUM_SLACK = 0.03  # a row's factor within 3 % of its own l: the final division left out


def _factor_is_own_sum(factors: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor) -> bool:
    """Whether each row's weight factor is its own l = sum of exp(s - max s) over its allowed keys."""
    masked = torch.where(allowed, s, torch.full_like(s, float("-inf")))
    top = masked.amax(-1, keepdim=True)
    own = torch.where(allowed, (masked - top).exp(), torch.zeros_like(s)).sum(-1)
    return bool(((factors / own) - 1).abs().max() < OWN_SUM_SLACK)


def _sum_unrescaled(factors: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, spans: list[slice]) -> bool:
    """Whether each row's weight total is 1 / sum_b share_b * exp(final max - running max at b):
    the accumulator rescaled as the maximum grows, its running sum l not (blind round 23, 08:
    ``l_i = l_i + sum(p)``, said only as "below 1" until then)."""
    masked = torch.where(allowed, s, torch.full_like(s, float("-inf")))
    p = torch.softmax(masked, dim=-1).nan_to_num(0.0)
    share = torch.stack([p[..., sl].sum(-1) for sl in spans], -1)
    top = torch.stack([masked[..., sl].amax(-1) for sl in spans], -1)
    running, final = _running(top, None)
    grown = torch.where(share > 0, (final - running).exp(), torch.zeros_like(share))
    predicted = 1 / (share * grown).sum(-1)
    if float((predicted - 1).abs().max()) < SUM_SLACK:
        return False  # no maximum grew enough to tell the two apart
    return bool(((factors / predicted) - 1).abs().max() < OWN_SUM_SLACK)


def zero_score_factor(s: torch.Tensor, extra: torch.Tensor | float) -> torch.Tensor:
    """S / (S + E) for each row of ``s`` (natural-unit scores, -inf where a row may not look; S = sum
    exp(score)): the total that softmax's weights on a row's keys come to where its running sum also
    holds E terms exp(0 - max) its accumulator does not get (keys of score 0 and value 0).  Computed
    against each row's largest score, so no score overflows."""
    top = s.amax(dim=-1)
    mass = torch.exp(s - top[..., None]).sum(dim=-1)
    return 1 / (1 + extra * torch.exp(-top) / mass)


def _zero_terms_fit(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, spans: list[slice], size: int) -> bool:
    """Whether each row's total weight on the keys it may see is S / (S + E), S = sum exp(score)
    over them and E the positions after the row's last one in the span that holds it (``size``
    positions from its start, past the read-out's last key too), within 2 %, some
    row well below 1: its running sum holds E terms exp(0 - max) more than its accumulator, the
    scores of the positions its last block reads past the row's keys set to 0, not -inf (blind
    round 26, 07 b19, said only as "below 1" until then)."""
    rows = w.flatten(0, -2).to(torch.float64).cpu()  # (on the CPU: a GPU read-out's weights, the tutor's spans)
    scores = s.flatten(0, -2).to(torch.float64).cpu()
    ok = allowed.flatten(0, -2).cpu()
    total = torch.where(ok, rows.nan_to_num(0.0), 0.0).sum(-1)
    keys = torch.arange(ok.shape[-1])
    last = torch.where(ok, keys, -1).amax(-1)
    ends = torch.tensor([next((sl.start + size for sl in spans if sl.start <= int(j) < sl.stop), 0)
                         for j in last.tolist()])
    extra = (ends - last - 1).clamp(min=0).to(torch.float64)
    predicted = zero_score_factor(torch.where(ok, scores, float("-inf")), extra)
    rows_read = (last >= 0) & torch.isfinite(total)
    if not bool(rows_read.any()) or float(predicted[rows_read].min()) > 1 - SUM_SLACK:
        return False
    return bool(((total[rows_read] / predicted[rows_read]) - 1).abs().max() < SUM_SLACK)


def block_shares_words(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, block_n: int,
                       row_name: Callable[[int], str] = lambda r: f"row {r}", unit: str = "block",
                       of: str = "keys", spans: list[slice] | None = None,
                       segments: torch.Tensor | None = None, segment: str = "slice", why: str | None = None,
                       patterns_only: bool = False, span_index: list[int] | None = None,
                       tile: int | None = None) -> str:
    """What the kernel's weight on each block of ``block_n`` keys is against softmax's, in
    words ("" when every row's blocks weigh what softmax gives them).  ``w`` (rows, queries,
    keys) read-out weights (NaN where unwritten), ``s`` the float64 scores in the exponent's
    units (softmax's weights are exp(s) normalised over ``allowed``), broadcast like ``w``.
    ``row_name(i)`` names flat row i of (rows × queries); a block is a ``unit`` of ``block_n``
    ``of``, cut as ``spans`` (default :func:`even_spans`; one list for every row, so rows of
    different sequences on one packed axis get each sequence's own blocks, the others'
    weighing nothing for them), taken in order as the loop reads them.  ``segments`` (rows,
    queries, blocks), where given, is the measured id of the program (a ``segment`` of the
    keys: a split-KV slice) that read each block: each keeps its own running maximum,
    and a merge brings them to one.  ``why`` replaces the closing sentence said of blocks no
    pattern explains (a read-out on equal scores, where no rescale changes anything).
    ``patterns_only``: say only a pattern that fits (for weights whose temperature was not
    measured: a fitting pattern measures it, a list of ratios would not).  ``span_index``: the
    number each span is said by (its block within its own sequence, where spans of several
    sequences share one packed axis), default its place in ``spans``.  ``tile``: the kernel's
    BLOCK_N where ``block_n`` is not its tile (pages): the span whose positions past a row's keys
    its last tile reads, for totals below 1 (:func:`_zero_terms_fit`)."""
    s = s.expand_as(w).to(torch.float64)
    allowed = allowed.expand_as(w)
    spans = spans if spans is not None else even_spans(w.shape[-1], block_n)
    log_ratio, use, top = _ratios(w.to(torch.float64), s, allowed, spans)
    counts = use.sum(-1)
    multi = counts >= 2
    if not bool(multi.any()):
        return ""
    blocks = f"{unit}s of {block_n} {of}"
    mean = log_ratio.sum(-1) / counts.clamp(min=1)
    spread = torch.where(use, (log_ratio - mean[..., None]).abs(), torch.zeros_like(log_ratio)).amax(-1)
    if float(spread[multi].max()) < CONSISTENT:
        factors = mean[multi].exp()
        lo, hi = float(factors.min()), float(factors.max())
        if abs(lo - 1) < SUM_SLACK and abs(hi - 1) < SUM_SLACK:
            return ""
        said = (f" Across its {blocks}, each row's weights keep softmax's proportions (every block's share within"
                f" {100 * CONSISTENT:.0f} % of one factor a row) and weigh every key it may see; only their total is"
                f" off, ×{lo:.3g} to ×{hi:.3g}.")
        if hi > 1 + SUM_SLACK and _factor_is_own_sum(mean[multi].exp(), s[multi], allowed[multi]):
            return said + (" The factor is each row's own sum of exp(score - its maximum) over the keys it may see"
                           " (its l; 1 for a row that sees one key): the output is the accumulator, not divided by"
                           " l_i at the end.")
        if lo < 1 - SUM_SLACK and segments is None and _sum_unrescaled(mean[multi].exp(), s[multi], allowed[multi],
                                                                     spans):
            return said + (" Each row's total is what a running sum l_i that is never rescaled gives (1 / the"
                           " sum over blocks of softmax's share x exp(final maximum - the maximum when the"
                           " block was read), within 3 %): l_i adds each block's terms at the maximum it was read"
                           " with, and is not multiplied by alpha = exp(old max - new max) when the maximum grows,"
                           " while the accumulator is.")
        if hi > 1 + SUM_SLACK:
            said += (" Above 1: the output is divided by less than the sum of the weights it accumulated (a running"
                     " sum that misses terms the accumulator gets, or shrinks by a rescale it does not get, or a"
                     " merge that weighs the partial sums less than the partial outputs).")
        cuts = [(spans, unit, block_n)] + ([(even_spans(w.shape[-1], tile), "tile", tile)] if tile else [])
        fit = next(((name, size) for cut, name, size in cuts if lo < 1 - SUM_SLACK
                    and _zero_terms_fit(w, s, allowed, cut, size)), None)
        if fit is not None:
            return said + (f" Each row's total is what a sum holding one term exp(0 - its maximum) for every"
                           f" position after its last key in the {fit[0]} of {fit[1]} that holds it gives (S / (S + E),"
                           f" S = sum exp(score) over its keys, E those positions, within {100 * SUM_SLACK:.0f} %):"
                           f" the positions past each row's keys that its last {fit[0]} reads enter the running sum"
                           " with a score of 0, not -inf (a mask that fills 0, or K loaded as 0 there and no mask on"
                           " the scores).")
        if lo < 1 - SUM_SLACK:
            said += (" Below 1: the sum the output is divided by holds more than the weights on the keys each row"
                     " may see: weight on keys the read-out cannot see (positions past a length or past the end"
                     " whose scores are not masked), or a running sum that adds terms the accumulator does not get,"
                     " or misses a rescale (alpha = exp(old max - new max) < 1) the accumulator gets (or a merge"
                     " that weighs the partial sums more than the partial outputs).")
        return said
    running, final = _running(top, segments)
    if fits_pattern(log_ratio, use, final - running, multi):
        within, its = (f"Within each {segment}, the", f"the {segment}'s") if segments is not None else ("The", "")
        return (f" {within} {blocks} that were read while the running maximum was still lower weigh more than"
                f" softmax gives them, by exp({its + ' ' if its else ''}final maximum − the running maximum when the"
                f" block was read), as an accumulator that keeps each block at the maximum it was read with, not"
                f" rescaled when the maximum grows, gives.")
    if fits_pattern(log_ratio, use, top.amax(-1, keepdim=True) - top, multi):
        return (f" Each of the {blocks} weighs exp(row maximum − its own largest score) times softmax's share: every"
                f" block is exponentiated against its own maximum, and nothing rescales it to the row's.")
    if patterns_only:
        return ""
    flat = torch.where(multi, spread, -1.0).flatten()
    worst = int(flat.argmax())
    ratios = log_ratio.flatten(0, -2)[worst].exp()
    used = use.flatten(0, -2)[worst]
    index = span_index if span_index is not None else list(range(len(spans)))
    cells = [f"{unit} {index[j]} ×{r:.2f}" for j, (r, u) in enumerate(zip(ratios.tolist(), used.tolist(), strict=True))
             if u]
    shown = ", ".join(cells[:SHOWN]) + (f" and {len(cells) - SHOWN} more" if len(cells) > SHOWN else "")
    inconsistent = int((multi & (spread >= CONSISTENT)).sum())
    return (f" The {blocks} do not keep softmax's proportions to one another in {inconsistent} of the"
            f" {int(multi.sum())} rows where two or more hold {100 * BLOCK_MASS:.0f} % of softmax's weight; in"
            f" {row_name(worst)} they weigh, against softmax's share ({unit}s counted from 0), {shown}."
            + _runs_words([(index[j], float(r)) for j, (r, u) in enumerate(zip(ratios.tolist(), used.tolist(),
                                                                                   strict=True)) if u], unit)
            + (why if why is not None else
               f" What sets a {unit}'s share against the others: the rescale by exp(old maximum − new maximum) where a"
               f" step adds it, the weight a merge of partial results gives each part, and whether its {of} are"
               f" read and counted exactly once."))


KEY_MASS = 5e-3  # a key softmax gives this much of its row is compared one by one (fp16 read-outs)
WHOLE = 0.05  # how far (relative) a key's weight ratio may miss a whole multiple of its row's lowest


def _readable(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(w, s, allowed) as (rows, keys) float64 / bool, and the rows a read-out speaks for:
    finite, no weight off the allowed keys, none an allowed key softmax weighs missing."""
    w = w.to(torch.float64)
    s, allowed = s.to(torch.float64).expand_as(w), allowed.expand_as(w)
    w, s, allowed = (t.reshape(-1, t.shape[-1]) for t in (w, s, allowed))
    p = torch.softmax(torch.where(allowed, s, float("-inf")), dim=-1).nan_to_num(0.0)
    wz = w.nan_to_num(0.0)
    ok = (torch.isfinite(w).all(dim=-1) & (torch.where(allowed, 0.0, wz.abs()) < 1e-6).all(dim=-1)
          & ~((p > NEVER_READ_P) & (wz <= 0)).any(dim=-1))
    return wz, s, allowed, p, ok


def counted_keys_words(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor,
                       row_name: Callable[[int], str] = lambda r: f"row {r}") -> str:
    """Keys added more than once, in words: where, in every row that can be read (finite,
    no weight off its allowed keys, none missing), each key's weight over softmax's is a
    whole multiple (1, 2 or 3) of the row's lowest such ratio, and some key's is 2 or 3.
    A key added c times weighs c exp(s) over the row's sum (whatever that sum holds): its
    ratio to softmax is c times the row's common factor.  ``w`` (rows, queries,
    keys) read-out weights, ``s`` the float64 scores, ``allowed`` broadcast like ``w``; rows
    are named by ``row_name`` of their flat index.  "" where the weights fit no such counts."""
    wz, s, allowed, p, ok = _readable(w, s, allowed)
    use = (p > KEY_MASS) & (wz > 0) & ok[:, None]
    readable = use.sum(-1) >= 2
    if not bool(readable.any()):
        return ""
    ratio = torch.where(use, wz / p.clamp(min=1e-300), float("inf"))
    base = ratio.amin(-1, keepdim=True)
    times = torch.where(use, ratio / base, torch.ones_like(ratio))
    whole = times.round()
    if not bool(((times - whole).abs() <= WHOLE * whole).all()) or float(whole.max()) > 3:
        return ""
    many = (whole >= 2) & use
    if not bool(many.any()):
        return ""
    worst = int(many.sum(-1).argmax())
    parts = []
    for c in (2, 3):
        keys = ((whole[worst] == c) & use[worst]).nonzero().flatten().tolist()
        if keys:
            parts.append(f"key{'s' * (len(keys) > 1)} {index_runs(keys)} count{'s' * (len(keys) == 1)} {c} times")
    rows = int((many.any(-1)).sum())
    return (f" Read out through one-hot values, in every row the read-out can compare ({int(readable.sum())}), each"
            f" key weighs softmax's share times a whole count (and one common factor a row): in {row_name(worst)},"
            f" {' and '.join(parts)}, the rest once ({rows} rows have keys counted more than once; compared: the keys"
            f" softmax gives {100 * KEY_MASS:.1f} % of their row or more). A key added c times weighs c times its share"
            " against the keys added once: those keys were read and added more than once (loop steps that overlap,"
            " or a block visited twice).")


ZERO_FIT = 0.05  # how far (in log) a key's weight may miss its score's, or a score of 0's, and still fit
ZERO_APART = 0.3  # a key whose true score is this far from 0 can tell the two apart


def zero_scores_words(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor,
                      row_name: Callable[[int], str] = lambda r: f"row {r}") -> str:
    """Keys that weigh what a score of exactly 0 gets, in words: where in every row the read-out
    speaks for, each compared key's log-weight is its true score or 0, plus one constant a row
    (the row's log-sum: log w = score - log sum_j exp(score_j) holds for both kinds alike), and
    some key whose true score is not near 0 takes 0.  A row all of whose keys take 0 weighs them
    evenly (its q read as zeros); keys that take 0 in some rows only had their K read as zeros
    there, or their scores replaced by 0.  "" where the weights fit no such split."""
    wz, s, allowed, _, ok = _readable(w, s, allowed)
    use = allowed & (wz > 1e-4) & ok[:, None]
    readable = use.sum(-1) >= 2
    if not bool(readable.any()):
        return ""
    e = wz.clamp(min=1e-300).log()
    zero = torch.zeros_like(use)
    either = torch.zeros_like(use)
    fits = torch.zeros(use.shape[0], dtype=torch.bool, device=use.device)
    # the row's constant: the median of its keys' log-weight over their true score (most keys
    # weigh their own), else the median log-weight (every key weighs a score of 0)
    for c in ((e - s), e):
        nan = torch.where(use, c, float("nan"))
        const = nan.nanmedian(-1, keepdim=True).values
        right = ((e - s) - const).abs() < ZERO_FIT
        naught = (e - const).abs() < ZERO_FIT
        ok = ((right | naught) | ~use).all(-1) & ~fits
        zero[ok] = (naught & ~right & use)[ok]
        either[ok] = (naught & use)[ok]
        fits |= ok
    apart = zero & (s.abs() > ZERO_APART)
    if not bool((fits | ~readable).all()) or not bool(apart.any()):
        return ""
    hit = zero.any(-1) & readable
    whole = hit & (either == use).all(-1)  # every key a score of 0 (keys near 0 fit both)
    if bool((whole == hit).all()):
        flat = whole.nonzero().flatten().tolist()
        return (f" Read out through one-hot values, {len(flat)} rows weigh every key they see alike, as scores of"
                f" exactly 0 would (first {row_name(flat[0])}), and every other row its keys' true scores: those"
                " rows' q read as zeros (a load mask false for them), or their scores replaced by 0.")
    worst = int(torch.where(hit & ~whole, zero.sum(-1), -1).argmax())
    strict = zero[worst].nonzero().flatten()
    span = torch.zeros_like(either[worst])
    span[int(strict.min()):int(strict.max()) + 1] = True
    keys = (either[worst] & span).nonzero().flatten().tolist()  # with the keys between that fit both
    return (f" Read out through one-hot values, in every row the read-out can compare, each key weighs what its true"
            f" score gives it or what a score of exactly 0 would, against one constant a row: in {row_name(worst)},"
            f" key{'s' * (len(keys) > 1)} {index_runs(keys)} weigh{'s' * (len(keys) == 1)} a score of 0 and the"
            f" rest their own ({int(hit.sum())} rows have such keys): those keys' K rows read as zeros there (a load"
            " mask false for them), or their scores replaced by 0.")
