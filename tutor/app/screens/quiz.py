"""The quiz of drill 03: one question at a time, checked as it is answered."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static
from textual.worker import Worker

from tutor.app.widgets.status_bar import StatusBar
from tutor.quiz import AnswerFeedback, QuizSession, record_drill_status
from tutor.quiz.questions import DRILL_ID
from tutor.quiz.units import SHORT_EXAMPLES
from tutor.state.progress import saved_words

PLACEHOLDER = f"your answer: {', '.join(SHORT_EXAMPLES)}, b …  (Enter)"
"""The answer box's hint: example numbers that are no question's answer, and an option letter."""
MARKS = {"right": "✔ right", "wrong": "✘ wrong", "invalid": "? not an answer"}
STYLES = {"right": "bold green", "wrong": "bold red", "invalid": "bold yellow"}


def feedback_text(feedback: AnswerFeedback) -> Text:
    text = Text()
    mark = MARKS[feedback.status] if feedback.final else "✘ not yet (one more try)"
    text.append(mark, style=STYLES[feedback.status])
    error = feedback.relative_error
    if error is not None and abs(error) < 10:
        text.append(f"   relative error {error:+.2%}", style="bold")
    elif error is not None:  # a number far off: its ratio to the answer, at a sane width
        text.append(f"   {1 + error:.3g}x the answer", style="bold")
    text.append("\n" + feedback.message)
    if feedback.slip:
        text.append("\n" + feedback.slip, style="italic")
    if feedback.explanation:
        text.append("\n\nwhy: ", style="bold")
        text.append(feedback.explanation)
    return text


class QuizScreen(Screen[None]):
    """Asks ``session.current()``; Enter checks the answer.  After a right or
    wrong answer the feedback and explanation stay up and the next Enter moves
    to the next question; an invalid answer asks the same question again."""

    BINDINGS = [
        Binding("escape", "app.drill_list", "List", key_display="esc", tooltip="back to the drill list"),
        Binding("f1", "app.help", "Help", tooltip="this help (? would be typed into the answer)"),
        Binding("ctrl+q", "app.quit", "Quit", tooltip="quit (every answer is already saved)"),
    ]

    class Answered(Message):
        """Posted after every counted answer (stored, and the drill's status with it),
        so the app can refresh the drill list."""

        def __init__(self, feedback: AnswerFeedback) -> None:
            super().__init__()
            self.feedback = feedback

    def __init__(self, session: QuizSession) -> None:
        super().__init__()
        self.session = session
        self.reviewing: AnswerFeedback | None = None  # the answer whose feedback is up
        self._checking: Worker[None] | None = None  # the answer being checked and stored

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusBar()
        yield Static(id="quiz-progress")
        with VerticalScroll(id="quiz-body"):
            yield Static(id="question")
            yield Static(id="feedback")
        yield Input(placeholder=PLACEHOLDER, id="answer")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = "03 quiz"
        self.sub_title = "HBM traffic: naive vs fused attention"
        self._show_question()
        self.query_one("#answer", Input).focus()

    # -- display --------------------------------------------------------------------
    def _show_progress(self) -> None:
        score = self.session.score
        line = f"{score.answered} of {score.total} answered   ·   {score}"
        self.query_one("#quiz-progress", Static).update(Text(line, style="bold"))

    def _show_question(self) -> None:
        self._show_progress()
        question = self.session.current()
        feedback = self.query_one("#feedback", Static)
        feedback.update("")
        feedback.display = False
        shown = self.query_one("#question", Static)
        if question is None:
            done = Text("Quiz done.  ", style="bold")
            kept = saved_words(self.session.store, "your answers are saved in the workspace's progress")
            done.append(f"Score: {self.session.score}.  {kept[0].upper()}{kept[1:]}.")
            shown.update(done)
            self.query_one("#answer", Input).display = False
            return
        text = Text(question.title + "\n", style="bold")
        text.append(question.prompt())
        shown.update(text)

    def _show_feedback(self, feedback: AnswerFeedback) -> None:
        shown = self.query_one("#feedback", Static)
        shown.display = True
        text = feedback_text(feedback)
        if feedback.counts and not feedback.final:
            text.append("\n\n")
            text.append("Type another answer and press Enter.", style="dim")
        elif feedback.counts:
            text.append("\n\n")
            text.append("Enter: next question" if not self.session.done else "Enter: see the score", style="dim")
        shown.update(text)
        self.query_one("#quiz-body", VerticalScroll).scroll_home(animate=False)

    # -- input ----------------------------------------------------------------------
    @on(Input.Submitted, "#answer")
    def _submitted(self, event: Input.Submitted) -> None:
        if self.reviewing is not None:
            # Enter after feedback shows the next question; anything typed stays in the
            # input, so nothing is checked against a question the student has not read
            self.reviewing = None
            self._show_question()
            return
        if self.session.done or (self._checking is not None and not self._checking.is_finished):
            return
        self._checking = self._check(event.value)

    @work(thread=True, group="quiz-answer", exit_on_error=False, name="storing the answer")
    def _check(self, text: str) -> None:
        """Off the UI thread: a counted answer and the drill's status are written to the progress file."""
        feedback = self.session.answer(text)
        if feedback.counts:
            record_drill_status(self.session.store, self.session, DRILL_ID)
        self.app.call_from_thread(self._checked, feedback)

    def _checked(self, feedback: AnswerFeedback) -> None:
        self.query_one("#answer", Input).value = ""
        self._show_progress()
        self._show_feedback(feedback)
        if feedback.counts and feedback.final:
            self.reviewing = feedback
        if feedback.counts:
            self.post_message(self.Answered(feedback))
