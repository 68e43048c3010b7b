""""Longest N that fits" questions: their answer is an upper bound.

A length above the answer does not fit, however close (4243 for 4242 needs more
bytes than the budget, as the explanation itself says); below the answer the
kind's tolerance stays, so a rounded-down 4.2k is right.
"""

from __future__ import annotations

import math

import pytest

from tutor.quiz import STATED_BUDGETS, build_questions, check_answer
from tutor.quiz.model import load_texts
from tutor.quiz.questions import hbm_fit_question, l2_fit_question


@pytest.fixture(scope="module")
def rtx_l2():
    """72,000,000 bytes of L2 in fp32: N = 4,242 (4,243² × 4 = 72,012,196 bytes)."""
    question = l2_fit_question(load_texts(), STATED_BUDGETS["RTX 4090"], "fp32")
    assert question.answer == 4242 and question.answer_is_upper_bound
    return question


def test_one_token_above_does_not_fit(rtx_l2):
    feedback = check_answer(rtx_l2, "4243")
    assert feedback.status == "wrong"
    assert "N = 4,243 does not fit" in feedback.message
    assert "72,012,196 bytes" in feedback.message and "72,000,000 bytes of the L2" in feedback.message
    assert "S alone" in feedback.message and "The answer is 4,242 tokens" in feedback.message
    assert feedback.relative_error == pytest.approx(1 / 4242)


def test_below_the_kinds_tolerance_stays(rtx_l2):
    for text in ("4242", "4,242 tokens", "4241", "4.2k", "4200"):
        assert check_answer(rtx_l2, text).status == "right", text
    assert check_answer(rtx_l2, "4.1k").status == "wrong"  # 3.3 % below


def test_a_first_try_is_told_it_does_not_fit_but_not_the_answer(rtx_l2):
    feedback = check_answer(rtx_l2, "4.3k", reveal=False)
    assert feedback.status == "wrong" and not feedback.final
    assert "N = 4,300 does not fit" in feedback.message and "73,960,000 bytes" in feedback.message
    assert "4,242" not in feedback.message and "One more try" in feedback.message


def test_a_length_between_two_whole_ones_is_judged_at_the_next(rtx_l2):
    feedback = check_answer(rtx_l2, "4242.5")
    assert feedback.status == "wrong"
    assert "N = 4,243 (the first whole length above 4,242.5) does not fit" in feedback.message


def test_a_length_that_does_not_fit_still_names_its_slip():
    question = l2_fit_question(load_texts(), STATED_BUDGETS["H100"], "fp16")  # 5,000; 50 MiB gives 5,120
    feedback = check_answer(question, "5120")
    assert feedback.status == "wrong" and feedback.slip_codes == ("decimal-binary-units",)
    assert "N = 5,120 does not fit" in feedback.message and "52,428,800 bytes" in feedback.message


def test_the_hbm_question_counts_every_matrix():
    question = hbm_fit_question(load_texts(), STATED_BUDGETS["H200"], 8, 32, "fp16")
    assert question.answer == 16594 and question.answer_is_upper_bound
    feedback = check_answer(question, "16,595")
    assert feedback.status == "wrong"
    assert "the 256 score matrices would need 141,001,740,800 bytes" in feedback.message
    assert "141,000,000,000 bytes of the memory" in feedback.message


@pytest.mark.parametrize("seed", [None, *range(0, 600, 10)])
def test_above_is_wrong_and_the_bytes_said_are_true_for_every_draw(seed):
    for question in build_questions(seed=seed):
        if question.kind not in ("l2-fit", "hbm-fit"):
            assert not question.answer_is_upper_bound and question.fit_limit is None, question.id
            continue
        fit = question.fit_limit
        answer = int(question.answer)
        assert fit is not None and fit.bytes_at(answer) <= fit.budget_bytes < fit.bytes_at(answer + 1)
        above = check_answer(question, str(answer + 1))
        assert above.status == "wrong" and f"{fit.bytes_at(answer + 1):,} bytes" in above.message, question.id
        assert check_answer(question, str(answer)).status == "right"
        below = math.ceil(answer * (1 - question.tolerance))  # the shortest length still within it
        assert check_answer(question, str(below)).status == "right", (question.id, below)
