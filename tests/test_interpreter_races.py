"""On the interpreter, two programs of one launch that store different values to one
element are a race (interpreter_races): on a GPU, which value lands depends on the order
the programs run in, and the interpreter's fixed order hides it.  A kernel whose output
came out right only through that order is told so at the store's line."""

from __future__ import annotations

import pytest
import torch
from helpers_harness import check_one, solution_with

from tutor.harness import interpreter_races


@pytest.fixture(scope="module")
def launch():
    """A kernel whose program p stores elements p*SHIFT .. p*SHIFT + BLOCK - 1: with SHIFT <
    BLOCK two programs share some.  Made here, after the session picked the device (the
    decorator reads TRITON_INTERPRET when it runs)."""
    import triton
    import triton.language as tl

    @triton.jit
    def overlapping(Out, Visits, SHIFT: tl.constexpr, SAME: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * SHIFT + tl.arange(0, BLOCK)
        value = 1.0 if SAME else pid.to(tl.float32)
        tl.store(Out + offs, tl.zeros([BLOCK], dtype=tl.float32) + value)
        tl.store(Visits + offs, pid)  # the tutor's bookkeeping: overlaps there are measured elsewhere

    def run(shift: int, same: bool) -> torch.Tensor:
        out = torch.zeros(64, dtype=torch.float32)
        visits = torch.zeros(64, dtype=torch.int32)
        overlapping[(2,)](out, visits, SHIFT=shift, SAME=same, BLOCK=16)
        return out

    return run


def test_two_programs_storing_different_values_to_one_element_race(launch):
    interpreter_races.take()
    launch(shift=8, same=False)  # the launch runs on: its output is checked as always
    race = interpreter_races.take()
    assert race is not None
    assert "programs (0, 0, 0) and (1, 0, 0) both store element 8 of Out (8 elements" in str(race)
    assert interpreter_races.take() is None  # taken once


def test_disjoint_stores_and_equal_values_are_no_race(launch):
    interpreter_races.take()
    assert float(launch(shift=16, same=False)[16:32].sum()) == 16.0  # program 1's own elements
    assert float(launch(shift=8, same=True)[:24].sum()) == 24.0  # both store 1.0 where they overlap
    assert interpreter_races.take() is None


@pytest.mark.slow
def test_padding_rows_storing_over_another_groups_states_is_a_race(tmp_path):
    """Drill 07's slice states stored with mask heads < HEADS instead of g_ok (a blind
    attempt): the padding rows of K/V head 0's group store garbage over head 1's query
    heads, which the interpreter's order overwrote again: it PASSED, and on a GPU it is
    wrong whenever the programs run the other way round."""
    path = solution_with("07", "    tl.store(MidM + state, m_i, mask=g_ok)\n",
                         "    tl.store(MidM + state, m_i, mask=heads < HEADS)\n",
                         tmp_path / "07_states_masked_by_heads.py")
    result = check_one(path, "07")
    assert result.error is not None and result.error.kind == "runtime", result.error
    assert "store race, output right only by the interpreter's order" in result.error.message
    assert "of MidM" in result.error.message
    assert result.error.source_line == "    tl.store(MidM + state, m_i, mask=heads < HEADS)"
