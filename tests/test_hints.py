"""Hint unlocks: by diagnosis code at once, by attempts, persisted, never taken
back; and what `flashtutor hint` prints.  Results recorded from real checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tutor.catalog import get_drill, pristine_path
from tutor.cli import main
from tutor.harness.result import CheckResult
from tutor.pristine import blob_id
from tutor.state.hints import earned_unlocks, hint_states, next_locked, unlock_rule
from tutor.state.progress import NOT_COUNTED_SAME, NOT_COUNTED_SHIPPED, ProgressStore

RESULTS = Path(__file__).parent / "fixtures" / "results"
DRILL_01 = get_drill("01")


def recorded(name: str) -> CheckResult:
    return CheckResult.from_dict(json.loads((RESULTS / f"{name}.json").read_text()))


def titles(drill, indices) -> list[str]:
    return [drill.hints[i].title for i in sorted(indices)]


def test_the_first_hint_is_open_from_the_start_and_never_counts_as_earned() -> None:
    states = hint_states(DRILL_01, [])
    assert [s.unlocked for s in states] == [True, False, False, False]
    assert 0 not in earned_unlocks(DRILL_01, attempts=100, codes=["todo2-open"])
    assert next_locked(states).index == 1


def test_a_diagnosis_code_unlocks_its_hint_at_once() -> None:
    # "PASSED, but every block visited" (TODO 1 open) opens the loop-bound hint on the first check
    earned = earned_unlocks(DRILL_01, attempts=1, codes=["todo1-open"])
    assert "The loop bound" in titles(DRILL_01, earned)
    assert "Which keys may a query row see?" not in titles(DRILL_01, earned)


def test_attempts_unlock_the_tiers_in_order() -> None:
    by_attempts = [titles(DRILL_01, earned_unlocks(DRILL_01, attempts=n, codes=[])) for n in (1, 2, 4, 6)]
    assert by_attempts == [
        [],
        ["Which keys may a query row see?"],
        ["Which keys may a query row see?", "The loop bound"],
        ["Which keys may a query row see?", "The loop bound", "Nearly the answer"],
    ]


def test_unlocks_are_recorded_persist_and_are_never_taken_back(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path)
    first = store.record_check(recorded("01_todo2_only"), DRILL_01)
    assert "The loop bound" in titles(DRILL_01, first.newly_unlocked)
    second = store.record_check(recorded("01_passing"), DRILL_01)  # attempt 2: the attempts tier opens
    assert titles(DRILL_01, second.newly_unlocked) == ["Which keys may a query row see?"]
    third = store.record_check(recorded("01_passing"), DRILL_01)
    assert third.newly_unlocked == []
    earned = ProgressStore(tmp_path).unlocked_hints("01")
    assert set(first.newly_unlocked) | set(second.newly_unlocked) == set(earned)


def test_unlock_rules_read_as_words() -> None:
    rule = unlock_rule(DRILL_01.hints[1])
    assert rule == ("opens after 2 attempts, or at once when a check of your edit reports diagonal-unmasked, "
                    "mask-off-by-one, mask-reversed, mask-zero, mask-one-ahead, sees-future, keys-missing or "
                    "future-in-sum")
    assert unlock_rule(DRILL_01.hints[0]) == "open from the start"


def test_flashtutor_hint_prints_the_open_hints_and_what_opens_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "drills").mkdir()
    (tmp_path / "drills" / DRILL_01.file).write_text("# the student's file\n")
    monkeypatch.setenv("FLASHTUTOR_WORKSPACE", str(tmp_path))
    assert main(["hint", "01"]) == 0
    out = capsys.readouterr().out
    assert DRILL_01.hints[0].title in out and DRILL_01.hints[1].title in out
    assert DRILL_01.hints[1].text.splitlines()[0] not in out  # locked: title and rule, not the text
    assert 'next: hint 2/4, "Which keys may a query row see?", opens after 2 attempts' in out

    ProgressStore(tmp_path).record_check(recorded("01_todo2_only"), DRILL_01)  # opens "The loop bound"
    assert main(["hint", "01"]) == 0
    out = capsys.readouterr().out
    assert DRILL_01.hints[2].text.splitlines()[0] in out
    assert "next: hint 2/4" in out


def test_an_edit_checked_again_opens_the_hints_its_codes_key_but_no_attempt_tier(tmp_path: Path) -> None:
    """The rule says a hint opens "at once when a check of your edit reports" its code;
    an edit checked again (not a new attempt) used to open nothing."""
    store = ProgressStore(tmp_path)
    mine = blob_id(b"# my edit\n")
    assert store.record_check(recorded("01_passing"), DRILL_01, mine).counted  # attempt 1, no code
    again = store.record_check(recorded("01_todo2_only"), DRILL_01, mine)  # same bytes, reports todo1-open
    assert not again.counted and again.not_counted == NOT_COUNTED_SAME
    assert "todo1-open" in recorded("01_todo2_only").codes
    assert titles(DRILL_01, again.newly_unlocked) == ["The loop bound"]
    assert again.progress.attempts == 1  # "Which keys may a query row see?" opens after 2 attempts: still shut
    assert ProgressStore(tmp_path).unlocked_hints("01") == [2]


def test_the_drill_as_shipped_opens_no_hint_though_it_reports_codes(tmp_path: Path) -> None:
    """Drills 04 and 06 ship with codes that key hints: opening one unedited must not
    hand them out (issue 10), and the rule's words say "a check of your edit"."""
    store = ProgressStore(tmp_path)
    shipped = blob_id(pristine_path(DRILL_01).read_bytes())
    record = store.record_check(recorded("01_todo2_only"), DRILL_01, shipped)  # reports todo1-open
    assert not record.counted and record.not_counted == NOT_COUNTED_SHIPPED and record.newly_unlocked == []
    assert store.unlocked_hints("01") == []
    assert "a check of your edit reports todo1-open" in unlock_rule(DRILL_01.hints[2])
    drill_04 = get_drill("04")
    assert drill_04.shipped is not None and earned_unlocks(drill_04, 0, drill_04.shipped.codes)  # why it matters
