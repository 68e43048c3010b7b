"""No listed slip is ever accepted as right (issue 21, item 8): over many seeded
draws, every slip a question keeps lies outside the question's tolerance, and
typing its number in full is answered "wrong" with that slip named (typed with
fewer digits it may be too coarse to judge, never right)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from tutor.quiz import build_questions, check_answer
from tutor.quiz.model import load_texts
from tutor.quiz.questions import (
    DTYPE_BYTES,
    backward_bytes_question,
    causal_blocks_question,
    decode_bytes_question,
    slip_safe_tolerance,
    tiled_traffic_question,
    traffic_ratio_question,
)

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


def in_full(value: float) -> str:
    """A slip's number with every digit a float holds: its precision cannot reach the answer."""
    return f"{value:.15e}"


@pytest.mark.parametrize("seed", range(0, SEEDS, 50))
def test_typing_every_slip_is_wrong_and_named(seed):
    for question in numeric(build_questions(seed=seed)):
        for slip in question.slips:
            feedback = check_answer(question, in_full(slip.value))
            assert feedback.status == "wrong", (seed, question.id, slip.code)
            assert slip.code in feedback.slip_codes, (seed, question.id, slip.code)
            # fewer digits: wrong, or too coarse to tell from the answer; never right - unless those digits
            # are the answer itself ("6e+03" for 6,000 tokens), which is right whatever it was rounded from
            for digits in range(1, 8):
                typed = f"{slip.value:.{digits}g}"
                if float(typed) == float(question.answer):
                    continue
                assert check_answer(question, typed).status != "right", (seed, question.id, slip.code, digits)


def test_the_draws_the_issue_names():
    texts = load_texts()
    # "exactly half" at N = 16384 with 32-row tiles: T = 512, the answer 513/1024
    causal = causal_blocks_question(texts, 16384, 32)
    assert "exactly-half" in {s.code for s in causal.slips}
    for half in ("0.5000", "1/2"):
        assert check_answer(causal, half).status == "wrong"
        assert "exactly-half" in check_answer(causal, half).slip_codes
    assert check_answer(causal, "0.5").status == "invalid"  # 513/1024 = 0.500977 rounds to 0.5 too
    assert check_answer(causal, "0.500977").status == "right"
    assert check_answer(causal, "513/1024").status == "right"
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


# --- the slips a blind tester's answers were accepted on (their terms are small) -------------


def naive(n: int, d: int, dtype: str):
    from tutor.quiz.questions import naive_bytes_question

    return naive_bytes_question(load_texts(), n, d, dtype)


@pytest.mark.parametrize("n,d,dtype", [(12288, 96, "fp32"), (16384, 128, "fp16"), (12288, 128, "bf16")])
def test_naive_bytes_with_the_write_of_o_forgotten_is_a_slip(n, d, dtype):
    question = naive(n, d, dtype)
    b = DTYPE_BYTES[dtype]
    forgot_o = (3 * n * d + 4 * n * n) * b
    assert abs(forgot_o - question.answer) < 0.01 * question.answer  # inside the kind's 1 %: accepted before
    feedback = check_answer(question, f"{forgot_o:,}")
    assert feedback.status == "wrong" and feedback.slip_codes == ("forgot-o-write",)
    assert "write of O" in feedback.slip


def test_tiled_traffic_with_q_and_o_forgotten_and_backward_bytes_without_l_are_slips():
    texts = load_texts()
    for n, d, dtype, rows in [(16384, 128, "fp16", 128), (65536, 128, "fp8", 32), (16384, 96, "fp32", 32)]:
        b = DTYPE_BYTES[dtype]
        tiled = tiled_traffic_question(texts, n, d, dtype, rows)
        feedback = check_answer(tiled, f"{int(tiled.answer) - 2 * n * d * b:,} bytes")
        assert feedback.status == "wrong" and "forgot-q-and-o" in feedback.slip_codes, tiled.id
        backward = backward_bytes_question(texts, n, d, dtype)
        feedback = check_answer(backward, f"{5 * n * d * b:,} bytes")
        # (in fp8, 5·N·d is also within reach of the elements count 5·N·d + N: both are named)
        assert feedback.status == "wrong" and "forgot-lse" in feedback.slip_codes, backward.id
        assert "log-sum-exp" in feedback.slip


BYTE_KINDS = {"naive-bytes", "fused-bytes", "tiled-traffic", "backward-bytes", "decode-bytes", "kv-cache",
              "packed-step-bytes", "unpacked-step-bytes"}


def test_every_byte_question_knows_bits_and_the_other_element_sizes():
    """×8 (bits), and the count redone with 2- or 4-byte elements where the dtype's size is another."""
    seen = set()
    for seed in [None, *range(60)]:
        for question in numeric(build_questions(seed=seed)):
            codes = {s.code: [] for s in question.slips}
            for slip in question.slips:
                codes[slip.code].append(slip.value)
            if question.quantity != "bytes":
                assert "bits-not-bytes" not in codes and "wrong-dtype-size" not in codes
                continue
            assert question.kind in BYTE_KINDS
            seen.add(question.kind)
            assert codes["bits-not-bytes"] == [question.answer * 8], question.id
            b = question.parameters["b"]
            assert len(codes["wrong-dtype-size"]) == len({2, 4} - {b}), question.id
            for value in codes["wrong-dtype-size"]:
                feedback = check_answer(question, f"{value:.15e}")
                assert feedback.status == "wrong" and "wrong-dtype-size" in feedback.slip_codes, question.id
            feedback = check_answer(question, f"{question.answer * 8:.15e}")
            assert feedback.status == "wrong" and "bits-not-bytes" in feedback.slip_codes
    assert seen == BYTE_KINDS


def test_the_other_element_size_is_recomputed_not_scaled():
    """The backward's L stays fp32 and a tiled kernel's rows follow the element size: the count is
    redone with the other size, not the answer scaled by it."""
    texts = load_texts()
    backward = backward_bytes_question(texts, 4096, 128, "fp16")
    assert [s.value for s in backward.slips if s.code == "wrong-dtype-size"] == [5 * 4096 * 128 * 4 + 4 * 4096]
    tiled = tiled_traffic_question(texts, 4096, 128, "fp16", 64)  # M = 4·128·2·64 = 64 KiB: 32 fp32 rows
    fp32 = 2 * 4096 * 128 * 4 + (4096 // 32) * 2 * 4096 * 128 * 4
    assert [s.value for s in tiled.slips if s.code == "wrong-dtype-size"] == [fp32]


def test_a_number_on_two_slips_names_both():
    """fp8 with 32 query heads on 8 K/V heads: one K/V head per query head (4x) is also the count
    with 4-byte elements (4x); 16 on 2 heads: 8x is also bits for bytes."""
    texts = load_texts()
    feedback = check_answer(decode_bytes_question(texts, 32, 8, 128, "fp8"), "8192 bytes")
    assert feedback.status == "wrong" and set(feedback.slip_codes) == {"used-query-heads", "wrong-dtype-size"}
    feedback = check_answer(decode_bytes_question(texts, 16, 2, 128, "fp8"), "4 KiB")
    assert feedback.status == "wrong" and set(feedback.slip_codes) == {"used-query-heads", "bits-not-bytes"}
    assert "bits" in feedback.slip and "query head" in feedback.slip
