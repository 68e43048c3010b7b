"""The drill list: every drill with its status, attempts and best numbers."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from tutor.app.widgets.status_bar import StatusBar
from tutor.catalog import Drill
from tutor.state.progress import FAILING, IN_PROGRESS, NOT_STARTED, PASSED, DrillStatus, DrillSummary, done_count

# Status -> the mark a reader needs no colour for, its words, and a style for those with colour.
STATUS_MARKS: dict[DrillStatus, tuple[str, str, str]] = {
    NOT_STARTED: ("·", "not started", "dim"),
    IN_PROGRESS: ("~", "in progress", "bold yellow"),
    FAILING: ("✘", "failing", "bold red"),
    PASSED: ("✔", "passed", "bold green"),
}


# One line of the list (built in tutor.state.progress from the catalog and the progress file).
DrillRow = DrillSummary


# The best full/causal ratio in the list says how it was obtained (the drill view's
# attempt chart names the same two: "speed-up (timed, GPU)" and "work (counted)").
TIMED_TAG = "timed"  # a speed-up timed on a GPU
COUNTED_TAG = "counted"  # the K/V blocks the full launch visited over the causal launch's
UNDECIDED_TAG = "older record"  # a speed-up from a file that did not say timed or counted


def ratio_words(row: DrillRow) -> str:
    """The best full/causal ratio of a kernel drill with its tag: the timed GPU
    speed-up when there is one, else the counted work ratio; "" when neither."""
    if row.best_speedup is not None:
        return f"{row.best_speedup:.2f}x {UNDECIDED_TAG if row.best_speedup_undecided else TIMED_TAG}"
    if row.best_work_ratio is not None:
        return f"{row.best_work_ratio:.2f}x {COUNTED_TAG}"
    return ""


READING = ("…", "reading progress", "dim")  # the status before the progress file's first read lands


def row_cells(row: DrillRow, loaded: bool = True) -> tuple[Text, str, Text, str, str]:
    """The list's cells for ``row``; before the progress file was read (``loaded``
    False) a drill with no record yet says so instead of "not started".  The title
    ends in "…" where its column is narrower (:func:`title_width`)."""
    title = Text(row.drill.title, no_wrap=True, overflow="ellipsis")
    if not loaded and row.attempts == 0:
        mark, words, style = READING
        return Text(f"{mark} {words}", style=style), row.drill.id, title, "", ""
    mark, words, style = ("~", "passed, finding open", "bold yellow") if row.finding_open else STATUS_MARKS[row.status]
    status = Text(f"{mark} {words}", style=style)
    if row.solved_before and row.status != PASSED:  # the current file fails; the pass is kept
        status.append(" · solved before", style="green")
    if not row.drill.is_kernel:
        best = row.quiz_score or "quiz"
    else:
        error = "-" if row.best_error is None else f"{row.best_error:.1e}"
        best = f"{error} {ratio_words(row)}".rstrip()
    return status, row.drill.id, title, str(row.attempts), best


COLUMNS = ("status", "id", "drill", "tries", "best")
TITLE = COLUMNS.index("drill")
MIN_TITLE_WIDTH = 12  # narrower than this, a title says too little: the table scrolls sideways instead


def title_width(cells: Sequence[Sequence[Text | str]], screen_width: int) -> int:
    """The drill column's width: its titles' full width when the row fits the screen,
    else what the other columns leave (titles then end in "…"), never under
    :data:`MIN_TITLE_WIDTH`.  Each column takes 2 cells of padding, and 2 are kept
    for a vertical scrollbar."""
    def width(cell: Text | str) -> int:
        return cell.cell_len if isinstance(cell, Text) else Text(cell).cell_len

    widest = [max([width(name), *(width(row[i]) for row in cells)]) for i, name in enumerate(COLUMNS)]
    others = sum(w for i, w in enumerate(widest) if i != TITLE)
    room = screen_width - 2 - 2 * len(COLUMNS) - others
    return min(widest[TITLE], max(MIN_TITLE_WIDTH, room))


def progress_text(rows: Sequence[DrillRow], width: int = 20) -> Text:
    done = done_count(rows)
    total = len(rows) or 1
    filled = round(width * done / total)
    text = Text()
    text.append("progress  ", style="bold")
    text.append("█" * filled, style="green")
    text.append("░" * (width - filled), style="dim")
    text.append(f"  {done}/{len(rows)} drills passed")
    return text


class DrillTable(DataTable[Text | str]):
    """A DataTable with the list conventions of rustlings and less: j/k move too."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
    ]


class DrillListScreen(Screen[None]):
    """Lists the drills; Enter opens one, ``/`` filters by id or title."""

    BINDINGS = [
        Binding("enter", "open", "Open", tooltip="open the drill (03 opens the quiz)"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="filter the list by id or title"),
        Binding("escape", "clear_filter", "Clear filter", show=False, key_display="esc",
                tooltip="clear the filter"),
        Binding("m", "app.quiz", "Quiz", tooltip="the math quiz of drill 03"),
        Binding("question_mark", "app.help", "Help", key_display="?", tooltip="this help"),
        Binding("q", "app.quit", "Quit", tooltip="quit (progress is saved after every check)"),
    ]

    class OpenDrill(Message):
        def __init__(self, drill: Drill) -> None:
            super().__init__()
            self.drill = drill

    def __init__(self, rows: Sequence[DrillRow], loaded: bool = True) -> None:
        """``loaded``: the rows come from the progress file (False: it is still being read)."""
        super().__init__()
        self.rows: list[DrillRow] = list(rows)
        self.loaded = loaded
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield Header()
        yield StatusBar()
        yield Input(placeholder="filter: id or words of the title (Enter: back to the list)", id="filter")
        yield DrillTable(id="drills", cursor_type="row", zebra_stripes=False)
        yield Static(id="progress")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.title = "flashtutor"
        self.sub_title = "drills"
        self.query_one("#filter", Input).display = False
        self._fill()
        self.query_one(DrillTable).focus()

    # -- data --------------------------------------------------------------------------
    def update_rows(self, rows: Sequence[DrillRow], loaded: bool = True) -> None:
        """New statuses from the app (after the progress file was read, a check, a reset
        or a quiz answer)."""
        self.rows = list(rows)
        self.loaded = loaded
        self._fill()

    def on_resize(self) -> None:
        self._fill()

    def _visible(self) -> list[DrillRow]:
        words = self.filter_text.lower().split()
        return [r for r in self.rows if all(w in f"{r.drill.id} {r.drill.title} {r.drill.slug}".lower() for w in words)]

    def _fill(self) -> None:
        table = self.query_one(DrillTable)
        current = self.selected_drill()
        rows = self._visible()
        cells = [row_cells(row, self.loaded) for row in rows]
        fitted = title_width(cells, self.size.width or self.app.size.width)
        table.clear(columns=True)  # columns laid out anew: each as wide as its cells now, the titles fitted
        for name in COLUMNS:
            table.add_column(name, key=name, width=fitted if name == "drill" else None)
        for row, row_cells_ in zip(rows, cells, strict=True):
            table.add_row(*row_cells_, key=row.drill.id)
        if current is not None and current.id in table.rows:
            table.move_cursor(row=table.get_row_index(current.id))
        progress = progress_text(self.rows) if self.loaded else Text("reading .flashtutor/progress.json …",
                                                                     style="dim")
        self.query_one("#progress", Static).update(progress)

    def selected_drill(self) -> Drill | None:
        table = self.query_one(DrillTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((r.drill for r in self.rows if r.drill.id == key), None)

    # -- keys --------------------------------------------------------------------------
    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        drill = self.selected_drill()
        if drill is not None:
            self.post_message(self.OpenDrill(drill))

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.display = True
        field.focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        field.display = False
        self.query_one(DrillTable).focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self._fill()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.display = False
        self.query_one(DrillTable).focus()
