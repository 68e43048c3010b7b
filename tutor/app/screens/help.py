"""The help page: the keys of every screen, from their bindings (one source of truth)."""

from __future__ import annotations

from textual.binding import Binding

from tutor.app.screens.drill_list import DrillListScreen
from tutor.app.screens.drill_view import DrillScreen
from tutor.app.screens.quiz import QuizScreen
from tutor.app.screens.text_page import TextPage

KEY_NAMES = {"question_mark": "?", "slash": "/", "escape": "esc"}  # Textual key names, as printed on keys


def help_markdown() -> str:
    """The keys of every screen, from their bindings (one source of truth)."""
    sections = [
        ("Drill list", DrillListScreen.BINDINGS, ["up/down, j/k: move"]),
        ("Drill view", DrillScreen.BINDINGS, []),
        ("Quiz", QuizScreen.BINDINGS, ["enter: check the answer; after the feedback, the next question"]),
    ]
    lines = [
        "Save a drill file in any editor: the tutor checks it at once and the drill view shows the result.",
        "",
    ]
    for title, bindings, extra in sections:
        lines += [f"## {title}", "", "| key | does |", "| --- | --- |"]
        for text in extra:
            key, does = text.split(": ", 1)
            lines.append(f"| {key} | {does} |")
        for binding in bindings:
            if not isinstance(binding, Binding):  # every screen lists Binding objects
                continue
            keys = ", ".join(KEY_NAMES.get(key, key) for key in binding.key.split(","))
            lines.append(f"| {keys} | {binding.tooltip or binding.description} |")
        lines.append("")
    lines += [
        "## Everywhere",
        "",
        "| key | does |",
        "| --- | --- |",
        "| ctrl+q | quit |",
        "| escape | close a panel / back to the list |",
    ]
    return "\n".join(lines) + "\n"


class HelpPage(TextPage):
    """The keys, over the current screen (``?``)."""

    def __init__(self) -> None:
        super().__init__("keys", help_markdown(), page_id="help")
