"""The structured result of one check: what the harness measured, as data.

A :class:`CheckResult` crosses the process boundary as JSON (``to_json`` /
``from_json``, written and read by :mod:`tutor.codec` from the fields below: a
new field is one line) and is what every front end shows: ``flashtutor check`` prints
it, the watch loop records it, the app draws it.  Nothing here is computed for
display only: every number comes from running the student's kernel.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import Field, dataclass, field, fields
from typing import Any, ClassVar, Literal, NotRequired, TypedDict, get_args

from tutor import codec
from tutor.catalog import Severity  # a diagnosis's weight, as its words in the drill's data give it

# The one decision about a check, read by every front end (the report's verdict,
# the CLI's exit code, the app's verdict widget, watch's colour):
#   solved               every case within tolerance and no open finding
#   passed-with-finding  correct, but a review finding is open (TODO 1 in drill 01)
#   failed               it ran, and some case is wrong
#   not-run              it could not run to a verdict (syntax, compile, crash, ...)
Outcome = Literal["solved", "passed-with-finding", "failed", "not-run"]

# The second phase of a check: the timed launches, torch's SDPA and the roofline.
#   pending    the verdict is out; the timed launches are running
#   done       measured (the timing fields and the roofline are filled)
#   skipped    not asked for (--no-timing), or the verdict could not run
#   failed     the timed launches raised or the worker died during them
#   cancelled  a newer save replaced this content while it was timed
PerformanceStatus = Literal["pending", "done", "skipped", "failed", "cancelled"]

# The diagnosis of a check, between the verdict and the performance: the read-outs,
# the probes that re-run a failing launch, the named mistakes.  A passing kernel's
# diagnosis needs no further launch and comes with the verdict ("done" at once).
#   pending    the verdict is out (FAILED); the read-outs are running
#   done       ``diagnosis``, ``guard_findings`` and ``readout`` are filled
#   skipped    the check could not run to a verdict, or the tutor's own budget ran out
#              (``reason`` says which: never the student's kernel's fault)
#   failed     the tutor's read-out itself failed (the verdict stands)
#   cancelled  a newer save replaced this content while it was diagnosed
DiagnosisStatus = Literal["pending", "done", "skipped", "failed", "cancelled"]

# Error kinds: the check could not run the drill to a verdict.
ErrorKind = Literal[
    "missing-file",  # the file does not exist
    "syntax",  # the file does not parse
    "import",  # importing the module raised
    "missing-function",  # no attention() launcher
    "compile",  # Triton refused to compile the kernel
    "runtime",  # the launcher or kernel raised while running
    "bad-output",  # wrong shape / dtype / type returned
    "crash",  # the worker process died (segfault, os._exit, OOM)
    "timeout",  # the check did not finish in time
    "cancelled",  # a newer save replaced this check
    "internal",  # a bug in the tutor itself
]
ERROR_KINDS: tuple[ErrorKind, ...] = get_args(ErrorKind)

# The kind of device a check ran on (what the worker detected, not what the user asked
# for: that is tutor.harness.device.DeviceChoice).
DeviceKind = Literal["cuda", "rocm", "cpu"]


@dataclass
class CheckError:
    kind: ErrorKind
    message: str
    file: str | None = None
    line: int | None = None
    source_line: str | None = None
    detail: str | None = None  # a short traceback or the compiler's excerpt
    during: str = ""  # what the check was running when it failed ("the short case, shape 1x2x64x32, full")

    def __post_init__(self) -> None:
        if self.kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {self.kind!r}")

    def location(self) -> str:
        if self.file and self.line:
            return f"{self.file}:{self.line}"
        return self.file or ""


@dataclass
class Diagnosis:
    code: str
    message: str
    severity: Severity = "error"


@dataclass
class Device:
    """The device a worker detected and runs checks on."""

    kind: DeviceKind
    name: str  # "NVIDIA H200", or "CPU"
    interpreter: bool
    torch: str = ""
    triton: str = ""

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("label",)  # written after the fields (tutor.codec)

    @property
    def label(self) -> str:
        if self.interpreter:
            return "CPU · Triton interpreter — timings are not speeds"
        return f"{self.name} ({self.kind.upper()})"


@dataclass
class CaseResult:
    """One launch checked against the reference."""

    name: str  # "default", "ragged", "short"
    causal: bool
    shape: list[int]
    max_abs_err: float | None  # None when the output held NaN/Inf or was never written
    passed: bool
    nonfinite: int = 0  # NaN/Inf elements
    unwritten: int = 0  # elements still holding the poison value
    wrote_out_of_bounds: bool = False
    worst_row: int | None = None  # sequence position of the largest error

    @property
    def fully_written(self) -> bool:
        """Every output element was written, and nothing outside the output was."""
        return not (self.unwritten or self.wrote_out_of_bounds)

    @property
    def written_and_finite(self) -> bool:
        """Fully written and every element a number: an output whose values a read-out can compare."""
        return self.fully_written and not self.nonfinite


@dataclass
class GuardFinding:
    """A guard band (tutor/harness/guard.py) that a launch reached."""

    tensor: str  # "Q", "K", "V", "output", "visit map"
    side: str  # "before" or "after" the tensor
    # "read" (NaN from the margin reached the output), "write" (a margin changed) or
    # "read-unused" (a load read the margin and the value reached nothing: counted on the interpreter)
    access: Literal["read", "write", "read-unused"]
    case: str  # the case it was seen on ("default", "ragged", ...)
    causal: bool
    shape: list[int]
    elements: int  # margin elements written or read, or output elements the margin's NaN reached
    clean_shape: list[int] | None = None  # the same launch at a block-multiple length showed nothing


@dataclass
class VisitMap:
    """Which (query block, key block) pairs the kernel visited, summed over batch*heads.

    ``counts[i][j]`` is how many of the ``heads`` (batch*heads) programs for query
    block i visited key block j; ``ideal[i][j]`` is whether a causal kernel must.
    """

    block_m: int
    block_n: int
    seq: int
    heads: int
    counts: list[list[int]]
    ideal: list[list[bool]]
    # what the map is of, for problems with more than one loop ("dK/dV loop over query
    # blocks"); rows and columns are the loop's outer and inner blocks
    label: str = ""

    @property
    def total_blocks(self) -> int:
        return self.heads * len(self.counts) * len(self.counts[0])

    @property
    def visited_blocks(self) -> int:
        return sum(map(sum, self.counts))

    @property
    def ideal_blocks(self) -> int:
        return self.heads * sum(map(sum, self.ideal))


@dataclass
class Performance:
    """Where the performance phase of a check stands (its figures live on the result)."""

    status: PerformanceStatus = "skipped"
    reason: str = ""  # why it was skipped, failed or cancelled, in words
    duration_s: float = 0.0  # wall time of the phase inside the worker


@dataclass
class DiagnosisPhase:
    """Where the diagnosis phase of a check stands (its findings live on the result)."""

    status: DiagnosisStatus = "done"
    reason: str = ""  # why it was skipped, failed or cancelled, in words
    duration_s: float = 0.0  # wall time of the phase inside the worker


@dataclass
class PhaseCost:
    """What one phase of a check cost inside the worker: wall time, kernel launches
    (every launch of a ``@triton.jit`` function, the student's and the tutor's read-out
    launches of the student's kernel alike) and Triton compiles (None: not countable
    here; the interpreter compiles nothing)."""

    seconds: float = 0.0
    launches: int = 0
    compiles: int | None = None
    compiling_s: float = 0.0  # of ``seconds``, the wall time spent compiling variants ahead of the launches


# What a read-out found, in the words the diagnosis compares (tutor.harness.problems.attention.readout
# decides them; "" is "not seen" or "not measured").
AttentionMode = Literal["causal", "full"]
ForbiddenWhere = Literal[
    "", "next-key", "diagonal-block", "part-of-diagonal-block", "future-blocks", "diagonal-and-future-blocks",
]
ForbiddenScore = Literal["", "true", "zero", "other"]  # the key's real score, a 0 mask, neither
MissingWhere = Literal["", "own-key", "future-keys", "ragged-tail", "whole-blocks", "part-of-blocks"]
ExtraInSum = Literal["", "score-0-keys", "future-keys"]  # what the surplus in the denominator equals
# the read-out's temperature_names, "other", or "" (no softmax of q·k)
TemperatureName = Literal[
    "", "right", "scale-missing", "scale-twice", "scale-inverted", "exp-not-exp2", "exp2-without-log2e",
    "scale-missing-exp-not-exp2", "scale-missing-exp2-without-log2e", "scale-twice-exp-not-exp2",
    "scale-twice-exp2-without-log2e", "other",
]
BlockPattern = Literal["", "consistent", "one-factor", "own-block-max", "stale-max", "rescaled-twice",
                       "block-max-carried", "alpha-natural-exp", "alpha-exp2-natural", "normalised-each-step",
                       "other"]


@dataclass
class ReadOut:
    """The weights the student's kernel actually applied, read out in one mode.

    Attention is linear in V, so ``out = W · V`` for a weight matrix ``W`` that
    depends only on Q and K; launching the kernel with one-hot V rows reads
    ``W`` column group by column group (:mod:`tutor.harness.problems.attention.readout`).  Every
    field is measured from those launches against the float64 softmax ``P`` of
    the same Q, K.  Rows are sequence positions; "forbidden" keys are the ones
    a row must not see (the causal future); "missing" keys carry reference
    weight (at least 1e-3) where the kernel gave exactly none.  Masses are fractions of a row's weight (1 = all).
    """

    mode: AttentionMode
    case: str  # the correctness case whose Q, K were read out
    shape: list[int]
    block_m: int
    block_n: int
    launches: int  # kernel launches the read-out took
    nan_rows: list[int] = field(default_factory=list)  # positions whose weights are NaN/Inf (any head)
    nan_whole_rows: bool = False  # every weight of those rows is NaN/Inf (not just some keys')
    forbidden_mass: float = 0.0  # the most weight one row puts on keys it must not see
    forbidden_row: int | None = None
    forbidden_rows: int = 0  # positions with forbidden weight (any head)
    forbidden_where: ForbiddenWhere = ""  # "diagonal-block": all of its later keys
    forbidden_score: ForbiddenScore = ""
    missing_mass: float = 0.0  # the most reference weight one row never gives
    missing_row: int | None = None
    missing_rows: int = 0
    missing_where: MissingWhere = ""
    missing_keys: list[int] = field(default_factory=list)  # every key missing in missing_row (said as runs)
    # are those all the keys missing_row may see and weighs 0 (False: others the reference weighs under
    # MISSING_P, 1e-3, get 0 too, as an underflowing p may: the words say which keys are listed)
    missing_keys_complete: bool = True
    skipped_blocks: list[list[int]] = field(default_factory=list)  # (query block, key block) wholly unread
    # the keys missed are exactly those further into their K/V block than the row is into its
    # query block (key % BLOCK_N > row % BLOCK_M): a causal mask compared within the tiles
    missing_in_tile: bool = False
    # the keys missed are exactly those after the row's place in its query block (key > row % BLOCK_M): a causal
    # mask comparing the row's offset within its tile with the keys' positions in the sequence
    missing_row_in_tile: bool = False
    # in every row that misses weight, are the weights on its other keys softmax over those keys alone (the
    # missing keys in neither acc nor l_i)?  None: no row misses weight
    missing_rest_softmax: bool | None = None
    # in every such row, does the weight missing at key c sit on key c % block_n (key block 0) on top of its own?
    missing_on_block0: bool = False
    # where every (row, K/V block) that weighs some of the block's keys and not others gives none to exactly its
    # lowest-scoring ones (a cut on the score, as a p that underflows): [such pairs, the cut's least and greatest
    # distance under the row's top score, natural units]; [] where not so (or no row misses weight)
    missing_cut: list[float] = field(default_factory=list)
    row_sum_min: float | None = None
    row_sum_max: float | None = None
    # do the rows sum to softmax's denominators, sum_j exp(s_ij - max_j s_ij) (an undivided
    # output)?  None: not measured
    sums_are_denominators: bool | None = None
    phantom_keys: float | None = None  # rows short of 1 as if this many score-0 keys were in the sum
    extra_in_sum: ExtraInSum = ""
    temperature: float | None = None  # slope of log W against the true scores (1 = right)
    temperature_name: TemperatureName = ""
    fit_rms: float | None = None  # how far log W is from a line in the scores (0 = a softmax of q·k)
    block_pattern: BlockPattern = ""
    # per key block: student / reference weight (median row)
    block_ratio: list[float | None] = field(default_factory=list)
    row_factor: float | None = None  # "one-factor": every block scaled by this (median row)
    # rows whose blocks are not on one scale (of those measured in 2+ blocks), and the worst one's
    # per-block ratios: the median row can be right where a few rows are not
    rows_inconsistent: int = 0
    rows_measured: int = 0
    worst_row: int | None = None
    worst_row_ratio: list[float | None] = field(default_factory=list)
    # how far the case's own output strays from these weights times its own V (None: not measured);
    # above readout.LINEAR_SLACK the one-hot read-out describes nothing (the output is laid out or
    # routed otherwise than the rows it computed): no claim comes from the weights
    values_gap: float | None = None
    # how far that output strays from attention with K and V exchanged (keys from V, values from K;
    # None: not measured): within readout.LINEAR_SLACK, the kernel takes one for the other
    exchanged_gap: float | None = None
    moves_with: dict[str, bool] = field(default_factory=dict)  # head 0's output moves when its q/k/v change
    crosstalk: list[str] = field(default_factory=list)  # head 0's inputs that move other heads' outputs
    head: int = 0  # the head drawn below
    map_cell: int = 1  # positions per cell of the maps
    map_student: list[list[float]] = field(default_factory=list)  # mean weight per cell, one head
    map_reference: list[list[float]] = field(default_factory=list)
    # per cell: "+" weight where none may be, "-" missing, "~" wrong, "." right, " " none
    map_marks: list[str] = field(default_factory=list)

    @property
    def sums_to_one(self) -> bool:
        lo, hi = self.row_sum_min, self.row_sum_max
        return lo is not None and hi is not None and abs(lo - 1) < 0.01 and abs(hi - 1) < 0.01


# where a launch sits against the device's ridge (at the counted tile loads)
Bound = Literal["compute", "memory"]


class Peaks(TypedDict):
    """The device's two ceilings (:mod:`tutor.harness.peaks`), with where they came from."""

    tflops: float
    gbps: float
    source: str  # "datasheet (H200)", "measured once on this device (...)"
    datasheet_tflops: NotRequired[float]  # the table's figures beside measured ones
    datasheet_gbps: NotRequired[float]


@dataclass
class RooflineLaunch:
    """One launch (full or causal) on the roofline."""

    mode: str  # "full" or "causal"
    flops: int
    bytes: int
    visited_tiles: int
    ideal_flops: float
    ideal_bytes: int
    ideal_note: str
    ms: float | None = None  # timed (GPU only)
    tflops: float | None = None
    gbps: float | None = None
    sdpa_ms: float | None = None  # torch's SDPA, same shape, timed (GPU only)
    sdpa_tflops: float | None = None  # at the ideal FLOPs (its own tiling is unknown)
    intensity: float = field(init=False)  # FLOPs per byte of the counted tile loads
    bound: Bound | None = None  # against the device's ridge (:meth:`Roofline.bound`), set by the build

    def __post_init__(self) -> None:
        self.intensity = self.flops / self.bytes if self.bytes else 0.0

    def take_sdpa(self, ms: float | None) -> None:
        """torch's SDPA at this launch's shape took ``ms`` (None: not timed)."""
        self.sdpa_ms, self.sdpa_tflops = ms, sdpa_rate(self.ideal_flops, ms)


@dataclass
class Roofline:
    """The kernel's launches on a roofline (:func:`tutor.harness.roofline.build`): counted
    work, drill 03's ideal, and on a GPU the achieved rates against the device's peaks."""

    shape: list[int]
    block_m: int
    block_n: int
    element_bytes: int
    launches: list[RooflineLaunch] = field(default_factory=list)
    peaks: Peaks | None = None  # on a GPU
    counted_on: str = "total over batch × heads"

    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("ridge",)  # written after the fields (tutor.codec)

    @property
    def ridge(self) -> float | None:
        """FLOPs per byte where the two ceilings meet."""
        if not self.peaks:
            return None
        return float(self.peaks["tflops"] * 1e12 / (self.peaks["gbps"] * 1e9))

    def bound(self, launch: RooflineLaunch) -> Bound | None:
        """"compute" or "memory" at the counted tile loads, against the device's ridge."""
        ridge = self.ridge
        if ridge is None or not launch.bytes:
            return None
        return "compute" if launch.intensity >= ridge else "memory"


def sdpa_rate(ideal_flops: float, ms: float | None) -> float | None:
    """torch's SDPA in TFLOP/s at the ideal FLOPs (its own tiling is not counted)."""
    return None if not ms else ideal_flops / (ms * 1e-3) / 1e12


# which phase of a check fills a field (``field(metadata=...)``): the worker sends
# those fields when that phase ends (:meth:`CheckResult.phase_dict`)
DIAGNOSIS: dict[str, str] = {"phase": "diagnosis"}
PERFORMANCE: dict[str, str] = {"phase": "performance"}
PhaseName = Literal["diagnosis", "performance"]


def codes_said(diagnosis: list[Diagnosis], listed: tuple[str, ...] | list[str] = ()) -> list[str]:
    """The codes said at error and finding level, and any info note among ``listed``: what a
    mistakes-file entry's ``codes`` are compared with (dev check, tests, bench)."""
    return [d.code for d in diagnosis if d.severity != "info" or d.code in listed]


MAYBE = "?"  # a documented code ending in it: one the random inputs decide (said or not, in its place)


def code_name(documented: str) -> str:
    """A documented code as the check says it: ``"nan-in-output?"`` -> ``"nan-in-output"``."""
    return documented.removesuffix(MAYBE)


def codes_match(diagnosis: list[Diagnosis], documented: tuple[str, ...] | list[str]) -> bool:
    """Does a diagnosis say exactly the documented codes, in their order (:func:`codes_said`)?
    A code written ``"nan-in-output?"`` may be said or not: a mistake whose NaN depends on
    the check's random lengths (measured so, and documented beside the entry)."""
    listed = [code_name(c) for c in documented]
    said = codes_said(diagnosis, listed)
    optional = [i for i, c in enumerate(documented) if c.endswith(MAYBE)]
    for keep in itertools.product((True, False), repeat=len(optional)):
        dropped = {i for i, k in zip(optional, keep, strict=True) if not k}
        if said == [c for i, c in enumerate(listed) if i not in dropped]:
            return True
    return False


@dataclass
class CheckResult:
    drill: str
    file: str
    device: Device | None = None
    passed: bool = False
    tolerance: float = 0.0
    shape: list[int] = field(default_factory=list)  # the default correctness shape
    max_abs_err: float | None = None  # worst over every case (None if any was non-finite)
    cases: list[CaseResult] = field(default_factory=list)
    timing_shape: list[int] = field(default_factory=list, metadata=PERFORMANCE)
    # "do_bench median (ms)" or "wall clock, ... (interpreter: not a speed)"
    timing_method: str = field(default="", metadata=PERFORMANCE)
    full_ms: float | None = field(default=None, metadata=PERFORMANCE)
    causal_ms: float | None = field(default=None, metadata=PERFORMANCE)
    sdpa_full_ms: float | None = field(default=None, metadata=PERFORMANCE)  # torch's own attention, same shape (GPU)
    sdpa_causal_ms: float | None = field(default=None, metadata=PERFORMANCE)
    # SDPA's times were measured by this session's first timed check
    sdpa_from_earlier_check: bool = field(default=False, metadata=PERFORMANCE)
    visits: VisitMap | None = None  # from the causal launch (or the full one for full-only drills)
    extra_visits: list[VisitMap] = field(default_factory=list)  # a problem's other loops (drill 04's dQ loop)
    diagnosis: list[Diagnosis] = field(default_factory=list, metadata=DIAGNOSIS)
    # which tensor, side and shape
    guard_findings: list[GuardFinding] = field(default_factory=list, metadata=DIAGNOSIS)
    # mode -> the weights read out (failing modes)
    readout: dict[str, ReadOut] = field(default_factory=dict, metadata=DIAGNOSIS)
    error: CheckError | None = None
    # git blob id of the bytes this check loaded (tutor.pristine.blob_id; None: the file
    # could not be read): progress counts attempts by it, so a save during the check
    # cannot give one content's verdict another content's id
    content_id: str | None = None
    output: str = ""  # what the student's code printed (tail)
    duration_s: float = 0.0  # wall time of the verdict phase inside the worker
    # K/V blocks the *full* launch of the default shape visited (summed over heads):
    # against ``visits`` it gives the counted work ratio of causal vs full
    full_visited_blocks: int | None = None
    performance: Performance = field(default_factory=Performance, metadata=PERFORMANCE)
    roofline: Roofline | None = field(default=None, metadata=PERFORMANCE)  # when computed
    diagnosis_phase: DiagnosisPhase = field(default_factory=DiagnosisPhase, metadata=DIAGNOSIS)
    costs: dict[str, PhaseCost] = field(default_factory=dict)  # "verdict", "diagnosis", "performance"

    # figures derived from the fields, written after them in the JSON (tutor.codec)
    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = (
        "speedup", "work_ratio", "solved", "outcome", "visited_blocks", "total_blocks", "ideal_blocks",
        "visited_fraction", "ideal_fraction",
    )

    # -- derived figures ---------------------------------------------------------
    @property
    def speedup(self) -> float | None:
        if self.full_ms and self.causal_ms:
            return self.full_ms / self.causal_ms
        return None

    @property
    def timed_ms(self) -> dict[str, float]:
        """The student's timed launches by mode, only those timed (a problem may time one
        mode only: drill 08's is causal); empty when nothing was timed."""
        return {mode: ms for mode, ms in (("full", self.full_ms), ("causal", self.causal_ms)) if ms is not None}

    @property
    def sdpa_timed_ms(self) -> dict[str, float]:
        """torch's SDPA at the same shape, by mode, only the modes timed (a GPU)."""
        return {mode: ms for mode, ms in (("full", self.sdpa_full_ms), ("causal", self.sdpa_causal_ms))
                if ms is not None}

    @property
    def visited_blocks(self) -> int | None:
        return None if self.visits is None else self.visits.visited_blocks

    @property
    def total_blocks(self) -> int | None:
        return None if self.visits is None else self.visits.total_blocks

    @property
    def ideal_blocks(self) -> int | None:
        return None if self.visits is None else self.visits.ideal_blocks

    @property
    def visited_fraction(self) -> float | None:
        if self.visits is None or not self.visits.total_blocks:
            return None
        return self.visits.visited_blocks / self.visits.total_blocks

    @property
    def ideal_fraction(self) -> float | None:
        if self.visits is None or not self.visits.total_blocks:
            return None
        return self.visits.ideal_blocks / self.visits.total_blocks

    @property
    def work_ratio(self) -> float | None:
        """Counted work of the full launch over the causal one (K/V blocks visited,
        from the visit maps): how many times less the causal launch loaded."""
        if self.visits is None or not self.full_visited_blocks or not self.visits.visited_blocks:
            return None
        return self.full_visited_blocks / self.visits.visited_blocks

    @property
    def gpu_speedup(self) -> float | None:
        """The timed full/causal speed-up when it was timed on a GPU; None on the
        interpreter, whose wall clock is noise at these sizes and no speed (its
        counted work ratio is :attr:`work_ratio`, a different figure kept apart)."""
        if self.device is None or self.device.interpreter:
            return None
        return self.speedup

    @property
    def outcome(self) -> Outcome:
        """The one verdict every front end shows (see :data:`Outcome`)."""
        if self.error is not None:
            return "not-run"
        if not self.passed:
            return "failed"
        if any(d.severity == "finding" for d in self.diagnosis):
            return "passed-with-finding"
        return "solved"

    @property
    def solved(self) -> bool:
        """PASSED with no open finding: the drill is done."""
        return self.outcome == "solved"

    @property
    def codes(self) -> list[str]:
        return [d.code for d in self.diagnosis]

    def codes_said(self, listed: tuple[str, ...] | list[str] = ()) -> list[str]:
        """:func:`codes_said` of this check's diagnosis."""
        return codes_said(self.diagnosis, listed)

    # -- the later phases ---------------------------------------------------------
    def phase_dict(self, phase: PhaseName) -> dict[str, Any]:
        """The fields ``phase`` fills (tagged ``metadata=DIAGNOSIS``/``PERFORMANCE``) and
        its cost: what the worker sends when that phase ends."""
        data = {f.name: codec.encode(getattr(self, f.name)) for f in _phase_fields(phase)}
        data["cost"] = codec.encode(self.costs.get(phase))
        finite: dict[str, Any] = _finite(data)
        return finite

    def apply_phase(self, phase: PhaseName, data: dict[str, Any]) -> None:
        """Take the fields of :meth:`phase_dict` (from the worker) into this result."""
        for f in _phase_fields(phase):
            if f.name in data:
                setattr(self, f.name, codec.decode_field(CheckResult, f.name, data[f.name]))
        if data.get("cost") is not None:
            self.costs[phase] = codec.decode(PhaseCost, data["cost"])

    # -- JSON ----------------------------------------------------------------------
    # The fields (tutor.codec), then JSON_PROPERTIES, then the visit map as "visit_map".
    def to_dict(self) -> dict[str, Any]:
        data = codec.encode(self)
        data["visit_map"] = data.pop("visits")
        finite: dict[str, Any] = _finite(data)
        return finite

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        rest = {key: value for key, value in data.items() if key != "visit_map"}
        return codec.decode(cls, {**rest, "visits": data.get("visit_map")}, ignore_unknown=True)

    @classmethod
    def from_json(cls, text: str) -> CheckResult:
        return cls.from_dict(json.loads(text))


def _phase_fields(phase: PhaseName) -> list[Field[Any]]:
    return [f for f in fields(CheckResult) if f.metadata.get("phase") == phase]


def _finite(value: Any) -> Any:
    """JSON has no NaN/Inf: they become None (the non-finite count says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
