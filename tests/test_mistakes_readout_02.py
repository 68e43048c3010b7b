"""Every student-like kernel of drill 02's mistakes file gets exactly its diagnosis
(drill 01's: test_mistakes_readout.py, which says how)."""

from __future__ import annotations

import pytest
from helpers_mistakes import assert_covers, assert_gets_its_verdict, check_entries, entries

from tutor.harness.result import CheckResult

ENTRIES = entries("02")
pytestmark = pytest.mark.timeout(1800)  # one module fixture checks every entry


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, CheckResult]:
    return check_entries(tmp_path_factory.mktemp("mistakes"), "02")


def test_the_mistakes_file_covers_every_correct_variant_the_issue_names():
    assert_covers(ENTRIES, {"02_natural_exp", "02_m_starts_at_zero", "02_blocks_32_16"})


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(ENTRIES))
def test_each_entry_gets_exactly_its_verdict_and_codes(checked, stem: str):
    assert_gets_its_verdict(ENTRIES[stem], checked[stem])
