"""Every diagnosis a real kernel mistake can produce is produced by a kernel with
exactly that mistake.

Each broken fixture (tests/helpers_fixtures.py) is a shipped solution or drill with one
edit (its first line says which); the real harness checks it in a worker and
must say exactly the expected codes, no more.  Together with the shipped drills
they reach every code the drills' TOML files define.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
from helpers_harness import BROKEN, REPO, check_files, drill_of

from tutor.authoring.student_kernels import load as load_mistakes
from tutor.catalog import get_drill
from tutor.harness.result import CheckResult

# fixture -> (PASSED?, the diagnosis codes in the order the report gives them)
EXPECTED: dict[str, tuple[bool, list[str]]] = {
    "01_diagonal_unmasked": (False, ["diagonal-unmasked"]),
    "01_loop_stops_before_diagonal": (False, ["loop-stops-before-diagonal"]),
    "01_mask_off_by_one": (False, ["mask-off-by-one"]),
    "01_mask_reversed": (False, ["mask-reversed"]),
    "01_ragged_unmasked": (False, ["ragged-unmasked"]),
    "01_full_broken": (False, ["full-broken"]),
    "01_todo2_only": (True, ["todo1-open"]),
    "01_extra_blocks": (True, ["extra-blocks"]),
    "01_unwritten_output": (False, ["unwritten-output"]),
    "01_one_element_unwritten": (False, ["unwritten-output"]),
    "01_store_out_of_bounds": (False, ["store-out-of-bounds"]),
    "01_nan_in_output": (False, ["nan-first-block"]),  # every row NaN from its first block, as drill 02 says it
    "01_one_inf": (False, ["nan-in-output"]),
    "01_no_visits_recorded": (True, ["no-visits-recorded"]),
    "01_wrong_output": (False, ["wrong-output"]),
    "02_sum_not_rescaled": (False, ["sum-not-rescaled"]),
    "02_acc_not_rescaled": (False, ["acc-not-rescaled"]),
    "02_no_final_division": (False, ["no-final-division"]),
    "02_nan_first_block": (False, ["nan-first-block"]),
    "02_one_inf": (False, ["nan-in-output"]),
    "02_unwritten_output": (False, ["unwritten-output"]),
    "02_store_out_of_bounds": (False, ["store-out-of-bounds"]),
    "02_no_visits_recorded": (True, ["no-visits-recorded"]),
    "02_wrong_output": (False, ["wrong-output"]),
}

# codes the shipped drills themselves produce (tests/test_drills.py checks them)
SHIPPED_CODES = {"01": {"todo2-open", "all-blocks-visited"}, "02": {"never-rescaled"}}

FIXTURES = sorted(BROKEN.glob("*.py"))
# one module fixture checks every fixture (failing ones now with their read-out)
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def checked() -> dict[str, CheckResult]:
    return {path.stem: result for path, result in check_files(FIXTURES).items()}


def test_every_fixture_has_an_expectation_and_every_expectation_a_fixture():
    assert {p.stem for p in FIXTURES} == set(EXPECTED)


@pytest.mark.parametrize("drill_id", ["01", "02"])
def test_every_diagnosis_code_of_the_drill_is_produced_by_a_real_kernel(drill_id: str):
    """By a fixture here, or by a student-like kernel in solutions/NN_slug.mistakes.toml
    (tests/test_mistakes_readout.py runs those)."""
    produced = {code for name, (_, codes) in EXPECTED.items() if name.startswith(drill_id) for code in codes}
    # and the student-like kernels of solutions/NN_slug.mistakes.toml (tests/test_hostile.py, test_guard.py run them)
    produced |= {code for mistake in load_mistakes(get_drill(drill_id)) for code in mistake.codes}
    assert set(get_drill(drill_id).diagnoses) == produced | SHIPPED_CODES[drill_id]


def assert_words_of(drill, diagnosis) -> None:
    """The message is the drill's words for the code, {placeholders} filled with measured
    numbers (a sentence whose numbers were not measured is left out), plus where it was seen."""
    text = drill.diagnosis_text(diagnosis.code)
    assert diagnosis.severity == text.severity
    assert "{" not in diagnosis.message
    for sentence in re.split(r"(?<=[.!?])\s+", text.message):
        if "{" not in sentence:
            assert sentence in diagnosis.message, (diagnosis.code, sentence)
    first = re.split(r"(?<=[.!?])\s+", text.message)[0]
    if "{" not in first:
        assert diagnosis.message.startswith(first)


def _code_lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_each_fixture_is_its_base_file_with_one_small_edit(fixture: Path):
    """The first line names the base; the rest differs from it in one place, so a
    fixture cannot drift into testing something else (the edit tables are in
    tests/helpers_fixtures.py)."""
    header, _, body = fixture.read_text(encoding="utf-8").partition("\n")
    assert header.startswith("# Test fixture: ") and " with one mistake: " in header
    base = REPO / header.removeprefix("# Test fixture: ").split(" with one mistake: ")[0]
    assert drill_of(base) == drill_of(fixture)
    diff = difflib.SequenceMatcher(a=_code_lines(base), b=[x for x in body.splitlines() if x.strip()], autojunk=False)
    edits = [op for op in diff.get_opcodes() if op[0] != "equal"]
    assert len(edits) == 1, f"{fixture.name} differs from {base.name} at {edits}: fix its edit table"
    _, a0, a1, b0, b1 = edits[0]
    assert max(a1 - a0, b1 - b0) <= 3


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_mistake_gets_its_diagnosis(checked, name: str):
    passed, codes = EXPECTED[name]
    result = checked[name]
    assert result.error is None, result.error
    assert result.passed is passed
    assert not result.solved
    assert result.codes == codes
    drill = get_drill(name[:2])
    for diagnosis in result.diagnosis:  # the words come from the drill's data, plus where it was seen
        assert_words_of(drill, diagnosis)


@pytest.mark.slow
def test_a_shape_shorter_than_a_block_is_diagnosed_as_the_longer_shapes_agree(checked):
    """On seq=37 (one block) a missing diagonal mask *is* full attention; the
    diagnosis must still be the one the multi-block shapes show, said once."""
    result = checked["01_diagonal_unmasked"]
    short = [c for c in result.cases if c.name == "short" and c.causal]
    assert short and not short[0].passed
    assert "todo2-open" not in result.codes


@pytest.mark.slow
def test_unwritten_elements_are_counted_exactly(checked):
    """The store skips one element per (batch, head): exactly that many stay poisoned,
    and they are not counted as NaN the kernel computed."""
    result = checked["01_one_element_unwritten"]
    for case in result.cases:
        batch, heads = case.shape[:2]
        assert (case.unwritten, case.nonfinite) == (batch * heads, 0), case
        assert case.max_abs_err is None and not case.passed
    assert result.max_abs_err is None


@pytest.mark.slow
def test_one_inf_anywhere_fails(checked):
    result = checked["01_one_inf"]
    for case in result.cases:
        batch, heads = case.shape[:2]
        assert (case.nonfinite, case.unwritten) == (batch * heads, 0), case
        assert not case.passed and case.max_abs_err is None


@pytest.mark.slow
def test_a_write_past_the_end_fails_even_where_the_values_are_right(checked):
    result = checked["01_store_out_of_bounds"]
    short = [c for c in result.cases if c.name == "short"]
    assert short and all(c.wrote_out_of_bounds and not c.passed for c in short)
    # one (batch, head) and one block: nothing in bounds was overwritten
    assert all(c.max_abs_err is not None and c.max_abs_err <= result.tolerance for c in short)


@pytest.mark.slow
def test_the_visit_findings_carry_the_counts(checked):
    todo2_only = checked["01_todo2_only"].visits
    assert todo2_only.visited_blocks == todo2_only.total_blocks > todo2_only.ideal_blocks
    # every count says what it is summed over (blind round 23: 32/32 did not say "both heads")
    said = checked["01_todo2_only"].diagnosis[0].message
    assert (f"({todo2_only.total_blocks}/{todo2_only.total_blocks} blocks visited, in total over {todo2_only.heads}"
            f" (batch, head)s; a causal kernel needs {todo2_only.ideal_blocks}.)") in said
    extra = checked["01_extra_blocks"].visits
    assert extra.ideal_blocks < extra.visited_blocks < extra.total_blocks
    assert (f"({extra.visited_blocks - extra.ideal_blocks} blocks more than the {extra.ideal_blocks} needed, in total"
            f" over {extra.heads} (batch, head)s.)" in checked["01_extra_blocks"].diagnosis[0].message)
