"""Sliding-window causal attention with grouped K/V heads (drill 06).

The launcher contract: ``attention(q, k, v, window, out=None, visits=None)``
with q of shape (batch, H, seq, head_dim) and k, v of shape (batch, H_KV, seq,
head_dim), H a multiple of H_KV.  Row r of query head h sees keys
``r - window + 1 .. r`` of K/V head ``h // (H // H_KV)``.

Correctness runs eight cases (:data:`CPU_CASES` / :data:`GPU_CASES`): a default
one (GQA, a window that is not a multiple of the block, a ragged last block),
a ragged one with one K/V head for all query heads, one shorter than a block,
one whose window is longer than the sequence (plain causal attention) and a
hostile one whose scores are large enough that exp overflows fp32 unless the
running maximum is subtracted.  Inputs are fresh standard-normal fp16; every
tensor is a view inside a guard band (:mod:`tutor.harness.guarded`): the
output is poisoned, q, k and v sit between NaN margins (k's and v's as large as
q, so a kernel that reads a K/V head past the last one reads NaN instead of
faulting), and NaN that nothing else explains is traced to the margin it came
from (``read-past-end``).

Two more cases (issue 21): block-edge (WINDOW = BLOCK_N + 1 on a length that is
a multiple of both blocks, 8 query heads on 2: a lower bound one key off shows
in the visit map) and one-key (WINDOW = 1, 4 query heads on 1).  And two-keys
(WINDOW = 2 on 136 rows): row 128 starts a query block at every block size up to
128 and its oldest key, 127, ends the block before, so a lower bound one key late
misses a key there (a blind attempt passed every other case).  And long-sum (the
wide window's launch on 200 rows, :mod:`tutor.harness.long_sum`): every score 0 and
V's column 0 at 512, so an fp16 running sum overflows once a row sees 128 keys;
it reads nothing out and is said only where every other case passed.

The diagnosis is measured, never guessed, and every probe launch is at the
shape, dtypes and window of a correctness case (the variant the verdict
compiled):

* which K/V head each query head reads: re-run with one K/V head replaced by
  fresh values and see which query heads' outputs move (the whole map is said);
  where the map is wrong, K alone and V alone are replaced too, so keys taken from
  one head and values from another are said as such;
* which keys each row gives weight to: re-run with one-hot values (key j's
  value is the unit vector e_(j mod head_dim), one launch per head_dim keys,
  the same in every K/V head), so the output *is* the kernel's weight matrix
  for every query head; from it the effective window by side (the first and
  last key each row sees: the far side off by how many keys, the near side
  shifted), weight after the row, keys missed (and the blocks not visited),
  the softmax temperature and the rows' sums.  Which keys a row sees is read
  with q = 0 as well (every key let in then weighs the same, whatever the
  temperature: a far-off scale cannot underflow a key into "missed").  It is
  read on every failing case, and a code is said only where each of their
  read-outs supports it (:func:`agreed_findings`); when they disagree the
  measurements are said;
* a check whose cases all pass yet whose visit map leaves needed blocks
  unvisited: tiles that straddle two K/V blocks (a loop started between block
  boundaries) are recorded at the block of their first key, so the map cannot
  count them: said as the finding ``visits-uncounted``, never "solved";
* NaN rows against the rows that see no key of the first block the kernel
  visited for them (an online-softmax update without the empty-row guard),
  said only when every case with NaN rows fits it;
* the visit map against the blocks the window needs: blocks wholly before a
  query block's window or wholly after its last row were visited for nothing;
  the map has zeroed margins, so a loop that starts before key 0 (or runs past
  the end) shows as a visit outside it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.findings import Findings, drop_explained_nan, index_runs, visit_findings
from tutor.harness.loader import LAUNCHER
from tutor.harness.long_sum import long_sum_values, long_sum_words
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention import value_rows
from tutor.harness.problems.attention.block_shares import block_shares_words
from tutor.harness.problems.attention.cases import block_visit_map, evaluate
from tutor.harness.problems.attention.hostile import max_over_unseen_keys, row_errors
from tutor.harness.problems.attention.reference import (
    far_below_words,
    masked_attention,
    place_far_below,
    score_rounding_allowance,
)
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, VisitMap


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    heads: int
    heads_kv: int
    seq: int
    head_dim: int
    window: int
    q_scale: float = 1.0  # > 1: hostile scores (q is scaled up); 0 with long_sum
    long_sum: bool = False  # q = 0 and V's column 0 at 512: an fp16 running sum overflows (tutor.harness.long_sum)
    far_below: bool = False  # every score near -FAR_BELOW: a running maximum that starts at 0 underflows every p

    @property
    def group(self) -> int:
        return self.heads // self.heads_kv


# Any wrong head mapping shows on some case: 4 query heads on 2 K/V heads
# (h % 2 differs from h // 2 there), 6 on 3 (h // 3, h % 3 and h // 2 all
# differ), 8 on 2 and 4 on 1 (other ratios than the default's), and one K/V
# head for all (anything but 0 is past the last head).  Window 48 on
# 64-blocks: the last query block can skip a whole K/V block before its
# window, and its first visited block is a boundary block with keys too old for
# some of its rows.  Some case has two sequences: a K/V offset that leaves out
# the batch index reads sequence 0's K/V for both.  The block-edge case has a
# window of BLOCK_N + 1 keys on a length that is a multiple of both blocks (set
# from the student's blocks by :func:`cases_for`): a query block's first window
# key then falls exactly on a K/V block boundary, so a lower bound one key too
# early visits one block more and a lower bound rounded the wrong way misses
# one.  The one-key case (WINDOW = 1) sees only the diagonal.  CPU shapes are
# small: the interpreter is slow.
CPU_CASES = (
    Case("default", 1, 4, 2, 140, 64, 48),
    Case("ragged", 1, 2, 1, 129, 64, 70),  # one K/V head for all (MQA); a last block of one row
    Case("short", 2, 6, 3, 37, 64, 16),  # shorter than one block; two sequences, so the batch index counts
    # window >= seq: plain causal attention; head_dim 32, so a kernel that writes 64 for HEAD_DIM
    # somewhere fails on the CPU too (blind round 9, w96), not only on the GPU's head_dim-128 case
    Case("wide-window", 1, 2, 2, 100, 32, 128),
    Case("hostile", 1, 2, 1, 150, 64, 80, q_scale=40.0),  # scores ~ +-100: exp overflows fp32 unless max is subtracted
    Case("block-edge", 1, 8, 2, 192, 64, 65),  # WINDOW = BLOCK_N + 1, a block-multiple length, 8 heads on 2
    Case("one-key", 1, 4, 1, 70, 64, 1),  # WINDOW = 1: each row sees itself only; 4 heads on 1
    Case("two-keys", 1, 2, 1, 136, 64, 2),  # WINDOW = 2: row 128's older key ends the previous block
    # the wide window's launch on more rows, every score 0 and V's column 0 at 512: from row 127 on a row
    # sums 128 keys, 65536 > 65504, so an acc kept in fp16 overflows there (the same compiled variant)
    Case("long-sum", 1, 2, 2, 200, 32, 128, q_scale=0.0, long_sum=True),
    # the hostile case's shapes with every score near -120 (drills 05, 07-09 have such rows too): a running
    # maximum that starts at 0, not -inf, leaves every p = exp2(score - 0) at 0 and the row 0/0
    Case("far-below", 1, 2, 1, 150, 64, 80, far_below=True),
)
GPU_CASES = (
    Case("default", 2, 8, 2, 1000, 64, 300),
    Case("ragged", 1, 2, 1, 129, 64, 70),
    Case("short", 1, 6, 3, 37, 64, 16),
    Case("wide-window", 1, 2, 2, 100, 64, 128),
    Case("hostile", 1, 4, 2, 300, 64, 100, q_scale=40.0),
    Case("block-edge", 1, 8, 2, 256, 64, 65),
    Case("one-key", 1, 4, 1, 70, 64, 1),
    Case("two-keys", 1, 2, 1, 136, 64, 2),
    # head_dim 128 (GPU only: the interpreter is slow): the tiles' register and shared-memory
    # budget doubles; a kernel tuned at 64 can go wrong only here
    Case("head-dim-128", 1, 4, 2, 300, 128, 100),
    Case("long-sum", 1, 2, 2, 200, 64, 128, q_scale=0.0, long_sum=True),
    Case("far-below", 1, 4, 2, 300, 64, 100, far_below=True),
)
FAR_BELOW_Q = 8.0  # the far-below case's q along dim 0 (K's is FAR_BELOW * sqrt(d) / it: 120 at d = 64)
# timed: the window is a quarter of the sequence, 8 query heads per K/V head
GPU_TIMING = Case("timing", 4, 32, 4, 4096, 64, 1024)


def cases_for(interpreter: bool, shape: tuple[int, int, int, int] | None = None,
              block_m: int = 64, block_n: int = 64) -> tuple[Case, ...]:
    """The correctness cases; the block-edge case's window is the student's BLOCK_N + 1
    and its length a multiple of both blocks, at least three query blocks."""
    cases = tuple(
        dataclasses.replace(c, window=block_n + 1, seq=max(c.seq, 3 * max(block_m, block_n)) // max(block_m, block_n)
                            * max(block_m, block_n))
        if c.name == "block-edge" else c
        for c in (CPU_CASES if interpreter else GPU_CASES))
    if shape is None:
        return cases
    batch, heads, seq, head_dim = shape
    base = cases[0]
    heads_kv = base.heads_kv if heads % base.heads_kv == 0 else 1
    default = dataclasses.replace(base, batch=batch, heads=heads, heads_kv=heads_kv, seq=seq, head_dim=head_dim)
    return (default, *cases[1:])


# -- inputs, launches, reference --------------------------------------------------------------

def random_inputs(
    case: Case, device: str, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fresh standard-normal fp16 q (scaled by the case's q_scale) and k, v (V's column 0 at
    512 in the long-sum case); each launch copies them into guard bands: :func:`run`."""
    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=generator, dtype=torch.float32)

    q = normal(case.batch, case.heads, case.seq, case.head_dim) * case.q_scale
    kv_shape = (case.batch, case.heads_kv, case.seq, case.head_dim)
    k, v = normal(*kv_shape), normal(*kv_shape)
    if case.far_below:
        place_far_below(q, k, FAR_BELOW_Q)  # every score of a row within a few units of -FAR_BELOW
    if case.long_sum:
        v = long_sum_values(v)
    return q.to(device, torch.float16), k.to(device, torch.float16), v.to(device, torch.float16)


@dataclass
class WindowLaunch(launching.Launch):
    # visits recorded outside the visit map: at a block index below 0 (the loop
    # started before key 0), or past the map's end (it ran past the sequence)
    visits_before: bool = False
    visits_after: bool = False


def _margin(n: int) -> int:
    return -(-n // 64) * 64  # 128-byte aligned views, as guard.margin_elements keeps them


def run(module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int,
        fills: dict[str, str] | None = None) -> WindowLaunch:
    """One launch of the student's launcher, every tensor inside a guard band
    (:class:`tutor.harness.guarded.Guarded`): q, k and v between NaN margins
    (``fills`` maps "Q", "K", "V" to another fill, see :func:`guard.input_band`),
    k's and v's as large as q, so a kernel that reads a K/V head past the last
    one reads NaN instead of faulting; a poisoned output; a zeroed visit map
    whose margins hold a sentinel (a loop that starts before key 0 records a
    visit at a negative index: it lands in the margin, not in memory that is
    not the map's)."""
    batch, heads, seq, _ = q.shape
    device = str(q.device)
    fills = fills or {}
    guarded = shared.Guarded()
    margin = _margin(max(q.numel(), guarding.margin_elements(tuple(q.shape), 2 * int(module.BLOCK_M))))
    views = [guarded.input(name, t, margin, fills.get(name, "nan")) for name, t in zip("QKV", (q, k, v), strict=True)]
    out = guarded.output("output", tuple(q.shape), device, margin)
    n_m, n_n = launching.visit_grid(seq, module.BLOCK_M, module.BLOCK_N)
    size = batch * heads * n_m * n_n
    visits = guarded.visits("visit map", (batch * heads, n_m, n_n), device, _margin(size + 1024))
    with cost.launched_blocks() as launched:
        returned = getattr(module, LAUNCHER)(*views, window, out=out, visits=visits)
    shared.synchronize(q)
    out = shared.returned_tensor(f"{LAUNCHER}() returned", returned, out, tuple(q.shape))
    strays = guarded.band("visit map").changed()
    return WindowLaunch(q=q, k=k, v=v, out=out, guard=guarded.band("output").side("after"), visits=visits,
                        bands=guarded.bands, launched=launched, visits_before="before" in strays,
                        visits_after="after" in strays)


def window_mask(seq: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(seq, seq) bool: may row r see key c?  r - window < c <= r."""
    rows = torch.arange(seq, device=device)[:, None]
    cols = torch.arange(seq, device=device)[None, :]
    return in_window(rows, cols, window)


def in_window(rows: torch.Tensor, cols: torch.Tensor, window: int) -> torch.Tensor:
    """May row ``rows`` see key ``cols`` (broadcast)?  r - window < c <= r: the drill's mask."""
    return (cols <= rows) & (cols > rows - window)


def window_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """Sliding-window causal GQA attention in float64: each K/V head repeated for its
    group of query heads, row r seeing keys r - window < c <= r."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return masked_attention(q, k, v, lambda r, c: in_window(r, c, window))


def hostile_allowance(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, expected: torch.Tensor, window: int,
                      tolerance: float) -> torch.Tensor:
    """Each output element's allowed error on the hostile case (scores of ~+-100):
    :func:`reference.score_rounding_allowance` over each row's window."""
    group = q.shape[1] // k.shape[1]
    seq = q.shape[-2]
    return score_rounding_allowance(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1), expected,
                                    window_mask(seq, window, q.device), tolerance, shared.ROUNDINGS,
                                    shared.FP16_U)


# -- the visit map -----------------------------------------------------------------------------

def needed_blocks(seq: int, window: int, block_m: int, block_n: int) -> list[tuple[int, int]]:
    """For each query block, the first and last key block holding a key some row of
    it may see.  The rows first..last see keys first - window + 1 .. last."""
    spans = []
    for first in range(0, seq, block_m):
        last = min(first + block_m, seq) - 1
        spans.append((max(first - window + 1, 0) // block_n, last // block_n))
    return spans


def ideal_visits(seq: int, window: int, block_m: int, block_n: int) -> list[list[bool]]:
    n_n = launching.visit_grid(seq, block_m, block_n)[1]
    return [[lo <= j <= hi for j in range(n_n)] for lo, hi in needed_blocks(seq, window, block_m, block_n)]


def visit_map(visits: torch.Tensor, case: Case, block_m: int, block_n: int) -> VisitMap:
    return block_visit_map(visits, case.seq, block_m, block_n, ideal_visits(case.seq, case.window, block_m, block_n),
                           f"sliding window of {case.window} keys")


# -- measurements ----------------------------------------------------------------------------

@dataclass
class Checked:
    case: Case
    result: CaseResult
    launch: WindowLaunch
    expected: torch.Tensor


def _same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: equal, NaN counting as equal to NaN."""
    return (a == b) | (torch.isnan(a) & torch.isnan(b))


def kv_heads_read(module: ModuleType, checked: Checked, generator: torch.Generator,
                  replaced: str = "KV") -> list[set[int]]:
    """For each query head (flattened batch*H), the K/V heads (flattened batch*H_KV)
    its output depends on: one launch per K/V head with that head's k and v (those
    of ``replaced``: "KV", "K" alone for the keys its scores read, "V" alone for the
    values it averages) replaced by fresh values."""
    case, base = checked.case, checked.launch
    q, k, v = base.q, base.k, base.v
    out0 = base.out.to(torch.float32)
    depends: list[set[int]] = [set() for _ in range(case.batch * case.heads)]
    for flat in range(case.batch * case.heads_kv):
        b, g = divmod(flat, case.heads_kv)
        k2, v2 = k.clone(), v.clone()
        fresh = torch.randn((2, case.seq, case.head_dim), generator=generator).to(q.device, torch.float16)
        if "K" in replaced:
            k2[b, g] = fresh[0]
        if "V" in replaced:
            v2[b, g] = fresh[1]
        out = run(module, q, k2, v2, case.window).out.to(torch.float32)
        moved = ~_same(out, out0).flatten(2).all(dim=-1)  # (batch, H)
        for qflat in moved.flatten().nonzero().flatten().tolist():
            depends[qflat].add(flat)
    return depends


def weight_readout(
    module: ModuleType, case: Case, device: str, generator: torch.Generator,
    inputs: list[torch.Tensor] | None = None, zero_q: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's attention weights, (batch*H, seq, seq) in float64 on ``device``,
    read out through one-hot values (every K/V head carries the same one-hot V, so
    each query head's output is its own weight matrix whichever K/V head it reads),
    on fresh small q, k at the case's own shape, dtypes and window: the launches
    reuse the variant the case's correctness launch compiled (a GPU specialises
    on the length, the window and the pointers' alignment).  And the visits
    (batch*H, n_m, n_n) of the last read-out launch.  ``inputs`` (when given) receives
    the q and k read out on.  ``zero_q``: q = 0, so every score is 0 and every key the
    kernel lets in gets the same weight whatever its softmax temperature (which keys
    a row sees, measured apart from how it weighs them)."""
    plain = dataclasses.replace(case, q_scale=1.0)
    q, k, _ = random_inputs(plain, device, generator)
    # small scores (std ~0.1): every key the kernel lets in gets a weight far
    # from fp16's underflow, unless the temperature is far from softmax's
    q = (q.float() * (0.0 if zero_q else 0.1)).half()
    if inputs is not None:
        inputs[:] = [q, k]
    launched: list[WindowLaunch] = []

    def launch(v: torch.Tensor) -> torch.Tensor:
        launched.append(run(module, q, k, v, case.window))
        return launched[-1].out

    v_shape = (case.batch, case.heads_kv, case.seq, case.head_dim)
    weights, _ = reading.weights_through(launch, v_shape, case.batch * case.heads, device)
    visits = launched[-1].visits
    assert visits is not None
    return weights.to(device), visits




def temperature(weights: torch.Tensor, scores: torch.Tensor, allowed: torch.Tensor, case: Case, block_n: int) -> str:
    """The slope of log(weight) against the true scaled ``scores`` (over each row's window,
    ``allowed``), in words (see :func:`reading.temperature_sentence`): 1 for a right kernel,
    1/sqrt(d) apart for a scale missing or doubled; what each row's weights add up to; and, at
    the right temperature, how the K/V blocks of ``block_n`` keys share each row's weight."""

    def row_name(r: int) -> str:
        bh, row = divmod(r, case.seq)
        return f"row {row} of head {bh % case.heads} (batch {bh // case.heads})"

    return reading.softmax_reading(weights, scores, allowed, case.head_dim, block_n, "Within each K/V block",
                                   "each row's weights",
                                   lambda: block_shares_words(weights, scores, allowed, block_n, row_name,
                                                              "K/V block"), row_name)[0]


def first_visited_key(visits: torch.Tensor, block_m: int, block_n: int, seq: int) -> torch.Tensor:
    """(batch*H, seq): the first key of the first K/V block visited for each row's
    query block (seq when none was)."""
    heads, n_m, n_n = visits.shape
    index = torch.arange(n_n, device=visits.device).expand(heads, n_m, n_n)
    first_block = torch.where(visits != 0, index, n_n).min(dim=-1).values  # (heads, n_m)
    rows = torch.arange(seq, device=visits.device) // block_m
    return (first_block[:, rows] * block_n).clamp(max=seq)


def block_relative_mask(seen: torch.Tensor, finite: torch.Tensor, visits: torch.Tensor, case: Case,
                        block_m: int, block_n: int) -> tuple[WindowFinding | None, bool]:
    """``mask-index-in-block``, where the keys every row weighs are exactly those of a mask
    that compares a position inside its block (a key's offs_n, 0..BLOCK_N-1, or a row's
    0..BLOCK_M-1) where the position in the sequence belongs, on one side of the window or
    both, over the K/V blocks the row's query block visits; rows that weigh nothing (NaN)
    must be rows that mask leaves no key, and some row the read-out speaks for must weigh
    other keys than its window.  Of the masks that fit, those with the fewest
    in-block sides are named (more than one: this case cannot tell them apart).  None where
    none fits (blind round 9, w12: the far side compared offs_n).  A fit whose in-block side cuts no key
    over the blocks visited is that side left out, on this case: it is not said, and the second value says
    that one exists (the case's other findings then also fit ``mask-index-in-block``)."""
    seq, window = case.seq, case.window
    rows = torch.arange(seq, device=seen.device)[:, None]
    cols = torch.arange(seq, device=seen.device)[None, :]
    in_blocks = visited_keys(visits, block_m, block_n, seq)
    if in_blocks.shape != seen.shape or not bool(finite.any()):
        return None, False
    allowed = window_mask(seq, window, seen.device)
    right = in_blocks & allowed[None]
    if bool((right == seen)[finite].all()) and not bool(right[~finite].any()):
        return None, False  # the right mask over the blocks it visits: whatever is wrong is not the mask
    fits: list[tuple[int, str, torch.Tensor]] = []
    vacuous = False
    # each side of the window may compare the row's index inside its query block, the key's inside its K/V
    # block, or both, where positions belong (blind round 27, 06 b37: the far side alone on the row's)
    for row_causal, key_causal, row_far, key_far in itertools.product((False, True), repeat=4):
        if not (row_causal or key_causal or row_far or key_far):
            continue  # the right mask, tried above
        causal = (cols % block_n if key_causal else cols) <= (rows % block_m if row_causal else rows)
        far = (cols % block_n if key_far else cols) > (rows % block_m if row_far else rows) - window
        predicted = in_blocks & causal & far
        if bool((predicted == seen)[finite].all()) and not bool(predicted[~finite].any()):
            # a side compared in-block that cuts no key over the blocks visited is, here, that side left out (a
            # window of BLOCK_M or more makes c % BLOCK_N > r % BLOCK_M - WINDOW always true: the shipped drill's
            # missing far side on the GPU's cases, blind round 27)
            if (row_far or key_far) and bool((far | ~(in_blocks & causal)).all()) or \
                    (row_causal or key_causal) and bool((causal | ~(in_blocks & far)).all()):
                vacuous = True
                continue
            sides = [_in_block_side(side, row_in, key_in) for side, row_in, key_in in
                     (("the causal side (c <= r)", row_causal, key_causal),
                      ("the far side (c > r - WINDOW)", row_far, key_far))]
            fits.append((row_causal + key_causal + row_far + key_far, "; ".join(w for w in sides if w), predicted))
    if not fits:
        return None, vacuous
    fewest = min(n for n, _, _ in fits)
    best = [f for f in fits if f[0] == fewest]  # several: this case cannot tell which index it is
    index, predicted = " or ".join(i for _, i, _ in best), best[0][2]
    # a row the read-out speaks for must show the mask wrong: NaN rows alone fit too many causes
    # (a V load past the end makes the same rows NaN: v_load_unmasked)
    shown = ((predicted != allowed[None]).any(dim=-1) & finite)
    if not bool(shown.any()):
        return None, vacuous
    h, r = map(int, shown.nonzero()[0])
    got = predicted[h, r].nonzero().flatten().tolist()
    empty = (~finite).any(dim=0).nonzero().flatten().tolist()
    nan = (f"; {_span(empty, 'row')} {'sees' if len(empty) == 1 else 'see'} no key and "
           f"{'comes' if len(empty) == 1 else 'come'} out NaN" if empty else "")
    return WindowFinding("mask-index-in-block", f" Measured: the keys every row weighs are exactly those of a mask "
                         f"that compares, where positions in the sequence belong, {index}; row {r} weighs "
                         f"{_span(got) if got else 'no key'}, not keys {max(r - window + 1, 0)}..{r}{nan}."), vacuous


def _in_block_side(side: str, row_in_block: bool, key_in_block: bool) -> str:
    """One side of a window mask that compares indices inside their blocks, in words ("" for neither)."""
    compared = [words for words, on in (("the row's index inside its query block (0..BLOCK_M-1)", row_in_block),
                                        ("the key's index inside its K/V block (0..BLOCK_N-1, offs_n)", key_in_block))
                if on]
    return f"on {side}, {' and '.join(compared)}" if compared else ""


def visited_keys(visits: torch.Tensor, block_m: int, block_n: int, seq: int) -> torch.Tensor:
    """(batch*H, seq, seq): whether each row's query block visited the K/V block of each key."""
    n_m, n_n = visits.shape[1], visits.shape[2]
    rows = (torch.arange(seq, device=visits.device) // block_m).clamp(max=n_m - 1)
    blocks = (torch.arange(seq, device=visits.device) // block_n).clamp(max=n_n - 1)
    return visits[:, rows][:, :, blocks] != 0


def _span(indices: list[int], noun: str = "key") -> str:
    """ "key 4", "keys 3..10", "rows 0..2, 9" (:func:`tutor.harness.findings.index_runs`)."""
    return f"{noun}{'s' if len(indices) > 1 else ''} {index_runs(indices)}"


@dataclass
class WindowFinding:
    code: str
    detail: str
    # other codes the same measurement fits (no far-side mask: on a case whose loop
    # bound never cuts a window, far-block-unmasked and window-unmasked look alike)
    fits: tuple[str, ...] = ()
    width: tuple[str, int, int] | None = None  # a measured window: (case, keys seen, WINDOW)


def read_window(
    weights: torch.Tensor, visits: torch.Tensor, case: Case, block_m: int, block_n: int,
    support: torch.Tensor | None = None,
) -> list[WindowFinding]:
    """What the weight matrix says about the kernel's window, one finding per fact.
    ``support`` (when given): the weights read out with q = 0 (:func:`weight_readout`),
    where every key the kernel lets in has weight whatever the temperature: a key is
    seen where either read-out weighs it (a temperature far from softmax's can
    underflow a key's weight on the scores of the first)."""
    seq, window = case.seq, case.window
    finite = torch.isfinite(weights).all(dim=-1)  # (heads, seq): rows the read-out can speak for
    seen = (weights > 0) & finite[..., None]
    if support is not None:
        seen |= (support > 0) & torch.isfinite(support).all(dim=-1)[..., None] & finite[..., None]
    rows = torch.arange(seq, device=weights.device)[:, None]
    cols = torch.arange(seq, device=weights.device)[None, :]
    allowed = window_mask(seq, window, weights.device)
    findings: list[WindowFinding] = []

    # a one-hot read-out of attention is a weight matrix: no weight below 0.  One
    # that is negative means the output is not a weighted average of the V rows
    # (values from elsewhere): nothing below can be read from it
    negative = (weights < -1e-2) & finite[..., None]
    if negative.any():
        h, r, c = map(int, negative.nonzero()[0])
        return [WindowFinding("wrong-output", f" Read out through one-hot values (key c's value is a unit vector),"
                              f" row {r} gets {float(weights[h, r, c]):.2f} from key {c}: a negative weight, so the "
                              f"output is not a weighted average of the rows of V: check what the V load reads "
                              f"(its pointer, head offset and strides).")]

    relative, in_block_too = block_relative_mask(seen, finite, visits, case, block_m, block_n)
    if relative is not None:
        return [relative]

    def done(findings: list[WindowFinding]) -> list[WindowFinding]:
        """The findings, each also fitting ``mask-index-in-block`` where an in-block side fits this case too."""
        if in_block_too:
            for f in findings:
                if f.code != "mask-index-in-block":
                    f.fits = tuple(sorted({*f.fits, "mask-index-in-block"}))
        return findings

    future = seen & (cols > rows)
    if future.any():
        h, r = map(int, future.any(dim=-1).nonzero()[0])
        keys = future[h, r].nonzero().flatten().tolist()
        share = float(weights[h, r, keys].sum())
        # the causal side by how many keys: the furthest key after its row any row weighs,
        # and whether every row that has keys after it sees that many (the side shifted)
        ahead = torch.where(seen & (cols > rows), cols - rows, 0).max(dim=-1).values  # (heads, seq)
        exists = (rows.flatten() + 1 < seq)[None, :] & finite
        most = int(ahead.max())
        reach = torch.minimum(torch.full_like(ahead, most), seq - 1 - rows.flatten()[None, :])
        how = (f" Every row sees the {most} key{'s' if most > 1 else ''} after it (as far as the sequence goes): "
               f"the causal side is {most} key{'s' if most > 1 else ''} late."
               if bool((ahead == reach)[exists].all()) else
               f" The furthest any row looks ahead is {most} key{'s' if most > 1 else ''}.")
        # every key of every visited block weighed, before the window as well where there are such keys
        # (blind round 9, w15: the two sides joined with |): no key removed at all
        in_blocks = visited_keys(visits, block_m, block_n, seq)
        if in_blocks.shape == seen.shape and bool((seen == in_blocks)[finite].all()):
            older = " - keys before its window too -" if bool((seen & ~allowed & (cols <= rows)).any()) else ""
            how += (f" Every row weighs every key of each K/V block it visits{older} and nothing else: the mask "
                    "removes no key at all: check that it is applied to the scores, and that its two sides are joined "
                    "with & (both must hold).")
        findings.append(WindowFinding("future-keys-seen", f" Row {r} puts {share:.2f} of its weight on "
                                      f"{_span(keys)}, after it.{how}"))

    # the effective window: the first key each row sees, against what the window
    # would give with the kernel's own first visited block as a floor
    floor = first_visited_key(visits, block_m, block_n, seq)  # (heads, seq)
    first_seen = torch.where(seen & (cols <= rows), cols.expand_as(seen), seq).min(dim=-1).values

    # the near side: does every row that sees a key see up to row - k, for one k >= 1,
    # and the WINDOW keys before that (the whole window shifted back k keys)?
    arange = torch.arange(seq, device=weights.device)
    last_seen = torch.where(seen, cols.expand_as(seen), -1).max(dim=-1).values
    has = seen.any(dim=-1) & finite
    if bool(has.any()) and not future.any():
        gaps = torch.unique((arange - last_seen)[has]).tolist()
        counted = seen.sum(dim=-1)
        if len(gaps) == 1 and gaps[0] >= 1:
            k = int(gaps[0])
            shifted_first = torch.maximum((arange - k - window + 1).clamp(min=0), floor)
            contiguous = counted == last_seen - first_seen + 1
            if bool((first_seen == shifted_first)[has].all()) and bool(contiguous[has].all()):
                full = has & (last_seen - first_seen + 1 == window)  # a row whose shifted window is whole
                h, r = map(int, (full if bool(full.any()) else has).nonzero()[-1])
                blind = (~has & finite).any(dim=0) | (~finite).any(dim=0)
                none = blind.nonzero().flatten().tolist()
                also = f"; {_span(none, 'row')} see{'s' if len(none) == 1 else ''} no key" if none else ""
                # where no row's far side is seen to move (it is cut at key 0 or the loop's
                # first block), the same read-out is a near side that leaves out the row's own key
                # (the general facts, too: its own key is missed; keys before its window seen, where some are)
                fits = ("window-keys-missed",) + (
                    ("weight-outside-window",) if bool((first_seen < arange - window + 1)[has].any()) else ())
                findings.append(WindowFinding("window-shifted", f" Row {r} sees keys {int(first_seen[h, r])}.."
                                              f"{int(last_seen[h, r])}, not {max(r - window + 1, 0)}..{r}: the near "
                                              f"side stops {k} key{'s' if k > 1 else ''} before the row (its own key "
                                              f"is not seen) and the far side starts {k} key{'s' if k > 1 else ''} too "
                                              f"early; the width is WINDOW{also}.", fits))
                return done(findings)
    holes = (~seen & allowed & (cols >= first_seen[..., None])).any(dim=-1) & finite

    def predicted(width: int) -> torch.Tensor:
        return torch.maximum((torch.arange(seq, device=weights.device) - width + 1).clamp(min=0), floor)

    usable = finite & ~holes
    too_old = seen & ~allowed & (cols <= rows)
    missed = ~seen & allowed & finite[..., None]
    if too_old.any() or missed.any():
        # hypotheses: no far-side mask at all, or the window the rows measure
        candidates = [seq + window] if too_old.any() else []
        measurable = usable & (first_seen > floor) & (first_seen > 0)
        widths = torch.unique((arange - first_seen + 1)[measurable]).tolist()  # sorted, as Tensor.unique()
        if len(widths) == 1 and widths[0] != window:
            candidates.append(int(widths[0]))
        # every width the measurement fits (the loop's first block can hide the far side):
        # a code found on one case is said when every other case's read-out fits it too
        consistent: set[str] = set()
        if not bool(holes.any()):
            # no far side at all: the loop's first block cuts some row's view (far-block-unmasked)
            # or none does (then it also looks like window-unmasked)
            cut = bool((usable & (floor > 0) & (floor < (torch.arange(seq, device=weights.device) - window + 1))).any())
            for width in [*range(1, seq + 1), seq + window]:
                if width != window and bool((first_seen == predicted(width))[usable].all()):
                    consistent.add(("far-block-unmasked" if cut else "window-unmasked") if width == seq + window else
                                   "window-off-by-one" if abs(width - window) == 1 else "window-size-wrong")
            if "window-unmasked" in consistent:
                consistent.add("far-block-unmasked")
            if "window-off-by-one" in consistent:
                consistent.add("window-size-wrong")
        for width in candidates:
            if bool(holes.any()) or not bool((first_seen == predicted(width))[usable].all()):
                continue
            if width == seq + window:  # no far-side mask at all
                binds = usable & (floor > 0) & (floor < (arange - window + 1))
                code = "far-block-unmasked" if binds.any() else "window-unmasked"
                fits = () if binds.any() else ("far-block-unmasked",)
                # the row that puts the most weight before its window is the example
                outside = torch.where(too_old, weights, 0.0).sum(dim=-1)
                outside = torch.where(binds if binds.any() else usable, outside, -1.0)
                h, r = divmod(int(outside.argmax()), seq)
                findings.append(WindowFinding(code, f" Row {r} sees keys {int(first_seen[h, r])}..{r} and puts "
                                              f"{float(outside[h, r]):.2f} of its weight on keys "
                                              f"{int(first_seen[h, r])}..{r - window}, before its window "
                                              f"(keys {r - window + 1}..{r}).",
                                              tuple(sorted((set(fits) | consistent) - {code}))))
            else:
                h, r = map(int, (measurable & (first_seen == arange - width + 1)).nonzero()[-1])
                code = "window-off-by-one" if abs(width - window) == 1 else "window-size-wrong"
                what = f"one {'wider' if width > window else 'narrower'} than" if code == "window-off-by-one" else "not"
                off = abs(width - window)
                side = (f"its far side starts {off} key{'s' if off > 1 else ''} "
                        f"{'too early' if width > window else 'too late'}; the near side (the row itself) is right")
                findings.append(WindowFinding(code, f" The measured window is {width} keys, {what} WINDOW = "
                                              f"{window}: row {r} sees keys {int(first_seen[h, r])}..{r}, not "
                                              f"{r - window + 1}..{r} - {side}.",
                                              tuple(sorted(consistent - {code})), ("", width, window)))
            break
        else:
            if too_old.any():
                h, r = divmod(int(torch.where(too_old, weights, 0.0).sum(dim=-1).argmax()), seq)
                keys = too_old[h, r].nonzero().flatten().tolist()
                edge = _far_edge_words(first_seen, floor, usable, window, block_m, block_n)
                findings.append(WindowFinding("weight-outside-window", f" Row {r} puts "
                                              f"{float(weights[h, r, keys].sum()):.2f} of its weight on {_span(keys)}, "
                                              f"before its window (keys {r - window + 1}..{r})."
                                              f"{_where_too_old(too_old, floor, block_n, window)}"
                                              f"{edge}"))
            if missed.any():
                h, r = map(int, missed.any(dim=-1).nonzero()[0])
                keys = missed[h, r].nonzero().flatten().tolist()
                blocks = sorted({c // block_n for c in keys})
                # a block the map records as unvisited, and of which no row of the query block
                # weighs any key (a tile that straddles blocks reads keys of a block it never records)
                tile = seen[h, (r // block_m) * block_m:(r // block_m + 1) * block_m]
                skipped = [j for j in blocks if int(visits[h, r // block_m, j]) == 0
                           and not bool(tile[:, j * block_n:(j + 1) * block_n].any())]
                why = (f" (K/V block{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} "
                       f"{'were' if len(skipped) > 1 else 'was'} not visited)") if skipped else ""
                own = " - its own key among them" if r in keys else ""
                findings.append(WindowFinding("window-keys-missed", f" Row {r} gives no weight to "
                                              f"{_span(keys)} of its window{own}{why}."
                                              + _first_block_lost(missed, allowed, visits, finite, block_m, block_n)))
    # the general facts any window finding here also states: weight before the window, keys missed
    general = (("weight-outside-window",) if bool(too_old.any()) else ()) + (
        ("window-keys-missed",) if bool(missed.any()) else ())
    for f in findings:
        if f.code != "future-keys-seen":
            f.fits = tuple(sorted(set(f.fits) | (set(general) - {f.code})))
    nan_rows = (~finite).any(dim=0).nonzero().flatten().tolist()
    if findings and nan_rows:
        findings[0].detail = (findings[0].detail[:-1] + f"; {_span(nan_rows, 'row')} "
                              f"{'comes' if len(nan_rows) == 1 else 'come'} out NaN.")
    return done(findings)


def _where_too_old(too_old: torch.Tensor, floor: torch.Tensor, block_n: int, window: int) -> str:
    """Where the keys weighed before the window lie against the first K/V block the loop
    visits for each row, in words, where that tells the loop's blocks apart: all in later
    blocks while the first blocks hold such keys unweighed (the far side is cut in the first
    block only), or all in the first block ("" otherwise)."""
    seq = too_old.shape[-1]
    cols = torch.arange(seq, device=too_old.device)[None, None, :]
    rows = torch.arange(seq, device=too_old.device)[None, :, None]
    in_first = (cols >= floor[..., None]) & (cols < floor[..., None] + block_n)
    before = cols <= rows - window  # keys before each row's window
    first_old, later_old = bool((too_old & in_first).any()), bool((too_old & ~in_first).any())
    if later_old and not first_old and bool((before & in_first & ~too_old).any()):
        return (" Every such key lies in a later K/V block than the first one the loop visits for its row, while "
                "the first blocks' keys before the window get no weight: the far side is cut in the loop's first "
                "block only.")
    if first_old and not later_old:
        return " Every such key lies in the first K/V block the loop visits for its row."
    return ""


def _far_edge_words(first_seen: torch.Tensor, floor: torch.Tensor, usable: torch.Tensor, window: int,
                    block_m: int, block_n: int) -> str:
    """Where each row's first weighed key lies, where every row the read-out speaks for fits
    one rule that is not the row's own window (blind round 9, w47 and w55): the window of its
    query block's first row, or its own window's first key rounded down to a K/V block
    ("" otherwise).  Each rule is cut by the first block the loop visits, as the kernel is."""
    seq = first_seen.shape[-1]
    rows = torch.arange(seq, device=first_seen.device)
    own = torch.maximum((rows - window + 1).clamp(min=0), floor)
    rules = (
        ((rows // block_m * block_m - window + 1).clamp(min=0),
         " Every row of a query block weighs from the key where its first row's window starts "
         "(start_m * BLOCK_M - WINDOW + 1) on, as if the far side were the tile's first row's, not each row's own."),
        ((rows - window + 1).clamp(min=0) // block_n * block_n,
         " Each row weighs from the start of the K/V block that holds its window's first key on, as if the far "
         "side were rounded down to a whole block."),
    )
    for start, words in rules:
        predicted = torch.maximum(start, floor)
        if bool((first_seen == predicted)[usable].all()) and bool((predicted != own)[usable].any()):
            return words
    return ""


def bound_visits(checked: list[Checked], block_m: int, block_n: int) -> dict[str, tuple[int, str]]:
    """Visits, over every case's visit map, to K/V blocks wholly before a query block's
    window ("before") or wholly after its last row ("after"): how many, and the first
    in words."""
    out: dict[str, tuple[int, str]] = {}
    for side in ("before", "after"):
        count, example = 0, ""
        edge = True  # every visit before a window is the block just before a window that starts on a block edge
        edges = 0  # query blocks whose first row's window starts exactly on a block boundary
        for one in checked:
            visits, case = one.launch.visits, one.case
            if visits is None:
                continue
            spans = needed_blocks(case.seq, case.window, block_m, block_n)
            n_n = visits.shape[-1]
            per_pair = (visits != 0).sum(dim=0).cpu().tolist()  # (n_m, n_n): heads that visited each pair
            for i, (lo, hi) in enumerate(spans):
                on_edge = i * block_m - case.window + 1 == lo * block_n and lo > 0
                edges += on_edge
                edge = edge and (not on_edge or side != "before" or bool(per_pair[i][lo - 1]))  # each one visited
                for j in range(n_n):
                    if per_pair[i][j] and (j < lo if side == "before" else j > hi):
                        count += per_pair[i][j]
                        edge = edge and on_edge and j == lo - 1
                        if not example:
                            first = i * block_m
                            last = min(first + block_m, case.seq) - 1
                            keys = f"keys {j * block_n}..{min((j + 1) * block_n, case.seq) - 1}"
                            why = (f"its rows' windows start at key {max(first - case.window + 1, 0)} or later"
                                   if side == "before" else f"its last row is {last}")
                            example = (f"on the {case.name} case (seq={case.seq}, window={case.window}), query block "
                                       f"{i} (rows {first}..{last}) visited K/V block {j} ({keys}), but {why}.")
        if side == "before" and count and edge:  # (blind round 23, 06: lo from start_m * BLOCK_M - WINDOW)
            example += (" These visits are exactly the blocks just before the query blocks whose first row's window"
                        f" starts on a block boundary ({edges} such query blocks over all cases, each with one): the"
                        " lower bound is one key early - the first row's oldest key is start_m * BLOCK_M - WINDOW + 1,"
                        " not start_m * BLOCK_M - WINDOW.")
        out[side] = (count, example)
    return out


def uncounted_blocks(checked: list[Checked], block_m: int, block_n: int) -> str:
    """On a check whose every case passed: the (query block, K/V block) pairs the
    window needs that the visit map records as unvisited, in words ("" when none).
    The output is right, so the keys of those blocks were read: by tiles recorded
    at another block (a loop whose tiles start between block boundaries records each
    tile at the block of its first key, start_n // BLOCK_N) or not recorded at all.
    The tutor cannot count such a loop's work: said as a finding, never "solved"."""
    total, example = 0, ""
    for one in checked:
        visits, case = one.launch.visits, one.case
        if visits is None:
            continue
        ideal = ideal_visits(case.seq, case.window, block_m, block_n)
        per_pair = (visits != 0).sum(dim=0).cpu().tolist()
        heads = visits.shape[0]
        for i, row in enumerate(ideal):
            for j, want in enumerate(row):
                if want and per_pair[i][j] < heads:
                    total += heads - per_pair[i][j]
                    if not example:
                        example = (f"on the {case.name} case (seq={case.seq}, window={case.window}), query block {i} "
                                   f"needs K/V block {j} and {heads - per_pair[i][j]} of its {heads} heads recorded "
                                   f"no visit to it")
    if not total:
        return ""
    return (f" The output is right on every case, yet {total} needed (query block, K/V block) visits were not "
            f"recorded over all cases: {example}.")


def agreed_findings(readouts: dict[str, list[WindowFinding]]) -> list[WindowFinding]:
    """The read-out findings every case read out supports: a code is kept when each
    case found it, or a finding its measurement also fits (:attr:`WindowFinding.fits`).
    The detail is that of the first case that found the code itself."""
    if not readouts:
        return []
    common: set[str] | None = None
    for found in readouts.values():
        codes = {c for f in found for c in (f.code, *f.fits)}
        common = codes if common is None else common & codes
    assert common is not None
    kept: dict[str, WindowFinding] = {}
    for found in readouts.values():
        for f in found:
            # one code per fact: a code another kept finding also fits (or that fits it) says it twice
            twice = any(f.code in k.fits or c in f.fits for c, k in kept.items())
            if f.code in common and not twice:
                kept.setdefault(f.code, f)
    said = list(kept.values())
    widths = [f.width for found in readouts.values() for f in found if f.width is not None]
    for i, f in enumerate(said):
        if f.code in ("window-size-wrong", "window-off-by-one") and len(widths) > 1:
            each = ", ".join(f"{keys} keys on the {name} case (WINDOW = {window})" for name, keys, window in widths)
            said[i] = dataclasses.replace(f, detail=f"{f.detail} Measured windows: {each}.")
    return said


def window_hits(visits: torch.Tensor, case: Case, block_m: int, block_n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (batch*H, seq) bools from the visit map: does the first K/V block visited
    for each row's query block hold a key of the row's window; does any visited one?"""
    seq, window = case.seq, case.window
    rows = torch.arange(seq, device=visits.device)
    starts = torch.arange(visits.shape[-1], device=visits.device) * block_n
    ends = (starts + block_n).clamp(max=seq) - 1
    visited = visits[:, rows // block_m, :] != 0  # (heads, seq, n_n)
    holds = (starts[None, :] <= rows[:, None]) & (ends[None, :] >= (rows - window + 1).clamp(min=0)[:, None])
    hit = visited & holds[None]
    index = torch.arange(visits.shape[-1], device=visits.device).expand_as(visited)
    first = torch.where(visited, index, visits.shape[-1]).min(dim=-1).values  # (heads, seq)
    first_hit = torch.gather(hit, -1, first.clamp(max=visits.shape[-1] - 1)[..., None])[..., 0] & visited.any(-1)
    return first_hit, hit.any(dim=-1)


# -- the diagnosis ---------------------------------------------------------------------------

def _head(flat: int, case: Case, kv: bool = False) -> str:
    per = case.heads_kv if kv else case.heads
    b, h = divmod(flat, per)
    return f"{h}" if case.batch == 1 else f"{h} of sequence {b}"


def _where(one: Checked) -> str:
    case = one.case
    return f" (seen on the {one.result.name} case, seq={case.seq}, window={case.window})"


def wrong_kv_heads(depends: list[set[int]], case: Case) -> dict[int, tuple[set[int], int]]:
    """Query heads (flattened) whose output depends on other K/V heads than the
    one their group shares: {query head: (K/V heads it depends on, the right one)}."""
    wrong = {}
    for qflat, deps in enumerate(depends):
        b, h = divmod(qflat, case.heads)
        should = b * case.heads_kv + h // case.group
        if deps != {should}:
            wrong[qflat] = (deps, should)
    return wrong


def _describe_heads(wrong: dict[int, tuple[set[int], int]], case: Case, where: str,
                    depends: list[set[int]] | None = None, dead: frozenset[int] = frozenset(),
                    passed: list[Case] | None = None) -> str:
    """The wrong heads in words; ``dead``: the query heads (flattened) whose output is NaN/Inf
    everywhere, which no change of a K/V head moves (blind round 21, 06/w15: V read at q's
    offset, its last heads past V's end while their keys came from a right head)."""
    parts: list[str] = []
    why = (" (its output is NaN, the guard band's, whatever each K/V head holds, so what its other loads read is"
           " not measured)")  # said with the first such head
    for qflat, (deps, should) in list(wrong.items())[:3]:
        if deps:
            read = ", ".join(_head(g, case, kv=True) for g in sorted(deps))
            parts.append(f"query head {_head(qflat, case)} reads K/V head {read}, not {_head(should, case, kv=True)}")
        elif qflat in dead:
            parts.append(f"query head {_head(qflat, case)} reads past the last K/V head in its keys or its values,"
                         f" where it should read {_head(should, case, kv=True)}{why}")
            why = ""
        else:
            parts.append(f"query head {_head(qflat, case)} reads none of the K/V heads "
                         f"(past the last one), not {_head(should, case, kv=True)}")
    more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
    # measured: which sequences hold the wrong heads
    # (blind round 15, w04: a K/V head of off_bh // G beside the batch offset counts the batch twice)
    later_only = ("" if case.batch == 1 or any(q < case.heads for q in wrong) else
                  " Every query head of sequence 0 reads its own K/V head and only later sequences' do not: what"
                  " goes wrong grows with the sequence, so look at how far apart the sequences' K/V heads are -"
                  " the batch offset (H_KV heads per sequence), or a K/V head computed from the program's (batch,"
                  " head) index rather than the head alone, which adds a batch term twice.")
    return (f" Measured by changing one K/V head at a time: {'; '.join(parts)}{more}"
            f" ({case.heads} query heads, {case.heads_kv} K/V head{'s' if case.heads_kv > 1 else ''}; {where[2:-1]})."
            f"{head_map(depends, case, min(wrong) // case.heads, dead)}{later_only}"
            f"{_batch_index_words(wrong, case, dead, passed or [])}")


def _sequence_index_law(q: int, c: Case, divisor: int) -> int:
    """The K/V head (flattened) query head ``q`` (flattened) reads with the sequence index
    off_bh // ``divisor`` beside the right head within the sequence."""
    return (q // divisor) * c.heads_kv + (q % c.heads) // c.group


def _batch_index_words(wrong: dict[int, tuple[set[int], int]], case: Case, dead: frozenset[int],
                       passed: list[Case]) -> str:
    """Where every query head's K/V head, measured, is that of a sequence index off_bh // H_KV (or
    // G) beside the right head h // G: heads read, or past the K/V tensor's end, exactly as that index
    puts them (blind round 23, 06: off_b = off_bh // H_KV, told as a wrong head formula); "" otherwise,
    and where that index would have read a wrong head on a case that ``passed`` (blind round 25, 06
    b04: h // H_KV as the K/V head fits it at 2 heads on 1, and passes 4 on 2, which it does not)."""
    total = case.batch * case.heads_kv
    for name, attr in (("H_KV", "heads_kv"), ("H // H_KV", "group")):
        divisor: int = getattr(case, attr)
        if divisor == case.heads:
            continue  # that is the right index

        def law(q: int, d: int = divisor) -> int:
            return _sequence_index_law(q, case, d)

        if any(_sequence_index_law(q, c, getattr(c, attr)) != _sequence_index_law(q, c, c.heads)
               for c in passed for q in range(c.batch * c.heads)):
            continue  # refuted: a case it would have failed passed

        fits = all((law(q) >= total) if q in dead else (deps == {law(q)}) for q, (deps, _) in wrong.items())
        right = all(law(q) == q // case.heads * case.heads_kv + (q % case.heads) // case.group
                    for q in range(case.batch * case.heads) if q not in wrong)
        if wrong and fits and right:
            return (f" Every query head's K/V head is, measured, the one a sequence index of off_bh // {name}"
                    " gives beside the right head within the sequence, h // (H // H_KV): the sequence index is"
                    f" off_bh // {name} where off_bh // H belongs (H query heads per sequence), so the K/V offset"
                    " lands in a later sequence's heads, or past the K/V tensor's end.")
    return ""


def split_heads(keys: list[set[int]], values: list[set[int]], case: Case, b: int = 0,
                dead: frozenset[int] = frozenset()) -> str:
    """The heads the keys (changing K alone) and the values (changing V alone) of sequence
    ``b``'s query heads come from, in words, where the two maps differ ("" where they agree:
    then the map above says it).  A ``dead`` query head (output NaN everywhere) moves with
    nothing, so neither map reaches it: "?", not "none"."""
    heads = range(b * case.heads, (b + 1) * case.heads)
    if all(keys[i] == values[i] for i in heads if i not in dead) or case.heads > 16:
        return ""

    def names(sets: list[set[int]]) -> str:
        return ", ".join("?" if i in dead else "+".join(_head(g, case, kv=True) for g in sorted(sets[i])) or "none"
                         for i in heads)

    of = "" if case.batch == 1 else f" of sequence {b}"
    unread = "" if not dead.intersection(heads) else (
        "; ?: a head whose output is NaN whatever each K/V head holds, so neither is measured there")
    return (f" Changing K alone and V alone, the keys and the values come from different heads: keys of query heads "
            f"0..{case.heads - 1}{of} from K/V heads {names(keys)}; values from {names(values)}"
            f" (right for both: {', '.join(str(h // case.group) for h in range(case.heads))}{unread}).")


def straddled_heads(keys: list[set[int]], values: list[set[int]], case: Case) -> str:
    """Where a query head's keys alone (or values alone) come from two K/V heads or more, in
    words: no head index gives that (a mapping picks one head), so the load's (batch, K/V
    head) base offset lands between heads' rows; "" otherwise."""
    for side, sets in (("keys", keys), ("values", values)):
        two = next((h for h, read in enumerate(sets) if len(read) > 1), None)
        if two is not None:
            read = "+".join(_head(g, case, kv=True) for g in sorted(sets[two]))
            return (f" The {side} of query head {two % case.heads} come from K/V heads {read} at once: a head index"
                    " picks one head, so it is not the group mapping but the K/V base offset, which lands between"
                    " two heads' rows (a factor missing from it: the row length HEAD_DIM, or N_CTX).")
    return ""


def head_map(depends: list[set[int]] | None, case: Case, b: int = 0, dead: frozenset[int] = frozenset()) -> str:
    """The whole measured map of sequence ``b``'s query heads, against the right one, in
    words ("" for more than 16 heads); a K/V head of another sequence is named with it, and a
    ``dead`` head (output NaN everywhere, moved by no K/V head) as past the last one."""
    if depends is None or case.heads > 16:
        return ""

    def read(h: int) -> str:
        heads = sorted(depends[b * case.heads + h])
        names = [str(g % case.heads_kv) if g // case.heads_kv == b else
                 f"{g % case.heads_kv} of sequence {g // case.heads_kv}" for g in heads]
        return "+".join(names) if names else "past the last" if b * case.heads + h in dead else "none"

    measured = ", ".join(read(h) for h in range(case.heads))
    right = ", ".join(str(h // case.group) for h in range(case.heads))
    of = "" if case.batch == 1 else f" of sequence {b}"
    return f" The K/V head each query head 0..{case.heads - 1}{of} reads: {measured} (right: {right})."


def diagnose(
    drill: Drill,
    module: ModuleType,
    checked: list[Checked],
    visits: VisitMap | None,
    device: str,
    generator: torch.Generator,
    guard_findings: list[GuardFinding] | None = None,
) -> list[Diagnosis]:
    """Everything worth saying about a check that ran, in steps that each return their
    findings: which outputs were written (:func:`_outputs_written`), a loop that runs
    outside the sequence (:func:`_loop_outside`), what the written outputs measure
    (:func:`_measured`: the head mapping, the NaN rows, the read-out windows), the visit
    maps (:func:`_visit_findings`) and the guard bands.  ``guard_findings`` (when given)
    collects what the guard bands saw: the margins each launch's stores changed, and
    where NaN said nowhere else came from."""
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    # every margin a store changed is recorded; the output's are said as store-out-of-bounds and
    # the visit map's as the loop codes below (the kernel stores into nothing else: a store into
    # an input's margin is recorded, and the output it missed is said as unwritten-output).
    # Read now, as the correctness launches left them, before any probe launches.
    banded = [shared.Banded.of(one.launch.bands, one.result, _where(one)) for one in checked]
    # the long-sum case (q = 0, V's column 0 at 512) reads nothing out; it is said only where all else passed
    sums = [one for one in checked if one.case.long_sum]
    # the far-below case (every score near -120) likewise: said only where all else passed
    below = [one for one in checked if one.case.far_below]
    checked = [one for one in checked if not one.case.long_sum and not one.case.far_below]
    codes, written = _outputs_written([c for c in checked if not c.result.passed])
    outside, started_before = _loop_outside(checked, module)
    codes.add(outside)
    if started_before:
        # what such a kernel outputs follows from loading keys before key 0
        # (NaN from the tutor's margins, or another head's keys): said above.
        # A loop past the end is only wasted work (a finding) while col_ok masks
        # its loads; without the masks the guard bands say read-past-end.
        written = []
    nan_source: Checked | None = None
    if written:
        passed = [one.case for one in checked if one.result.passed]
        measured, nan_source = _measured(drill, module, written, device, generator, block_m, block_n, passed)
        codes.add(measured)
    if started_before:  # its stores below block 0 land in the map's previous rows: no cell is read for bounds
        codes["loop-before-key-0"] += (" Its visits below block 0 land in the visit map's previous row, so the"
                                       " map's other cells are not read as the blocks your loop visited.")
    elif "grid-past-the-end" in codes:  # programs past the last query block record into the next rows
        codes["grid-past-the-end"] += (" Those programs' visits land in the rows of the next (batch, head), so the"
                                       " map's cells are not read as the blocks your loop visited.")
    elif _whole_heads_unwritten(checked):
        # programs that write no head record their visits somewhere: program ids swapped with the grid unchanged
        # (blind round 12, w40) put a query block past the last one into another head's map rows, which then
        # read as a loop past the end or past the query block; no loop bound is read from such a map
        codes.pop("loop-past-the-end", None)
        codes["unwritten-output"] += (" With whole heads unwritten, the programs may not be the (query block,"
                                      " head) pairs the visit map is indexed by (program ids read from the wrong"
                                      " grid axes record their visits in other heads' rows), so its cells are not"
                                      " read as the blocks your loop visited.")
    else:
        codes.add(_visit_findings(checked, visits, block_m, block_n))
    # NaN no measurement explains: did it come from a load past the end?
    found, guard_said = shared.guard_report(banded, None if nan_source is None else _nan_probe(module, nan_source),
                                            outputs=("output", "visit map", "Q", "K", "V"))
    if guard_findings is not None:
        guard_findings += found
    # a read past the end is said first, then a write past it, then the rest (the margins a
    # passing launch read last); NaN a read past the end explains is not the kernel's own
    said = Findings((code, guard_said[code]) for code in ("read-past-end", "write-past-end") if code in guard_said)
    said.add(codes)
    said.add({code: detail for code, detail in guard_said.items() if code not in said})
    drop_explained_nan(said)
    failed = [one for one in checked if not one.result.passed]
    hostile_low = bool(failed) and all(one.case.name == "hostile" for one in failed) and all(
        _wrong_rows_all_low(one, drill.tolerance) for one in failed)
    if not failed or hostile_low:
        if hostile_low and any(not one.result.passed for one in below):
            # the hostile case's wrong rows are rows whose every score is far below 0 too: one cause, said once
            said.pop("wrong-output", None)
        said.add(_far_below_findings(below, drill.tolerance, hostile_failed=hostile_low))
    elif all(one.case.name == "hostile" for one in failed) and ("wrong-output" in said or "nan-in-output" in said):
        # only the hostile case fails, and nothing above named why: its wrong rows against the
        # keys a maximum taken before the mask would take in (blind round 21, 06/w11).  Such rows
        # come out 0 or 0/0: on a GPU (seq=300, run 31) one of them was NaN
        before = _max_before_mask(failed[0], block_m, block_n, drill.tolerance)
        if before:
            said.pop("wrong-output", None)
            said.pop("nan-in-output", None)
            said.say("max-before-mask", before)
    if not failed:
        said.add(_long_sum_findings(sums, drill.tolerance))
    return said.worded(drill)


def _first_block_lost(missed: torch.Tensor, allowed: torch.Tensor, visits: torch.Tensor, finite: torch.Tensor,
                      block_m: int, block_n: int) -> str:
    """Words where the keys rows miss are exactly, in every readable row, its window's keys in
    the first K/V block its loop visits that holds any of them (the visit map's cells, per query
    block), while loops visit more than one block: what the row's first block added was lost
    (blind round 22, 06/m37: acc = (acc + p·v) * alpha, whose alpha is 0 at the first block with
    a key: m_old is still -inf); "" otherwise.  ``missed``, ``allowed`` (heads or 1, seq, seq),
    ``visits`` (heads, query blocks, key blocks)."""
    seq = missed.shape[-1]
    hit = visits.to(missed.device) != 0
    if not bool(missed.any()) or not bool((hit.sum(-1) > 1).any()):
        return ""
    pos = torch.arange(seq, device=missed.device)
    n_n = hit.shape[-1]
    window = allowed.expand_as(missed)
    holds = torch.stack([window[..., j * block_n:(j + 1) * block_n].any(-1) for j in range(n_n)], -1)  # (h, seq, n_n)
    live = hit[:, pos // block_m, :] & holds
    first = torch.where(live.any(-1), live.int().argmax(-1), -1)  # (heads, seq)
    in_first = (pos // block_n)[None, None, :] == first[..., None]
    if not bool((missed == (window & in_first & finite[..., None])).all()):
        return ""
    return (" Every key missed, in every row, and no other, is one of its window's keys in the first K/V block"
            " its loop visits that holds any: what the loop added at the row's first block was lost after it was"
            " added. A rescale applied to the block just added, acc = (acc + p·v) * alpha, does exactly that: at"
            " that block alpha = exp2(m_old - m_new) is 0 (m_old is still -inf). Rescale what came before, then"
            " add: acc = acc * alpha + p·v.")


def _max_before_mask(one: Checked, block_m: int, block_n: int, tolerance: float) -> str:
    """The hostile case's wrong rows (each element held to its own allowance, as the verdict
    holds it) read against the keys outside each row's window that the blocks its visit map
    records hold (:func:`max_over_unseen_keys`); "" where no visit was recorded."""
    x, case = one.launch, one.case
    if x.visits is None or not bool((x.visits != 0).any()):
        return ""
    rows, cols = torch.arange(case.seq), torch.arange(case.seq)
    visited = (x.visits != 0).cpu()[:, rows // block_m, :]  # (batch*H, seq, n_n)
    loaded = visited[:, :, cols // block_n]  # (batch*H, seq, seq)
    allowed = hostile_allowance(x.q, x.k, x.v, one.expected, case.window, tolerance)
    error = (x.out.to(torch.float64) - one.expected).abs().nan_to_num(nan=float("inf"))
    bad = (error > allowed.to(error.device)).any(dim=-1).flatten(0, 1).cpu()
    s = reading.scores(x.q, x.k.repeat_interleave(case.group, dim=1)).cpu()
    return max_over_unseen_keys(s, window_mask(case.seq, case.window), bad, block_n, loaded)


LOW_SCORE = -10.0  # a row whose every visible score lies below this: p = exp2(score - 0) loses fp16's bits


def _wrong_rows_all_low(one: Checked, tolerance: float) -> bool:
    """Whether every wrong (head, row) output of the case is a row whose every score in its
    window lies below LOW_SCORE (natural units): what a running maximum started at 0 gets wrong."""
    bad = row_errors(one.launch.out.cpu(), one.expected.cpu(), per_head=True) > tolerance  # (batch*head, row)
    if not bool(bad.any()):
        return False
    scores = reading.scores(one.launch.q, one.launch.k.repeat_interleave(one.case.group, dim=1)).cpu()
    allowed = window_mask(one.case.seq, one.case.window)
    top = scores.masked_fill(~allowed, float("-inf")).amax(dim=-1).reshape(bad.shape)
    return bool((top[bad] < LOW_SCORE).all())


def _far_below_findings(below: list[Checked], tolerance: float, hostile_failed: bool = False) -> Findings:
    """``nan-in-output`` or ``wrong-output`` for a failing far-below case (every other case
    passed, but the hostile one where ``hostile_failed``): which rows went wrong, all of them
    scores near -FAR_BELOW, and what they became."""
    found = Findings()
    for one in below:
        if one.result.passed:
            continue
        out = one.launch.out.cpu()
        bad = row_errors(out, one.expected.cpu(), per_head=True) > tolerance  # (batch*head, row)
        rows = sorted({int(r) for r in bad.nonzero()[:, -1].tolist()})
        wrong = out.reshape(-1, *out.shape[-2:])[bad]
        then = (", and the final division is then 0/0 (those rows are NaN)" if bool(wrong.isnan().all())
                else ", and those rows are then 0" if bool((wrong == 0).all()) else None)
        where = "in every row of the case" if len(rows) == one.case.seq else f"in rows {index_runs(rows)}"
        others = ("Every other case but the hostile one, whose wrong rows all have every score below"
                  f" {LOW_SCORE:.0f} too," if hostile_failed else "Every other case")
        subject = (f"{others} passed; on the far-below case (window {one.case.window},"
                   f" seq={one.case.seq}) {int(bad.sum())} of {bad.numel()} (head, row) outputs are wrong, {where}")
        code = "nan-in-output" if bool((~torch.isfinite(wrong)).any()) else "wrong-output"
        found.say(code, far_below_words(subject, then))
    return found


def _long_sum_findings(sums: list[Checked], tolerance: float) -> Findings:
    """``long-sum-wrong`` for a failing long-sum case (every other case passed): which rows of V's
    column 0 went wrong, and whether they are the rows whose sum of 128 or more keys passes fp16's range."""
    found = Findings()
    for one in sums:
        if not one.result.passed:
            keys = torch.clamp(torch.arange(1, one.case.seq + 1), max=one.case.window)
            case = f"the long-sum case (window {one.case.window}, seq={one.case.seq})"
            found["long-sum-wrong"] = long_sum_words(one.launch.out, one.expected, keys, tolerance, case)
    return found


def _outputs_written(failing: list[Checked]) -> tuple[Findings, list[Checked]]:
    """Step 0: the failing cases whose output was not all written, or written past its end
    (``unwritten-output``, ``store-out-of-bounds``), and the others: the cases read on (the
    rest of an unwritten output is not worth reading)."""
    found = Findings()
    written = []
    for one in failing:
        res = one.result
        where = _where(one)
        if res.unwritten:
            found.say("unwritten-output", f" {res.unwritten} elements were never written{where}."
                      + shared.unwritten_words(one.launch.out))
        if res.wrote_out_of_bounds:
            found.say("store-out-of-bounds", where + ".")
        if res.fully_written:
            written.append(one)
    return found, written


def _whole_heads_unwritten(checked: list[Checked]) -> bool:
    """Does a failing case leave some whole (batch, head) of its output unwritten?"""
    return any(one.launch.out.dim() == 4 and bool(shared.whole_heads_unwritten(one.launch.out).any())
               for one in checked if one.result.unwritten)


def _loop_outside(checked: list[Checked], module: ModuleType) -> tuple[Findings, bool]:
    """Step 0: a loop that runs outside the sequence, read from the visit map's margins, or
    a grid of more programs than (query blocks) x (batch, head) pairs, measured at the
    launch, whose programs past the last query block record visits past the map's rows;
    and whether a loop started before key 0 (what its output holds follows from that)."""
    found = Findings()
    strays = [c for c in checked if c.launch.visits_before or c.launch.visits_after]
    for one in strays:
        if one.launch.visits_before:
            found.say("loop-before-key-0", f" A visit was recorded at a K/V block index below 0{_where(one)}.")
        if one.launch.visits_after:
            batch, heads, seq, _ = one.launch.q.shape
            needed = -(-seq // int(module.BLOCK_M)) * batch * heads  # one program a (query block, batch·head)
            programs = max((x.get(cost.PROGRAMS, 0) for x in one.launch.launched), default=0)
            blocks = -(-seq // int(module.BLOCK_M))
            if programs > needed:
                found.say("grid-past-the-end", f" The launch ran {programs} programs for {needed} (query block,"
                          f" batch·head) pairs: cdiv({seq}, BLOCK_M = {module.BLOCK_M}) = {blocks} query blocks,"
                          f" {batch * heads} (batch, head) pairs{_where(one)}; a visit was recorded past the visit"
                          " map's last row.")
            else:
                found.say("loop-past-the-end", f" A visit was recorded past the last K/V block{_where(one)}.")
    return found, any(c.launch.visits_before for c in strays)


def _measured(
    drill: Drill, module: ModuleType, written: list[Checked], device: str, generator: torch.Generator,
    block_m: int, block_n: int, passed: list[Case] | None = None,
) -> tuple[Findings, Checked | None]:
    """Steps 1-3 on the failing cases whose outputs were written: which K/V head each query
    head reads, the NaN rows, and the window each case's read-out measures.  And the case
    whose NaN nothing here explains (None: none), for the guard bands to trace.  ``passed``: the
    cases that passed (a head formula that would have failed one is not said)."""
    found, wrong, rest = _head_mapping(drill, module, written, generator, passed or [])
    readouts = _WindowReadouts(module, device, generator, block_m, block_n)
    unread: list[Checked] = []  # failing cases read out whose weights show nothing wrong
    unexplained_nan: list[tuple[Checked, torch.Tensor]] = []
    nan_read = [(one, *_nan_rows(one, wrong if one is written[0] else {}, block_m, block_n)) for one in rest]
    # the cases agree or say nothing: the NaN codes are said only when every case with NaN
    # rows is explained by them (otherwise each case is read out and the NaN said as measured)
    agreed = all(explained for _, _, explained, nan_rows in nan_read if bool(nan_rows.any()))
    for one, said, explained, nan_rows in nan_read:
        if agreed:
            found.add(said)
            if explained:
                continue
        if bool(nan_rows.any()):
            unexplained_nan.append((one, nan_rows))
        if not readouts.read(one) and not wrong and not bool(nan_rows.any()):
            unread.append(one)
    said_window = agreed_findings(readouts.speaking())
    for window in said_window:
        found.say(window.code, window.detail)
    found.add(_window_verdict(readouts, unread, bool(wrong), bool(said_window), drill.tolerance))
    nan_found, nan_source = _unexplained_nan(unexplained_nan, bool(said_window), readouts.nan_rows, readouts.partly)
    found.add(nan_found)
    return found, nan_source


def _head_mapping(drill: Drill, module: ModuleType, written: list[Checked], generator: torch.Generator,
                  passed: list[Case]) -> tuple[Findings, dict[int, tuple[set[int], int]], list[Checked]]:
    """Step 1: which K/V head does each query head read?  Measured on the first failing case
    (``wrong-kv-head``).  The wrong heads, and the cases left to read on: what the head
    mapping explains needs nothing more; other cases may read the wrong heads too, so with
    a wrong mapping only the measured case is read on."""
    found = Findings()
    one, case = written[0], written[0].case
    depends = kv_heads_read(module, one, generator)
    # a head whose output is NaN/Inf everywhere moves with nothing (NaN stays NaN whatever a K/V
    # head holds). Where some heads are and others read their K/V heads, those read past the last
    # K/V head (the guard band's NaN); where every head is, nothing was measured: the NaN comes
    # from the kernel's arithmetic, and no head is said to read none
    dead = (~torch.isfinite(one.launch.out.to(torch.float32))).flatten(2).all(dim=-1).flatten()
    wrong = {q: read for q, read in wrong_kv_heads(depends, case).items() if read[0] or not bool(dead.all())}
    if wrong:
        # keys and values apart: a kernel can take K from one head and V from another
        keys, values = (kv_heads_read(module, one, generator, side) for side in "KV")
        nan_heads = frozenset(dead.nonzero().flatten().tolist())
        b = min(wrong) // case.heads
        found.say("wrong-kv-head", _describe_heads(wrong, case, _where(one), depends, nan_heads, passed)
                  + split_heads(keys, values, case, b, nan_heads) + straddled_heads(keys, values, case))
    out = one.launch.out.to(torch.float64).flatten(0, 1)
    error = (out - one.expected.flatten(0, 1)).abs().nan_to_num(nan=float("inf"))
    bad_heads = {i for i in range(out.shape[0]) if float(error[i].max()) > drill.tolerance}
    rest = [one] if wrong else written
    return found, wrong, [x for x in rest if not (x is one and bad_heads <= set(wrong))]


def _nan_rows(one: Checked, wrong: dict[int, tuple[set[int], int]], block_m: int,
              block_n: int) -> tuple[Findings, bool, torch.Tensor]:
    """Step 2: the case's NaN rows (those of a head in ``wrong`` are said already): the rows
    that see no key of their first visited block (``nan-empty-block``: an online-softmax
    update without the empty-row guard), or none at all (``window-keys-missed``)?  Its
    findings, whether they explain the case (nothing more to read), and its NaN rows."""
    found = Findings()
    case = one.case
    nan_rows = ~torch.isfinite(one.launch.out.to(torch.float32)).all(dim=-1).flatten(0, 1)
    keep = torch.tensor([i not in wrong for i in range(nan_rows.shape[0])], device=nan_rows.device)
    nan_rows = nan_rows[keep]  # NaN in a head that reads the wrong K/V head is said already
    if not bool(nan_rows.any()):
        return found, False, nan_rows
    assert one.launch.visits is not None  # run() always records them
    first_hit, any_hit = (t[keep] for t in window_hits(one.launch.visits, case, block_m, block_n))
    empty_first, no_key = any_hit & ~first_hit, ~any_hit
    guard_missing = bool(empty_first.any()) and bool((nan_rows == (empty_first | no_key)).all())
    if guard_missing:
        r = int(empty_first.any(dim=0).nonzero()[0])
        found.say("nan-empty-block", f" Row {r} is the first such row: its window starts at key "
                  f"{max(r - case.window + 1, 0)}, after the first block visited for it{_where(one)}.")
    if bool(no_key.any()) and (guard_missing or bool((nan_rows == no_key).all())):
        _, r = map(int, no_key.nonzero()[0])
        found.say("window-keys-missed", f" Row {r} sees no key at all, so its output is 0/0 = NaN: the loop "
                  f"visits no K/V block that holds a key of its window (keys {max(r - case.window + 1, 0)}..{r})"
                  f"{_where(one)}.")
        return found, True, nan_rows
    return found, guard_missing, nan_rows


class _WindowReadouts:
    """Step 3: which keys does each row weigh?  Read out on every failing case left
    unexplained, each at its own shape, once a case; a code is said only when the
    read-out of every one of them supports it (the cases agree, or less is said)."""

    def __init__(self, module: ModuleType, device: str, generator: torch.Generator, block_m: int, block_n: int):
        self.module, self.device, self.generator = module, device, generator
        self.block_m, self.block_n = block_m, block_n
        self.found: dict[str, list[WindowFinding]] = {}  # case -> what its read-out says
        self.nan_rows: set[int] = set()  # rows some read-out leaves NaN
        self.mute: set[str] = set()  # cases whose read-out has no row it can speak for, or only right ones
        self.partly: set[str] = set()  # of those, the cases with rows right and rows NaN
        self.slopes: dict[str, str] = {}  # the softmax temperature each read-out measured, in words
        self.untrusted: set[str] = set()  # cases whose output is no weighted sum of V: the read-out says nothing

    def _gap(self, weights: torch.Tensor, inputs: list[torch.Tensor], case: Case) -> float:
        """One launch more, on a random V with the read-out's q and k: how far the output strays
        from the read-out weights times V (:func:`reading.read_out_gap`)."""
        q, k = inputs
        # the same values in every K/V head, as the one-hot read-out has them: which head's V a
        # query head reads is the head mapping's to measure, not this
        v = torch.randn((case.batch, 1, case.seq, case.head_dim), generator=self.generator)
        v = v.expand(-1, case.heads_kv, -1, -1).contiguous().to(q.device, torch.float16)
        out = run(self.module, q, k, v, case.window).out.flatten(0, 1)
        return reading.read_out_gap(out, weights, v.repeat_interleave(case.group, dim=1).flatten(0, 1))

    def read(self, one: Checked) -> list[WindowFinding]:
        name = one.result.name
        if name not in self.found:
            inputs: list[torch.Tensor] = []
            weights, read_visits = weight_readout(self.module, one.case, self.device, self.generator, inputs)
            gap = self._gap(weights, inputs, one.case)
            if gap > reading.LINEAR_SLACK:  # the read-out says nothing of this kernel: no claim is made from it
                self.untrusted.add(name)
                self.mute.add(name)
                self.slopes[name] = reading.not_weighted_sum_words(gap, _where(one))
                self.found[name] = []
                return []
            # the true scores of the read-out's q and k, and softmax over each row's window
            scores = reading.scores(inputs[0], inputs[1].repeat_interleave(one.case.group, dim=1)).to(weights.device)
            allowed = window_mask(one.case.seq, one.case.window, weights.device)
            probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
            self.slopes[name] = temperature(weights, scores, allowed[None], one.case, self.block_n)
            if not reading.softmax_itself(weights, probs):  # weights of other scores: K read another way?
                self.slopes[name] += reading.k_layout_words(weights, inputs[0], inputs[1], allowed, one.case.group)
            moved = _values_off_keys(weights, probs, self.block_n)
            if moved is not None:  # the keys are weighed right and the values come from other rows
                found = [moved]
            else:
                support, _ = weight_readout(self.module, one.case, self.device, self.generator, zero_q=True)
                found = read_window(weights, read_visits, one.case, self.block_m, self.block_n, support)
                # values moved past the sequence (no weight anywhere) fit it too, as do values moved
                # by a shift where every row weighs one key (a window moved as much looks the same)
                if _no_weight_anywhere(weights) or value_rows.shifted_values(
                        weights, probs, 2 * self.block_n, min_keys=1) is not None:
                    found = [dataclasses.replace(f, fits=(*f.fits, "values-off-keys")) for f in found]
            zero = _masked_as_zero(weights, scores, allowed) if found else ""
            for f in found:
                if zero and f.code in ("future-keys-seen", "window-unmasked", "far-block-unmasked"):
                    f.detail += zero
                    zero = ""
                f.detail = f.detail[:-1] + _where(one) + "."
                if f.width is not None:
                    f.width = (name, f.width[1], f.width[2])
            nonfinite = ~torch.isfinite(weights).all(dim=-1)
            self.nan_rows |= set(nonfinite.any(dim=0).nonzero().flatten().tolist())
            if bool(nonfinite.any()) and not found:
                # no row the read-out can speak for, or the rows it can speak for show nothing
                # wrong and the rest come out NaN (said as such): it neither agrees nor disagrees
                self.mute.add(name)
                if not bool(nonfinite.all()):
                    self.partly.add(name)  # rows right and rows NaN: no other case's finding explains its NaN
            self.found[name] = found
        return self.found[name]

    def speaking(self) -> dict[str, list[WindowFinding]]:
        """What each read-out that can speak for some row says."""
        return {name: found for name, found in self.found.items() if name not in self.mute}


def _values_off_keys(weights: torch.Tensor, probs: torch.Tensor, block_n: int) -> WindowFinding | None:
    """``values-off-keys`` where the read-out's weights are softmax's own (``probs``, over each
    row's window) but sit on other value rows than their keys' (:mod:`value_rows`): V loaded at
    other rows than K, or some of its rows adding nothing.  None where the weights sit on their
    own keys' rows (what the window read-out then measures is the keys each row sees)."""
    shift = value_rows.shifted_values(weights, probs, 2 * block_n)
    if shift is not None:
        return WindowFinding("values-off-keys", value_rows.shifted_words(shift))
    dropped = value_rows.dropped_values(weights, probs)
    if dropped:
        return WindowFinding("values-off-keys", value_rows.dropped_words(weights, probs, dropped))
    return None


def _masked_as_zero(weights: torch.Tensor, scores: torch.Tensor, allowed: torch.Tensor) -> str:
    """" <measured>" where every key a row may not see (``allowed``) but weighs gets what a score
    of exactly 0 gets in that row (one weight for all of them, whatever their own ``scores``): a
    mask that sets the removed scores to 0, not -inf (blind round 20, 06/w14); "" otherwise, or
    where their own scores would give the same (the read-out cannot tell)."""
    finite = torch.isfinite(weights).all(-1, keepdim=True)
    w = weights.nan_to_num(0.0)
    outside = (w > value_rows.MEASURABLE) & ~allowed & finite
    inside = (w > value_rows.MEASURABLE) & allowed & finite
    rows = outside.any(-1) & inside.any(-1)
    if not bool(rows.any()) or bool((outside.any(-1) & ~rows).any()):
        return ""
    # a visible key's weight is exp(s_j - m) / l: a score of 0 gets that times exp(-s_j)
    at_zero = torch.where(inside, w * torch.exp(-scores), torch.zeros_like(w)).sum(-1) / inside.sum(-1).clamp(min=1)
    near = ((w - at_zero[..., None]).abs() <= 1e-4 + 0.02 * at_zero[..., None]) | ~outside
    own = torch.where(outside, at_zero[..., None] * torch.exp(scores), w)  # what their own scores would get
    own_fits = ((w - own).abs() <= 1e-4 + 0.02 * own) | ~outside
    if not bool(near[rows].all()) or bool(own_fits[rows].all()):
        return ""
    return (" The keys it should remove all weigh what a score of exactly 0 gets in their row (one weight for"
            " every such key of a row, whatever its own score): the mask sets their scores to 0 where -inf"
            " belongs, so exp(0 - m) keeps them in the softmax.")


def _no_weight_anywhere(weights: torch.Tensor) -> bool:
    """Whether the read-out gives no value row of the sequence any weight, on every finite row
    (there being one): what V read wholly from other rows (before the first, past the last)
    measures, as does an output that adds no value at all."""
    finite = torch.isfinite(weights).all(-1)
    return bool(finite.any()) and bool((weights[finite].abs() < value_rows.MEASURABLE).all())


def _other_head_words(one: Checked, tolerance: float) -> str:
    """:func:`readout.other_head_words` on a checked case: each K/V head repeated for the
    query heads of its group, so that a query head's own K/V is the one at its index."""
    x, group = one.launch, one.case.group
    return reading.other_head_words(x.out, one.expected, x.q, x.k.repeat_interleave(group, dim=1),
                                    x.v.repeat_interleave(group, dim=1),
                                    lambda q, k, v: window_reference(q, k, v, one.case.window), tolerance)


def _window_verdict(readouts: _WindowReadouts, unread: list[Checked], wrong: bool, said_window: bool,
                    tolerance: float) -> Findings:
    """Step 3's ``wrong-output`` where the read-outs name no cause: the failing cases whose
    weights show nothing wrong, or read-outs that differ with no one cause fitting all."""
    found = Findings()
    if unread and not wrong:
        one = unread[0]
        worst = "" if one.result.worst_row is None else f" The largest error is at row {one.result.worst_row}"
        odd = [name for name, said in readouts.speaking().items() if said]  # read-outs that do show a wrong key
        if one.result.name in readouts.untrusted:
            detail = f"{readouts.slopes[one.result.name]}{worst}{_where(one)}.{_other_head_words(one, tolerance)}"
        elif not odd:
            detail = (f" The measured weights show no key a row should not see and none it misses: look at "
                      "how they are weighed (the scale, the q and k each head loads) and what happens to the "
                      f"values.{readouts.slopes.get(one.result.name, '')}{worst}"
                      f"{_where(one)}.{_other_head_words(one, tolerance)}")
        else:
            detail = (f" The failing cases disagree: on the {', '.join(x.result.name for x in unread)} "
                      f"case{'s' if len(unread) > 1 else ''} the measured weights show no key a row should not "
                      f"see and none it misses, on the {', '.join(odd)} case{'s' if len(odd) > 1 else ''} they "
                      f"do{'' if said_window else ' (nothing that all of them share)'}.{worst}{_where(one)}.")
        found.say("wrong-output", detail)
    elif any(readouts.speaking().values()) and not said_window and not wrong:
        parts = [f"on the {name} case: {said[0].detail.strip()}" for name, said in readouts.found.items() if said]
        found.say("wrong-output", " The measured weights differ between the failing cases, and no one cause fits "
                  f"all of them - {'; '.join(parts)}")
    return found


def _unexplained_nan(unexplained: list[tuple[Checked, torch.Tensor]], said_window: bool,
                     readout_nan: set[int],
                     mute: frozenset[str] | set[str] = frozenset()) -> tuple[Findings, Checked | None]:
    """NaN rows nothing above explains (``nan-in-output``), and the first case that has them
    (NaN in a case whose read-out shows its other rows right, ``mute``, is not explained by
    another case's read-out)."""
    found = Findings()
    source: Checked | None = None
    for one, nan_rows in unexplained:
        rows = nan_rows.any(dim=0).nonzero().flatten().tolist()
        if said_window and set(rows) <= readout_nan and one.result.name not in mute:
            continue  # the read-out's finding leaves these rows no key: said there
        found.say("nan-in-output", f" {int(nan_rows.sum())} rows, between rows {rows[0]} and {rows[-1]}{_where(one)}.")
        source = source or one
    return found, source


def _visit_findings(checked: list[Checked], visits: VisitMap | None, block_m: int, block_n: int) -> Findings:
    """The visit maps: none recorded, visits to blocks wholly before a window or after a
    query block (every case's map), and on a check whose every case passed, needed
    visits the map does not count (``visits-uncounted``)."""
    if visits is None:
        return Findings()
    found = visit_findings([("", visits)], bounded=False, all_visited="")
    if found:  # no visit recorded
        return found
    summary = (f" ({visits.visited_blocks}/{visits.total_blocks} blocks visited on the default case; the window "
               f"needs {visits.ideal_blocks}, a fraction of {visits.ideal_blocks / visits.total_blocks:.3f}.)")
    uncounted = uncounted_blocks(checked, block_m, block_n) if all(c.result.passed for c in checked) else ""
    # a right output whose map leaves needed blocks unvisited records its tiles at other blocks than
    # they read (blind round 9, w64): a block it shows outside the window is then no measured visit
    bounds = bound_visits(checked, block_m, block_n)
    for code, side in (("lower-bound-open", "before"), ("upper-bound-open", "after")):
        count, example = bounds[side]
        if count and not uncounted:
            what = "before the window" if side == "before" else "after the query block"
            grows = _growing_waste(visits) if side == "before" else ""
            found.say(code, f" {count} visits were to blocks wholly {what}, over all cases: {example}{summary}{grows}")
    if uncounted:
        found.say("visits-uncounted", uncounted)
    return found


def _growing_waste(visits: VisitMap) -> str:
    """Where the default case's visits to blocks wholly before each query block's window
    grow with the query block, in words: the work per row then grows with r, as with no
    lower bound at all; "" where they do not (a block too many at the edge, say)."""
    waste = []
    for row, ideal in zip(visits.counts, visits.ideal, strict=False):
        first = next((j for j, needed in enumerate(ideal) if needed), len(ideal))
        waste.append(sum(1 for c in row[:first] if c))
    if len(waste) < 3 or waste[-1] < 2 or any(b < a for a, b in zip(waste, waste[1:], strict=False)):
        return ""
    return (f" On the default case those visits grow with the query block ({', '.join(map(str, waste))} blocks,"
            " query block by query block): the work per row grows with r instead of staying at WINDOW keys.")


def _nan_probe(module: ModuleType, source: Checked) -> shared.NanProbe:
    """The case whose NaN nothing measured explains, re-run with other margin fills."""
    def again(fills: dict[str, str]) -> torch.Tensor:
        return run(module, source.launch.q, source.launch.k, source.launch.v, source.case.window, fills).out

    return shared.NanProbe(source.result, again,
                           f"seq = {source.case.seq} (the {source.result.name} case, window={source.case.window})",
                           where_after=READ_AFTER)


READ_AFTER = {"Q": "The load of the last query block has no row mask (offs_m < N_CTX).",
              "K": "The load of the last K block has no mask (cols < N_CTX).",
              "V": "The load of the last V block has no mask (cols < N_CTX): its scores are masked,"
                   " but 0 * NaN is NaN."}


# -- the problem interface ---------------------------------------------------------------------

def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One launch of every case (windows and lengths are specialised apart): the variants
    the verdict compiles, launched from threads at once on a GPU so their compiles
    overlap.  Own seed: the check's random stream stays the same with or without them."""
    def one(case: Case) -> object:
        q, k, v = random_inputs(case, device, torch.Generator().manual_seed(0))
        return run(module, q, k, v, case.window)

    blocks = int(module.BLOCK_M), int(module.BLOCK_N)
    return [functools.partial(one, case) for case in cases_for(False, None, *blocks)]


def check_correctness(
    drill: Drill,
    module: ModuleType,
    interpreter: bool,
    device: str,
    generator: torch.Generator,
    shape: tuple[int, int, int, int] | None = None,
) -> Correctness:
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    checked: list[Checked] = []
    maps: list[VisitMap] = []
    cases = cases_for(interpreter, shape, block_m, block_n)
    for case in cases:
        q, k, v = random_inputs(case, device, generator)
        if case.name == "ragged":  # a last block of one row: its own key carries most of its weight
            k = launching.heavy_last_key(q, k)
        cost.step(f"the {case.name} case, shape {cost.shape_words((case.batch, case.heads, case.seq, case.head_dim))},"
                  f" {case.heads_kv} K/V heads, window {case.window}")
        launched = run(module, q, k, v, case.window)
        expected = window_reference(q, k, v, case.window)
        # the hostile case: each element held to its own allowance, in the tolerance's units
        allowed = hostile_allowance(q, k, v, expected, case.window, drill.tolerance) if case.q_scale > 1 else None
        result = evaluate(case.name, True, launched, expected, drill.tolerance, allowed)
        checked.append(Checked(case=case, result=result, launch=launched, expected=expected))
        if case.name == "default":
            assert launched.visits is not None  # run() always records them
            maps.append(visit_map(launched.visits, case, block_m, block_n))

    def diagnose_launches() -> Diagnosed:
        findings: list[GuardFinding] = []
        diagnosis = diagnose(drill, module, checked, maps[0] if maps else None, device, generator, findings)
        return Diagnosed(diagnosis=diagnosis, guard_findings=findings)

    return Correctness(cases=[c.result for c in checked],
                       shape=[cases[0].batch, cases[0].heads, cases[0].seq, cases[0].head_dim],
                       visits=maps, diagnose=diagnose_launches)


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    case = CPU_CASES[0] if interpreter else GPU_TIMING
    kv = (case.batch, case.heads_kv, case.seq, case.head_dim)
    q, k, v = launching.timing_tensors([(case.batch, case.heads, case.seq, case.head_dim), kv, kv], device, generator)
    out = torch.empty_like(q)
    mask = window_mask(case.seq, case.window, q.device)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    # SDPA's fused kernels take a dense mask only without GQA: give it K/V
    # expanded to every query head once, outside the timing
    k_all, v_all = (t.repeat_interleave(case.group, dim=1) for t in (k, v))
    student = {"full": lambda: module.attention(q, k, v, case.window, out=out)}
    shape = (case.batch, case.heads, case.seq, case.head_dim)

    def verify() -> str | None:
        """The timed launch once more (no visit map: the kernel's own configuration, an
        autotuned one say): the first and the last query head (with their K/V heads)
        against the float64 reference."""
        student["full"]()
        for b, h in ((0, 0), (case.batch - 1, case.heads - 1)):
            g = h // case.group
            expected = window_reference(q[b:b + 1, h:h + 1], k[b:b + 1, g:g + 1], v[b:b + 1, g:g + 1], case.window)
            got = out[b:b + 1, h:h + 1].to(torch.float64)
            err = float((got - expected).abs().nan_to_num(nan=float("inf")).max())
            if not err <= drill.tolerance:
                return (f"the timed launch (no visit map passed: the kernel's own configuration, e.g. an autotuned "
                        f"one) is wrong at shape {cost.shape_words(shape)}, window {case.window}: batch {b}, query "
                        f"head {h} (K/V head {g}) is off by up to {err:.3g} (tolerance {drill.tolerance:g}); its "
                        f"times are not shown")
        return None

    return TimedLaunches(
        shape=list(shape),
        student=student,
        baseline={"full": lambda: sdpa(q, k_all, v_all, attn_mask=mask)},
        inputs=(q, k, v),
        verify=verify,
    )


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 compile_warmups=compile_warmups)
