"""The rustlings-style development check: every shipped drill fails with the
diagnosis its lesson is about, every solution passes and is solved, and the
visit count the harness reports for the 01 solution is the exact one.

Each check runs the real harness on the real file in a worker process.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from helpers_harness import REPO, check_files, check_jobs, drill_of, job, shipped_drill

from tutor.harness.result import CheckResult
from tutor.report import render

SOLUTIONS = sorted({*REPO.glob("solutions/*_solution*.py"), *REPO.glob("solutions/*_fast.py")})


@pytest.fixture(scope="module")
def checked() -> dict[Path, CheckResult]:
    """The verdict of every solution and shipped drill, checked once for this module."""
    return check_files([*SOLUTIONS, shipped_drill("01"), shipped_drill("02")])


def test_the_solutions_are_found():
    """The parametrization below is not silently empty."""
    assert {p.name for p in SOLUTIONS} >= {"01_causal_mask_solution.py", "02_online_rescale_solution.py"}


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.name)
def test_every_solution_passes_and_is_solved(checked, solution: Path):
    result = checked[solution]
    assert result.error is None, result.error
    assert result.passed and result.solved, result.codes
    assert result.diagnosis == []
    assert result.max_abs_err is not None and result.max_abs_err <= result.tolerance
    # several cases, each named (the attention problems' are default, ragged and short; others name their own)
    names = [c.name for c in result.cases]
    assert len(set(names)) >= 3 and all(names), names
    assert all(c.passed and c.nonfinite == 0 and c.unwritten == 0 for c in result.cases)


@pytest.mark.slow
def test_shipped_drill_01_fails_until_todo_2_and_says_todo_1_is_open(checked):
    result = checked[shipped_drill("01")]
    assert result.error is None and not result.passed
    # the lesson: the causal output is full attention, and every block is visited
    assert result.codes == ["todo2-open", "all-blocks-visited"]
    assert result.diagnosis[0].severity == "error"
    assert result.visits is not None and result.visits.visited_blocks == result.visits.total_blocks
    full_cases = [c for c in result.cases if not c.causal]
    assert full_cases and all(c.passed for c in full_cases), "the shipped kernel is a correct non-causal kernel"
    text = render(result)
    assert "Expected until TODO 2 is done:" in text
    assert "Causal is not meaningfully faster than full - TODO 1 is still open" in text


@pytest.mark.slow
def test_shipped_drill_02_fails_with_finite_plausible_numbers(checked):
    result = checked[shipped_drill("02")]
    assert result.error is None and not result.passed
    assert result.codes == ["never-rescaled"]
    assert result.max_abs_err is not None and math.isfinite(result.max_abs_err)
    assert result.max_abs_err > 10 * result.tolerance
    assert all(c.nonfinite == 0 and c.unwritten == 0 for c in result.cases)


def causal_blocks_needed(seq: int, block_m: int, block_n: int) -> list[int]:
    """For each query block, how many key blocks hold at least one (row, key) pair
    with key <= row - counted pair by pair, independently of the harness."""
    needed = []
    for first_row in range(0, seq, block_m):
        rows = range(first_row, min(first_row + block_m, seq))
        blocks = sum(
            1
            for first_key in range(0, seq, block_n)
            if any(key <= row for row in rows for key in range(first_key, min(first_key + block_n, seq)))
        )
        needed.append(blocks)
    return needed


def test_the_independent_count_agrees_with_the_closed_form():
    """With square blocks query block i needs i + 1 key blocks: T(T+1)/2 in all."""
    for seq in (1, 37, 64, 65, 200, 1000):
        blocks = -(-seq // 64)
        assert sum(causal_blocks_needed(seq, 64, 64)) == blocks * (blocks + 1) // 2
    assert causal_blocks_needed(200, 128, 64) == [2, 4]  # non-square: rows 0..127 see keys 0..127


def _block_sizes(path: Path) -> tuple[int, int]:
    text = path.read_text(encoding="utf-8")
    sizes = [int(re.search(rf"^{name} = (\d+)", text, re.M).group(1)) for name in ("BLOCK_M", "BLOCK_N")]
    return sizes[0], sizes[1]


SOLUTIONS_01 = [p for p in SOLUTIONS if drill_of(p) == "01"]
VISIT_SHAPES = [(1, 2, 200, 64), (2, 3, 300, 64)]  # 4 and 5 query blocks, both with a ragged last one


@pytest.fixture(scope="module")
def checked_at_shape() -> dict[tuple[Path, tuple[int, ...]], CheckResult]:
    """Each 01 solution checked with each shape as its default (visit-map) shape."""
    cases = [(solution, shape) for solution in SOLUTIONS_01 for shape in VISIT_SHAPES]
    return dict(zip(cases, check_jobs([job(solution, "01", shape=shape) for solution, shape in cases]), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("shape", VISIT_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("solution", SOLUTIONS_01, ids=lambda p: p.name)
def test_the_01_solution_visits_exactly_the_blocks_causal_attention_needs(checked_at_shape, solution: Path, shape):
    batch, heads, seq, _ = shape
    block_m, block_n = _block_sizes(solution)
    needed = causal_blocks_needed(seq, block_m, block_n)

    result = checked_at_shape[solution, shape]

    assert result.error is None and result.solved, (result.error, result.codes)
    assert result.shape == list(shape)
    visits = result.visits
    assert visits is not None and (visits.block_m, visits.block_n, visits.seq) == (block_m, block_n, seq)
    assert visits.visited_blocks == batch * heads * sum(needed)
    assert visits.total_blocks == batch * heads * len(needed) * -(-seq // block_n)
    # the map itself: query block i visited exactly its first needed[i] key blocks, in every head
    for counts, n_needed in zip(visits.counts, needed, strict=True):
        assert counts == [batch * heads] * n_needed + [0] * (len(counts) - n_needed)
    assert result.visited_fraction == pytest.approx(sum(needed) / (len(needed) * -(-seq // block_n)))
    assert result.ideal_fraction == result.visited_fraction

