"""Drill 07's weights read-out: which pool rows took part in each (sequence, query head)'s
softmax, measured from the outputs alone, so it runs where no load is counted (a GPU).

Any attention kernel computes ``out = W · V`` with ``W`` depending on Q and K only.  Every
launch here runs on a failing correctness case's own shapes, block table and lengths (the
variant that launch compiled), with other Q, K and V:

* the class launch(es): K = 0, so every score is equal and ``W`` is uniform over the rows a
  head included; V one-hot per class of pool rows: sequence s's held positions in K/V head j
  (a channel each), the offsets past s's length on its last page (a channel per sequence),
  each page no block table lists for a held position (a channel each).  Head (b, h)'s output
  is the share of its softmax on each class (head_dim channels a launch).
* the position launches: head (b, h) gets ``q = A e_t`` for its target class t (its own
  sequence's rows in the K/V head it weighs most in the class launch) and every row of class c
  ``k = -B (1 - e_c)``: a target row scores 0, every other row ``-A B / sqrt(d)``, so only
  target rows carry weight (``exp`` of ~-360 is 0 in fp32).  V is one-hot by logical
  position (head_dim positions a launch, the offsets past the length counted as positions
  ``length ..``), so the output says which positions of the target class took part.

This measures *took part in the softmax*, not *was loaded*: a row loaded and then masked out
weighs 0 here, and a position read in another sequence's or head's place is not counted as
this head's.  Unwritten or NaN outputs leave that head unmeasured (``finite`` False).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch

from tutor.harness.findings import index_runs
from tutor.harness.guarded import POISON_BITS
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention.block_shares import block_shares_words
from tutor.harness.problems.paged_decode import Case, Launch, Paged, gathered, pages_needed

TOOK = 1e-6  # a weight above this took part: a row in the softmax weighs >= 1/(pool rows) >> 1e-6,
# a row outside it exactly 0 (masked: exp(-inf)) or below fp32's range (exp(-360) in a position launch)
SUMS = 0.02  # a softmax's shares sum to 1 within fp16's rounding of each class's share
ISOLATE = 64.0  # A and B above: target rows score 0, the rest -A*B/sqrt(d) <= -362 (d <= 128)

Relaunch = Callable[[Launch, Paged], torch.Tensor]  # the kernel on a case's launch with other inputs -> fp16 out


@dataclass
class Rows:
    """What each pool row (page, K/V head, offset) is, for one case."""

    klass: np.ndarray  # (num_pages, kv_heads, page_size) int: the class channel (see :func:`rows_of`)
    seq: np.ndarray  # the sequence whose table lists the page (-1: no table lists it for a held position)
    pos: np.ndarray  # its logical position in that sequence (-1 for an unlisted page)
    target: np.ndarray  # its target class in the position launches: s * kv_heads + j on a page s lists, else -1
    unlisted: list[int]  # the pages no table lists for a held position, in class order


def held_class(case: Case, s: int, j: int) -> int:
    return s * case.kv_heads + j


def past_class(case: Case, s: int) -> int:
    return case.batch * case.kv_heads + s


def unlisted_class(case: Case, i: int) -> int:
    return case.batch * case.kv_heads + case.batch + i


def rows_of(case: Case, p: Paged) -> Rows:
    """Every pool row's class: held positions of (s, j); offsets past s's length on its last
    page; each unlisted page (the one a table names past its last page, the spares)."""
    ps, kvh = case.page_size, case.kv_heads
    n_pages = len(p.owner)
    klass = np.zeros((n_pages, kvh, ps), dtype=np.int64)
    seq = np.full((n_pages, kvh, ps), -1, dtype=np.int64)
    pos = np.full((n_pages, kvh, ps), -1, dtype=np.int64)
    target = np.full((n_pages, kvh, ps), -1, dtype=np.int64)
    unlisted: list[int] = []
    for page, (s, j) in enumerate(p.owner):
        if j < 0:
            klass[page] = unlisted_class(case, len(unlisted))
            unlisted.append(page)
            continue
        held = min(ps, case.lengths[s] - j * ps)
        seq[page] = s
        pos[page] = j * ps + np.arange(ps)[None, :]
        klass[page, :, held:] = past_class(case, s)
        for h in range(kvh):
            klass[page, h, :held] = held_class(case, s, h)
            target[page, h] = held_class(case, s, h)  # the offsets past the length too
    return Rows(klass, seq, pos, target, unlisted)


def _read(out: torch.Tensor) -> np.ndarray:
    """A read-out launch's output as float64 (batch, heads, D), unwritten elements NaN."""
    poisoned = out.view(torch.int16) == POISON_BITS
    return out.double().masked_fill(poisoned, float("nan")).cpu().numpy()


@dataclass
class CaseWeights:
    """One failing case's read-out."""

    launch: Launch
    rows: Rows
    finite: np.ndarray  # (batch, heads) bool: measured: every read-out of that head is a number, its shares sum to 1
    share: np.ndarray  # (batch, heads, classes): the share of its softmax on each class
    target: np.ndarray  # (batch, heads): the K/V head whose held positions the position launches read (-1: none)
    took: np.ndarray | None  # (batch, heads, positions) bool: positions of its sequence in the target K/V
    # head that took part (None: the position launches were not run)
    launches: int


def read_case(x: Launch, relaunch: Relaunch, unread: bool = True, past: bool = True) -> CaseWeights:
    """One failing case's read-out: the class launches, then the position launches where they
    can add a finding still unsaid: ``unread`` (held positions that took no part) or ``past``
    (which offsets past a length took part, when the class launch says some did)."""
    c, p = x.case, x.inputs
    d, dev, dtype = c.head_dim, p.q.device, p.q.dtype
    rows = rows_of(c, p)
    n_classes = unlisted_class(c, len(rows.unlisted))
    klass = torch.from_numpy(rows.klass).to(dev)
    finite = np.ones((c.batch, c.heads), dtype=bool)
    share = np.zeros((c.batch, c.heads, n_classes))
    launches = 0
    zeros_k = torch.zeros_like(p.k_pages)
    for first in range(0, n_classes, d):  # the class launches: head_dim classes each
        v = torch.zeros_like(p.v_pages)
        inside = (klass >= first) & (klass < first + d)
        v[inside.nonzero(as_tuple=True) + ((klass[inside] - first),)] = 1.0
        w = _read(relaunch(x, replace(p, q=torch.zeros_like(p.q), k_pages=zeros_k, v_pages=v)))
        launches += 1
        finite &= np.isfinite(w).all(axis=-1)
        width = min(d, n_classes - first)
        share[:, :, first:first + width] = np.nan_to_num(w[:, :, :width])
    # out = W V is a softmax over V-pool rows where a head's shares sum to 1; where they sum to 0
    # no V-pool row reached its output at all (measured too: nothing took part); any other
    # head is not measured
    sums = share.sum(axis=-1)
    finite &= (np.abs(sums - 1.0) <= SUMS) | (np.abs(sums) <= TOOK)

    # each head's target: its own sequence's held positions in the K/V head it weighs most
    kvh = c.kv_heads
    held = np.stack([share[b, :, b * kvh:(b + 1) * kvh] for b in range(c.batch)])  # (batch, heads, kv_heads)
    target = np.where(held.max(axis=-1) > TOOK, held.argmax(axis=-1), -1)  # (batch, heads)
    past_share = share[:, :, past_class(c, 0):past_class(c, c.batch)][finite]
    if not (unread or (past and bool((past_share > TOOK).any()))):
        return CaseWeights(x, rows, finite, share, target, None, launches)
    positions = max(pages_needed(n, c.page_size) for n in c.lengths) * c.page_size
    took = np.zeros((c.batch, c.heads, positions), dtype=bool)
    n_targets = c.batch * c.kv_heads
    pos = torch.from_numpy(rows.pos).to(dev)
    tclass = torch.from_numpy(rows.target).to(dev)
    for lo_class in range(0, n_targets, d):  # a pass per head_dim target classes (one pass on every case)
        in_pass = (tclass >= lo_class) & (tclass < lo_class + d)
        k = torch.full_like(p.k_pages, -ISOLATE)
        k[in_pass.nonzero(as_tuple=True) + ((tclass[in_pass] - lo_class),)] = 0.0
        # head (b, h) targets class b * kv_heads + target[b, h]: q = A e_t scores its rows 0
        t = np.arange(c.batch)[:, None] * kvh + target - lo_class
        chosen = (target >= 0) & (t >= 0) & (t < d)
        q = torch.zeros_like(p.q)
        b_idx, h_idx = np.nonzero(chosen)
        q[tuple(torch.from_numpy(i).to(dev) for i in (b_idx, h_idx, t[chosen]))] = ISOLATE
        if not chosen.any():
            continue
        total = np.zeros((c.batch, c.heads))  # a chosen head's weight on coded rows: 1 when isolated
        for start in range(0, positions, d):  # head_dim positions a launch
            v = torch.zeros_like(p.v_pages)
            coded = in_pass & (pos >= start) & (pos < start + d)
            v[coded.nonzero(as_tuple=True) + ((pos[coded] - start),)] = 1.0
            w = _read(relaunch(x, replace(p, q=q.to(dtype), k_pages=k.to(dtype), v_pages=v)))
            launches += 1
            width = min(d, positions - start)
            finite &= ~chosen | np.isfinite(w).all(axis=-1)
            total += np.nan_to_num(w).sum(axis=-1)
            took[:, :, start:start + width] |= chosen[:, :, None] & (np.nan_to_num(w[:, :, :width]) > TOOK)
        finite &= ~chosen | (np.abs(total - 1.0) <= SUMS)
    return CaseWeights(x, rows, finite, share, target, took, launches)


# -- what a read-out says, in words -----------------------------------------------------------------
def pairs_words(pairs: list[list[int]]) -> str:
    """(sequence, head) pairs in words, heads as runs per sequence."""
    by_seq: dict[int, list[int]] = {}
    for b, h in pairs:
        by_seq.setdefault(b, []).append(h)
    return "; ".join(f"sequence {b} {_heads(hs)}" for b, hs in by_seq.items())


def _heads(hs: list[int]) -> str:
    return f"head{'s' if len(hs) > 1 else ''} {index_runs(hs)}"


def _readers(cw: CaseWeights, klass: int) -> str:
    """The (sequence, head) pairs whose softmax gave class ``klass`` weight, in words."""
    got = (cw.share[:, :, klass] > TOOK) & cw.finite
    return pairs_words(np.argwhere(got).tolist())


def unread_words(cw: CaseWeights) -> list[str]:
    """Per sequence: held positions whose values got no weight in a head's output, in any K/V head.
    A head is measured only where its read-out is finite and it weighs one K/V head of its
    sequence alone (the one its position launches read) or none."""
    c = cw.launch.case
    said: list[str] = []
    if cw.took is None:
        return said
    for b, n in enumerate(c.lengths):
        by_missing: dict[tuple[int, ...], list[int]] = {}
        for h in range(c.heads):
            if not cw.finite[b, h]:
                continue
            t = int(cw.target[b, h])
            held = cw.share[b, h, b * c.kv_heads:(b + 1) * c.kv_heads]
            if t >= 0 and bool((np.delete(held, t) > TOOK).any()):
                continue  # weighs two K/V heads of its sequence: positions not told apart
            missing = tuple(range(n)) if t < 0 else tuple(int(i) for i in np.nonzero(~cw.took[b, h, :n])[0])
            if missing:
                by_missing.setdefault(missing, []).append(h)
        for missing, hs in by_missing.items():
            said.append(f"the values of sequence {b} position{'s' if len(missing) > 1 else ''}"
                        f" {index_runs(list(missing))} of {n} got no weight, in any K/V head, in the output of its"
                        f" query {_heads(hs)}")
    return said


def past_words(cw: CaseWeights) -> list[str]:
    c, ps = cw.launch.case, cw.launch.case.page_size
    said: list[str] = []
    for s, n in enumerate(c.lengths):
        held = n - (pages_needed(n, ps) - 1) * ps
        readers = _readers(cw, past_class(c, s)) if held < ps else ""
        if not readers:
            continue
        page = int(cw.launch.inputs.block_table[s, pages_needed(n, ps) - 1])
        offs = [] if cw.took is None else sorted({int(o) - (n - held) for h in range(c.heads) if cw.finite[s, h]
                                                  for o in np.nonzero(cw.took[s, h, n:])[0] + n})
        which = f"offsets {index_runs(offs)}" if offs else "offsets past its length"
        said.append(f"sequence {s} (length {n}): {which} of its last page {page}, which holds {held}, weighed in"
                    f" the attention of {readers}")
    return said


def unlisted_words(cw: CaseWeights) -> list[str]:
    c, p = cw.launch.case, cw.launch.inputs
    said: list[str] = []
    for i, page in enumerate(cw.rows.unlisted):
        readers = _readers(cw, unlisted_class(c, i))
        if not readers:
            continue
        said.append(f"{unlisted_page_words(c, p, page)} weighed in the attention of {readers}")
    return said


def unlisted_page_words(c: Case, p: Paged, page: int) -> str:
    """A page no table lists for a held position, named: the table entry past a sequence's last
    page that names it, or none; page 0 is also the page a table load masked with ``other=0``
    names (blind round 24, 07 b10: a mask that dropped a partial last page's entry read page 0,
    which that draw had made a sequence's page past its length)."""
    s = p.owner[page][0]
    what = (f"page {page} (named by sequence {s}'s block table entry {pages_needed(c.lengths[s], c.page_size)},"
            f" past its length {c.lengths[s]}" if s >= 0 else f"page {page} (in no block table")
    zero = "; page 0 is also the page a table load masked with other=0 gives" if page == 0 else ""
    return f"{what}{zero})"


def _slices_words(w: torch.Tensor, scores: torch.Tensor, seen: torch.Tensor, block_n: int,
                  row_name: Callable[[int], str]) -> str:
    """An accumulator not rescaled within each slice of a split, where it fits: the positions cut
    into tiles of ``block_n`` (the kernel's BLOCK_N) and the tiles into slices of r from position 0,
    as a split of SPLIT_SIZE = r * BLOCK_N positions cuts them (one program, with its own running
    maximum, a slice), for each r; the words of the smallest r whose pattern fits every row
    (:func:`block_shares_words`), with its slice size where no other r fits; "" where none fits."""
    tiles = -(-w.shape[-1] // block_n)
    fitting: dict[int, str] = {}
    for r in range(2, tiles + 1):
        segments = (torch.arange(tiles) // r).reshape(1, 1, tiles)
        words = block_shares_words(w, scores, seen, block_n, row_name, "tile", "positions", segments=segments,
                                   patterns_only=True)
        if words.startswith(" Within each slice"):
            fitting[r] = words
    if not fitting:
        return ""
    r = min(fitting)
    size = (f" (Measured with the tiles of {block_n} positions, your BLOCK_N, cut into slices of {r * block_n}"
            " positions from position 0: the one such cut whose pattern fits every row.)") if len(fitting) == 1 else ""
    return fitting[r] + size


def softmax_reading(x: Launch, relaunch: Relaunch, block_n: int | None = None) -> tuple[str, bool]:
    """The case's softmax read out on its own block table and lengths: q scaled down (every
    weight far from fp16's underflow), V one-hot by logical position on every held pool row
    (head_dim positions a launch), so head (b, h)'s output channel c is its weight on
    position start + c.  Said: the slope of log(weight) against the true scores within each
    page (nothing where the weights are no softmax of them), and what each head's weights
    add up to; and whether the slope is a known wrong temperature.  ``block_n``: the kernel's
    BLOCK_N, where it has one (how the pages' shares are read then: :func:`_slices_words`)."""
    c, p = x.case, x.inputs
    d, dev = c.head_dim, p.q.device
    rows = rows_of(c, p)
    pos = torch.from_numpy(rows.pos).to(dev)
    seq = torch.from_numpy(rows.seq).to(dev)
    lengths = p.lengths.to(dev).long()
    held = (pos >= 0) & (seq >= 0) & (pos < lengths[seq.clamp(min=0)])
    n = max(c.lengths)
    q = (p.q.float() * reading.DECODE_Q_SCALE).to(p.q.dtype)

    def read(group: int) -> torch.Tensor:
        v = torch.zeros_like(p.v_pages)
        coded = held & (pos >= group * d) & (pos < (group + 1) * d)
        v[coded.nonzero(as_tuple=True) + ((pos[coded] - group * d),)] = 1.0
        return relaunch(x, replace(p, q=q, v_pages=v))

    w, _ = reading.weights_read_out(read, n, d, (c.batch * c.heads, 1), "cpu")
    kg, _ = gathered(p, c)  # (batch, kv_heads, n, D)
    kq = kg.repeat_interleave(c.group, dim=1).to(torch.float64).cpu()
    s = torch.einsum("bhd,bhnd->bhn", q.to(torch.float64).cpu(), kq) * d**-0.5
    allowed = torch.arange(n)[None, :] < lengths.cpu().repeat_interleave(c.heads)[:, None]
    span = f"Within each page (read out through one-hot values on {reading.scaled_q_case(c.name)})"
    scores, seen = s.reshape(c.batch * c.heads, 1, n), allowed[:, None, :]

    def name(r: int) -> str:
        return f"sequence {r // c.heads} head {r % c.heads}"

    def shares() -> str:
        # within each slice of the kernel's tiles where that fits, else page by page
        within = _slices_words(w, scores, seen, block_n, name) if block_n is not None else ""
        return within or block_shares_words(w, scores, seen, c.page_size, name, "page", "positions", tile=block_n)

    return reading.softmax_reading(w, scores, seen, d, c.page_size, span,
                                   "each head's weights on its sequence's held positions", shares, name)
