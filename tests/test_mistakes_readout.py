"""Every student-like kernel in drill 01's mistakes file gets exactly its diagnosis
(drill 02's: test_mistakes_readout_02.py).

Each entry is a shipped solution with a few textual edits (tutor/authoring/student_kernels.py):
a wrong kernel must FAIL with exactly the error- and finding-level codes it
lists, each message holding the numbers the read-out measured; a correct
kernel written differently (a two-stage loop, other block sizes, a -1e9 mask,
natural exp with a consistent scale, m_i starting at 0) must PASS with no
finding and no read-out at all (the read-out runs only on failing modes).
Every check runs the real harness in a worker process (the interpreter here).
"""

from __future__ import annotations

import pytest
from helpers_harness import shipped_solution
from helpers_mistakes import assert_covers, assert_gets_its_verdict, check_entries, entries

from tutor.harness.result import CheckResult

ENTRIES = entries("01")  # drill 02's: test_mistakes_readout_02.py; 04-06: their own test files
# one module fixture checks every entry (~40 interpreter checks, each failing one with its
# read-out): more than the default per-test limit on a busy 2-core machine
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, CheckResult]:
    fast = shipped_solution("01").with_name("01_causal_mask_fast.py")
    return check_entries(tmp_path_factory.mktemp("mistakes"), "01", {"01_fast_solution": fast})


def test_the_mistakes_file_covers_every_correct_variant_the_issue_names():
    assert_covers(ENTRIES, {"01_two_stage_loop", "01_blocks_32_16", "01_mask_minus_1e9", "01_natural_exp",
                            "01_m_starts_at_zero"})


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(ENTRIES))
def test_each_entry_gets_exactly_its_verdict_and_codes(checked, stem: str):
    assert_gets_its_verdict(ENTRIES[stem], checked[stem])


@pytest.mark.slow
def test_the_fast_two_stage_solution_passes_with_no_finding(checked):
    result = checked["01_fast_solution"]
    assert result.error is None and result.passed and result.solved, result.diagnosis
    assert not result.readout


@pytest.mark.slow
def test_the_messages_quote_what_was_measured(checked):
    """Numbers in the message are the read-out's own, not made up."""
    zero = checked["01_mask_zero"]
    ro = zero.readout["causal"]
    message = zero.diagnosis[0].message
    assert f"row {ro.forbidden_row} still puts {ro.forbidden_mass:.2f} of its weight" in message
    temperature = checked["01_scale_missing"]
    assert temperature.readout["causal"].temperature_name == "scale-missing"
    assert f"{temperature.readout['causal'].temperature:.3g} times" in temperature.diagnosis[0].message
    ignored = checked["01_v_from_k"].readout
    assert any(r.moves_with.get("v") is False for r in ignored.values())


@pytest.mark.slow
def test_blind_round_12_causes_the_measurements_support(checked):
    """Words that named a cause the kernel did not have (blind round 12), now said with what
    was measured: no mask blamed for V's rows read at the query rows, the state wiped by a
    later block among a weightless block's causes, no "every row" for a mask missing in
    one query block, and both causes of a read past the end at a ragged length."""
    def words(stem: str) -> str:
        return " ".join(d.message for d in checked[f"01_{stem}"].diagnosis)

    v_rows = words("v_loaded_at_the_query_rows")
    assert "mask points the wrong way" not in v_rows and "keys after it" not in v_rows, v_rows
    assert "V's rows are loaded from other positions than the keys scored" in v_rows, v_rows
    assert "rescaled by an alpha of 0" in words("m_i_never_updated")
    last = words("mask_on_the_last_iteration_only")
    assert "every query row" not in last and "diagonal" in last, last
    assert "or its offsets run past the tensor's end" in words("k_strides_swapped")
    # K and V passed the other way round: the output is attention with them exchanged (07 w42's kin)
    assert "attention with K and V exchanged (keys taken from V, values from K)" in words("k_and_v_passed_swapped")
    assert "rows that were written are wrong (rows 0..63)" in words("store_at_block_local_rows")


@pytest.mark.slow
def test_blind_round_14_a_store_into_q_and_a_causal_flag_never_passed(checked):
    """The final store sent into Q is measured in Q (and no "(batch, head) pairs" said of an
    output no store reached); a launcher that never passes causal is said as that, not as an
    open TODO (blind round 14, w32 and w22)."""
    into_q = {d.code: d.message for d in checked["01_stores_into_q"].diagnosis}
    assert "Q changed in " in into_q["input-written"] and " of its 25600 elements" in into_q["input-written"], into_q
    assert "No element of the output was written in any (batch, head)" in into_q["unwritten-output"]
    assert "every row of the other" not in into_q["unwritten-output"]
    flag = " ".join(d.message for d in checked["01_causal_flag_never_passed"].diagnosis)
    assert "ran the kernel with CAUSAL = False" in flag and "TODO" not in flag, flag
    # an accumulator kept in fp16: the long-sum case's rows past 65504, and no others
    acc = " ".join(d.message for d in checked["01_acc_kept_in_fp16"].diagnosis)
    assert "rows 127..135" in acc and "the running sum (acc) is kept in fp16" in acc, acc
