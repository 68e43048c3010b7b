"""Arithmetic as an answer: ``4*16384^2*96``, ``257/512``, ``2*(4096*64 + 4096^2) bytes``.

Evaluated exactly and safely (the ast of numbers, + - * / ** ^ and parentheses,
nothing else), read back with its value, and exact: its precision is ±0.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from tutor.quiz import build_questions, check_answer
from tutor.quiz.units import AnswerError, parse_number

GOOD = [
    # text, quantity, value, how it is read back
    ("4*16384^2*96", "flops", 103_079_215_104, "4*16384^2*96 = 103,079,215,104"),
    ("4*16384^2*96 FLOP", "flops", 103_079_215_104, "4*16384^2*96 = 103,079,215,104 FLOP"),
    ("4 * 16384**2 * 96 GFLOP", "flops", 103_079_215_104e9, "4 * 16384**2 * 96 GFLOP = 1.03079e+20 FLOP"),
    ("257/512", "fraction", 257 / 512, "257/512 = 0.501953125"),
    ("2*(4096*64 + 4096^2)", "bytes", 2 * (4096 * 64 + 4096**2), "2*(4096*64 + 4096^2) = 34,078,720"),
    ("2*(4096*64 + 4096^2) bytes", "bytes", 34_078_720, "2*(4096*64 + 4096^2) = 34,078,720 bytes"),
    ("(1+2) GB", "bytes", 3e9, "(1+2) GB = 3,000,000,000 bytes (GB = 10^9 bytes)"),
    ("2^10 KiB", "bytes", 2**20, "2^10 KiB = 1,048,576 bytes (KiB = 2^10 bytes)"),
    ("1 + 16384/128", "ratio", 129, "1 + 16384/128 = 129"),
    ("(16384/128 + 1)x", "ratio", 129, "(16384/128 + 1) = 129"),
    ("17/32 %", "fraction", 17 / 3200, None),
    ("2,048*2", "bytes", 4096, "2,048*2 = 4,096"),
    ("0.1*3", "ratio", 0.3, "0.1*3 = 0.3"),  # exact: 3/10, not 0.30000000000000004
    ("-(-2)*3", "ratio", 6, None),
    ("~ 2*3", "ratio", 6, None),
    ("2^-1", "fraction", 0.5, None),
    ("8^(1/3)", "ratio", 2, None),
]


@pytest.mark.parametrize("text,quantity,value,how", GOOD)
def test_an_expression_is_read_exactly(text, quantity, value, how):
    (reading,) = parse_number(text, quantity)
    assert reading.value == pytest.approx(value, rel=1e-12)
    assert reading.precision == 0
    if how is not None:
        assert reading.how == how


def test_an_expression_with_a_bare_k_is_read_both_ways():
    decimal, binary = parse_number("2*2k", "tokens")
    assert (decimal.value, binary.value) == (4000, 4096) and decimal.precision == binary.precision == 0


BAD = [
    # text, a phrase the message must contain
    ("2*x", "not a number or an expression"),
    ("abs(3)", "not a number"),
    ("__import__('os')", "not a number"),
    ("(2).real", "not a number or an expression"),
    ("2*(3", "not a number or an expression"),
    ("2//3", "not a number or an expression"),
    ("2**", "not a number or an expression"),
    ("()", "not a number or an expression"),
    ("(1,2)", "commas only group thousands"),
    ("2,16*3", "commas only group thousands"),
    ("1/0", "divides by zero"),
    ("0^-1", "divides by zero"),
    ("9^9^9", "too large"),
    ("2**99999999", "too large"),
    ("10^400", "too large"),
    ("1e308*10", "too large"),
    ("1e999*2", "too large"),
    ("2-3", "cannot be negative"),
    ("-2*3", "cannot be negative"),
    ("(-8)^0.5", "not a number or an expression"),
    ("1+2 GB", "put the sum in parentheses"),
    ("1+2k", "put the sum in parentheses"),
    ("2*3 apples", "no unit"),
    ("(" * 300 + "1" + ")" * 300, "not a number or an expression"),
]


@pytest.mark.parametrize("text,phrase", BAD)
def test_anything_else_is_refused_with_a_reason(text, phrase):
    with pytest.raises(AnswerError) as caught:
        parse_number(text, "ratio" if "GB" not in text and "k" not in text else "bytes")
    assert phrase in str(caught.value)


def test_an_expression_answers_a_question():
    questions = {q.kind: q for q in reversed(build_questions())}  # of each kind the first: naive bytes at N = 1024
    flops = check_answer(questions["forward-flops"], "4*16384^2*128 FLOP")
    assert flops.status == "right" and flops.reading == "4*16384^2*128 = 137,438,953,472 FLOP"
    assert "4*16384^2*128 = 137,438,953,472 FLOP" in flops.message
    assert check_answer(questions["naive-bytes"], "(4*1024*128 + 4*1024^2)*2").status == "right"
    assert check_answer(questions["causal-blocks"], "17/32").status == "right"
    # exact, so never too coarse: the slip's own arithmetic is a slip (forgetting O's write at N = 1024)
    naive = questions["naive-bytes"]
    assert naive.id == "naive-bytes:N=1024,d=128,fp16"
    wrong = check_answer(naive, "(3*1024*128 + 4*1024^2)*2 bytes")
    assert wrong.status == "wrong" and "forgot-o-write" in wrong.slip_codes
    assert check_answer(questions["traffic-ratio"], "1 + 16384/128").status == "right"
    assert Fraction(questions["traffic-ratio"].answer) == 1 + Fraction(16384, 128)
