"""What every problem's launch shares: guarded tensors, the launcher's returned
tensor, a poisoned output against its reference, and the guard bands' words.

Each problem (:mod:`tutor.harness.problems`) has its own launcher contract,
but the same machinery around it:

* :class:`Guarded` hands the launcher its inputs, outputs and visit maps as
  views inside guard bands (:mod:`tutor.harness.guard`): a load past the end
  of an input reads NaN, a store past the end of any tensor changes a margin;
* :func:`returned_tensor` checks what the launcher returned in place of the
  output it was given (a tensor of the right shape and dtype);
* :func:`measure_output` counts what a poisoned output says: elements never
  written, non-finite ones the kernel computed, and the error against the
  float64 reference;
* :func:`write_details` / :func:`read_details` turn what the bands saw into
  the measured detail of ``write-past-end`` / ``read-past-end`` (the codes'
  words are in each drill's TOML), and :func:`unused_read_details` the loads
  into a margin whose values never reached the output (``read-past-end-unused``:
  seen on Triton's interpreter only, :mod:`tutor.harness.read_trace`);
* :func:`guard_report` is the three of them over a check's launches, the guard
  bands' report every problem gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from tutor.harness import guard as guarding
from tutor.harness import read_trace
from tutor.harness.guard import Band
from tutor.harness.result import CaseResult, GuardFinding

POISON_BITS = 0x7D5A  # an fp16 NaN with a payload; computed NaNs are 0x7E00 / 0x7FFF


class BadOutput(Exception):
    """The launcher returned something that is not the output it was asked for."""


@dataclass
class Guarded:
    """The banded tensors of one launch, in the order they were made."""

    bands: list[guarding.Band] = field(default_factory=list)

    def input(self, name: str, tensor: torch.Tensor, margin: int, fill: str = "nan") -> torch.Tensor:
        """``tensor`` copied into a band whose margins hold ``fill`` (see :func:`guard.input_band`)."""
        made = guarding.input_band(name, tensor, margin, fill)
        self.bands.append(made)
        return made.view

    def output(self, name: str, shape: tuple[int, ...], device: str, margin: int) -> torch.Tensor:
        """A poisoned fp16 output (every element and both margins hold POISON_BITS)."""
        made = guarding.band(name, shape, torch.float16, device, margin, POISON_BITS, inside_bits=POISON_BITS)
        self.bands.append(made)
        return made.view

    def visits(self, name: str, shape: tuple[int, ...], device: str, margin: int) -> torch.Tensor:
        """A zeroed int32 visit map whose margins hold a sentinel no visit store writes."""
        made = guarding.band(name, shape, torch.int32, device, margin, guarding.VISIT_SENTINEL, inside_bits=0)
        self.bands.append(made)
        return made.view

    def band(self, name: str) -> guarding.Band:
        return next(b for b in self.bands if b.name == name)

    def writes_past_the_end(self) -> list[tuple[str, str, int]]:
        """(tensor, side, margin elements changed) for every band a store reached."""
        return [(b.name, side, n) for b in self.bands for side, n in b.changed().items()]


def returned_tensor(what: str, value: object, given: torch.Tensor, shape: tuple[int, ...],
                    dtype: torch.dtype = torch.float16) -> torch.Tensor:
    """The output to check: ``given`` when the launcher wrote into it (``value`` is None
    or ``given`` itself), else its own tensor, which must have ``shape`` and ``dtype``
    (checked without the poison guarantees).  ``what`` starts each complaint, e.g.
    "attention() returned"."""
    result = given if value is None else value
    if not isinstance(result, torch.Tensor):
        raise BadOutput(f"{what} {type(result).__name__}, not a tensor")
    if tuple(result.shape) != tuple(shape):
        raise BadOutput(f"{what} shape {tuple(result.shape)}, expected {tuple(shape)}")
    if result.dtype != dtype:
        raise BadOutput(f"{what} dtype {result.dtype}, expected {dtype}")
    return given if result.data_ptr() == given.data_ptr() else result


def synchronize(t: torch.Tensor) -> None:
    """Surface asynchronous faults here, inside the student's launch."""
    if t.is_cuda:
        torch.cuda.synchronize()


# u: fp16's unit roundoff, and how many fp16 roundings a kernel may make that the float64
# reference does not, where a case's allowance grows with its terms (the hostile cases of
# drills 04 and 06: see their allowance functions)
FP16_U = 2.0**-11
ROUNDINGS = 4


@dataclass
class Measured:
    """One poisoned output against its float64 reference."""

    unwritten: int  # elements still holding the poison
    nonfinite: int  # NaN/Inf the kernel computed
    error: torch.Tensor  # |out - expected| (float64), inf where the output is NaN
    max_err: float | None  # None when something was unwritten or non-finite


def measure_output(out: torch.Tensor, expected: torch.Tensor) -> Measured:
    poisoned = (out.view(torch.int16) == POISON_BITS).to(expected.device)
    out64 = out.to(torch.float64).to(expected.device)
    unwritten = int(poisoned.sum())
    nonfinite = int((~torch.isfinite(out64) & ~poisoned).sum())
    error = (out64 - expected).abs().nan_to_num(nan=float("inf"))
    max_err = None if unwritten or nonfinite else float(error.max())
    return Measured(unwritten, nonfinite, error, max_err)


def measure_within(out: torch.Tensor, expected: torch.Tensor, allowed: torch.Tensor, tolerance: float) -> Measured:
    """:func:`measure_output` with each element held to its own allowance (a hostile case's),
    its error reported in the tolerance's units: within ``tolerance`` iff within ``allowed``."""
    one = measure_output(out, expected)
    error = one.error * (tolerance / allowed.to(one.error.device))
    return Measured(one.unwritten, one.nonfinite, error, None if one.max_err is None else float(error.max()))


def case_result(name: str, causal: bool, shape: list[int], measured: Measured, tolerance: float,
                out_of_bounds: bool, worst_row: int | None, ok: bool = True) -> CaseResult:
    """One case's verdict: it passes when everything was written, finite, within the
    tolerance, no store left the output, and ``ok`` (a problem's own condition)."""
    return CaseResult(
        name=name,
        causal=causal,
        shape=shape,
        max_abs_err=measured.max_err,
        passed=ok and measured.max_err is not None and measured.max_err <= tolerance and not out_of_bounds,
        nonfinite=measured.nonfinite,
        unwritten=measured.unwritten,
        wrote_out_of_bounds=out_of_bounds,
        worst_row=worst_row,
    )


def unwritten_rows(out: torch.Tensor) -> torch.Tensor:
    """(..., rows) bool: which rows of a poisoned fp16 output still hold the poison somewhere."""
    return (out.view(torch.int16) == POISON_BITS).any(dim=-1)


def whole_heads_unwritten(out: torch.Tensor) -> torch.Tensor:
    """(batch, heads) bool: the (batch, head) slices of a poisoned (batch, heads, rows,
    head_dim) output whose every row still holds the poison."""
    return unwritten_rows(out).all(dim=-1)


def wrong_written_rows(out: torch.Tensor, expected: torch.Tensor, tolerance: float,
                       unwritten: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(wrong, error): the rows of ``out`` that were written (``unwritten`` False) and lie
    more than ``tolerance`` from ``expected`` anywhere along the last axis (NaN counts as
    wrong), and every row's largest error, float64 on the CPU."""
    out64, expected64 = out.to(torch.float64).cpu(), expected.to(torch.float64).cpu()
    err = (out64 - expected64).abs().amax(dim=-1)
    return ~unwritten.cpu() & ~(err <= tolerance), err


def unwritten_words(out: torch.Tensor) -> str:
    """Where a (batch, heads, rows, head_dim) output still holds the poison, in words, when
    it is whole (batch, head) slices while every row of the others was written: the grid and
    the loop reach every row block of a head, so either the grid covers fewer (batch, head)
    pairs than there are or the store's (batch, head) offset sends two programs' rows to one
    place; "" for any other pattern (the count says it)."""
    if out.dim() != 4:
        return ""
    unwritten = unwritten_rows(out)  # (batch, heads, rows)
    whole = whole_heads_unwritten(out)
    if not bool(whole.any()) or bool((unwritten.any(dim=-1) & ~whole).any()):
        return _tail_rows_words(unwritten)
    if bool(whole.all()):
        return (" No element of the output was written in any (batch, head): no store reached it - look at the"
                " final store's pointer (built from the output's base?), its mask, and whether it runs at all.")
    pairs = [f"(batch {b}, head {h})" for b, h in whole.nonzero().tolist()]
    listed = ", ".join(pairs[:4]) + (f" and {len(pairs) - 4} more" if len(pairs) > 4 else "")
    return (f" Every element of {listed} is unwritten and every row of the other"
            f" {int((~whole).sum())} (batch, head) pair{'s' * (int((~whole).sum()) != 1)} is written: the row blocks"
            " of a head are all reached, so look at the (batch, head) part - a grid over fewer (batch, head)"
            " pairs than there are, program ids read from the wrong grid axes, or a store offset that sends two"
            " heads' rows to the same place.")


def _tail_rows_words(unwritten: torch.Tensor) -> str:
    """Where the unwritten rows are exactly the last rows, from one row on, of every (batch,
    head) and every row before it is written, in words (blind round 9, w54); "" otherwise."""
    rows = unwritten.shape[-1]
    per_row = unwritten.flatten(0, 1)  # (batch*heads, rows)
    first = int(per_row[0].nonzero()[0]) if bool(per_row[0].any()) else rows
    tail = torch.arange(rows, device=unwritten.device) >= first
    if first in (0, rows) or not bool((per_row == tail[None, :]).all()):
        return ""
    return (f" The unwritten rows are exactly rows {first}..{rows - 1}, the last {rows - first}, of every (batch,"
            f" head), and every row before them is written: the grid, or the loop over query blocks, stops short"
            f" of the end (seq // BLOCK_M blocks, say, where cdiv(seq, BLOCK_M) reaches a last, partial one), the"
            f" programs' rows step by less than a block (offs_m built with another block size), or the store's"
            f" row mask (or the rows it stores to) leaves them out.")


# -- what the bands saw, as findings and the detail of write-past-end / read-past-end ----------
MAP_UNTRUSTED = (" A store of the visit map landed outside it, so its other stores may land at the wrong"
                 " blocks too: what the map records is not read as the blocks your kernel visited (no finding"
                 " below comes from it).")


def visit_map_overrun(findings: list[GuardFinding]) -> bool:
    """Did a store land in a visit map's margin (the bands named "... visit map")?  Then
    the map's bookkeeping is measurably off (a wrong stride or index), and a block it
    shows visited or not is no measurement of the kernel's work."""
    return any(f.access == "write" and f.tensor.endswith("visit map") for f in findings)


def write_details(writes: list[tuple[str, str, int]], case: str, causal: bool, shape: list[int], where: str,
                  findings: list[GuardFinding], said: dict[str, str], outputs: tuple[str, ...] = ("output",)) -> None:
    """Record every margin a launch's stores changed (into ``findings``) and say the
    first one into ``said["write-past-end"]``; the margins of ``outputs`` are the
    problem's own store-out-of-bounds, not said here.  ``where``: e.g. " (seq=40)"."""
    for tensor, side, n in writes:
        findings.append(GuardFinding(tensor, side, "write", case, causal, shape, n))
        if tensor not in outputs:
            said.setdefault("write-past-end", f" The {tensor} was written {n} element{'s' * (n != 1)} {side} its "
                            f"{'end' if side == 'after' else 'start'}{where}."
                            + (_map_end_words(n) if tensor == "visit map" and side == "after" else ""))


def _map_end_words(n: int) -> str:
    """What the first ``n`` places after a visit map's end are, in its layout (blind round 23,
    01: a loop bound not capped at N_CTX, told only "check the store")."""
    blocks = "the key block" if n == 1 else f"the {n} key blocks"
    return (f" The map's last axis is the key blocks, so those are the places where the last program's visits to"
            f" {blocks} after the last one would be recorded: a loop whose bound runs past the sequence (a bound not"
            " capped at its length) records them there; so can a wrong index into the map.")


def overwrite_details(overwritten: list[tuple[str, int, int]], where: str, said: dict[str, str],
                      outputs: tuple[str, ...] = ("output",)) -> None:
    """Say the first input a launch's stores changed inside into ``said["input-written"]``
    (the kernel gets copies of Q, K and V, compared bit for bit with their sources after the
    launch); ``outputs``: tensors this problem's kernel may write."""
    for tensor, n, total in overwritten:
        if tensor not in outputs:
            said.setdefault("input-written", f" {tensor} changed in {n} of its {total} elements during the"
                            f" launch{where}.")


def probe_reads(again: Callable[[dict[str, str]], torch.Tensor], nonfinite: int,
                names: tuple[str, ...]) -> list[tuple[str, str, int]]:
    """Which inputs' margins the NaN of a launch came from (see :func:`guard.probe_reads`).

    On the interpreter each finding must also be a margin some load really read
    (:func:`read_trace.margins_read`): a kernel that reads memory it never wrote
    (a scratch buffer from ``torch.empty`` it leaves unfilled) can get back the
    freed NaN margins of earlier launches, so switching the margins' fills moves
    its NaN although it reads no input past its end."""
    found = guarding.probe_reads(again, POISON_BITS, nonfinite, names)
    read = read_trace.margins_read()
    if read is None:
        return found  # nothing traced (a GPU): the probe alone
    return [(tensor, side, n) for tensor, side, n in found if (tensor, side) in read]


# said beside a load's missing mask where no clean block-multiple launch rules out its offsets
OFFSETS_TOO = ("Or its offsets leave the tensor wherever its block is: a stride, or an index that runs along the"
               " wrong axis.")


def read_details(reads: list[tuple[str, str, int]], case: str, causal: bool, shape: list[int], when: str,
                 findings: list[GuardFinding], said: dict[str, str], clean: list[int] | None = None,
                 where_after: dict[str, str] | None = None) -> None:
    """Record each (tensor, side, NaN outputs) a probe found and say it into
    ``said["read-past-end"]``.  ``when``: the case, e.g. "seq = 37"; ``clean``: a
    shape at which the same launch read nothing there; ``where_after``: tensor ->
    the load that hangs past its end, for a read after it."""
    for tensor, side, n in reads:
        findings.append(GuardFinding(tensor, side, "read", case, causal, shape, n, clean))
        text = (f" {tensor} is read past its {'end' if side == 'after' else 'start'} when {when}: with NaN only"
                f" {side} {tensor} and every other margin finite, {n} output elements become NaN; with every"
                " margin finite, none of them do")
        text += f"; at seq = {clean[2]}, a multiple of the block sizes, nothing is read there." if clean else "."
        if side == "after" and where_after and tensor in where_after:
            # the last block's mask is the measured cause only where a block-multiple length read nothing
            text += " " + (where_after[tensor] if clean else f"{where_after[tensor]} {OFFSETS_TOO}")
        said["read-past-end"] = said.get("read-past-end", "") + text


def unused_read_details(launches: list[tuple[list[Band], CaseResult, str]], findings: list[GuardFinding],
                        said: dict[str, str]) -> None:
    """Record every margin the loads of a *passing* launch read (counted on the
    interpreter, :mod:`tutor.harness.read_trace`): its output is right, so the NaN
    read there reached nothing.  (A failing launch's reads may be why it fails:
    those are ``read-past-end`` when the probe finds them, else left unsaid.)  The
    first one is said into ``said["read-past-end-unused"]``.  Each launch comes as
    (its bands, its case, where it was seen, e.g. " (seq=40, causal)")."""
    explained = {f.tensor for f in findings if f.access == "read"}
    for bands, case, where in launches:
        if not case.passed:
            continue
        for band in bands:
            if band.name in explained:
                continue
            for side, n in band.reads.items():
                findings.append(GuardFinding(band.name, side, "read-unused", case.name, case.causal, case.shape, n))
                edge = "end" if side == "after" else "start"
                said.setdefault("read-past-end-unused", f" {band.name} was read past its {edge}: {n} element"
                                f"{'s' * (n != 1)} {side} it{where}.")


@dataclass
class Banded:
    """One launch as the guard report reads it: its bands, its case, where it was seen,
    in words (e.g. " (seq=40, causal)"), the margins its stores changed and the inputs
    they changed inside (:meth:`of` reads them when it is made: a problem whose diagnosis
    launches probes first makes these before them)."""

    bands: list[Band]
    case: CaseResult
    where: str
    writes: list[tuple[str, str, int]]  # (tensor, side, margin elements changed)
    overwritten: list[tuple[str, int, int]] = field(default_factory=list)  # (input, elements changed, its size)

    @classmethod
    def of(cls, bands: list[Band], case: CaseResult, where: str) -> Banded:
        writes = [(b.name, side, n) for b in bands for side, n in b.changed().items()]
        inside = [(b.name, n, b.view.numel()) for b in bands if (n := b.overwritten())]
        return cls(bands, case, where, writes, inside)


@dataclass
class NanProbe:
    """A launch whose output holds NaN, to trace to the input margins it came from:
    ``again(fills)`` re-runs it with those margin fills (:func:`probe_reads`); ``when``
    says its case (e.g. "seq = 37"); ``where_after``: tensor -> the load that hangs past
    its end; ``clean``: where reads were found, a shape at which the same launch reads
    nothing there (None: not measured)."""

    case: CaseResult
    again: Callable[[dict[str, str]], torch.Tensor]
    when: str
    names: tuple[str, ...] = ("Q", "K", "V")
    where_after: dict[str, str] | None = None
    clean: Callable[[], list[int] | None] | None = None


def guard_report(launches: Sequence[Banded], nan: NanProbe | None = None,
                 outputs: tuple[str, ...] = ("output",)) -> tuple[list[GuardFinding], dict[str, str]]:
    """What the guard bands saw over a check's launches: every margin a store changed
    (each launch; the margins of ``outputs`` are the problem's own store-out-of-bounds),
    an input a store changed inside (``input-written``),
    the input margins the NaN of ``nan`` came from, and the margins a passing launch's
    loads read.  The findings, and the details of ``write-past-end``, ``read-past-end``
    and ``read-past-end-unused`` (:func:`write_details`, :func:`read_details`,
    :func:`unused_read_details`)."""
    findings: list[GuardFinding] = []
    said: dict[str, str] = {}
    for x in launches:
        write_details(x.writes, x.case.name, x.case.causal, x.case.shape, x.where, findings, said, outputs)
        overwrite_details(x.overwritten, x.where, said, outputs)
    if nan is not None:
        reads = probe_reads(nan.again, nan.case.nonfinite, nan.names)
        clean = nan.clean() if reads and nan.clean is not None else None
        read_details(reads, nan.case.name, nan.case.causal, nan.case.shape, nan.when, findings, said, clean,
                     nan.where_after)
    unused_read_details([(x.bands, x.case, x.where) for x in launches], findings, said)
    return findings, said
