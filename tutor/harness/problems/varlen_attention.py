"""Causal attention over packed variable-length sequences, each query chunk the
last tokens of its keys (drill 08: flash-attn's varlen API, chunked prefill).

The launcher contract: ``attention(q, k, v, cu_seqlens_q, cu_seqlens_k,
max_seqlen_q, max_seqlen_k, out=None, visits=None)`` with q of shape
(total_q, H, head_dim), k and v (total_k, H, head_dim), cu_seqlens int32
(batch + 1,).  Sequence b has Nq_b queries and Nk_b >= Nq_b keys; its query
row i sees its keys 0 .. i + (Nk_b - Nq_b).

Every case packs sequences that exercise a boundary (:func:`cases_for`): Nq =
Nk, Nq = 1, a sequence of one token, lengths that are not a multiple of the
block and one that is (set from the student's blocks), many short sequences,
hostile scores, and the long-sum case (:mod:`tutor.harness.long_sum`: an fp16
running sum overflows; said only where every other case passed).  Sequences sit back to back, so each one's neighbours
are the guard bands between sequences: a read into the next or the previous
sequence finds real keys of another sequence, and the weight read-out below
names them.  The packed tensors themselves sit between NaN margins
(:mod:`tutor.harness.guarded`).

The diagnosis is measured: the kernel's weights are read out through one-hot
values over the whole packed key axis (:func:`weights`), so for each query row
it is known which keys of its own sequence and of the others it weighs.  From
them, per sequence, the last key each row weighs against its diagonal (by how
many keys, which side), weight on other sequences' keys (which ones), needed
keys missed (a key whose weight, at the slope the read-out measures, lies below what
an fp16 output holds counts as weighed: a hot temperature is said as one; rows that
keep only the K/V block holding their diagonal are said so); and from the visit
map, blocks visited that no row needs (past the diagonal, past the sequence)
against those needed.

The visit maps are per sequence; the check headlines one (:func:`headline_map`:
the default case's sequence with the most blocks, its offset diagonal's needed
cells against what the kernel recorded).  The roofline counts the timed launch
sequence by sequence (:func:`count_work`, the problem's ``timing_work``): one
map of one length cannot hold sequences of different lengths.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.findings import Findings, drop_explained_nan, index_runs
from tutor.harness.loader import LAUNCHER
from tutor.harness.long_sum import long_sum_values, long_sum_words
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches
from tutor.harness.problems.attention import readout as reading
from tutor.harness.problems.attention.block_shares import block_shares_words
from tutor.harness.problems.attention.readout import one_hot_values
from tutor.harness.problems.attention.reference import FAR_BELOW, far_below_words, score_rounding_allowance
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, VisitMap

if TYPE_CHECKING:
    from tutor.harness.roofline import Counted


@dataclass(frozen=True)
class Case:
    name: str
    heads: int
    head_dim: int
    seqs: tuple[tuple[int, int], ...]  # (Nq, Nk) of each packed sequence
    q_scale: float = 1.0  # > 1: hostile scores; 0 with long_sum
    long_sum: bool = False  # q = 0 and V's column 0 at 512: an fp16 running sum overflows (tutor.harness.long_sum)
    last_key_heavy: bool = False  # each sequence's last key dominates the last row's softmax (see random_inputs)

    @property
    def cu_q(self) -> list[int]:
        return _cumulative([nq for nq, _ in self.seqs])

    @property
    def cu_k(self) -> list[int]:
        return _cumulative([nk for _, nk in self.seqs])

    def words(self) -> str:
        return ", ".join(f"{nq}/{nk}" for nq, nk in self.seqs)


def _cumulative(lengths: list[int]) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


BLOCK_MULTIPLE = (-1, -2)  # placeholder lengths: (one block of queries, two blocks of keys), see cases_for
# placeholder lengths: (one block of queries, one key more), see cases_for.  The last query
# row's diagonal key is then the first key of a block at every power-of-two block size up
# to the larger one, so a causal loop bound one key short skips a whole block there
# (found by a blind attempt that passed every other case)
ONE_KEY_PAST = (-3, -4)
# placeholder lengths: Nq = Nk = five rows past two query blocks of the student's BLOCK_M
# (at least 37), so some sequence always has a third, partial query block: a mistake in the
# query block's offset (start_m * BLOCK_N) or its row mask otherwise passes with BLOCK_M >= 64,
# whose one query block held every sequence (blind round 8)
PAST_TWO_QUERY_BLOCKS = (-5, -6)
LONG_SUM_SEQS = ((40, 200), (150, 150), (1, 1))  # the long-sum case's sequences
# Nq/Nk pairs: Nq = Nk (ragged), Nq = 1 (decode-like), a one-token sequence, a
# chunk whose offset is not a multiple of the block, one whose lengths are.
CPU_CASES = (
    # the longest chunk is not first, and has more key blocks than the headlined sequence (the
    # two-query-block one), so a loop bound from the longest sequence widens the headline map
    Case("default", 2, 32, ((1, 29), PAST_TWO_QUERY_BLOCKS, (1, 1), (21, 107), BLOCK_MULTIPLE)),
    Case("many-short", 1, 32, ((3, 5), (1, 2), (4, 4), (2, 7), (1, 1), (5, 9), (2, 2), (3, 3), (1, 6), (6, 6))),
    # scores ~ +-100: exp overflows fp32 unless the running maximum is subtracted
    Case("hostile", 1, 32, ((30, 50), (9, 9), (1, 12)), q_scale=20.0),
    Case("one-key-past", 1, 32, (ONE_KEY_PAST,), last_key_heavy=True),
    # every score 0 and V's column 0 at 512: a row that sees 128 keys or more sums past fp16's 65504, so an acc
    # kept in fp16 overflows in every row of the chunk (161..200 keys), in rows 127.. of the 150/150 sequence, and
    # nowhere in the one-token one
    Case("long-sum", 1, 32, LONG_SUM_SEQS, q_scale=0.0, long_sum=True),
)
GPU_CASES = (
    Case("default", 4, 64, ((1, 513), (300, 300), (1, 1), (200, 1000), BLOCK_MULTIPLE, (77, 130))),
    Case("many-short", 2, 64, tuple((1 + i % 5, 1 + i % 5 + (i * 7) % 11) for i in range(40))),
    Case("hostile", 2, 64, ((130, 250), (9, 9), (1, 12)), q_scale=20.0),
    Case("one-key-past", 2, 64, (ONE_KEY_PAST,), last_key_heavy=True),
    Case("long-sum", 2, 64, LONG_SUM_SEQS, q_scale=0.0, long_sum=True),
)
# timed: 16 sequences of 1024..2048 keys, chunks of a quarter of them
GPU_TIMING = Case("timing", 16, 128, tuple((256 + 64 * (i % 4), 1024 + 64 * i) for i in range(16)))


def cases_for(interpreter: bool, block_m: int, block_n: int) -> tuple[Case, ...]:
    """The correctness cases; the block-multiple sequence has one query block and two
    key blocks of the student's larger block size, the one-key-past sequence one query
    block of it and one key more, the two-query-blocks sequence two query blocks of the
    student's BLOCK_M and five rows (at least 37)."""
    big = max(block_m, block_n)
    ragged = max(37, 2 * block_m + 5)
    fixed = {BLOCK_MULTIPLE: (big, 2 * big), ONE_KEY_PAST: (big, big + 1), PAST_TWO_QUERY_BLOCKS: (ragged, ragged)}
    return tuple(dataclasses.replace(c, seqs=tuple(fixed.get(s, s) for s in c.seqs))
                 for c in (CPU_CASES if interpreter else GPU_CASES))


# -- inputs, launches, reference ------------------------------------------------------------



FIRST_KEY_ABOVE = 160.0  # the hostile case's first key's extra score (natural units) in its first sequence
FIRST_KEY_Q = 64.0  # q[..., 0] of that sequence's rows (exact in fp16)


def random_inputs(case: Case, device: str,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fresh standard-normal fp16 q (scaled by q_scale), k, v, packed.  In a hostile case
    the largest score of every row of the first sequence is its first key (by about
    FIRST_KEY_ABOVE: past fp32's exp2 range above every later block), of the second
    its last key (a running maximum started from the wrong place shows), and every score of
    the third lies near -120 (one started at 0 underflows every weight there).  With
    ``last_key_heavy`` each sequence's last key lies along its last query (score ~8 there,
    ~95% of that row's weight): a kernel that skips it is off by about a whole value row,
    not by 1/Nk of one."""
    total_q, total_k = case.cu_q[-1], case.cu_k[-1]
    q = torch.randn((total_q, case.heads, case.head_dim), generator=generator) * case.q_scale
    k = torch.randn((total_k, case.heads, case.head_dim), generator=generator)
    v = torch.randn((total_k, case.heads, case.head_dim), generator=generator)
    if case.q_scale > 1 and len(case.seqs) >= 2:
        for b, key in ((0, case.cu_k[0]), (1, case.cu_k[2] - 1)):
            mean = q[case.cu_q[b]:case.cu_q[b + 1]].mean(dim=0)
            k[key] = 3 * mean / mean.norm(dim=-1, keepdim=True) * case.head_dim**0.5 / case.q_scale
        # the first sequence's first key scores about FIRST_KEY_ABOVE more than any other of its keys (dim 0 of
        # its rows and keys set aside for that): every later key block's maximum lies past fp32's exp2 range
        # below it, so a maximum taken of the block alone, not of m_i too, rescales by 2^160 (blind round 14)
        rows, keys = slice(case.cu_q[0], case.cu_q[1]), slice(case.cu_k[0], case.cu_k[1])
        q[rows, :, 0] = FIRST_KEY_Q
        k[keys, :, 0] = 0.0
        k[case.cu_k[0], :, 0] = FIRST_KEY_ABOVE * case.head_dim**0.5 / FIRST_KEY_Q
    if case.q_scale > 1 and len(case.seqs) >= 3:
        # the third sequence's scores all lie near -FAR_BELOW: exp2 of them underflows fp32, so a
        # running maximum that starts at 0 (not -inf) zeroes its weights (blind round 8, w43)
        rows, keys = slice(case.cu_q[2], case.cu_q[3]), slice(case.cu_k[2], case.cu_k[3])
        mean = q[rows].mean(dim=0)  # (heads, head_dim)
        along = mean / (mean * mean).sum(-1, keepdim=True)  # q . along = 1
        k[keys] = -FAR_BELOW * case.head_dim**0.5 * along + 0.05 * k[keys]
    if case.long_sum:
        v = long_sum_values(v)
    if case.last_key_heavy:
        for b in range(len(case.seqs)):
            last_q = q[case.cu_q[b + 1] - 1]  # (heads, head_dim)
            # q . k / sqrt(head_dim) = 8 on every head
            k[case.cu_k[b + 1] - 1] = 8 * case.head_dim**0.5 * last_q / (last_q * last_q).sum(-1, keepdim=True)
    return q.to(device, torch.float16), k.to(device, torch.float16), v.to(device, torch.float16)


@dataclass
class VarlenLaunch:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    visits: torch.Tensor
    bands: list[guarding.Band]

    @property
    def wrote_out_of_bounds(self) -> bool:
        return bool(next(b for b in self.bands if b.name == "output").changed())


def visit_shape(case: Case, block_m: int, block_n: int) -> tuple[int, int, int]:
    max_q = max(nq for nq, _ in case.seqs)
    max_k = max(nk for _, nk in case.seqs)
    return len(case.seqs) * case.heads, -(-max_q // block_m), -(-max_k // block_n)


def run(module: ModuleType, case: Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        fills: dict[str, str] | None = None) -> VarlenLaunch:
    """One launch, every packed tensor inside a guard band (NaN margins; ``fills`` maps
    "Q", "K", "V" to another fill), a poisoned output, a zeroed visit map."""
    device = str(q.device)
    fills = fills or {}
    guarded = shared.Guarded()
    # every margin holds as many tokens as the larger packed tensor plus two blocks: a start
    # taken from the wrong prefix sum lands in a margin (NaN), not in memory outside the band
    rows = max(case.cu_q[-1], case.cu_k[-1]) + 2 * max(int(module.BLOCK_M), int(module.BLOCK_N))
    margin = -(-rows * case.heads * case.head_dim // 64) * 64
    views = [guarded.input(name, t, margin, fills.get(name, "nan")) for name, t in zip("QKV", (q, k, v), strict=True)]
    out = guarded.output("output", tuple(q.shape), device, margin)
    shape = visit_shape(case, int(module.BLOCK_M), int(module.BLOCK_N))
    visits = guarded.visits("visit map", shape, device, guarding.margin_elements(shape, 2 * shape[1]))
    cu_q = torch.tensor(case.cu_q, dtype=torch.int32, device=device)
    cu_k = torch.tensor(case.cu_k, dtype=torch.int32, device=device)
    max_q = max(nq for nq, _ in case.seqs)
    max_k = max(nk for _, nk in case.seqs)
    returned = getattr(module, LAUNCHER)(*views, cu_q, cu_k, max_q, max_k, out=out, visits=visits)
    shared.synchronize(q)
    out = shared.returned_tensor(f"{LAUNCHER}() returned", returned, out, tuple(q.shape))
    return VarlenLaunch(q, k, v, out, visits, guarded.bands)


REFERENCE_TILE = 1 << 26  # float64 scores at most per step of the reference (512 MiB)


def reference(case: Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              tile: int = REFERENCE_TILE) -> torch.Tensor:
    """Per-sequence causal attention in float64, the diagonal offset by Nk - Nq.  A long
    sequence's queries go in chunks of rows (at most ``tile`` scores over its heads at a
    time: a 4096-token sequence of 16 heads holds 268M), so any mix fits in memory.  Every
    row sees key 0 (Nk >= Nq), so every output is finite; a sequence with Nq > Nk breaks
    the launcher contract and is refused."""
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    for b, (nq, nk) in enumerate(case.seqs):
        if not 0 <= nq <= nk:
            raise ValueError(f"sequence {b} has Nq = {nq} queries and Nk = {nk} keys: the contract needs 0 <= Nq <= Nk")
        ks = k[case.cu_k[b]:case.cu_k[b + 1]].to(torch.float64).transpose(0, 1)  # (H, nk, d)
        vs = v[case.cu_k[b]:case.cu_k[b + 1]].to(torch.float64).transpose(0, 1)
        rows = max(1, tile // max(1, case.heads * nk))
        for first in range(0, nq, rows):
            last = min(first + rows, nq)
            packed = slice(case.cu_q[b] + first, case.cu_q[b] + last)
            qs = q[packed].to(torch.float64).transpose(0, 1)  # (H, rows, d)
            s = qs @ ks.transpose(-1, -2) * case.head_dim**-0.5
            s = s.masked_fill(~sees(nq, nk, q.device, first, last), float("-inf"))
            out[packed] = (torch.softmax(s, dim=-1) @ vs).transpose(0, 1)
    return out


def sees(nq: int, nk: int, device: torch.device | str = "cpu", first: int = 0, last: int | None = None) -> torch.Tensor:
    """(nq, nk) bool: query row i sees key c when c <= i + nk - nq (rows first..last - 1
    alone when given)."""
    rows = torch.arange(first, nq if last is None else last, device=device)
    return torch.arange(nk, device=device)[None, :] <= rows[:, None] + (nk - nq)


def needed_blocks(nq: int, nk: int, block_m: int, block_n: int) -> list[int]:
    """For each query block of a sequence, how many key blocks (from block 0) hold a key
    some row of it sees: up to the block of its last row's last key."""
    return [(min(first + block_m, nq) - 1 + nk - nq) // block_n + 1 for first in range(0, nq, block_m)]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def headline_sequence(case: Case, block_m: int, block_n: int) -> int:
    """The sequence whose map is headlined: the one with the most (query block, key
    block) pairs; among equals, the most pairs no row needs (where skipping shows), then
    the first."""
    def size(b: int) -> tuple[int, int, int]:
        nq, nk = case.seqs[b]
        pairs = _cdiv(nq, block_m) * _cdiv(nk, block_n)
        return pairs, pairs - sum(needed_blocks(nq, nk, block_m, block_n)), -b

    return max(range(len(case.seqs)), key=size)


def headline_map(case: Case, visits: torch.Tensor, block_m: int, block_n: int) -> VisitMap:
    """One sequence's visit map (:func:`headline_sequence`), from the visit buffer the
    kernel filled: rows its query blocks, columns its key blocks, each cell the heads that
    recorded it; the needed cells are those of :func:`needed_blocks` (its diagonal offset
    by Nk - Nq).  Where the kernel recorded blocks of this sequence past its last query or
    key block, the map grows to show them (none of them is needed).  ``seq`` is its Nk."""
    b = headline_sequence(case, block_m, block_n)
    nq, nk = case.seqs[b]
    grid = (visits[b * case.heads:(b + 1) * case.heads] != 0).cpu()  # (heads, query blocks, key blocks)
    marked = grid.any(dim=0).nonzero()
    rows = max(_cdiv(nq, block_m), 1 + int(marked[:, 0].max()) if len(marked) else 0)
    cols = max(_cdiv(nk, block_n), 1 + int(marked[:, 1].max()) if len(marked) else 0)
    spans = needed_blocks(nq, nk, block_m, block_n)
    ideal = [[j < (spans[i] if i < len(spans) else 0) for j in range(cols)] for i in range(rows)]
    label = (f"{_seq_words(case, b)}, the {case.name} case's largest: its query blocks (rows) x its key blocks "
             "(columns)")
    return VisitMap(block_m=block_m, block_n=block_n, seq=nk, heads=case.heads,
                    counts=grid[:, :rows, :cols].sum(dim=0).tolist(), ideal=ideal, label=label)


# -- the check -------------------------------------------------------------------------------

@dataclass
class Checked:
    case: Case
    result: CaseResult
    launch: VarlenLaunch
    expected: torch.Tensor


def hostile_allowance(case: Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, expected: torch.Tensor,
                      tolerance: float) -> torch.Tensor:
    """Each packed output element's allowed error on a case of large scores: per sequence,
    :func:`score_rounding_allowance` over the keys each row sees."""
    allowed = torch.full(expected.shape, tolerance, dtype=torch.float64, device=q.device)
    for b, (nq, nk) in enumerate(case.seqs):
        rows, keys = slice(case.cu_q[b], case.cu_q[b + 1]), slice(case.cu_k[b], case.cu_k[b + 1])
        if nq == 0:
            continue
        allowed[rows] = score_rounding_allowance(
            q[rows].transpose(0, 1), k[keys].transpose(0, 1), v[keys].transpose(0, 1),
            expected[rows].transpose(0, 1), sees(nq, nk, q.device), tolerance, shared.ROUNDINGS, shared.FP16_U,
        ).transpose(0, 1)
    return allowed


def evaluate(case: Case, launch: VarlenLaunch, expected: torch.Tensor, tolerance: float,
             allowed: torch.Tensor | None = None) -> CaseResult:
    """The case's verdict; with ``allowed`` (a case of large scores) each element is held to
    its own allowance and its error is reported in the tolerance's units."""
    measured = (shared.measure_output(launch.out, expected) if allowed is None
                else shared.measure_within(launch.out, expected, allowed, tolerance))
    worst_row = int(measured.error.amax(dim=(1, 2)).argmax())  # packed row
    return shared.case_result(case.name, True, [len(case.seqs), case.heads, case.cu_q[-1], case.head_dim], measured,
                              tolerance, launch.wrote_out_of_bounds, worst_row)


def check_correctness(drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                      shape: tuple[int, int, int, int] | None = None) -> Correctness:
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    checked: list[Checked] = []
    for case in cases_for(interpreter, block_m, block_n):
        q, k, v = random_inputs(case, device, generator)
        cost.step(f"the {case.name} case: {len(case.seqs)} sequences (Nq/Nk {case.words()}), {case.heads} heads")
        launched = run(module, case, q, k, v)
        expected = reference(case, q, k, v)
        allowed = hostile_allowance(case, q, k, v, expected, drill.tolerance) if case.q_scale > 1 else None
        checked.append(Checked(case, evaluate(case, launched, expected, drill.tolerance, allowed), launched, expected))

    def diagnose_launches() -> Diagnosed:
        findings: list[GuardFinding] = []
        return Diagnosed(diagnosis=diagnose(drill, module, checked, device, generator, findings),
                         guard_findings=findings)

    first = checked[0].case
    return Correctness(cases=[c.result for c in checked],
                       shape=[len(first.seqs), first.heads, first.cu_q[-1], first.head_dim],
                       visits=[headline_map(first, checked[0].launch.visits, block_m, block_n)],
                       diagnose=diagnose_launches)


# -- measurements -----------------------------------------------------------------------------

def weights(module: ModuleType, case: Case, device: str,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """The kernel's weights over the whole packed key axis, (H, total_q, total_k) float64
    (unwritten as NaN), read out through one-hot values on fresh small q and k at the
    case's own sequences (the variant the correctness launch compiled); that q and k; and
    how far the kernel's output on a random V strays from those weights times V (one launch
    more): an attention kernel's output is its weights times V, so a large gap means the
    read-out describes nothing (V read from the wrong tensor, say)."""
    q, k, v_random = random_inputs(dataclasses.replace(case, q_scale=1.0), device, generator)
    q = (q.float() * 0.1).half()  # small scores: every key let in gets a weight far above fp16's underflow
    w = _read_out(module, case, q, k, device)
    out = run(module, case, q, k, v_random).out.transpose(0, 1)  # (H, total_q, d)
    return w, q, k, reading.read_out_gap(out, w, v_random.transpose(0, 1))


def _read_out(module: ModuleType, case: Case, q: torch.Tensor, k: torch.Tensor, device: str) -> torch.Tensor:
    """The kernel's weights on ``q`` and ``k`` over the whole packed key axis, (H, total_q, total_k)
    float64 (unwritten as NaN), read through one-hot values."""
    total_q, total_k = case.cu_q[-1], case.cu_k[-1]

    def read(group: int) -> torch.Tensor:
        # packed key j = group*d + c carries the unit vector e_c, every other key 0
        v = one_hot_values((1, case.heads, total_k, case.head_dim), group, device)[0].transpose(0, 1).contiguous()
        return run(module, case, q, k, v).out.transpose(0, 1)  # (H, total_q, d)

    w, _ = reading.weights_read_out(read, total_k, case.head_dim, (case.heads, total_q), device)
    return w


def scored(w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """The true scaled scores (H, total_q, total_k) float64 and which keys each packed row
    may see (total_q, total_k), on ``w``'s device."""
    s = (q.to(torch.float64).transpose(0, 1) @ k.to(torch.float64).transpose(0, 1).transpose(-1, -2)
         * case.head_dim**-0.5)
    allowed = torch.zeros(case.cu_q[-1], case.cu_k[-1], dtype=torch.bool, device=w.device)
    for b, (nq, nk) in enumerate(case.seqs):
        allowed[case.cu_q[b]:case.cu_q[b + 1], case.cu_k[b]:case.cu_k[b + 1]] = sees(nq, nk, w.device)
    return s.to(w.device), allowed


def temperature(slope: float | None, case: Case) -> tuple[str, bool]:
    """The slope of log(weight) against the true scores over each row's own visible keys
    (:func:`reading.measured_slope`, one intercept per row), in words ("" where the weights
    are no softmax of the scores), and whether it is a known wrong temperature."""
    return reading.slope_words(slope, case.head_dim,
                               span=f"Over each row's visible keys (read out on the {case.name} case)")


def shares(w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, case: Case, block_n: int,
           patterns_only: bool = False) -> str:
    """How the kernel's K/V blocks of each sequence (``block_n`` keys from its start) share
    each row's weight against softmax, in words (:func:`block_shares_words`)."""
    s, allowed = scored(w, q, k, case)
    starts = [(b, start) for b in range(len(case.seqs)) for start in range(case.cu_k[b], case.cu_k[b + 1], block_n)]
    spans = [slice(start, min(start + block_n, case.cu_k[b + 1])) for b, start in starts]
    index = [(start - case.cu_k[b]) // block_n for b, start in starts]  # each block's number in its sequence
    rows_of = [b for b, (nq, _) in enumerate(case.seqs) for _ in range(nq)]

    def row_name(r: int) -> str:
        head, row = divmod(r, case.cu_q[-1])
        b = rows_of[row]
        return f"head {head} sequence {b} row {row - case.cu_q[b]}"

    return block_shares_words(w, s, allowed[None], block_n, row_name, "K/V block", "keys", spans,
                              patterns_only=patterns_only, span_index=index)


def own_scores_shares(module: ModuleType, one: Checked, device: str) -> str:
    """How the K/V blocks share each row's weight at the case's own scores (its q and k as checked:
    :func:`weights` scales q down, where a rescale that is wrong changes little: blind round 27, 08
    b31 and b36, told only that no key was seen or missed), in words (:func:`shares`); "" where no
    block is off, or where the output is no weighted sum of V (the read-out then says nothing)."""
    case, x = one.case, one.launch
    w = _read_out(module, case, x.q, x.k, device)
    if reading.read_out_gap(x.out.transpose(0, 1), w, x.v.transpose(0, 1)) > reading.LINEAR_SLACK:
        return ""
    said = shares(w, x.q, x.k, case, int(module.BLOCK_N))
    return f" Read out through one-hot values at the {case.name} case's own scores (q and k as checked):{said}" \
        if said else ""


@dataclass
class RowRead:
    """What one case's read-out says, per sequence."""

    shifts: dict[int, set[int]]  # sequence -> {last weighed key - diagonal} over rows whose last key is exact
    other: dict[tuple[int, int], set[int]]  # (sequence, other sequence) -> packed keys of it weighed
    other_rows: int  # rows that weigh another sequence's keys
    missed: list[tuple[int, int, list[int]]]  # (sequence, row, in-sequence keys before the diagonal weighed 0)
    future: list[tuple[int, int, int]]  # (sequence, row, keys after its diagonal weighed)
    nan_rows: dict[int, int]  # sequence -> rows whose read-out is NaN (their weights are undefined)
    empty: list[tuple[int, int]]  # (sequence, row) weighing no key of its own sequence, or NaN
    # (head, row)s that miss keys; of them those that weigh keys of the K/V block holding their
    # diagonal only and miss every key before it (blocks of block_n from the sequence's start),
    # and those that weigh no key at all
    missing_rows: int = 0
    last_block_only: int = 0
    weigh_none: int = 0
    # sequence -> (row, last key it weighs) of every (head, row) that weighs a key of its own
    lasts: dict[int, tuple[torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=dict)


def read_rows(w: torch.Tensor, case: Case, block_n: int, unreadable: torch.Tensor | None = None) -> RowRead:
    """Each (head, row)'s measured weights against its sequence's keys and diagonal, in
    order of sequence, head and row.  Whole tensors a sequence at a time: a row-by-row
    loop took 8.3 s on the GPU's cases (H100, run 24); only rows that show something
    (NaN, another sequence's keys, a missed key, a key past the diagonal) are listed.
    ``unreadable`` (like ``w``): keys whose weight at the measured temperature is too small
    for an fp16 output to hold (:func:`readout.too_small_to_read`), counted as weighed."""
    total_k = case.cu_k[-1]
    seq_of_key = torch.zeros(total_k, dtype=torch.long)
    for b in range(len(case.seqs)):
        seq_of_key[case.cu_k[b]:case.cu_k[b + 1]] = b
    read = RowRead({}, {}, 0, [], [], {}, [])
    given = w.nan_to_num(nan=0.0) > 0  # (H, total_q, total_k): the keys each row weighs
    if unreadable is not None:
        given |= unreadable.to(given.device)
    given = given.cpu()
    finite = torch.isfinite(w).all(dim=-1).cpu()  # (H, total_q): rows whose read-out is defined
    for b, (nq, nk) in enumerate(case.seqs):
        k0, k1, q0 = case.cu_k[b], case.cu_k[b + 1], case.cu_q[b]
        rows = given[:, q0:q0 + nq]  # (H, nq, total_k)
        fin = finite[:, q0:q0 + nq]
        own = rows[..., k0:k1]  # (H, nq, nk)
        outside = rows.clone()
        outside[..., k0:k1] = False
        outside &= fin[..., None]
        keys = torch.arange(nk)
        diag = torch.arange(nq) + nk - nq  # each row's last visible key, i + Nk - Nq
        has_own = own.any(dim=-1)
        last_own = torch.where(own, keys, -1).amax(dim=-1)  # (H, nq): the last key the row weighs
        weighs = fin & has_own
        read.lasts[b] = (torch.arange(nq).expand_as(weighs)[weighs], last_own[weighs])
        missed = ~own & (keys[None, :] <= diag[:, None]) & fin[..., None]  # keys it must see, unweighed
        diag_block = diag.clamp(max=nk - 1) // block_n  # the K/V block holding each row's diagonal
        in_last = (keys // block_n)[None, :] == diag_block[:, None]  # (nq, nk)
        before = (keys // block_n)[None, :] < diag_block[:, None]
        missing = missed.any(dim=-1)
        read.missing_rows += int(missing.sum())
        read.last_block_only += int((missing & has_own & ~(own & ~in_last).any(dim=-1)
                                     & (missed == before).all(dim=-1)).sum())
        read.weigh_none += int((missing & ~has_own).sum())
        after = (own & (keys[None, :] > diag[:, None])).sum(dim=-1) * fin  # keys past its diagonal
        nan_count = int((~fin).sum())
        if nan_count:
            read.nan_rows[b] = nan_count
        read.other_rows += int(outside.any(dim=-1).sum())
        for key in outside.any(dim=1).any(dim=0).nonzero().flatten().tolist():
            read.other.setdefault((b, int(seq_of_key[key])), set()).add(key)
        read.shifts.setdefault(b, set()).update((last_own - diag)[fin & has_own].tolist())
        if not read.shifts[b]:
            del read.shifts[b]
        for h in range(case.heads):
            read.empty.extend((b, i) for i in (~(fin[h] & has_own[h])).nonzero().flatten().tolist())
            missed_rows = missed[h].any(dim=-1)
            if bool(missed_rows.any()):
                where = missed[h].nonzero()  # (row, key) pairs in row order
                per_row = torch.bincount(where[:, 0], minlength=nq)[missed_rows].tolist()
                for i, part in zip(missed_rows.nonzero().flatten().tolist(),
                                   torch.split(where[:, 1], per_row), strict=True):
                    read.missed.append((b, i, part.tolist()))
            read.future.extend((b, i, int(after[h, i])) for i in after[h].nonzero().flatten().tolist())
    return read


def _seq_words(case: Case, b: int) -> str:
    nq, nk = case.seqs[b]
    return f"sequence {b} (Nq = {nq}, Nk = {nk}, Nk - Nq = {nk - nq})"


def kernel_offsets(read: RowRead, case: Case) -> dict[int, int | None] | None:
    """Each sequence's diagonal as the kernel draws it, row i's last key i + d_b, measured
    from the rows whose last weighed key is not their sequence's last (a diagonal past it is
    cut there): sequence -> d_b, or None where every row reaches the last key.  None where
    some sequence's rows do not share one d_b, a row that weighs no key is one the diagonal
    leaves none (i + d_b < 0), a row that reaches the last key one the diagonal lets reach it,
    or a row misses a key before its own last."""
    offsets: dict[int, int | None] = {}
    empty: dict[int, list[int]] = {}
    for b, i in read.empty:
        empty.setdefault(b, []).append(i)
    for b, (_, nk) in enumerate(case.seqs):
        if b in read.nan_rows:
            return None
        rows, last = read.lasts.get(b, (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)))
        cut = last == nk - 1
        found = set((last - rows)[~cut].tolist())
        if len(found) > 1:
            return None
        d = next(iter(found)) if found else None
        if d is None and not bool(cut.any()):
            return None  # no row weighs a key: nothing to measure
        if d is not None and (bool(((rows + d) < nk - 1)[cut].any()) or any(i + d >= 0 for i in empty.get(b, []))):
            return None
        offsets[b] = d
    for b, i, keys in read.missed:
        d = offsets.get(b)
        if d is None or min(keys) <= min(i + d, case.seqs[b][1] - 1):
            return None
    return offsets


def _offset_law(offsets: dict[int, int | None], case: Case) -> tuple[str, str] | None:
    """The rule the measured per-sequence offsets follow, as (code, words), where one fits
    every sequence whose offset is measured (at least two, and sequences that differ in it):
    Nq - Nk (the sign flipped), one constant for all (max_seqlen_k - max_seqlen_q, say),
    or the difference of the packed starts plus a constant; None otherwise (and for the
    right offsets)."""
    exact = {b: d for b, d in offsets.items() if d is not None}
    right = {b: nk - nq for b, (nq, nk) in enumerate(case.seqs)}
    if len(exact) < 2 or all(d == right[b] for b, d in exact.items()):
        return None
    measured = "; ".join(f"sequence {b}: d = {d} (Nk - Nq = {right[b]})" for b, d in sorted(exact.items()))
    head = (f" Measured from the last key each row weighs (rows that reach their sequence's last key only bound"
            f" it): row i's diagonal is i + d, with {measured}")
    flipped = {b: -right[b] for b in exact}
    if flipped == exact:
        return "diagonal-shifted", f"{head}: in every measured sequence d = Nq - Nk, the offset with its sign flipped"
    values = set(exact.values())
    if len(values) == 1 and len({right[b] for b in exact}) > 1:
        c = next(iter(values))
        widest = max(nk for _, nk in case.seqs) - max(nq for nq, _ in case.seqs)
        named = (f" (max_seqlen_k - max_seqlen_q = {widest})" if c == widest else "")
        return "diagonal-shifted", (f"{head}: one offset, d = {c}, in every measured sequence{named}, not each"
                                    f" one's own Nk - Nq")
    for sign, law in ((1, "cu_seqlens_k[b] - cu_seqlens_q[b]"), (-1, "cu_seqlens_q[b] - cu_seqlens_k[b]")):
        starts = {b: sign * (case.cu_k[b] - case.cu_q[b]) for b in exact}
        consts = {d - starts[b] for b, d in exact.items()}
        if len(consts) == 1 and len(set(starts.values())) > 1:
            c = next(iter(consts))
            tail = f" {'+' if c > 0 else '-'} {abs(c)}" if c else ""
            return "diagonal-from-packed-index", f"{head}: in every measured sequence d = {law}{tail}"
    return None


def _last_block_words(read: RowRead, block_n: int, unvisited: bool) -> str:
    """Where every row that misses keys weighs only keys of the K/V block holding its diagonal
    and none before it, that, in words (blind round 11: an accumulator zeroed each block, a
    running maximum never updated; ``unvisited``: the visit map records none of those earlier
    blocks for their query blocks, blind round 18, 08/w38: a loop started at the query tile's
    own offset); else ""."""
    if not read.last_block_only or read.last_block_only + read.weigh_none != read.missing_rows:
        return ""
    none = f" ({read.weigh_none} of them weigh no key at all)" if read.weigh_none else ""
    said = (f" Those rows weigh only keys of the K/V block holding their diagonal (blocks of BLOCK_N = "
            f"{block_n} keys from the sequence's start), none of the blocks before it{none}")
    if unvisited:
        return said + (", and the visit map records no visit to those earlier blocks for the query blocks those rows"
                       " are in, while it records others. The key loop does not reach them: look at where it starts"
                       " (the sequence's first key block) and at its bounds.")
    return said + (": what the earlier blocks added did not survive the later ones (a state reset, or scaled by 0,"
                   " between blocks), or their keys were masked out.")


def _earlier_blocks_unvisited(read: RowRead, case: Case, visits: torch.Tensor | None, block_m: int,
                              block_n: int) -> bool:
    """Whether the visit map records some visit, and none, for any head, to a key block before
    the diagonal's of each row that misses keys, in that row's query block."""
    if visits is None or not read.missed:
        return False
    got = (visits != 0).cpu()
    if not bool(got.any()):
        return False
    for b, i, _ in read.missed:
        nq, nk = case.seqs[b]
        diagonal_block = (i + nk - nq) // block_n
        if bool(got[b * case.heads:(b + 1) * case.heads, i // block_m, :diagonal_block].any()):
            return False
    return True


LAST_KEY_IS = "every row's last weighed key is "


def _last_key_law(read: RowRead, case: Case, block_m: int, block_n: int) -> str:
    """Where every row's last weighed key, in every sequence, is the one a known wrong bound gives
    - the keys cut at Nq (a key mask or bound against seqlen_q), or the loop's bound without the
    Nk - Nq offset (it stops after the query block's own last row) - in words; "" otherwise
    (blind round 23, 08: each told by one example row only)."""
    def cut_at_nq(i: torch.Tensor, nq: int, nk: int) -> torch.Tensor:
        return torch.clamp(i + nk - nq, max=nq - 1)

    def bound_without_offset(i: torch.Tensor, nq: int, nk: int) -> torch.Tensor:
        hi = torch.clamp((i // block_m + 1) * block_m, max=nk)  # the bound, as if Nk - Nq were 0
        return torch.minimum(i + nk - nq, torch.clamp(-(-hi // block_n) * block_n - 1, max=nk - 1))

    def bound_cut_at_nq(i: torch.Tensor, nq: int, nk: int) -> torch.Tensor:
        hi = torch.clamp((i // block_m + 1) * block_m + nk - nq, max=nq)  # the bound, capped at Nq for Nk
        return torch.minimum(i + nk - nq, torch.clamp(-(-hi // block_n) * block_n - 1, max=nk - 1))

    def row_in_tile(i: torch.Tensor, nq: int, nk: int) -> torch.Tensor:
        return i % block_m + nk - nq

    def bound_from_first_row(i: torch.Tensor, nq: int, nk: int) -> torch.Tensor:
        hi = torch.clamp((i // block_m) * block_m + nk - nq, max=nk)  # the tile's first row's diagonal
        return torch.minimum(i + nk - nq, torch.clamp(-(-hi // block_n) * block_n - 1, max=nk - 1))

    laws: dict[str, Callable[[torch.Tensor, int, int], torch.Tensor]] = {
        "every row's last weighed key is min(i + Nk - Nq, Nq - 1): no key at or past Nq is weighed - the key"
        " mask (or the bound) compares the key index with the sequence's Nq, where its Nk belongs": cut_at_nq,
        "every row's last weighed key is min(i + Nk - Nq, the end of the key block holding (query block + 1) *"
        " BLOCK_M - 1): the loop stops after the query block's own rows, without the Nk - Nq offset its bound"
        " needs (the keys up to i + Nk - Nq of a query chunk that ends the sequence)": bound_without_offset,
        "every row's last weighed key is min(i + Nk - Nq, the end of the key block holding Nq - 1): the loop's"
        " bound (query block + 1) * BLOCK_M + Nk - Nq is capped at the sequence's Nq, where its Nk belongs":
            bound_cut_at_nq,
        # blind round 28 (08 b mask_tile_local_row, b loop_bound_from_first_row)
        "every row's last weighed key is i % BLOCK_M + Nk - Nq: the mask compares the keys with the row's offset"
        " within its query tile (counted from 0, as tl.arange(0, BLOCK_M) is), where the row's position in its"
        " sequence belongs": row_in_tile,
        "every row's last weighed key is min(i + Nk - Nq, the end of the last key block that starts before the"
        " query tile's first row's diagonal): the loop's bound is the tile's first row's diagonal, start_m *"
        " BLOCK_M + Nk - Nq, where its last row's plus one, (start_m + 1) * BLOCK_M + Nk - Nq, belongs (a tile"
        " whose bound is 0 then reads no key at all)": bound_from_first_row,
    }
    fitting: list[str] = []
    for words, law in laws.items():
        fits, differs, rows_apart = bool(read.lasts), set(), 0
        for b, (rows, last) in read.lasts.items():
            nq, nk = case.seqs[b]
            want = law(rows, nq, nk)
            fits = fits and bool((last == want).all())
            apart = int((want < rows + nk - nq).sum())
            rows_apart += apart
            if apart:
                differs.add(b)
        # told apart from the truth in two sequences at least, or in many rows: one sequence can fit a law by
        # chance in a row or two (the one-key-past case's bound one key short fits the cut at Nq there); a
        # case with one long sequence tells a law in its rows (blind round 28, 08 b mask_tile_local_row)
        if fits and (len(differs) >= 2 or rows_apart >= 16):
            fitting.append(words)
    if len(fitting) == 1:
        return f" Measured over every sequence's rows that weigh a key of their own: {fitting[0]}."
    if fitting:  # this case's lengths cannot tell them apart (blind round 25, 08 b13: a bound capped at Nq)
        return (" Measured over every sequence's rows that weigh a key of their own, the last weighed key fits each"
                " of these, which this case's lengths cannot tell apart: "
                + "; or ".join(f"({n}) {w.removeprefix(LAST_KEY_IS)}" for n, w in enumerate(fitting, 1)) + ".")
    return ""


def diagonal_findings(read: RowRead, case: Case, block_n: int, visits: torch.Tensor | None = None,
                      block_m: int = 1) -> Findings:
    """The diagonal each sequence's rows measure: the classic off-by-(Nk - Nq), one shift
    shared by all sequences, a shift that moves with the packed starts, or rows that
    miss keys / weigh keys after their diagonal (said with the measured rows)."""
    found = Findings()
    where = f" (the {case.name} case)"
    single = {b: next(iter(s)) for b, s in read.shifts.items() if len(s) == 1}
    # one shift per measured sequence; the rows that weigh nothing must be the rows that shift leaves no key
    consistent = len(single) == len(read.shifts) and bool(single) and all(
        b not in read.shifts or i + case.seqs[b][1] - case.seqs[b][0] + single[b] < 0 for b, i in read.empty)
    missed_beyond_shift = [(b, i, m) for b, i, m in read.missed if b in read.shifts and (
        b not in single or single[b] >= 0 or min(m) <= i + case.seqs[b][1] - case.seqs[b][0] + single[b])]
    if consistent and not missed_beyond_shift and not any(single.values()):
        return found
    unmeasured = [b for b in range(len(case.seqs)) if b not in single]  # every row weighs nothing

    def fits(predicted: dict[int, int]) -> bool:
        """The measured shifts, and sequences left with no key at all (a shift of -Nk or less)."""
        return all(predicted[b] == single[b] for b in single) and all(predicted[b] <= -case.seqs[b][1]
                                                                       for b in unmeasured)

    if consistent and not missed_beyond_shift:
        offset = {b: nk - nq for b, (nq, nk) in enumerate(case.seqs)}
        shown = "; ".join(f"{_seq_words(case, b)}: {_shift_words(d)}" for b, d in sorted(single.items()))
        if unmeasured:
            shown += f"; sequence{'s' * (len(unmeasured) > 1)} {index_runs(unmeasured)}: no key of its own weighed"
        if read.empty:
            shown += (f" ({len(read.empty)} rows weigh no key of their own sequence: their read-out weights on its"
                      " keys are all 0 or NaN)")
        values = set(single.values())
        if any(offset[b] > 0 for b in single) and fits({b: -offset[b] for b in offset}):
            found.say("diagonal-not-offset", f" Measured per sequence: {shown}{where}.")
        elif len(values) == 1 and fits({b: next(iter(values)) for b in offset}):
            empty = (f" ({len(read.empty)} rows weigh no key of their own sequence: their read-out weights on its"
                     " keys are all 0 or NaN)"
                     if read.empty else "")
            found.say("diagonal-shifted", f" Every measured sequence's rows: {_shift_words(next(iter(values)))}"
                      f"{empty}{where}.")
        elif packed_law := _packed_shift_law(single, case, fits):
            found.say("diagonal-from-packed-index", packed_law + where + ".")
        else:
            # the sign flipped (i - (Nk - Nq)), or one offset for all: the rule the clamped rows' reading names too
            rule = _offset_law({b: d + offset[b] for b, d in single.items()}, case)
            if rule is not None and rule[0] == "diagonal-shifted":
                found.say("diagonal-shifted", rule[1] + where + ".")
            else:
                found.say("diagonal-shifted", f" The shift differs between sequences: {shown}{where}.")
        return found
    offsets = kernel_offsets(read, case)
    if offsets is not None:
        rule = _offset_law(offsets, case)
        if rule is not None:
            code, words = rule
            found.say(code, words + where + ".")
            return found
    if read.missed:
        b, i, keys = read.missed[0]
        last = i + case.seqs[b][1] - case.seqs[b][0]
        unvisited = _earlier_blocks_unvisited(read, case, visits, block_m, block_n)
        found.say("keys-missed", f" {len(read.missed)} rows give no weight to keys they must see; the first: row {i} "
                  f"of {_seq_words(case, b)} misses key{'s' * (len(keys) > 1)} {index_runs(keys)} of its 0..{last}"
                  f"{where}.{_last_block_words(read, block_n, unvisited)}{_last_key_law(read, case, block_m, block_n)}")
    if read.future:
        b, i, n = read.future[0]
        found.say("future-keys-seen", f" {len(read.future)} rows weigh keys after their diagonal; the first: row {i} "
                  f"of {_seq_words(case, b)} weighs {n} key{'s' * (n != 1)} past key "
                  f"{i + case.seqs[b][1] - case.seqs[b][0]}{where}.")
    return found


def _packed_shift_law(single: dict[int, int], case: Case, fits: Callable[[dict[int, int]], bool]) -> str:
    """Where the measured shifts (``single``: sequence -> shift; ``fits``: do predicted shifts fit
    them and the sequences left no key) follow where the sequences sit in the packed tensors --
    cu_seqlens_q[b] - cu_seqlens_k[b], or the key side alone (packed key positions against
    in-sequence rows: blind round 28, 08 b mask_global_key_local_query), or the row side alone,
    each maybe less Nk - Nq, plus one constant -- that in words; "" otherwise."""
    offset = {b: nk - nq for b, (nq, nk) in enumerate(case.seqs)}
    b0 = min(single)
    packed = {b: case.cu_q[b] - case.cu_k[b] for b in offset}
    laws = (("cu_seqlens_q[b] - cu_seqlens_k[b]", packed, "cu_seqlens_q[{b}] - cu_seqlens_k[{b}]", packed),
            ("-cu_seqlens_k[b]", {b: -case.cu_k[b] for b in offset}, "cu_seqlens_k[{b}]",
             dict(enumerate(case.cu_k))),
            ("cu_seqlens_q[b]", dict(enumerate(case.cu_q)), "cu_seqlens_q[{b}]", dict(enumerate(case.cu_q))))
    for law, base, named, shown in laws:
        if len(set(base.values())) < 2:
            continue
        for with_offset in (False, True):
            c = single[b0] - base[b0] + (offset[b0] if with_offset else 0)
            if not fits({b: base[b] + c - (offset[b] if with_offset else 0) for b in offset}):
                continue
            starts = "; ".join(f"sequence {b}: {_shift_words(single[b])}, {named.format(b=b)} = {shown[b]}"
                               + (f", Nk - Nq = {offset[b]}" if with_offset else "") for b in sorted(single))
            rule = (law + (" - (Nk - Nq)" if with_offset else "") + (f" {'+' if c > 0 else '-'} {abs(c)}" if c else ""))
            side = {"-cu_seqlens_k[b]": " (keys compared at their packed positions, rows at their in-sequence ones)",
                    "cu_seqlens_q[b]": " (rows compared at their packed positions, keys at their in-sequence ones)"}
            return f" Measured: {starts}; in every sequence the shift is {rule}{side.get(law, '')}"
    return ""


def _shift_words(d: int) -> str:
    if d == 0:
        return "each row's last weighed key is its diagonal"
    side = "past" if d > 0 else "short of"
    return f"each row's last weighed key is {abs(d)} key{'s' * (abs(d) != 1)} {side} its diagonal i + Nk - Nq"


def other_sequence_findings(read: RowRead, case: Case) -> Findings:
    found = Findings()
    if not read.other:
        return found
    parts = []
    for (b, other), keys in sorted(read.other.items())[:4]:
        first = case.cu_k[other]
        local = sorted(x - first for x in keys)
        parts.append(f"rows of sequence {b} weigh key{'s' * (len(local) > 1)} {index_runs(local)} of sequence "
                     f"{other} (packed {index_runs(sorted(keys))})")
    pairs = list(read.other)
    # do the rows that weigh another sequence's keys also miss their own first key?  Then their
    # range is shifted past its start, not only run on past its end (blind round 8, w12)
    shifted = any(s == b and 0 in keys for s, _, keys in read.missed for b, _ in pairs)
    if all(other > b for b, other in pairs):
        where = (" Every key weighed outside a sequence lies after that sequence's own last key: its rows' key range"
                 " runs on past the sequence's end")
        where += (", and rows of those sequences also miss their own first key: the range is shifted, so look at"
                  " where its K and V loads start (cu_seqlens_k[b]) as well as where its loop and mask stop."
                  if shifted else
                  " (the key length, the loop bound or the key mask built from it); the loads may start right.")
    elif all(other < b for b, other in pairs):
        where = (" Every key weighed outside a sequence lies before that sequence's first key: look at where its K"
                 " and V loads start (cu_seqlens_k[b]), or at whether an earlier sequence's program stored rows"
                 " past its own end into this sequence's place (the output store's mask), whose read-out then"
                 " shows the earlier sequence's keys.")
    else:
        where = ""
    found.say("reads-other-sequence", f" {read.other_rows} rows weigh keys of another sequence: {'; '.join(parts)}"
              f" (the {case.name} case).{where}")
    return found


@dataclass
class Extra:
    """The visits no row needs, by where they lie: key blocks wholly past the sequence's keys
    (starting at or after Nk) of a query block that holds rows, other key blocks past the
    tile's last diagonal key, and any key block of a query block past the sequence's rows."""

    past_keys: int = 0
    past_diagonal: int = 0
    past_rows: int = 0

    @property
    def total(self) -> int:
        return self.past_keys + self.past_diagonal + self.past_rows

    def words(self) -> str:
        total = self.total
        if total and self.past_keys == total:
            return (" Every one of them is a key block wholly past its sequence's last key (it starts at or after"
                    " Nk), of a query block that holds rows: the loop's bound is not capped at the sequence's Nk"
                    " keys.")
        if total and self.past_diagonal == total:
            return (" Every one of them holds keys of its sequence, past the last diagonal key of the tile's last"
                    " row: the loop's bound runs past the causal diagonal.")
        return ""


def visit_counts(checked: list[Checked], block_m: int, block_n: int) -> tuple[int, int, int, int, str, Extra]:
    """Over every case: (visits recorded, needed, visits no row needs, needed not recorded,
    an example of an unneeded visit, where the unneeded ones lie)."""
    visited = needed = unrecorded = 0
    example = ""
    where = Extra()
    for one in checked:
        case = one.case
        counts = (one.launch.visits != 0).cpu()
        visited += int(counts.sum())
        for b, (nq, nk) in enumerate(case.seqs):
            spans = needed_blocks(nq, nk, block_m, block_n)
            for h in range(case.heads):
                grid = counts[b * case.heads + h]
                for m in range(grid.shape[0]):
                    want = spans[m] if m < len(spans) else 0
                    needed += want
                    got = grid[m].nonzero().flatten().tolist()
                    unrecorded += sum(1 for j in range(want) if j not in got)
                    over = [j for j in got if j >= want]
                    beyond = sum(1 for j in over if j * block_n >= nk)
                    if want:
                        where.past_keys += beyond
                        where.past_diagonal += len(over) - beyond
                    else:
                        where.past_rows += len(over)
                    if over and not example:
                        why = (f"past the sequence's {nk} keys (it needs blocks 0..{want - 1})"
                               if want and beyond == len(over) else
                               f"past the diagonal (it needs blocks 0..{want - 1})" if want
                               else "whose rows are past the sequence's end")
                        example = (f"the map records key block{'s' * (len(over) > 1)} {index_runs(over)} for query "
                                   f"block {m} of {_seq_words(case, b)}, {why}, the {case.name} case")
    return visited, needed, where.total, unrecorded, example, where


def _ideal_rows(case: Case, shape: tuple[int, ...], block_m: int, block_n: int) -> torch.Tensor:
    """(B*H, n_m, n_n) bool: the blocks each (sequence, head) row of the visit map should hold."""
    ideal = torch.zeros(shape, dtype=torch.bool)
    for b, (nq, nk) in enumerate(case.seqs):
        for m, want in enumerate(needed_blocks(nq, nk, block_m, block_n)):
            if m < shape[1]:
                ideal[b * case.heads:(b + 1) * case.heads, m, :min(want, shape[2])] = True
    return ideal


def _strides(got: torch.Tensor, ideal: torch.Tensor) -> tuple[int, int] | None:
    """The (query blocks a row, key blocks a query block) with which the ideal (row, query
    block, key block) triples land on exactly the flat positions the kernel stored; the map's
    own first, then every other up to twice the map's; None where none does."""
    rows, n_m, n_n = ideal.shape
    stored = set(got.flatten().nonzero().flatten().tolist())
    want = ideal.nonzero().tolist()
    for a in [n_m, *range(1, 2 * n_m + 2)]:
        for c in [n_n, *range(1, 2 * n_n + 2)]:
            if {(r * a + m) * c + j for r, m, j in want} == stored:  # stores may coincide: compared as positions
                return a, c
    return None


def _row_patterns(grid: torch.Tensor) -> list[bytes]:
    """Each row's (query block, key block) pattern, sorted: equal lists are the same rows in some order."""
    return sorted(row.flatten().numpy().tobytes() for row in grid)


def misplaced_rows(checked: list[Checked], block_m: int, block_n: int) -> str:
    """Where every case's map holds exactly the ideal blocks, only at other places, in words:
    the rows of other (sequence, head)s (a kernel recording at another program's row), or
    positions laid out with other row lengths (a kernel told other maximum lengths than the
    map's); "" where some case's stores are not the ideal ones rearranged."""
    moved = total = 0
    laid_out: list[str] = []
    for one in checked:
        got = (one.launch.visits != 0).cpu()
        ideal = _ideal_rows(one.case, tuple(got.shape), block_m, block_n)
        strides = _strides(got, ideal)
        if strides is None:
            if _row_patterns(got) != _row_patterns(ideal):
                return ""
            moved += int((got != ideal).flatten(1).any(dim=1).sum())
        elif strides != tuple(got.shape[1:]):
            laid_out.append(f"the {one.case.name} case's stores read as rows of {strides[0]} query block(s) of"
                            f" {strides[1]} key block(s), where its map has {got.shape[1]} of {got.shape[2]}")
        total += got.shape[0]
    if laid_out:
        return (" Its stores, decoded with other row lengths, are exactly the blocks needed: "
                + "; ".join(laid_out) + " (the kernel's map row lengths are not the map's: look at how it"
                " computes them, cdiv(MAX_Q, BLOCK_M) and cdiv(MAX_K, BLOCK_N), and at the MAX_Q and MAX_K the"
                " launcher passes).")
    if moved:
        return (f" {moved} of the {total} (sequence, head) rows of the maps, over all cases, hold another row's"
                " blocks; taken together they are exactly the blocks needed.")
    return ""


def visit_findings(checked: list[Checked], block_m: int, block_n: int) -> Findings:
    found = Findings()
    visited, needed, extra, unrecorded, example, where = visit_counts(checked, block_m, block_n)
    if visited == 0:
        found.say("no-visits-recorded")
        return found
    misplaced = misplaced_rows(checked, block_m, block_n) if extra or unrecorded else ""
    if misplaced:
        found.say("visits-misplaced", misplaced)
        return found
    if extra:
        found.say("extra-blocks", f" {extra} visits to blocks no row needs, over all cases ({visited} visited, "
                  f"{needed} needed); e.g. {example}.{where.words()}")
    if unrecorded and all(c.result.passed for c in checked):
        found.say("visits-uncounted", f" {unrecorded} of the {needed} needed (query block, key block) pairs were "
                  "not recorded in the visit map, yet every output is right.")
    return found


OVERRUN_CAVEAT = (" A store also landed outside the output, so a program stores rows that are not its own: past"
                  " its sequence's end, or from a start that is not the sequence's first query row"
                  " (cu_seqlens_q[b]). Such rows land in another sequence's place, whose read-out then shows this"
                  " sequence's keys and misses its own: the loads may be right. Look at the rows each program"
                  " stores first: where the output store starts, and its mask.")


NAN_WHATEVER_V = (
    " Read out through one-hot values on that case, each of those rows weighs every key NaN: the NaN arises in"
    " what the row computes from its scores (the running maximum, l_i, alpha, p) before V can matter. The"
    " usual sources: m_i starts at -inf, so m_new - m_i or qk - m_i (exp2 of +inf, then 0 * inf), a division"
    " by alpha or l_i inside the loop, a block where a row's every score is -inf (-inf - (-inf) = NaN), or a"
    " row whose loop read no key at all (l_i still 0, so acc / l_i is 0/0); alpha must be exp2(m_i - m_new)"
    " and p must use m_new.")


def diagnose(drill: Drill, module: ModuleType, checked: list[Checked], device: str, generator: torch.Generator,
             guard_findings: list[GuardFinding]) -> list[Diagnosis]:
    """What the check measured, as the drill's worded findings: rows never written, stores
    outside the output, the read-out's weights across sequences and against each diagonal,
    the guard bands, NaN rows, and the visit map."""
    found = Findings()
    everything = checked
    # the long-sum case (q = 0, V's column 0 at 512) reads nothing out; it is said only where all else passed
    sums = [c for c in checked if c.case.long_sum]
    checked = [c for c in checked if not c.case.long_sum]
    failing = [c for c in checked if not c.result.passed]
    for one in failing:
        if one.result.unwritten:
            by_head = shared.unwritten_rows(one.launch.out).cpu()  # (total_q, heads)
            poisoned = by_head.any(dim=-1)
            rows = poisoned.nonzero().flatten().tolist()
            seqs = sorted({_seq_of(one.case, r) for r in rows})
            whole = by_head.all(dim=-1).nonzero().flatten().tolist()
            # (blind round 27, 08 b17: a row with one head written was counted as a row never written)
            heads = ("every head of each" if len(whole) == len(rows) else
                     f"every head of {len(whole)} of them (packed row{'s' * (len(whole) > 1)} {index_runs(whole)})"
                     if whole else "no row in every head")
            found.say("output-unwritten", f" {int(by_head.sum())} (row, head) outputs never written, in {len(rows)}"
                      f" packed rows of sequence{'s' * (len(seqs) > 1)} {index_runs(seqs)} (packed rows"
                      f" {index_runs(rows)}, the {one.case.name} case; {heads})."
                      + _unwritten_heads_words(by_head[poisoned]) + _grid_split_words(one.case, by_head)
                      + _written_rows_words(one, by_head, drill.tolerance))
        if one.result.wrote_out_of_bounds:
            found.say("store-out-of-bounds", f" (the {one.case.name} case)")
    read_any = False
    first_read = ""  # the first failing case's read-out: its softmax's slope and row sums, in words
    hot = False  # ... and whether that slope is a known wrong temperature
    untrusted = False  # ... or that the output is no weighted sum of V's rows, so the read-out says nothing
    finite_read = False  # some read-out row's weights were all numbers (else no key was measured as seen or missed)
    block_words = ""  # ... and how its K/V blocks share the weight, where they are off
    diagonal = Findings()
    nan_rows: dict[str, set[int]] = {}  # case -> packed rows the read-out found NaN on every key
    for one in failing:
        if one.result.unwritten and one.result.unwritten == one.launch.out.numel():
            continue
        w, wq, wk, gap = weights(module, one.case, device, generator)
        # packed rows whose every read-out weight is NaN (in some head): NaN whatever V holds
        nan_rows[one.case.name] = set(torch.isnan(w).all(dim=-1).any(dim=0).cpu().nonzero().flatten().tolist())
        finite_read = finite_read or bool(torch.isfinite(w).all(dim=-1).any())
        if gap > reading.LINEAR_SLACK:  # the read-out says nothing of this kernel: no claim is made from it
            if not read_any:
                untrusted = True
                first_read = reading.not_weighted_sum_words(gap, f" (the {one.case.name} case)")
            read_any = True
            break  # the same kernel reads V the same way on every case: another read-out says nothing more
        s, allowed = scored(w, wq, wk, one.case)
        measured = reading.measured_slope(w, s, allowed[None], one.case.cu_k[-1])
        read = read_rows(w, one.case, int(module.BLOCK_N), reading.too_small_to_read(s, allowed[None], measured))
        if not read_any:
            slope, hot = temperature(measured, one.case)
            first_read = slope + reading.row_sums(w)
            if not hot:  # how its K/V blocks share the weight (only a fitting pattern where no slope was read:
                # the slope is fitted with one intercept a row, which a block-wise mistake bends)
                block_words = shares(w, wq, wk, one.case, int(module.BLOCK_N), patterns_only=not slope)
                first_read += block_words
        read_any = True
        across = other_sequence_findings(read, one.case)
        found.add(across)
        # the first failing case that shows one
        diagonal = diagonal or diagonal_findings(read, one.case, int(module.BLOCK_N), one.launch.visits,
                                                 int(module.BLOCK_M))
        if across or diagonal:
            # one case's read-out that names something is the diagnosis: reading the other failing
            # cases (a launch per head_dim packed keys each: 47 launches, 3.7 s after the verdict on
            # the GPU's cases in run 21) would only say it again at other lengths
            break
    found.add(diagonal)
    if "store-out-of-bounds" in found:  # the read-out reads rows that another sequence's stores may have reached
        for code in ("reads-other-sequence", "keys-missed", *SHIFTS):
            if code in found:
                found[code] += OVERRUN_CAVEAT
                break
    nan_source = next((c for c in failing if c.result.nonfinite), None)
    launches = [shared.Banded.of(c.launch.bands, c.result, f" (the {c.case.name} case)") for c in everything]
    probe = None
    if nan_source is not None:
        src = nan_source

        def again(fills: dict[str, str]) -> torch.Tensor:
            return run(module, src.case, src.launch.q, src.launch.k, src.launch.v, fills).out

        probe = shared.NanProbe(src.result, again, f"the {src.case.name} case runs")
    reads, said = shared.guard_report(launches, probe)
    guard_findings.extend(reads)
    for code, detail in said.items():
        found.say(code, detail)
    if "read-past-end" in found and any(r.tensor == "Q" and r.access == "read" for r in reads) and failing:
        # the rows whose q load stayed in bounds say which rows it read (blind round 23, 08: q at k_start)
        first = failing[0]
        found["read-past-end"] += other_query_rows_words(first.case, first.launch.q, first.launch.k, first.launch.v,
                                                         first.launch.out, first.expected, drill.tolerance,
                                                         finite_only=True)
    if nan_source is not None and "read-past-end" not in found and not any(code in found for code in SHIFTS):
        out = nan_source.launch.out
        bad = (~torch.isfinite(out.float()) & (out.view(torch.int16) != shared.POISON_BITS)).any(dim=-1).any(dim=-1)
        packed = bad.cpu().nonzero().flatten().tolist()
        seqs = sorted({_seq_of(nan_source.case, r) for r in packed})
        far = ""
        if nan_source.case.q_scale > 1 and seqs == [2]:  # only the sequence whose every score is near -120
            far = far_below_words("Those rows are all in sequence 2 of that case",
                                  ", and the final division is then 0/0")
        elif nan_source.case.q_scale > 1 and seqs == [0]:  # only the sequence whose maximum drops past fp32's range
            far = (f" Those rows are all in sequence 0 of that case, the one whose first key scores about"
                   f" {FIRST_KEY_ABOVE:g} above every other key it holds: from the second key block on, each block's"
                   f" maximum lies past fp32's exp2 range below the row's running one, and its first key's score"
                   " past exp's: what overflows only there is, for example, exp of a score with no maximum"
                   " subtracted, or a correction computed against the block's own maximum (exp2 of the rise: a"
                   " maximum of the block alone, not max(m_i, the block's)), where exp2(m_i - m_new) is simply 1.")
        scores_only = "" if far or not packed or not set(packed) <= nan_rows.get(nan_source.case.name, set()) \
            else NAN_WHATEVER_V
        found.say("nan-in-output", f" {nan_source.result.nonfinite} elements in {len(packed)} packed rows of "
                  f"sequence{'s' * (len(seqs) > 1)} {index_runs(seqs)} (the {nan_source.case.name} case).{far}"
                  f"{scores_only}")
    drop_explained_nan(found)
    if failing and read_any and not _explained(found) and "read-past-end" not in found:
        one = failing[0]
        row = one.result.worst_row or 0
        b = _seq_of(one.case, row)
        # said only of weights measured as numbers (blind round 23, 08: said where every row read out NaN)
        seen = "" if untrusted or not finite_read else \
            " The measured weights show no key a row should not see and none it misses."
        heads = reading.other_head_words(one.launch.out, one.expected, one.launch.q, one.launch.k, one.launch.v,
                                         functools.partial(reference, one.case), drill.tolerance)
        x = one.launch
        heads = heads or other_query_rows_words(one.case, x.q, x.k, x.v, x.out, one.expected, drill.tolerance) \
            or operand_strides_words(one.case, x.q, x.k, x.v, x.out, drill.tolerance)
        if not heads and not untrusted and not block_words:  # at the case's own scores, then
            first_read += own_scores_shares(module, one, device)
        found.say("wrong-temperature" if hot and not heads else "wrong-output",
                  f"{seen} The "
                  f"largest error is at row {row - one.case.cu_q[b]} of {_seq_words(one.case, b)} "
                  f"({'non-finite' if one.result.max_abs_err is None else f'{one.result.max_abs_err:.3g}'}, the "
                  f"{one.case.name} case).{first_read}{heads}")
    found.add(visit_findings(checked, int(module.BLOCK_M), int(module.BLOCK_N)))
    if not failing:
        found.add(_long_sum_findings(sums, drill.tolerance))
    return found.worded(drill)


def _long_sum_findings(sums: list[Checked], tolerance: float) -> Findings:
    """``long-sum-wrong`` for a failing long-sum case (every other case passed): which packed rows of
    V's column 0 went wrong, and whether they are the rows that see 128 keys or more."""
    found = Findings()
    for one in sums:
        if not one.result.passed:
            keys = torch.cat([torch.arange(nk - nq + 1, nk + 1) for nq, nk in one.case.seqs])
            where = f"the long-sum case (sequences Nq/Nk {one.case.words()}, packed)"
            found["long-sum-wrong"] = long_sum_words(one.launch.out.transpose(0, 1), one.expected.transpose(0, 1),
                                                     keys, tolerance, where)
    return found


OTHER_ROWS_SAMPLED = 8  # wrong (packed row, head) outputs matched against every query row, spread over the rows


def operand_strides_words(case: Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                          tolerance: float) -> str:
    """Where the output is, within the tolerance, attention with one of Q, K, V read through other
    (token, head) strides than the packed layout's (tokens, heads, head_dim) -- token stride
    HEAD_DIM (one head's row a token), or a head-major layout -- every read inside the tensor:
    the strides in words (blind round 21, 08/w21: K's token stride HEAD_DIM); K and V read so
    together as well (the drill's one kv_rows offset serves both loads: blind round 28, 08 b
    kv_row_stride_missing_heads); "" otherwise.  At most twelve references of the case, on a
    failing check only."""
    heads, d = q.shape[1:]
    got = out.to(torch.float64)
    if not bool(torch.isfinite(got).all()):
        return ""
    for names in (("K",), ("V",), ("Q",), ("K", "V")):
        name = " and ".join(names)
        tokens = {"Q": q, "K": k, "V": v}[names[0]].shape[0]
        for token_stride, head_stride, what in (
                (d, d, "the token stride is HEAD_DIM where one token holds every head's row (H * HEAD_DIM)"),
                (d, tokens * d, "the token and head strides are those of a (heads, tokens, head_dim) layout"),
                (d, 0, "the token stride is HEAD_DIM and the head offset is missing")):
            index = (torch.arange(tokens)[:, None, None] * token_stride + torch.arange(heads)[None, :, None]
                     * head_stride + torch.arange(d)[None, None, :])
            operands = {"Q": q, "K": k, "V": v}
            if int(index.max()) >= min(operands[n].numel() for n in names):
                continue  # it reads past the end: the guard band's NaN says that
            for n in names:
                operands[n] = operands[n].reshape(-1)[index.to(operands[n].device)]
            guess = reference(case, operands["Q"], operands["K"], operands["V"])
            if float((guess - got).abs().max()) <= tolerance:
                return (f" Your output is, within the tolerance, attention with {name} read at element"
                        f" token*{token_stride} + head*{head_stride} + c (token, head, component c), where the packed"
                        f" (tokens, heads, head_dim) layout has it at token*{heads * d} + head*{d} + c: {what}."
                        f" Look at the offsets of the {name} load{'s' * (len(names) > 1)}.")
    return ""


def other_query_rows_words(case: Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                           expected: torch.Tensor, tolerance: float, finite_only: bool = False) -> str:
    """Where every sampled wrong output (packed row, head) equals, within the tolerance, attention
    of another packed query row's q (the same head) against its own sequence's keys under its own
    causal bound, in words, with the law that relates the two rows where one fits every sample
    (the in-sequence index counted from packed row 0: the q offset misses the sequence's start);
    "" otherwise.  Each sample costs every query row's attention over one sequence's keys."""
    got = out.to(torch.float64)
    wrong = ((got - expected.to(torch.float64)).abs().nan_to_num(nan=float("inf")) > tolerance).any(dim=-1)
    if finite_only:  # ``finite_only``: the rows whose output is a number (a NaN from a load past the end is apart)
        wrong &= torch.isfinite(got).all(dim=-1)
    pairs = wrong.cpu().nonzero().tolist()  # (packed row, head)
    if not pairs:
        return ""
    sample = pairs[:: max(1, len(pairs) // OTHER_ROWS_SAMPLED)][:OTHER_ROWS_SAMPLED]
    queries = q.to(torch.float64)
    found: list[tuple[int, int, int]] = []  # (row, head, the row whose q it took)
    for r, h in sample:
        b = _seq_of(case, r)
        nq, nk = case.seqs[b]
        seen = r - case.cu_q[b] + nk - nq + 1  # keys 0 .. i + (Nk - Nq) of its sequence
        keys = slice(case.cu_k[b], case.cu_k[b] + seen)
        kk, vv = k[keys, h].to(torch.float64), v[keys, h].to(torch.float64)
        o = torch.softmax(queries[:, h] @ kk.T * case.head_dim**-0.5, dim=-1) @ vv  # every row's q, these keys
        gap = (o - got[r, h]).abs().amax(dim=-1).nan_to_num(nan=float("inf"))
        gap[r] = float("inf")
        other = int(gap.argmin())
        if float(gap[other]) > tolerance:
            return ""
        # a row that sees few keys fits many q's (its output is a mix of a few value rows): where the row of
        # its in-sequence index counted from packed row 0 fits as well, that one is taken
        from_zero = r - case.cu_q[b]
        found.append((r, h, from_zero if float(gap[from_zero]) <= tolerance else other))
    shown = "; ".join(f"row {r - case.cu_q[_seq_of(case, r)]} of sequence {_seq_of(case, r)} (head {h}): packed row"
                      f" {o}'s" for r, h, o in found[:4])
    words = (f" Each of {len(found)} wrong outputs sampled equals, within the tolerance, attention of another packed"
             f" query row's q against its own keys ({shown}{'; ...' if len(found) > 4 else ''})")
    if all(o == r - case.cu_q[_seq_of(case, r)] for r, _, o in found):
        return words + (": in every one the row of its in-sequence index counted from packed row 0, as if its"
                        " sequence started there. The q load misses the sequence's start"
                        " row, cu_seqlens_q[b].")
    if all(o == r - case.cu_q[_seq_of(case, r)] + case.cu_k[_seq_of(case, r)] for r, _, o in found):
        return words + (": in every one the row of its in-sequence index counted from its sequence's first key"
                        " row, cu_seqlens_k[b]. The q load starts at cu_seqlens_k[b], where cu_seqlens_q[b] belongs"
                        " (rows past the packed Q's end read its margin: the NaN above).")
    return words + ": the q load reads another row; check its offset."


SAMPLED_PLACES = 256  # wrong written outputs compared with every right one (each a pass over all of them)


def _written_rows_words(one: Checked, unwritten: torch.Tensor, tolerance: float) -> str:
    """How many of the (row, head) outputs that were written are wrong too, where some are,
    and where each of those equals the right output of another (row, head), the first such
    place (a store with the wrong row stride or head offset puts outputs in other rows'
    places: blind round 11); "" where every written one is right."""
    out, expected = one.launch.out.to(torch.float64).cpu(), one.expected.to(torch.float64).cpu()
    wrong, err = shared.wrong_written_rows(out, expected, tolerance, unwritten)  # (total_q, heads)
    if not bool(wrong.any()):
        return ""
    heads = out.shape[1]
    said = (f" Of the {int((~unwritten).sum())} (row, head) outputs that were written, {int(wrong.sum())} are wrong"
            f" too (largest error {float(err[wrong].nan_to_num(float('inf')).max()):.3g})")
    places = wrong.nonzero()[:SAMPLED_PLACES]  # the first wrong places in packed order
    got = out[places[:, 0], places[:, 1]].float()  # (places, d)
    every = expected.reshape(-1, expected.shape[-1]).float()  # (rows * heads, d)
    best = torch.full((len(places),), float("inf"))
    source = torch.zeros(len(places), dtype=torch.long)
    for start in range(0, every.shape[0], 1024):  # chunks: (places, 1024, d) at a time, not the whole product
        gap = (got[:, None, :] - every[None, start:start + 1024]).abs().amax(dim=-1).nan_to_num(float("inf"))
        value, index = gap.min(dim=-1)
        better = value < best
        best, source = torch.where(better, value, best), torch.where(better, index + start, source)
    if not bool((best <= tolerance).all()):
        return said + "."
    (r, h), first = places[0].tolist(), int(source[0])
    each = "each" if len(places) == int(wrong.sum()) else f"each of the first {len(places)} checked"
    return (f"{said}, and {each} equals the right output of another (row, head): the stores reached other places"
            f" (packed row {r} head {h} holds row {first // heads} head {first % heads}'s output).")


def _grid_split_words(case: Case, unwritten: torch.Tensor) -> str:
    """Where the (row, head) outputs never written (``unwritten``: (total_q, heads) bool) are exactly
    within the sequences numbered H and up, one of them wholly (more sequences than heads; a
    program of a head past H stores into the next tokens' place, so not all of them stay
    unwritten), or exactly heads B and up of every sequence (more heads than sequences): the
    program id's (sequence, head) split taken the other way round, or a grid axis of the wrong
    size, in words (blind round 27, 08 b40: told only where the loads start); "" otherwise."""
    batch, heads = len(case.seqs), case.heads
    rows = torch.tensor([_seq_of(case, r) for r in range(unwritten.shape[0])])
    if batch > heads:
        want = (rows >= heads)[:, None].expand_as(unwritten)
        which = f"sequences {heads}..{batch - 1} (those numbered from H = {heads}, the head count, on)"
        ran = "the sequence index ran over the H heads' count"
    elif heads > batch:
        want = (torch.arange(heads) >= batch)[None, :].expand_as(unwritten)
        which = f"heads {batch}..{heads - 1} (those numbered from B = {batch}, the sequence count, on)"
        ran = "the head index ran over the B sequences' count"
    else:
        return ""
    # (a program of a head past H stores into the next tokens' place: some of those rows are written)
    whole = bool((unwritten == want).all(dim=1).all()) if heads > batch else any(
        bool(unwritten[rows == b].all()) for b in range(heads, batch))
    if not bool(unwritten.any()) or bool((unwritten & ~want).any()) or not whole:
        return ""
    return (f" Every output never written lies in {which}, and some of them wholly: as if {ran} - look at how"
            " program_id(1) splits into the sequence (off_bh // H) and the head (off_bh % H), and at the grid's"
            " size.")


def _unwritten_heads_words(rows: torch.Tensor) -> str:
    """Where every unwritten packed row (``rows``: (rows, heads) bool, a head still poisoned)
    is unwritten in the same heads and written in the others, that, in words (blind round 11:
    a store without its head offset writes head 0's place only); else ""."""
    if rows.numel() == 0 or not bool((rows == rows[0]).all()) or bool(rows[0].all()):
        return ""
    heads, written = rows[0].nonzero().flatten().tolist(), (~rows[0]).nonzero().flatten().tolist()
    one = len(heads) == 1
    return (f" In each of them only head{'s' * (not one)} {index_runs(heads)} still hold{'s' * one} the "
            f"poison; head{'s' * (len(written) > 1)} {index_runs(written)} of the same rows "
            f"{'was' if len(written) == 1 else 'were'} written.")


SHIFTS = ("diagonal-not-offset", "diagonal-shifted", "diagonal-from-packed-index")  # these account for rows left no key
EXPLAINING = ("output-unwritten", "store-out-of-bounds", "reads-other-sequence", "diagonal-not-offset",
              "diagonal-shifted", "diagonal-from-packed-index", "keys-missed", "future-keys-seen")


def _explained(found: Findings) -> bool:
    return any(code in found for code in EXPLAINING)


def _seq_of(case: Case, packed_row: int) -> int:
    return max(b for b in range(len(case.seqs)) if case.cu_q[b] <= packed_row)


# -- timing -------------------------------------------------------------------------------------

def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    """The student's kernel on the packed timing case; on a GPU, torch's SDPA on the same
    sequences padded to a batch, with a mask that is the offset causal one inside each
    sequence and excludes the padding (``baselines.padded_sdpa``)."""
    case = cases_for(True, 32, 32)[0] if interpreter else GPU_TIMING
    # drawn on the device (nothing compares these values): at the GPU's timing shape a CPU
    # draw and its copy took about 1.1 s of the performance phase (H100, run 24)
    q, k, v = launching.timing_tensors([(case.cu_q[-1], case.heads, case.head_dim),
                                        *[(case.cu_k[-1], case.heads, case.head_dim)] * 2], device, generator)
    out = torch.empty_like(q)
    cu_q = torch.tensor(case.cu_q, dtype=torch.int32, device=device)
    cu_k = torch.tensor(case.cu_k, dtype=torch.int32, device=device)
    max_q = max(nq for nq, _ in case.seqs)
    max_k = max(nk for _, nk in case.seqs)
    student = {"causal": lambda: module.attention(q, k, v, cu_q, cu_k, max_q, max_k, out=out)}
    baseline = {}
    if not interpreter:
        qp, kp, vp, mask = padded(case, q, k, v)
        sdpa = torch.nn.functional.scaled_dot_product_attention
        baseline["causal"] = lambda: sdpa(qp, kp, vp, attn_mask=mask)
    return TimedLaunches(shape=[len(case.seqs), case.heads, case.cu_q[-1], case.head_dim], student=student,
                         baseline=baseline, inputs=(q, k, v, cu_q, cu_k))


def timing_work(drill: Drill, module: ModuleType, timed: TimedLaunches) -> dict[str, Counted]:
    """The timed launch's counted work (:func:`count_work`), from one visit-recording
    launch on the timed inputs (guarded as the check's own), keyed as it is timed."""
    q, k, v, cu_q, cu_k = timed.inputs
    starts_q, starts_k = cu_q.tolist(), cu_k.tolist()
    seqs = tuple((starts_q[b + 1] - starts_q[b], starts_k[b + 1] - starts_k[b]) for b in range(len(starts_q) - 1))
    case = Case("timing", int(q.shape[1]), int(q.shape[2]), seqs)
    launched = run(module, case, q, k, v)
    return {"causal": count_work(case, launched.visits, int(module.BLOCK_M), int(module.BLOCK_N))}


def count_work(case: Case, visits: torch.Tensor, block_m: int, block_n: int) -> Counted:
    """FLOPs and bytes of a launch from its visit buffer, as :mod:`tutor.harness.roofline`
    counts one map, sequence by sequence (each has its own grid and ragged ends): every
    visited (query block, key block) tile costs ``4 · rows · keys · d`` on its real rows and
    keys, and loads a K and a V tile of its real keys; each (sequence, head) query block
    with rows loads its Q tile and stores its O tile once.  The ideal: the FLOPs of the
    blocks each sequence's offset diagonal needs (:func:`needed_blocks`), and Q, K, V read
    once, O written once."""
    from tutor.harness import roofline  # it reads drill 03's formulas (tutor.quiz): only where a roofline is built

    d, size = case.head_dim, roofline.ELEMENT_BYTES
    counts = (visits != 0).to(torch.int64).cpu()  # (sequences*heads, query blocks, key blocks)
    n_m, n_n = counts.shape[1], counts.shape[2]
    flops = kv_elements = tiles = ideal_flops = 0
    for b, (nq, nk) in enumerate(case.seqs):
        rows = torch.tensor([max(0, min(block_m, nq - i * block_m)) for i in range(n_m)])
        keys = torch.tensor([max(0, min(block_n, nk - j * block_n)) for j in range(n_n)])
        grid = counts[b * case.heads:(b + 1) * case.heads].sum(dim=0)  # heads that visited each tile
        flops += 4 * d * int((grid * rows[:, None] * keys[None, :]).sum())
        kv_elements += d * int((grid * keys[None, :]).sum())
        tiles += int(grid.sum())
        spans = needed_blocks(nq, nk, block_m, block_n)
        ideal_flops += case.heads * 4 * d * sum(int(rows[i]) * int(keys[:spans[i]].sum()) for i in range(len(spans)))
    q_elements = case.heads * case.cu_q[-1] * d
    work = roofline.WorkCount(flops=flops, q_bytes=q_elements * size, k_bytes=kv_elements * size,
                              v_bytes=kv_elements * size, o_bytes=q_elements * size, visited_tiles=tiles)
    compulsory = case.heads * (2 * case.cu_q[-1] + 2 * case.cu_k[-1]) * d * size
    ideal = roofline.Ideal(flops=float(ideal_flops), bytes=compulsory,
                           note=f"fused: Q, K, V read once, O written once; the FLOPs of the blocks each "
                                f"sequence's offset diagonal needs, at {block_m}x{block_n} blocks")
    return roofline.Counted(work=work, ideal=ideal)


def padded(case: Case, q: torch.Tensor, k: torch.Tensor,
           v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The packed sequences as a padded batch (batch, H, max, d) and the bool mask
    (batch, 1, max_q, max_k) each sequence needs (padding keys masked; padding rows
    see key 0 so that they stay finite)."""
    batch = len(case.seqs)
    max_q = max(nq for nq, _ in case.seqs)
    max_k = max(nk for _, nk in case.seqs)
    qp = q.new_zeros((batch, case.heads, max_q, case.head_dim))
    kp = k.new_zeros((batch, case.heads, max_k, case.head_dim))
    vp = v.new_zeros((batch, case.heads, max_k, case.head_dim))
    mask = torch.zeros((batch, 1, max_q, max_k), dtype=torch.bool, device=q.device)
    for b, (nq, nk) in enumerate(case.seqs):
        qp[b, :, :nq] = q[case.cu_q[b]:case.cu_q[b + 1]].transpose(0, 1)
        kp[b, :, :nk] = k[case.cu_k[b]:case.cu_k[b + 1]].transpose(0, 1)
        vp[b, :, :nk] = v[case.cu_k[b]:case.cu_k[b + 1]].transpose(0, 1)
        mask[b, 0, :nq, :nk] = sees(nq, nk, q.device)
        mask[b, 0, nq:, 0] = True
    return qp, kp, vp, mask


def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One launch of every GPU case, as the verdict makes it (each packing's lengths are
    specialised apart), so the verdict's variants compile at once on threads; own seeds:
    the check's random stream stays the same with or without them."""
    def launch(case: Case, seed: int) -> object:
        q, k, v = random_inputs(case, device, torch.Generator().manual_seed(seed))
        return run(module, case, q, k, v)

    cases = cases_for(False, int(module.BLOCK_M), int(module.BLOCK_N))
    return [functools.partial(launch, case, n) for n, case in enumerate(cases)]


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 timing_work=timing_work, compile_warmups=compile_warmups)
