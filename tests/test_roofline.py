"""The roofline's counts: FLOPs and bytes from a visit map agree exactly with an
independent element-level count, and with the quiz's formulas where they apply."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from helpers_app import recorded_result

from tutor.harness import roofline
from tutor.harness.peaks import device_peaks, table_peaks
from tutor.harness.result import VisitMap
from tutor.quiz import formulas

WORKSPACE = Path("/workspace")


def independent_count(visits: VisitMap, d: int, b: int = 2) -> tuple[int, int]:
    """Expand every (query block, key block) count to the elements of the n×n score
    matrix it covers (cropped at the sequence end) and count there: each covered
    score costs 4·d FLOPs (QKᵀ and PV), each covered key column a K and a V row per
    (head, query block) program, and every program loads Q and stores O for its rows."""
    counts = torch.tensor(visits.counts, dtype=torch.int64)
    n = visits.seq
    scores = counts.repeat_interleave(visits.block_m, 0).repeat_interleave(visits.block_n, 1)[:n, :n]
    flops = int(scores.sum()) * 4 * d
    # key rows loaded: per query block, per key column, how many heads loaded it
    columns = counts.repeat_interleave(visits.block_n, 1)[:, :n]
    kv_bytes = 2 * int(columns.sum()) * d * b
    qo_bytes = 2 * visits.heads * n * d * b
    return flops, kv_bytes + qo_bytes


def random_map(seq: int, block_m: int, block_n: int, heads: int, rng: random.Random) -> VisitMap:
    n_m, n_n = -(-seq // block_m), -(-seq // block_n)
    counts = [[rng.randint(0, heads) for _ in range(n_n)] for _ in range(n_m)]
    ideal = [[j * block_n <= min((i + 1) * block_m, seq) - 1 for j in range(n_n)] for i in range(n_m)]
    return VisitMap(block_m=block_m, block_n=block_n, seq=seq, heads=heads, counts=counts, ideal=ideal)


@pytest.mark.parametrize("seq,block_m,block_n,heads,d", [(200, 64, 64, 2, 64), (129, 32, 64, 3, 16),
                                                         (37, 64, 32, 1, 64), (1000, 128, 64, 16, 64)])
def test_counts_agree_exactly_with_an_independent_count(seq, block_m, block_n, heads, d):
    rng = random.Random(seq * heads)
    for _ in range(5):
        visits = random_map(seq, block_m, block_n, heads, rng)
        work = roofline.count_work(visits, d)
        assert (work.flops, work.bytes) == independent_count(visits, d)


def test_a_real_kernels_recorded_map_counts_exactly():
    result = recorded_result("01_passing", WORKSPACE)
    d = result.shape[3]
    work = roofline.count_work(result.visits, d)
    assert (work.flops, work.bytes) == independent_count(result.visits, d)
    assert work.visited_tiles == result.visits.visited_blocks == 20


def test_full_attention_counts_match_the_quiz_formulas():
    batch, heads, n, d, block = 2, 3, 256, 64, 64
    t = formulas.blocks_per_side(n, block)
    full = VisitMap(block_m=block, block_n=block, seq=n, heads=batch * heads,
                    counts=[[batch * heads] * t for _ in range(t)], ideal=[[True] * t for _ in range(t)])
    roof = roofline.build([batch, heads, n, d], {"full": full})
    launch = roof.launches[0]
    assert launch.flops == launch.ideal_flops == batch * heads * formulas.forward_flops(n, d)
    assert launch.ideal_bytes == batch * heads * formulas.fused_hbm_bytes(n, d, 2)
    # K and V are loaded once per query block: T times the compulsory reads of K and V
    assert launch.bytes == batch * heads * (2 * n * d * 2 + t * 2 * n * d * 2)
    assert launch.tflops is None and launch.bound is None  # no rates without a time


def test_causal_ideal_uses_the_block_skipping_fraction_and_a_timed_launch_gets_rates():
    n, d, block = 256, 64, 64
    t = formulas.blocks_per_side(n, block)
    causal = VisitMap(block_m=block, block_n=block, seq=n, heads=1,
                      counts=[[int(j <= i) for j in range(t)] for i in range(t)],
                      ideal=[[j <= i for j in range(t)] for i in range(t)])
    roof = roofline.build([1, 1, n, d], {"causal": causal}, ms={"causal": 0.01},
                          peaks={"tflops": 100.0, "gbps": 1000.0, "source": "test"})
    launch = roof.launches[0]
    assert launch.visited_tiles == formulas.causal_block_count(n, block)[0]
    assert launch.ideal_flops == formulas.forward_flops(n, d) * formulas.causal_visited_fraction(n, block)
    assert launch.tflops == pytest.approx(launch.flops / 1e-5 / 1e12)
    assert launch.gbps == pytest.approx(launch.bytes / 1e-5 / 1e9)
    assert launch.bound == roof.bound(launch) == ("compute" if launch.intensity >= 100.0 else "memory")


def test_peaks_come_from_the_table_or_a_cached_measurement_in_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert table_peaks("NVIDIA H200")["gbps"] == 4800.0 and table_peaks("CPU") is None
    assert device_peaks("NVIDIA H100 80GB HBM3", "2.11", measure=False)["source"].startswith("datasheet")
    from tutor.harness import peaks

    peaks.store_peaks("NVIDIA H100 80GB HBM3", "2.11", {"tflops": 700.0, "gbps": 3000.0, "source": "measured"})
    assert (tmp_path / "flashtutor" / "peaks.json").is_file()
    got = device_peaks("NVIDIA H100 80GB HBM3", "2.11", measure=False)
    assert got["tflops"] == 700.0 and got["datasheet_tflops"] == 989.0


@pytest.mark.slow
def test_the_roofline_at_a_timing_shape_unlike_the_verdicts_counts_there(tmp_path):
    """The verdict ran at another shape: the causal map is counted at the timing shape
    by a launch of its own; the full one, which passed, visited every tile."""
    from tutor.catalog import get_drill, solution_path
    from tutor.harness.check import run_performance, run_verdict
    from tutor.harness.device import select_device
    from tutor.harness.job import CheckJob

    job = CheckJob(drill="01", file=str(solution_path(get_drill("01"))), seed=0, shape=(1, 1, 130, 64))
    dev = select_device("cpu")
    result, state = run_verdict(job, dev)
    assert result.outcome == "solved" and result.visits.seq == 130
    run_performance(job, dev, result, state)
    assert result.performance.status == "done", result.performance.reason
    assert result.timing_shape == [1, 2, 200, 64]
    tiles = {launch.mode: launch.visited_tiles for launch in result.roofline.launches}
    assert tiles == {"full": 32, "causal": 20}  # 2 heads x 16 tiles; 2 heads x 10 needed


def test_the_causal_ideal_counts_the_needed_tiles_as_the_kernel_counts_its_own():
    """Blind round 28's review: at n = 200 with 64-blocks, 4·n²·d × (T+1)/(2T) (12.8 MFLOP for two heads)
    matched no count; the ideal is the needed tiles' work on their real rows and columns: 13.4 MFLOP,
    what a kernel that visits exactly those tiles counts."""
    n, d, block = 200, 64, 64
    ideal = roofline.ideal_work([1, 2, n, d], True, block, block)
    t = formulas.blocks_per_side(n, block)
    needed = VisitMap(block_m=block, block_n=block, seq=n, heads=2,
                      counts=[[2 * int(j <= i) for j in range(t)] for i in range(t)],
                      ideal=[[j <= i for j in range(t)] for i in range(t)])
    assert ideal.flops == roofline.count_work(needed, d).flops == 13_402_112
    assert "the 10 of 16 tiles" in ideal.note
