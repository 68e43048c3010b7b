"""One sitting of the quiz: which question is next, the score, and progress.

A :class:`QuizSession` walks a list of questions.  ``answer(text)`` checks the
text against ``current()``: an invalid answer leaves the question in place (ask
again); a right or wrong one is recorded in the store; a right one, or a second
wrong one, moves on (a first wrong one gets a second try, the answer not shown).  Questions
answered right in an earlier sitting are skipped unless ``restart=True``, so a
quiz resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tutor.catalog import Hint, get_drill
from tutor.quiz.checking import AnswerFeedback, check_answer
from tutor.quiz.model import DRILL_ID, Question, QuizTexts, load_texts
from tutor.state.progress import FAILING, IN_PROGRESS, NOT_STARTED, PASSED, ProgressStore


@dataclass(frozen=True)
class Score:
    """``right`` of ``total``; ``earlier`` of the right ones were answered in an earlier sitting."""

    right: int
    wrong: int
    total: int
    earlier: int = 0

    @property
    def answered(self) -> int:
        return self.right + self.wrong

    def __str__(self) -> str:
        text = f"{self.right}/{self.total} right"
        if self.earlier:
            text += f" ({self.earlier} of them from an earlier sitting)"
        return text


class QuizSession:
    """Ask ``questions`` in order, recording answers in ``store`` (None: keep nothing)."""

    def __init__(
        self,
        questions: Sequence[Question],
        store: ProgressStore | None = None,
        *,
        restart: bool = False,
        texts: QuizTexts | None = None,
    ) -> None:
        self.questions: tuple[Question, ...] = tuple(questions)
        self.store = store
        self.texts = texts or load_texts()
        earlier = store.quiz_answers() if store is not None else {}
        ids = {q.id for q in self.questions}
        self.answered_before: frozenset[str] = frozenset(
            qid for qid, record in earlier.items() if record.get("correct") and qid in ids
        )
        skip = frozenset() if restart else self.answered_before
        self._pending: list[Question] = [q for q in self.questions if q.id not in skip]
        self._skipped = len(self.questions) - len(self._pending)
        self.history: list[AnswerFeedback] = []  # the final answer to each question asked
        self.answers: list[AnswerFeedback] = []  # every counted answer, first tries included
        self.newly_unlocked: list[Hint] = []  # hints drill 03 earned with the latest answer
        self._wrong_once: set[str] = set()  # questions answered wrong once: the next answer is the last

    def current(self) -> Question | None:
        """The question to ask now; None when the quiz is done."""
        return self._pending[0] if self._pending else None

    @property
    def done(self) -> bool:
        return not self._pending

    @property
    def remaining(self) -> int:
        return len(self._pending)

    @property
    def skipped(self) -> int:
        """Questions skipped because they were answered right before (0 with ``restart``)."""
        return self._skipped

    @property
    def position(self) -> int:
        """1-based number of the current question among all the questions."""
        return len(self.questions) - len(self._pending) + 1

    @property
    def score(self) -> Score:
        right = sum(feedback.right for feedback in self.history)
        return Score(
            right=right + self._skipped,
            wrong=len(self.history) - right,
            total=len(self.questions),
            earlier=self._skipped,
        )

    @property
    def tried(self) -> bool:
        """Some answer was given in this sitting (a first wrong one included)."""
        return bool(self.answers)

    @property
    def slip_codes(self) -> frozenset[str]:
        """Every slip code this sitting's answers matched (for unlocking the drill's hints)."""
        return frozenset(code for feedback in self.answers for code in feedback.slip_codes)

    def answer(self, text: str) -> AnswerFeedback:
        """Check ``text`` against the current question.

        ``invalid``: nothing changes, ask again.  ``right``/``wrong``: the answer
        is stored (an attempt).  A first wrong answer does not show the answer
        (``feedback.final`` is False) and the same question is asked once more;
        a right answer, or a second wrong one, shows it and moves on.
        """
        question = self.current()
        if question is None:
            raise RuntimeError("the quiz is done: there is no question to answer")
        feedback = check_answer(question, text, self.texts, reveal=question.id in self._wrong_once)
        self.newly_unlocked = []
        if not feedback.counts:
            return feedback
        if self.store is not None:
            unlocked = self.store.record_quiz_answer(
                question.id, text.strip(), feedback.right, get_drill(DRILL_ID), feedback.slip_codes
            )
            self.newly_unlocked = [get_drill(DRILL_ID).hints[i] for i in unlocked]
        self.answers.append(feedback)
        if not feedback.final:
            self._wrong_once.add(question.id)
            return feedback
        self.history.append(feedback)
        self._pending.pop(0)
        return feedback


def record_drill_status(store: ProgressStore | None, session: QuizSession, drill_id: str) -> None:
    """The paper drill's status after an answer or a sitting, the one rule every front
    end applies: in progress until the quiz is finished; then passed when every
    question of the set is right, failing when some are wrong (a pass once recorded
    is kept: ``solved_before``).  With no ``store`` nothing is recorded."""
    if store is None or not session.tried:
        return
    if not session.done:
        if store.status(drill_id) == NOT_STARTED:
            store.set_status(drill_id, IN_PROGRESS)
    elif session.score.right == session.score.total:
        store.set_status(drill_id, PASSED)
    else:
        store.set_status(drill_id, FAILING)
