"""Drill 07's diagnosis: what a paged decode kernel measurably computed and read.

Each step returns its findings (code -> the measured detail):

* :func:`output_findings`: elements never written, stores past the output, NaN/Inf;
* :func:`head_findings`: which (sequence, query head) outputs are wrong, and for
  each whether it equals, in float64, the attention of that query against
  *another* K/V head of the same sequence (measured: every K/V head is tried);
* :func:`read_findings` (Triton's interpreter only, where every load of the page
  pools was counted): positions a sequence holds that were never read, offsets
  past a length and pages no block table lists that were read, and how many times
  each K/V element was read: the bytes a step moved against the cache's size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tutor.catalog import Drill
from tutor.harness.findings import Findings, index_runs
from tutor.harness.problems.paged_decode import Launch, attend_every_head, gathered, pages_needed
from tutor.harness.result import CaseResult, Diagnosis


def _result(launch: Launch) -> CaseResult:
    assert launch.result is not None
    return launch.result


def _where(launch: Launch) -> str:
    c = launch.case
    return (f" (the {c.name} case: lengths {list(c.lengths)}, {c.heads} query heads on {c.kv_heads} K/V heads,"
            f" pages of {c.page_size})")


def output_findings(failing: list[Launch]) -> Findings:
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
        detail = (f" {_result(x).nonfinite} elements, in (sequence, head) {_pairs(bad)}{_where(x)}.")
        if {_result(y).name for y in nan} <= {"hostile", "orders"}:
            detail += (" Only the cases of large scores have them (hostile: scores of standard deviation 100;"
                       " orders: a top score of 100): an exp overflowed fp32 there. Subtract a maximum before"
                       " every exp/exp2.")
        found.say("nan-in-output", detail)
    return found


def _pairs(pairs: list[list[int]]) -> str:
    by_seq: dict[int, list[int]] = {}
    for b, h in pairs:
        by_seq.setdefault(b, []).append(h)
    return "; ".join(f"sequence {b} head{'s' if len(hs) > 1 else ''} {index_runs(hs)}" for b, hs in by_seq.items())


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
        if r.unwritten or r.wrote_out_of_bounds or r.nonfinite:
            every_case_mixed = False
            continue
        c, out = x.case, x.out.double().cpu()
        wrong = _wrong_pairs(x, tolerance)
        mixed: list[str] = []
        if c.kv_heads > 1:
            kg, vg = gathered(x.inputs, c)
            every = attend_every_head(x.inputs.q, kg, vg, x.inputs.lengths)  # (batch, heads, kv_heads, D)
            for b, h in wrong:
                own = h // c.group
                for j in range(c.kv_heads):
                    if j != own and float((out[b, h] - every[b, h, j]).abs().max()) <= tolerance:
                        mixed.append(f"sequence {b} query head {h} equals attention against K/V head {j} (its"
                                     f" own is {h} // {c.group} = {own})")
                        break
            if wrong and len(mixed) == len(wrong):
                shown = "; ".join(mixed[:4]) + (f"; and {len(mixed) - 4} more" if len(mixed) > 4 else "")
                mixed_words.append(f" Measured: each of the {len(wrong)} wrong (sequence, head) outputs equals,"
                                   f" within the tolerance, attention against another K/V head: {shown}{_where(x)}.")
            else:
                every_case_mixed = False
        err = float((out - x.expected).abs().max())
        whole = sorted({b for b, _ in wrong})
        detail = (f" Wrong on {len(wrong)} of the {c.batch * c.heads} (sequence, head) outputs: {_pairs(wrong)};"
                  f" largest error {err:.3g}, where the reference's values are at most"
                  f" {float(x.expected.abs().max()):.3g}{_where(x)}.")
        right = [b for b in range(c.batch) if b not in whole]
        if right:
            detail += (f" Right on sequence{'s' if len(right) > 1 else ''} {index_runs(right)} (length"
                       f"{'s' if len(right) > 1 else ''} {', '.join(str(c.lengths[b]) for b in right)}).")
        if mixed and len(mixed) < len(wrong):
            detail += (f" {len(mixed)} of them equal attention against another K/V head, the rest match none:"
                       f" {mixed[0]}.")
        found.say("wrong-output", detail)
    if mixed_words and every_case_mixed:
        found.say("heads-mixed", mixed_words[0])
    return found


# -- counted reads (interpreter) ------------------------------------------------------------------
def _pool_counts(x: Launch, name: str, counts: Any) -> tuple[np.ndarray, int, int]:
    """The counts inside the pool, (num_pages, kv_heads, page_size, D), and the margin reads."""
    band = x.guarded.band(name)
    m = band.margin
    inside = counts[m: m + band.view.numel()].reshape(tuple(band.view.shape))
    return inside, int((counts[:m] > 0).sum()), int((counts[m + band.view.numel():] > 0).sum())


def read_findings(launches: list[Launch], failing: bool) -> Findings:
    """What the counted loads of the K and V pools say (nothing off the interpreter)."""
    found = Findings()
    said: dict[str, str] = {}  # each code's first detail, said below in one fixed order
    repeated: list[str] = []
    repeat_seen: list[bool] = []
    for x in launches:
        if x.k_counts is None or x.v_counts is None:
            return found
        c, p = x.case, x.inputs
        ps = c.page_size
        table = p.block_table.cpu()
        unread: list[str] = []
        past: list[str] = []
        unlisted: dict[str, int] = {}
        needed_reads: list[np.ndarray] = []
        for name, counts in (("K", x.k_counts), ("V", x.v_counts)):
            pool, before, after = _pool_counts(x, name, counts)
            per_pos = pool.min(axis=-1)  # (num_pages, kv_heads, page_size): an offset counts once all of D was read
            any_read = pool.max(axis=-1)
            if before or after:
                unlisted[f"{name} outside the pool ({before} elements before it, {after} after)"] = before + after
            for s, n in enumerate(c.lengths):
                need = pages_needed(n, ps)
                for j in range(need):
                    page = int(table[s, j])
                    held = min(ps, n - j * ps)
                    got = per_pos[page, :, :held]
                    needed_reads.append(got.ravel())
                    missing = sorted({j * ps + int(o) for o in np.nonzero((got == 0).any(axis=0))[0]})
                    if missing and name == "K":
                        unread.append(f"sequence {s} positions {index_runs(missing)} (page {page}, block-table"
                                      f" entry {j})")
                    if held < ps and name == "K" and bool((any_read[page, :, held:] > 0).any()):
                        offs = sorted({int(o) for o in np.nonzero((any_read[page, :, held:] > 0).any(axis=0))[0]})
                        past.append(f"sequence {s} (length {n}): offsets {index_runs([held + o for o in offs])} of"
                                    f" its last page {page}, which holds {held}")
            for page, (s, j) in enumerate(p.owner):
                if j < 0 and bool((any_read[page] > 0).any()):
                    key = (f"page {page} (named by sequence {s}'s block table entry {pages_needed(c.lengths[s], ps)},"
                           f" past its length {c.lengths[s]})" if s >= 0 else f"page {page} (in no block table)")
                    unlisted[key] = unlisted.get(key, 0) + int((any_read[page] > 0).sum())
        where = _where(x)
        if unread and failing:
            said.setdefault("positions-unread", " Counted loads: never read: " + "; ".join(unread[:4])
                      + (f"; and {len(unread) - 4} more" if len(unread) > 4 else "") + where + ".")
        if past:
            said.setdefault("reads-past-length", " Counted loads read " + "; ".join(past[:4]) + where + ".")
        if unlisted:
            said.setdefault("reads-unlisted-page", " Counted loads read " + "; ".join(list(unlisted)[:4]) + where + ".")
        if c.group > 1 and needed_reads:
            reads = np.concatenate(needed_reads)
            least = int(reads.min())
            repeat_seen.append(least >= 2)
            held_bytes = reads.size * c.head_dim * 2
            read_bytes = int(reads.sum()) * c.head_dim * 2
            repeated.append(f"on the {c.name} case ({c.group} query heads per K/V head) every K/V element the"
                            f" sequences hold was read at least {least} times: {read_bytes} bytes of K/V for a"
                            f" cache of {held_bytes} ({read_bytes / max(held_bytes, 1):.2g}x)")
    for code in ("positions-unread", "reads-past-length", "reads-unlisted-page"):
        if code in said:
            found.say(code, said[code])
    if repeat_seen and all(repeat_seen):
        found.say("kv-read-repeatedly", " Counted loads: " + "; ".join(repeated) + ".")
    return found


def diagnose(drill: Drill, launches: list[Launch], tolerance: float) -> list[Diagnosis]:
    failing = [x for x in launches if not _result(x).passed]
    codes = Findings()
    codes.add(output_findings(failing))
    heads = head_findings(failing, tolerance)
    if "heads-mixed" in heads:
        codes.say("heads-mixed", heads["heads-mixed"])
    elif "wrong-output" in heads:
        codes.say("wrong-output", heads["wrong-output"])
    codes.add(read_findings(launches, failing=bool(failing)))
    return codes.worded(drill)
