"""Split-KV decoding (drill 05): ``attention(q, k_cache, v_cache, lengths, out=, visits=)``.

One new query token per sequence, ``q`` (batch, heads, head_dim), against a KV
cache (batch, heads, max_len, head_dim) of which sequence b uses its first
``lengths[b]`` positions.  The cache past each length holds finite garbage
(stale keys and values, larger than the real ones), as a real cache does, so
a kernel that reads past a length gives a visibly wrong answer.

Correctness runs six cases on fresh random inputs into a poisoned output,
against a float64 reference: ``default`` (lengths from the whole cache down
to fewer positions than a block, scores of standard deviation 2), ``ragged``
(a cache of 161 or 1001 positions: every full sequence ends in a ragged
block), ``short`` (a 37-position cache, shorter than most slices: the later
slices of every sequence are empty) and ``hostile`` (scores of standard
deviation 100: exp overflows fp32 unless the kernel subtracts a maximum) and
``orders`` (lengths of one position and of whole blocks; scores in four levels
by quarter of each sequence, the top one 144 in the exp2 domain and each next
one 173 lower, past fp32's exp2 range: the maximum in the first, the last and a
middle slice, and in one sequence a drop inside a slice) and ``negative`` (every
score near -130: a running maximum started at 0 instead of -inf leaves every
weight 0).

A failing kernel's diagnosis tests the two kernels apart
(:mod:`split_kv_readout`): the launcher's kernel launches are recorded during
the correctness launches (the launcher contract gives no other way in), the
split kernel's slice states are compared with the reference's slice by slice,
and the merge kernel is re-launched alone, with the recorded arguments, on
slice states the tutor chooses, to read the weight it gives each slice.

The visit map is the default case's: rows are sequences, columns cache blocks
of ``BLOCK_N`` positions; a cell counts the heads whose programs read that
block, and the ideal is the ``ceil(length / BLOCK_N)`` blocks each sequence
holds.  The kernel stores, per block, the number (from 1) of the slice that
read it, so the harness also *measures* how the student's kernel cut each
cache into slices; the diagnosis uses that partition (which sequences span
several slices, which have empty ones) rather than assuming the solution's.
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
from tutor.harness.findings import Findings, drop_explained_nan, matches, passes_as_right, visit_findings
from tutor.harness.loader import LAUNCHER
from tutor.harness.numerics import LN2, LOG2E, spacing_at
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches
from tutor.harness.problems import split_kv_layout as layout
from tutor.harness.problems import split_kv_readout as apart
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention.block_shares import block_shares_words
from tutor.harness.problems.attention.hostile import (
    fp16_step_words,
    rounded_scores_words,
    row_errors,
    same_grid_words,
    score_units,
)
from tutor.harness.problems.attention.readout import one_hot_values
from tutor.harness.problems.query_offsets import query_offset_words
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, VisitMap

GARBAGE_K_SCALE = 3.0  # stale keys past a length: larger than real ones, so they would win the softmax
NEGATIVE_SCORE = 130.0  # the "negative" layout's scores: exp2(-130 * log2(e)) is 0 in fp32
HIGH_SCORE = 500.0  # the "high" layout's scores: 721 in the exp2 domain, where fp16 keeps steps of 0.5
HIGH_NOISE = 3.0  # their spread: every slice's maximum within a few of the others', so every slice weighs
GARBAGE_V_SHIFT = 3.0  # stale values past a length: shifted, so reading them moves the output


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    heads: int
    max_len: int
    head_dim: int
    score_std: float  # q is scaled so that q.k / sqrt(d) has about this standard deviation
    # "orders": fixed lengths (a whole cache of whole blocks, one position, three quarters, a
    # whole cache) and scores in four levels by quarter of each length, 120 apart (173 in the
    # exp2 domain: past fp32's range), the top one at +100 (2^144 overflows fp32): the maximum
    # in the first, (none: one position), last and a middle quarter of the sequence; in the
    # first sequence the second eighth already drops to the next level, so the drop lies
    # inside its first slice, a block or more after its maximum
    # "negative": random lengths, every score of every sequence near -130 (-188 in the exp2
    # domain: exp of it underflows fp32), so a running maximum that starts at 0, not -inf,
    # leaves nothing (a blind attempt passed every other case)
    # "high": random lengths, every score near +500 with a spread of 3, so the slices' maxima lie
    # within a few of each other and each slice's weight 2^(m_s - M) counts: a maximum kept in fp16
    # (steps of 0.5 near 721, the exp2 domain's) is off by up to 2^0.25 = 1.19 (blind round 22,
    # 05/m35 passed every other case; measured on the CPU: errors 0.05-0.12 over 8 seeds, 0.0009 for
    # every right kernel of that round)
    layout: str = "random"
    # launched with a split count of its own (num_splits=, :func:`split_count_for`), not the
    # module's NUM_SPLITS: the launcher's contract takes another count, and a combine kernel
    # that reads the module's constant is wrong there (blind round 10, w54)
    own_splits: bool = False

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.max_len, self.head_dim)


@dataclass(frozen=True)
class Plan:
    cases: tuple[Case, ...]
    timing: tuple[int, int, int, int]  # batch, heads, cache length (every sequence full), head_dim


CPU_PLAN = Plan(
    cases=(
        Case("default", 4, 2, 250, 64, 2.0),  # ~1 s per launch in the interpreter
        Case("ragged", 3, 1, 161, 64, 1.0, own_splits=True),
        Case("short", 2, 1, 37, 64, 1.0),
        Case("hostile", 2, 1, 200, 64, 100.0),
        # slices of two blocks: the first sequence's drop comes in its first slice's second block,
        # where a maximum taken of the block alone (not of m_i too) rescales by 2^173 (blind round 14, w35)
        Case("orders", 4, 1, 256, 64, 1.0, "orders"),
        # launched with 3 slices (own_splits): the merge's fourth, padding slot is masked, so a padding m
        # loaded as 0 (other=0.0, not -inf) lies 188 above every real one and underflows their weights
        Case("negative", 2, 1, 64, 64, 1.0, "negative", own_splits=True),
        Case("high", 4, 2, 160, 64, 1.0, "high"),
    ),
    timing=(2, 2, 250, 64),
)

GPU_PLAN = Plan(
    cases=(
        Case("default", 6, 8, 2000, 128, 2.0),
        Case("ragged", 3, 4, 1001, 64, 1.0, own_splits=True),
        Case("short", 2, 2, 37, 64, 1.0),
        # 1504 (a multiple of 16, as default's and orders'): Triton specialises the cache length on
        # divisibility by 16, so hostile shares their split variant (4 variants, not 5); its shorter
        # sequences still end inside a block (their lengths are drawn)
        Case("hostile", 4, 4, 1504, 128, 100.0),
        Case("orders", 4, 2, 1024, 128, 1.0, "orders"),
        # the default's and orders' split variant (1024 % 16 == 0), with 3 slices: a merge padding slot
        Case("negative", 2, 2, 1024, 128, 1.0, "negative", own_splits=True),
        Case("high", 4, 2, 1024, 128, 1.0, "high"),  # the default's and orders' split variant
    ),
    timing=(16, 32, 4096, 128),
)


def plan_for(interpreter: bool) -> Plan:
    return CPU_PLAN if interpreter else GPU_PLAN


# -- inputs -----------------------------------------------------------------------------
def ragged_lengths(batch: int, max_len: int, generator: torch.Generator) -> torch.Tensor:
    """Lengths from the whole cache down to a few positions, in shuffled order (for a
    batch of 3 or more): one sequence fills the cache, one holds at least half of it,
    one an eighth to a quarter, and the rest at most 20 positions (shorter than a
    block of 32).  A batch of 2 gets the first two, the full one last: its last
    block ends the whole cache tensor, so a load with no mask there reads past the
    tensor's end on every check (the guard band's NaN), not only on some."""
    def between(lo: int, hi: int) -> int:
        lo, hi = max(1, min(lo, max_len)), max(1, min(hi, max_len))
        return int(torch.randint(lo, hi + 1, (1,), generator=generator))

    pool = [max_len, between(max_len // 2, max_len - 1), between(max_len // 8, max_len // 4)]
    while len(pool) < batch:
        pool.append(between(1, 20))
    order = torch.randperm(batch, generator=generator).tolist()
    return torch.tensor([pool[i] for i in order[:batch]] if batch >= 3 else pool[:batch][::-1], dtype=torch.int32)


ORDER_LEVELS = {"first": (100.0, -20.0, -140.0, -260.0), "last": (-260.0, -140.0, -20.0, 100.0),
                "middle": (-20.0, 100.0, -140.0, -260.0)}
ORDER_OF_SEQUENCE = ("first", "first", "last", "middle")  # sequence 1 holds one position


def order_lengths(batch: int, max_len: int) -> torch.Tensor:
    """The whole cache, one position, three quarters of it, the whole cache (and so on):
    with a cache of whole blocks each full length is a multiple of the block."""
    pool = [max_len, 1, max_len * 3 // 4, max_len]
    return torch.tensor([pool[i % 4] for i in range(batch)], dtype=torch.int32)


def ordered_scores(q: torch.Tensor, k: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q[..., 0] = 16 and k[..., 0] = level / 2 (q.k / sqrt(d) gains 16 * k0 / sqrt(64) = 2 k0 at
    head_dim 64; scaled to head_dim), so the score of a position is its quarter's level plus the
    other dimensions' noise (standard deviation about 1): each level exactly representable in fp16.
    The first pattern's second eighth already holds the second level: a drop of 173 (exp2 domain)
    inside the first quarter, a block or more after the maximum."""
    b, h, n, d = k.shape
    q = q.clone()
    k = k.clone()
    q[..., 0] = 16.0
    per = d**0.5 / 16.0  # score = 16 * k0 / sqrt(d): k0 = level * sqrt(d) / 16
    for i in range(b):
        length = int(lengths[i])
        levels = ORDER_LEVELS[ORDER_OF_SEQUENCE[i % 4]]
        quarter = (torch.arange(length) * 4) // max(length, 1)
        if ORDER_OF_SEQUENCE[i % 4] == "first":
            quarter = torch.where((torch.arange(length) * 8) // max(length, 1) == 1, 1, quarter)
        k[i, :, :length, 0] = torch.tensor([levels[int(j)] for j in quarter]) * per
    return q, k


def random_inputs(
    case: Case, device: str, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k_cache, v_cache (fp16) and lengths (int32) for one case."""
    b, h, n, d = case.shape
    lengths = order_lengths(b, n) if case.layout == "orders" else ragged_lengths(b, n, generator)
    if case.layout == "negative":  # an odd length (a multiple of no block) leaves masked columns in its last block
        lengths = torch.where(lengths < n, lengths | 1, lengths)
    # q.k / sqrt(d) has standard deviation score_std when q ~ N(0, score_std^2) and k ~ N(0, 1)
    q = torch.randn((b, h, d), generator=generator) * case.score_std
    k = torch.randn((b, h, n, d), generator=generator)
    v = torch.randn((b, h, n, d), generator=generator)
    if case.layout == "orders":
        q, k = ordered_scores(q, k, lengths)
    if case.layout in ("negative", "high"):  # q.k / sqrt(d) = -NEGATIVE_SCORE + noise of ~0.3, or HIGH_SCORE + ~3
        toward = q / (q * q).sum(-1, keepdim=True)  # (b, h, d): q . toward = 1
        level, noise = (-NEGATIVE_SCORE, 0.3) if case.layout == "negative" else (HIGH_SCORE, HIGH_NOISE)
        k = level * d**0.5 * toward[:, :, None, :] + noise * k
    past = torch.arange(n)[None, :] >= lengths[:, None].long()  # (batch, max_len): stale cache
    k = torch.where(past[:, None, :, None], k * GARBAGE_K_SCALE, k)
    v = torch.where(past[:, None, :, None], v + GARBAGE_V_SHIFT, v)

    def half(x: torch.Tensor) -> torch.Tensor:
        return x.to(device=device, dtype=torch.float16)

    return half(q), half(k), half(v), lengths.to(device)


# -- the reference, and what each known mistake computes (float64) ------------------------
def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """(batch, heads, max_len) natural-log-domain scores q.k / sqrt(d), float64, on q's device
    (the cache's float64 copy is the large part: it stays where the cache is)."""
    s: torch.Tensor = torch.einsum("bhd,bhnd->bhn", q.double(), k.double()) / q.shape[-1] ** 0.5
    return s


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """softmax over each sequence's first lengths[b] positions, float64 (batch, heads, head_dim),
    computed on q's device and returned on the CPU."""
    s = _scores(q, k)
    keep = torch.arange(s.shape[-1], device=s.device)[None, :] < lengths.to(s.device).long()[:, None]
    s = s.masked_fill(~keep[:, None, :], float("-inf"))
    return torch.einsum("bhn,bhnd->bhd", torch.softmax(s, dim=-1), v.double()).cpu()


def slice_variants(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, slices: torch.Tensor,
                   block_n: int) -> dict[str, torch.Tensor]:
    """What a kernel outputs if it merges the slices it measurably used wrongly.

    ``slices`` is (batch*heads, n_blocks): the slice (from 0) that read each cache
    block, -1 where none did.  Returns {} when some needed block was read by no
    slice (the partition is then unknown)."""
    s, v64 = _scores(q, k).cpu(), v.double().cpu()
    batch, heads, _ = s.shape
    averaged = torch.empty(batch, heads, q.shape[-1], dtype=torch.float64)
    unscaled = torch.empty_like(averaged)
    for b in range(batch):
        n = int(lengths[b])
        for h in range(heads):
            owner = slices[b * heads + h].cpu().long().repeat_interleave(block_n)[:n]
            if len(owner) < n or bool((owner < 0).any()):
                return {}
            outs, sums, raw = [], [], []
            for g in torch.unique(owner).tolist():  # sorted, as Tensor.unique()
                sg, vg = s[b, h, :n][owner == g], v64[b, h, :n][owner == g]
                p = torch.exp(sg - sg.max())  # the slice's own maximum
                outs.append(p @ vg)
                sums.append(p.sum())
                raw.append((p @ vg) / p.sum())
            averaged[b, h] = torch.stack(raw).mean(0)
            unscaled[b, h] = torch.stack(outs).sum(0) / torch.stack(sums).sum()
    return {"partials-averaged": averaged, "no-max-rescale": unscaled}


def whole_variants(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                   block_n: int) -> dict[str, torch.Tensor]:
    """Mistakes whose output does not depend on how the cache was sliced."""
    s = _scores(q, k)  # on the cache's device; the variants come back to the CPU
    n_max = s.shape[-1]
    keep = torch.arange(n_max, device=s.device)[None, :] < lengths.to(s.device).long()[:, None]
    masked = s.masked_fill(~keep[:, None, :], float("-inf"))
    undivided = torch.einsum("bhn,bhnd->bhd", torch.exp(masked - masked.amax(-1, keepdim=True)), v.double())
    to_block = torch.clamp((lengths.cpu().long() + block_n - 1) // block_n * block_n, max=n_max)
    return {
        "no-final-division": undivided.cpu(),
        "reads-past-length/block": attend(q, k, v, to_block),
        "reads-past-length/cache": attend(q, k, v, torch.full_like(lengths.cpu(), n_max)),
    }


# -- one launch ---------------------------------------------------------------------------
@dataclass
class Launch:
    case: Case
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    lengths: torch.Tensor
    out: torch.Tensor
    guarded: shared.Guarded  # q, k, v, the output and the visit map, each inside a guard band
    visits: torch.Tensor  # (batch*heads, n_blocks): slice number (from 1) that read the block, 0: none
    expected: torch.Tensor
    result: CaseResult | None = None
    calls: list[apart.KernelCall] = dataclasses.field(default_factory=list)  # the launcher's kernel launches
    k_view: torch.Tensor | None = None  # the K cache as the launcher got it (inside its guard band)
    v_view: torch.Tensor | None = None  # the V cache as the launcher got it


def _result(launch: Launch) -> CaseResult:
    """The launch's evaluated case (set by :func:`evaluate` right after the run)."""
    assert launch.result is not None
    return launch.result


OWN_SPLITS = (3, 5)  # the count a case with its own passes: 3, or 5 where the module's NUM_SPLITS is 3


def split_count_for(module: ModuleType, case: Case) -> int | None:
    """The num_splits= this case's launch passes: None (the launcher's default) unless the case
    asks for its own count and the launcher takes the keyword (a launcher written without it
    is launched as it is: nothing in the contract's first arguments changes)."""
    if not case.own_splits:
        return None
    own = OWN_SPLITS[1] if getattr(module, "NUM_SPLITS", None) == OWN_SPLITS[0] else OWN_SPLITS[0]
    return launching.split_count(module, LAUNCHER, own)


def run(module: ModuleType, case: Case, device: str, generator: torch.Generator) -> Launch:
    q, k, v, lengths = random_inputs(case, device, generator)
    return launch_on(module, case, q, k, v, lengths)


def launch_on(module: ModuleType, case: Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              lengths: torch.Tensor, fills: dict[str, str] | None = None,
              poison: dict[str, frozenset[int]] | None = None, splits: int | None = None) -> Launch:
    """One launch on these inputs, each inside a guard band: ``fills`` maps "Q", "K",
    "V" to what their margins hold ("nan", the default; see :func:`guard.input_band`);
    ``poison``: kernel name -> arguments filled with a marker before it runs
    (:func:`split_kv_readout.recording`); ``splits``: a num_splits= of the caller's, not the case's."""
    b, h, n, d = case.shape
    block_n = int(module.BLOCK_N)
    fills = fills or {}
    guarded = shared.Guarded()
    margin = guarding.margin_elements(tuple(k.shape), 2 * block_n)
    views = [guarded.input(name, t, margin, fills.get(name, "nan")) for name, t in zip("QKV", (q, k, v), strict=True)]
    out = guarded.output("output", (b, h, d), device=str(q.device), margin=margin)
    grid = (b * h, -(-n // block_n))
    visits = guarded.visits("visit map", grid, str(q.device), guarding.margin_elements(grid, 2 * grid[1]))
    calls: list[apart.KernelCall] = []
    with apart.recording(module, calls, poison):  # notes each kernel launch, for testing the two kernels apart
        splits = split_count_for(module, case) if splits is None else launching.split_count(module, LAUNCHER, splits)
        count = {} if splits is None else {"num_splits": splits}
        returned = getattr(module, LAUNCHER)(*views, lengths, out=out, visits=visits, **count)
    shared.synchronize(q)
    out = shared.returned_tensor(f"{LAUNCHER}() returned", returned, out, (b, h, d))
    launch = Launch(case, q, k, v, lengths, out, guarded, visits, attend(q, k, v, lengths))
    launch.calls, launch.k_view, launch.v_view = calls, views[1], views[2]
    return launch


def evaluate(run_: Launch, tolerance: float) -> CaseResult:
    measured = shared.measure_output(run_.out, run_.expected)
    worst_seq = int(measured.error.amax(dim=(1, 2)).argmax())
    oob = bool(run_.guarded.band("output").changed())
    # worst_row, here: the sequence with the largest error
    return shared.case_result(run_.case.name, False, list(run_.case.shape), measured, tolerance, oob, worst_seq)


READ_AFTER = {"Q": "The load of q has no mask past head_dim.",
              "K": "The load of the last K block of a sequence has no mask (or one that lets positions past"
                   " the cache's end through).",
              "V": "The load of the last V block of a sequence has no mask (or one that lets positions past"
                   " the cache's end through)."}


def guard_report(module: ModuleType, launches: list[Launch]) -> tuple[list[GuardFinding], dict[str, str]]:
    """What the guard bands saw (:func:`tutor.harness.guarded.guard_report`): every margin a
    store changed (each launch), and for the first launch with NaN in its output, the input
    margins that NaN came from (re-run with finite margins, then NaN on one side of one input)."""
    banded = [shared.Banded.of(x.guarded.bands, _result(x), f" (the {x.case.name} case, cache {x.case.shape[2]})")
              for x in launches]
    nan: shared.NanProbe | None = None
    first = next((x for x in launches if _result(x).nonfinite), None)
    if first is not None:
        case = _result(first)

        def again(fills: dict[str, str]) -> torch.Tensor:
            return launch_on(module, first.case, first.q, first.k, first.v, first.lengths, fills).out

        nan = shared.NanProbe(case, again, f"the cache holds {case.shape[2]} positions (lengths "
                                           f"{first.lengths.cpu().tolist()})", where_after=READ_AFTER)
    return shared.guard_report(banded, nan)


# -- measurements ---------------------------------------------------------------------------
def blocks_needed(lengths: torch.Tensor, block_n: int) -> list[int]:
    return [-(-int(n) // block_n) for n in lengths.tolist()]


def visit_map(run_: Launch, block_n: int) -> VisitMap:
    b, h, n, _ = run_.case.shape
    read = (run_.visits.cpu() != 0).reshape(b, h, -1)
    needed = blocks_needed(run_.lengths.cpu(), block_n)
    n_blocks = read.shape[-1]
    return VisitMap(
        block_m=1,
        block_n=block_n,
        seq=n,
        heads=h,
        counts=read.sum(dim=1).tolist(),
        ideal=[[j < needed[i] for j in range(n_blocks)] for i in range(b)],
        label="cache blocks read per sequence (rows: sequences; a cell counts the heads that read it)",
    )


@dataclass(frozen=True)
class Slicing:
    """How the kernel measurably cut each sequence's cache (from the visits)."""

    used: list[int]  # per sequence: how many slices read some of its positions (max over heads)
    slices: int  # how many slices a (sequence, head) has: the launcher's split count
    # whether ``used`` may be said: not where the split run alone measured its slices holding other
    # positions than the visit map's blocks (overlapping slices: a block records only its last reader)
    countable: bool = True

    def has_empty(self, b: int) -> bool:
        return self.used[b] < self.slices


def slicing(run_: Launch, module: ModuleType, countable: bool = True) -> Slicing:
    """A slice that read nothing, or only blocks wholly past the length, is empty.  ``countable``:
    :attr:`Slicing.countable` (False where the split run alone measured otherwise: :attr:`Apart.map_counts_wrong`)."""
    b, h, _, _ = run_.case.shape
    visits = run_.visits.cpu().reshape(b, h, -1)
    needed = blocks_needed(run_.lengths.cpu(), int(module.BLOCK_N))
    used = [max(len(set(visits[i, j, : needed[i]].tolist()) - {0}) for j in range(h)) for i in range(b)]
    declared = split_count_for(module, run_.case) or getattr(module, "NUM_SPLITS", 0)
    declared = declared if isinstance(declared, int) else 0
    return Slicing(used=used, slices=max(declared, int(visits.max()) if visits.numel() else 0), countable=countable)


def _seqs(indices: list[int], lengths: list[int], sl: Slicing) -> str:
    if not sl.countable:
        return ", ".join(f"{i} (length {lengths[i]})" for i in indices)
    parts = [f"{i} (length {lengths[i]}, {sl.used[i]} slice{'s' if sl.used[i] != 1 else ''})" for i in indices]
    return ", ".join(parts)


def blocks_against_lengths(run_: Launch, block_n: int) -> str:
    """Where the cache blocks each sequence's programs read (any head) differ from the
    blocks its length holds, say how, sequence by sequence; "" where they agree or
    nothing was recorded.  When the counts read are the held counts shuffled, the
    programs read their lengths from the wrong sequences."""
    measured = visit_map(run_, block_n)  # per sequence: the heads that read each block, the blocks it holds
    if measured.visited_blocks == 0:
        return ""
    lengths = run_.lengths.cpu().tolist()
    read = [[j for j, heads in enumerate(row) if heads] for row in measured.counts]
    needed = [sum(row) for row in measured.ideal]
    counts = [len(blocks) for blocks in read]
    differ = []
    for i, blocks in enumerate(read):
        if blocks == list(range(needed[i])):
            continue
        missing = needed[i] - sum(1 for j in blocks if j < needed[i])
        past = sum(1 for j in blocks if j >= needed[i])
        parts = [f"{missing} of its {needed[i]} missing"] if missing else []
        parts += [f"{past} past its length"] if past else []
        differ.append(f"sequence {i} (length {lengths[i]}) read {counts[i]} block{'s' if counts[i] != 1 else ''}: "
                      + ", ".join(parts))
    if not differ:
        return ""
    text = " The cache blocks read do not follow the lengths: " + "; ".join(differ) + "."
    if sorted(counts) == sorted(needed):
        text += (" Each sequence read as many blocks as another sequence holds: look at which length each"
                 " program loads (one length per sequence, shared by its heads).")
    return text


def describe_wrong(run_: Launch, sl: Slicing, tolerance: float, block_n: int, visits_trusted: bool = True,
                   merge_pointer: str = ".") -> str:
    """Which sequences are wrong, whether that follows the number of slices they span (ended
    by ``merge_pointer``, :func:`merge_pointer`), and where the blocks they read differ from
    their lengths."""
    out = run_.out.double().cpu()
    err = (out - run_.expected).abs().nan_to_num(nan=float("inf")).amax(dim=(1, 2))
    lengths = run_.lengths.cpu().tolist()
    bad = [i for i in range(len(lengths)) if err[i] > tolerance]
    good = [i for i in range(len(lengths)) if err[i] <= tolerance]
    text = f" Wrong on sequence{'s' if len(bad) > 1 else ''} {_seqs(bad, lengths, sl)}"
    text += f"; right on {_seqs(good, lengths, sl)}." if good else "; no sequence is right."
    multi = {i for i in range(len(lengths)) if sl.used[i] > 1}
    if good and sl.countable and set(bad) == multi:
        text += " Exactly the sequences whose cache spans more than one slice are wrong" + merge_pointer
    elif good and set(bad) == {i for i in range(len(lengths)) if lengths[i] < max(lengths)}:
        text += " Exactly the sequences shorter than the cache are wrong: look at the lengths."
    # is each (sequence, head) the reference times one factor? (least squares, then the residual)
    ref = run_.expected
    factor = (out * ref).sum(-1) / (ref * ref).sum(-1).clamp_min(1e-30)
    residual = (out - factor[..., None] * ref).abs().amax(-1)
    if bool(torch.isfinite(out).all()) and not bool(out.any()):
        text += " The output is zero everywhere: nothing (or only zeros) reached it."
    elif bool(torch.isfinite(out).all()) and bool((residual <= 0.02 * out.abs().amax(-1).clamp_min(1e-6)).all()):
        text += (" On each (sequence, head) the output is the reference times one factor, from"
                 f" {float(factor.min()):.3g} to {float(factor.max()):.3g}.")
    else:
        text += (f" Largest error {float((out - ref).abs().nan_to_num(nan=float('inf')).max()):.3g}, where the"
                 f" reference's values are at most {float(ref.abs().max()):.3g}.")
    if not visits_trusted:
        return text + (f" (The visit map is not compared with the lengths: run alone, your split kernel's slices hold"
                       f" every position once, but not in whole blocks of {block_n}, so a block two slices share"
                       " records one of them.)")
    return text + blocks_against_lengths(run_, block_n)


def fingerprint(run_: Launch, block_n: int, tolerance: float) -> list[str]:
    """Every known mistake whose output this launch reproduces (variants equal to the
    right answer on this case say nothing and are skipped)."""
    slices = run_.visits - 1
    variants = {
        **slice_variants(run_.q, run_.k, run_.v, run_.lengths, slices, block_n),
        **whole_variants(run_.q, run_.k, run_.v, run_.lengths, block_n),
    }
    found: list[str] = []
    out = run_.out.cpu()
    for name, variant in variants.items():
        code = name.split("/")[0]
        if code in found or passes_as_right(variant, run_.expected, tolerance):
            continue
        # the output must lie clearly nearer the mistake's than the right answer: a variant a little past the
        # tolerance matches an output a little past it too, whatever its mistake (a dev check drew such inputs
        # for overlapping slices, slice_loop_from_zero, and was told no-final-division)
        if matches(out, variant, tolerance) and _largest_gap(out, variant) <= 0.5 * _largest_gap(out, run_.expected):
            found.append(code)
    return found


def _largest_gap(out: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest |out - reference| where the reference is defined (an undefined output there: inf)."""
    return float(row_errors(out.cpu(), reference.cpu()).max())


def nan_structure(run_: Launch, sl: Slicing) -> str | None:
    """'empty-slice-nan' when the non-finite rows are whole sequences (every head),
    each of them one with an empty slice, and the rest is finite.  (Not "every
    sequence with an empty slice": a kernel may skip slices that start past the
    cache's end and NaN only on those inside it.)"""
    b = run_.case.batch
    bad = (~torch.isfinite(run_.out.double().cpu())).any(dim=-1)  # (batch, heads)
    with_empty = torch.tensor([sl.has_empty(i) for i in range(b)])
    whole = bool((bad.all(dim=1) == bad.any(dim=1)).all())
    if bad.any() and whole and not bool((bad.any(dim=1) & ~with_empty).any()):
        return "empty-slice-nan"
    return None


MERGE_CODES = ("partials-averaged", "no-max-rescale", "no-final-division", "merge-leaves-out-l")


@dataclass
class Apart:
    """The two kernels tested apart (:mod:`split_kv_readout`)."""

    merge: apart.MergeReadout | None = None
    convention: apart.Convention | None = None
    split: dict[str, tuple[bool | None, str]] = dataclasses.field(default_factory=dict)  # case -> (right?, words)
    words: str = ""  # what running the split alone on the tutor's inputs measured (or why it could not)
    visits_trusted: bool = True  # False: the split alone measured slices that are not the visit map's blocks
    layouts_disagree: str = ""  # the merge is exact on states in a layout other than the split's, in words
    split_wrong: set[str] = dataclasses.field(default_factory=set)  # cases whose non-empty slices' states differ
    # state tensors the split launch left as they were: (code, words) (:func:`apart.unwritten_states`)
    unwritten: tuple[str, str] = ("", "")
    # the failing cases with their recorded launches, whose state layouts were measured
    laid_out: list[tuple[Launch, apart.Roles]] = dataclasses.field(default_factory=list)
    # the split, run alone, measurably left part of the vector state the merge reads unwritten, beyond the empty
    # slices' (states it never stored, or a slice that holds positions): what the merge reads there is whatever
    # memory held, NaN or not from run to run, so a NaN pattern tells nothing of empty slices
    merge_reads_unwritten: bool = False
    # the split alone measured its slices holding other positions than the visit map's blocks say (blind round 26,
    # 05 b21: every slice's loop from 0): the map's slice count per sequence is not said
    map_counts_wrong: bool = False


def _visits_owner(run_: Launch, block_n: int, slots: int) -> torch.Tensor | None:
    """The slot (from 0) holding each position, as the visits say, (rows, max_len); None where
    some block a sequence holds was read by no slot in 1..slots (the map then says nothing)."""
    b, h, n, _ = run_.case.shape
    visits = run_.visits.cpu().reshape(b * h, -1).long()
    needed = blocks_needed(run_.lengths.cpu(), block_n)
    for r in range(b * h):
        row = visits[r, : needed[r // h]]
        if not row.numel() or int(row.min()) < 1 or int(row.max()) > slots:
            return None
    return (visits - 1).repeat_interleave(block_n, dim=1)[:, :n]


def _counts(owner: torch.Tensor, lengths: torch.Tensor, heads: int, slots: int) -> torch.Tensor:
    held = torch.arange(owner.shape[1])[None, :] < lengths.cpu().long().repeat_interleave(heads)[:, None]
    return torch.stack([((owner == s) & held).sum(-1) for s in range(slots)], -1).double()


def test_apart(launches: list[Launch], module: ModuleType) -> Apart:
    """The split kernel alone on the tutor's inputs (:mod:`split_kv_layout`: how it lays out its
    states, which positions each slice holds); then each launch's split states against the
    reference, per slice; the merge alone on the tutor's states, in the split's own layout and
    convention (one probe, re-launching the merge of the launch with the most rows)."""
    block_n = int(module.BLOCK_N)
    found = Apart()
    paired = []
    for x in launches:
        b, h, _, d = x.case.shape
        roles = apart.find_roles(x.calls, x.k_view, x.out, b * h, d) if x.k_view is not None else None
        if roles is not None:
            paired.append((x, roles))
    if not paired:
        return found
    for x, roles in paired:  # state tensors the split left as they were: which of two causes, measured
        found.unwritten = apart.unwritten_states(roles, _rerun(module, x))
        if found.unwritten[0]:
            break
    x0, roles0 = max(paired, key=lambda p: p[0].case.batch * p[0].case.heads)  # the most rows to probe
    assert x0.k_view is not None and x0.v_view is not None
    cost.step(f"your split kernel alone on keys of zero, shape {cost.shape_words(x0.case.shape)}")
    measured = layout.probe(module, roles0, x0.k_view, x0.v_view, x0.lengths, x0.case.heads)
    if isinstance(measured, layout.Unread):
        if measured.scalar:
            cause = ("a maximum never updated from its -inf start (m_i = m_new left out), or a state computed from it"
                     if measured.scalar == "-inf" else "with every score equal, that state turns non-finite in its own"
                     " arithmetic")
            found.words = (" Run alone on keys of zero (every score 0: a slice's state can only be a maximum of 0,"
                           " a count and the mean of its values) and values that name their (sequence, head), your"
                           " split kernel wrote vector states that name their own (sequence, head), but a scalar"
                           f" state it shares with the merge holds {measured.scalar}: {cause}. The two kernels were"
                           " not tested apart.")
            return found
        if measured.nonfinite:
            found.words = (" The tutor could not read your split kernel's slice states: run alone on keys of zero and"
                           " values that name their (sequence, head), it wrote NaN or Inf into them, so no layout"
                           " reads them. With every score equal, a state turns NaN or Inf in its own arithmetic (a"
                           " maximum never updated from -inf, an exponent against the old maximum or with its sign"
                           " flipped, a division by a sum of 0), or takes it from a load outside its tensors (a"
                           " Lengths index past the batch makes a length of whatever lies there). The two kernels"
                           " were not tested apart.")
            return found
        source = layout.values_source(module, roles0, x0.v_view)
        if source:
            found.words = (" The tutor could not read your split kernel's slice states with values that name their"
                           " (sequence, head); run alone again with V all zero and its parameter"
                           f" {source} naming each (sequence, head) instead (every other input zero, so every score"
                           " is 0), its states name their (sequence, head): your split kernel takes its values from"
                           f" {source}, not from V (look at the pointer its V tile is loaded from). The two kernels"
                           " were not tested apart.")
            return found
        if measured.rows_read:
            found.words = (" The tutor could not read your split kernel's slice states as its own (sequence, head)'s."
                           + measured.rows_read + " The two kernels were not tested apart.")
            return found
        coverage, explained = apart.vector_coverage_words(roles0, measured.written) \
            if measured.written is not None else ("", False)
        found.merge_reads_unwritten = bool(coverage)
        causes = "" if explained else (
            ": it lays them out another way, reads another (sequence, head)'s keys or values (its K/V offsets or"
            " strides), scores positions by something else than the keys (with keys of zero every position weighs"
            " the same: K read from another tensor), or its states are no weighted sums of the values at all (V"
            " read from another tensor).")
        found.words = (" The tutor could not read your split kernel's slice states: run alone on keys of zero and"
                       " values that name their (sequence, head), no layout of the tensors it shares with the merge"
                       " ([sequence*head, slice] or [slice, sequence*head]) gives each (sequence, head) its own"
                       f" values{causes or '.'}{coverage} The two kernels were not tested apart.")
        return found
    found.words = measured.words
    # a slice that holds positions and whose vector state no store reached (an empty slice's is the
    # empty-slice words' own case: one that returns early without storing); which slices hold positions, from
    # the visit map (the probe's own nonempty is read from the vector state, which such a slot never got: GPU
    # run 36)
    used = torch.tensor(slicing(x0, module).used).repeat_interleave(x0.case.heads)[:, None]
    holding = torch.arange(measured.unwritten.shape[-1])[None, :] < used
    found.merge_reads_unwritten = measured.unwritten.shape[0] == used.shape[0] and bool(
        (measured.unwritten.cpu() & (holding | measured.nonempty.cpu())).any())
    # the visits say which slot read each block; they are trusted where they agree with the
    # positions the probe counted (a slice that is not a whole number of blocks shares blocks)
    v0 = _visits_owner(x0, block_n, roles0.slots)
    trusted = v0 is not None and (measured.counts is None or bool(
        (_counts(v0, x0.lengths, x0.case.heads, roles0.slots) == measured.counts).all()))
    if measured.owner is not None and not trusted:  # every position held once, in slices the map cannot draw
        found.visits_trusted = False
    found.map_counts_wrong = v0 is not None and not trusted
    first = None
    rights: list[bool | None] = []
    conventions: list[apart.Convention] = []
    for x, roles in paired:
        b, h, _, d = x.case.shape
        roles.layouts = dict(measured.layouts)
        if not _result(x).passed:
            found.laid_out.append((x, roles))
        owner = _visits_owner(x, block_n, roles.slots) if trusted else None
        if owner is None and x is x0:
            owner = measured.owner
        if owner is None:
            continue
        ref = apart.states_by_position(x.q, x.k, x.v, x.lengths, owner, roles.slots)
        right, words, conv, nonempty_wrong = apart.split_report(roles, ref, x.lengths.cpu().tolist(), h, block_n)
        found.split[x.case.name] = (right, words)
        if nonempty_wrong:
            found.split_wrong.add(x.case.name)
        rights.append(right)
        conventions.append(conv)
        if x is x0:
            first = (x, roles, conv, ref)
    if first is not None:
        x, roles, conv, ref = first
        common = apart.agreed(conventions) if all(r is True for r in rights) else None
        if common is not None:
            conv = common
        else:
            # the split is wrong somewhere (or its convention changes from case to case): the merge
            # is fed states in the drill's convention, (m_s in the exp2 domain, l_s, unnormalised o_s)
            # -- only where nothing the split stores says it uses another convention (a merge
            # written for another one would be judged on states it was never meant to read)
            other = any(kind not in ("", "m2", "l") for kind in conv.scalars.values()) or conv.vector not in ("", "o")
            if len(roles.scalars) != 2 or other:
                return found
            kinds = dict(conv.scalars)  # a field that fits keeps its kind; the other takes the one left
            left = [kind for kind in ("m2", "l") if kind not in kinds.values()]
            for i in roles.scalars:
                if not kinds[i]:
                    kinds[i] = left.pop(0)
            conv = apart.Convention(kinds, "o")
        b, h, _, d = x.case.shape
        scal, vec = apart.stored(roles)
        found.convention = conv
        reads_lengths = any(isinstance(a, torch.Tensor) and not a.is_floating_point() for a in roles.merge.args)
        cost.step(f"your merge kernel alone on the tutor's slice states, shape {cost.shape_words(x.case.shape)}")
        empty = apart.empty_values(conv, scal, vec, ref)
        keep_empty = ~measured.nonempty if reads_lengths else None
        found.merge = apart.merge_probe(module, roles, conv, x.out, b * h, d, empty, keep_empty)
        if found.merge is not None and not found.merge.exact:
            found.layouts_disagree = (_merge_reads_another_layout(module, roles, conv, x, empty, keep_empty)
                                      or _merge_reads_another_convention(module, roles, conv, x, empty, keep_empty))
    return found


def _rerun(module: ModuleType, x: Launch) -> apart.Rerun:
    """The case's launch again, on its own inputs, the arguments named poisoned."""
    def rerun(poison: dict[str, frozenset[int]]) -> list[apart.KernelCall]:
        return launch_on(module, x.case, x.q, x.k, x.v, x.lengths, poison=poison).calls

    return rerun


def _layout_words(layout: apart.Layout) -> str:
    names = {"r": "sequence*head", "s": "slice", "f": "field", "d": "head_dim"}
    return f"[{', '.join(names[a] for a in layout.order)}]"


def _merge_reads_another_layout(module: ModuleType, roles: apart.Roles, conv: apart.Convention, x: Launch,
                                empty: dict[str, float] | None, keep_empty: torch.Tensor | None) -> str:
    """Where the merge alone is not exact on states in the split's measured layout: is it exact
    on the same states laid out another way (one merge launch a layout, at most 16)?  Then the
    two kernels disagree on the layout, and each may be right by itself: said in words."""
    b, h, _, d = x.case.shape
    split_layouts = {pos: roles.layout(pos) for pos in [*roles.tensors, roles.vector]}
    choices = [[(pos, lay) for lay in apart.scalar_layouts(roles.fields[pos])] for pos in roles.tensors]
    choices.append([(roles.vector, lay) for lay in apart.VECTOR_LAYOUTS])
    exact = []
    for combo in list(itertools.product(*choices))[:16]:
        layouts = dict(combo)
        if layouts == split_layouts:
            continue
        probe = apart.merge_probe(module, dataclasses.replace(roles, layouts=layouts), conv, x.out, b * h, d,
                                  empty, keep_empty)
        if probe is not None and probe.exact:
            exact.append(layouts)
    if len(exact) != 1:
        return ""
    split_o, merge_o = split_layouts[roles.vector], exact[0][roles.vector]
    if split_o == merge_o:
        # only a scalar state's layout differs, and m_s's is no measurement (all 0 on keys of zero): nothing said
        return ""
    # the vector state's layout is measured by the row each slot names: unambiguous
    return (f" Your two kernels disagree on where the slice states live: your split kernel writes o_s laid out as"
            f" {_layout_words(split_o)}, while your merge kernel, run alone, is exact on the same states with o_s"
            f" laid out as {_layout_words(merge_o)} and wrong on them as the split writes them. Either kernel may"
            " be the one to change; they must agree.")


KIND_WORDS = {"m2": "the maximum (exp2 domain)", "m": "the maximum", "l": "the sum l_s",
              "lse2": "the log-sum-exp (exp2 domain)", "lse": "the log-sum-exp"}


def _merge_reads_another_convention(module: ModuleType, roles: apart.Roles, conv: apart.Convention, x: Launch,
                                    empty: dict[str, float] | None, keep_empty: torch.Tensor | None) -> str:
    """Where the merge alone is not exact on states as the split stores them: is it exact with
    two scalar states' kinds swapped (one merge launch a pair)?  Then the split stores each in
    the slot the merge reads as the other (the maximum where the merge reads the sum, say),
    and either kernel may be the one to change: said in words, with the kernels' own names."""
    b, h, _, d = x.case.shape
    fields = [f for f in roles.scalars if conv.scalars.get(f)]
    for i, j in itertools.combinations(fields, 2):
        kinds = {**conv.scalars, i: conv.scalars[j], j: conv.scalars[i]}
        probe = apart.merge_probe(module, roles, dataclasses.replace(conv, scalars=kinds), x.out, b * h, d,
                                  empty, keep_empty)
        if probe is None or not probe.exact:
            continue
        a, c = (_arg_name(roles.merge, f) for f in (i, j))
        ka, kc = (KIND_WORDS.get(conv.scalars[f], conv.scalars[f]) for f in (i, j))
        return (f" Your two kernels disagree on which state lives where: measured against the reference's slice"
                f" states, your split kernel stores {ka} in {a} and {kc} in {c}, while your merge kernel, run alone,"
                f" is exact on the same states with {kc} in {a} and {ka} in {c}, and wrong on them as the split"
                " stores them. Either kernel may be the one to change; they must agree.")
    return ""


def _arg_name(call: apart.KernelCall, field: apart.FieldKey) -> str:
    """The merge kernel's own name for the tensor of a scalar state field ("MidM"; its
    field 1 where it packs two), or its argument position."""
    pos, f = field
    name = call.arg_name(pos)
    return name if f == 0 else f"{name} (its field {f})"


def test_apart_safely(launches: list[Launch], module: ModuleType) -> Apart:
    """:func:`test_apart`, or nothing where the student's kernels do not run apart the way the
    launcher ran them (their own exception is the verdict's business, not the diagnosis')."""
    try:
        return test_apart(launches, module)
    except cost.LaunchAborted:
        raise
    except Exception:  # noqa: BLE001 - a probe of someone else's kernels; the measured rest still stands
        return Apart()


def diagnose(
    drill: Drill, launches: list[Launch], module: ModuleType, tolerance: float, visits: VisitMap | None,
    guard_said: dict[str, str] | None = None, map_trusted: bool = True,
) -> list[Diagnosis]:
    """Everything worth saying about a check that ran, in steps: the code each failing
    case measurably fits (:func:`_case_codes`) and its findings (:func:`_case_findings`),
    the NaN of large scores (:func:`_large_scores`), the two kernels tested apart
    (:func:`_say_apart`), the visit map (:func:`_say_visits`).  ``guard_said``: what the
    guard bands measured (:func:`guard_report`), said first; NaN that a read past the end
    explains is not said again.  ``map_trusted`` False: a store of the visit map landed
    outside it (:func:`guarded.visit_map_overrun`), so nothing is read from the map."""
    block_n = int(module.BLOCK_N)
    codes = Findings((guard_said or {}).items())
    failing = [x for x in launches if not _result(x).passed]
    tested = test_apart_safely(launches, module) if failing else Apart()
    if tested.unwritten[0]:  # the cause, measured: said before the output's symptoms
        codes.say(*tested.unwritten)
    per_case, measured = _case_codes(failing, module, tested, tolerance)
    codes.add(_case_findings(failing, per_case, measured, tolerance, block_n, tested))
    _wrong_before_nan(codes)
    if "wrong-output" in codes:
        codes["wrong-output"] += (_narrow_state_words(failing) or _rounded_score_words(failing, tolerance)
                                  or _fp16_maxima_words(failing, tested) or _query_offset_words(failing, tolerance))
    unstored, explains = _unstored_words(tested, tolerance)
    large = _large_scores(codes, failing, measured if map_trusted and tested.visits_trusted else None,
                          lambda: _padding_words(failing, module, tolerance), unstored if explains else "")
    if "nan-in-output" in codes and not large:
        codes["nan-in-output"] += _padding_slot_words(failing, module, tested, measured)
    said_on = next((c for c in ("empty-slice-nan", "nan-in-output", "wrong-output") if c in codes), None)
    if unstored and said_on and not (large and explains):  # measured: slots no store reached, read by the merge
        codes[said_on] += unstored
    _say_apart(drill, codes, failing, tested)
    if map_trusted:
        _say_visits(codes, visits, passed=not failing)
    elif "write-past-end" in codes:
        codes["write-past-end"] += shared.MAP_UNTRUSTED
    drop_explained_nan(codes, ("nan-in-output", "empty-slice-nan"))  # not the kernel's own arithmetic
    clean = [x for x in failing if _result(x).written_and_finite]
    if "wrong-output" in codes and clean:
        heads = other_head_words(clean[0], tolerance)
        weighed, hot = weights_reading(module, clean[0])
        # a known wrong temperature, measured, names the output's mistake (unless another head's data explains it)
        code = "wrong-temperature" if hot and not heads and "wrong-temperature" in drill.diagnoses else "wrong-output"
        said = list(codes.items())  # renamed in its place: the codes keep their order
        codes.clear()
        codes.update((code, v + heads + weighed) if k == "wrong-output" else (k, v) for k, v in said)
    return codes.worded(drill)


def other_head_words(launch: Launch, tolerance: float) -> str:
    """Where every wrong (sequence, head) output equals, in float64 within the tolerance,
    attention with another (sequence, head)'s query and its own K/V, or with its own query
    against another head's K/V of its sequence: that, in words; else "".  A query of its own
    sequence is preferred where both fit."""
    b, h, n, d = launch.case.shape
    out = launch.out.double().cpu()
    far = (out - launch.expected).abs().nan_to_num(nan=float("inf")).amax(dim=-1) > tolerance
    wrong = [(int(bi), int(hi)) for bi, hi in far.nonzero().tolist()]
    if not wrong or b * h < 2:
        return ""
    q, k, v = launch.q, launch.k, launch.v

    def fits(alt: torch.Tensor, bi: int, hi: int) -> bool:
        return float((out[bi, hi] - alt[bi, hi]).abs().max()) <= tolerance

    for name, (kk, vv) in (("K", (reading.head_dim_major(k), v)), ("V", (k, reading.head_dim_major(v)))):
        # its own K or V read head_dim-major (blind round 26, 05 b31: V at cols + offs_d * MAX_LEN)
        alt = attend(q, kk, vv, launch.lengths)
        if all(fits(alt, bi, hi) for bi, hi in wrong):
            return f" Each of the {len(wrong)} wrong (sequence, head) outputs equals" + reading.head_dim_major_words(
                name, n, d)

    rows = q.reshape(b * h, *q.shape[2:])
    queries: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for j in range(b * h):
        alt = attend(rows[j:j + 1].expand_as(rows).reshape(q.shape), k, v, launch.lengths)
        for bi, hi in wrong:
            if j != bi * h + hi and fits(alt, bi, hi):
                queries.setdefault((bi, hi), []).append(divmod(j, h))
    kvs: dict[tuple[int, int], int] = {}
    for other in range(h):
        pick = torch.full((h,), other, dtype=torch.long, device=q.device)
        alt = attend(q, k[:, pick], v[:, pick], launch.lengths)
        for bi, hi in wrong:
            if other != hi and fits(alt, bi, hi):
                kvs.setdefault((bi, hi), other)
    more = f"; and {len(wrong) - 4} more" if len(wrong) > 4 else ""
    if len(queries) == len(wrong):
        # each wrong output's query source: one of its own sequence where one fits
        source = {key: next((o for o in found if o[0] == key[0]), found[0]) for key, found in queries.items()}
        if all(source[key][0] == key[0] for key in wrong):
            shown = "; ".join(f"sequence {bi} head {hi}: head {source[(bi, hi)][1]}'s" for bi, hi in wrong[:4])
            return (f" Each of the {len(wrong)} wrong (sequence, head) outputs equals, within the tolerance, attention "
                    f"with another head's query of its sequence and its own K/V ({shown}{more}): check the head "
                    f"offset of the q pointer.")
        shown = "; ".join(f"sequence {bi} head {hi}: sequence {source[(bi, hi)][0]} head {source[(bi, hi)][1]}'s"
                          for bi, hi in wrong[:4])
        return (f" Each of the {len(wrong)} wrong (sequence, head) outputs equals, within the tolerance, attention "
                f"with another (sequence, head)'s query and its own K/V ({shown}{more}): check the q pointer's offset,"
                f" its sequence part (the query's batch stride) and its head part.")
    if len(kvs) == len(wrong):
        shown = "; ".join(f"sequence {bi} head {hi}: head {kvs[(bi, hi)]}'s" for bi, hi in wrong[:4])
        return (f" Each of the {len(wrong)} wrong (sequence, head) outputs equals, within the tolerance, attention "
                f"with another head's K/V of its sequence and its own query ({shown}{more}): check the head offset of "
                f"the K/V cache pointers.")
    return ""


def weights_reading(module: ModuleType, launch: Launch) -> tuple[str, bool]:
    """The case's softmax read out through one-hot values (head_dim cache positions a
    launch, on the case's own shapes and lengths, q scaled down so that every weight stays
    far from fp16's underflow): the slope of log(weight) against the true scores within
    each K/V block, and what each (sequence, head)'s weights add up to, in words; and whether
    the slope is a known wrong temperature."""
    b, h, n, d = launch.case.shape
    q = (launch.q.float() * reading.DECODE_Q_SCALE).half()
    w, _ = reading.weights_read_out(
        lambda group: launch_on(module, launch.case, q, launch.k, one_hot_values((b, h, n, d), group, q.device),
                                launch.lengths).out, n, d, (b * h, 1), q.device)
    s = (q.to(torch.float64).reshape(b * h, 1, d) @ launch.k.to(torch.float64).reshape(b * h, n, d).transpose(1, 2)
         * d**-0.5)
    allowed = (torch.arange(n, device=q.device)[None, :] < launch.lengths.repeat_interleave(h)[:, None])[:, None, :]
    on = reading.scaled_q_case(_result(launch).name)
    span = f"Within each K/V block (read out through one-hot values on {on})"

    def shares() -> str:
        # which slice read each block, as the correctness launch recorded it: each keeps its own maximum
        blocks = -(-n // int(module.BLOCK_N))
        read_by = launch.visits.reshape(b * h, 1, -1)[..., :blocks].to(w.device)
        return block_shares_words(w, s, allowed, int(module.BLOCK_N), name, "K/V block", "cache positions",
                                  segments=read_by)

    def name(r: int) -> str:
        return f"sequence {r // h} head {r % h}"

    said, hot = reading.softmax_reading(w, s, allowed, d, int(module.BLOCK_N), span,
                                        f"each (sequence, head)'s weights on {on},",
                                        shares, name)
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
    if not reading.softmax_itself(w, p):  # weights of other scores: K read another way? (blind round 22, 05/m22)
        said += reading.k_layout_words(w, q.reshape(b, h, 1, d), launch.k, allowed)
    return said, hot


def _split_right(tested: Apart, failing: list[Launch]) -> bool:
    """Is the split kernel measured right on every failing case where it could be measured
    (tested apart), and on one at least?"""
    splits = [tested.split[_result(x).name][0] for x in failing if _result(x).name in tested.split]
    return bool(splits) and all(r is True for r in splits)


def _nan_elsewhere(launch: Launch, sl: Slicing, tested: Apart) -> bool:
    """Is NaN in the pattern of the empty slices measurably not their doing?  Where a NaN
    sequence has no slice that read a position (the NaN is the merge's 0/0 over nothing
    read), or where the merge alone is exact on empty slices and the split kernel's states
    are measured wrong on this case's non-empty slices."""
    bad = (~torch.isfinite(launch.out.double().cpu())).flatten(1).any(dim=1).nonzero().flatten().tolist()
    if any(sl.used[i] == 0 for i in bad):
        return True
    merge = tested.merge
    return merge is not None and merge.exact and _result(launch).name in tested.split_wrong


def _case_codes(failing: list[Launch], module: ModuleType, tested: Apart,
                tolerance: float) -> tuple[list[list[str]], list[Slicing]]:
    """The codes each failing case measurably fits (its NaN structure, the merge's mistake
    measured alone, or the fingerprints), and how each cut its caches into slices."""
    block_n = int(module.BLOCK_N)
    probe = tested.merge
    # the merge measured alone names its mistake: that holds on every case whose split is right
    named = probe.code if probe is not None and probe.code and _split_right(tested, failing) else None
    per_case: list[list[str]] = []
    measured: list[Slicing] = []
    for launch in failing:
        sl = slicing(launch, module, countable=not tested.map_counts_wrong)
        measured.append(sl)
        case = _result(launch)
        if not case.fully_written:
            per_case.append([])
        elif case.nonfinite:
            code = nan_structure(launch, sl)
            per_case.append([code] if code and not _nan_elsewhere(launch, sl, tested) else [])
        elif named:
            per_case.append([named])
        elif probe is not None:  # the merge measured alone is exact, or wrong in no named way
            per_case.append([c for c in fingerprint(launch, block_n, tolerance) if c not in MERGE_CODES])
        else:
            per_case.append(fingerprint(launch, block_n, tolerance))
    # NaN in the pattern of the empty slices is said only if every case with NaN shows
    # that pattern, and some case shows it with finite sequences beside it (where every
    # sequence has an empty slice, "all NaN" fits the pattern vacuously), and the merge reads
    # no state the split measurably never wrote (torch.empty's bits fit any pattern by chance)
    nan_cases = [(found, x) for found, x in zip(per_case, failing, strict=True) if _result(x).nonfinite]
    fits = [bool(found) for found, _ in nan_cases]
    telling = any(found and bool(torch.isfinite(x.out.double().cpu()).all(dim=-1).any()) for found, x in nan_cases)
    if not (fits and all(fits) and telling) or tested.merge_reads_unwritten:
        per_case = [[c for c in found if c != "empty-slice-nan"] for found in per_case]
    return per_case, measured


def merge_pointer(failing: list[Launch], tested: Apart) -> str:
    """How "exactly the sequences whose cache spans more than one slice are wrong" ends: pointing
    at the merge only where the merge measured alone is wrong (not exact, not read in a layout
    the split did not write, every output written), and at the states the split hands it too where
    the split stores them in other units than the drill's: the two kernels disagree, and either
    may be the one to change (blind round 24, 05 b25: m in natural-log units for an exp2 merge)."""
    probe, conv = tested.merge, tested.convention
    if (probe is None or probe.exact or tested.layouts_disagree
            or any(not _result(x).fully_written for x in failing)):
        return "."
    if conv is not None and (conv.vector != "o" or any(k not in ("m2", "l") for k in conv.scalars.values())):
        return ": look at the merge and at the states your split hands it."
    return ": look at the merge."


def _case_findings(failing: list[Launch], per_case: list[list[str]], measured: list[Slicing], tolerance: float,
                   block_n: int, tested: Apart) -> Findings:
    """Each failing case in words: what was not written, the code it fits (the one the
    most cases fit) with the sequences it measurably affects, else its NaN or its error."""
    found = Findings()
    visits_trusted, pointer = tested.visits_trusted, merge_pointer(failing, tested)
    support: dict[str, int] = {}
    for codes in per_case:
        for code in codes:
            support[code] = support.get(code, 0) + 1

    for launch, fit, sl in zip(failing, per_case, measured, strict=True):
        case = _result(launch)
        lengths = launch.lengths.cpu().tolist()
        where = f" (seen on the {case.name} case: batch={case.shape[0]}, cache {case.shape[2]}, lengths {lengths})"
        if case.unwritten:
            found.say("unwritten-output", f" {case.unwritten} elements were never written{where}.")
        if case.wrote_out_of_bounds:
            found.say("store-out-of-bounds", where + ".")
        if fit:
            code = max(fit, key=lambda c: support[c])
            if code == "empty-slice-nan":
                out = launch.out.double().cpu()
                nan_seqs = (~torch.isfinite(out)).flatten(1).any(dim=1).nonzero().flatten().tolist()
                found.say(code, f" NaN in every head of sequence{'s' if len(nan_seqs) > 1 else ''} "
                                f"{_seqs(nan_seqs, lengths, sl)}, of {sl.slices} slices each{where}.")
            else:  # a fingerprint: add which sequences it measurably affects
                said = describe_wrong(launch, sl, tolerance, block_n, visits_trusted, pointer)
                found.say(code, said + where[:-1] + ").")
        elif case.nonfinite:
            bad = (~torch.isfinite(launch.out.double().cpu())).any(dim=-1).any(dim=-1).nonzero().flatten().tolist()
            found.say("nan-in-output", f" {case.nonfinite} elements, in sequence{'s' if len(bad) > 1 else ''} "
                                       f"{_seqs(bad, lengths, sl)}{where}.")
        elif not case.fully_written:
            pass  # said above; the rest of the output is not worth guessing at
        else:
            said = describe_wrong(launch, sl, tolerance, block_n, visits_trusted, pointer)
            found.say("wrong-output", said + where[:-1] + ").")
    return found


def _wrong_before_nan(codes: Findings) -> None:
    """A finite wrong output (which says where it is wrong) before the NaN of another case,
    whichever case came first: the random lengths decide which case holds a sequence of
    length 1, so the order of cases would make the order of the two codes a coin toss."""
    if "wrong-output" in codes and "nan-in-output" in codes:
        said = list(codes.items())
        nan_at = [k for k, _ in said].index("nan-in-output")
        if [k for k, _ in said].index("wrong-output") > nan_at:
            wrong = codes["wrong-output"]
            said = [x for x in said if x[0] != "wrong-output"]
            said.insert(nan_at, ("wrong-output", wrong))
            codes.clear()
            codes.update(said)


LARGE_SCORES = {  # the cases whose scores leave fp32's exp range, in words
    "hostile": "hostile: scores of standard deviation 100",
    "orders": "orders: a top score of 100, 144 in the exp2 domain",
    "negative": "negative: every score near -130, whose exp is 0 in fp32",
    "high": "high: every score near +500, 721 in the exp2 domain",
}


def _unread_nan(failing: list[Launch], measured: list[Slicing]) -> bool:
    """Whether every sequence with NaN read no position at all (no slice of it recorded a
    block), while some other sequence did (the map records reads)."""
    nan_seqs, read_seqs = 0, 0
    for launch, sl in zip(failing, measured, strict=True):
        bad = (~torch.isfinite(launch.out.double().cpu())).flatten(1).any(dim=1).tolist()
        for b, is_nan in enumerate(bad):
            if is_nan and sl.used[b] > 0:
                return False
            nan_seqs += is_nan
            read_seqs += sl.used[b] > 0
    return nan_seqs > 0 and read_seqs > 0


def _padding_words(failing: list[Launch], module: ModuleType, tolerance: float) -> str:
    """The first case with NaN that ran with a split count of its own that is not a power of two,
    launched again with the next power of two (:func:`split_kv_readout.padding_slots_words`)."""
    for x in failing:
        splits = split_count_for(module, x.case)
        if not _result(x).nonfinite or splits is None or splits & (splits - 1) == 0:
            continue
        try:
            again: torch.Tensor | None = launch_on(module, x.case, x.q, x.k, x.v, x.lengths,
                                                   splits=1 << (splits - 1).bit_length()).out
        except cost.LaunchAborted:
            raise
        except Exception:  # noqa: BLE001 - a launcher that fails at another count: nothing measured
            again = None
        return apart.padding_slots_words(x.case.name, splits, again, x.expected, tolerance)
    return ""


def _full_length_finite(module: ModuleType, x: Launch, splits: int) -> bool | None:
    """The case's inputs with every sequence at the full cache length, launched at ``splits``: is
    the output finite, where each sequence used all ``splits`` slices (measured from the visits)?
    None where the launch raised or some sequence used fewer."""
    full = torch.full_like(x.lengths, x.case.shape[2])
    try:
        again = launch_on(module, x.case, x.q, x.k, x.v, full, splits=splits)
    except cost.LaunchAborted:
        raise
    except Exception:  # noqa: BLE001 - nothing measured
        return None
    if any(used != splits for used in slicing(again, module).used):
        return None
    return bool(torch.isfinite(again.out).all())


def _padding_slot_words(failing: list[Launch], module: ModuleType, tested: Apart, measured: list[Slicing]) -> str:
    """Where a case with NaN in a sequence that left no slice empty ran with a split count of its
    own that is not a power of two, and on its inputs with every sequence at the full cache length
    (every slice used, measured from the visits) the output still has NaN, and at the power of two
    below (every slot a slice, each used) it is finite: words saying so, and
    that a merge over ``tl.arange(0, pow2)`` has slots past the last slice, which the merge alone
    measurably turns into NaN where they load as empty slices (blind round 24, 05 b08: a merge
    that divides each o_s by its l_s gave NaN in every sequence at 3 splits); "" otherwise."""
    for x, sl in zip(failing, measured, strict=True):
        splits = split_count_for(module, x.case)
        bad = (~torch.isfinite(x.out.double().cpu())).flatten(1).any(dim=1)
        if splits is None or splits & (splits - 1) == 0 or not any(
                bool(b) and not sl.has_empty(i) for i, b in enumerate(bad.tolist())):
            continue
        # NaN with every slice used, and at the power of two below (at least 2), where the merge's slots are all
        # real slices and each is used, finite: real slices alone are merged right (blind round 26, 05 b15: a
        # maximum never updated, stored -inf beside l > 0, gives NaN at every split count)
        pow2, even = 1 << (splits - 1).bit_length(), 1 << (splits.bit_length() - 1)
        if even < 2 or _full_length_finite(module, x, splits) is not False \
                or _full_length_finite(module, x, even) is not True:
            return ""
        merge = tested.merge
        empty_nan = merge is not None and any(row.startswith("empty slices") for row in merge.nan_rows)
        why = (" Your merge alone makes NaN of empty slices (the read-out that follows), and a padding slot whose"
               " masked load gives the empty state (m = -inf, l = 0) counts as one." if empty_nan else "")
        return (f" The {x.case.name} case ran with num_splits={splits}; on its inputs with every sequence at the"
                f" full cache length ({x.case.shape[2]}: each used all {splits} slices, measured) the output still has"
                f" NaN, while at num_splits={even}, where every slot of the merge is a real slice, the same inputs"
                f" come out finite: something besides the real slices is merged. At {splits}, a merge over"
                f" tl.arange(0, {pow2}) has {pow2 - splits} slot{'s' if pow2 - splits > 1 else ''} past the last"
                f" slice.{why}")
    return ""


def _narrow_state_words(failing: list[Launch]) -> str:
    """Where the high case fails and a state tensor the split launch shares with the merge is fp16
    or bf16 (read off the launch's arguments, :func:`split_kv_readout.narrow_states`), the words: a
    maximum near HIGH_SCORE * log2(e) is kept there in coarse steps, and every slice's weight
    2^(m_s - M) with it; "" otherwise."""
    high = next((x for x in failing if x.case.name == "high" and x.k_view is not None), None)
    narrow = apart.narrow_states(high.calls, high.k_view, high.out) if high is not None and high.k_view is not None \
        else []  # (k_view tested twice: mypy narrows the second)
    if not narrow:
        return ""
    top = HIGH_SCORE * LOG2E
    step = spacing_at(top, narrow[0][1])
    names = ", ".join(f"{name} ({str(dtype).removeprefix('torch.')})" for name, dtype in narrow)
    # other failing cases are said apart: narrow states fail the high case, not necessarily those
    # (blind round 22 review: a second mistake beside them went unmentioned)
    also = _other_cases_words(failing, "narrow states")
    dtype = str(narrow[0][1]).removeprefix("torch.")
    return (f" Your split kernel's slice states are not all float32: {names}. The high case (every score near"
            f" +{HIGH_SCORE:.0f}, {top:.0f} in the exp2 domain) is where that shows: there {dtype} keeps a number in"
            f" steps of {step:g}, so a maximum stored in it is off by up to {step / 2:g} and each slice's weight"
            f" 2^(m_s - M) by up to a factor 2^{step / 2:g} = {2 ** (step / 2):.3f}. Keep the states in"
            f" float32.{also}")


def _other_cases_words(failing: list[Launch], cause: str) -> str:
    """Words naming the failing cases other than the high case, which ``cause`` (measured on
    the high case only) need not explain; "" where only the high case failed."""
    others = sorted({x.case.name for x in failing if x.case.name != "high"})
    if not others:
        return ""
    listed = " and ".join([", ".join(others[:-1]), others[-1]] if len(others) > 1 else others)
    return (f" The {listed} case{'s' if len(others) > 1 else ''} failed too, which {cause} need not explain:"
            " look there for a second mistake.")


def _query_offset_words(failing: list[Launch], tolerance: float) -> str:
    """On the first failing case whose output is written and finite, the query offset that
    explains every wrong (sequence, head) (:func:`query_offsets.query_offset_words`), in words."""
    x = next((x for x in failing if _result(x).written_and_finite), None)
    if x is None:
        return ""
    err = (x.out.double().cpu() - x.expected.double().cpu()).abs().amax(dim=-1)  # (batch, heads)
    wrong = [(int(b), int(h)) for b, h in (err > tolerance).nonzero().tolist()]
    return query_offset_words(x.q, x.k, x.v, x.lengths.cpu(), x.out, wrong, tolerance)


def _rounded_score_words(failing: list[Launch], tolerance: float) -> str:
    """Where the high case fails and its output is, within the tolerance, attention from the true
    scores rounded to fp16 (:func:`hostile.rounded_scores_words`: a q.k computed or kept in fp16,
    blind round 24, 05/b16), those words; "" otherwise."""
    high = next((x for x in failing if x.case.name == "high" and _result(x).written_and_finite), None)
    if high is None:
        return ""
    q, k = high.q.to(torch.float64), high.k.to(torch.float64)
    s = (q[:, :, None, :] @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5  # (batch, heads, 1, max_len)
    held = torch.arange(k.shape[2], device=k.device) < high.lengths.to(k.device).long()[:, None]  # (batch, max_len)
    s = s.masked_fill(~held[:, None, None, :], float("-inf")).cpu()
    words = rounded_scores_words(high.out[:, :, None, :].cpu(), high.expected[:, :, None, :].cpu(), s,
                                 high.v.cpu(), tolerance, "the high case")
    return words + _other_cases_words(failing, "scores rounded to fp16") if words else ""


FP16_GRID_SLOTS = 4  # the fewest stored maxima that must all lie on the grid (a random one: ~1 in 1000)


def _fp16_maxima_words(failing: list[Launch], tested: Apart) -> str:
    """Where the high case fails and every maximum the split stored for a non-empty slice (at
    least FP16_GRID_SLOTS of them), taken back to raw q.k, natural or exp2 units, is an fp16
    number (to the fp32 arithmetic that scaled it): the score was computed or kept in fp16
    before the maximum, or the maximum rounded to fp16 where it is stored (blind round 26, 05
    b13: the two are not told apart here), in words; "" otherwise.  A score in fp32 lands that
    close to the fp16 grid about once in a thousand (blind round 24, 05 b16: a q.k summed in
    fp16, whose output no rounded-score model fits: the sum's own roundings differ)."""
    conv = tested.convention
    high = next(((x, roles) for x, roles in tested.laid_out if x.case.name == "high"), None)
    if conv is None or high is None:
        return ""
    x, roles = high
    key = next((k for k, kind in conv.scalars.items() if kind in ("m2", "m")), None)
    if key is None:
        return ""
    scal, _ = apart.stored(roles)
    m = scal[key].cpu()
    m = m[torch.isfinite(m)]
    if len(set(m.tolist())) < FP16_GRID_SLOTS or not bool((m != 0).all()):  # a constant or a 0 lies on any grid
        return ""
    natural = m * (LN2 if conv.scalars[key] == "m2" else 1.0)
    root = x.case.shape[-1] ** 0.5
    for where, scale in reversed(score_units(root)):
        held = natural * scale
        gap = (held - held.to(torch.float16).double()).abs()
        if bool((gap <= 3e-7 * held.abs()).all()):
            top = float(held.abs().max())
            return (f" Every maximum your split kernel stored for a slice on the high case ({m.numel()} of them),"
                    f" taken {where}{same_grid_words(scale, root)}, is an fp16 number: the scores were computed"
                    " or kept in fp16 before the maximum, or the maximum itself was rounded to fp16 before it was"
                    " stored (a score in fp32 lands that close to the fp16 grid about once in a thousand). There"
                    f" (up to {top:.0f}){fp16_step_words(top, scale)}"
                    " Compute q.k and keep the scores and the stored maximum in fp32 (tl.dot accumulates in fp32;"
                    " a sum of fp16 products does not).")
    return ""


def _unstored_words(tested: Apart, tolerance: float) -> tuple[str, bool]:
    """The first failing case with wrong (sequence, head)s that have state slots the split stored
    nothing to (:func:`split_kv_readout.unstored_slots_words`): the words, and whether they explain
    the wrong rows; a case whose words explain them first."""
    found: list[tuple[str, bool]] = []
    for x, roles in tested.laid_out:
        out, expected = x.out.double().cpu(), x.expected.double().cpu()
        wrong = (~torch.isfinite(out) | ((out - expected).abs() > tolerance)).reshape(roles.rows, -1).any(-1)
        words, explains = apart.unstored_slots_words(roles, x.case.name, wrong)
        if explains:
            return words, True
        if words:
            found.append((words, False))
    return found[0] if found else ("", False)


def _large_scores(codes: Findings, failing: list[Launch], measured: list[Slicing] | None,
                  padding: Callable[[], str] | None = None, unstored: str = "") -> bool:
    """NaN only in the cases of large scores: an exp overflowed or underflowed fp32, or, where
    ``padding`` (:func:`_padding_words`, called only here) measures it, the merge's padding slots (added to
    ``nan-in-output``).  Not where every sequence with NaN read no position at all (the
    orders case holds a length-1 sequence: a bound one short leaves it nothing, blind round
    10, w08): that is said instead, from the visit map (``measured``: None where it is not
    trusted).  ``unstored``: state slots the split stored nothing to hold the NaN rows' cause, in
    words (:func:`split_kv_readout.unstored_slots_words`): said in place of the overflow.  Whether
    anything was said."""
    nan_names = {_result(x).name for x in failing if _result(x).nonfinite}
    if "nan-in-output" in codes and measured is not None and _unread_nan(failing, measured):
        codes["nan-in-output"] += (" Every sequence with NaN read no position of its cache (no slice of it recorded"
                                   " a block, while other sequences did): its sum is 0 and its output 0/0. Look at"
                                   " the bounds of the split's loop against the sequence's length.")
        return True
    if "nan-in-output" in codes and nan_names and nan_names <= LARGE_SCORES.keys():
        named = "; ".join(words for name, words in LARGE_SCORES.items() if name in nan_names)
        # measured (a relaunch, made only here): right with a power-of-two split count
        padded = padding() if padding is not None else ""
        if padded:
            codes["nan-in-output"] += f" Only the cases of large scores have them ({named})." + padded
            return True
        codes["nan-in-output"] += f" Only the cases of large scores have them ({named})" + (
            ":" + unstored if unstored else
            ": an exp overflowed or underflowed fp32 there. Every exp/exp2 needs the true running maximum"
            " subtracted: started at -inf, never a 0 from an initial value or from a state no slice wrote.")
        return True
    return False


LAYOUT_NAN = (" Read in a layout the split did not write, a sequence's slots hold other slices' states (an empty"
              " slice's m = -inf among them), so the NaN may come with the layout: make the two kernels agree first.")


def _say_apart(drill: Drill, codes: Findings, failing: list[Launch], tested: Apart) -> None:
    """The two kernels tested apart, said beside the first error, as measured; where the
    merge measured alone is exact, a code's words stop pointing at it."""
    split_right = _split_right(tested, failing)
    probe = tested.merge
    apart_words = ""
    if any(not _result(x).fully_written for x in failing):
        probe, tested = None, Apart()  # an output not (all) written: the rest is not worth guessing at
    if tested.layouts_disagree:
        apart_words += tested.layouts_disagree
        # the NaN's pattern is measured; the causes its words list (the empty state, -inf - -inf) are not: read in
        # another layout, a sequence's slots hold other slices' states (blind round 17, w11)
        if "empty-slice-nan" in codes:
            nan = codes.pop("empty-slice-nan").strip().removesuffix(".")
            apart_words += f" {nan[:1].upper()}{nan[1:]}: sequences that leave a slice empty." + LAYOUT_NAN
        elif "nan-in-output" in codes:
            nan = codes.pop("nan-in-output").removesuffix(".")
            apart_words += " NaN or Inf in the output:" + nan + "." + LAYOUT_NAN
    elif probe is not None and not probe.exact:
        conv = tested.convention
        if conv is not None and (conv.vector != "o" or any(k not in ("m2", "l") for k in conv.scalars.values())):
            apart_words += (" (Your split kernel stores " + ", ".join(apart.SCALAR_KINDS[k] for k in
                            conv.scalars.values() if k) + f" and {apart.VECTOR_KINDS[conv.vector]}: the tutor's"
                            " states were written that way.)")
        apart_words += probe.words
    elif probe is not None and failing and not split_right:
        apart_words += probe.words
    for launch in failing if not tested.layouts_disagree else []:  # (states read in a layout the merge does not use)
        right, words = tested.split.get(_result(launch).name, (None, ""))
        if right is not True and words:
            apart_words += f" On the {_result(launch).name} case:" + words
            break
    if failing:
        apart_words += tested.words
    if apart_words:
        preferred = [*MERGE_CODES, "wrong-output", "nan-in-output", "reads-past-length", "empty-slice-nan"]
        target = next((c for c in preferred if c in codes), None) or next(
            (c for c in codes if drill.diagnosis_text(c).severity == "error"), None)
        if target is None and failing:
            codes.say("wrong-output", "")
            target = "wrong-output"
        if target is not None:
            codes[target] += apart_words


def _say_visits(codes: Findings, visits: VisitMap | None, passed: bool) -> None:
    """The map's verdict where no visit was recorded; else the blocks read past the lengths
    (added to ``reads-past-length`` where that is said, else ``extra-blocks``); and, for a
    kernel whose every case passed, needed blocks the map shows unvisited: their keys
    were read (the output is right), so the map cannot count the work (``visits-uncounted``),
    never "solved" beside blocks drawn as missed."""
    if visits is None:
        return
    said_visits = visit_findings([("", visits)], bounded=False, all_visited="")
    codes.add(said_visits)
    if said_visits:
        return
    needed = [[bool(x) for x in row] for row in visits.ideal]
    unvisited = sum(visits.heads - c for row, ideal in zip(visits.counts, needed, strict=False)
                    for c, i in zip(row, ideal, strict=False) if i and c < visits.heads)
    if passed and unvisited:
        codes.say("visits-uncounted", f" ({unvisited} of the {visits.ideal_blocks} needed (sequence, head, block)"
                                      f" reads recorded no visit.)")
    extra = sum(c for row, ideal in zip(visits.counts, needed, strict=False)
                for c, i in zip(row, ideal, strict=False) if not i)
    if extra and "visits-uncounted" in codes:
        # a right output whose map misses needed blocks and shows others read: the map's own cells are
        # misplaced (the visit store's offset or stride), so its blocks past the lengths are no measurement
        codes["visits-uncounted"] += (f" The map also shows {extra} (head, block) visits past the sequences'"
                                      " lengths: beside needed blocks it misses, that is what a visit store at the"
                                      " wrong cell (its row offset or stride) records, so neither count is read as"
                                      " your kernel's reads.")
    elif extra:
        detail = (f" ({extra} blocks past the sequences' lengths were read, counted over all heads;"
                  f" the sequences hold {visits.ideal_blocks}.)")
        if "reads-past-length" in codes:
            codes["reads-past-length"] += detail
        else:
            codes.say("extra-blocks", detail)


# -- the problem interface ---------------------------------------------------------------------
def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One launch of every case (their lengths and head sizes are specialised apart):
    the split and merge variants the verdict compiles, launched from threads at once
    on a GPU so their compiles overlap.  Own seeds: the check's random stream stays
    the same with or without them."""
    return [functools.partial(run, module, case, device, torch.Generator().manual_seed(n))
            for n, case in enumerate(plan_for(interpreter=False).cases)]


def check_correctness(
    drill: Drill,
    module: ModuleType,
    interpreter: bool,
    device: str,
    generator: torch.Generator,
    shape: tuple[int, int, int, int] | None = None,
) -> Correctness:
    plan = plan_for(interpreter)
    cases = list(plan.cases)
    if shape is not None:  # the default case at another (batch, heads, max_len, head_dim)
        batch, heads, max_len, head_dim = shape
        cases[0] = dataclasses.replace(cases[0], batch=batch, heads=heads, max_len=max_len, head_dim=head_dim)
    block_n = int(module.BLOCK_N)
    launches = []
    for case in cases:
        cost.step(f"the {case.name} case, shape {cost.shape_words(case.shape)} (split kernel, then merge)")
        launch = run(module, case, device, generator)
        launch.result = evaluate(launch, drill.tolerance)
        launches.append(launch)
    visits = [visit_map(launches[0], block_n)]

    def diagnose_launches() -> Diagnosed:
        findings, said = guard_report(module, launches)
        return Diagnosed(diagnosis=diagnose(drill, launches, module, drill.tolerance, visits[0], said,
                                            map_trusted=not shared.visit_map_overrun(findings)),
                         guard_findings=findings)

    return Correctness(cases=[_result(x) for x in launches], shape=list(cases[0].shape), visits=visits,
                       diagnose=diagnose_launches)


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    """Every sequence fills the cache, so torch's SDPA (no mask: its fastest path)
    does the same work as the student's kernel."""
    batch, heads, max_len, head_dim = plan_for(interpreter).timing
    cache = (batch, heads, max_len, head_dim)
    q, k, v = launching.timing_tensors([(batch, heads, head_dim), cache, cache], device, generator)
    lengths = torch.full((batch,), max_len, dtype=torch.int32, device=device)
    out = torch.empty_like(q)
    launch = getattr(module, LAUNCHER)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q4 = q[:, :, None, :]
    shape = (batch, heads, max_len, head_dim)

    def verify() -> str | None:
        """The timed launch once more (no visit map: the kernel's own configuration), its first
        and last (sequence, head) against float64."""
        launch(q, k, v, lengths, out=out)
        for b, h in ((0, 0), (batch - 1, heads - 1)):
            one = (slice(b, b + 1), slice(h, h + 1))
            expected = attend(q[one], k[one], v[one], lengths[b: b + 1])
            err = float((out[one].double().cpu() - expected).abs().nan_to_num(nan=float("inf")).max())
            if not err <= drill.tolerance:
                return (f"the timed launch (no visit map passed: the kernel's own configuration) is wrong at shape"
                        f" {cost.shape_words(shape)}: sequence {b}, head {h} is off by up to {err:.3g} (tolerance"
                        f" {drill.tolerance:g}); its times are not shown")
        return None

    return TimedLaunches(
        shape=[batch, heads, max_len, head_dim],
        student={"full": lambda: launch(q, k, v, lengths, out=out)},
        baseline={"full": lambda: sdpa(q4, k, v)},
        verify=verify,
    )


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 compile_warmups=compile_warmups)
