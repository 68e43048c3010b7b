"""QuizSession over the real progress store: recording, resuming, restarting, scoring."""

from __future__ import annotations

import pytest

from tutor.quiz import QuizSession, build_questions
from tutor.state.progress import ProgressStore


def right_answer(question) -> str:
    return question.answer if question.is_choice else repr(question.answer)


def wrong_answer(question) -> str:
    if question.is_choice:
        return next(o.key for o in question.options if o.key != question.answer)
    return repr(question.answer * 3)


@pytest.fixture
def questions():
    return build_questions()


def test_a_sitting_records_every_real_answer_and_scores_it(tmp_path, questions):
    store = ProgressStore(tmp_path)
    session = QuizSession(questions, store)
    assert session.current() == questions[0] and session.position == 1
    invalid = session.answer("abc")
    assert invalid.status == "invalid"
    assert session.current() == questions[0] and store.quiz_answers() == {}  # nothing recorded, ask again
    for index, question in enumerate(questions):
        if index in (1, 7):  # wrong twice: the first try does not show the answer, the second does
            first = session.answer(wrong_answer(question))
            assert first.status == "wrong" and not first.final and not first.explanation
            assert question.answer_text not in first.message and session.current() == question
        text = wrong_answer(question) if index in (1, 7) else right_answer(question)
        feedback = session.answer(text)
        assert feedback.question_id == question.id and feedback.final
        assert feedback.status == ("wrong" if index in (1, 7) else "right")
    assert session.done and session.current() is None
    assert session.score.right == len(questions) - 2 and session.score.wrong == 2
    assert session.score.total == len(questions) and session.score.earlier == 0
    answers = ProgressStore(tmp_path).quiz_answers()  # a fresh store reads the file
    assert set(answers) == {q.id for q in questions}
    assert [answers[q.id]["correct"] for q in questions] == [i not in (1, 7) for i in range(len(questions))]
    assert answers[questions[0].id]["answer"] == right_answer(questions[0])
    assert [a["attempts"] for a in answers.values()] == [2 if i in (1, 7) else 1 for i in range(len(questions))]
    assert ProgressStore(tmp_path).drill("03").attempts == len(questions) + 2  # one count everywhere
    with pytest.raises(RuntimeError):
        session.answer("1")


def test_a_new_sitting_resumes_where_the_last_stopped(tmp_path, questions):
    first = QuizSession(questions, ProgressStore(tmp_path))
    first.answer(right_answer(questions[0]))
    first.answer(wrong_answer(questions[1]))
    first.answer(wrong_answer(questions[1]))  # the second try, wrong too: the answer is shown, next question
    first.answer(right_answer(questions[2]))

    second = QuizSession(questions, ProgressStore(tmp_path))
    assert second.skipped == 2
    assert second.current() == questions[1]  # answered wrong: asked again
    assert second.position == 3  # two of the questions before it are done
    assert second.score.right == 2 and second.score.earlier == 2
    second.answer(right_answer(questions[1]))
    assert ProgressStore(tmp_path).quiz_answers()[questions[1].id]["attempts"] == 3
    assert second.current() == questions[3]
    assert "2 of them from an earlier sitting" in str(second.score)


def test_restart_asks_everything_again(tmp_path, questions):
    session = QuizSession(questions, ProgressStore(tmp_path))
    session.answer(right_answer(questions[0]))
    again = QuizSession(questions, ProgressStore(tmp_path), restart=True)
    assert again.skipped == 0 and again.current() == questions[0]
    assert again.answered_before == {questions[0].id}


def test_answers_to_other_question_sets_do_not_count(tmp_path, questions):
    seeded = build_questions(seed=11)
    session = QuizSession(seeded, ProgressStore(tmp_path))
    session.answer(right_answer(seeded[0]))
    assert seeded[0].id not in {q.id for q in questions}
    default = QuizSession(questions, ProgressStore(tmp_path))
    assert default.skipped == 0 and default.current() == questions[0]


def test_slip_codes_collect_over_a_sitting(questions):
    session = QuizSession(questions, store=None)  # a session without a store keeps nothing
    naive_16k = questions[2]
    while session.current() != naive_16k:
        session.answer(right_answer(session.current()))
    session.answer("1,082,130,432 bytes")  # elements, not bytes
    assert "forgot-dtype-bytes" in session.slip_codes


def test_a_slip_unlocks_the_paper_drills_hint_that_names_it(tmp_path):
    """Quiz answers count towards drill 03's hints as checks do for a kernel drill."""
    from tutor.catalog import get_drill
    from tutor.quiz import QuizSession, build_questions
    from tutor.state.hints import earned_unlocks
    from tutor.state.progress import ProgressStore

    store = ProgressStore(tmp_path)
    session = QuizSession(build_questions(), store)
    question = session.current()
    slip = next(s for s in question.slips if s.code in {c for h in get_drill("03").hints for c in h.unlock_codes})
    feedback = session.answer(str(slip.value))
    assert slip.code in feedback.slip_codes
    opened = {h.title for h in session.newly_unlocked}
    expected = {get_drill("03").hints[i].title for i in earned_unlocks(get_drill("03"), 1, feedback.slip_codes)}
    assert opened == expected and opened
    assert set(ProgressStore(tmp_path).unlocked_hints("03")) >= {
        i for i, h in enumerate(get_drill("03").hints) if h.title in opened
    }
