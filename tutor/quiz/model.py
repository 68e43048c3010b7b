"""The quiz's question model: what a question, its options and its slips are, and
the parsed quiz data file their words come from.

The generators that draw questions with parameters live in
:mod:`tutor.quiz.questions`; checking an answer in :mod:`tutor.quiz.checking`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from tutor.paths import content_root
from tutor.quiz.units import Quantity, format_quantity

DRILL_ID = "03"  # the paper drill this quiz checks
QUIZ_FILE = "03_flash_math.quiz.toml"

QuestionQuantity = Quantity | Literal["choice"]
"""What a question's answer is: a number of one of the units' quantities, or an option key."""

NumericKind = Literal[
    "naive-bytes", "fused-bytes", "traffic-ratio", "forward-flops", "naive-intensity", "intensity-limit",
    "l2-fit", "hbm-fit", "causal-blocks", "backward-flops", "backward-bytes", "decode-bytes",
    "decode-intensity", "kv-cache", "gqa-saving", "window-blocks", "tiled-traffic", "sparse-flops",
    "packed-step-bytes", "unpacked-step-bytes",
]
"""The numeric questions: one generator in :mod:`tutor.quiz.questions` and one ``[kinds.NAME]``
table of words in the quiz file each."""
ChoiceKind = Literal["why-fusing", "causal-effect", "lse-saves", "decode-bound", "dq-own-pass"]
"""The multiple-choice questions: one ``[choices.NAME]`` table in the quiz file each."""
QuestionKind = NumericKind | ChoiceKind
NUMERIC_KINDS: tuple[NumericKind, ...] = get_args(NumericKind)
CHOICE_KINDS: tuple[ChoiceKind, ...] = get_args(ChoiceKind)


@dataclass(frozen=True)
class Slip:
    """A likely mistake: ``value`` is what it gives, ``message`` what to tell a student who lands on it."""

    code: str
    value: float
    message: str


@dataclass(frozen=True)
class Option:
    """One choice of a multiple-choice question; a wrong one names its ``slip`` and says ``why``."""

    key: str
    text: str
    slip: str | None = None
    why: str = ""


@dataclass(frozen=True)
class FitLimit:
    """What makes a "longest N that fits" answer an upper bound: N fits while
    N² × ``bytes_per_n2`` <= ``budget_bytes``, and no longer N does.  ``what``
    names what has to fit ("S alone") and ``where`` the budget ("the L2"), for
    the message that tells a student their N does not fit."""

    budget_bytes: int
    bytes_per_n2: int
    what: str
    where: str

    def bytes_at(self, n: int) -> int:
        """The bytes that have to fit at length ``n``."""
        return n * n * self.bytes_per_n2


@dataclass(frozen=True)
class Question:
    """One checked question.

    ``quantity`` is what the answer is (``bytes``, ``tokens``, ``ratio``,
    ``flops``, ``flops-per-byte``, ``fraction``, or ``choice``); ``answer`` is
    a number in that quantity's base unit, or an option key for a choice.
    ``tolerance`` is relative: a number within it of the answer is right.  It
    is the kind's tolerance (``kind_tolerance``) narrowed where a slip lies
    close (:func:`tutor.quiz.questions.slip_safe_tolerance`); a number rounded
    at its typed digits may still be right within ``kind_tolerance`` when no
    slip rounds to the same digits (:mod:`tutor.quiz.checking`).  ``fit_limit``
    is set when the answer is the longest N that fits a budget: then every
    number above the answer is wrong, whatever the tolerance.
    """

    id: str
    kind: QuestionKind
    title: str
    text: str
    quantity: QuestionQuantity
    answer: float | str
    tolerance: float
    explanation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    slips: tuple[Slip, ...] = ()
    options: tuple[Option, ...] = ()
    kind_tolerance: float | None = None  # None: the same as ``tolerance``
    fit_limit: FitLimit | None = None

    @property
    def is_choice(self) -> bool:
        return self.quantity == "choice"

    @property
    def answer_is_upper_bound(self) -> bool:
        """True for a "longest N that fits" question: a number above the answer does not fit."""
        return self.fit_limit is not None

    @property
    def rounding_tolerance(self) -> float:
        """The kind's own tolerance, before any slip narrowed it."""
        return self.tolerance if self.kind_tolerance is None else self.kind_tolerance

    @property
    def answer_text(self) -> str:
        if self.is_choice:
            option = next(o for o in self.options if o.key == self.answer)
            return f"({option.key}) {option.text}"
        return format_quantity(float(self.answer), self.quantity)

    def prompt(self) -> str:
        """The question as a student reads it, options included."""
        lines = [self.text]
        lines += [f"  ({o.key}) {o.text}" for o in self.options]
        return "\n".join(lines)

    def to_dict(self, reveal: bool = False) -> dict[str, Any]:
        """JSON-ready; ``reveal`` adds the answer, the explanation and the slips."""
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "text": self.text,
            "quantity": self.quantity,
            "tolerance": self.tolerance,
            "answer_is_upper_bound": self.answer_is_upper_bound,
            "parameters": dict(self.parameters),
        }
        if self.options:
            data["options"] = [{"key": o.key, "text": o.text} for o in self.options]
        if reveal:
            data["answer"] = self.answer
            data["answer_text"] = self.answer_text
            data["explanation"] = self.explanation
            data["slips"] = [{"code": s.code, "value": s.value} for s in self.slips]
        return data


# --- texts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuizTexts:
    """The parsed quiz data file."""

    conventions: str
    messages: Mapping[str, str]
    common_slips: Mapping[str, str]
    kinds: Mapping[str, Mapping[str, Any]]
    choices: Mapping[str, Mapping[str, Any]]


def paragraph(text: str) -> str:
    """``text`` with its line breaks and runs of spaces made single spaces."""
    return " ".join(text.split())


@cache
def load_texts(path: Path | None = None) -> QuizTexts:
    """Read the quiz data file (default: the shipped ``drills/03_flash_math.quiz.toml``)."""
    path = path or content_root() / "drills" / QUIZ_FILE
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return QuizTexts(
        conventions=paragraph(data["conventions"]),
        messages={k: paragraph(v) for k, v in data["messages"].items()},
        common_slips={k: paragraph(v) for k, v in data["common_slips"].items()},
        kinds=data["kinds"],
        choices=data["choices"],
    )
