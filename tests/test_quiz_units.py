"""The answer parser on a table of good and bad inputs."""

from __future__ import annotations

import pytest

from tutor.quiz.units import AnswerError, format_bytes, format_quantity, parse_number

GOOD = [
    # text, quantity, the value (or values, for an ambiguous k/M scale)
    ("129", "ratio", [129]),
    ("129x", "ratio", [129]),
    ("129 X", "ratio", [129]),
    ("129×", "ratio", [129]),
    ("129 times", "ratio", [129]),
    ("1.29e2", "ratio", [129]),
    ("~129", "ratio", [129]),
    ("2.16 GB", "bytes", [2.16e9]),
    ("2.16gb", "bytes", [2.16e9]),
    ("2,164,260,864 bytes", "bytes", [2_164_260_864]),
    ("2_164_260_864", "bytes", [2_164_260_864]),
    ("2.0 GiB", "bytes", [2 * 2**30]),
    ("16 MiB", "bytes", [16 * 2**20]),
    ("16.8 MB", "bytes", [16.8e6]),
    ("1 KiB", "bytes", [1024]),
    ("1 kB", "bytes", [1000]),
    ("1 KB", "bytes", [1000]),
    ("3 TB", "bytes", [3e12]),
    ("1 TiB", "bytes", [2**40]),
    ("512 B", "bytes", [512]),
    ("1 byte", "bytes", [1]),
    ("16M", "bytes", [16e6, 16 * 2**20]),
    ("4k", "tokens", [4000, 4096]),
    ("4K", "tokens", [4000, 4096]),
    ("16.6k", "tokens", [16600, 16.6 * 1024]),
    ("5000", "tokens", [5000]),
    ("5,000 tokens", "tokens", [5000]),
    ("1.37e11", "flops", [1.37e11]),
    ("137 GFLOP", "flops", [137e9]),
    ("137 gflops", "flops", [137e9]),
    ("137G", "flops", [137e9]),
    ("2 TFLOP", "flops", [2e12]),
    ("1.37E+11 FLOPs", "flops", [1.37e11]),
    ("63.5", "flops-per-byte", [63.5]),
    ("63.5 FLOP/B", "flops-per-byte", [63.5]),
    ("64 flops per byte", "flops-per-byte", [64]),
    ("0.53125", "fraction", [0.53125]),
    (".5", "fraction", [0.5]),
    ("53.1%", "fraction", [0.531]),
    ("0", "bytes", [0]),
    ("-0", "ratio", [0]),
    ("+129", "ratio", [129]),
]


@pytest.mark.parametrize("text,quantity,values", GOOD)
def test_good_answers(text, quantity, values):
    readings = parse_number(text, quantity)
    assert [r.value for r in readings] == pytest.approx(values, rel=1e-12)
    assert all(r.how for r in readings)


def test_an_ambiguous_scale_says_which_reading_is_which():
    decimal, binary = parse_number("4k", "tokens")
    assert "4,000" in decimal.how and "k = 1,000" in decimal.how
    assert "4,096" in binary.how and "k = 1,024" in binary.how


BAD = [
    # text, quantity, a phrase the message must contain
    ("", "bytes", "Type an answer"),
    ("   ", "ratio", "Type an answer"),
    ("abc", "ratio", "not a number"),
    ("nan", "ratio", "not a number"),
    ("inf", "bytes", "not a number"),
    ("e5", "ratio", "not a number"),
    ("1e999", "bytes", "too large"),
    ("1e308 TB", "bytes", "too large"),
    ("-5 GB", "bytes", "cannot be negative"),
    ("-129", "ratio", "cannot be negative"),
    ("−3", "tokens", "cannot be negative"),
    ("2,16", "ratio", "dot for decimals"),
    ("2,1640", "bytes", "dot for decimals"),
    ("1 2", "ratio", "not one number"),
    ("1.2.3", "ratio", "not one number"),
    ("5 GB", "tokens", "not a number of bytes"),
    ("129 GB", "ratio", "not a number of bytes"),
    ("129 apples", "ratio", "no unit"),
    ("12 parsecs", "flops", "not a unit"),
    ("4k", "ratio", "no unit"),
    ("64 GB", "flops-per-byte", "not a number of bytes"),
    ("53 x", "fraction", "not a unit"),
    ("2 GFLOP", "bytes", "not a unit"),
]


@pytest.mark.parametrize("text,quantity,phrase", BAD)
def test_bad_answers_get_a_clear_message(text, quantity, phrase):
    with pytest.raises(AnswerError) as caught:
        parse_number(text, quantity)
    assert phrase in str(caught.value)


def test_an_unknown_quantity_is_a_programming_error_not_an_answer_error():
    with pytest.raises(ValueError) as caught:
        parse_number("1", "parsecs")
    assert not isinstance(caught.value, AnswerError)


@pytest.mark.parametrize("value,text", [
    (2_164_260_864, "2,164,260,864 bytes (2.16 GB, 2.02 GiB)"),
    (16 * 2**20, "16,777,216 bytes (16.8 MB, 16 MiB)"),
    (9_437_184, "9,437,184 bytes (9.44 MB, 9 MiB)"),
    (50_000_000, "50,000,000 bytes (50 MB, 47.7 MiB)"),
    (512, "512 bytes"),
])
def test_format_bytes(value, text):
    assert format_bytes(value) == text


def test_every_formatted_quantity_reads_back_as_itself():
    for value, quantity in [(2_164_260_864, "bytes"), (5000, "tokens"), (129, "ratio"),
                            (137_438_953_472, "flops"), (64, "flops-per-byte"), (0.53125, "fraction")]:
        shown = format_quantity(value, quantity)
        first = shown.split(" (")[0]  # the exact part, before any conversion in brackets
        assert parse_number(first, quantity)[0].value == pytest.approx(value, rel=1e-6)
