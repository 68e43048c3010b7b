"""Every student-like kernel in solutions/NN_slug.mistakes.toml gets exactly its diagnosis.

Each entry is a shipped solution with a few textual edits (tutor/mistakes.py):
a wrong kernel must FAIL with exactly the error- and finding-level codes it
lists, each message holding the numbers the read-out measured; a correct
kernel written differently (a two-stage loop, other block sizes, a -1e9 mask,
natural exp with a consistent scale, m_i starting at 0) must PASS with no
finding and no read-out at all (the read-out runs only on failing modes).
Every check runs the real harness in a worker process (the interpreter here).
"""

from __future__ import annotations

import pytest
from helpers_harness import check_files, shipped_solution

from tutor import mistakes
from tutor.catalog import get_drill
from tutor.harness.result import CheckResult

ENTRIES = {m.stem: m for m in mistakes.all_mistakes() if m.drill in ("01", "02")}  # 04-06: their own test files
# one module fixture checks every entry (~32 interpreter checks, each failing one with its
# read-out): more than the default per-test limit on a busy 2-core machine
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, CheckResult]:
    written = mistakes.materialise(tmp_path_factory.mktemp("mistakes"))
    extra = {"01_fast_solution": shipped_solution("01").with_name("01_causal_mask_fast.py")}
    files = list(written.values()) + list(extra.values())
    results = check_files(files)
    names = {path: stem for stem, path in {**written, **extra}.items()}
    return {names[path]: result for path, result in results.items()}


def _said(result: CheckResult) -> list[str]:
    return [d.code for d in result.diagnosis if d.severity in ("error", "finding")]


def test_the_mistakes_files_cover_both_drills_and_every_correct_variant_the_issue_names():
    names = {stem for stem, m in ENTRIES.items() if m.passes and not m.codes}
    for wanted in ("01_two_stage_loop", "01_blocks_32_16", "01_mask_minus_1e9", "01_natural_exp",
                   "01_m_starts_at_zero", "02_natural_exp", "02_m_starts_at_zero", "02_blocks_32_16"):
        assert wanted in names
    for stem, m in ENTRIES.items():
        drill = get_drill(m.drill)
        assert all(code in drill.diagnoses for code in m.codes), stem
        assert m.passes or m.codes, f"{stem}: a wrong kernel must name its diagnosis"


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(ENTRIES))
def test_each_entry_gets_exactly_its_verdict_and_codes(checked, stem: str):
    entry = ENTRIES[stem]
    result = checked[stem]
    assert result.error is None, result.error
    assert result.passed is entry.passes, [d.message for d in result.diagnosis]
    assert _said(result) == list(entry.codes), [d.message for d in result.diagnosis]
    for diagnosis in result.diagnosis:
        assert "{" not in diagnosis.message
    if entry.passes:  # a correct kernel (with or without a finding such as extra blocks) is never read out
        assert result.solved is (not entry.codes) and not result.readout
    elif any(not case.passed for case in result.cases if case.name != "hostile"):
        assert result.readout, "a failing check reads out the failing modes"


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
