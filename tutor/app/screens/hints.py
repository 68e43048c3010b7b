"""The hints panel: unlocked hints in full, locked ones with what unlocks them."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Markdown

from tutor.catalog import Drill
from tutor.state.hints import HintState


def hints_markdown(drill: Drill, states: Sequence[HintState], attempts: int) -> str:
    """The whole panel as Markdown; a locked hint shows its title and its rule only."""
    opened = sum(s.unlocked for s in states)
    checks = f"{attempts} attempt{'s' if attempts != 1 else ''} so far"
    lines = [f"**{drill.id} {drill.title}** · {opened} of {len(states)} hints unlocked · {checks}", ""]
    for state in states:
        if state.unlocked:
            lines += [f"### {state.number}. {state.hint.title}", "", state.hint.text, ""]
        else:
            lines += [f"### {state.number}. [locked] {state.hint.title}", "",
                      f"*{state.unlock_rule.capitalize()}.*", ""]
    return "\n".join(lines).rstrip() + "\n"


class HintsScreen(ModalScreen[None]):
    """Pushed over the drill view with ``h``; ``escape`` or ``h`` closes it."""

    BINDINGS = [
        Binding("escape,h,q", "dismiss", "Close"),
    ]

    def __init__(self, drill: Drill, states: Sequence[HintState], attempts: int) -> None:
        super().__init__()
        self.drill = drill
        self.states = list(states)
        self.attempts = attempts

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="hints-box") as box:
            box.border_title = "hints"
            yield Markdown(hints_markdown(self.drill, self.states, self.attempts), id="hints")
        yield Footer()

    def update_states(self, states: Sequence[HintState], attempts: int) -> None:
        """A check unlocked a hint while the panel is open."""
        self.states, self.attempts = list(states), attempts
        self.query_one("#hints", Markdown).update(hints_markdown(self.drill, self.states, self.attempts))
