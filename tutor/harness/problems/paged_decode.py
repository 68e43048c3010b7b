"""Paged, GQA-packed split-KV decoding (drill 07):
``attention(q, k_pages, v_pages, block_table, lengths, out=)``.

One new query token per sequence, ``q`` (batch, heads, head_dim), against a KV
cache kept in a pool of pages ``(num_pages, kv_heads, page_size, head_dim)``:
sequence b's position ``pos`` is in page ``block_table[b, pos // page_size]`` at
offset ``pos % page_size``; query head h reads K/V head ``h // (heads // kv_heads)``.

The inputs make every wrong read measurable.  The pages are a scrambled
permutation of the pool; the pool also holds *poisoned* pages that no sequence
lists (two spare ones, and one per sequence that its block table names in the
column past its last page), and the offsets past a length in a last partial page
are poisoned too: stale keys, larger than the real ones, and shifted values, so
a kernel that uses them gives a visibly wrong answer.  On Triton's interpreter
every load of the two pools is counted (:mod:`paged_reads`), so the diagnosis
says which pages and offsets were read and how many times: the bytes moved.
Where nothing is counted (a compiled GPU launch), the diagnosis of a failing
kernel reads out which pool rows took part in each head's softmax instead
(:mod:`paged_weights`): launches of the same variant with K = 0 and one-hot V.

Cases: ``default`` (GQA 4, pages of 8), ``ragged`` (GQA 1, pages of 16), ``short``
(GQA 8, pages of 32, a sequence of 5), ``hostile`` and ``orders``: GQA ratios 4,
1 and 8; page sizes 8, 16 and 32 (smaller and larger than a kernel's tile);
lengths of one position, whole pages and partial last pages;
scores of standard deviation 100 (``hostile``), and scores in four levels by
quarter of each sequence (``orders``: the maximum in the first, the last and a
middle quarter, 173 apart in the exp2 domain, past fp32's range; and a sequence
whose every score is -120 or less, whose exp2 underflows fp32 unless the
running maximum starts at -inf; launched with 3 slices, so a merge that pads its
slots to 4 must weigh the padding slot 0), and ``nan-tail``: the default case
with NaN in V wherever the others hold finite poison and page 0 a spare, so a V
load without the position mask (p = 0 times NaN) shows; it is diagnosed only where
every other case passed (``v-read-unmasked``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

from tutor.catalog import Drill
from tutor.harness import cost
from tutor.harness import guard as guarding
from tutor.harness import guarded as shared
from tutor.harness import launch as launching
from tutor.harness.loader import LAUNCHER
from tutor.harness.problems import Correctness, Diagnosed, ModuleProblem, Problem, TimedLaunches, paged_reads
from tutor.harness.problems import split_kv_readout as apart
from tutor.harness.result import CaseResult, GuardFinding

GARBAGE_K_SCALE = 3.0  # poisoned keys: larger than real ones, so a read of them wins the softmax
GARBAGE_V_SHIFT = 3.0  # poisoned values: shifted, so a read of them moves the output
SPARE_PAGES = 2  # poisoned pages in no block table at all


@dataclass(frozen=True)
class Case:
    name: str
    heads: int
    kv_heads: int
    page_size: int
    head_dim: int
    lengths: tuple[int, ...]
    score_std: float = 1.0
    layout: str = "random"  # "orders": scores in four levels by quarter (see the module's docstring)
    # a split count of its own (num_splits=), not the launcher's choice: the contract takes one,
    # and a merge whose slot mask or count is not the launch's is wrong there (blind round 10, w67)
    num_splits: int | None = None
    # V NaN at every poisoned position (past a length, in a page no table lists for its sequence): a
    # V load without the position mask lets p = 0 times NaN into the sum (blind round 16, 07 w28)
    nan_tail: bool = False

    @property
    def batch(self) -> int:
        return len(self.lengths)

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, max(self.lengths), self.head_dim)


CPU_CASES = (
    # GQA 4, pages of 8: a partial last page (53 = 6*8 + 5), one position, whole pages
    Case("default", 8, 2, 8, 32, (53, 1, 24, 37), 2.0),
    # GQA 1 (one query head per K/V head), pages of 16; 70 positions of a 6-page (96-position) table in
    # 3 slices of 32 reach the last slice, so a split grid one slice short fails (blind round 12, w47)
    Case("ragged", 2, 2, 16, 16, (70, 16, 7), num_splits=3),
    # GQA 8, pages of 32: a sequence shorter than a page and a tile, and one of 6 pages whose
    # 7-column table (224 positions), split 4 ways with each slice rounded down to a tile
    # (4 x 32), leaves positions 128..179 unread at ordinary scores (blind round 10, w94)
    Case("short", 8, 1, 32, 16, (180, 5)),
    # long enough that each slice spans several tiles (the running maximum grows inside a slice)
    Case("hostile", 4, 1, 8, 16, (300, 29), 100.0),
    # 3 slices: the merge's fourth slot is padding, so a padding m loaded as 0 (other=0.0, not -inf) lies far
    # above the fourth sequence's every real one (its scores all -120 or less) and underflows their weights
    Case("orders", 4, 2, 8, 16, (256, 256, 192, 157), 1.0, "orders", num_splits=3),
    # pages larger than a tile, and slices (384 table positions / 4 = 96) that start inside a
    # page: a position's offset is pos % PAGE_SIZE, not the tile's own column or the slice's
    Case("large-pages", 4, 2, 128, 16, (250, 130), 1.0),
    Case("nan-tail", 8, 2, 8, 32, (53, 1, 24, 37), 2.0, nan_tail=True),  # the default case, NaN where it poisons
)
GPU_CASES = (
    Case("default", 32, 8, 16, 128, (2000, 1, 1024, 777, 1537, 64), 2.0),
    Case("ragged", 8, 8, 16, 64, (1001, 16, 7), num_splits=3),
    Case("short", 32, 4, 32, 128, (1500, 5)),
    Case("hostile", 16, 4, 16, 128, (1504, 29), 100.0),
    Case("orders", 16, 2, 16, 128, (1024, 1024, 768, 637), 1.0, "orders", num_splits=3),
    Case("large-pages", 16, 4, 256, 128, (1500, 300), 1.0),
    Case("nan-tail", 32, 8, 16, 128, (2000, 1, 1024, 777, 1537, 64), 2.0, nan_tail=True),
)
CPU_TIMING = (2, 8, 2, 16, 64, 32)  # batch, heads, kv_heads, page_size, length, head_dim
GPU_TIMING = (16, 32, 8, 16, 4096, 128)


def cases_for(interpreter: bool) -> tuple[Case, ...]:
    return CPU_CASES if interpreter else GPU_CASES


# -- inputs -----------------------------------------------------------------------------
# per sequence, the level of q.k/sqrt(d) in each quarter; the fourth sequence's scores are all
# far below 0 (exp2 of them underflows fp32), so a maximum that starts at 0, or counts padding
# rows' zero scores, or an empty slice's m stored as 0, zeroes its weights (blind round 8)
ORDER_LEVELS = ((100.0, -20.0, -140.0, -260.0), (-260.0, -140.0, -20.0, 100.0), (-20.0, 100.0, -140.0, -260.0),
                (-120.0, -150.0, -120.0, -180.0))


@dataclass
class Paged:
    """One case's inputs: the pool, the tables, and what each page is."""

    q: torch.Tensor  # (batch, heads, D)
    k_pages: torch.Tensor  # (num_pages, kv_heads, page_size, D)
    v_pages: torch.Tensor
    block_table: torch.Tensor  # int32 (batch, max_pages)
    lengths: torch.Tensor  # int32 (batch,)
    # per page: (sequence, logical page) for a listed page; (sequence, -1) for the poisoned
    # page a sequence's table names past its last page; (-1, -1) for a spare one
    owner: list[tuple[int, int]] = field(default_factory=list)

    @property
    def spare_page(self) -> int:
        """The first page no table names: the number the block table's guard band holds, so a
        read past the table finds a poisoned page (:func:`launch_on`)."""
        return next(page for page, (s, _) in enumerate(self.owner) if s < 0)


def pages_needed(length: int, page_size: int) -> int:
    return -(-length // page_size)


def page_layout(case: Case, generator: torch.Generator) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """The scrambled pool's block table (int32, CPU) and each page's owner (:class:`Paged`):
    each sequence's pages in a random order, then its poisoned page, two spares in no table (page 0
    one of them in a nan-tail case)."""
    needed = [pages_needed(n, case.page_size) for n in case.lengths]
    max_pages = max(needed) + 1
    num_pages = sum(needed) + case.batch + SPARE_PAGES
    perm = torch.randperm(num_pages, generator=generator).tolist()
    if case.nan_tail:  # page 0 a spare (all NaN in V): what a page index loaded with other=0 points at
        perm.remove(0)
        perm.append(0)
    owner: list[tuple[int, int]] = [(-1, -1)] * num_pages
    rows = []
    i = 0
    for s in range(case.batch):
        row = []
        for j in range(max_pages):
            if j <= needed[s]:  # the pages it holds, then its poisoned one
                page = perm[i]
                i += 1
                owner[page] = (s, j if j < needed[s] else -1)
            row.append(page)  # columns past the poisoned one repeat it
        rows.append(row)
    return torch.tensor(rows, dtype=torch.int32), owner


def timing_inputs(case: Case, device: str, generator: torch.Generator) -> Paged:
    """The timed launch's inputs: a pool and tables laid out as :func:`make_inputs` lays
    them, its values drawn on the device itself (``launching.timing_tensors``) and nothing
    poisoned: only a kernel that passed is timed, and only the timed launch's own check
    (``verify``) compares these values.  At the GPU's timing shape a CPU draw and its copy
    took about 1.2 s of the performance phase (H100, run 24)."""
    table, owner = page_layout(case, generator)
    pages = (len(owner), case.kv_heads, case.page_size, case.head_dim)
    q, k, v = launching.timing_tensors([(case.batch, case.heads, case.head_dim), pages, pages], device, generator)
    return Paged(q * case.score_std, k, v, table.to(device),
                 torch.tensor(case.lengths, dtype=torch.int32, device=device), owner)


def make_inputs(case: Case, device: str, generator: torch.Generator) -> Paged:
    """A scrambled pool: the listed pages, one poisoned page per sequence (named by its
    table past its last page), two spare poisoned pages; positions past a length poisoned."""
    b, h, kvh, ps, d = case.batch, case.heads, case.kv_heads, case.page_size, case.head_dim
    table, owner = page_layout(case, generator)
    num_pages = len(owner)
    needed = [pages_needed(n, ps) for n in case.lengths]
    std = case.score_std  # q.k / sqrt(d) of unit keys then has about this standard deviation
    q = torch.randn((b, h, d), generator=generator) * std
    k = torch.randn((num_pages, kvh, ps, d), generator=generator)
    v = torch.randn((num_pages, kvh, ps, d), generator=generator)
    if case.layout == "orders":
        # k = unit vector along q's direction times the level, per quarter of each sequence
        q = torch.zeros((b, h, d))
        q[..., 0] = d**0.5
        for s, n in enumerate(case.lengths):  # every position of a sequence at once (no loop per position)
            levels = torch.tensor(ORDER_LEVELS[s % len(ORDER_LEVELS)])
            pos = torch.arange(n)
            pages, slots = table[s, pos // ps].long(), pos % ps
            k[pages, :, slots, :] = 0.0
            quarter = torch.clamp(4 * pos // n, max=3)
            k[pages, :, slots, 0] = levels[quarter][:, None] + torch.randn((n, kvh), generator=generator)
    for page, (s, j) in enumerate(owner):
        first = 0 if j < 0 else (case.lengths[s] - j * ps if j == needed[s] - 1 else ps)
        if first < ps:  # the poisoned part of this page
            k[page, :, first:, :] = torch.randn((kvh, ps - first, d), generator=generator) * GARBAGE_K_SCALE
            v[page, :, first:, :] = torch.randn((kvh, ps - first, d), generator=generator) + GARBAGE_V_SHIFT
            if case.nan_tail:
                v[page, :, first:, :] = float("nan")
    if case.layout == "orders":  # poisoned keys against a query of norm sqrt(d): large
        for page, (_, j) in enumerate(owner):
            if j < 0:
                k[page] = 0.0
                k[page, :, :, 0] = 200.0
    return Paged(q.half().to(device), k.half().to(device), v.half().to(device), table.to(device),
                 torch.tensor(case.lengths, dtype=torch.int32, device=device), owner)


def gathered(p: Paged, case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """The contiguous cache, (batch, kv_heads, max_len, D), zeros past each length."""
    ps, n = case.page_size, max(case.lengths)
    cols = torch.arange(n, device=p.block_table.device)
    pages = p.block_table[:, cols // ps].long()  # (batch, n)
    k = p.k_pages[pages, :, cols % ps, :]  # (batch, n, kv_heads, D)
    v = p.v_pages[pages, :, cols % ps, :]
    keep = (cols[None, :] < p.lengths[:, None])[..., None, None]
    zero = torch.zeros((), dtype=k.dtype, device=k.device)  # where, not a product: the poison may be NaN
    return torch.where(keep, k, zero).transpose(1, 2), torch.where(keep, v, zero).transpose(1, 2)


def _softmax_rows(s: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """softmax over the last axis of scores (batch, ..., n), each sequence's positions
    from lengths[b] on excluded."""
    keep = torch.arange(s.shape[-1], device=s.device)[None, :] < lengths.to(s.device).long()[:, None]
    keep = keep.view(keep.shape[0], *([1] * (s.dim() - 2)), keep.shape[1])
    return torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """float64 softmax(q K^T / sqrt(d)) V per query head against its own K/V head
    (``h // G``), over each sequence's first lengths[b] positions; (batch, heads, D), CPU.
    Computed where the inputs live (a GPU's float64 is exact enough and ~100x the CPU's
    speed at the GPU cases), the group's query heads as the rows of one matmul."""
    b, h, d = q.shape
    kvh = k.shape[1]
    q64 = q.double().view(b, kvh, h // kvh, d)
    s = (q64 @ k.double().transpose(-1, -2)) * d ** -0.5  # (batch, kv_heads, group, n)
    return (_softmax_rows(s, lengths) @ v.double()).reshape(b, h, d).cpu()


def attend_every_head(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """float64 attention of every query head against *every* K/V head, over each
    sequence's first lengths[b] positions: (batch, heads, kv_heads, D), CPU.  One
    matmul where the inputs live, not a loop of small ones: the diagnosis compares
    each wrong output with all of them."""
    s = (q.double()[:, None] @ k.double().transpose(-1, -2)) * q.shape[-1] ** -0.5  # (batch, kv_heads, heads, n)
    return (_softmax_rows(s, lengths) @ v.double()).transpose(1, 2).cpu()


def _block_n(module: ModuleType) -> int | None:
    """The kernel's BLOCK_N, where the file defines one as a positive int (a pool row formula
    with it is among those :mod:`paged_layout` tries)."""
    value = getattr(module, "BLOCK_N", None)
    return value if isinstance(value, int) and value > 0 else None


# -- a launch ---------------------------------------------------------------------------------
@dataclass
class Launch:
    case: Case
    inputs: Paged
    out: torch.Tensor
    guarded: shared.Guarded
    expected: torch.Tensor
    k_counts: Any = None  # per element of the K band's buffer: loads counted (interpreter), else None
    v_counts: Any = None
    result: CaseResult | None = None
    calls: list[apart.KernelCall] = field(default_factory=list)  # the launcher's kernel launches, recorded


def launch_on(module: ModuleType, case: Case, p: Paged, device: str, count: bool = False,
              num_splits: int | None = None, calls: list[apart.KernelCall] | None = None,
              poison: dict[str, frozenset[int]] | None = None,
              ) -> tuple[torch.Tensor, shared.Guarded, list[Any] | None]:
    """One launch of the student's kernel on inputs ``p`` (the case's shapes), each tensor in a
    guard band as a correctness launch has it: the same shapes, strides, dtypes and alignment,
    so a read-out launch runs the variant the correctness launch compiled.  Returns the output
    (fp16, unwritten elements still poisoned), the bands, and the counted loads of the K and
    V bands when ``count`` (Triton's interpreter only), else None.  ``num_splits``, where
    given, is passed on to the launcher (the drill's contract has it); else the case's own
    count, where it has one and the launcher takes the keyword (:func:`launch.split_count`).  ``calls``, where given,
    receives each kernel launch the launcher made (:func:`split_kv_readout.recording`, which
    fills the ``poison`` arguments of the kernels it names with a marker first)."""
    guarded = shared.Guarded()
    margin = guarding.margin_elements(tuple(p.k_pages.shape), 2 * case.page_size * case.head_dim)
    q = guarded.input("Q", p.q, margin)
    k = guarded.input("K", p.k_pages, margin)
    v = guarded.input("V", p.v_pages, margin)
    out = guarded.output("output", (case.batch, case.heads, case.head_dim), device=device, margin=margin)
    # the block table in a band of its own: a read past it finds a spare poisoned page's
    # number (counted like any read of that page), never a wild address
    table_band = guarding.band("block table", tuple(p.block_table.shape), torch.int32, device,
                               guarding.margin_elements(tuple(p.block_table.shape), 64), p.spare_page,
                               inside=p.block_table)
    guarded.bands.append(table_band)
    buffers = [guarded.band("K").buffer, guarded.band("V").buffer]
    recorded = apart.recording(module, calls, poison) if calls is not None else contextlib.nullcontext()
    with paged_reads.counting_reads(buffers, count) as counts, recorded:
        split_count = num_splits if num_splits is not None else launching.split_count(module, LAUNCHER, case.num_splits)
        splits = {} if split_count is None else {"num_splits": split_count}
        returned = getattr(module, LAUNCHER)(q, k, v, table_band.view, p.lengths, out=out, **splits)
        shared.synchronize(out)
    out = shared.returned_tensor(f"{LAUNCHER}() returned", returned, out, (case.batch, case.heads, case.head_dim))
    return out, guarded, counts


def relauncher(module: ModuleType, device: str) -> Callable[[Launch, Paged], torch.Tensor]:
    """The kernel on a case's launch with other inputs (a read-out: the variant it compiled)."""
    def relaunch(x: Launch, p: Paged) -> torch.Tensor:
        return launch_on(module, x.case, p, device)[0]

    return relaunch


def rerecorder(module: ModuleType, device: str) -> Callable[[Launch], apart.Rerun]:
    """A case's launch again on its own inputs, its kernel launches recorded, the arguments
    named poisoned with a marker (:func:`split_kv_readout.unwritten_states`)."""
    def rerun_of(x: Launch) -> apart.Rerun:
        def rerun(poison: dict[str, frozenset[int]]) -> list[apart.KernelCall]:
            calls: list[apart.KernelCall] = []
            launch_on(module, x.case, x.inputs, device, calls=calls, poison=poison)
            return calls

        return rerun

    return rerun_of


def one_slice(module: ModuleType, device: str) -> Callable[[Launch], torch.Tensor | None]:
    """The kernel on a case's own inputs with ``num_splits=1`` (no slices to merge); None
    where the launcher refuses it."""
    def again(x: Launch) -> torch.Tensor | None:
        try:
            return launch_on(module, x.case, x.inputs, device, num_splits=1)[0]
        except Exception:  # noqa: BLE001 - a launcher that does not take it: nothing measured
            return None

    return again


def padless(module: ModuleType, device: str) -> Callable[[Launch], torch.Tensor | None]:
    """The kernel on a case's own inputs with the power of two at or above its split count (a
    merge that rounds the count up then has no padding slot); None where the case has no count of
    its own, it is a power of two already, or the launcher refuses it."""
    def again(x: Launch) -> torch.Tensor | None:
        splits = x.case.num_splits
        if splits is None or splits & (splits - 1) == 0:
            return None
        try:
            return launch_on(module, x.case, x.inputs, device, num_splits=1 << (splits - 1).bit_length())[0]
        except cost.LaunchAborted:
            raise
        except Exception:  # noqa: BLE001 - a launcher that does not take it: nothing measured
            return None

    return again


def run(module: ModuleType, case: Case, device: str, generator: torch.Generator, interpreter: bool = False) -> Launch:
    """A correctness launch; on the interpreter its loads of the K and V pools are counted."""
    p = make_inputs(case, device, generator)
    calls: list[apart.KernelCall] = []
    out, guarded, counts = launch_on(module, case, p, device, count=interpreter, calls=calls)
    kg, vg = gathered(p, case)
    launch = Launch(case, p, out, guarded, attend(p.q, kg, vg, p.lengths), calls=calls)
    if counts is not None:
        launch.k_counts, launch.v_counts = counts
    return launch


def evaluate(launch: Launch, tolerance: float) -> CaseResult:
    measured = shared.measure_output(launch.out, launch.expected)
    worst_seq = int(measured.error.amax(dim=(1, 2)).argmax())
    oob = bool(launch.guarded.band("output").changed())
    return shared.case_result(launch.case.name, False, list(launch.case.shape), measured, tolerance, oob, worst_seq)


# -- the problem interface ---------------------------------------------------------------------
def check_correctness(drill: Drill, module: ModuleType, interpreter: bool, device: str, generator: torch.Generator,
                      shape: tuple[int, int, int, int] | None = None, count_reads: bool = True) -> Correctness:
    """The cases' launches (loads counted on the interpreter unless ``count_reads`` is False:
    then the diagnosis reads the weights out, as it does on a GPU)."""
    from tutor.harness.problems import paged_diagnose

    cases = list(cases_for(interpreter))
    if shape is not None:  # the default case at another (batch, heads, longest length, head_dim)
        batch, heads, max_len, head_dim = shape
        group = cases[0].group if heads % cases[0].group == 0 else 1
        lengths = [max_len, 1, max(1, max_len // 2 + 3), max(1, max_len - 5)]
        cases[0] = Case("default", heads, heads // group, cases[0].page_size, head_dim,
                        tuple(lengths[i % len(lengths)] for i in range(batch)), cases[0].score_std)
    launches = []
    for case in cases:
        cost.step(f"the {case.name} case: {case.batch} sequences, {case.heads} query heads on {case.kv_heads} K/V"
                  f" heads, pages of {case.page_size}")
        launch = run(module, case, device, generator, interpreter and count_reads)
        launch.result = evaluate(launch, drill.tolerance)
        launches.append(launch)

    def diagnose() -> Diagnosed:
        relaunch = relauncher(module, device)  # the read-out, where no load was counted
        # the margins a passing launch's loads read (counted on the interpreter only): read-past-end-unused
        findings: list[GuardFinding] = []
        unused: dict[str, str] = {}
        shared.unused_read_details([(x.guarded.bands, x.result, f" (the {x.case.name} case)")
                                    for x in launches if x.result is not None], findings, unused)
        return Diagnosed(diagnosis=paged_diagnose.diagnose(drill, launches, drill.tolerance, relaunch,
                                                           one_slice(module, device), rerecorder(module, device),
                                                           padless(module, device), unused,
                                                           block_n=_block_n(module)),
                         guard_findings=findings)

    def diagnosis_variants() -> list[Callable[[], object]]:
        """The num_splits=1 runs the diagnosis may make (``one_slice``: a variant of its own,
        two compiles, 1.2 s one after the other in run 24 on the H100): the first failing case's
        and the first written, finite failing one's."""
        failing = [x for x in launches if x.result is not None and not x.result.passed]
        clean = [x for x in failing if x.result is not None and x.result.written_and_finite]
        again = one_slice(module, device)
        picked = failing[:1] + [x for x in clean[:1] if x is not failing[0]]
        return [functools.partial(again, x) for x in picked]

    return Correctness(cases=[x.result for x in launches if x.result is not None],
                       shape=list(launches[0].case.shape), diagnose=diagnose, diagnosis_variants=diagnosis_variants)


def compile_warmups(drill: Drill, module: ModuleType, device: str) -> list[Callable[[], object]]:
    """One launch of every case (own seeds: the check's random stream stays the same)."""
    return [functools.partial(run, module, case, device, torch.Generator().manual_seed(n))
            for n, case in enumerate(cases_for(interpreter=False))]


def timing_launches(drill: Drill, module: ModuleType, interpreter: bool, device: str,
                    generator: torch.Generator) -> TimedLaunches:
    """Every sequence holds the whole length; SDPA (``enable_gqa=True``) runs on the same
    cache gathered into contiguous (batch, kv_heads, length, D) tensors beforehand."""
    batch, heads, kv_heads, page_size, length, head_dim = CPU_TIMING if interpreter else GPU_TIMING
    case = Case("timing", heads, kv_heads, page_size, head_dim, (length,) * batch)
    p = timing_inputs(case, device, generator)
    k, v = gathered(p, case)
    k, v = k.contiguous(), v.contiguous()
    out = torch.empty_like(p.q)
    launch = getattr(module, LAUNCHER)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q4 = p.q[:, :, None, :]

    def verify() -> str | None:
        launch(p.q, p.k_pages, p.v_pages, p.block_table, p.lengths, out=out)
        err = float((out.double().cpu() - attend(p.q, k, v, p.lengths)).abs().nan_to_num(nan=float("inf")).max())
        if not err <= drill.tolerance:
            return (f"the timed launch is wrong: off by up to {err:.3g} (tolerance {drill.tolerance:g});"
                    " its times are not shown")
        return None

    return TimedLaunches(
        shape=[batch, heads, length, head_dim],
        student={"full": lambda: launch(p.q, p.k_pages, p.v_pages, p.block_table, p.lengths, out=out)},
        baseline={"full": lambda: sdpa(q4, k, v, enable_gqa=True)},
        verify=verify,
    )


PROBLEM: Problem = ModuleProblem(check_correctness=check_correctness, timing_launches=timing_launches,
                                 compile_warmups=compile_warmups)
