"""The math quiz of drill 03: checked questions on attention's HBM traffic (no UI).

Two front ends use it: ``flashtutor quiz`` (:mod:`tutor.cli.quiz`, plain
terminal) and the app's quiz screen.  Importing it imports neither torch nor
Textual.

Typical use::

    from tutor.quiz import QuizSession, build_questions, detect_gpu
    from tutor.state.progress import ProgressStore

    questions = build_questions(seed=None, gpu=detect_gpu())  # detect_gpu imports torch
    session = QuizSession(questions, ProgressStore(workspace), restart=False)
    while not session.done:
        question = session.current()          # Question: .id .title .prompt() .options
        feedback = session.answer(input(question.prompt()))
        # feedback.status: "right" | "wrong" | "invalid" (invalid: not an answer, or too
        # coarse to tell from a slip; the same question again)
        # feedback.message, .relative_error, .explanation, .slip, .slip_codes
    print(session.score)                      # Score: .right .wrong .total .earlier

The pieces:

* :mod:`tutor.quiz.formulas` — the exact arithmetic (naive/fused bytes, the
  1 + N/d ratio, FLOPs, intensity and its d/b limit, budget lengths, causal
  block counts; the backward's 5/2 FLOPs and its reads, a decode step's bytes
  and 2g/b intensity, the KV cache per token and GQA's saving, a sliding
  window's visited blocks) and the conventions behind it;
* :mod:`tutor.quiz.model` — :class:`Question`, its options and slips (and, for a
  "longest N that fits" question, its :class:`FitLimit`), the parsed quiz file;
* :mod:`tutor.quiz.questions` — the generators and :func:`build_questions`
  (headline cases by default, other parameters from a seed); the words come
  from ``drills/03_flash_math.quiz.toml``;
* :mod:`tutor.quiz.units` — :func:`parse_number` reads ``3.5 GB``, ``42x``,
  ``7k``, ``4*16384^2*96 FLOP``..., each reading with its precision;
* :mod:`tutor.quiz.checking` — :func:`check_answer` and :class:`AnswerFeedback`;
* :mod:`tutor.quiz.session` — :class:`QuizSession`, :class:`Score` and
  :func:`record_drill_status` (answers are kept in :class:`tutor.state.progress.ProgressStore`);
* :mod:`tutor.quiz.gpu` — :class:`GpuBudget`, the stated budgets, and
  :func:`detect_gpu`.
"""

from tutor.quiz.checking import AnswerFeedback, check_answer
from tutor.quiz.gpu import STATED_BUDGETS, GpuBudget, budget_from_properties, detect_gpu, gpu_for_checks
from tutor.quiz.model import FitLimit, Option, Question, Slip, load_texts
from tutor.quiz.questions import build_questions
from tutor.quiz.session import QuizSession, Score, record_drill_status
from tutor.quiz.units import AnswerError, parse_number

__all__ = [
    "STATED_BUDGETS",
    "AnswerError",
    "AnswerFeedback",
    "FitLimit",
    "GpuBudget",
    "Option",
    "Question",
    "QuizSession",
    "Score",
    "Slip",
    "budget_from_properties",
    "build_questions",
    "check_answer",
    "detect_gpu",
    "gpu_for_checks",
    "load_texts",
    "parse_number",
    "record_drill_status",
]
