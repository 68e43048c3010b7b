"""No listed slip is ever accepted as right (issue 21, item 8): over many seeded
draws, every slip a question keeps lies outside the question's tolerance, and
typing its number is answered "wrong" with that slip named."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tutor.quiz import build_questions, check_answer
from tutor.quiz.model import load_texts
from tutor.quiz.questions import causal_blocks_question, slip_safe_tolerance, traffic_ratio_question

SEEDS = 2000


def numeric(questions):
    return [q for q in questions if not q.is_choice]


def test_no_slip_is_within_tolerance_of_the_answer_for_any_seed():
    for seed in [None, *range(SEEDS)]:
        for question in numeric(build_questions(seed=seed)):
            answer = float(question.answer)
            assert 0 < question.tolerance <= 0.01, question.id
            for slip in question.slips:
                assert abs(slip.value - answer) > question.tolerance * answer, (seed, question.id, slip.code)
                # and a number that lands on the slip is never within reach of the answer
                assert abs(slip.value - answer) > question.tolerance * (answer + slip.value), (seed, question.id)


@pytest.mark.parametrize("seed", range(0, SEEDS, 50))
def test_typing_every_slip_is_wrong_and_named(seed):
    for question in numeric(build_questions(seed=seed)):
        for slip in question.slips:
            feedback = check_answer(question, repr(slip.value))
            assert feedback.status == "wrong", (seed, question.id, slip.code)
            assert slip.code in feedback.slip_codes, (seed, question.id, slip.code)


def test_the_draws_the_issue_names():
    texts = load_texts()
    # "exactly half" at N = 16384 with 32-row tiles: T = 512, the answer 513/1024
    causal = causal_blocks_question(texts, 16384, 32)
    assert "exactly-half" in {s.code for s in causal.slips}
    assert check_answer(causal, "0.5").status == "wrong"
    assert "exactly-half" in check_answer(causal, "0.5").slip_codes
    assert check_answer(causal, "0.500977").status == "right"
    # N/d for 1 + N/d once N/d >= ~500
    ratio = traffic_ratio_question(texts, 65536, 64, "fp16")
    assert check_answer(ratio, "1024").status == "wrong"
    assert "dropped-the-one" in check_answer(ratio, "1024").slip_codes
    assert check_answer(ratio, "1025").status == "right"


def test_the_tolerance_is_narrowed_only_where_a_slip_is_near():
    assert slip_safe_tolerance(0.01, 100.0, [50.0, 200.0]) == 0.01
    assert slip_safe_tolerance(0.01, 1025.0, [1024.0]) == pytest.approx(1 / 1025 / 2)
    assert slip_safe_tolerance(0.01, 0.5, [0.501]) == pytest.approx(0.001 / 1.002)
    assert float(Fraction(513, 1024)) > 0.5


def test_a_slip_that_equals_the_answer_is_no_slip():
    # fp8: one byte per element, so "forgot the bytes per element" gives the answer itself
    question = traffic_ratio_question(load_texts(), 4096, 128, "fp8")
    assert "forgot-dtype-bytes" not in {s.code for s in question.slips}
    assert question.tolerance == 0.002
