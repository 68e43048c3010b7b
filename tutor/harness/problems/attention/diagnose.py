"""Say what the student got wrong, with a stable code per mistake, from measurements.

Two tools.  The *read-out* (:mod:`.readout`) measures the weights
the student's kernel actually applied in each failing mode: weight on keys a
row must not see, keys never read, row sums, the softmax temperature, whether
the K/V blocks share one scale, which inputs the output depends on.  Each
diagnosis is one of those facts turned into a sentence; its words live in the
drill's TOML file, with ``{placeholders}`` filled from the measured numbers.
*Mistake fingerprinting* (the older tool) computes in PyTorch what the kernel
would output with each known mistake (:mod:`.reference`) and
matches the output against them; its code is said only when the read-out of
that mode supports it (or there is no read-out).  When the two disagree, the
read-out wins: it is what the kernel measurably does.  The visit map adds
whether the causal launch skipped the blocks it should.  Timings are never
used to diagnose.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from tutor.catalog import Drill
from tutor.harness import guarded as shared
from tutor.harness.findings import Findings, index_runs, matches, passes_as_right, visit_findings
from tutor.harness.numerics import LN2
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention import reference
from tutor.harness.result import CaseResult, Diagnosis, ReadOut, VisitMap


@dataclass
class CheckedLaunch:
    """One correctness launch with what is needed to fingerprint it."""

    case: CaseResult
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    expected: torch.Tensor | None = None  # the right answer (computed here when not given)


# drill slug -> (q, k, v, block_m, block_n, causal) -> {code: what that mistake outputs}
Fingerprints = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, int, bool], dict[str, torch.Tensor]]

FINGERPRINTS: dict[str, Fingerprints] = {
    "causal_mask": lambda q, k, v, bm, bn, causal: reference.causal_variants(q, k, v, bm, bn, causal),
    "online_rescale": lambda q, k, v, bm, bn, causal: reference.online_variants(q, k, v, bn),
}


@dataclass(frozen=True)
class Match:
    code: str
    vacuous: bool  # the variant is NaN everywhere: it matched on nothing but "all NaN"


def right_answer(launch: CheckedLaunch) -> torch.Tensor:
    """The launch's right output: the one it was checked against, or (where none was kept) the reference's."""
    if launch.expected is not None:
        return launch.expected
    return reference.attention_reference(launch.q, launch.k, launch.v, causal=launch.case.causal)


def operand_words(launch: CheckedLaunch, drill: Drill) -> str:
    """Where every wrong head's output is attention with another head's tensors, K and V exchanged,
    or its own K or V read head_dim-major, that in words (:func:`readout.other_head_words`); ""."""
    causal = launch.case.causal
    return reading.other_head_words(launch.out, right_answer(launch), launch.q, launch.k, launch.v,
                                    lambda q, k, v: reference.attention_reference(q, k, v, causal=causal),
                                    drill.tolerance)


def fingerprints(drill: Drill, launch: CheckedLaunch, block_m: int, block_n: int) -> list[Match]:
    """Every known mistake whose output the launch reproduces, most specific first.

    Variants that equal the right answer on this shape (on a shape shorter than a
    block, a missing loop bound changes nothing) say nothing and are skipped.  A
    code may come from more than one variant ("mask-reversed/diagonal-only" is
    still "mask-reversed")."""
    if drill.slug not in FINGERPRINTS:  # a new drill of this problem: no mistakes to recognise yet
        return []
    variants = FINGERPRINTS[drill.slug](launch.q, launch.k, launch.v, block_m, block_n, launch.case.causal)
    right = right_answer(launch)
    found: list[Match] = []
    for name, expected in variants.items():
        code = name.split("/")[0]
        if any(m.code == code for m in found) or passes_as_right(expected, right, drill.tolerance):
            continue
        if matches(launch.out, expected, drill.tolerance):
            found.append(Match(code, vacuous=not bool(torch.isfinite(expected).any())))
    return found


def _consensus(per_launch: list[list[Match]]) -> list[str | None]:
    """One code per launch, preferring the code that explains the most launches.

    On a shape shorter than one block several mistakes give the same output (a
    missing diagonal mask *is* full attention there); the longer shapes tell
    them apart, so the code they agree on is said for the short one too.  A
    vacuous match (an all-NaN variant against an all-NaN output) counts only for
    a code that some other launch matched for real.
    """
    support: dict[str, int] = {}
    for found in per_launch:
        for match in found:
            if not match.vacuous:
                support[match.code] = support.get(match.code, 0) + 1
    chosen: list[str | None] = []
    for found in per_launch:
        candidates = [m.code for m in found if m.code in support]
        chosen.append(max(candidates, key=lambda c: support[c]) if candidates else None)
    return chosen


def _describe_rows(launch: CheckedLaunch, block_m: int) -> str:
    bad = ~torch.isfinite(launch.out.to(torch.float32))
    rows = bad.any(dim=-1).reshape(-1, launch.out.shape[-2]).any(dim=0).nonzero().flatten().tolist()
    if len(rows) == launch.out.shape[-2]:
        return "every row is affected"
    blocks = sorted({r // block_m for r in rows})
    return f"rows {index_runs(rows)} are affected (query block{'s' if len(blocks) > 1 else ''} {index_runs(blocks)})"


# -- the read-out, as facts ------------------------------------------------------------------
WHERE_FORBIDDEN = {
    "next-key": "on the key right after the row",
    # the diagonal's K/V blocks: those its query tile's diagonal crosses, more than one where
    # BLOCK_N < BLOCK_M (blind round 21, 01/w06: "the row's own block" named the wrong one)
    "diagonal-block": "on every later key of the K/V blocks its query tile's diagonal crosses",
    "part-of-diagonal-block": "on some later keys of the K/V blocks its query tile's diagonal crosses",
    "future-blocks": "in K/V blocks wholly after its query tile's last row",
    "diagonal-and-future-blocks": "both in the K/V blocks its query tile's diagonal crosses and in the blocks after"
                                  " them",
}


def missing_keys_words(ro: ReadOut) -> str:
    """The keys the read-out's missing row gives no weight to, as runs, saying which are listed where
    the row weighs others 0 too (blind round 28, 01 b13: "(191 in all)" of 197)."""
    keys = index_runs(ro.missing_keys)
    if ro.missing_keys_complete:
        return keys
    return f"{keys} (of those the reference weighs {reading.MISSING_P:g} or more: some others get 0 too)"


def placeholders(ro: ReadOut) -> dict[str, str]:
    """The measured numbers a diagnosis message may quote, already formatted."""
    values: dict[str, str] = {"mode": ro.mode, "case": ro.case}
    if ro.shape:
        values["seq"] = str(ro.shape[2])
    if ro.forbidden_row is not None:
        values.update(row=str(ro.forbidden_row), next_key=str(ro.forbidden_row + 1), mass=_mass_words(ro.forbidden_mass),
                      rows=str(ro.forbidden_rows), where=WHERE_FORBIDDEN.get(ro.forbidden_where, ro.forbidden_where))
    if ro.missing_row is not None:
        values.update(missing_row=str(ro.missing_row), missing_mass=f"{ro.missing_mass:.2f}",
                      missing_rows=str(ro.missing_rows), keys=missing_keys_words(ro))
        if ro.missing_in_tile:
            values["tile_pattern"] = (
                "Every key missed, in every row, and no other, lies further into its K/V block than the row lies"
                f" into its query block (key % {ro.block_n} > row % {ro.block_m}: your BLOCK_N and BLOCK_M), in"
                " the blocks left of the diagonal too: what a causal mask compared by positions within the tiles"
                " (offs_n - start_n against offs_m - start_m) drops, a mask right only in a diagonal block")
        elif ro.missing_row_in_tile:
            values["tile_pattern"] = (
                "Every key missed, in every row, and no other, lies after the row's place in its query block (key >"
                f" row % {ro.block_m}, your BLOCK_M): each row of query block i sees the keys row - i * {ro.block_m}"
                " would, as a causal mask that compares the row's offset within its query tile (counted from 0)"
                " with the keys' positions in the sequence drops; compare the row's position in the sequence")
    if ro.skipped_blocks:
        pairs = [f"key block {j} for query block {i}" for i, j in ro.skipped_blocks]
        values["blocks"] = ", ".join(pairs[:4]) + (f" and {len(pairs) - 4} more" if len(pairs) > 4 else "")
    if ro.row_sum_min is not None:
        values.update(sum_min=f"{ro.row_sum_min:.3g}", sum_max=f"{ro.row_sum_max:.3g}")
    if ro.temperature is not None:
        values["slope"] = f"{ro.temperature:.3g}"
        cause = reading.TEMPERATURE_WORDS.get(ro.temperature_name, "") if ro.temperature_name != "right" else ""
        values["temperature_cause"] = cause[:1].upper() + cause[1:]
    if ro.fit_rms is not None:
        values["fit"] = f"{ro.fit_rms:.2g}"
    if ro.phantom_keys is not None and ro.extra_in_sum == "score-0-keys":
        values["phantom"] = f"{ro.phantom_keys:.0f}"
        if ro.shape:
            values["pad"] = str(-ro.shape[2] % ro.block_n)
    if ro.block_ratio:
        values["ratios"] = block_ratio_words(ro)
    if ro.nan_rows:
        values["nan_rows"] = ("rows " if len(ro.nan_rows) > 1 else "row ") + index_runs(ro.nan_rows)
        values["nan_cause"] = (
            "every weight of those rows is NaN/Inf, whatever V holds, so it arises in the scores, the running "
            "maximum or the sum l_i, not in the values" if ro.nan_whole_rows else
            "only some of their weights are NaN/Inf, so it arises after the softmax weights: in acc, the "
            "division or the store")
        values["nan_blocks"] = index_runs(sorted({r // ro.block_m for r in ro.nan_rows}))
    if ro.moves_with:
        ignored = [name.upper() for name, moved in ro.moves_with.items() if not moved]
        if ignored:
            values["inputs"] = " or ".join(ignored)
            values["ignored_cause"] = ignored_cause(ro, len(ignored) == len(ro.moves_with))
    if ro.crosstalk:
        values["crosstalk"] = " and ".join(x.upper() for x in ro.crosstalk)
    return values


def ignored_cause(ro: ReadOut, every_input: bool) -> str:
    """What an output that does not follow some inputs measures: one or two unread inputs, or,
    where it follows none of Q, K and V, an output nothing reaches (blind round 12: l_i summing
    the masked -inf scores divides every row by -inf, so the output is 0 whatever it reads)."""
    if not every_input:
        return "the kernel does not read it. Check the pointer that tensor is loaded through and its offsets."
    zero = " (every weight read out is 0: the output is 0 whatever the inputs)" \
        if ro.row_sum_max == 0 and ro.row_sum_min == 0 else ""
    return (f"nothing the kernel reads reaches its output{zero}. Either no load reads where the inputs are, or"
            " what the loop computes is wiped before the store: multiplied by 0, divided by an infinite sum (an"
            " l_i that adds up -inf scores, say), or replaced by something else at the store.")


VALUES_OR_STORE = ("Check how V is read (its pointer, offsets and strides) and where acc is stored (the store's"
                   " offsets and strides).")


# an fp16 p = exp(s - m) rounds to 0 below 2**-25: this many natural units under m
FP16_ZERO_UNDER = 25 * LN2


def _cut_words(ro: ReadOut) -> str:
    """The score cut of :attr:`ReadOut.missing_cut` in words ("" where none was measured), and where
    the maximum p is taken against would sit if an fp16 p's underflow is the cut."""
    if not ro.missing_cut:
        return ""
    pairs, low, high = ro.missing_cut
    said = (f"; in each of the {int(pairs)} (row, K/V block) pairs that weigh some of the block's keys and not"
            " others, the keys given none are exactly the block's lowest-scoring ones, cut off"
            f" {low:.2g} to {high:.2g} natural units under the row's top score: each block's p is zero under a"
            " score, as p = exp(s - m) is where it underflows")
    if high >= FP16_ZERO_UNDER:
        return said
    return said + (f" (an fp16 p is 0 about {FP16_ZERO_UNDER:.3g} units under m), which puts the m each block's p"
                   f" is taken against {FP16_ZERO_UNDER - high:.2g} to {FP16_ZERO_UNDER - low:.2g} above the row's"
                   " top score: look at what the running maximum is taken over (the scores p is computed from,"
                   " scaled the same?)")


def facts(ro: ReadOut) -> str:
    """What the read-out measured, in one sentence, for a mistake with no name of its own."""
    if not reading.trusted(ro):
        assert ro.values_gap is not None
        swapped = "" if not reading.exchanged(ro) else \
            f" Its output is, within {ro.exchanged_gap:.2g}, attention with{reading.KV_EXCHANGED}"
        return reading.not_weighted_sum_words(ro.values_gap, f" (the {ro.case} shape)", VALUES_OR_STORE) + swapped
    said = []
    if ro.nan_rows:
        said.append(f"rows {index_runs(ro.nan_rows)} are NaN/Inf" + (" whatever V holds" if ro.nan_whole_rows else " in some keys' weights"))
    if ro.forbidden_row is not None:
        said.append(f"row {ro.forbidden_row} puts {_mass_words(ro.forbidden_mass)} on keys it must not see")
    if ro.missing_row is not None:
        said.append(f"row {ro.missing_row} gives no weight to keys {missing_keys_words(ro)} "
                    f"({ro.missing_mass:.2f} of its reference weight)" + _cut_words(ro))
    if ro.row_sum_min is not None and not ro.sums_to_one:
        said.append(f"rows sum to {ro.row_sum_min:.3g}..{ro.row_sum_max:.3g} instead of 1")
    if ro.fit_rms is not None and ro.fit_rms > 0.1:
        said.append(f"the log-weights stray {ro.fit_rms:.2g} from any softmax of q·k (a softmax strays 0)"
                    + (": the weight each V row carries does not follow its own key's score, as when V's rows are"
                       " loaded from other positions than the keys scored" if ro.forbidden_score == "other" else ""))
    elif ro.temperature is not None and ro.temperature_name not in ("", "right"):
        said.append(f"the softmax is {ro.temperature:.3g} times as sharp as it should be")
    if ro.block_pattern not in ("", "consistent", "one-factor") and ro.block_ratio:
        said.append("per K/V block the weights are " + block_ratio_words(ro) + " times the reference's")
    if ro.moves_with and not all(ro.moves_with.values()):
        said.append("the output does not change when " + " or ".join(
            n.upper() for n, moved in ro.moves_with.items() if not moved) + " changes")
    if not said and ro.moves_with and all(ro.moves_with.values()) and not ro.crosstalk:
        said.append("the weights are right (a softmax of q·k/sqrt(d), rows summing to 1) and the output "
                    "follows Q, K and V, so what goes wrong is on the values' side: how V is loaded "
                    "(pointer, strides, mask) or how acc is stored")
    if not said:
        return ""
    return f" Measured on your kernel's weights ({ro.mode}, seq={ro.shape[2] if ro.shape else '?'}): " + "; ".join(said) + "."


def readout_codes(drill: Drill, ro: ReadOut, both_modes: bool, blocks_reached: bool | None = None) -> list[str]:
    """The diagnosis codes the read-out of one failing mode supports, most telling first.
    Only codes the drill has words for are returned; [] when nothing specific was measured.
    ``blocks_reached``: does the visit map show every program visiting each of the read-out's
    wholly unread blocks (the loop reaches them, and what they add goes elsewhere)?  None: no
    map of the read-out's case, or none skipped."""
    codes: list[str] = []
    causal = ro.mode == "causal"
    ignored = {name for name, moved in ro.moves_with.items() if not moved}
    if ignored and not ignored <= set(ro.crosstalk):  # an input whose change moves another head is read
        codes.append("input-ignored")
    if ro.crosstalk:
        codes.append("heads-mixed")
    if not reading.trusted(ro):  # the weights describe nothing: only the dependence probe speaks
        return [c for c in codes if c in drill.diagnoses]
    if codes:
        # the kernel reads the wrong data: the weights measured against these Q, K say nothing more
        return [c for c in codes if c in drill.diagnoses]
    if ro.nan_rows and ro.shape and len(ro.nan_rows) == ro.shape[2]:
        codes.append("nan-first-block")
    if ro.forbidden_rows:
        if ro.forbidden_score == "zero":
            codes.append("mask-zero")
        elif ro.forbidden_where == "diagonal-block" and ro.missing_rows and ro.forbidden_score == "true":
            codes.append("mask-reversed")
        elif ro.forbidden_where == "next-key":
            codes.append("mask-one-ahead")
        elif ro.forbidden_where == "diagonal-block" and ro.forbidden_score == "true":
            codes.append("diagonal-unmasked")
        elif ro.forbidden_where == "diagonal-and-future-blocks" and ro.forbidden_score == "true" and not ro.missing_rows \
                and _most_rows_see_future(ro):
            codes.append("todo2-open")
        elif ro.forbidden_where == "future-blocks":
            codes.append("future-blocks-read")
        elif ro.fit_rms is not None and ro.fit_rms <= 0.1 or ro.forbidden_mass <= 1.0 + 1e-3 and ro.forbidden_score != "other":
            codes.append("sees-future")
        # else: more weight on future keys than a whole row has, or weight on them that follows no key's
        # score, and no softmax of q·k at all: no attention weights of these keys (K and V swapped, V's rows
        # loaded at the query rows, say: blind round 12); wrong-output says what was measured
    elif ro.missing_rows and (ro.fit_rms is not None and ro.fit_rms <= 0.1 or ro.missing_mass > 0.1):
        # (weights that are no softmax of q·k at all say little through a few unread keys)
        if ro.missing_where == "own-key":
            codes.append("mask-off-by-one")
        elif ro.missing_where == "future-keys" and not causal and both_modes:
            codes.append("full-broken")
        elif ro.missing_where == "ragged-tail":
            codes.append("ragged-tail-skipped")
        elif ro.missing_where == "whole-blocks" and causal and ro.skipped_blocks and not blocks_reached \
                and all(_holds_diagonal(i, j, ro) for i, j in ro.skipped_blocks):
            # (a loop that reaches those blocks is not stopped by its bound: blind round 26, 01 b27, a two-loop
            # kernel whose diagonal loop loads V at block 0's rows)
            codes.append("loop-stops-before-diagonal")
        elif ro.missing_where == "whole-blocks":
            codes.append("blocks-skipped")
        else:
            codes.append("keys-missing")
    elif ro.fit_rms is None or ro.fit_rms > 0.1:
        pass  # no softmax of q·k at any temperature: the facts are said under wrong-output
    elif ro.temperature_name not in ("", "right"):
        codes.append("wrong-temperature")
    elif (ro.block_pattern in ("one-factor", "consistent") and not ro.sums_to_one
          and ro.row_sum_min is not None and ro.row_sum_max is not None):
        if ro.row_sum_min > 0.99 and ro.row_sum_max > 1.01 and ro.sums_are_denominators is not False:
            codes.append("no-final-division")  # every row sums to l_i >= 1 (a row that saw one key: exactly 1)
        elif ro.extra_in_sum == "score-0-keys" and ro.shape and -ro.shape[2] % ro.block_n \
                and ro.phantom_keys is not None and abs(ro.phantom_keys - (-ro.shape[2] % ro.block_n)) < 1.0:
            codes.append("ragged-unmasked")
        elif ro.extra_in_sum == "future-keys":
            codes.append("future-in-sum")
        else:
            codes.append("rows-not-normalised")
    elif ro.block_pattern == "own-block-max":
        codes.append("never-rescaled")
    elif ro.block_pattern == "stale-max":
        codes.append("acc-not-rescaled" if ro.row_sum_max is not None and ro.row_sum_max > 1.01 else "not-rescaled")
    elif ro.block_pattern in ("other", "rescaled-twice", "block-max-carried", "alpha-natural-exp",
                              "alpha-exp2-natural", "normalised-each-step"):
        codes.append("blocks-inconsistent")
    codes = [c for c in codes if c in drill.diagnoses]
    if ro.nan_rows and not codes and "nan-in-output" in drill.diagnoses:
        codes.append("nan-in-output")  # other codes explain their NaN rows (a row that saw no key)
    return codes


def _mass_words(mass: float) -> str:
    """A row's weight on keys it may not see, as a share of its weight; above 1 the row's weights
    add up to more than 1, so acc holds weight the sum it is divided by does not (what is measured;
    the words name the ways a kernel gets there, not one of them)."""
    if mass <= 1.0 + 1e-3:
        return f"{mass:.2f} of its weight"
    return (f"{mass:.3g} times its whole weight (more than all of it: its weights add up to more than 1, so acc"
            " holds weight that the sum it is divided by does not - a mask that reaches l_i and not acc, or a"
            " division by l_i missing or made with another sum)")


def _ratios(ratios: list[float | None]) -> str:
    return ", ".join("-" if r is None else f"{r:.2f}" for r in ratios)


def block_ratio_words(ro: ReadOut) -> str:
    """Per key block, the student's weight over the reference's: the median row's, and where
    only some rows' blocks disagree (the median row then reads ~1 everywhere), the worst row's."""
    words = _ratios(ro.block_ratio)
    if ro.worst_row is not None and ro.rows_inconsistent and ro.worst_row_ratio:
        words += (f" (the median row); in {ro.rows_inconsistent} of the {ro.rows_measured} rows measured in two or more"
                  f" blocks the blocks disagree, most in row {ro.worst_row}: {_ratios(ro.worst_row_ratio)}")
    return words


PATTERN_WORDS = {
    "rescaled-twice": (" Measured: every block weighs exp(running maximum when it was read − the row's final maximum)"
                       " times softmax's share, so the blocks read before the maximum rose weigh less, by the very"
                       " factor alpha applies: as acc rescaled by alpha once more than l_i (twice a step, say)"
                       " gives."),
    "block-max-carried": (" Measured: every block weighs exp(running maximum when it was read − its own largest score)"
                          " times softmax's share: as a p taken against the block's own maximum gives, while alpha"
                          " carries acc and l_i as if it had been taken against the running one (m_new)."),
    "alpha-natural-exp": (" Measured: every block weighs exp(0.443 (running maximum when it was read − the row's final"
                          " maximum)) times softmax's share, 0.443 = log2(e) − 1: as an alpha of exp(m_i − m_new) gives"
                          " where m is in log2 units and p = exp2(qk − m_new) - each step carries the blocks before it"
                          " by e^d where 2^d belongs. Take alpha in p's base: exp2(m_i − m_new)."),
    "alpha-exp2-natural": (" Measured: every block weighs exp(−0.307 (running maximum when it was read − the row's"
                           " final maximum)) times softmax's share, −0.307 = ln(2) − 1: as an alpha of exp2(m_i −"
                           " m_new) gives where m is in natural units and p = exp(qk − m_new) - each step carries the"
                           " blocks before it by 2^d where e^d belongs. Take alpha in p's base."),
    "normalised-each-step": (" Measured: every block weighs softmax's share divided by the running sum l after its"
                             " own block and after each later one: as dividing acc by l_new at every step gives,"
                             " without carrying the old sum over (FlashAttention-1 keeps acc normalised: (l_i * alpha"
                             " * acc + p @ v) / l_new). Simpler: never divide inside the loop; divide acc by l_i once,"
                             " after it."),
}


def pattern_words(ro: ReadOut) -> str:
    """The block pattern a read-out's ratios fit, beyond the ones with codes of their own, in words."""
    return PATTERN_WORDS.get(ro.block_pattern, "")


def counted_twice_words(ro: ReadOut) -> str:
    """Where one row's blocks weigh the others' common ratio except some that weigh a whole
    number (2 or 3) times it: those blocks' keys were added that many times, in words."""
    ratios = ro.worst_row_ratio or ro.block_ratio
    known = [(j, r) for j, r in enumerate(ratios) if r is not None and r > 0]
    if len(known) < 3:
        return ""
    base = sorted(r for _, r in known)[len(known) // 2]  # the median block's ratio
    odd = [(j, r / base) for j, r in known if abs(r / base - 1) > 0.03]
    if not odd or len(odd) > len(known) // 2:
        return ""
    times = {round(x) for _, x in odd}
    if len(times) != 1 or not times <= {2, 3} or any(abs(x - round(x)) > 0.05 * round(x) for _, x in odd):
        return ""
    n = times.pop()
    blocks = ", ".join(str(j) for j, _ in odd)
    where = f"row {ro.worst_row}" if ro.worst_row_ratio and ro.worst_row is not None else "the median row"
    return (f" In {where}, key block{'s' * (len(odd) > 1)} {blocks} weigh{'s' * (len(odd) == 1)} {n} times what the"
            f" other blocks' common ratio gives {'them' if len(odd) > 1 else 'it'}: as if {'they were' if len(odd) > 1 else 'it were'} added {n}"
            f" times.")


def skipped_visit_counts(ro: ReadOut, visits: VisitMap) -> list[int]:
    """How many programs the visit map shows visiting each block the read-out found weightless,
    where it maps the read-out's case (the same length and blocks); [] where it does not."""
    if not ro.shape or ro.shape[2] != visits.seq or (ro.block_m, ro.block_n) != (visits.block_m, visits.block_n):
        return []
    counts = [visits.counts[i][j] for i, j in ro.skipped_blocks
              if i < len(visits.counts) and j < len(visits.counts[i])]
    return counts if len(counts) == len(ro.skipped_blocks) else []


def skipped_visit_words(ro: ReadOut, visits: VisitMap, full_right: bool = False) -> str:
    """What the visit map says of the blocks the read-out found weightless, where it maps the
    read-out's case (the same length and blocks): none of them visited (the loop never got
    there), or every one visited by every program (reached, and what it added went elsewhere).
    ``full_right``: the full launch is right on every case (the keys are lost in causal-only code)."""
    counts = skipped_visit_counts(ro, visits)
    if not counts:
        return ""
    if all(c == 0 for c in counts):
        return (" The visit map shows none of these blocks visited: the loop never reaches them (where it starts, its"
                " step, its bound).")
    if all(c == visits.heads for c in counts):
        if ro.missing_rest_softmax:
            # the rest of each such row is a softmax over the keys left: these never entered l_i either
            return (" The visit map shows every one of these blocks visited, and each row's weights on the other keys"
                    " still add up to 1 in softmax's proportions: the loop reaches them, and their keys are in"
                    " neither acc nor l_i at the end - masked away (the column mask, its bound, its fill), their"
                    " scores dropped before m_i and l_i, or acc and l_i both wiped by a later block (reset, or"
                    " rescaled by an alpha of 0: exp2(m_i - m_new) is 0 while m_i stays -inf, never updated)."
                    + (" The full launch is right on every case: they are lost only with CAUSAL set, in code the causal"
                       " launch alone runs - its mask (the key positions it compares with the rows: start_n + offs_n)"
                       " or whatever else runs only when CAUSAL." if full_right else ""))
        if ro.missing_on_block0:
            return (" The visit map shows every one of these blocks visited, and in every row that misses weight,"
                    " the weight softmax gives key c of those blocks is found on key c % BLOCK_N of key block 0, on"
                    " top of that key's own: those blocks' weights are right (their scores saw the right keys), and"
                    " they multiply the values of block 0's rows. Load each block's V rows at its own keys (start_n +"
                    " offs_n, not offs_n alone; or a V pointer advanced with K's).")
        return (" The visit map shows every one of these blocks visited: the loop reaches them, and what they added"
                " was lost or landed on other keys' values.")
    return ""


def written_rows_words(launch: CheckedLaunch, tolerance: float) -> str:
    """Where rows of an output with unwritten rows were written wrong, in words: the programs
    that wrote store other rows than they computed (a store at block-local rows, blind round
    12, w47: every program writes rows 0..BLOCK_M-1 and the last one's wins); "" where every
    written row is right, or there is no reference."""
    if launch.expected is None:
        return ""
    unwritten = shared.unwritten_rows(launch.out)  # (batch, heads, rows)
    wrong, _ = shared.wrong_written_rows(launch.out, launch.expected, tolerance, unwritten)
    if not bool(wrong.any()):
        return ""
    rows = sorted({int(r) for r in wrong.nonzero()[:, 2].tolist()})
    return (f" And {int(wrong.sum())} of the {int((~unwritten).sum())} (batch, head, row) rows that were written are wrong"
            f" (rows {index_runs(rows)}): a program stores other rows than the ones it computed (the store's row"
            " offsets), or computes its rows wrong.")


def _most_rows_see_future(ro: ReadOut) -> bool:
    """Do most rows that have keys after them weigh those keys?  todo2-open's words say every
    row does (the causal output equals full attention); a mask missing only in the last, ragged
    query block (blind round 12, w36) weighs the future in a few rows."""
    return bool(ro.shape) and ro.forbidden_rows >= 0.5 * (ro.shape[2] - 1)


def _holds_diagonal(i: int, j: int, ro: ReadOut) -> bool:
    """Is key block j the one holding query block i's diagonal (or part of it)?"""
    first_row, last_row = i * ro.block_m, (i + 1) * ro.block_m - 1
    return j * ro.block_n <= last_row and (j + 1) * ro.block_n > first_row


# Which measured facts make a fingerprint's code true: the fingerprint is said only
# when the read-out of its mode supports it (and, for those of UNREACHED, the visit
# map does not show the loop reaching the unread blocks).
SUPPORTS: dict[str, Callable[[ReadOut], bool]] = {
    "todo2-open": lambda ro: ro.forbidden_rows > 0 and ro.forbidden_score == "true" and _most_rows_see_future(ro),
    "diagonal-unmasked": lambda ro: ro.forbidden_rows > 0 and ro.forbidden_where == "diagonal-block",
    "mask-reversed": lambda ro: ro.forbidden_rows > 0 and ro.missing_rows > 0 and ro.forbidden_score == "true",
    "mask-off-by-one": lambda ro: ro.missing_where == "own-key" and not ro.forbidden_rows,
    "loop-stops-before-diagonal": lambda ro: bool(ro.skipped_blocks) and not ro.forbidden_rows,
    "ragged-unmasked": lambda ro: ro.phantom_keys is not None and ro.phantom_keys >= 0.5 and not ro.missing_rows,
    "full-broken": lambda ro: ro.missing_rows > 0 and not ro.forbidden_rows,
    "sum-not-rescaled": lambda ro: ro.row_sum_max is not None and ro.row_sum_min is not None
    and ro.row_sum_max < 1.01 and ro.row_sum_min < 0.99
    and ro.block_pattern in ("one-factor", "consistent") and not ro.missing_rows and not ro.forbidden_rows,
    "acc-not-rescaled": lambda ro: ro.block_pattern in ("stale-max", "other") and not ro.missing_rows,
    "no-final-division": lambda ro: ro.row_sum_min is not None and ro.row_sum_max is not None
    and ro.row_sum_min > 0.99 and ro.row_sum_max > 1.01 and ro.sums_are_denominators is not False,
    # its words say each block is weighed against its own maximum: only that measured pattern supports it
    "never-rescaled": lambda ro: ro.block_pattern == "own-block-max" and not ro.missing_rows,
    "nan-first-block": lambda ro: bool(ro.nan_rows) and len(ro.nan_rows) == ro.shape[2],
}
# the codes whose words say the loop stops before blocks it never reads
UNREACHED = {"loop-stops-before-diagonal"}


def supported(code: str, ro: ReadOut, blocks_reached: bool | None) -> bool:
    """Does the read-out (and the visit map's ``blocks_reached``, see :func:`readout_codes`) support ``code``?"""
    return code in SUPPORTS and SUPPORTS[code](ro) and not (code in UNREACHED and blocks_reached)


def diagnose(
    drill: Drill,
    launches: list[CheckedLaunch],
    visits: VisitMap | None,
    block_m: int,
    block_n: int,
    readouts: dict[str, ReadOut] | None = None,
) -> list[Diagnosis]:
    """Everything worth saying about a check that ran, errors first."""
    readouts = readouts or {}
    codes = Findings(fills=True)  # in the order found; the words quote the numbers of each code's read-out

    def say(code: str, detail: str = "", ro: ReadOut | None = None) -> None:
        if code not in codes:
            codes.say(code, detail, placeholders(ro) if ro is not None else None)

    both_modes = "full" in drill.modes and "causal" in drill.modes
    failing = [x for x in launches if not x.case.passed]
    chosen = _consensus([fingerprints(drill, x, block_m, block_n) for x in failing])
    passed_causal = {x.case.name for x in launches if x.case.causal and x.case.passed}
    # the map is of the default shape's causal launch (or its only one): a read-out of another mode says nothing of it
    ro_skipped = next((r for m, r in readouts.items() if r.skipped_blocks and (not both_modes or m == "causal")), None)
    reached: dict[str, bool | None] = {}  # mode -> readout_codes' blocks_reached
    if ro_skipped is not None and visits is not None:
        counts = skipped_visit_counts(ro_skipped, visits)
        reached[ro_skipped.mode] = all(c == visits.heads for c in counts) if counts else None
    measured = {mode: readout_codes(drill, ro, both_modes, reached.get(ro.mode)) for mode, ro in readouts.items()}
    for launch, code in zip(failing, chosen, strict=True):
        case = launch.case
        mode = (", causal" if case.causal else ", full") if both_modes else ""
        where = f" (seen on the {case.name} shape, seq={case.shape[2]}{mode})"
        ro = readouts.get("causal" if case.causal else "full")
        said = measured.get(ro.mode, []) if ro is not None else []
        if case.unwritten:
            say("unwritten-output", f" {case.unwritten} elements were never written{where}."
                + shared.unwritten_words(launch.out) + written_rows_words(launch, drill.tolerance))
        if case.wrote_out_of_bounds:
            say("store-out-of-bounds", where + ".")
        if ro is not None and code is not None and code not in said and not supported(code, ro, reached.get(ro.mode)):
            code = None  # the fingerprint names a cause the kernel's weights do not show
        if ro is not None and not reading.trusted(ro):
            code = None  # the weights describe nothing, so none supports a fingerprint
        if ro is not None and code is not None and said and code not in said:
            # both agree on the facts; the fingerprint names the finer cause (which sum was not rescaled)
            said = [code]
        if code is not None and not said:
            say(code, where + ".", ro)
        elif said and not case.unwritten and not case.wrote_out_of_bounds:
            # (a store past the end lands in the next head's rows: the probe's cross-talk is that)
            # the read-out's numbers are of the case it was read on, which the words name
            assert ro is not None  # said is only non-empty with a read-out
            read_on = f" (seen on the {ro.case} shape, seq={ro.shape[2]}{mode})" if ro.case and ro.shape else where
            for found in said:
                say(found, read_on + ".", ro)
        elif case.nonfinite:
            if "nan-first-block" in drill.diagnoses and case.nonfinite == launch.out.numel() - case.unwritten:
                say("nan-first-block", where + ".", ro)
            else:
                say("nan-in-output", f" {case.nonfinite} elements; {_describe_rows(launch, block_m)}{where}.", ro)
        elif not case.fully_written:
            pass  # said above; the rest of the output is not worth guessing at
        elif both_modes and not case.causal and case.name in passed_causal:
            # right when causal, wrong when not: the change reached the full path
            say("full-broken", where + ".", ro)
        elif "wrong-output" not in codes:  # (its operand read-out costs launches of the reference: once)
            worst = "" if case.worst_row is None else f" The largest error is at row {case.worst_row} (query block {case.worst_row // block_m})"
            say("wrong-output", f"{worst}{where}." + (facts(ro) if ro is not None else "") + operand_words(launch, drill),
                ro)

    if "blocks-inconsistent" in codes:
        codes["blocks-inconsistent"] += next((w for w in map(pattern_words, readouts.values()) if w), "") \
            or next((w for w in map(counted_twice_words, readouts.values()) if w), "")
    if "blocks-skipped" in codes and visits is not None and ro_skipped is not None:
        full_right = both_modes and all(x.case.passed for x in launches if not x.case.causal)
        codes["blocks-skipped"] += skipped_visit_words(ro_skipped, visits, full_right)
    if visits is not None:
        # PASSED with every block visited is a finding of its own ("todo1-open", which
        # unlocks the loop-bound hint); on a failing kernel it is only said
        for code, detail in visit_findings([("", visits)], "causal" in drill.modes,
                                           "all-blocks-visited" if failing else "todo1-open").items():
            say(code, detail)

    return codes.worded(drill)
