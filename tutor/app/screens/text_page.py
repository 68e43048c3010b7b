"""A read-only page over the current screen: the solution, the help."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown


class TextPage(ModalScreen[None]):
    """Markdown in a bordered, scrollable box; ``escape`` or ``q`` closes it."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def __init__(self, title: str, markdown: str, *, page_id: str = "page") -> None:
        super().__init__(id=page_id)
        self.page_title = title
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page-box") as box:
            box.border_title = self.page_title
            yield Markdown(self.markdown)
        yield Footer()

    def action_scroll(self, lines: int) -> None:
        box = self.query_one("#page-box", VerticalScroll)
        box.scroll_relative(y=lines, animate=False)


def solution_markdown(path: Path, text: str) -> str:
    """A solution file's page: a ``.md`` as it is, a ``.py`` as a fenced block under its name."""
    return text if path.suffix == ".md" else f"`solutions/{path.name}`\n\n```python\n{text}\n```\n"
