"""Checking one typed answer against one question.

A number is judged at the digits it was typed with (each reading carries its
precision, :class:`tutor.quiz.units.Reading`):

* it *agrees* with the answer when it is within the question's tolerance of
  it, or when the answer rounds to it at the typed digits and it is within the
  kind's own tolerance (``2.02 GiB`` for 2,164,260,864 bytes: the tolerance
  was narrowed for a slip 0.2% away, but that slip does not round to 2.02 GiB);
* a number that agrees is right, unless a slip rounds to the same digits as
  well (``2.16 GB`` when forgetting O's write gives 2,160,066,560): then it is
  ``invalid``, neither right nor wrong, and the student is asked for more
  digits, without naming the slip (that would give the answer away);
* for a "longest N that fits" question every number above the answer is wrong:
  it does not fit (the message says how many bytes it would need);
* any other number is wrong.  A wrong number is compared with the number each
  of the question's slips gives (mistake fingerprinting: the slips are
  computed, not guessed); every slip it lands on is named.  A wrong number on
  no slip is told whether it is within 10x of the answer.

Text that is not an answer at all comes back as ``invalid`` with a message, so
the caller can ask again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from tutor.quiz.model import FitLimit, Question, QuizTexts, load_texts
from tutor.quiz.units import AnswerError, Reading, format_quantity, grouped, parse_number

AnswerStatus = Literal["right", "wrong", "invalid"]
RIGHT: AnswerStatus = "right"
WRONG: AnswerStatus = "wrong"
INVALID: AnswerStatus = "invalid"


@dataclass(frozen=True)
class AnswerFeedback:
    """What the tutor says about one answer.

    ``status`` is ``right``, ``wrong`` or ``invalid`` (not an answer, or one
    too coarse to judge: ask again; nothing is recorded).  ``message`` is the
    verdict in one or two sentences; ``relative_error`` is signed ((given −
    answer) / answer; None for choices and invalid input); ``explanation`` is
    the derivation (empty when invalid); ``slip`` says which likely mistake the
    answer matches (None when it matches none) and ``slip_codes`` names them
    for the hint engine.  ``reading`` is how the answer was read
    (``3.5 GB = 3,500,000,000 bytes``).
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


# --- numbers -------------------------------------------------------------------------------

Verdict = Literal["right", "too-coarse", "does-not-fit", "wrong"]
_PREFERRED: dict[Verdict, int] = {"right": 0, "too-coarse": 1, "wrong": 2, "does-not-fit": 3}
"""Which reading of an ambiguous number (a bare k) is judged: the first verdict here, then the closer reading."""


def _judge(question: Question, reading: Reading) -> Verdict:
    """What one reading of a number is, before any words (see the module's docstring)."""
    answer, value, precision = float(question.answer), reading.value, reading.precision
    if question.fit_limit is not None and value > answer:
        return "does-not-fit"
    off = abs(value - answer)
    if off <= 1e-12 * answer:
        return "right"  # the answer itself ("9 MiB" for 9,437,184 bytes), whatever else its digits could round from
    agrees = off <= question.tolerance * answer or (
        off <= precision and off <= question.rounding_tolerance * answer)
    if not agrees:
        return "wrong"
    if any(abs(value - slip.value) <= precision for slip in question.slips):
        return "too-coarse"
    return "right"


def _check_number(question: Question, text: str, texts: QuizTexts, reveal: bool = True) -> AnswerFeedback:
    try:
        readings = parse_number(text, question.quantity)
    except AnswerError as exc:
        return AnswerFeedback(question.id, INVALID, str(exc))
    answer = float(question.answer)
    # of two readings (a bare k: 1,000 or 1,024) the one that agrees with the answer, else the closer one
    # (a length that does not fit last: "4.9k" for 5,000 is 4,900, not 5,017.6)
    verdict, reading = min(((_judge(question, r), r) for r in readings),
                           key=lambda vr: (_PREFERRED[vr[0]], abs(vr[1].value - answer)))
    if verdict == "too-coarse":
        return AnswerFeedback(question.id, INVALID, _too_coarse_message(texts, question, text, reading),
                              reading=reading.how)
    relative_error = (reading.value - answer) / answer
    common = AnswerFeedback(question.id, WRONG, "", relative_error=relative_error, explanation=question.explanation,
                            reading=reading.how, answer_text=question.answer_text)
    if verdict == "right":
        return replace(common, status=RIGHT, message=_right_message(texts, question, reading, relative_error))
    codes, slip = _match_slips(question, reading)
    if verdict == "does-not-fit":
        assert question.fit_limit is not None
        message = _does_not_fit_message(texts, question, question.fit_limit, reading, reveal)
    elif slip is None:
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


def _does_not_fit_message(texts: QuizTexts, question: Question, fit: FitLimit, reading: Reading,
                          reveal: bool) -> str:
    """A length above the answer of a "longest N that fits" question: the bytes it would need."""
    n = math.ceil(reading.value)  # the first whole length at or above the one given: above the answer
    if n == reading.value:
        length = texts.messages["length"].format(n=n)
    else:
        length = texts.messages["next_whole_length"].format(n=n, given=f"{reading.value:,.6g}")
    words = texts.messages["does_not_fit" if reveal else "does_not_fit_first"]
    return words.format(length=length, what=fit.what, needed=fit.bytes_at(n), budget=fit.budget_bytes,
                        where=fit.where, answer=question.answer_text)


_UNITS = {"bytes": "bytes", "tokens": "tokens", "flops": "FLOP", "flops-per-byte": "FLOP/byte"}


def _too_coarse_message(texts: QuizTexts, question: Question, text: str, reading: Reading) -> str:
    """Asks for more digits; names neither the slip nor the answer."""
    half = reading.precision
    precision = grouped(half) if half >= 1 else f"{half:.3g}"
    unit = _UNITS.get(question.quantity, "")
    return texts.messages["too_coarse"].format(
        given=repr(text.strip()), precision=f"{precision} {unit}".strip(),
        more=texts.messages[f"more_digits_{question.quantity}"])


def _percent(relative_error: float) -> str:
    return f"{abs(relative_error) * 100:.3g}%"


def _match_slips(question: Question, reading: Reading) -> tuple[tuple[str, ...], str | None]:
    """Every slip the answer lands on: within the question's tolerance of the slip's number, or
    the slip rounds to the digits typed (and is within the kind's own tolerance of them)."""
    value, precision = reading.value, reading.precision
    matched = [s for s in question.slips
               if abs(value - s.value) <= max(question.tolerance * s.value,
                                              min(precision, question.rounding_tolerance * s.value))]
    codes = tuple(dict.fromkeys(s.code for s in matched))
    messages = list(dict.fromkeys(s.message for s in matched))
    return codes, (" ".join(messages) if messages else None)


# --- choices -------------------------------------------------------------------------------


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
