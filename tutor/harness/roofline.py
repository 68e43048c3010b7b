"""The student's kernel on a roofline: counted work, drill 03's ideal, achieved rates.

Everything here comes from the counted visit map and the shape:

* **FLOPs done**: the two matmuls of every visited (query block, key block)
  tile, ``4 · rows · cols · d`` (a multiply-add is two FLOPs, as in drill 03),
  on the tile's real rows and columns (the padding of a ragged last block is
  not counted);
* **bytes loaded and stored**: each (head, query block) program loads its Q
  tile once and stores its O tile once; each visited tile loads one K and one
  V tile.  These are the tile loads the kernel issues from global memory; a
  GPU's L2 may serve some of the repeated K/V loads, so they bound the HBM
  traffic from above;
* **drill 03's ideal** for the same shape, from the quiz's formulas
  (:mod:`tutor.quiz.formulas`, the one source): compulsory traffic (Q, K, V
  read once, O written once) and the FLOPs of full attention; for causal
  attention the FLOPs of the tiles a causal kernel needs, counted as the
  kernel's are (real rows and columns), which is drill 03's 4·n²·d × (T+1)/(2T)
  where n is a multiple of square blocks (blind round 28's review: that
  fraction times an unpadded n² matched no count at n = 200).

On a GPU, with a timed launch, the achieved TFLOP/s and GB/s are set against
the device's peaks (:mod:`tutor.harness.peaks`); on the interpreter there are
counts only, never a rate.  Every count is a total over batch × heads.

No torch here: the worker builds it (:func:`build`), it travels in the check's
result (:class:`tutor.harness.result.CheckResult`), and every front end reads the
typed :class:`Roofline` (:mod:`tutor.roofline` words and draws it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tutor.harness.result import Peaks, Roofline, RooflineLaunch, VisitMap
from tutor.quiz import formulas

ELEMENT_BYTES = 2  # fp16 inputs and output


@dataclass(frozen=True)
class WorkCount:
    """Counted work of one launch, in total over batch × heads."""

    flops: int
    q_bytes: int
    k_bytes: int
    v_bytes: int
    o_bytes: int
    visited_tiles: int

    @property
    def bytes(self) -> int:
        return self.q_bytes + self.k_bytes + self.v_bytes + self.o_bytes


def _extent(index: int, block: int, seq: int) -> int:
    """Real rows (or columns) of block ``index``: the last block may be ragged."""
    return max(0, min(block, seq - index * block))


def count_work(visits: VisitMap, head_dim: int, element_bytes: int = ELEMENT_BYTES) -> WorkCount:
    """FLOPs and bytes of the launch whose visit map this is (see the module docstring)."""
    seq, d, b = visits.seq, head_dim, element_bytes
    rows = [_extent(i, visits.block_m, seq) for i in range(len(visits.counts))]
    cols = [_extent(j, visits.block_n, seq) for j in range(len(visits.counts[0]) if visits.counts else 0)]
    flops = kv_elements = tiles = 0
    for i, row in enumerate(visits.counts):
        for j, count in enumerate(row):
            flops += count * 4 * rows[i] * cols[j] * d
            kv_elements += count * cols[j] * d
            tiles += count
    q_elements = visits.heads * sum(rows) * d  # one Q tile per (head, query block) program
    return WorkCount(
        flops=flops,
        q_bytes=q_elements * b,
        k_bytes=kv_elements * b,
        v_bytes=kv_elements * b,
        o_bytes=q_elements * b,  # one O tile stored per program
        visited_tiles=tiles,
    )


@dataclass(frozen=True)
class Ideal:
    """Drill 03's fused attention at this shape, in total over batch × heads."""

    flops: float
    bytes: int
    note: str


def ideal_work(shape: list[int], causal: bool, block_m: int, block_n: int,
               element_bytes: int = ELEMENT_BYTES) -> Ideal:
    batch, heads, n, d = shape
    programs = batch * heads
    hbm = programs * formulas.fused_hbm_bytes(n, d, element_bytes)
    flops = programs * formulas.forward_flops(n, d)
    if not causal:
        return Ideal(flops=flops, bytes=hbm, note="fused: Q, K, V read once, O written once; 4·n²·d FLOPs")
    needed, tiles, total = causal_tile_flops(n, d, block_m, block_n)
    return Ideal(flops=float(programs * needed), bytes=hbm,
                 note=f"fused, causal: the {tiles} of {total} tiles a causal kernel needs, 4·rows·cols·d each on their"
                      " real rows and columns")


def causal_tile_flops(n: int, d: int, block_m: int, block_n: int) -> tuple[int, int, int]:
    """One head's FLOPs over the (query block, key block) tiles a causal kernel needs (a key block
    that starts before the query block ends), on their real rows and columns as :func:`count_work`
    counts them; those tiles and all of them."""
    query_blocks, key_blocks = -(-n // block_m), -(-n // block_n)
    flops = tiles = 0
    for i in range(query_blocks):
        rows, end = _extent(i, block_m, n), min((i + 1) * block_m, n)
        for j in range(-(-end // block_n)):
            flops += 4 * rows * _extent(j, block_n, n) * d
            tiles += 1
    return flops, tiles, query_blocks * key_blocks


@dataclass(frozen=True)
class Counted:
    """One timed launch's counted work and the ideal it is set against."""

    work: WorkCount
    ideal: Ideal


def build(shape: list[int], visits_by_mode: dict[str, VisitMap], *, ms: Mapping[str, float | None] | None = None,
          sdpa_ms: Mapping[str, float | None] | None = None, peaks: Peaks | None = None,
          element_bytes: int = ELEMENT_BYTES) -> Roofline:
    """The roofline of the launches whose visit maps are given (keyed "full"/"causal").
    ``ms`` and ``sdpa_ms`` are GPU timings at ``shape``; leave them out on the
    interpreter (its milliseconds are not a device's rate)."""
    first = next(iter(visits_by_mode.values()))
    counted = {mode: Counted(count_work(visits, shape[3], element_bytes),
                             ideal_work(shape, mode == "causal", visits.block_m, visits.block_n, element_bytes))
               for mode, visits in visits_by_mode.items()}
    return assemble(shape, counted, first.block_m, first.block_n, ms=ms, sdpa_ms=sdpa_ms, peaks=peaks,
                    element_bytes=element_bytes)


def assemble(shape: list[int], counted: Mapping[str, Counted], block_m: int, block_n: int, *,
             ms: Mapping[str, float | None] | None = None, sdpa_ms: Mapping[str, float | None] | None = None,
             peaks: Peaks | None = None, element_bytes: int = ELEMENT_BYTES,
             counted_on: str = "total over batch × heads") -> Roofline:
    """The roofline of launches already counted (keyed by the timed mode): :func:`build`
    counts them from visit maps; a problem whose launches one map cannot hold counts its
    own (drill 08's packed sequences)."""
    roof = Roofline(shape=list(shape), block_m=block_m, block_n=block_n, element_bytes=element_bytes, peaks=peaks,
                    counted_on=counted_on)
    for mode, one in counted.items():
        work, ideal = one.work, one.ideal
        launch = RooflineLaunch(mode=mode, flops=work.flops, bytes=work.bytes, visited_tiles=work.visited_tiles,
                                ideal_flops=ideal.flops, ideal_bytes=ideal.bytes, ideal_note=ideal.note)
        t = (ms or {}).get(mode)
        if t:
            launch.ms = t
            launch.tflops = work.flops / (t * 1e-3) / 1e12
            launch.gbps = work.bytes / (t * 1e-3) / 1e9
        s = (sdpa_ms or {}).get(mode)
        if s:
            launch.take_sdpa(s)
        launch.bound = roof.bound(launch)
        roof.launches.append(launch)
    return roof
