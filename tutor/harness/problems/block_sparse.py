"""Block-sparse attention from a block mask, with tanh soft-capping (drill 09).

The launcher contract: ``attention(q, k, v, block_mask, softcap, out=None,
visits=None)``, q, k, v of shape (batch, heads, seq, head_dim).  ``block_mask``
(:class:`BlockMask`, built by the tutor for the student's BLOCK_M x BLOCK_N
tiles, as FlexAttention's ``create_block_mask``) says for each query block
which key blocks are *full* (every key visible) and which *partial* (the
element mask ``mask[r, c]`` decides), as counts and index rows; a block in
neither list is skipped.  Row r weighs key c by ``exp(softcap * tanh(s / softcap))``
with s = q·k / sqrt(d).  The contract for a row that sees no key (an empty
list, or every key of its partial blocks masked): its output is 0, as
flex_attention's.

Correctness runs the cases of :data:`CPU_CASES` / :data:`GPU_CASES`: a causal
mask, a sliding window, a random block pattern (an empty query block, one with
only partial blocks, one with only full ones), a length shorter than a block,
lengths that are not multiples of the block, hostile scores (exp overflows fp32
unless the running maximum is subtracted), a softcap where tanh saturates, and
the long-sum case (:mod:`tutor.harness.long_sum`: an fp16 running sum overflows).

The diagnosis is measured (:mod:`.block_sparse_readout`):

* the visit map against the listed blocks: visits to unlisted blocks are
  counted (``unlisted-blocks``), listed blocks never visited too;
* the weights the kernel gives each key, read through one-hot values, against
  the element mask: weight on masked keys of partial blocks, of unlisted
  blocks, no weight on visible keys (by kind of block);
* the score modifier, read on tutor-chosen scores (each row sees key 0, of
  score 0, and one key of a chosen score s): the measured effective score
  ln(w_s / w_0) against softcap·tanh(s/softcap);
* the element mask read on full blocks: the same launch with the mask zeroed
  inside every full block; a kernel that masks full blocks changes its output
  (``full-blocks-masked``: correct, but a mask load and a select per tile for
  nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.findings import drop_explained_nan, index_runs
from tutor.harness.loader import LAUNCHER
from tutor.harness.long_sum import long_sum_values
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches
from tutor.harness.problems.attention.cases import block_visit_map, evaluate
from tutor.harness.problems.attention.reference import place_far_below, score_rounding_allowance
from tutor.harness.result import CaseResult, Diagnosis, GuardFinding, VisitMap


@dataclass(frozen=True)
class Case:
    name: str
    batch: int
    heads: int
    seq: int
    head_dim: int
    pattern: str  # "causal", "window", "random"
    softcap: float
    window: int = 0
    q_scale: float = 1.0  # > 1: hostile scores
    far_below: bool = False  # the last head's every score near -FAR_BELOW (see random_inputs)
    long_sum: bool = False  # q = 0 and V's column 0 at 512: an fp16 running sum overflows (tutor.harness.long_sum)


CPU_CASES = (
    Case("causal", 1, 2, 100, 32, "causal", 20.0),  # ragged: 100 = 3 * 32 + 4
    # rows whose partial block gives them no key; the last head's scores far below 0, so a running maximum
    # left at 0 after such a block (m_i = m_use: blind round 12, w42) underflows every later p
    Case("window", 1, 2, 90, 32, "window", 30.0, window=40, far_below=True),
    Case("random", 1, 2, 128, 32, "random", 20.0),  # an empty query block, one all-partial, one all-full
    Case("short", 2, 1, 20, 32, "causal", 50.0),  # shorter than one block
    # scores ~ +-100 on head 0 (tanh ~ identity), near -120 on head 1
    Case("hostile", 1, 2, 70, 32, "causal", 1000.0, q_scale=40.0, far_below=True),
    # |s| >> softcap: tanh saturates.  A softcap of 1 also gives a key masked to -inf *before* the
    # cap (-softcap after it) a weight of e^-1, and the last query block is all full, its last key
    # block ragged: keys past the end left in a full block move the output measurably
    Case("saturated", 1, 2, 70, 32, "random", 1.0, q_scale=16.0),
    # every score 0 (softcap·tanh(0) = 0) and V's column 0 at 512: from row 127 on a causal row sums 128 keys or
    # more, past fp16's 65504, so an acc kept in fp16 overflows there
    Case("long-sum", 1, 2, 200, 32, "causal", 20.0, q_scale=0.0, long_sum=True),
)
GPU_CASES = (
    Case("causal", 2, 4, 1000, 64, "causal", 20.0),
    Case("window", 1, 4, 700, 64, "window", 30.0, window=200, far_below=True),
    Case("random", 1, 4, 512, 64, "random", 20.0),
    Case("short", 2, 1, 20, 64, "causal", 50.0),
    Case("hostile", 1, 2, 300, 64, "causal", 1000.0, q_scale=40.0, far_below=True),
    Case("saturated", 1, 2, 270, 64, "random", 1.0, q_scale=16.0),  # 270 = 4 * 64 + 14: 50 keys past the end
    Case("long-sum", 1, 2, 200, 64, "causal", 20.0, q_scale=0.0, long_sum=True),
)
GPU_TIMING = Case("timing", 4, 16, 4096, 64, "causal", 30.0)


@dataclass
class BlockMask:
    """FlexAttention's BlockMask, for one head pattern: the element mask and, per query
    block, the full and the partial key blocks (counts, index rows padded with 0)."""

    mask: torch.Tensor  # (seq, seq) int8
    full_kv_num_blocks: torch.Tensor  # (n_m,) int32
    full_kv_indices: torch.Tensor  # (n_m, n_n) int32
    kv_num_blocks: torch.Tensor
    kv_indices: torch.Tensor
    block_m: int
    block_n: int

    def kinds(self) -> torch.Tensor:
        """(n_m, n_n) int: 0 unlisted, 1 partial, 2 full."""
        n_m, n_n = self.kv_indices.shape
        kinds = torch.zeros(n_m, n_n, dtype=torch.int64)
        for i in range(n_m):
            for j in self.full_kv_indices[i, : int(self.full_kv_num_blocks[i])].tolist():
                kinds[i, j] = 2
            for j in self.kv_indices[i, : int(self.kv_num_blocks[i])].tolist():
                kinds[i, j] = 1
        return kinds

    def allowed(self) -> torch.Tensor:
        """(seq, seq) bool: what a row sees under the lists (full blocks whole, partial
        blocks through the element mask, unlisted blocks nothing)."""
        seq = self.mask.shape[0]
        kinds = self.kinds().to(self.mask.device)
        rows = torch.arange(seq, device=self.mask.device) // self.block_m
        cols = torch.arange(seq, device=self.mask.device) // self.block_n
        kind = kinds[rows][:, cols]
        return (kind == 2) | ((kind == 1) & (self.mask != 0))


def element_mask(case: Case, generator: torch.Generator, block_m: int, block_n: int) -> torch.Tensor:
    """(seq, seq) bool: the case's mask.  The random pattern draws each block empty,
    partial (random keys) or full; query block 1 is empty, block 0 all partial (its
    row 3 sees no key at all) and the last block all full."""
    seq = case.seq
    r = torch.arange(seq)[:, None]
    c = torch.arange(seq)[None, :]
    if case.pattern == "causal":
        return c <= r
    if case.pattern == "window":
        return (c <= r) & (c > r - case.window)
    n_m, n_n = -(-seq // block_m), -(-seq // block_n)
    # the block pattern is fixed (one per shape and block size), so every check lists the
    # same blocks; the keys inside partial blocks are drawn fresh
    kind = torch.randint(0, 3, (n_m, n_n), generator=torch.Generator().manual_seed(seq * 1000 + block_m + block_n))
    if n_m > 2:
        kind[0] = 1
        kind[1] = 0
        kind[-1] = 2
    dense = torch.rand((seq, seq), generator=generator) < 0.5
    k = kind[(r // block_m).expand(seq, seq), (c // block_n).expand(seq, seq)]
    mask = (k == 2) | ((k == 1) & dense)
    if n_m > 2:
        mask[min(3, block_m - 1)] = False  # a row of an all-partial block that sees no key: its output is 0
    return mask


def build_block_mask(mask: torch.Tensor, block_m: int, block_n: int, device: str) -> BlockMask:
    """The block lists of an element mask, as FlexAttention's create_block_mask makes
    them: a block whose existing (row, key) pairs are all visible is full, one with
    some visible is partial, one with none is left out."""
    seq = mask.shape[0]
    n_m, n_n = -(-seq // block_m), -(-seq // block_n)
    padded = torch.zeros(n_m * block_m, n_n * block_n, dtype=torch.int64)
    exists = torch.zeros_like(padded)
    padded[:seq, :seq] = mask.long()
    exists[:seq, :seq] = 1
    seen = padded.reshape(n_m, block_m, n_n, block_n).sum(dim=(1, 3))
    size = exists.reshape(n_m, block_m, n_n, block_n).sum(dim=(1, 3))
    full, part = (seen == size) & (seen > 0), (seen > 0) & (seen < size)

    def lists(which: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        counts = which.sum(dim=1).to(torch.int32)
        index = torch.zeros(n_m, n_n, dtype=torch.int32)
        for i in range(n_m):
            js = which[i].nonzero().flatten()
            index[i, : len(js)] = js.to(torch.int32)
        return counts.to(device), index.to(device)

    fc, fi = lists(full)
    pc, pi = lists(part)
    return BlockMask(mask.to(device, torch.int8).contiguous(), fc, fi, pc, pi, block_m, block_n)


def softcapped(s: torch.Tensor, softcap: float) -> torch.Tensor:
    return softcap * torch.tanh(s / softcap)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
              softcap: float) -> torch.Tensor:
    """Dense float64 attention with the modifier and the mask; a row that sees no key is 0."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    s = softcapped((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5, softcap)
    s = s.masked_fill(~allowed.to(q.device), float("-inf"))
    w = torch.softmax(s, dim=-1).nan_to_num(nan=0.0)
    return w @ v


# -- launches ----------------------------------------------------------------------------------

@dataclass
class SparseLaunch(launching.Launch):
    stray_visits: bool = False  # a visit recorded outside the map


def _margin(n: int) -> int:
    return -(-n // 64) * 64


def run(module: ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bm: BlockMask,
        softcap: float, fills: dict[str, str] | None = None) -> SparseLaunch:
    """One launch, q, k, v between NaN margins (``fills`` maps "Q", "K", "V" to another
    fill, see :func:`guard.input_band`), a poisoned output, a zeroed visit map."""
    fills = fills or {}
    batch, heads, seq, _ = q.shape
    device = str(q.device)
    guarded = shared.Guarded()
    margin = _margin(max(q.numel(), guarding.margin_elements(tuple(q.shape), 2 * int(module.BLOCK_M))))
    views = [guarded.input(name, t, margin, fills.get(name, "nan")) for name, t in zip("QKV", (q, k, v), strict=True)]
    out = guarded.output("output", tuple(q.shape), device, margin)
    n_m, n_n = launching.visit_grid(seq, module.BLOCK_M, module.BLOCK_N)
    visits = guarded.visits("visit map", (batch * heads, n_m, n_n), device, _margin(batch * heads * n_m * n_n + 1024))
    with cost.launched_blocks() as launched:
        returned = getattr(module, LAUNCHER)(*views, bm, softcap, out=out, visits=visits)
    shared.synchronize(q)
    out = shared.returned_tensor(f"{LAUNCHER}() returned", returned, out, tuple(q.shape))
    return SparseLaunch(q=q, k=k, v=v, out=out, guard=guarded.band("output").side("after"), visits=visits,
                        bands=guarded.bands, stray_visits=bool(guarded.band("visit map").changed()),
                        launched=launched)


def random_inputs(case: Case, device: str, generator: torch.Generator) -> list[torch.Tensor]:
    """Fresh standard-normal fp16 q (scaled by q_scale), k, v (V's column 0 at 512 in the
    long-sum case).  In a ``far_below`` case the
    last head's every score lies within about +-10 of -FAR_BELOW: exp or exp2 of a score
    minus a running maximum that started at 0, not -inf, underflows to 0 for every key
    there, and the final division is 0/0 (blind round 9, w96), while its softmax is an
    ordinary one over score differences of a few units."""
    shape = (case.batch, case.heads, case.seq, case.head_dim)
    q = torch.randn(shape, generator=generator) * case.q_scale
    k, v = (torch.randn(shape, generator=generator) for _ in range(2))
    if case.far_below:
        place_far_below(q[:, -1], k[:, -1], a=case.q_scale, q_scale=case.q_scale)  # the last head
    if case.long_sum:
        v = long_sum_values(v)
    return [t.to(device, torch.float16) for t in (q, k, v)]


@dataclass
class Checked:
    case: Case
    result: CaseResult
    launch: SparseLaunch
    expected: torch.Tensor
    bm: BlockMask


def visit_map(checked: Checked) -> VisitMap:
    assert checked.launch.visits is not None
    ideal = (checked.bm.kinds() > 0).tolist()
    return block_visit_map(checked.launch.visits, checked.case.seq, checked.bm.block_m, checked.bm.block_n, ideal,
                           f"the {checked.case.name} block mask")


def check_correctness(drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                      shape: tuple[int, int, int, int] | None = None) -> Correctness:
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)
    cases = CPU_CASES if interpreter else GPU_CASES
    if shape is not None:
        b, h, s, d = shape
        cases = (Case(cases[0].name, b, h, s, d, cases[0].pattern, cases[0].softcap), *cases[1:])
    checked: list[Checked] = []
    for case in cases:
        bm = build_block_mask(element_mask(case, generator, block_m, block_n), block_m, block_n, device)
        q, k, v = random_inputs(case, device, generator)
        cost.step(f"the {case.name} case, shape {cost.shape_words((case.batch, case.heads, case.seq, case.head_dim))},"
                  f" softcap {case.softcap:g}")
        launched = run(module, q, k, v, bm, case.softcap)
        expected = reference(q, k, v, bm.allowed(), case.softcap)
        # scores of ~+-100 (the hostile case): each element held to its own allowance, in tolerance units
        allowed = (score_rounding_allowance(q, k, v, expected, bm.allowed().to(q.device), drill.tolerance,
                                            shared.ROUNDINGS, shared.FP16_U,
                                            functools.partial(softcapped, softcap=case.softcap))
                   if case.name == "hostile" else None)
        result = evaluate(case.name, False, launched, expected, drill.tolerance, allowed)
        checked.append(Checked(case, result, launched, expected, bm))
    maps = [visit_map(c) for c in checked]

    def diagnose_launches() -> Diagnosed:
        from tutor.harness.problems.block_sparse_readout import diagnose

        findings: list[GuardFinding] = []
        said = diagnose(module, checked, maps, device, generator, findings, drill.tolerance)
        drop_explained_nan(said)
        diagnosis: list[Diagnosis] = said.worded(drill)
        return Diagnosed(diagnosis=diagnosis, guard_findings=findings)

    return Correctness(cases=[c.result for c in checked],
                       shape=[cases[0].batch, cases[0].heads, cases[0].seq, cases[0].head_dim],
                       visits=maps, diagnose=diagnose_launches)


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    case = CPU_CASES[0] if interpreter else GPU_TIMING
    shape = (case.batch, case.heads, case.seq, case.head_dim)
    q, k, v = launching.timing_tensors([shape, shape, shape], device, generator)
    bm = build_block_mask(element_mask(case, generator, int(module.BLOCK_M), int(module.BLOCK_N)),
                          int(module.BLOCK_M), int(module.BLOCK_N), device)
    out = torch.empty_like(q)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return TimedLaunches(
        shape=list(shape),
        student={"full": lambda: getattr(module, LAUNCHER)(q, k, v, bm, case.softcap, out=out)},
        # dense SDPA (causal, no softcap: it has none): the work a dense kernel does
        baseline={"full": lambda: sdpa(q, k, v, is_causal=True)},
    )


def where(one: Checked) -> str:
    c = one.case
    return f" (the {c.name} case: seq={c.seq}, softcap={c.softcap:g})"


def rows_words(rows: list[int]) -> str:
    return index_runs(rows)


Launcher = Callable[..., object]

def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One launch of every GPU case, as the verdict makes it (its lengths, block masks and
    softcaps are specialised apart), so the verdict's variants compile at once on threads;
    own seeds: the check's random stream stays the same with or without them."""
    block_m, block_n = int(module.BLOCK_M), int(module.BLOCK_N)

    def launch(case: Case, seed: int) -> object:
        generator = torch.Generator().manual_seed(seed)
        bm = build_block_mask(element_mask(case, generator, block_m, block_n), block_m, block_n, device)
        q, k, v = random_inputs(case, device, generator)
        return run(module, q, k, v, bm, case.softcap)

    return [functools.partial(launch, case, n) for n, case in enumerate(GPU_CASES)]


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 compile_warmups=compile_warmups)
