"""Drill 09's diagnosis: every code said from a measurement of what the kernel did.

* the visit maps against the listed blocks (:func:`visit_steps`);
* the weights read through one-hot values against the element mask
  (:func:`mask_readout`): weight on masked keys of partial blocks or of unlisted
  blocks, no weight on visible keys, by kind of block;
* the score modifier read on tutor-chosen scores (:func:`modifier_readout`);
* the element mask read on full blocks (:func:`full_blocks_probe`);
* NaN rows against the rows that see no key (:func:`nan_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import ModuleType

import torch

from tutor.harness import guarded as shared
from tutor.harness.findings import Findings, drop_explained_nan, index_runs
from tutor.harness.long_sum import long_sum_words
from tutor.harness.numerics import LN2, LOG2E
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention.block_shares import block_shares_words
from tutor.harness.problems.attention.reference import far_below_words
from tutor.harness.problems.block_sparse import (
    BlockMask,
    Checked,
    build_block_mask,
    reference,
    run,
    softcapped,
    where,
)
from tutor.harness.result import GuardFinding, VisitMap

MISSING_P = 1e-3  # a visible key the reference weighs this much and the kernel exactly 0 was never read
CHANGED = 1e-3  # an output element moved this much by the full-block probe: the mask was read there
FIT = 0.05  # max |effective score - candidate| (natural-log units) for a candidate to explain a read-out
B_GRID_TOP = 999.0  # the fit's largest b (1e3) less rounding: a b range reaching it is open above
PROBE_SOFTCAP = 5.0  # the modifier read-out's softcap: its scores span -3..3 softcaps
EQUAL_SCORES_WHY = (" With every score equal, softmax gives each visible key the same weight and no rescale"
                    " changes anything, so the factors' ratios to one another are how many times more often one"
                    " block's keys were added to the output than another's.")

# the effective score (natural-log units) a kernel applies to a scaled score s, for the ways
# of writing the modifier that the read-out names; code -> (words, transform)
TRANSFORMS: dict[str, tuple[str, Callable[[torch.Tensor, float], torch.Tensor]]] = {
    "": ("softcap·tanh(s/softcap)", softcapped),
    "modifier-missing": ("s (no modifier)", lambda s, c: s),
    "softcap-outer-missing": ("tanh(s/softcap) (no outer softcap)", lambda s, c: torch.tanh(s / c)),
    "modifier-after-scaling": ("ln2·softcap·tanh(s·log2(e)/softcap) (after the log2(e) factor)",
                               lambda s, c: LN2 * c * torch.tanh(s * LOG2E / c)),
    "modifier-twice": ("softcap·tanh(tanh(s/softcap)) (applied twice)", lambda s, c: c * torch.tanh(torch.tanh(s / c))),
}


def diagnose(module: ModuleType, checked: list[Checked], maps: list[VisitMap], device: str,
             generator: torch.Generator, guard_findings: list[GuardFinding], tolerance: float) -> Findings:
    banded = [shared.Banded.of(one.launch.bands, one.result, where(one)) for one in checked]
    # the long-sum case (q = 0, V's column 0 at 512) reads nothing out; it is said only where all else passed
    sums = [one for one in checked if one.case.long_sum]
    maps = [m for one, m in zip(checked, maps, strict=True) if not one.case.long_sum]
    checked = [one for one in checked if not one.case.long_sum]
    found = Findings()
    other = next(((one, ran) for one in checked if (ran := one.launch.other_blocks(module))), None)
    if other is not None:  # the lists are built for the module's tiles; the map indexes another grid
        found.say("launch-blocks-differ", _other_tiles_words(module, *other))
    failing = [c for c in checked if not c.result.passed]
    written = []
    for one in failing:
        if one.result.unwritten:
            found.say("unwritten-output", f" {one.result.unwritten} elements were never written{where(one)}."
                      + shared.unwritten_words(one.launch.out) + _empty_rows_unwritten(one))
        if one.result.wrote_out_of_bounds:
            found.say("store-out-of-bounds", where(one) + ".")
        if one.result.fully_written:
            written.append(one)
    for one in written:
        found.add(nan_rows(one))
    if "nan-in-output" in found:  # is it the modifier, on scores far past the cap?
        far = far_score_words(module, max(written[0].case.seq, 16), written[0].case.head_dim, device)
        found["nan-in-output"] += far
    explained = False
    shares = ""  # the first mask read-out's words on how the K/V blocks share each row's weight
    for one in written[:2]:
        said, shared_out = mask_readout(module, one, device, generator, tolerance)
        shares = shares or shared_out
        explained |= bool(said)
        found.add(said)
    # the modifier is read on two-key rows: only where the kernel's mask is measured right, and
    # only where its loops visit every listed block: a loop that misses some misreads the probe's
    # own blocks too (a partial loop run FullCount times, blind round 12, read as a transform that
    # matches no softcap).  Unlisted blocks visited and masked (the shipped drill) leave it right.
    visits, padding_only = visit_steps(checked, maps, failing=bool(failing)) if other is None else (Findings(), False)
    # a loop that runs on through an index row's padding also revisits the blocks the padding names that the
    # row lists (the probe's rows all list block 0, the padding's number): its keys counted twice read as a
    # transform that matches no softcap (blind round 25, 09 b24)
    padding = padding_only and "listed-blocks-missed" not in visits
    loops_wrong = "listed-blocks-missed" in visits or padding
    if padding and written and not explained:
        one = written[0]
        found.say("wrong-output", f" The largest error is at row {one.result.worst_row}{where(one)}. Your loops visit"
                  " their index rows' padding (counted below): a padding entry is 0, and a row that lists block 0"
                  " then can take block 0's keys a second time, unless the loop masks them. The modifier read-out"
                  " is not made: its rows all list block 0 and pad with it. Loop over each list's first FullCount"
                  " / PartCount entries only.")
    explained |= loops_wrong and bool(written)
    unread = ordered = ""
    if written and not explained:
        said = modifier_readout(module, checked[0], device)
        unread = said.pop(UNREAD, "")
        ordered = said.pop(ORDERED, "")
        explained |= bool(said)
        found.add(said)
    nan_code = next((code for code in ("nan-in-output", "empty-row-nan") if code in found), None)
    if ordered and nan_code is not None:  # measured on the probe's finite two-key rows: it holds beside the NaN
        found[nan_code] += f" On finite probe rows the modifier read-outs could not be read: {ordered}."
    if written and not explained and nan_code is None:
        one = written[0]
        modifier = ("the modifier read-outs (on partial blocks and on full blocks) match softcap·tanh(s/softcap)"
                    if not unread else "the modifier read-outs could not be read: " + ordered if ordered else
                    f"the modifier read-out on {unread} blocks could not be read (its rows are no clean softmax"
                    " of the chosen scores)" + ("" if "full" in unread and "partial" in unread else
                                               ", on the others it matches softcap·tanh(s/softcap)"))
        heads = other_head_words(one, tolerance)
        found.say("wrong-output", f" The largest error is at row {one.result.worst_row}{where(one)}; the weights"
                  " measured at small scores (q scaled down) put no weight on a masked key, miss no visible one,"
                  f" and {modifier}."
                  f"{shares}{heads}" + ("" if heads else own_scores_words(module, one, device, generator))
                  + "".join(_far_below_wrong_words(x, tolerance) for x in written))
    if "listed-blocks-missed" in visits and any(INDEX_AS_POSITION in words for words in found.values()):
        # (blind round 28, 09 b index_not_times_block_n: told to read both lists to their counts, which it did)
        visits["listed-blocks-missed"] += (
            " Those follow from the index read as a key position (above) where your visits are recorded at"
            " start_n // BLOCK_N, as the drill's code records them: listed block j is visited at key j, and its"
            " visit lands on block j // BLOCK_N; the lists may well be read to their counts.")
    found.add(visits)
    # the full-block probe speaks of a kernel that visits its listed blocks and weighs every
    # visible key: elsewhere a moved output has other causes (said above)
    if not any(code in found for code in ("listed-blocks-missed", "full-keys-missed", "partial-keys-missed",
                                              "unlisted-weighed", "no-visits-recorded")):
        found.add(full_blocks_probe(module, checked))
    guards, guard_said = shared.guard_report(banded, nan_probe(module, checked),
                                             outputs=("output", "visit map", "Q", "K", "V"))
    guard_findings += guards
    found.add(guard_said)
    drop_explained_nan(found)  # NaN read from past a tensor's end: not the rescale's -inf - (-inf)
    if not failing:
        for one in sums:
            if not one.result.passed:
                keys = one.bm.allowed().sum(dim=-1)
                found["long-sum-wrong"] = long_sum_words(one.launch.out, one.expected, keys, tolerance,
                                                         f"the long-sum case (a causal block mask, seq={one.case.seq})")
    return found


def _other_tiles_words(module: ModuleType, one: Checked, ran: dict[str, int]) -> str:
    """``launch-blocks-differ``'s detail: the tile sizes measured at the launch beside the module's."""
    measured = ", ".join(f"{k} = {v}" for k, v in ran.items())
    module_says = ", ".join(f"{k} = {getattr(module, k)}" for k in ran)
    return f" Your launcher ran the kernel with {measured}; the module says {module_says}{where(one)}."


OWN_SCORES_CLOSE = 0.01  # a row's weights within this of softmax's, summed over its keys: the same weights


def own_scores_words(module: ModuleType, one: Checked, device: str, generator: torch.Generator) -> str:
    """The case's weights read out at its own scores (its q and k as checked, not scaled down as
    the mask and modifier read-outs have them), against softmax's of the capped, masked scores,
    in words: the row where they differ most, or that they agree, so the error lies in how the
    values are combined.  "" where the output is no weighted sum of V (nothing read).  Blind
    round 9 (w51, w60): kernels right at the read-outs' small scores, wrong at the case's."""
    case, bm, x = one.case, one.bm, one.launch
    shape = (case.batch, case.heads, case.seq, case.head_dim)
    w, _ = reading.weights_through(lambda v: run(module, x.q, x.k, v, bm, case.softcap).out, shape,
                                   case.batch * case.heads, device)
    rows = (case.batch * case.heads, case.seq, case.head_dim)
    v = torch.randn(shape, generator=generator).to(device, torch.float16)
    if reading.read_out_gap(run(module, x.q, x.k, v, bm, case.softcap).out.reshape(rows), w,
                            v.reshape(rows)) > reading.LINEAR_SLACK:
        return ""
    allowed = bm.allowed().to(w.device)
    s = softcapped(reading.scores(x.q, x.k), case.softcap).masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)  # a row that sees no key weighs nothing
    gap = (w - p).abs().nan_to_num(nan=float("inf"))
    apart = gap.sum(dim=-1)  # (heads, seq): how far each row's weights are from softmax's, in all
    worst = int(apart.flatten().argmax())
    h, r = divmod(worst, case.seq)
    c = int(gap[h, r].argmax())
    total = float(w[h, r].sum())
    said = f" Read out through one-hot values at the case's own scores (q and k as checked{where(one)}):"
    if float(apart[h, r]) <= OWN_SCORES_CLOSE:
        return (f"{said} every row's weights are softmax's of its capped, masked scores (they differ by at most "
                f"{float(apart[h, r]):.2g} in all, a row), so on this case the error lies in how the values are"
                " combined, not in the weights.")
    kind = "NaN" if math.isnan(float(w[h, r, c])) else f"{float(w[h, r, c]):.3g}"
    vanished = ""
    if total < VANISHED and float(p[h, r].sum()) > 1 - VANISHED:
        raw = softcapped(reading.scores(x.q, x.k), case.softcap)[h, r].double().cpu()
        vanished = _masked_above_words(raw, allowed[r].cpu(), bm, r)
    return (f"{said} head {h} row {r} weighs key {c} at {kind} where softmax of its capped, masked scores gives "
            f"{float(p[h, r, c]):.3g}; its weights add up to {total:.3g} and differ from softmax's by "
            f"{float(apart[h, r]):.3g} in all.{vanished}" + listed_shares_words(w, s, allowed, bm))


VANISHED = 0.01  # a row whose read-out weights add up to less than this: every weight underflowed
UNDERFLOW_GAP = 17.0  # exp(-17) ~ 4e-8: below fp16's smallest subnormal, as p goes into the second dot


def _masked_above_words(raw: torch.Tensor, allowed: torch.Tensor, bm: BlockMask, r: int) -> str:
    """For a row whose every weight vanished: where the keys its partial blocks mask score far above
    every key it may see, in words (what a maximum taken before the mask gives); "" otherwise."""
    kinds = bm.kinds()[r // bm.block_m]
    partial = torch.zeros_like(allowed)
    for j in (kinds == 1).nonzero().flatten().tolist():
        partial[j * bm.block_n:(j + 1) * bm.block_n] = True
    masked = partial[: raw.shape[-1]] & ~allowed
    if not bool(masked.any()) or not bool(allowed.any()):
        return ""
    seen, hidden = float(raw[allowed].max()), float(raw[masked].max())
    if hidden - seen < UNDERFLOW_GAP:
        return ""
    return (f" Every weight of that row vanished: the keys it may see score at most {seen:.3g} (capped), while keys"
            f" its partial blocks mask score up to {hidden:.3g}, {hidden - seen:.3g} above - exp of its scores minus"
            " a maximum taken over the masked keys too (before the mask sets them to -inf) underflows to 0 there,"
            " and so does one minus any maximum that high.")


def listed_shares_words(w: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor, bm: BlockMask) -> str:
    """How a query block's listed K/V blocks share its rows' weight against softmax, at the
    case's own scores ``s`` ((heads, seq, seq), capped and masked: :func:`block_shares_words`),
    the blocks taken in the order the solution's loops read them: the full list, then the
    partial one.  The first query block,
    from the last, whose rows say something (a missing rescale of acc or of l_i, blind round
    12: the read-out at q = 0 cannot show it, every score there is equal); "" where none does."""
    seq, heads = w.shape[-1], w.shape[0]
    for i in reversed(range(len(bm.full_kv_num_blocks))):
        order = (bm.full_kv_indices[i, : int(bm.full_kv_num_blocks[i])].tolist()
                 + bm.kv_indices[i, : int(bm.kv_num_blocks[i])].tolist())
        rows = slice(i * bm.block_m, min((i + 1) * bm.block_m, seq))
        if len(order) < 2 or rows.start >= seq:
            continue
        spans = [slice(j * bm.block_n, min((j + 1) * bm.block_n, seq)) for j in order]
        n = rows.stop - rows.start

        def name(flat: int, first: int = rows.start, count: int = n) -> str:
            return f"head {flat // count} row {first + flat % count}"

        said = block_shares_words(w[:, rows], s[:, rows], allowed[rows], bm.block_n, name, "K/V block",
                                  spans=spans, span_index=order)
        if said:
            return (f" Query block {i}'s K/V blocks, taken as the lists give them (full, then partial:"
                    f" {', '.join(map(str, order))}), over {heads} head{'s' * (heads != 1)}:{said}")
    return ""


def nan_probe(module: ModuleType, checked: list[Checked]) -> shared.NanProbe | None:
    """The first case whose output holds NaN, re-run with other margin fills, so the guard
    report can say which input margin the NaN came from (a load past a tensor's end)."""
    one = next((c for c in checked if c.result.nonfinite), None)
    if one is None:
        return None
    src = one

    def again(fills: dict[str, str]) -> torch.Tensor:
        return run(module, src.launch.q, src.launch.k, src.launch.v, src.bm, src.case.softcap, fills).out

    return shared.NanProbe(src.result, again, f"the {src.case.name} case runs")


def visit_steps(checked: list[Checked], maps: list[VisitMap], failing: bool = False) -> tuple[Findings, bool]:
    """Visits to unlisted blocks and listed blocks never visited, counted over every case, and
    whether every unlisted visit (there are some) is to a key block that its query block's index
    rows name only past their counts: the padding (a loop over every block, the shipped drill,
    visits others too).  Where every case passed yet listed blocks show unvisited, the output
    proves their keys were read: the map does not count the visits (``visits-uncounted``), and
    what it shows elsewhere is not said as work.  ``failing``: some case failed (a loop through
    the padding then is said to revisit the listed blocks it names)."""
    found = Findings()
    if all(m.visited_blocks == 0 for m in maps):
        found.say("no-visits-recorded")
        return found, False
    extra = missed = padded = 0
    extra_at = missed_at = ""
    for one, m in zip(checked, maps, strict=True):
        for i, (row, ideal) in enumerate(zip(m.counts, m.ideal, strict=True)):
            past = past_count_blocks(one.bm, i)
            for j, (n, need) in enumerate(zip(row, ideal, strict=True)):
                if n and not need:
                    extra += n
                    padded += n if j in past else 0
                    extra_at = extra_at or f"query block {i}, key block {j}{where(one)}"
                if need and n < m.heads:
                    missed += m.heads - n
                    missed_at = missed_at or f"query block {i}, key block {j}{where(one)}"
        if one.launch.stray_visits:
            found.say("visits-outside-map", f" A visit was recorded outside the visit map's bounds{where(one)}.")
    listed = sum(m.ideal_blocks * m.heads for m in maps)
    padding_only = extra > 0 and padded == extra
    if missed and all(c.result.passed for c in checked):
        found.say("visits-uncounted", f" Every case passed, yet {missed} listed (head, query block, key block) visits "
                  f"of {listed} are not in the map (the first at {missed_at}) and {extra} are marked at blocks in "
                  "neither list.")
        return found, padding_only
    if extra:
        found.say("unlisted-blocks", f" {extra} (head, query block, key block) visits were to blocks in neither list, "
                  f"against {listed} listed ones over all cases; the first at {extra_at}."
                  + (" Every one of them is to a key block that its query block's index rows name only past their"
                     " counts (the rows are padded with 0 after the listed blocks): a list's blocks are its first"
                     " FullCount / PartCount entries, and a loop that runs on through the row visits the padding."
                     + (" Where the padding's block is one the row lists (block 0, in a row that lists it), that"
                        " block is visited a second time, and its keys are added again unless they are masked."
                        if failing else "")
                     if padding_only else ""))
    if missed:
        found.say("listed-blocks-missed", f" {missed} listed (head, query block, key block) visits of {listed} were "
                  f"never made; the first at {missed_at}." + _positions_words(checked, maps))
    return found, padding_only


def _positions_words(checked: list[Checked], maps: list[VisitMap]) -> str:
    """Where, in every case, each query block's visited key blocks are exactly the other list's
    and blocks 0..count-1 of one list (its positions j, not the block numbers its index row
    stores there), and that differs from the listed blocks somewhere: which loop, in words
    (blind round 23, 09: start_n = j * BLOCK_N in the full loop); "" otherwise."""
    def listed(bm: BlockMask, loop: str, i: int, n: int) -> set[int]:
        return set((bm.full_kv_indices if loop == "full" else bm.kv_indices)[i, :n].tolist())

    def positions(bm: BlockMask, loop: str, i: int, n: int) -> set[int]:
        return set(range(n))

    for loop, index, count in (("full", "FullIndex", "FullCount"), ("partial", "PartIndex", "PartCount")):
        readers = {"full": listed, "partial": listed} | {loop: positions}
        if _visits_fit(checked, maps, readers):
            return (f" In every case each query block visited exactly key blocks 0..{count}-1 and the other list's"
                    f" blocks: the {loop} loop visits the positions j of its list, not the block numbers"
                    f" {index}[start_m, j] stores there (load the entry, then multiply it by BLOCK_N).")
    # blind round 25, 09 b09: FullIndex + start_m + i, the entries read from the flat index without its row stride
    for loops in (("full",), ("partial",), ("full", "partial")):
        readers = {"full": listed, "partial": listed} | {loop: _flat_entries for loop in loops}
        if _visits_fit(checked, maps, readers):
            which = " and ".join(f"the {loop} loop reads {'FullIndex' if loop == 'full' else 'PartIndex'}"
                                 "[start_m + j]" for loop in loops)
            held = ("both lists' flat index arrays hold at entries start_m + j (j below each count)" if len(loops) == 2
                    else f"the {loops[0]} list's flat index array holds at entries start_m + j (j below its count),"
                         f" and the {'partial' if loops[0] == 'full' else 'full'} list's own blocks")
            return (f" In every case each query block visited exactly the blocks {held}: {which} - another query"
                    " block's row - where [start_m * N_N + j] belongs (the row stride N_N).")
    return ""


def _flat_entries(bm: BlockMask, loop: str, i: int, n: int) -> set[int]:
    """The blocks a loop reads at entries i + j (j < n) of its list's index taken flat, without the row stride."""
    flat = (bm.full_kv_indices if loop == "full" else bm.kv_indices).flatten()
    return set(flat[i: i + n].tolist())


def _visits_fit(checked: list[Checked], maps: list[VisitMap],
                readers: Mapping[str, Callable[[BlockMask, str, int, int], set[int]]]) -> bool:
    """Does every case's visit map show, for each query block i, exactly the blocks each loop's
    reader gives (``readers[loop](bm, loop, i, count)``), and does that differ from the listed
    blocks somewhere?"""
    fits, differs = True, False
    for one, m in zip(checked, maps, strict=True):
        bm = one.bm
        for i, row in enumerate(m.counts):
            counts = {"full": int(bm.full_kv_num_blocks[i]), "partial": int(bm.kv_num_blocks[i])}
            in_lists = set(bm.full_kv_indices[i, :counts["full"]].tolist()) | set(
                bm.kv_indices[i, :counts["partial"]].tolist())
            want = set().union(*(read(bm, loop, i, counts[loop]) for loop, read in readers.items()))
            fits = fits and {j for j, n in enumerate(row) if n} == want
            differs = differs or want != in_lists
    return fits and differs


def past_end_words(w: torch.Tensor, allowed: torch.Tensor, kinds: torch.Tensor, bm: BlockMask, seq: int,
                   softcap: float) -> str:
    """Read out with every score 0 (``w``: heads, rows, keys), each row's visible keys weigh
    1 / (its visible keys + the keys it weighs unseen); where those unseen keys are, in every
    row, the positions past the end in the last key block for the rows that list it, and
    none for the others, in words ("" otherwise; blind round 25, 09 b20: the -inf mask on
    keys past N_CTX dropped, said only as "no measurement explains it").  Each such position
    may weigh less than a key of score 0: as one of score -softcap, a -inf the modifier capped
    (the mask applied before the modifier: blind round 28, 09 b cap_after_inf_mask)."""
    extra = -seq % bm.block_n
    last = (seq - 1) // bm.block_n
    if extra == 0:
        return ""
    visible = allowed.sum(dim=-1).to(torch.float64)  # (rows,)
    total = w.to(torch.float64).nan_to_num(nan=0.0).sum(dim=-1)  # (heads, rows)
    seen = visible > 0
    if not bool(seen.any()) or bool((total[:, seen] <= 0).any()):
        return ""
    unseen = visible[seen] / total[:, seen] - visible[seen]  # (heads, rows that see a key)
    rows = torch.arange(seq, device=kinds.device)
    last_kind = kinds[rows // bm.block_m, last].to(unseen.device)[seen.to(unseen.device)]
    for which, words in ((last_kind == 2, "as a full block (a partial one's element mask hides those keys)"),
                         (last_kind > 0, "in either list")):
        want = torch.where(which, float(extra), 0.0).to(unseen.dtype)
        block = (f" Read out with every score 0 (q = 0), every row whose lists hold the last key block {words}"
                 f" (block {last}: keys {last * bm.block_n}..{(last + 1) * bm.block_n - 1}, of which {seq}.. lie"
                 f" past the end) divides by")
        if bool(which.any()) and bool(((unseen - want).abs() < 0.5).all()):
            return (f"{block} {extra} keys more than it weighs, and every other row by none: the {extra} positions"
                    " past the end weigh as keys of score 0, their scores not masked. A key past N_CTX must score"
                    " -inf whichever list its block is in")
        # each position weighs one factor of a score-0 key: as a key of score ln(factor)
        factor = unseen[:, which] / extra
        # (measurable: each row divides by a twentieth of a key more at the least; a right kernel's rows by ~0)
        if (factor.numel() and bool((unseen[:, ~which].abs() < 0.05).all()) and float(factor.min()) * extra >= 0.05
                and float(factor.max() - factor.min()) <= 0.02 * float(factor.max())):
            score = math.log(float(factor.mean()))
            capped = (f", about -{softcap:g} = softcap·tanh(-inf / softcap): a -inf the modifier capped to a finite"
                      " score. The mask's -inf must come after the modifier, on the capped scores"
                      if abs(score + softcap) < 0.05 else ": their scores are not masked")
            return (f"{block} {float(factor.mean() * extra):.3g} keys of score 0 more than it weighs, and every"
                    f" other row by none: each of the {extra} positions past the end weighs as a key of score"
                    f" {score:.3g}{capped}. A key past N_CTX must score -inf whichever list its block is in")
    return ""


def past_count_blocks(bm: BlockMask, i: int) -> set[int]:
    """The key blocks query block ``i``'s index rows name past their counts (padding) and not
    within them."""
    full, part = int(bm.full_kv_num_blocks[i]), int(bm.kv_num_blocks[i])
    listed = set(bm.full_kv_indices[i, :full].tolist()) | set(bm.kv_indices[i, :part].tolist())
    return (set(bm.full_kv_indices[i, full:].tolist()) | set(bm.kv_indices[i, part:].tolist())) - listed


EXTREME_CAPS = 60.0  # the far-score probe's scores span this many softcaps each way (tanh is ±1 long before)


def far_score_words(module: ModuleType, seq: int, head_dim: int, device: str) -> str:
    """The modifier on scores far past the cap (:func:`modifier_probe`'s two-key rows, s
    from -60 to 60 softcaps), where softcap·tanh(s/softcap) is ±softcap and every weight
    finite: where the output is NaN or Inf only beyond some |s| while finite on the nearer
    scores, say from which s on, in words ("" otherwise)."""
    def nan_rows(descending: bool) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v, bm, s, _ = modifier_probe(seq, head_dim, int(module.BLOCK_M), int(module.BLOCK_N), device,
                                           EXTREME_CAPS, reach=None, descending=descending)
        out = run(module, q, k, v, bm, PROBE_SOFTCAP).out[0, 0, 1:].to(torch.float32).cpu()
        return ~torch.isfinite(out).all(dim=-1), (s[1:] / PROBE_SOFTCAP).cpu()

    bad, x = nan_rows(False)
    near = x.abs() <= 3
    if not bool(bad.any()) or bool(bad[near].any()):
        return ""
    # the same scores on rows in the other order: NaN that stays with the rows, not the scores,
    # comes from where those rows are (their blocks), not from the modifier
    again, x_again = nan_rows(True)
    if not torch.equal(again[torch.argsort(x_again)], bad[torch.argsort(x)]):
        return ""
    sides = []
    for sign, words in ((-1.0, "below"), (1.0, "above")):
        side = bad & (x * sign > 0)
        if bool(side.any()):
            edge = float((x[side] * sign).min())  # the nearest score to 0 whose row is NaN
            sides.append(f"{words} s/softcap = {sign * edge:.0f}")
    return (f" On tutor-chosen two-key rows (softcap = {PROBE_SOFTCAP:g}, s/softcap from -{EXTREME_CAPS:.0f} to"
            f" {EXTREME_CAPS:.0f}), the output is NaN or Inf {' and '.join(sides)} and finite within ±3 softcaps:"
            f" the modifier breaks on scores far past the cap, where softcap·tanh(s/softcap) is simply ±softcap"
            f" (an exp of ±2s/softcap overflows fp32 beyond |s/softcap| ≈ 44, and inf/inf is NaN).")


def nan_rows(one: Checked) -> Findings:
    """NaN rows: exactly rows that see no key (0/0 in the epilogue), or others."""
    found = Findings()
    out = one.launch.out.to(torch.float32)
    bad = ~torch.isfinite(out).all(dim=-1).flatten(0, 1)  # (bh, seq)
    if not bool(bad.any()):
        return found
    empty = ~one.bm.allowed().any(dim=-1).to(bad.device)
    rows = sorted(set(bad.any(dim=0).nonzero().flatten().tolist()))
    if bool(empty.any()) and bool((bad == empty[None, :]).all()):
        found.say("empty-row-nan", f" Rows {index_runs(rows)} are NaN, and they are exactly the "
                  f"{int(empty.sum())} rows that see no key under the block mask{where(one)}.")
    else:
        found.say("nan-in-output", f" {int(bad.sum())} (head, row) pairs are NaN, in rows "
                  f"{index_runs(rows)}{where(one)}." + _far_below_words(one, bad))
    return found


def _empty_rows_unwritten(one: Checked) -> str:
    """Where the unwritten rows are exactly the rows that see no key under the block mask,
    in every head, in words (their output is 0: a store skipped for them leaves the
    poison); "" otherwise."""
    unwritten = shared.unwritten_rows(one.launch.out).flatten(0, 1)  # (bh, seq)
    empty = ~one.bm.allowed().any(dim=-1).to(unwritten.device)
    if not bool(empty.any()) or not bool((unwritten == empty[None, :]).all()):
        return ""
    rows = empty.nonzero().flatten().tolist()
    return (f" The unwritten rows are exactly the {len(rows)} rows that see no key under the block mask (rows"
            f" {index_runs(rows)}), in every head: their output is 0, and it must be stored like any other row's.")


def _in_far_head(one: Checked, pairs: torch.Tensor) -> bool:
    """Are the (head, row) pairs marked in ``pairs`` (bh, seq) some, and all in the last head of
    a ``far_below`` case, whose every score is near -FAR_BELOW?"""
    heads = one.case.heads
    last = torch.arange(pairs.shape[0], device=pairs.device) % heads == heads - 1
    return one.case.far_below and bool(pairs.any()) and not bool(pairs[~last].any())


def _far_below_wrong_words(one: Checked, tolerance: float) -> str:
    """Where every (head, row) pair of a ``far_below`` case that is off by more than the
    tolerance lies in its last head: that, with how many of those rows are all 0; the
    underflow is named only where every one of them is 0, the outcome it has; "" otherwise."""
    if not one.case.far_below:
        return ""
    out = one.launch.out.to(torch.float64).flatten(0, 1)  # (bh, seq, d)
    off = (out - one.expected.to(torch.float64).flatten(0, 1)).abs().amax(dim=-1) > tolerance  # (bh, seq)
    if not _in_far_head(one, off):
        return ""
    n_off, zero = int(off.sum()), int(((out == 0).all(dim=-1) & off).sum())
    subject = (f"In the {one.case.name} case every row off by more than the tolerance ({n_off}, {zero} of them all"
               f" 0) lies in head {one.case.heads - 1}")
    return far_below_words(subject, ", and the row's output is then 0" if zero == n_off else None)


def _far_below_words(one: Checked, bad: torch.Tensor) -> str:
    """Where every NaN (head, row) pair lies in a ``far_below`` case's last head: what
    underflows there, in words; "" otherwise."""
    if not _in_far_head(one, bad):
        return ""
    return far_below_words(f"Those are all in head {one.case.heads - 1} of that case",
                           ", and the final division is then 0/0")


def other_head_words(one: Checked, tolerance: float) -> str:
    """:func:`readout.other_head_words` on a checked case, against its own reference."""
    allowed, cap = one.bm.allowed(), one.case.softcap
    return reading.other_head_words(one.launch.out, one.expected, one.launch.q, one.launch.k, one.launch.v,
                                    lambda q, k, v: reference(q, k, v, allowed, cap), tolerance)


def mask_readout(module: ModuleType, one: Checked, device: str, generator: torch.Generator,
                 tolerance: float) -> tuple[Findings, str]:
    """The kernel's weights against the element mask, read through one-hot values with q = 0:
    every score is 0, and so is any modifier's of it (tanh(0) = 0), so a kernel that gets the
    modifier wrong still weighs each visible key 1/count and each hidden one 0.  How the
    K/V blocks share each row's weight (equal scores: each visible key the same share) comes
    second, in words, where the mask is measured right and the shares are not softmax's."""
    case, bm = one.case, one.bm
    shape = (case.batch, case.heads, case.seq, case.head_dim)
    q = torch.zeros(shape, dtype=torch.float16, device=device)
    k = torch.randn(shape, generator=generator).to(device, torch.float16)
    w, _ = reading.weights_through(lambda v: run(module, q, k, v, bm, case.softcap).out, shape,
                                   case.batch * case.heads, device)
    found = Findings()
    rows = (case.batch * case.heads, case.seq, case.head_dim)
    v = torch.randn(shape, generator=generator).to(device, torch.float16)
    gap = reading.read_out_gap(run(module, q, k, v, bm, case.softcap).out.reshape(rows), w, v.reshape(rows))
    if gap > reading.LINEAR_SLACK:  # one launch more: the read-out describes nothing, so no mask claim
        found.say("wrong-output", f" The largest error is at row {one.result.worst_row}{where(one)}."
                  + reading.not_weighted_sum_words(gap, where(one)) + other_head_words(one, tolerance))
        return found, ""
    allowed = bm.allowed().to(w.device)
    kinds = bm.kinds().to(w.device)
    seq = case.seq
    idx = torch.arange(seq, device=w.device)
    kind = kinds[idx // bm.block_m][:, idx // bm.block_n]
    s = softcapped(reading.scores(q, k), case.softcap).masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)
    given = w.nan_to_num(nan=0.0) > 0  # a NaN row is said by nan_rows
    for code, kind_id, words in (("partial-unmasked", 1, "masked keys of partial blocks"),
                                 ("unlisted-weighed", 0, "keys of blocks in neither list")):
        bad = given & ~allowed & (kind == kind_id)
        if bool(bad.any()):
            h, r, c = (int(x) for x in bad.nonzero()[0])
            n_rows = int(bad.any(dim=0).any(dim=-1).sum())
            found.say(code, f" {n_rows} row{' gives' if n_rows == 1 else 's give'} weight to {words}: row {r} weighs "
                      f"key {c} at {float(w[h, r, c]):.3g}, where the mask says it sees nothing{where(one)}.")
    for code, kind_id, words in (("full-keys-missed", 2, "full"), ("partial-keys-missed", 1, "partial")):
        bad = (w == 0) & allowed & (kind == kind_id) & (p > MISSING_P)
        shapes = missing_shapes(w, allowed) & bad.any(dim=-1)[..., None]  # (heads, rows, shape)
        # a row whose weight moved to other keys rules out keys merely left out: moved first, then lost
        for i, (how, how_code) in enumerate((("moved", "weight-moved"), ("lost", "values-lost"), ("dropped", code))):
            like = shapes[..., i].nonzero()
            if len(like) and how_code not in found:
                h, r = (int(x) for x in like[0])
                c = int(bad[h, r].nonzero()[0])
                said = (f" {int(bad.sum())} visible (head, row, key) pairs of {words} blocks get no weight: row {r}"
                        f" gives key {c} exactly 0, the reference {float(p[h, r, c]):.3g}{where(one)}.")
                found.say(how_code, said if how == "dropped" else said + shares_words(w[h, r], allowed[r], bm.block_n))
            if len(like):
                break  # one shape a kind of block
    misread = mask_misread(given, kind, bm.mask, bm.block_m, bm.block_n) \
        if "partial-unmasked" in found or "partial-keys-missed" in found else ""
    if misread:  # said under the first of the two codes, the other dropped: one mistake
        first = next(code for code in found if code in ("partial-unmasked", "partial-keys-missed"))
        found[first] += misread
        for code in ("partial-unmasked", "partial-keys-missed"):
            if code != first:
                found.pop(code, None)
    shifted = index_as_position_words(w, bm, p) if found else ""
    if shifted:  # said with the first code: the weights of every row, every block
        first = next(iter(found))
        found[first] += shifted
    if "weight-moved" in found:  # the read-out's columns are rows of V, not the keys scored: no mask claim
        for code in ("partial-unmasked", "unlisted-weighed"):
            found.pop(code, None)
    if found:
        return found, ""
    past = past_end_words(w, allowed, kinds, bm, seq, case.softcap)
    if past:
        found.say("past-end-unmasked", past + where(one) + ".")
        return found, ""
    said = block_shares_words(w, torch.zeros_like(w), allowed, bm.block_n,  # q = 0: every score is 0
                              lambda r: f"row {r % seq} of head {r // seq}", "K/V block", why=EQUAL_SCORES_WHY)
    return found, f" Read out with every score 0 (q = 0){where(one)}:{said}" if said else ""


def mask_misread(given: torch.Tensor, kind: torch.Tensor, mask: torch.Tensor, block_m: int, block_n: int) -> str:
    """Read with every score 0: within every partial block, are the keys that get weight, in
    every row of every head, exactly those of the element mask read another way (its test
    inverted, transposed, at the rows of query block 0, at the keys of key block 0), and not
    as it is?  That reading in words; "".  ``given``: (heads, seq, seq) bool; ``kind``: (seq,
    seq), 1 for a partial block's keys; ``mask``: the element mask (seq, seq)."""
    part = (kind == 1).expand_as(given)
    if not bool(part.any()) or not bool(given[part].any()):
        return ""
    seen = (mask != 0).to(given.device)
    seq = seen.shape[-1]
    idx = torch.arange(seq, device=given.device)
    readings = (
        (~seen, "the ones the element mask hides, and the ones it shows get none: the element mask's test is the"
                " wrong way round"),
        (seen.T, "those the element mask gives at [key, row], mask[c, r]: the mask is read transposed (its row and"
                 " column offsets exchanged)"),
        (seen[idx % block_m], f"those the element mask gives at row r % {block_m} (your BLOCK_M): every query block"
                              " reads query block 0's rows of the mask - its row offsets are the tile's"
                              " (tl.arange(0, BLOCK_M)), not the rows' positions"),
        (seen[:, idx % block_n], f"those the element mask gives at key c % {block_n} (your BLOCK_N): every key block"
                                 " reads key block 0's columns of the mask - its key offsets are the tile's"
                                 " (tl.arange(0, BLOCK_N)), not the keys' positions"),
    )
    for other, words in readings:
        other = other.expand_as(given)
        if bool((other[part] != seen.expand_as(given)[part]).any()) and bool((given[part] == other[part]).all()):
            return f" Within every partial block, in every row, the keys that get weight are exactly {words}."
    return ""


SAME_WEIGHTS = 1e-3  # a predicted weight pattern matched within fp16's rounding of a share


def index_as_position_words(w: torch.Tensor, bm: BlockMask, right: torch.Tensor) -> str:
    """Read with every score 0, each row weighs the keys it adds equally, so its weights are
    its added keys' counts over their sum.  Where those of every row match a kernel that
    reads a listed block j as the keys j..j+BLOCK_N-1 (the index used as the first key,
    not multiplied by BLOCK_N; the element mask read at those keys for a partial block) and
    not the ``right`` ones (softmax's with every score 0), that in words; "" otherwise."""
    seq = w.shape[-1]
    counts = torch.zeros(seq, seq, dtype=torch.float64)
    mask = (bm.mask != 0).cpu()
    lists = ((bm.full_kv_num_blocks, bm.full_kv_indices, False), (bm.kv_num_blocks, bm.kv_indices, True))
    for i in range(bm.kv_indices.shape[0]):
        rows = slice(i * bm.block_m, min((i + 1) * bm.block_m, seq))
        for num, indices, partial in lists:
            for j in indices[i, : int(num[i])].tolist():
                keys = slice(j, min(j + bm.block_n, seq))
                counts[rows, keys] += mask[rows, keys].double() if partial else 1.0
    total = counts.sum(dim=-1, keepdim=True)
    predicted = torch.where(total > 0, counts / total.clamp_min(1.0), torch.zeros_like(counts))
    measured = w.to(torch.float64).cpu()
    if not bool(torch.isfinite(measured).all()) or float((predicted - right.cpu()).abs().max()) <= SAME_WEIGHTS:
        return ""
    if float((measured - predicted).abs().max()) > SAME_WEIGHTS:
        return ""
    return (f" Every row's weights (read with every score 0) are exactly those of a kernel that reads listed block j"
            f" as keys j..j+{bm.block_n - 1}: {INDEX_AS_POSITION} ({bm.block_n}).")


INDEX_AS_POSITION = "the index entry used as the block's first key, not multiplied by BLOCK_N"


UNREAD = "unread"  # modifier_readout's key for the kinds of block its probes could not read
ORDERED = "ordered"  # its key for the words of weights that move with the order keys are read in
SAME_SHARE = 0.03  # visible keys weighed within 3 % of each other: the same share (every score 0)


def missing_shapes(w: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """How each row shares its weight, read with every score 0 (softmax gives each of a row's
    n visible keys 1/n), as (heads, rows, 3) booleans, one row at most true of: "moved"
    (unequal shares among the keys that get weight: the missing weight sits on other keys),
    "lost" (each gets exactly 1/n, adding up to less than 1: the row's sum counted keys whose
    values never reached the output), "dropped" (equal shares adding up to 1: keys left out
    of the softmax).  A row with no weight anywhere is none of them (other read-outs say it)."""
    got = seen & (w > 0)
    count = got.sum(dim=-1)
    total = w.sum(dim=-1)
    top = torch.where(got, w, torch.zeros_like(w)).amax(dim=-1)
    low = torch.where(got, w, torch.full_like(w, float("inf"))).amin(dim=-1)
    mean = torch.where(got, w, torch.zeros_like(w)).sum(dim=-1) / count.clamp_min(1)
    weighed = (count > 0) & (total >= 0.02)
    equal = top <= low * (1 + SAME_SHARE)
    dropped = weighed & equal & ((total - 1).abs() < 0.02)
    lost = weighed & equal & ~dropped & ((mean * seen.sum(dim=-1) - 1).abs() < SAME_SHARE)
    return torch.stack([weighed & ~dropped & ~lost, lost, dropped], dim=-1)


def shares_words(w: torch.Tensor, seen: torch.Tensor, block_n: int) -> str:
    """The row's weights against the 1/n equal scores give each visible key, in words; and,
    where they are whole multiples of one share, a K/V block at a time, how many times each
    block's rows of V were added (:func:`block_multiplicities`)."""
    n = int(seen.sum())
    got = w[seen & (w > 0)]
    top = int(torch.where(seen, w, torch.zeros_like(w)).argmax())
    return (f" With every score 0 each of its {n} visible keys weighs 1/{n} = {1 / n:.3g}: the keys that get weight"
            f" get {float(got.min()):.3g} to {float(got.max()):.3g} (key {top} the most: {float(w[top]) * n:.2g} times"
            f" 1/{n}); together the row's weights come to {float(w.sum()):.3g}."
            + multiplicity_words(block_multiplicities(w, seen, block_n)))


WHOLE = 0.05  # a share within 5 % of a whole multiple of the smallest: that many additions


def block_multiplicities(w: torch.Tensor, seen: torch.Tensor, block_n: int) -> dict[int, int] | None:
    """Read with every score 0, each addition of a key's row of V weighs the same, so the
    weight on each key is (times its row was added) x one share, the smallest weight taken as
    one share.  Where every key of a K/V
    block that holds visible keys weighs one whole multiple of the smallest weight any key
    gets, {block: times added} (0 for a block of visible keys none of whose rows was added);
    None where the weights are no such multiples (they are no count of additions)."""
    got = w > 0
    if not bool(got.any()):
        return None
    unit = float(w[got].min())
    counts: dict[int, int] = {}
    for j in range(-(-w.shape[-1] // block_n)):
        keys = slice(j * block_n, (j + 1) * block_n)
        if not bool(seen[keys].any()) and not bool(got[keys].any()):
            continue
        ratios = (w[keys][got[keys]] / unit).tolist()
        times = round(ratios[0]) if ratios else 0
        uneven = any(abs(x - times) > WHOLE * max(times, 1) for x in ratios)
        if uneven or (ratios and bool((~got[keys] & seen[keys]).any())):
            return None  # shares within a block differ, or part of a block's visible keys got nothing
        counts[j] = times
    return counts


def multiplicity_words(counts: dict[int, int] | None) -> str:
    """Blocks whose rows of V were added other than once, in words ("" where none was, or
    where the weights are no count of additions)."""
    if counts is None or all(times == 1 for times in counts.values()):
        return ""
    by_times: dict[int, list[int]] = {}
    for j, times in counts.items():
        by_times.setdefault(times, []).append(j)

    def said(times: int, blocks: list[int]) -> str:
        how = "never" if times == 0 else "once" if times == 1 else "twice" if times == 2 else f"{times} times"
        return f"K/V block{'s' if len(blocks) > 1 else ''} {index_runs(blocks)}: {how}"

    parts = "; ".join(said(times, blocks) for times, blocks in sorted(by_times.items(), reverse=True))
    return (f" Those shares are whole multiples of one share, block by block, so they count how many times each"
            f" K/V block's rows of V were added for this row (the least-added block counted as once): {parts}."
            f" A block added more than once is one the loop"
            f" reached again (an index entry read at the wrong place or past its count names a block already"
            f" added), or one whose values were added in place of another's.")


def probe_columns(seq: int, head_dim: int) -> torch.Tensor:
    """The value column of key r >= 1 in the modifier probe: 1 + (r - 1) mod (head_dim - 1)."""
    return 1 + (torch.arange(1, seq) - 1) % (head_dim - 1)


def modifier_probe(seq: int, head_dim: int, block_m: int, block_n: int, device: str, caps: float = 3.0,
                   reach: float | None = PROBE_SOFTCAP, descending: bool = False, swap: bool = False
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, BlockMask, torch.Tensor, torch.Tensor]:
    """Tutor-chosen scores: row r >= 1 sees key 0 (score p_r, value e_0) and key r (score
    s_r, value e_(probe column of r)); s_r spans -``caps``..``caps`` softcaps.  The pivot
    p_r is 0 where |s_r| <= ``reach`` and on every other row, and s_r - ``reach`` toward 0
    on the rows between beyond it, so that the two
    keys' effective scores stay within a readable ratio of each other whatever the
    transform (no cap: e^reach; a cap far above softcap: less) while the read reaches
    scores far past the cap; ``reach=None``: every pivot 0.  ``descending``: the scores fall
    with the row instead of rising (what a row's position does is then told from what its
    score does).  ``swap``: key 0 takes the score s_r and key r the pivot p_r (each keeps its
    value column), so the key the loop reads first holds the other score.  q, k, v, the block
    mask, s and p (float64, from the fp16 q the kernel gets)."""
    rows = torch.arange(seq)
    target = torch.linspace(-caps * PROBE_SOFTCAP, caps * PROBE_SOFTCAP, max(seq - 1, 1), dtype=torch.float64)
    if descending:
        target = target.flip(0)
    pivot = torch.zeros_like(target)
    if reach is not None:  # every other row: the rows between keep pivot 0 (the transform's own level)
        odd = torch.arange(len(target)) % 2 == 1
        pivot = torch.where((target.abs() > reach) & odd, target - reach * target.sign(), pivot)
    q = torch.zeros(1, 1, seq, head_dim)
    q[0, 0, 1:, 0] = (target[: seq - 1] * head_dim**0.5).float()
    q[0, 0, 1:, 1] = (pivot[: seq - 1] * head_dim**0.5).float()
    q = q.to(torch.float16)
    k = torch.zeros(1, 1, seq, head_dim, dtype=torch.float16)
    k[0, 0, 1:, 1 if swap else 0] = 1.0  # key r's score: component 0 of q (s_r), or 1 (p_r) swapped
    k[0, 0, 0, 0 if swap else 1] = 1.0
    v = torch.zeros(1, 1, seq, head_dim, dtype=torch.float16)
    v[0, 0, 0, 0] = 1.0
    v[0, 0, rows[1:], probe_columns(seq, head_dim)] = 1.0
    mask = (rows[None, :] == 0) | (rows[None, :] == rows[:, None])
    s = q[0, 0, :, 0].to(torch.float64) * head_dim**-0.5
    p = q[0, 0, :, 1].to(torch.float64) * head_dim**-0.5
    bm = build_block_mask(mask, block_m, block_n, device)
    return q.to(device), k.to(device), v.to(device), bm, s, p


def full_block_probe(seq: int, head_dim: int, block_m: int, block_n: int, device: str
                     ) -> tuple[torch.Tensor, torch.Tensor, BlockMask, torch.Tensor]:
    """Tutor-chosen scores on full blocks only: every key visible to every row (each block
    listed full, no partial one, so no element mask applies), row r's score on key c
    a_r·x_c with x_c from -1 to 1 (x = 0 at key seq // 2) and a_r from 0 to 3 softcaps,
    so each row spans its own range of scores.  q, k, the block mask and s (rows, keys)
    float64, from the fp16 q and k the kernel gets."""
    c0 = seq // 2
    x = (torch.arange(seq, dtype=torch.float64) - c0) / max(c0, 1)
    a = torch.linspace(0.0, 3 * PROBE_SOFTCAP, seq, dtype=torch.float64)
    q = torch.zeros(1, 1, seq, head_dim)
    q[0, 0, :, 0] = (a * head_dim**0.5).float()
    k = torch.zeros(1, 1, seq, head_dim)
    k[0, 0, :, 0] = x.float()
    q, k = q.to(torch.float16), k.to(torch.float16)
    s = q[0, 0, :, 0].to(torch.float64)[:, None] * k[0, 0, :, 0].to(torch.float64)[None, :] * head_dim**-0.5
    bm = build_block_mask(torch.ones(seq, seq, dtype=torch.bool), block_m, block_n, device)
    return q.to(device), k.to(device), bm, s


Effective = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""(s, p, f): at each measured pair of scores s and pivot p, the kernel's effective score at s
less its effective score at p (natural-log units: ln of the two weights' ratio)."""


def partial_effective_scores(module: ModuleType, seq: int, dim: int, device: str) -> Effective | str | None:
    """The effective scores on partial blocks (:func:`modifier_probe`'s two-key rows):
    (s, p, ln(w_r / w_0)) where both weights are measurable; words where key 0, scored 0,
    gets no weight in nearly every row that pivots on 0, even beside the lowest scores
    (the transform at 0 is measurably below all of them); None where the rows are no
    clean two-key softmax (the mask read-outs speak for that kernel)."""
    s, pivot, w1, w0, clean = _two_key_weights(module, seq, dim, device)
    at_zero = pivot == 0
    dead = clean & (w0 < 1e-4) & at_zero
    if int(dead.sum()) >= 0.8 * int(at_zero.sum()) and float(s[dead].min()) <= -0.9 * PROBE_SOFTCAP:
        return (f" On tutor-chosen two-key rows of partial blocks (softcap = {PROBE_SOFTCAP:g}; key 0 scored 0, the"
                f" other key from {float(s[at_zero].min()):.1f} to {float(s[at_zero].max()):.1f}), key 0 gets no"
                f" weight in {int(dead.sum())} of {int(at_zero.sum())} rows, even beside s ="
                f" {float(s[dead].min()):.1f}: the kernel's"
                " effective score at s = 0 lies below all of them, where softcap·tanh(0) = 0 lies above every"
                " negative score's")
    usable = clean & (w0 > 2e-3) & (w1 > 2e-3)
    if int(clean.sum()) < len(s) // 2 or int(usable.sum()) < 4:
        return None
    return s[usable], pivot[usable], torch.log(w1[usable] / w0[usable])


def _two_key_weights(module: ModuleType, seq: int, dim: int, device: str, swap: bool = False
                     ) -> tuple[torch.Tensor, ...]:
    """:func:`modifier_probe`'s two-key rows run: s, p, the weight on the key scored s, the weight on
    the key scored p, and which rows are a clean two-key softmax (finite, the two summing to 1, no
    weight elsewhere)."""
    q, k, v, bm, s, pivot = modifier_probe(seq, dim, int(module.BLOCK_M), int(module.BLOCK_N), device, swap=swap)
    out = run(module, q, k, v, bm, PROBE_SOFTCAP).out[0, 0, 1:].to(torch.float64).cpu()
    cols = probe_columns(seq, dim)
    picked = torch.nn.functional.one_hot(cols, dim).bool()
    w0, w1 = out[:, 0], out[picked]  # key 0's weight, key r's
    rest = out.masked_fill(picked, 0.0)[:, 1:].abs().amax(dim=-1)
    clean = torch.isfinite(out).all(dim=-1) & ((w0 + w1 - 1).abs() < 0.01) & (rest < 1e-3)
    return (s[1:], pivot[1:], *((w0, w1) if swap else (w1, w0)), clean)


def order_gap(module: ModuleType, seq: int, dim: int, device: str) -> float | None:
    """How far the two-key rows' effective scores move when the two keys trade scores (key 0,
    read first, scored s instead of p): the largest change of ln(w_s / w_p) over the rows
    measurable both ways, None where fewer than four are.  A score transform is the same either
    way; a rescale between the blocks that is wrong (alpha, or the maximum p is taken against)
    weighs a key by when the loop read it (blind round 27, 09 b34 and b39: said to be a wrong
    transform until then)."""
    ways = [_two_key_weights(module, seq, dim, device, swap) for swap in (False, True)]
    usable = ways[0][4] & ways[1][4]
    for _, _, ws, wp, _ in ways:
        usable &= (ws > 2e-3) & (wp > 2e-3)
    if int(usable.sum()) < 4:
        return None
    f = [torch.log(ws[usable] / wp[usable]) for _, _, ws, wp, _ in ways]
    return float((f[0] - f[1]).abs().max())


def full_effective_scores(module: ModuleType, seq: int, dim: int, device: str) -> Effective | None:
    """The effective scores on full blocks (:func:`full_block_probe`), read through one-hot
    values: (s, p, ln(w_c / w_top)) over the (row, key) pairs whose weights are measurable,
    each against its row's most weighed key (score p), so that the rows scored far past the
    cap are read where their weight is; None where the rows are no clean softmax over all keys."""
    q, k, bm, s = full_block_probe(seq, dim, int(module.BLOCK_M), int(module.BLOCK_N), device)
    shape = (1, 1, seq, dim)
    w, _ = reading.weights_through(lambda v: run(module, q, k, v, bm, PROBE_SOFTCAP).out, shape, 1, device)
    w = w[0].to(torch.float64).cpu()
    clean = torch.isfinite(w).all(dim=-1) & ((w.sum(dim=-1) - 1).abs() < 0.01)
    if int(clean.sum()) < seq // 2:
        return None
    top = w.argmax(dim=-1, keepdim=True)
    usable = clean[:, None] & (w > 1e-3)
    usable.scatter_(1, top, False)
    if int(usable.sum()) < 4:
        return None
    pivot = s.gather(1, top).expand_as(s)
    return s[usable], pivot[usable], torch.log(w[usable] / w.gather(1, top).expand_as(w)[usable])


def _transform(s: torch.Tensor, p: torch.Tensor, f: torch.Tensor) -> tuple[str | None, dict[str, float]]:
    """Which of :data:`TRANSFORMS` the effective scores ``f`` at scores ``s`` (against pivots
    ``p``) follow to FIT ("" the right one; None none), and each one's largest gap."""
    errors = {code: float((f - (fn(s, PROBE_SOFTCAP) - fn(p, PROBE_SOFTCAP))).abs().max())
              for code, (_, fn) in TRANSFORMS.items()}
    best = min(errors, key=lambda c: errors[c])
    return (best if errors[best] <= FIT else None), errors


def modifier_readout(module: ModuleType, one: Checked, device: str) -> Findings:
    """The effective score transform, measured on partial blocks (ln(w_r / w_0) on two-key
    rows) and on full blocks (every key visible), against the transforms of
    :data:`TRANSFORMS`: a kernel that caps the scores in one loop and not the other is
    told which.  A kind of block whose probe could not be read is named under the key
    ``unread`` (not a code: :func:`diagnose` takes it out), so that nothing claims it matched."""
    found = Findings()
    seq, dim = max(one.case.seq, 16), one.case.head_dim
    at = f" (read at seq={seq}, head_dim={dim}, one head)"
    partial = partial_effective_scores(module, seq, dim, device)
    if isinstance(partial, str):
        found.say("modifier-wrong", partial + at + ".")
        return found
    measured = {"partial": partial, "full": full_effective_scores(module, seq, dim, device)}
    judged = {kind: _transform(*m) for kind, m in measured.items() if m is not None}
    if not judged or all(code == "" for code, _ in judged.values()):
        unread = [kind for kind, m in measured.items() if m is None]
        if unread:
            found[UNREAD] = " and ".join(unread)
        return found
    wrong = [kind for kind, (code, _) in judged.items() if code != ""]
    gap = order_gap(module, seq, dim, device)
    if gap is not None and gap > FIT:  # the weights follow the order keys are read in: no transform is read
        found[UNREAD] = " and ".join(measured)
        found[ORDERED] = (f"on the two-key rows of partial blocks, the effective score of the key scored s against"
                          f" the key scored p moves by up to {gap:.2f} when the two keys trade scores (the key the"
                          " loop reads first scored s instead of p): a score transform weighs a key by its score"
                          " alone, so the weights depend on the order the loop reads the keys in - the rescale"
                          " between blocks (alpha = exp2(old max - new max), and the maximum each p is taken"
                          " against), not the modifier")
        return found
    right = [kind for kind, (code, _) in judged.items() if code == ""]
    codes = {judged[kind][0] for kind in wrong}
    together = len(wrong) == 2 and len(codes) == 1
    for kind in (["partial"] if together else wrong):
        code, errors = judged[kind]
        s, p, f = measured[kind]  # type: ignore[misc]
        top = int(s.abs().argmax())
        capped = softcapped(s[top:top + 1], PROBE_SOFTCAP)[0] - softcapped(p[top:top + 1], PROBE_SOFTCAP)[0]
        blocks = ("partial and full blocks alike" if together else
                  f"{kind} blocks" + ("" if not right else f" (on {right[0]} blocks the transform is"
                                      " softcap·tanh(s/softcap), right: the loop over those applies it)"))
        said = (f" Measured on chosen scores with softcap = {PROBE_SOFTCAP:g}, on {blocks}: the kernel's effective"
                f" score at s = {float(s[top]):.2f} is {_apart(float(f[top]))} its effective score at s ="
                f" {float(p[top]):.2f}, softcap·tanh(s/softcap)'s {_apart(float(capped))} its own (over {len(s)}"
                f" scores from {float(s.min()):.1f} to {float(s.max()):.1f}, the largest gap is {errors['']:.2f})")
        if code:
            found.say(code, f"{said}; the measured transform matches {TRANSFORMS[code][0]} to {errors[code]:.3f}{at}.")
        else:
            found.say("modifier-wrong", f"{said}; it matches none of: "
                      + ", ".join(f"{words} (gap {errors[c]:.2f})" for c, (words, _) in TRANSFORMS.items() if c)
                      + f"{at}.{fitted_factors(s, p, f, PROBE_SOFTCAP, dim)}")
    return found


def _apart(d: float) -> str:
    """"0.16 below" / "4.22 above" / "level with"."""
    return "level with" if abs(d) < 0.005 else f"{abs(d):.2f} {'above' if d > 0 else 'below'}"


def named_factors(head_dim: int) -> dict[str, float]:
    """The constants a factor in a kernel's score line usually is: 1, ln 2, log2(e), the
    softmax scale 1/sqrt(head_dim), its inverse and their products."""
    scale = head_dim**-0.5
    return {"1": 1.0, "ln 2": LN2, "log2(e)": LOG2E, f"sm_scale = 1/sqrt({head_dim})": scale,
            f"1/sm_scale = sqrt({head_dim})": 1 / scale, "sm_scale·log2(e)": scale * LOG2E,
            "sm_scale·ln 2": scale * LN2, "log2(e)/sm_scale": LOG2E / scale, "sm_scale²": scale * scale}


def scaled_cap_gap(s: torch.Tensor, p: torch.Tensor, f: torch.Tensor, cap: float, a: float, b: float) -> float:
    """max |f - (g(s) - g(p))| for g = a·cap·tanh(b·x/cap)."""
    return float((a * cap * (torch.tanh(b * s / cap) - torch.tanh(b * p / cap)) - f).abs().max())


def fit_scaled_cap(s: torch.Tensor, p: torch.Tensor, f: torch.Tensor,
                   cap: float) -> tuple[float, float, float, tuple[float, float]]:
    """The factors (a, b, gap) of the closest g = a·cap·tanh(b·x/cap) to the measured effective
    scores ``f`` = g(s) - g(p): least squares for a at each b > 0, b on a log grid refined
    once; gap is the largest |f - fit|.  Last, the smallest and largest b of the grid whose
    own best a fits within FIT: where the tanh is saturated at nearly every chosen score,
    every b past some value fits, and b is measured only as at least that."""
    def at(bs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = cap * (torch.tanh(bs[:, None] * s[None, :] / cap) - torch.tanh(bs[:, None] * p[None, :] / cap))
        a = (t * f).sum(-1) / (t * t).sum(-1).clamp_min(1e-300)
        return a, (a[:, None] * t - f).abs().amax(-1)

    grid = torch.logspace(-3, 3, 1201, dtype=torch.float64)
    _, gap = at(grid)
    fitting = grid[gap <= FIT]
    span = (float(fitting.min()), float(fitting.max())) if len(fitting) else (math.nan, math.nan)
    i = int(gap.argmin())
    fine = torch.linspace(float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)]), 401, dtype=torch.float64)
    a, gap = at(fine)
    j = int(gap.argmin())
    return float(a[j]), float(fine[j]), float(gap[j]), span


def fitted_factors(s: torch.Tensor, p: torch.Tensor, f: torch.Tensor, cap: float, head_dim: int) -> str:
    """A sentence: the measured transform as a straight line k·s where one of
    :func:`named_factors` (signed) fits to FIT; else as a·softcap·tanh(b·s/softcap), a and b
    named where a pair of them fits, as numbers where only the free fit does; else nothing."""
    names = named_factors(head_dim)
    meaning = (" a multiplies the capped score after the tanh; b scales the score the tanh sees (b = 1 is "
               "s = q·k·sm_scale).")
    lines = [(float((sign * v * (s - p) - f).abs().max()), f"{'-' if sign < 0 else ''}{n}")
             for n, v in names.items() for sign in (1.0, -1.0)]
    gap, k_name = min(lines)
    if gap <= FIT:
        return (f" It is a straight line, ({k_name})·s, to {gap:.3f} over s = {float(s.min()):.0f}.."
                f"{float(s.max()):.0f}: no cap bends the scores.")
    clamp = float((s.clamp(-cap, cap) - p.clamp(-cap, cap) - f).abs().max())
    if clamp <= FIT:  # blind round 9, w04
        return (f" It is min(max(s, -softcap), softcap), to {clamp:.3f}: a hard clamp, which leaves every score"
                " inside ±softcap as it is, where softcap·tanh(s/softcap) bends them smoothly toward ±softcap.")
    # the tanh's argument clamped to [-1, 1] first ("to avoid overflow", blind round 12, w38): flat past |s| = softcap
    clamped = float((cap * (torch.tanh((s / cap).clamp(-1.0, 1.0)) - torch.tanh((p / cap).clamp(-1.0, 1.0)))
                     - f).abs().max())
    if clamped <= FIT:
        return (f" It is softcap·tanh(min(max(s/softcap, -1), 1)), to {clamped:.3f}: the tanh's argument is clamped"
                f" to [-1, 1] first, so every score past ±softcap gets ±{cap * math.tanh(1.0):.3g} (softcap·tanh(1)),"
                " where softcap·tanh(s/softcap) keeps rising toward ±softcap. Written as 1 - 2 / (exp(2x) + 1),"
                " tanh needs no clamp: exp(2x) = inf gives 1, exp(2x) = 0 gives -1.")
    named = [(scaled_cap_gap(s, p, f, cap, sign * va, vb), f"{'-' if sign < 0 else ''}{na}", nb)
             for na, va in names.items() for sign in (1.0, -1.0) for nb, vb in names.items()]
    gap, a_name, b_name = min(named)
    if gap <= FIT:
        a, b = (names[a_name.lstrip("-")] * (-1 if a_name.startswith("-") else 1), names[b_name])
        return (f" It is a·softcap·tanh(b·s/softcap) with a = {a_name} and b = {b_name}, to {gap:.3f}:{meaning}"
                + _other_cap(a, b, cap))
    a, b, gap, (b_lo, b_hi) = fit_scaled_cap(s, p, f, cap)
    if gap <= FIT:
        if b_hi >= B_GRID_TOP and b_lo < b_hi / 1.1:  # every b from b_lo up fits: the tanh saturates
            return (f" It fits a·softcap·tanh(b·s/softcap) with a = {a:.3g} and any b of {b_lo:.3g} or more, to"
                    f" {gap:.3f}: the tanh is saturated at nearly every chosen score, so b is measured only as at"
                    f" least {b_lo:.3g}.{meaning}" + _cap_is_the_scale(a, cap, head_dim))
        return (f" It fits a·softcap·tanh(b·s/softcap) with a = {a:.3g} and b = {b:.3g}, to {gap:.3f}:{meaning}"
                + _other_cap(a, b, cap) + _cap_is_the_scale(a, cap, head_dim))
    return ""


def _cap_is_the_scale(a: float, cap: float, head_dim: int) -> str:
    """Where the fitted cap a·softcap is sm_scale (to 1 %): the two arguments trade places on the
    way in (blind round 23, 09: the fit was exact, the link not made); "" otherwise."""
    scale = head_dim**-0.5
    if abs(a * cap / scale - 1) > 0.01:
        return ""
    return (f" The cap itself, a·softcap = {a * cap:.3g}, is sm_scale (1/sqrt({head_dim})): the kernel caps at the"
            " scale, as it does when sm_scale and softcap reach it the other way round (look at the order of the"
            " arguments where they are passed).")


def _other_cap(a: float, b: float, cap: float) -> str:
    """Where a·b = 1 the fit is C·tanh(s/C), a cap at C = a·softcap: said when C is not softcap."""
    if abs(a * b - 1) > 0.03 or abs(a - 1) < 0.03:
        return ""
    return (f" With a·b = 1 that is C·tanh(s/C), C = a·softcap = {a * cap:.3g}: the scores are capped at"
            f" {a * cap:.3g}, not at the softcap argument ({cap:g}).")


def full_blocks_probe(module: ModuleType, checked: list[Checked]) -> Findings:
    """Re-run the first case that has full blocks with the element mask zeroed inside them
    (the lists unchanged): an output that moves means the kernel reads the mask on full blocks."""
    found = Findings()
    for one in checked:
        kinds = one.bm.kinds()
        if not bool((kinds == 2).any()) or one.result.unwritten:
            continue
        bm = one.bm
        seq = one.case.seq
        idx = torch.arange(seq)
        full = (kinds[idx // bm.block_m][:, idx // bm.block_n] == 2).to(bm.mask.device)
        zeroed = BlockMask(bm.mask.masked_fill(full, 0), bm.full_kv_num_blocks, bm.full_kv_indices,
                           bm.kv_num_blocks, bm.kv_indices, bm.block_m, bm.block_n)
        again = run(module, one.launch.q, one.launch.k, one.launch.v, zeroed, one.case.softcap).out
        a, b = again.to(torch.float32), one.launch.out.to(torch.float32)
        moved = ((a - b).abs() > CHANGED) | (torch.isfinite(a) != torch.isfinite(b))
        if bool(moved.any()):
            rows = int(moved.any(dim=-1).sum())
            found.say("full-blocks-masked", f" With the element mask zeroed inside the {int((kinds == 2).sum())} full "
                      f"blocks (the lists unchanged), {rows} (head, row) outputs moved by up to "
                      f"{float((a - b).nan_to_num(nan=float('inf')).abs().max()):.3g}{where(one)}: the kernel loads "
                      "and applies the element mask on blocks every key of which is visible.")
        break
    return found
