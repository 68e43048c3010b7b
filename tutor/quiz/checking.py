"""Checking one typed answer against one question.

A number is right when its relative error is within the question's
tolerance.  A wrong number is compared with the number each of the
question's slips gives (mistake fingerprinting: the slips are computed, not
guessed); every slip it lands on is named.  A wrong number on no slip is told
whether it is within 10x of the answer.  Text that is not an answer at all
comes back as ``invalid`` with a message, so the caller can ask again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from tutor.quiz.model import Question, QuizTexts, load_texts
from tutor.quiz.units import AnswerError, Reading, format_quantity, grouped, parse_number

AnswerStatus = Literal["right", "wrong", "invalid"]
RIGHT: AnswerStatus = "right"
WRONG: AnswerStatus = "wrong"
INVALID: AnswerStatus = "invalid"


@dataclass(frozen=True)
class AnswerFeedback:
    """What the tutor says about one answer.

    ``status`` is ``right``, ``wrong`` or ``invalid`` (not an answer: ask again;
    nothing is recorded).  ``message`` is the verdict in one or two sentences;
    ``relative_error`` is signed ((given − answer) / answer; None for choices and
    invalid input); ``explanation`` is the derivation (empty when invalid);
    ``slip`` says which likely mistake the answer matches (None when it matches
    none) and ``slip_codes`` names them for the hint engine.  ``reading`` is how
    the answer was read (``2.16 GB = 2,160,000,000 bytes``).
    """

    question_id: str
    status: AnswerStatus
    message: str
    relative_error: float | None = None
    explanation: str = ""
    slip: str | None = None
    slip_codes: tuple[str, ...] = ()
    reading: str = ""
    answer_text: str = ""
    final: bool = True  # False: a first wrong answer, the answer not shown; the question is asked again

    @property
    def right(self) -> bool:
        return self.status == RIGHT

    @property
    def counts(self) -> bool:
        """True for a real answer (right or wrong), False for input to ask again about."""
        return self.status != INVALID


def check_answer(question: Question, text: str, texts: QuizTexts | None = None,
                 reveal: bool = True) -> AnswerFeedback:
    """Check ``text`` as an answer to ``question``; never raises for bad input.
    With ``reveal=False`` a wrong answer is told how far off it is and which slip
    it matches, but not the answer nor the explanation (``final`` is False)."""
    texts = texts or load_texts()
    if question.is_choice:
        feedback = _check_choice(question, text, texts, reveal)
    else:
        feedback = _check_number(question, text, texts, reveal)
    if reveal or feedback.status != WRONG:
        return feedback
    return replace(feedback, explanation="", answer_text="", final=False)


def _check_number(question: Question, text: str, texts: QuizTexts, reveal: bool = True) -> AnswerFeedback:
    try:
        readings = parse_number(text, question.quantity)
    except AnswerError as exc:
        return AnswerFeedback(question.id, INVALID, str(exc))
    answer = float(question.answer)
    reading = min(readings, key=lambda r: abs(r.value - answer))
    relative_error = (reading.value - answer) / answer
    common = AnswerFeedback(question.id, WRONG, "", relative_error=relative_error, explanation=question.explanation,
                            reading=reading.how, answer_text=question.answer_text)
    if abs(relative_error) <= question.tolerance:
        return replace(common, status=RIGHT, message=_right_message(texts, question, reading, relative_error))
    codes, slip = _match_slips(question, reading.value)
    if slip is None:
        ratio = 1 + relative_error  # given / answer
        slip_free = texts.messages["close" if 0.1 <= ratio <= 10 else "far"]
        message = f"{_wrong_message(texts, question, reading, relative_error, reveal)} {slip_free}"
    else:
        message = _wrong_message(texts, question, reading, relative_error, reveal)
    return replace(common, message=message, slip=slip, slip_codes=codes)


def _shown(question: Question, reading: Reading) -> str:
    """The answer as read: the conversion when there was one, else the number with its unit."""
    return reading.how if "=" in reading.how else format_quantity(reading.value, question.quantity)


def _right_message(texts: QuizTexts, question: Question, reading: Reading, relative_error: float) -> str:
    off = "" if relative_error == 0 else f" ({_percent(relative_error)} off the exact value)"
    return f"{texts.messages['right']} {_shown(question, reading)}{off}."


def _wrong_message(texts: QuizTexts, question: Question, reading: Reading, relative_error: float,
                   reveal: bool = True) -> str:
    given = _shown(question, reading)
    direction = "above" if relative_error > 0 else "below"
    ratio = 1 + relative_error
    if 0 < ratio and not 0.1 < ratio < 10:
        factor = max(ratio, 1 / ratio)
        distance = f"{grouped(factor)}x {direction}" if factor >= 100 else f"{factor:.3g}x {direction}"
    else:
        distance = f"{_percent(relative_error)} {direction}"
    if not reveal:
        return texts.messages["wrong_first"].format(given=given, distance=distance)
    return texts.messages["wrong"].format(given=given, distance=distance, answer=question.answer_text)


def _percent(relative_error: float) -> str:
    return f"{abs(relative_error) * 100:.3g}%"


def _match_slips(question: Question, value: float) -> tuple[tuple[str, ...], str | None]:
    """Every slip whose number the answer lands on (within the question's tolerance)."""
    matched = [s for s in question.slips if abs(value - s.value) <= question.tolerance * s.value]
    codes = tuple(dict.fromkeys(s.code for s in matched))
    messages = list(dict.fromkeys(s.message for s in matched))
    return codes, (" ".join(messages) if messages else None)


def _check_choice(question: Question, text: str, texts: QuizTexts, reveal: bool = True) -> AnswerFeedback:
    keys = [o.key for o in question.options]
    key = text.strip().strip("()").rstrip(").").strip().lower()
    if key not in keys:
        listed = ", ".join(keys[:-1]) + f" or {keys[-1]}"
        shown = f"{text.strip()!r} is not one of the options. " if text.strip() else ""
        return AnswerFeedback(question.id, INVALID, f"{shown}Answer with the letter of one option: {listed}.")
    common = AnswerFeedback(question.id, WRONG, "", explanation=question.explanation, reading=f"({key})",
                            answer_text=question.answer_text)
    if key == question.answer:
        return replace(common, status=RIGHT, message=texts.messages["right"])
    option = next(o for o in question.options if o.key == key)
    if reveal:
        message = texts.messages["choice_wrong"].format(answer=question.answer)
    else:
        message = texts.messages["choice_wrong_first"].format(given=key)
    codes = (option.slip,) if option.slip else ()
    return replace(common, message=message, slip=option.why or None, slip_codes=codes)
