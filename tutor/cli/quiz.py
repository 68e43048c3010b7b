"""``flashtutor quiz``: drill 03's questions in the plain terminal.

It reads answers from stdin one line at a time, so a session can be scripted
(``printf '3.5 GB\\n42x\\n' | flashtutor quiz``).  ``--list`` prints the
questions instead of asking them (``--json`` for a machine, ``--reveal`` with
the answers), so autograders and tests can check the engine.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

from tutor.cli import EXIT_FAILED, EXIT_OK
from tutor.paths import NoWorkspace, require_workspace
from tutor.quiz import (
    AnswerFeedback,
    GpuBudget,
    Question,
    QuizSession,
    build_questions,
    detect_gpu,
    record_drill_status,
)
from tutor.quiz.questions import DRILL_ID
from tutor.quiz.units import SHORT_EXAMPLES, arithmetic_example, format_bytes
from tutor.state.progress import NOT_SAVED, ProgressStore, not_saved_note, saved_words

WIDTH = 78


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    quiz = subparsers.add_parser(
        "quiz",
        help="drill 03: answer the HBM-traffic questions",
        description="Ask drill 03's questions, check each answer and explain it. "
        "Answers are read from stdin, one per line, and saved in the workspace's progress.",
    )
    quiz.add_argument("--seed", type=int, help="draw other parameters (N, d, dtype, budgets) from this seed")
    quiz.add_argument("--restart", action="store_true", help="ask again the questions answered right before")
    quiz.add_argument("--list", action="store_true", help="print the questions instead of asking them")
    quiz.add_argument("--json", action="store_true", help="with --list: one JSON object")
    quiz.add_argument("--reveal", action="store_true", help="with --list: include the answers and explanations")
    quiz.add_argument("--no-gpu", action="store_true",
                      help="use the stated budgets even when a GPU is present")
    quiz.add_argument("--workspace", type=Path, metavar="DIR",
                      help="the workspace whose progress keeps the answers: DIR or the one above it "
                           "(default: the current workspace)")
    quiz.set_defaults(func=run_quiz_command, parser=quiz)


def run_quiz_command(args: argparse.Namespace) -> int:
    if (args.json or args.reveal) and not args.list:
        args.parser.error("--json and --reveal go with --list")
    gpu = None if args.no_gpu else detect_gpu()
    questions = build_questions(seed=args.seed, gpu=gpu)
    if args.list:
        return _list(questions, args, gpu)
    return _ask(questions, args, gpu)


def _list(questions: tuple[Question, ...], args: argparse.Namespace, gpu: GpuBudget | None) -> int:
    if args.json:
        listing = {
            "drill": "03",
            "seed": args.seed,
            "gpu": gpu.to_dict() if gpu else None,
            "questions": [q.to_dict(reveal=args.reveal) for q in questions],
        }
        print(json.dumps(listing, indent=2, ensure_ascii=False))
        return EXIT_OK
    for question in questions:
        print(question.id)
        print(_wrap(question.prompt(), indent="  "))
        if args.reveal:
            print(_wrap(f"answer: {question.answer_text}", indent="  "))
            print(_wrap(f"why: {question.explanation}", indent="  "))
        print()
    return EXIT_OK


def _ask(questions: tuple[Question, ...], args: argparse.Namespace, gpu: GpuBudget | None) -> int:
    try:  # found as every command finds it; without one the quiz still runs, saving nothing
        store: ProgressStore | None = ProgressStore(require_workspace(args.workspace))
    except NoWorkspace:
        store = None
    session = QuizSession(questions, store, restart=args.restart)
    print(f"Drill 03: HBM traffic, naive vs fused attention. {len(questions)} questions.")
    if gpu is not None:
        print(f"Budget questions use this machine's GPU, {gpu.name}: "
              f"L2 {format_bytes(gpu.l2_bytes)}, memory {format_bytes(gpu.hbm_bytes)}.")
    else:
        reason = "--no-gpu" if args.no_gpu else "no GPU found"
        print(f"Budget questions use stated budgets ({reason}).")
    if session.skipped:
        print(f"{session.skipped} answered right in an earlier sitting are skipped (--restart asks them again).")
    if store is None:
        print(f"No workspace found: {NOT_SAVED} (use --workspace DIR).")
    warned = _warn(store, 0)
    print(intro_line() + "\n")

    while not session.done:
        question = session.current()
        assert question is not None
        print(f"[{session.position}/{len(questions)}] {question.title}")
        print(_wrap(question.prompt()))
        while True:
            try:
                text = input("> ")
            except EOFError:
                record_drill_status(store, session, DRILL_ID)
                print(f"\n\nStopped before the end; {saved_words(store, 'answers so far are saved')}.")
                print(f"Score: {session.score}")
                return EXIT_FAILED
            feedback = session.answer(text)
            warned = _warn(store, warned)  # a write that failed only now says so, once
            print(_render_feedback(feedback))
            note = not_saved_note(store, "sitting")
            for hint in session.newly_unlocked:
                print(f"hint unlocked: {hint.title} (`flashtutor hint {DRILL_ID}`)" + (f" - {note}" if note else ""))
            if feedback.counts and feedback.final:
                break
        print()
    record_drill_status(store, session, DRILL_ID)
    print(f"Score: {session.score}" + ("" if store is None else f"; {saved_words(store, 'your answers are saved')}."))
    return EXIT_OK if session.score.right == session.score.total else EXIT_FAILED


def intro_line() -> str:
    """How to answer, with example numbers that are no question's answer (:data:`tutor.quiz.units.SHORT_EXAMPLES`)."""
    return (f"Type each answer and press Enter; units are fine ({', '.join(SHORT_EXAMPLES)}), "
            f"and so is arithmetic ({arithmetic_example()}).")


def _warn(store: ProgressStore | None, shown: int) -> int:
    """Print the store's warnings not shown yet; returns how many have been shown."""
    warnings = store.warnings if store is not None else []
    for warning in warnings[shown:]:
        print(f"flashtutor: {warning}", file=sys.stderr)
    return len(warnings)


def _render_feedback(feedback: AnswerFeedback) -> str:
    if not feedback.counts:
        return _wrap(feedback.message) + "\n" + "Try again."
    lines = [_wrap(feedback.message)]
    if feedback.slip:
        lines.append(_wrap(f"Likely slip: {feedback.slip}"))
    if feedback.final:
        lines.append(_wrap(f"Why: {feedback.explanation}"))
    return "\n".join(lines)


def _wrap(text: str, indent: str = "") -> str:
    out = []
    for line in text.splitlines():
        option = line.startswith("  (")
        hanging = indent + ("      " if option else "")
        out.append(textwrap.fill(line, WIDTH, initial_indent=indent,
                                 subsequent_indent=hanging, break_on_hyphens=False) if line.strip() else "")
    return "\n".join(out)
