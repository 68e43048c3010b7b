"""Drill 05: how the student's split kernel lays out its slice states, and which positions
each slice holds, measured by running the split kernel alone on inputs the tutor chooses.

The launcher contract says nothing about the states between the two kernels: a student
may store them slice-major, pack m_s and l_s in one tensor, keep a log-sum-exp, normalise
o_s, slice the cache in strided blocks or in slices that are not whole blocks.  Guessing
the solution's layout would judge such a kernel on numbers it never meant, so the tutor
asks the kernel itself: the recorded split launch is re-run (same grid, same int and
constexpr arguments, tensors of the same shapes and 16-byte alignment: the variant the
correctness launch compiled) with

* every key zero, so every score is 0 and each slice's state is plain counting: a maximum
  of 0, l_s = the number of positions it holds (lse_s its logarithm), and o_s / l_s the
  mean of its values;
* values that name themselves: v[.., 0] = the position, v[.., 1] = the row (sequence*head),
  v[.., 2] = 1, the rest 0;
* the state tensors filled with a marker, so a slot the kernel never writes is seen.

Row r's vector state then reads r in component 1 (over component 2) in exactly one of the
candidate layouts; its component 0 is the mean position, and with the count that gives each
slice's range.  A kernel whose split is wrong only in how it weights scores (a scale, a
rescale, the exp base) counts right here: all scores are equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from tutor.harness.problems import split_kv_readout as apart

MARKER = 2.0**99  # exact in fp32; written into the state tensors before the probe: still there = never written
TOL = 1e-3


@dataclass
class Measured:
    """What the split kernel alone wrote for the tutor's inputs, per (row, slot)."""

    layouts: dict[int, apart.Layout]  # merge arg position -> the layout that reads it
    nonempty: torch.Tensor  # (rows, slots) bool: the slot holds positions
    unwritten: torch.Tensor  # (rows, slots) bool: the split never wrote the slot's vector state
    counts: torch.Tensor | None  # (rows, slots) positions each slot holds (None: no field says)
    owner: torch.Tensor | None  # (rows, max_len) the slot holding each position, -1: none; None: not contiguous
    words: str  # what the probe measured that is worth saying (coverage, unwritten slots)


def _row_names(vec: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(nonempty, rid) of one canonical vector layout (rows, slots, components): the slots
    written with finite values and weight, and the row each names (component 1 over
    component 2, the values naming their row); rid is meaningless where not nonempty."""
    w = vec[..., 2]
    nonempty = ~(vec == MARKER).all(-1) & torch.isfinite(vec).all(-1) & (w.abs() > 1e-6)
    return nonempty, vec[..., 1] / torch.where(nonempty, w, torch.ones_like(w))


def _row_matches(vec: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(nonempty, does every non-empty slot name its own row)."""
    nonempty, rid = _row_names(vec)
    if not bool(nonempty.any()):
        return nonempty, False
    rows = torch.arange(vec.shape[0], dtype=vec.dtype)[:, None].expand_as(rid)
    return nonempty, bool(((rid - rows).abs() <= TOL)[nonempty].all())


def _count_readings(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The ways a scalar field may hold a count: itself, or 2^x / e^x of a log-sum-exp."""
    return x, torch.exp2(x.clamp(max=60)), torch.exp(x.clamp(max=40))


def _count_of(x: torch.Tensor, nonempty: torch.Tensor) -> torch.Tensor | None:
    """The counts a scalar field holds at the non-empty slots: l_s itself, or 2^x / e^x of a
    log-sum-exp (all scores 0); None when it holds no count."""
    vals = x[nonempty]
    if not bool(torch.isfinite(vals).all()):
        return None
    for count in _count_readings(x):
        c = count[nonempty]
        if bool((c >= 1 - TOL).all()) and bool(((c - c.round()).abs() <= 1e-2).all()) and bool((c > 1.5).any()):
            return count.round()
    return None


def _scalar_fits(canon: torch.Tensor, nonempty: torch.Tensor) -> bool:
    """Every field is a maximum (0 at every non-empty slot: all scores are 0) or a count."""
    return all(bool((canon[f][nonempty].abs() <= TOL).all()) or _count_of(canon[f], nonempty) is not None
               for f in range(canon.shape[0]))


def _counts_agree(canon: torch.Tensor, nonempty: torch.Tensor, counts: torch.Tensor) -> bool:
    """Does some field hold exactly ``counts`` at every non-empty slot?"""
    for f in range(canon.shape[0]):
        mine = _count_of(canon[f], nonempty)
        if mine is not None and bool((mine[nonempty] == counts[nonempty]).all()):
            return True
    return False


def _position_of(call: apart.KernelCall, t: torch.Tensor) -> int | None:
    """Where the launch passed tensor ``t`` (the same storage), or None."""
    return next((i for i, a in enumerate(call.args) if isinstance(a, torch.Tensor) and apart._ptr(a) == apart._ptr(t)),
                None)


def _naming(shape: torch.Size) -> torch.Tensor:
    """Values that name themselves, float64 (rows, positions, head_dim): component 0 the position,
    1 the row (sequence*head), 2 one, the rest 0."""
    b, h, n, d = shape
    vv = torch.zeros(b * h, n, d, dtype=torch.float64)
    vv[:, :, 0] = torch.arange(n, dtype=torch.float64)[None, :]
    vv[:, :, 1] = torch.arange(b * h, dtype=torch.float64)[:, None]
    vv[:, :, 2] = 1.0
    return vv


def _state_positions(roles: apart.Roles) -> set[int]:
    return {roles.split_pos[p] for p in [*roles.tensors, roles.vector]}


def _launch(module: ModuleType, roles: apart.Roles, inputs: dict[int, torch.Tensor | float]) -> list[Any]:
    """The recorded split launch again (same grid, int and constexpr arguments) on aligned copies of its
    tensors: at each position of ``inputs`` that tensor's values (reshaped) or that number, every
    state tensor filled with :data:`MARKER`, every other tensor as recorded.  Returns the arguments."""
    split = roles.split
    states = _state_positions(roles)
    args = list(split.args)
    for i, a in enumerate(split.args):
        if not isinstance(a, torch.Tensor):
            continue
        c = apart._aligned_copy(a)
        given = inputs.get(i)
        if isinstance(given, torch.Tensor):
            c.copy_(given.reshape(c.shape).to(device=c.device, dtype=c.dtype))
        elif given is not None:
            c.fill_(given)
        elif i in states:
            c.fill_(MARKER)
        else:
            c.copy_(a)
        args[i] = c
    getattr(module, split.name)[split.grid](*args, **split.kwargs)
    return args


def values_source(module: ModuleType, roles: apart.Roles, v: torch.Tensor) -> str:
    """The split parameter whose values the vector states average, where it is not V: the launch
    again with V and every other floating input zero (so every score is 0, whatever the kernel
    scores with) but one of V's size, which names its (sequence, head) as V does in :func:`probe`.
    The first such parameter whose states then name their own rows, by name; "" where none does."""
    split = roles.split
    v_pos = _position_of(split, v)
    states = _state_positions(roles)
    floats = [i for i, a in enumerate(split.args)
              if isinstance(a, torch.Tensor) and a.is_floating_point() and i not in states]
    for i in floats:
        if i == v_pos or split.args[i].numel() != v.numel():
            continue
        inputs: dict[int, torch.Tensor | float] = {j: 0.0 for j in floats}
        inputs[i] = _naming(v.shape)
        args = _launch(module, roles, inputs)
        if v.is_cuda:
            torch.cuda.synchronize()
        vec_flat = args[roles.split_pos[roles.vector]].detach().double().cpu().reshape(-1)
        if any(_row_matches(lay.canonical(vec_flat, roles.sizes(roles.vector)))[1] for lay in apart.VECTOR_LAYOUTS):
            return split.arg_name(i)
    return ""


@dataclass
class Unread:
    """A probe no layout reads: ``nonfinite`` when the split wrote NaN or Inf into its states;
    ``scalar``: the non-finite values are -inf, +inf or NaN ("-inf" when only that) of a scalar
    state whose vector state names its (sequence, head) ("" where that was not measured)."""

    nonfinite: bool = False
    scalar: str = ""
    written: torch.Tensor | None = None  # flat bool: the vector state's elements the split wrote (None: not measured)
    rows_read: str = ""  # where every state names one other (sequence, head)'s values: which, in words


def probe(module: ModuleType, roles: apart.Roles, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
          heads: int) -> Measured | Unread:
    """Run the recorded split alone on the tutor's inputs; :class:`Unread` where no layout reads it."""
    v_pos = _position_of(roles.split, v)
    if v_pos is None or roles.head_dim < 3:
        return Unread()
    k_pos = _position_of(roles.split, k)
    args = _launch(module, roles, {**({k_pos: 0.0} if k_pos is not None else {}), v_pos: _naming(v.shape)})
    if v.is_cuda:
        torch.cuda.synchronize()
    b, h, n, d = v.shape
    vec_flat = args[roles.split_pos[roles.vector]].detach().double().cpu().reshape(-1)
    mask = vec_flat != MARKER
    written = vec_flat[mask]
    unread = Unread(nonfinite=bool(written.numel()) and not bool(torch.isfinite(written).all()), written=mask)
    found = None
    for layout in apart.VECTOR_LAYOUTS:
        vec = layout.canonical(vec_flat, roles.sizes(roles.vector))
        nonempty, ok = _row_matches(vec)
        if ok:
            found = (layout, vec, nonempty)
            break
    if found is None:
        unread.rows_read = _rows_read_words(vec_flat, roles, heads)
        return unread
    vlayout, vec, nonempty = found
    layouts = {roles.vector: vlayout}
    unwritten = (vec == MARKER).all(-1)
    normalised = bool(((vec[..., 2] - 1).abs() <= TOL)[nonempty].all())
    counts: torch.Tensor | None = None if normalised else vec[..., 2].round()
    prefer = "rs" if vlayout.order.index("r") < vlayout.order.index("s") else "sr"
    scalars_written = torch.ones_like(unwritten)  # (rows, slots): every scalar state of the slot was written
    lens = lengths.cpu().long().repeat_interleave(heads)
    stored = ~unwritten & torch.isfinite(vec).all(-1)
    l_counts: torch.Tensor | None = None  # a scalar field's counts that add up to each row's length
    for pos in roles.tensors:
        flat = args[roles.split_pos[pos]].detach().double().cpu().reshape(-1)
        options = apart.scalar_layouts(roles.fields[pos])
        options.sort(key=lambda lay: (lay.order.replace("f", "") != prefer))  # the vector's order first
        fitting = [lay for lay in options if _scalar_fits(lay.canonical(flat, roles.sizes(pos)), nonempty)]
        if not fitting:
            stored = flat[flat != MARKER]
            odd = stored[~torch.isfinite(stored)]
            if odd.numel():  # (blind round 14, w30: m_i never set to m_new stores a maximum of -inf)
                return Unread(nonfinite=True, scalar="-inf" if bool((odd == float("-inf")).all()) else "NaN or Inf")
            return unread
        # counts are the same numbers read in any order: where the vector state holds them too,
        # the layout whose counts are the vector's own, slot for slot, is the one (else the first)
        agreeing = [lay for lay in fitting if counts is not None
                    and _counts_agree(lay.canonical(flat, roles.sizes(pos)), nonempty, counts)]
        layout = (agreeing or fitting)[0]
        canon = layout.canonical(flat, roles.sizes(pos))
        layouts[pos] = layout
        scalars_written &= ~(canon == MARKER).any(0)
        for f in range(canon.shape[0]):
            counts = counts if counts is not None else _count_of(canon[f], nonempty)
            l_counts = l_counts if l_counts is not None else _length_counts(canon[f], stored, lens)
    lost = "" if normalised or l_counts is None else _lost_from_o_words(vec, stored, l_counts, lens, heads)
    if lost:  # l_s counts right: the slices' ranges are l_s's, the positions o_s lost are said
        counts = l_counts
    if counts is not None:
        counts = torch.where(nonempty, counts, torch.zeros_like(counts))
    owner = _contiguous_owner(vec, nonempty, counts, lengths, heads, n)
    words = lost or _words(nonempty, unwritten, scalars_written, counts, lengths, heads)
    return Measured(layouts, nonempty, unwritten, counts, owner, words)


def _length_of_another(held: list[int], lengths: list[int], heads: int) -> str:
    """Where each (sequence, head) row r holds exactly the length of sequence f(r) for one known
    wrong f (the row's head index, or the flat row itself, as the Lengths index), the words; ""
    otherwise (blind round 22, 05/m27: Lengths loaded at off_bh % HEADS)."""
    rows = range(len(held))
    reads = {f"off_bh % {heads}: the head index": [r % heads for r in rows],
             "off_bh: the flat (sequence*head) index": list(rows)}
    for index, seqs in reads.items():
        if all(0 <= b < len(lengths) for b in seqs) and held == [lengths[b] for b in seqs]:
            return (f": in every row, (sequence, head) off_bh holds exactly the length of sequence"
                    f" {index.split(':')[0]} - the length is loaded at {index}, where the sequence index,"
                    f" off_bh // {heads}, belongs.")
    return ""


def _rows_read_words(vec_flat: torch.Tensor, roles: apart.Roles, heads: int) -> str:
    """Where, in one vector layout, every written state names (component 1 over component 2) one
    whole (sequence*head) row, the same for all slots of a row, and some row another's: which
    rows are read, in words, with the pattern where one fits (blind round 22, 05/m23: the K/V
    base from the sequence index alone); "" otherwise."""
    for layout in apart.VECTOR_LAYOUTS:
        nonempty, rid = _row_names(layout.canonical(vec_flat, roles.sizes(roles.vector)))
        if not bool(nonempty.any(-1).all()):
            continue
        whole = rid.round()
        if not bool(((rid - whole).abs() <= TOL)[nonempty].all()):
            continue
        first = whole.gather(-1, nonempty.int().argmax(-1, keepdim=True))  # each row's first slot's name
        if not bool((whole == first)[nonempty].all()):
            continue
        read = first.flatten().long()
        rows = torch.arange(read.numel())
        if bool((read == rows).all()):
            return ""
        patterns = {
            f"r // {heads}: the sequence index alone, where sequence * heads + head belongs (every head reads"
            " the cache of one (sequence, head), and not its own)": rows // heads,
            f"r % {heads}: the head index alone, where sequence * heads + head belongs": rows % heads,
        }
        said = next((words for words, want in patterns.items() if bool((read == want).all())), "")
        shown = ", ".join(f"{int(r) // heads}/{int(r) % heads} reads {int(f) // heads}/{int(f) % heads}"
                          for r, f in zip(rows[:6].tolist(), read[:6].tolist(), strict=True))
        return (" Run alone on values that name their (sequence, head), every state of each (sequence, head) names"
                f" one (sequence, head), not always its own (sequence/head: {shown}"
                f"{', ...' if read.numel() > 6 else ''})" + (f": row r reads row {said}" if said else "")
                + ". Look at the (sequence, head) part of the V offsets (and of K's, where they share it: kv_base).")
    return ""


def _length_counts(x: torch.Tensor, stored: torch.Tensor, lens: torch.Tensor) -> torch.Tensor | None:
    """The whole counts a scalar field holds (itself, or 2^x / e^x of a log-sum-exp) where, at
    the slots the split stored, they add up to each row's length (rows longer than the slot
    count, so that a maximum of 0 read as 2^0 = 1 a slot cannot pass); None otherwise."""
    if int(lens.max()) <= x.shape[-1]:
        return None
    for count in _count_readings(x):
        c = torch.where(stored, count, torch.zeros_like(count))
        if bool(torch.isfinite(c).all()) and bool((c >= -TOL).all()) and bool(((c - c.round()).abs() <= 1e-2).all()) \
                and bool((c.round().sum(-1) == lens).all()):
            return c.round()
    return None


def _lost_from_o_words(vec: torch.Tensor, stored: torch.Tensor, l_counts: torch.Tensor, lens: torch.Tensor,
                       heads: int) -> str:
    """Where l_s counts every position of each row (the probe's keys are zero: each slice's l_s
    is its count) but o_s, whose weights (component 2 of the named values) count the positions
    it added, holds fewer in some slices and more in none: the words, with which positions it
    lost where they are each slice's first ones (slices tiling the row in slot order); ""
    otherwise (blind round 22, 05/m39: acc = (acc + p·v) * alpha)."""
    o_counts = torch.where(stored, vec[..., 2], torch.zeros_like(vec[..., 2]))
    if not bool(((o_counts - o_counts.round()).abs() <= 1e-2).all()):
        return ""
    o_counts = o_counts.round()
    short = o_counts < l_counts
    if not bool(short.any()) or bool((o_counts > l_counts).any()):
        return ""
    r, slot = (int(i) for i in short.nonzero()[0])
    head = f"sequence {r // heads}, head {r % heads}"
    words = (" Run alone on keys of zero (every score equal, so each slice's l_s counts the positions it holds and"
             " o_s adds each position's value with weight 1), your split kernel's l_s counts every position of each"
             f" (sequence, head) (its slices' counts add up to the length), but in {int(short.sum())} of"
             f" {int(stored.sum())} slices o_s holds fewer: in {head}, slice {slot} counts {int(l_counts[r, slot])}"
             f" in l_s and its o_s holds {int(o_counts[r, slot])}.")
    start = l_counts.cumsum(-1) - l_counts
    has = o_counts > 0
    mean = vec[..., 0] / torch.where(has, vec[..., 2], torch.ones_like(vec[..., 2]))
    gone = l_counts - o_counts
    tail = (mean - (start + gone + (o_counts - 1) / 2)).abs() <= 1e-2  # o_s holds the slice's last positions
    firsts = sorted({int(g) for g in gone[short & has].tolist()})
    if bool((tail | ~has)[short].all()) and len(firsts) == 1 and bool((l_counts[short & ~has] <= firsts[0]).all()):
        k = firsts[0]
        return words + (f" In every such slice o_s holds exactly its last positions: the first {k} positions of each"
                        f" slice (all of a slice of {k} or fewer) count in l_s but add nothing to o_s. What a"
                        " slice's first block added to o_s was lost after it was added: a rescale applied to the"
                        " block just added, acc = (acc + p·v) * alpha, does exactly that, since at a slice's first"
                        " block alpha = exp2(m_old - m_new) is 0 (m_old starts at -inf). Rescale what came before,"
                        " then add: acc = acc * alpha + p·v.")
    return words + (" Positions that l_s counts added nothing to o_s: what they added to the accumulator was lost"
                    " (rescaled by 0 or reset after it was added) or never added, while the sum kept them.")


def _contiguous_owner(vec: torch.Tensor, nonempty: torch.Tensor, counts: torch.Tensor | None, lengths: torch.Tensor,
                      heads: int, n: int) -> torch.Tensor | None:
    """Each slot's range from its count and mean position, where the ranges of every row
    tile [0, length) in slot order; None where they do not (strided slices, say)."""
    if counts is None:
        return None
    mean = vec[..., 0] / torch.where(nonempty, vec[..., 2], torch.ones_like(vec[..., 2]))  # either way
    lo = mean - (counts - 1) / 2
    owner = torch.full((vec.shape[0], n), -1, dtype=torch.long)
    lens = lengths.cpu().long().repeat_interleave(heads).tolist()
    for r in range(vec.shape[0]):
        at = 0
        for s in range(vec.shape[1]):
            if not bool(nonempty[r, s]):
                continue
            start = float(lo[r, s])
            if abs(start - round(start)) > 1e-2 or round(start) != at:
                return None
            at = round(start) + int(counts[r, s])
            owner[r, round(start):at] = s
        if at != lens[r]:
            return None
    return owner


def _words(nonempty: torch.Tensor, unwritten: torch.Tensor, scalars_written: torch.Tensor,
           counts: torch.Tensor | None, lengths: torch.Tensor, heads: int) -> str:
    words = ""
    never = unwritten.all(0).nonzero().flatten().tolist()
    vector_only = [s for s in never if bool(scalars_written[:, s].all())]
    if vector_only:
        # (blind round 14, w13: the o_s store leaves out the slice) the slots are written, all but one state
        slots = ", ".join(map(str, vector_only))
        return (f" Run alone (the tutor marked the state tensors first), your split kernel wrote the scalar states"
                f" (m_s, l_s) of slot{'s' * (len(vector_only) > 1)} {slots} of every (sequence, head) but never"
                f" their vector state o_s: the o_s store's offset reaches other slots than the scalar states'"
                f" stores do - look at the slot (slice) part of the o_s store's offset.")
    if never:
        words += (f" Run alone, your split kernel never wrote the state of slot{'s' if len(never) > 1 else ''}"
                  f" {', '.join(map(str, never))} of any (sequence, head) (the tutor marked the state tensors first),"
                  f" yet the merge reads {unwritten.shape[1]} slots per (sequence, head): look at the split's grid"
                  " and the slice count the two kernels share.")
    if counts is not None:
        held = counts.sum(-1).long().tolist()
        lens = lengths.cpu().long().repeat_interleave(heads).tolist()
        off = [f"sequence {r // heads}, head {r % heads} hold {held[r]} positions where its length is {lens[r]}"
               for r in range(len(held)) if held[r] != lens[r]]
        if off:
            words += (" Run alone on keys of zero (every score equal, so each slice's l_s counts the positions it"
                      " holds), your split kernel's slices of " + "; ".join(off[:6])
                      + ("; ..." if len(off) > 6 else ""))
            other = _length_of_another(held, lengths.cpu().long().tolist(), heads)
            words += other or (": its loop covers other positions than 0..length-1, or its loads reach outside this"
                               " (sequence, head)'s keys (the K/V base offset and strides).")
    return words
