"""A rounded answer against a slip that rounds to the same digits.

Once a slip narrows a question's tolerance, the right answer rounded to a few
digits can fall outside it, and so close to the slip that the typed digits
cannot tell which was meant.  Each reading carries its precision (half a unit
of the last digit typed), and the checker asks for more digits there instead of
calling the number right or wrong, without naming the slip.
"""

from __future__ import annotations

import pytest

from tutor.quiz import build_questions, check_answer
from tutor.quiz.model import load_texts
from tutor.quiz.questions import naive_bytes_question
from tutor.quiz.units import parse_number


def numeric(questions):
    return [q for q in questions if not q.is_choice]


@pytest.fixture(scope="module")
def naive_12k():
    """N = 12288, d = 96, fp32: 2,434,793,472 bytes; forgetting O's write gives 2,430,074,880."""
    question = naive_bytes_question(load_texts(), 12288, 96, "fp32")
    assert question.answer == 2_434_793_472
    assert {s.code: s.value for s in question.slips}["forgot-o-write"] == 2_430_074_880
    return question


@pytest.mark.parametrize("text,precision", [
    ("2.43 GB", 0.005e9),
    ("2,434,793,472", 0.5),
    ("2434793472 bytes", 0.5),
    ("2.434793472e9", 0.0000000005e9),
    ("2.3 GiB", 0.05 * 2**30),
    ("2.", 0.5),
    (".5", 0.05),
    ("1_000", 0.5),
])
def test_a_reading_carries_half_a_unit_of_its_last_digit(text, precision):
    (reading,) = parse_number(text, "bytes")
    assert reading.precision == pytest.approx(precision, rel=1e-9)


def test_scales_and_percent_carry_their_precision_with_them():
    decimal, binary = parse_number("4.2k", "tokens")
    assert (decimal.precision, binary.precision) == pytest.approx((50, 51.2))
    assert parse_number("53.1%", "fraction")[0].precision == pytest.approx(0.0005)
    assert parse_number("137 GFLOP", "flops")[0].precision == pytest.approx(0.5e9)
    assert parse_number("1.37e11", "flops")[0].precision == pytest.approx(0.005e11)


def test_a_rounded_answer_a_slip_rounds_to_as_well_is_asked_again(naive_12k):
    feedback = check_answer(naive_12k, "2.43 GB")
    assert feedback.status == "invalid" and not feedback.counts
    assert "too coarse to tell the answer from a usual mistake" in feedback.message
    assert "±5,000,000 bytes" in feedback.message and "more digits" in feedback.message
    assert "the exact count in bytes" in feedback.message
    # nothing gives the answer away: no slip, no relative error, no explanation, no answer
    assert feedback.slip is None and feedback.slip_codes == () and feedback.relative_error is None
    assert not feedback.explanation and not feedback.answer_text
    for slip in naive_12k.slips:
        assert slip.message not in feedback.message
    assert "2,434,793,472" not in feedback.message and "write of O" not in feedback.message


def test_more_digits_decide_it(naive_12k):
    for right in ("2.435 GB", "2.4348 GB", "2,434,793,472", "2.27 GiB", "2,434,793,472 bytes"):
        assert check_answer(naive_12k, right).status == "right", right
    slip = check_answer(naive_12k, "2,430,074,880")
    assert slip.status == "wrong" and slip.slip_codes == ("forgot-o-write",)
    assert check_answer(naive_12k, "2.4301 GB").slip_codes == ("forgot-o-write",)


@pytest.mark.parametrize("seed", [None, *range(0, 400, 20)])
def test_a_rounded_answer_is_never_wrong_and_a_rounded_slip_never_right(seed):
    """The answer rounded to 2..7 significant digits, when within the kind's tolerance, is right,
    or too coarse exactly when a slip lies within its precision; a slip rounded likewise is never right."""
    for question in numeric(build_questions(seed=seed)):
        answer = float(question.answer)
        for digits in range(2, 8):
            text = f"{answer:.{digits}e}"
            (reading,) = parse_number(text, question.quantity)
            status = check_answer(question, text).status
            if question.answer_is_upper_bound and reading.value > answer:
                assert status == "wrong", (question.id, text)
                continue
            if abs(reading.value - answer) > question.rounding_tolerance * answer:
                continue  # too few digits for the kind: wrong is fair
            coarse = any(abs(reading.value - s.value) <= reading.precision for s in question.slips)
            assert status == ("invalid" if coarse else "right"), (question.id, text)
            for slip in question.slips:
                assert check_answer(question, f"{slip.value:.{digits}e}").status != "right", (question.id, slip)


def test_the_too_coarse_message_fits_the_quantity():
    questions = {q.kind: q for q in build_questions()}
    l2_fp32 = next(q for q in build_questions(seed=17) if q.kind == "l2-fit")  # 3,535 tokens
    l2 = check_answer(l2_fp32, "3.5k")  # 3,500 or 3,584, and a slip within 50 of 3,500 too
    assert l2.status == "invalid" and "±50 tokens" in l2.message and "the exact length" in l2.message
    causal = questions["causal-blocks"]  # 17/32 = 0.53125; exactly half is 0.5
    assert check_answer(causal, "0.5").status == "wrong"  # 0.03 off: beyond the kind's tolerance


def test_a_sitting_asks_the_same_question_again_and_records_nothing():
    from tutor.quiz import QuizSession

    questions = build_questions()
    session = QuizSession(questions, None)
    assert session.answer(f"{int(questions[0].answer)}").right and session.answer(f"{int(questions[1].answer)}").right
    assert session.current().id == "naive-bytes:N=16384,d=128,fp16"
    feedback = session.answer("2.16 GB")  # forgetting O's write (2,160,066,560) is 2.16 GB too
    assert feedback.status == "invalid" and session.current().id == "naive-bytes:N=16384,d=128,fp16"
    assert session.score.answered == 2 and len(session.answers) == 2
    assert session.answer("2,164,260,864 bytes").right


def test_the_answer_itself_is_right_whatever_its_digits_could_round_from() -> None:
    """"9 MiB" is 9,437,184 bytes exactly, the naive 1k answer, though forgetting O's write (8.75 MiB)
    also rounds to 9 MiB at one digit: a student who typed the answer itself is not asked again."""
    question = next(q for q in build_questions() if q.id == "naive-bytes:N=1024,d=128,fp16")
    assert check_answer(question, "9 MiB").status == "right"
    assert check_answer(question, "9,437,184").status == "right"
