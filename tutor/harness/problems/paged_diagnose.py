"""Drill 07's diagnosis: what a paged decode kernel measurably computed and read.

Each step returns its findings (code -> the measured detail):

* :func:`output_findings`: elements never written, stores past the output, NaN/Inf;
* :func:`head_findings`: which (sequence, query head) outputs are wrong, and for
  each whether it equals, in float64, the attention of that query against
  *another* K/V head of the same sequence (measured: every K/V head is tried);
* :func:`read_findings`: held positions whose key or value was not used, offsets
  past a length and pages no block table lists that were, from one of two
  measurements: on Triton's interpreter every load of the page pools is counted
  (:func:`counted_facts`, which also tells how many times each K/V element was
  read: the bytes a step moved); where nothing is counted (a GPU) the weights
  read-out of each failing case says which pool rows took part in each head's
  softmax (:func:`weighed_facts`, :mod:`paged_weights`).  :func:`say_reads`
  decides the codes from either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from tutor.catalog import Drill
from tutor.harness.findings import Findings, index_runs
from tutor.harness.problems import paged_layout, paged_weights
from tutor.harness.problems import split_kv_readout as apart
from tutor.harness.problems.paged_decode import Launch, attend_every_head, gathered, pages_needed
from tutor.harness.problems.paged_nan import nan_origin_words
from tutor.harness.problems.paged_weights import pairs_words
from tutor.harness.problems.query_offsets import attention_gaps
from tutor.harness.result import CaseResult, Diagnosis


def _result(launch: Launch) -> CaseResult:
    assert launch.result is not None
    return launch.result


def _where(launch: Launch) -> str:
    c = launch.case
    return (f" (the {c.name} case: lengths {list(c.lengths)}, {c.heads} query heads on {c.kv_heads} K/V heads,"
            f" pages of {c.page_size})")


# codes of loads that read positions no sequence holds: poisoned memory, a NaN's other source
STRAY_READS = ("reads-past-length", "reads-unlisted-page")


def output_findings(failing: list[Launch], stray_reads: bool = False,
                    one_slice: Callable[[Launch], torch.Tensor | None] | None = None,
                    rerun_of: Callable[[Launch], apart.Rerun] | None = None,
                    padless: Callable[[Launch], torch.Tensor | None] | None = None,
                    tolerance: float = 0.0, relaunch: paged_weights.Relaunch | None = None,
                    tails: list[Launch] | None = None) -> Findings:
    """Unwritten, out-of-bounds and non-finite outputs.  A NaN only in the cases of large
    scores is put down to an overflowing exp only where no load read a position no
    sequence holds (``stray_reads``: those hold poison, which reaches the output too);
    elsewhere where it starts (:func:`paged_nan.nan_origin_words`: slice states never
    stored, stored non-finite, or the merge), else the case runs again with one slice a
    sequence (``one_slice``): finite there, the NaN comes with the slices.  A case of large scores
    whose split count is not a power of two runs again with one that is (``padless``): right
    there, the NaN comes with the merge's padding slots.  ``tails``: the nan-tail cases (said
    here where their output has NaN too: "only the cases of large scores" is then not so)."""
    found = Findings()
    for x in failing:
        r = _result(x)
        if r.unwritten:
            found.say("unwritten-output", f" {r.unwritten} elements were never written{_where(x)}.")
        if r.wrote_out_of_bounds:
            found.say("store-out-of-bounds", _where(x) + ".")
    nan = [x for x in failing if _result(x).nonfinite]
    if nan:
        x = nan[0]
        bad = (~torch.isfinite(x.out.double().cpu())).any(dim=-1).nonzero().tolist()
        detail = (f" {_result(x).nonfinite} elements, in (sequence, head) {pairs_words(bad)}{_where(x)}."
                  + _group_position_words(x, bad))
        tail = next((y for y in tails or [] if _result(y).nonfinite), None)
        detail += _tail_words(tail, failing) if tail is not None else ""
        large_only = {_result(y).name for y in nan} <= {"hostile", "orders"}
        if large_only and stray_reads:
            detail += (f" {'Of the other cases only' if tail is not None else 'Only'} the cases of large scores have"
                       " them (hostile, orders), and the kernel's loads read positions no sequence holds (below),"
                       " which hold the tutor's poison: that read, or an exp that overflowed fp32, can be their"
                       " source.")
        elif large_only and tail is None:
            detail += (" Only the cases of large scores have them (hostile: scores of standard deviation 100;"
                       " orders: a top score of 100, and a fourth sequence whose every score is -120 or less)")
            pad = ("" if padless is None or x.case.num_splits is None else
                   apart.padding_slots_words(x.case.name, x.case.num_splits, padless(x), x.expected, tolerance))
            detail += ("." + pad if pad else
                       ", where an exp overflows fp32, or underflows to 0, first: every exp/exp2 must take a score"
                       " minus the running maximum (started at -inf, with this tile's scores in it and no padding"
                       " column's), and the rescale exp2(old maximum - new maximum), not the other way round."
                       + nan_origin_words(x, rerun_of, finite_too=False))
        elif origin := (nan_origin_words(x, rerun_of, relaunch=relaunch) if not stray_reads else ""):
            detail += origin
        elif one_slice is not None:
            again = one_slice(x)
            if again is not None and bool(torch.isfinite(again.double()).all()):
                detail += (" With num_splits=1 (one slice a sequence, nothing to merge) the same case's output is"
                           " finite: the NaN comes with the slices, from a slice's state or from where the merge"
                           " finds it. A slice that holds no position must store the empty state (m = -inf, l = 0,"
                           " o = 0), which the merge weighs exp2(-inf - M) = 0, and nothing may divide by a slice's"
                           " own l or subtract -inf from -inf; and the merge must read each slice's state at the"
                           " slot the split stored it (the same index of sequence, head and slice in both).")
        found.say("nan-in-output", detail)
    return found


def _tail_words(tail: Launch, failing: list[Launch]) -> str:
    """The nan-tail case's NaN, beside another case's: what its inputs are and, where the default
    case (the same inputs but finite poison there) is measured finite, that its NaN is V read at
    positions no sequence holds."""
    default_finite = any(_result(x).name == "default" and not _result(x).nonfinite for x in failing)
    return (f" The nan-tail case has them too ({_result(tail).nonfinite} elements): its inputs are the default"
            " case's but for NaN in V at the positions no sequence holds"
            + (", and the default case's output is finite, so there the NaN is V read at such positions."
               if default_finite else "."))


def _group_position_words(x: Launch, bad: list[list[int]]) -> str:
    """Where the (sequence, head) pairs ``bad`` are the same query heads of every sequence,
    and those are the same places in every K/V group (blind round 10, w63: the last head of
    each group), in words; "" otherwise."""
    case = x.case
    group = case.group
    heads = {h for _, h in bad}
    if group < 2 or any({h for b2, h in bad if b2 == b} != heads for b in range(case.batch)):
        return ""
    places = sorted({h % group for h in heads})
    if len(places) == group or heads != {h for h in range(case.heads) if h % group in places}:
        return ""
    return (f" Every sequence has them in the same query heads, {index_runs(sorted(heads))}: place"
            f"{'s' if len(places) > 1 else ''} {index_runs(places)} of every group of {group} query heads"
            f" (h % {group}), so look at how the group's query heads are counted, masked and stored.")


def _one_slice_words(x: Launch, tolerance: float, one_slice: Callable[[Launch], torch.Tensor | None] | None) -> str:
    """Where the same case with ``num_splits=1`` (one slice a sequence, nothing to merge) is
    right within the tolerance: that, in words (the mistake lives in cutting or merging the
    slices); else "".  One launch more, only for a wrong, finite output."""
    err = _right_again(one_slice(x) if one_slice is not None else None, x, tolerance)
    if err is None:
        return ""
    return (f" With num_splits=1 (one slice a sequence, nothing to merge) the same case is right (largest error"
            f" {err:.2g}): what is wrong comes with the slices - where each slice starts and stops, the"
            " states it stores, or how the merge weighs them.")


def _right_again(again: torch.Tensor | None, x: Launch, tolerance: float) -> float | None:
    """The largest error of ``again`` (the case's kernel launched again some other way)
    against the case's reference where it is within ``tolerance``; else None."""
    if again is None:
        return None
    err = float((again.double().cpu() - x.expected).abs().nan_to_num(nan=float("inf")).max())
    return err if err <= tolerance else None


def _swapped_pools_words(x: Launch, tolerance: float, relaunch: paged_weights.Relaunch) -> str:
    """Where the case launched again with the K and V pools passed the other way round is
    right within the tolerance, that in words (blind round 12, w42); else "".  One launch."""
    p = x.inputs
    try:
        err = _right_again(relaunch(x, dataclasses.replace(p, k_pages=p.v_pages, v_pages=p.k_pages)), x, tolerance)
    except Exception:  # noqa: BLE001 - a launch that fails here measures nothing
        return ""
    if err is None:
        return ""
    return (f" Launched again with the two pools passed the other way round (the V pool as k_pages, the K pool as"
            f" v_pages), the same case is right (largest error {err:.2g}): your kernel takes its keys"
            " from the tensor passed as v_pages and its values from the one passed as k_pages. Look at the order of"
            " the arguments where the launcher calls the kernel, of the kernel's parameters, and at the pointer"
            " each of the K and V loads starts from.")


def _wrong_pairs(x: Launch, tolerance: float) -> list[list[int]]:
    err = (x.out.double().cpu() - x.expected).abs().nan_to_num(nan=float("inf")).amax(dim=-1)
    return (err > tolerance).nonzero().tolist()


def head_findings(failing: list[Launch], tolerance: float) -> Findings:
    """Wrong (sequence, head) pairs, and ``heads-mixed`` where it is measured beyond doubt: on
    every failing case with more than one K/V head, each wrong output equals (within the
    tolerance, in float64) attention of its query against another K/V head of its sequence."""
    found = Findings()
    mixed_words: list[str] = []
    every_case_mixed = True
    for x in failing:
        r = _result(x)
        if not r.written_and_finite:
            every_case_mixed = False
            continue
        c, out = x.case, x.out.double().cpu()
        wrong = _wrong_pairs(x, tolerance)
        mixed: list[str] = []
        matched: list[int] = []  # the K/V head each wrong output equals, where one does
        if c.kv_heads > 1:
            kg, vg = gathered(x.inputs, c)
            every = attend_every_head(x.inputs.q, kg, vg, x.inputs.lengths)  # (batch, heads, kv_heads, D)
            for b, h in wrong:
                own = h // c.group
                for j in range(c.kv_heads):
                    if j != own and float((out[b, h] - every[b, h, j]).abs().max()) <= tolerance:
                        mixed.append(f"sequence {b} query head {h} equals attention against K/V head {j} (its"
                                     f" own is {h} // {c.group} = {own})")
                        matched.append(j)
                        break
            if wrong and len(mixed) == len(wrong):
                shown = "; ".join(mixed[:4]) + (f"; and {len(mixed) - 4} more" if len(mixed) > 4 else "")
                mixed_words.append(f" Measured: each of the {len(wrong)} wrong (sequence, head) outputs equals,"
                                   f" within the tolerance, attention against another K/V head: {shown}{_where(x)}."
                                   + _all_read_head_zero(wrong, matched, c.group))
            else:
                every_case_mixed = False
        err = float((out - x.expected).abs().max())
        whole = sorted({b for b, _ in wrong})
        detail = (f" Wrong on {len(wrong)} of the {c.batch * c.heads} (sequence, head) outputs: {pairs_words(wrong)};"
                  f" largest error {err:.3g}, where the reference's values are at most"
                  f" {float(x.expected.abs().max()):.3g}{_where(x)}.")
        right = [b for b in range(c.batch) if b not in whole]
        if right:
            detail += (f" Right on sequence{'s' if len(right) > 1 else ''} {index_runs(right)} (length"
                       f"{'s' if len(right) > 1 else ''} {', '.join(str(c.lengths[b]) for b in right)}).")
        if mixed and len(mixed) < len(wrong):
            detail += (f" {len(mixed)} of them equal attention against another K/V head, the rest match none:"
                       f" {mixed[0]}.")
        if len(mixed) < len(wrong):
            detail += _other_query_words(out, x, wrong, tolerance)
        found.say("wrong-output", detail)
    if mixed_words and every_case_mixed:
        found.say("heads-mixed", mixed_words[0])
    return found


def _all_read_head_zero(wrong: list[list[int]], matched: list[int], group: int) -> str:
    """Words where every wrong output is attention against K/V head 0 and the wrong ones are
    exactly the query heads outside group 0 (blind round 22, 07/m04: the pool row without its
    K/V head term); "" otherwise."""
    if not matched or set(matched) != {0} or any(h < group for _, h in wrong):
        return ""
    return (" Every wrong output is attention against K/V head 0, and only query heads outside group 0 are"
            " wrong: every query head reads K/V head 0, whatever its group. The K/V head index adds nothing to where"
            " your K and V loads read: look at the K/V head's term in their offset (in the pool row, + kvh), or"
            " at kvh itself.")


def _other_query_words(out: torch.Tensor, x: Launch, wrong: list[list[int]], tolerance: float) -> str:
    """Where every wrong (sequence, head) output equals, within the tolerance, attention of
    another query row's q (any sequence's, any head's) against its own K/V head over its own
    sequence, in words: the query was read from the wrong place; "" otherwise."""
    c = x.case
    kg, vg = gathered(x.inputs, c)  # (batch, kv_heads, n, D)
    queries = x.inputs.q.reshape(c.batch * c.heads, -1)
    found: list[str] = []
    for b, h in wrong:
        n, own = int(x.inputs.lengths[b]), h // c.group
        gap = attention_gaps(queries, kg[b, own, :n], vg[b, own, :n], out[b, h])  # every q against (b, own)
        gap[b * c.heads + h] = float("inf")
        other = int(gap.argmin())
        if float(gap[other]) > tolerance:
            return ""
        ob, oh = divmod(other, c.heads)
        found.append(f"sequence {b} head {h}: {'' if ob == b else f'sequence {ob} '}head {oh}'s")
    shown = "; ".join(found[:4]) + (f"; and {len(found) - 4} more" if len(found) > 4 else "")
    return (f" Each of them equals, within the tolerance, attention of another query row's q against its own K/V"
            f" head ({shown}): the q load reads another (sequence, head)'s row; check its offset and the strides"
            f" between sequences and heads.")


# -- counted reads (interpreter) ------------------------------------------------------------------
def _pool_counts(x: Launch, name: str, counts: Any) -> tuple[np.ndarray, int, int]:
    """The counts inside the pool, (num_pages, kv_heads, page_size, D), and the margin reads."""
    band = x.guarded.band(name)
    m = band.margin
    inside = counts[m: m + band.view.numel()].reshape(tuple(band.view.shape))
    return inside, int((counts[:m] > 0).sum()), int((counts[m + band.view.numel():] > 0).sum())


@dataclass
class ReadFacts:
    """What one case's measurement of the reads says, in words: held positions that took no
    part, offsets past a length and unlisted pages that did, and (counted loads only) each
    group's repeated reads.  ``how`` names the measurement the words come from."""

    launch: Launch
    how: str
    unread: list[str] = field(default_factory=list)
    past: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    repeated: tuple[int, str] | None = None  # (least reads of a held K/V element, its words); GQA > 1 only
    tail: str = ""  # counted loads that stopped short of a length, nothing else read (:func:`tail_words`)
    layout: str = ""  # the one changed term of the pool row that gives the rows read (:mod:`paged_layout`)


def tail_words(missing: dict[int, set[int]], lengths: list[int], times: int) -> str:
    """" <measured>" where each sequence with positions never read misses exactly its last ones
    (positions p..length-1, p > 0) and counted loads read every other held element ``times``
    times: the reads stopped short of the length; "" where any sequence misses positions
    elsewhere (then no one bound explains them)."""
    tails: list[str] = []
    for s, gone in sorted(missing.items()):
        n = lengths[s]
        first = min(gone)
        if first == 0 or gone != set(range(first, n)):
            return ""
        tails.append(f"sequence {s} (length {n}) from position {first} to its end")
    if not tails:
        return ""
    return (f" What was never read is each sequence's tail ({'; '.join(tails)}), and every position before it was"
            f" read, {times} time{'s' if times > 1 else ''} like every other: the reads stop short of the length (a"
            " loop bound, a mask, a slice's range or the launch grid that does not reach it: a count rounded down,"
            " the last slice or block never launched).")


def counted_facts(x: Launch, block_n: int | None = None) -> ReadFacts:
    """The counted loads of the K and V pools (Triton's interpreter); ``block_n`` (the
    kernel's BLOCK_N, where known) lets the rows read be matched to a pool row formula."""
    c, p = x.case, x.inputs
    ps = c.page_size
    table = p.block_table.cpu()
    facts = ReadFacts(x, "Counted loads (Triton's interpreter)")
    unlisted: dict[str, int] = {}
    needed_reads: list[np.ndarray] = []
    unread: dict[tuple[int, int, int], dict[int, list[str]]] = {}  # (seq, page, entry) -> position -> pools
    for name, counts in (("K", x.k_counts), ("V", x.v_counts)):
        pool, before, after = _pool_counts(x, name, counts)
        per_pos = pool.min(axis=-1)  # (num_pages, kv_heads, page_size): an offset counts once all of D was read
        any_read = pool.max(axis=-1)
        if name == "K" and block_n is not None:
            facts.layout = paged_layout.layout_words(x, any_read, before + after, block_n)
        if before or after:
            unlisted[f"{name} outside the pool ({before} elements before it, {after} after)"] = before + after
        for s, n in enumerate(c.lengths):
            need = pages_needed(n, ps)
            for j in range(need):
                page = int(table[s, j])
                held = min(ps, n - j * ps)
                got = per_pos[page, :, :held]
                needed_reads.append(got.ravel())
                for o in np.nonzero((got == 0).any(axis=0))[0]:  # a position whose key or value went unread
                    unread.setdefault((s, page, j), {}).setdefault(j * ps + int(o), []).append(name)
                if held < ps and name == "K" and bool((any_read[page, :, held:] > 0).any()):
                    offs = sorted({int(o) for o in np.nonzero((any_read[page, :, held:] > 0).any(axis=0))[0]})
                    facts.past.append(f"offsets {index_runs([held + o for o in offs])} of page {page}, the last page of"
                                      f" sequence {s} (length {n}), which holds {held}, were loaded")
        for page, (_, j) in enumerate(p.owner):
            if j < 0 and bool((any_read[page] > 0).any()):
                key = paged_weights.unlisted_page_words(c, p, page)
                unlisted[key] = unlisted.get(key, 0) + int((any_read[page] > 0).sum())
    facts.unlisted = [f"read {key}" for key in unlisted]
    # a tail unread while every other held element was read equally often and nothing else was
    # read (past a length, unlisted pages): reading that stopped, not reading that went astray
    read_counts = np.unique(np.concatenate(needed_reads)) if needed_reads else np.zeros(0)
    if read_counts[read_counts > 0].size == 1 and not facts.past and not facts.unlisted:
        unread_by_seq: dict[int, set[int]] = {}
        for (s, _, _), positions in unread.items():
            unread_by_seq.setdefault(s, set()).update(positions)
        facts.tail = tail_words(unread_by_seq, list(c.lengths), int(read_counts.max()))
    for (s, page, j), positions in sorted(unread.items()):
        by_pools: dict[str, list[int]] = {}
        for position, pools in positions.items():
            by_pools.setdefault(" and ".join(pools), []).append(position)
        for names, missing in by_pools.items():
            facts.unread.append(f"never read: sequence {s} positions {index_runs(sorted(missing))} ({names};"
                                f" page {page}, block-table entry {j})")
    if c.group > 1 and needed_reads:
        reads = np.concatenate(needed_reads)
        least = int(reads.min())
        held_bytes = reads.size * c.head_dim * 2
        read_bytes = int(reads.sum()) * c.head_dim * 2
        facts.repeated = (least, f"on the {c.name} case ({c.group} query heads per K/V head) every K/V element the"
                                 f" sequences hold was read at least {least} times: {read_bytes} bytes of K/V for a"
                                 f" cache of {held_bytes} ({read_bytes / max(held_bytes, 1):.2g}x)")
    return facts


def weighed_facts(cw: paged_weights.CaseWeights) -> ReadFacts:
    """The weights read-out of a failing case (no load counted: a GPU, or the interpreter with
    counting off): what took part in each head's softmax, which says nothing of loads."""
    return ReadFacts(cw.launch, f"Weights read-out ({cw.launches} launches of this case's kernel variant with K = 0"
                                " and one-hot V: what took part in each head's softmax; no load is counted here)",
                     unread=paged_weights.unread_words(cw),
                     past=paged_weights.past_words(cw), unlisted=paged_weights.unlisted_words(cw))


def say_reads(facts: list[ReadFacts], failing: bool) -> Findings:
    """The read codes, decided here whichever measurement the facts come from: each code's
    first case's words, in one fixed order; positions-unread only when a case fails (a
    passing kernel's unread positions cannot matter); kv-read-repeatedly when every GQA case's
    counted loads read each held element at least twice."""
    found = Findings()
    for code, field_name in (("positions-unread", "unread"), ("reads-past-length", "past"),
                             ("reads-unlisted-page", "unlisted")):
        if code == "positions-unread" and not failing:
            continue
        for f in facts:
            said: list[str] = getattr(f, field_name)
            if said:
                more = f"; and {len(said) - 4} more" if len(said) > 4 else ""
                tail = f.tail if code == "positions-unread" else ""
                found.say(code, f" {f.how}: " + "; ".join(said[:4]) + more + _where(f.launch) + "." + tail)
                break
    layout = next((f.layout for f in facts if f.layout), "")
    first = next((code for code in ("positions-unread", "reads-past-length", "reads-unlisted-page")
                  if code in found), None)
    if layout and first is not None:
        found[first] += layout
    repeated = [f.repeated for f in facts if f.repeated is not None]
    if repeated and all(least >= 2 for least, _ in repeated):
        found.say("kv-read-repeatedly", " Counted loads: " + "; ".join(words for _, words in repeated) + ".")
    return found


def read_findings(launches: list[Launch], failing: bool, relaunch: paged_weights.Relaunch | None = None,
                  block_n: int | None = None) -> Findings:
    """What the reads of the K and V pools say: the counted loads where every launch counted
    them (Triton's interpreter), else, for a failing kernel, the weights read-out of each
    failing case (``relaunch`` runs the kernel on a case's launch with other inputs)."""
    if all(x.k_counts is not None and x.v_counts is not None for x in launches):
        return say_reads([counted_facts(x, block_n if failing else None) for x in launches], failing)
    if not failing or relaunch is None:
        return Findings()  # nothing counted, and a passing kernel is not read out
    facts: list[ReadFacts] = []
    for x in launches:
        r = _result(x)
        # an output row that another head's store reached (or none did) is not that head's
        # attention: the read-out of a case with stores measured wrong would name the wrong head
        if not r.passed and r.fully_written:
            # a case's position launches only while they can add a finding still unsaid
            unread, past = not any(f.unread for f in facts), not any(f.past for f in facts)
            facts.append(weighed_facts(paged_weights.read_case(x, relaunch, unread, past)))
    return say_reads(facts, failing)


def state_findings(failing: list[Launch], rerun_of: Callable[[Launch], apart.Rerun] | None) -> Findings:
    """Slice states the merge reads that the split launch left as they were (the first failing
    case whose launches split into a split and a merge kernel, :func:`split_kv_readout.find_roles`),
    told apart by a launch with them poisoned (``rerun_of``)."""
    found = Findings()
    if rerun_of is None:
        return found
    for x in failing:
        c = x.case
        roles = apart.find_roles(x.calls, x.guarded.band("K").view, x.out, c.batch * c.heads, c.head_dim)
        code, words = apart.unwritten_states(roles, rerun_of(x)) if roles is not None else ("", "")
        if roles is not None and not code:  # a state tensor written in part: states stored one element apart?
            code, words = apart.overlapping_states(roles, rerun_of(x))
        if code:
            found.say(code, f" On the {c.name} case:" + words)
            break
    return found


def diagnose(drill: Drill, launches: list[Launch], tolerance: float,
             relaunch: paged_weights.Relaunch | None = None,
             one_slice: Callable[[Launch], torch.Tensor | None] | None = None,
             rerun_of: Callable[[Launch], apart.Rerun] | None = None,
             padless: Callable[[Launch], torch.Tensor | None] | None = None,
             unused_reads: dict[str, str] | None = None, block_n: int | None = None) -> list[Diagnosis]:
    """``unused_reads``: ``read-past-end-unused`` as the guard bands measured it (passing
    launches' loads into a margin, :func:`tutor.harness.guarded.unused_read_details`);
    ``block_n``: the kernel's BLOCK_N, where it has one (:mod:`paged_layout`)."""
    # the nan-tail case (V NaN where the other cases hold finite poison) is said only where all else passed
    tails = [x for x in launches if x.case.nan_tail]
    launches = [x for x in launches if not x.case.nan_tail]
    failing = [x for x in launches if not _result(x).passed]
    codes = state_findings(failing, rerun_of)
    # where the merge combined slice states the split never wrote, a read-out through the output
    # measures those values, not which positions the split's loads reached (counted loads, where
    # the interpreter has them, still do): no read-out then
    readout = None if codes else relaunch
    clean = [x for x in failing if _result(x).written_and_finite]
    swapped = _swapped_pools_words(clean[0], tolerance, readout) if clean and readout is not None else ""
    # keys read from the V pool: the read-out's one-hot values are then its keys (no positions read)
    reads = read_findings(launches, bool(failing), None if swapped else readout, block_n)
    codes.add(output_findings(failing, any(code in reads for code in STRAY_READS), one_slice,
                              None if codes else rerun_of, padless, tolerance, relaunch, tails))
    heads = head_findings(failing, tolerance)
    if "heads-mixed" in heads:
        codes.say("heads-mixed", heads["heads-mixed"])
    elif "wrong-output" in heads:
        softmax, hot = paged_weights.softmax_reading(clean[0], readout, block_n) if clean and readout is not None \
            and not swapped else (swapped, False)
        slices = _one_slice_words(clean[0], tolerance, one_slice) if clean and not hot else ""
        codes.say("wrong-temperature" if hot else "wrong-output", heads["wrong-output"] + softmax + slices)
    codes.add(reads)
    if not failing:
        codes.add(nan_tail_findings(tails))
    codes.add(unused_reads or {})
    return codes.worded(drill)


def nan_tail_findings(tails: list[Launch]) -> Findings:
    """``v-read-unmasked`` for a nan-tail case whose output holds NaN (every other case passed):
    the same inputs as the default case but for NaN in V at the positions no sequence holds."""
    found = Findings()
    for x in tails:
        if not _result(x).nonfinite:
            continue
        bad = (~torch.isfinite(x.out.double().cpu())).any(dim=-1).nonzero().tolist()
        found.say("v-read-unmasked", f" NaN in (sequence, head) {pairs_words(bad)}{_where(x)}, whose inputs are the"
                  " default case's but for NaN in V at every position past a length and in the page each table names"
                  " past its last one; every other case, where those positions hold finite values, is right.")
        break
    return found
