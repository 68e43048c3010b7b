"""The example numbers the quiz shows (format errors, the CLI's intro, the app's input)
are no question's answer: they once were the default set's own answers (2.16 GB,
129x, 5000, 1.37e11, 63.5, 0.53)."""

from __future__ import annotations

import pytest

from tutor.quiz import build_questions
from tutor.quiz.units import (
    EXAMPLE_TEXTS,
    EXAMPLES,
    QUANTITIES,
    SHORT_EXAMPLES,
    AnswerError,
    example_answers,
    parse_number,
)

SEEDS = [None, *range(21), *range(30, 1000, 10)]
OLD_EXAMPLES = ("2.16", "2,164,260,864", "2.0 GiB", "129", "5000", "4k", "1.37e11", "137 GFLOP", "63.5", "0.53",
                "53%")


@pytest.fixture(scope="module")
def answers() -> dict[str, list[tuple[str, float]]]:
    """Every numeric answer of the default set and of many seeds, by quantity."""
    by_quantity: dict[str, list[tuple[str, float]]] = {q: [] for q in QUANTITIES}
    for seed in SEEDS:
        for question in build_questions(seed=seed):
            if not question.is_choice:
                by_quantity[question.quantity].append((f"{seed}: {question.id}", float(question.answer)))
    return by_quantity


def example_values():
    """(text, quantity, value) of every example, read as each quantity it can be an answer of."""
    texts = {text for examples in EXAMPLES.values() for text in examples} | set(EXAMPLE_TEXTS)
    for text in sorted(texts):
        for quantity in QUANTITIES:
            try:
                readings = parse_number(text, quantity)
            except AnswerError:
                continue
            for reading in readings:
                yield text, quantity, reading.value


def test_every_example_reads_as_its_quantity():
    for quantity, examples in EXAMPLES.items():
        for text in examples:
            assert parse_number(text, quantity), text
    assert len(list(example_values())) > len(EXAMPLES)


def test_no_example_is_within_1_percent_of_any_answer(answers):
    for text, quantity, value in example_values():
        for where, answer in answers[quantity]:
            assert abs(value - answer) > 0.01 * answer, f"{text!r} is the answer of {where}"


def test_the_messages_the_intro_and_the_input_show_only_these_examples():
    from tutor.app.screens.quiz import PLACEHOLDER
    from tutor.cli.quiz import intro_line

    messages = []
    for quantity in QUANTITIES:
        for bad in ("", "abc", "2,16", "1 2", "12 parsecs", "2*x"):
            with pytest.raises(AnswerError) as caught:
                parse_number(bad, quantity)
            messages.append(str(caught.value))
        assert example_answers(quantity) in messages[-5]
    shown = [*messages, intro_line(), PLACEHOLDER]
    for text in shown:
        for old in OLD_EXAMPLES:
            assert old not in text, (old, text)
    for example in SHORT_EXAMPLES:
        assert example in intro_line() and example in PLACEHOLDER
